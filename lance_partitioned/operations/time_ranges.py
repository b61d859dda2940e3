"""Range predicates on dates and timestamps, seen in the calendar time transforms use.

Time transforms read a zoned timestamp in its own zone (FORMAT.md §4), so pruning
moves a range on the column to a range on its **wall clock** first:

- ``ts >= L`` becomes ``wall >= min_wall_from(L)``: the earliest wall-clock time
  any instant from ``L`` on shows (earlier than ``L``'s own when the clocks are
  set back soon after ``L``);
- ``ts < U`` becomes ``wall < sup_wall_before(U)`` and ``ts <= U`` becomes
  ``wall < sup_wall_before(U + 1 µs)``.

On the wall clock the calendar fields are monotonic again, so the usual year and
hierarchy projections apply; a day of 23 or 25 hours needs no special case.
Naive timestamps and dates are their own wall clock.

Month, day and hour are cyclic (1-12, 1-31, 0-23). A range bounded on both
sides that covers less than a full cycle prunes through one of them alone by
the set of values it covers (:func:`covered_values`).
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lance_partitioned.errors import CyclicPartitionWarning
from lance_partitioned.format import zones
from lance_partitioned.format.transforms import TIME_UNITS, TimeTransform

if TYPE_CHECKING:
    from lance_partitioned.format.schema import Schema
    from lance_partitioned.format.spec import PartitionField, PartitionSpec

WALL_TYPE = pa.timestamp("us")
_CYCLE = {"month": 12, "day": 31, "hour": 24}


def is_zoned(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) and t.tz is not None


def lower_wall(op: str, value: Any, src_type: pa.DataType) -> dt.datetime | None:
    """An inclusive lower bound on the wall clock of every value matching ``col op value``
    (op ``>`` or ``>=``); None if ``value`` is not a date or timestamp."""
    if is_zoned(src_type) and isinstance(value, dt.datetime) and value.tzinfo is not None:
        return zones.naive(zones.min_wall_from(src_type.tz, zones.to_us(value)))
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) if value.tzinfo is None else None
    if isinstance(value, dt.date):
        day = value + dt.timedelta(days=1) if op == ">" else value
        return dt.datetime(day.year, day.month, day.day)
    return None


def upper_wall(op: str, value: Any, src_type: pa.DataType) -> dt.datetime | None:
    """An exclusive upper bound on the wall clock of every value matching ``col op value``
    (op ``<`` or ``<=``); None if ``value`` is not a date or timestamp."""
    step = dt.timedelta(0) if op == "<" else dt.timedelta(microseconds=1)
    if is_zoned(src_type) and isinstance(value, dt.datetime) and value.tzinfo is not None:
        t = zones.to_us(value) + step // dt.timedelta(microseconds=1)  # not value + step: fold
        return zones.naive(zones.sup_wall_before(src_type.tz, t))
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) + step if value.tzinfo is None else None
    if isinstance(value, dt.date):
        day = value if op == "<" else value + dt.timedelta(days=1)
        return dt.datetime(day.year, day.month, day.day)
    return None


def calendar_bound(op: str, value: Any, src_type: pa.DataType) -> tuple[str, Any, pa.DataType]:
    """``col op value`` restated on the column's wall clock: ``(op, value, type)``.

    Naive timestamps and dates are returned unchanged; for a zoned column the
    result is ``(">=", wall, timestamp[us])`` or ``("<", wall, timestamp[us])``,
    which the calendar-field projections treat like a naive column's bound."""
    if not is_zoned(src_type):
        return op, value, src_type
    if op in (">", ">="):
        return ">=", lower_wall(op, value, src_type), WALL_TYPE
    return "<", upper_wall(op, value, src_type), WALL_TYPE


def _unit_start(value: dt.datetime, unit: str) -> dt.datetime:
    if unit == "month":
        return dt.datetime(value.year, value.month, 1)
    if unit == "day":
        return dt.datetime(value.year, value.month, value.day)
    return value.replace(minute=0, second=0, microsecond=0)


def _next(value: dt.datetime, unit: str) -> dt.datetime:
    if unit == "month":
        return dt.datetime(value.year + (value.month == 12), value.month % 12 + 1, 1)
    return value + (dt.timedelta(days=1) if unit == "day" else dt.timedelta(hours=1))


def covered_values(unit: str, lo: dt.datetime, hi: dt.datetime) -> list[int] | None:
    """The month/day/hour values of the wall-clock times in ``[lo, hi)``, sorted.

    None when they are every value of the cycle (nothing to prune)."""
    if unit not in _CYCLE or hi <= lo:
        return None if unit not in _CYCLE else []
    values: set[int] = set()
    at = _unit_start(lo, unit)
    for _ in range(_CYCLE[unit] + 1):
        if at >= hi:
            break
        values.add(getattr(at, unit))
        try:
            at = _next(at, unit)
        except (OverflowError, ValueError):  # past year 9999
            break
    else:
        return None
    return None if len(values) >= _CYCLE[unit] else sorted(values)


def unit_instants(
    start: dt.datetime, end: dt.datetime, src_type: pa.DataType
) -> tuple[int, int] | None:
    """Microsecond bounds ``(first, end)`` of the values whose wall clock is in ``[start, end)``.

    ``first`` is the least such value and every such value is ``< end``. For a
    zoned column these are instants (a calendar day of 23 or 25 hours, an hour
    that happens twice); otherwise the wall clock itself."""
    if is_zoned(src_type):
        return zones.instants_showing(src_type.tz, zones.to_us(start), zones.to_us(end))
    return zones.to_us(start), zones.to_us(end)


def resolution_us(t: pa.DataType) -> int:
    """The step between consecutive timestamps of type ``t`` in microseconds (0 for ns)."""
    return {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0}[t.unit]


def cyclic_fields(spec: PartitionSpec) -> list[PartitionField]:
    """The month/day/hour fields with no coarser time field on their column in ``spec``."""
    units: dict[int, set[str]] = {}
    for f in spec.fields:
        if isinstance(f.transform, TimeTransform) and len(f.source_ids) == 1:
            units.setdefault(f.source_ids[0], set()).add(f.transform.type)
    return [
        f
        for f in spec.fields
        if isinstance(f.transform, TimeTransform)
        and f.transform.type != "year"
        and not units[f.source_ids[0]] & set(TIME_UNITS[: TIME_UNITS.index(f.transform.type)])
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
        unit = f.transform.type
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
