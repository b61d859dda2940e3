"""Spark data source filters → our filter AST, accepting only exact translations.

Spark does not re-check a filter the source accepts, so a filter is accepted only
when Lance evaluates our translation with exactly Spark's semantics on every row,
NULLs included. Everything else is handed back to Spark (which then filters the
rows itself), so rejecting is always safe and accepting is a promise.

Accepted (on a top-level column of a type Spark holds as it is, ``_is_sparks_own_type``):

- ``EqualTo``, ``GreaterThan(OrEqual)``, ``LessThan(OrEqual)``, ``In`` with a
  non-NULL literal: SQL comparison, where NULL never matches, as in Spark;
- ``EqualNullSafe(c, v)``: ``c IS NULL`` for a NULL ``v``, else ``c = v AND c IS
  NOT NULL``, which is never NULL, like ``<=>`` (so that ``NOT`` also agrees);
- ``IsNull`` / ``IsNotNull`` on any top-level column;
- ``StringStartsWith(c, p)`` on strings: ``c LIKE '<p escaped>%'`` (Lance honours
  ``\\`` escapes; checked by the tests with ``%``, ``_`` and ``\\`` in ``p``);
- ``Not(f)`` of an accepted ``f``: SQL's three-valued NOT matches Spark's.

Rejected, on purpose:

- nested column paths, and columns whose Arrow type is not the one Spark holds
  (unsigned ints, float16, date64, non-microsecond timestamps, time, durations,
  dictionaries, nested types): the literal would be compared after an implicit
  conversion whose rules differ between the engines;
- float/double ranges and comparisons with 0.0, -0.0 or NaN: Spark treats
  ``-0.0 = 0.0`` and every NaN as equal and largest, whereas Arrow's kernels use
  IEEE total order (``-0.0 < 0.0``, a negative NaN sorts first). Equality with a
  finite non-zero literal agrees in both, so only that is accepted;
- ``StringEndsWith`` / ``StringContains``: exact too, but they never prune a
  partition and Spark evaluates them just as fast, so nothing is gained;
- an empty ``In`` list and ``In`` lists holding NULL, where the three-valued
  result is easy to get subtly wrong.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import datasource as sds

from lance_partitioned.format.expressions import (
    Compare,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Ref,
    and_all,
    distinct_from,
)
from lance_partitioned.format.filters.render import escape_like, render_literal
from lance_partitioned.format.types import TypeFamily, family_of, is_literal_of, is_text

_COMPARE_OPS: dict[type, str] = {
    sds.EqualTo: "=",
    sds.GreaterThan: ">",
    sds.GreaterThanOrEqual: ">=",
    sds.LessThan: "<",
    sds.LessThanOrEqual: "<=",
}


# The Arrow types Spark holds as they are: comparing a Spark literal with a column
# of one of these compares exactly as Spark does. On any other layout (unsigned,
# float16, date64, views, fixed-size binary, non-microsecond timestamps) the
# literal would be compared after an implicit conversion whose rules differ
# between the engines.
_SPARKS_PLAIN_TYPES = (
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.date32(),
)


def _is_sparks_own_type(t: pa.DataType) -> bool:
    """Whether Spark holds column type ``t`` as it is (any decimal128, microsecond timestamps
    naive or zoned, and ``_SPARKS_PLAIN_TYPES``)."""
    return (
        any(t.equals(plain) for plain in _SPARKS_PLAIN_TYPES)
        or pa.types.is_decimal128(t)
        or (pa.types.is_timestamp(t) and t.unit == "us")
    )


def _exact_literal(value: Any, t: pa.DataType) -> bool:
    """Whether ``value`` is a literal of the column's own family that we render exactly.

    Floats must also be finite and non-zero: Spark treats -0.0 = 0.0 and every NaN
    as equal, Arrow's kernels do not. TimestampType literals arrive as aware
    datetimes (instants), TIMESTAMP_NTZ ones as naive, like the column's zone.
    """
    if not is_literal_of(value, t):
        return False
    if isinstance(value, float) and not (math.isfinite(value) and value != 0.0):
        return False
    if isinstance(value, dt.date) and _before_gregorian_cutover(value):
        return False
    try:
        render_literal(value)
    except ValueError:
        return False
    return True


# The first day of the Gregorian calendar, and one more for any zone's offset.
_GREGORIAN_SAFE = dt.date(1582, 10, 16)


def _before_gregorian_cutover(value: dt.date) -> bool:
    """Whether a date or timestamp literal falls before the Gregorian calendar.

    PySpark hands a data source such literals through Spark's old hybrid
    (Julian) calendar, shifted: ``DATE'1582-10-10'`` arrives as 1582-10-15 and
    ``TIMESTAMP'1582-10-10 12:00:00'`` as 1582-10-15 12:00 UTC, so ``=`` lost its
    row and ``<`` gained others. Such filters stay with Spark.
    """
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        value = value.date()
    return value < _GREGORIAN_SAFE


@dataclass(frozen=True)
class Translation:
    """The AND of the accepted filters, and the filters Spark must still evaluate."""

    expr: Expr | None
    accepted: list[sds.Filter]
    rejected: list[sds.Filter]


class FilterTranslator:
    """Translates Spark filters against the namespace columns visible to Spark."""

    def __init__(self, schema: pa.Schema):
        self.types = {f.name: f.type for f in schema}

    def _column(self, attribute: Sequence[str]) -> tuple[str, pa.DataType] | None:
        if len(attribute) != 1 or attribute[0] not in self.types:
            return None
        return attribute[0], self.types[attribute[0]]

    def translate_one(self, f: sds.Filter) -> Expr | None:
        """Our exact equivalent of ``f``, or None to leave ``f`` to Spark."""
        if isinstance(f, sds.Not):
            child = self.translate_one(f.child)
            return None if child is None else Not(child)
        if isinstance(f, (sds.IsNull, sds.IsNotNull)):
            col = self._column(f.attribute)
            return (
                None if col is None else IsNull(Ref(col[0]), negated=isinstance(f, sds.IsNotNull))
            )
        col = self._column(getattr(f, "attribute", ()))
        if col is None:
            return None
        name, t = col
        if not _is_sparks_own_type(t):
            return None
        ref = Ref(name)
        if isinstance(f, sds.EqualNullSafe):
            if f.value is not None and not _exact_literal(f.value, t):
                return None
            return distinct_from(ref, f.value, distinct=False)
        op = _COMPARE_OPS.get(type(f))
        if op is not None:
            if op != "=" and family_of(t) is TypeFamily.FLOAT:
                return None  # Spark orders -0.0 and NaN unlike Arrow's kernels
            if not _exact_literal(f.value, t):
                return None
            return Compare(op, ref, Literal(f.value))
        if isinstance(f, sds.In):
            values = list(f.value)
            if not values or not all(_exact_literal(v, t) for v in values):
                return None
            return In(ref, tuple(Literal(v) for v in values))
        if isinstance(f, sds.StringStartsWith):
            if not is_text(t) or not isinstance(f.value, str):
                return None
            return Like(ref, escape_like(f.value) + "%")
        return None

    def translate(self, filters: Sequence[sds.Filter]) -> Translation:
        accepted, rejected, exprs = [], [], []
        for f in filters:
            e = self.translate_one(f)
            if e is None:
                rejected.append(f)
            else:
                accepted.append(f)
                exprs.append(e)
        return Translation(and_all(exprs) if exprs else None, accepted, rejected)
