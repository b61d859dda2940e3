"""The calendar hierarchy across the time fields of one spec.

Seed 000's month, day and hour are calendar fields (1-12, 1-31, 0-23): on its
own such a field wraps around, and only together with the coarser fields of the
same column, ``year → month → day → hour`` without a gap, does it name one span
of time. This module holds what needs several fields at once: the chain of a
column's calendar fields (``hierarchy_chain``), what a partition's chain of
values guarantees (``hierarchy_implies``, for residual filters), and the
warning about cyclic fields without a coarser one. Which fields are calendar
fields, and of which unit, the transforms say (``Transform.calendar_unit``); the
wall-clock arithmetic is ``format.calendar``.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_partitioned.errors import CyclicPartitionWarning
from lance_partitioned.format.calendar import TIME_UNITS, interval_satisfies, unit_interval
from lance_partitioned.format.expressions import Compare, Expr

if TYPE_CHECKING:
    from lance_partitioned.format.schema import Schema
    from lance_partitioned.format.spec import PartitionField, PartitionSpec


def hierarchy_chain(fields: list[PartitionField]) -> list[PartitionField]:
    """The fields of ``year → month → day → hour`` among ``fields`` (one source column),
    from year down without a gap; empty unless at least two."""
    units = {f.function.calendar_unit: f for f in fields if f.function.calendar_unit}
    chain: list[PartitionField] = []
    for u in TIME_UNITS:
        if u not in units:
            break
        chain.append(units[u])
    return chain if len(chain) >= 2 else []


def hierarchy_may_imply(p: Expr, fields: list[PartitionField]) -> bool:
    """False when ``hierarchy_implies(p, fields, values, t)`` is False for every ``values``
    and type: only a range with a non-NULL bound, on a column with a ``year`` field,
    can be guaranteed by the span of time the calendar fields name."""
    return (
        isinstance(p, Compare)
        and p.literal.value is not None
        and p.op not in ("=", "!=")
        and any(f.function.calendar_unit == "year" for f in fields)
    )


def hierarchy_implies(
    p: Expr, fields: list[PartitionField], values: dict[str, Any], src_type: pa.DataType
) -> bool:
    """True when the calendar fields among ``fields`` (on the column ``p`` compares, of
    type ``src_type``) with these partition ``values`` guarantee the range ``p`` for
    every row: the span of time they name lies wholly inside it."""
    if not isinstance(p, Compare) or p.literal.value is None:
        return False
    units = {
        f.function.calendar_unit: values[f.field_id] for f in fields if f.function.calendar_unit
    }
    interval = unit_interval(units) if None not in units.values() else None
    if interval is None or p.op in ("=", "!="):
        return False
    start, end = interval
    return interval_satisfies(p.op, p.literal.value, start, end, src_type)


def cyclic_fields(spec: PartitionSpec) -> list[PartitionField]:
    """The month/day/hour fields with no coarser time field on their column in ``spec``."""
    units: dict[int, set[str]] = {}
    for f in spec.fields:
        if f.function.calendar_unit and len(f.source_ids) == 1:
            units.setdefault(f.source_ids[0], set()).add(f.function.calendar_unit)
    return [
        f
        for f in spec.fields
        if (unit := f.function.calendar_unit)
        and not f.function.preserves_order
        and not units[f.source_ids[0]] & set(TIME_UNITS[: TIME_UNITS.index(unit)])
    ]


def _caller_stacklevel() -> int:
    """The stacklevel of the first frame outside this package (the user's call)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


_REPEATS = {"month": "year", "day": "month", "hour": "day"}


def warn_cyclic_fields(spec: PartitionSpec, schema: Schema) -> None:
    """Warn (CyclicPartitionWarning) about month/day/hour fields without a coarser field."""
    for f in cyclic_fields(spec):
        unit = f.function.calendar_unit
        col = schema.field_by_id(f.source_ids[0]).name if schema.has_id(f.source_ids[0]) else "?"
        warnings.warn(
            f"partition field {f.field_id!r} = {unit}({col}) has no coarser time field on "
            f"column {col!r}: seed 000's {unit} is date_part('{unit}', {col}), which repeats "
            f"every {_REPEATS[unit]}, so a range on {col} prunes through it only when the "
            f"range spans less than a {_REPEATS[unit]}; add year({col}) to the spec to prune "
            "every range",
            CyclicPartitionWarning,
            stacklevel=_caller_stacklevel(),
        )
