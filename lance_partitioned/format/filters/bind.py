"""Binding a filter to a namespace schema: columns to field ids, literals to column types.

``bind`` is the one step between parsing a filter and using it. It checks that
every column exists, gives every column reference its namespace field id
(``Ref.field_id``: pruning matches partition fields by source field id), and
converts each literal to its column's type, exactly or not at all.

Literal rules (FORMAT.md §7 "Literals"):

- a literal converts to the column type only when the conversion is exact;
  an inexact one (``1.5`` against an int64 column) leaves the predicate
  unbound: it does not prune and Lance evaluates it as written;
- a literal that cannot be compared with the column at all (``'abc'``
  against an int64 column, ``TRUE`` against a number, a number against a date)
  is refused with a FilterError naming the column and its type, before any
  Lance call. A string literal is parsed as the column's type;
- a timestamp or date literal *without* a UTC offset compared with a column
  that has a time zone is wall-clock time in the column's zone (DataFusion's
  and Lance's reading of ``TIMESTAMP '…'``); ``DATE 'd'`` is midnight of that
  wall clock. A wall-clock time the zone shows twice or never is refused.
  A literal with an offset (or ``Z``, or a zone-aware Python/pyarrow value)
  is an instant.

Calendar fields (``DatePart``: ``year(ts) = 2013``, ``month(ts) IN (1, 2)``) need
a date or timestamp column and are compared with whole numbers: a number that
is not one is left to Lance (``Opaque``), anything else is refused. A ``year``
comparison becomes the range of the column it means (``year(ts) = 2013`` is
``ts >= 2013-01-01 AND ts < 2014-01-01``, for a zoned column the instants its
zone's clocks show then), so it prunes and runs as any range does.

Binding is pure. What only Lance can tell (whether it can plan an ``Opaque``
part) is checked by ``operations.read.filter_check`` after binding.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from lance_partitioned.errors import AmbiguousTimeError, FilterError, SchemaError
from lance_partitioned.format import zones
from lance_partitioned.format.expressions import (
    And,
    Compare,
    DatePart,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Opaque,
    Or,
    Ref,
    balanced,
)
from lance_partitioned.format.filters.literal_text import parse_date, parse_time, parse_timestamp
from lance_partitioned.format.filters.render import render_literal, to_sql
from lance_partitioned.format.filters.visitor import Rewriter, referenced_columns, visit
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.types import is_bytes, is_numeric, is_text

_ARROW_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowNotImplementedError,
    pa.ArrowTypeError,
    OverflowError,
    ValueError,
)


def _literal_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float, decimal.Decimal)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "binary"
    if isinstance(value, (dt.date, dt.datetime)):
        return "temporal"
    if isinstance(value, dt.time):
        return "time"
    return "other"


def _type_kind(t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "boolean"
    if is_numeric(t):
        return "number"
    if is_text(t):
        return "string"
    if is_bytes(t):
        return "binary"
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "temporal"
    if pa.types.is_time(t):
        return "time"
    return "other"


# (literal kind, column kind) pairs that compare by conversion; strings are parsed
_COMPATIBLE = {("number", "string"), ("string", "binary")}


def _refuse(column: str, t: pa.DataType, value: Any, why: str = "") -> FilterError:
    shown = f"'{value}'" if isinstance(value, str) else repr(value)
    if value is True and not why:
        # the parser reads a bare column used as a condition, ``WHERE id``, as ``id = TRUE``
        why = (
            f"{t} is not boolean (a column used alone as a condition is read as "
            f"{column} = TRUE, and a filter must be a boolean condition)"
        )
    return FilterError(
        f"filter compares column {column!r} of type {t} with {shown}"
        + (f": {why}" if why else f", which is not a {t} value")
    )


def _parse_string(value: str, t: pa.DataType) -> Any:
    """A string literal read as a value of the (non-string) column type ``t``."""
    text = value.strip()
    if pa.types.is_date(t):
        try:
            return parse_date(text)
        except ValueError:
            parsed = parse_timestamp(text)
            if parsed.tzinfo is not None or parsed.time() != dt.time(0):
                raise ValueError("not a whole date") from None
            return parsed.date()
    if pa.types.is_timestamp(t):
        return parse_timestamp(text)
    if pa.types.is_time(t):
        return parse_time(text)
    if is_bytes(t):
        return value.encode()
    if pa.types.is_boolean(t):
        if text.lower() not in ("true", "false"):
            raise ValueError("expected true or false")
        return text.lower() == "true"
    # a number; whether it fits the column exactly is decided like any number literal
    try:
        return int(text)
    except ValueError:
        pass
    number = decimal.Decimal(text)  # raises decimal.InvalidOperation (a ValueError) if not a number
    return number if number.is_finite() else float(text)


def _in_zone(value: dt.datetime, tz: str, column: str, t: pa.DataType) -> dt.datetime:
    """A naive wall-clock ``value`` as the instant it names in ``tz``."""
    try:
        return zones.instant(zones.localize(tz, zones.to_us(value)))
    except zones.AmbiguousTimeError as exc:
        raise FilterError(f"filter on column {column!r} ({t}): {exc}") from None


def convert_literal(value: Any, target: pa.DataType, column: str) -> tuple[bool, Any]:
    """Convert a literal to ``target`` exactly: ``(True, converted)``.

    ``(False, literal)`` when that cannot be exact: the predicate stays unbound,
    with ``literal`` (a string already parsed as the column's type) to render.
    Raises FilterError when the literal cannot be compared with the column at all.
    """
    if value is None:
        return False, None
    lit_kind, col_kind = _literal_kind(value), _type_kind(target)
    if lit_kind == "string" and col_kind not in ("string", "other"):
        try:
            value = _parse_string(value, target)
        except (ValueError, ArithmeticError) as exc:
            raise _refuse(column, target, value) from exc
    elif (
        lit_kind != col_kind
        and "other" not in (lit_kind, col_kind)
        and (lit_kind, col_kind) not in _COMPATIBLE
    ):
        raise _refuse(column, target, value)
    if pa.types.is_timestamp(target) and isinstance(value, dt.date):
        if not isinstance(value, dt.datetime):
            value = dt.datetime(value.year, value.month, value.day)
        if value.tzinfo is not None and target.tz is None:
            return False, value  # an instant against a naive column: no exact conversion
        if value.tzinfo is None and target.tz is not None:
            value = _in_zone(value, target.tz, column, target)
    if isinstance(value, dt.datetime) and pa.types.is_date(target):
        if value.time() != dt.time(0) or value.tzinfo is not None:
            return False, value
        value = value.date()
    if pa.types.is_floating(target) and _literal_kind(value) == "number":
        return _float_literal(value, target)
    if pa.types.is_decimal(target) and isinstance(value, int) and not isinstance(value, bool):
        # Arrow casts int64 to a decimal only when the type holds every int64 (19
        # digits): ``l_quantity < 24`` on decimal(15, 2) would stay unbound, and not
        # prune. As a decimal of its own digits the value is checked, not its type.
        value = decimal.Decimal(value)
    try:
        scalar = pa.scalar(value)
        cast = scalar.cast(target, safe=True)
        back = cast.cast(scalar.type, safe=True)
    except _ARROW_ERRORS:
        return False, value
    if back.as_py() != scalar.as_py():
        return False, value
    out = cast.as_py()
    if isinstance(out, dt.datetime) and out.tzinfo is not None:
        # in UTC: Python compares and adds datetimes of one zone by wall clock, ignoring
        # ``fold``, which is wrong around the hour a zone's clocks are set back
        out = out.astimezone(dt.timezone.utc)
    return True, out


def _nearest_float(value: int | float, dtype: np.dtype) -> Any:
    """The ``dtype`` value nearest ``value`` (an infinity beyond its range). Through
    float64 first: a double rounding still lands on one of ``value``'s two
    neighbours in ``dtype``, which is all the callers need."""
    try:
        wide = float(value)
    except OverflowError:  # an integer beyond float64
        wide = math.inf if value > 0 else -math.inf
    with np.errstate(over="ignore"):
        return dtype.type(wide)


def _float_literal(value: int | float | decimal.Decimal, target: pa.DataType) -> tuple[bool, Any]:
    """``convert_literal`` for a number against a float column: exact, by value.

    A decimal literal (``0.1`` in SQL text) is first read as the nearest float64,
    as Spark and PostgreSQL read it against a double column; an integer or a float
    keeps its exact value. ``(True, v)`` when the column's type holds that value
    exactly, else ``(False, value)`` (``_float_neighbours`` then brackets it).
    Round-tripping through Arrow would not do: float64 0.1 cast to float32 and
    back to a decimal(1, 1) reads 0.1 again, though no float32 equals it.
    """
    if isinstance(value, decimal.Decimal):
        value = float(value)  # correctly rounded; +-inf beyond float64's range
    if isinstance(value, float) and not math.isfinite(value):
        # every float type holds the infinities; Lance compares NaN itself
        return not math.isnan(value), value
    near = _nearest_float(value, np.dtype(target.to_pandas_dtype()))
    if np.isinf(near) or Fraction(float(near)) != Fraction(value):
        return False, value
    return True, float(near)


def _float_neighbours(value: Any, target: pa.DataType) -> tuple[float, float] | None:
    """The adjacent values of float column type ``target`` on either side of a
    finite number ``value`` that no value of the type equals; None otherwise."""
    if not pa.types.is_floating(target) or _literal_kind(value) != "number":
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    dtype = np.dtype(target.to_pandas_dtype())
    near = _nearest_float(value, dtype)
    if np.isinf(near):  # beyond the type's largest finite value
        big = float(np.finfo(dtype).max)
        return (big, math.inf) if near > 0 else (-math.inf, -big)
    if Fraction(float(near)) == Fraction(value):
        return None
    if Fraction(float(near)) < Fraction(value):
        return float(near), float(np.nextafter(near, dtype.type(math.inf)))
    return float(np.nextafter(near, dtype.type(-math.inf))), float(near)


def _between_floats(op: str, ref: Ref, lo: float, hi: float) -> Expr:
    """``ref <op> x`` for an ``x`` strictly between the adjacent column values
    ``lo`` and ``hi``, spelled with those exact values only: every engine, and
    Lance's cast of a literal to the column's type, gives each row the same answer
    (NULL for NULL, as the comparison would)."""
    if op in ("<", "<="):
        return Compare("<=", ref, Literal(lo))
    if op in (">", ">="):
        return Compare(">=", ref, Literal(hi))
    if op == "=":
        return And(Compare(">", ref, Literal(lo)), Compare("<", ref, Literal(hi)))
    return Or(Compare("<=", ref, Literal(lo)), Compare(">=", ref, Literal(hi)))


def _timestamp_bounds(t: pa.DataType) -> tuple[dt.datetime, dt.datetime] | None:
    """The least and greatest values of a ``timestamp[ns]`` column as datetimes
    (1677-09-21 to 2262-04-11, to the microsecond inside); None for other types,
    whose range holds every Python date and datetime."""
    if not (pa.types.is_timestamp(t) and t.unit == "ns"):
        return None
    info = np.iinfo(np.int64)
    lo = pa.scalar(-(-info.min // 1000), pa.timestamp("us", t.tz)).as_py()
    hi = pa.scalar(info.max // 1000, pa.timestamp("us", t.tz)).as_py()
    return lo, hi


def _beyond_timestamps(op: str, ref: Ref, value: Any, t: pa.DataType) -> Expr | None:
    """``ref op value`` for a datetime ``value`` beyond the range of a ``timestamp[ns]``
    column, spelled with the range's end, which Lance can cast: every row gets the
    comparison's answer (NULL for NULL). None when ``value`` is in range. Lance alone
    would wrap the literal around the int64 range and give wrong rows."""
    bounds = _timestamp_bounds(t)
    if bounds is None or not isinstance(value, dt.datetime):
        return None
    lo, hi = bounds
    if (value.tzinfo is None) != (lo.tzinfo is None):
        return None  # an instant against a naive column: Lance compares it as UTC
    if value > hi:
        below = op in ("<", "<=", "!=")
        return Compare("<=" if below else ">", ref, Literal(hi))
    if value < lo:
        above = op in (">", ">=", "!=")
        return Compare(">=" if above else "<", ref, Literal(lo))
    return None


# -- binding a filter ---------------------------------------------------------


def _exact_for(lit: Literal, target: pa.DataType) -> Literal:
    """A literal for Lance to compare with a ``target`` column it cannot be cast to.

    Lance refuses a number an integer or decimal column's type cannot hold
    (``j < 3000000000`` on int32, ``i < 2.5e0``, ``amount > 4.995e0`` on
    decimal(12,2): "could not convert to literal of type ..."), but compares a
    decimal literal with such columns exactly. The column's values are multiples
    of a unit (1, or 10^-scale) within a bound (2^64, or 10^(precision-scale)), so
    a number beyond the bound compares like the bound and one between two
    multiples like the midpoint: the literal is handed over as that short decimal,
    with the same answer for every row. Other literals are left to Lance.
    """
    v = lit.value
    if pa.types.is_integer(target):
        unit, bound = decimal.Decimal(1), decimal.Decimal(2**64)
    elif pa.types.is_decimal(target):
        unit = decimal.Decimal(1).scaleb(-target.scale)
        bound = decimal.Decimal(1).scaleb(target.precision - target.scale)
    else:
        return lit
    if isinstance(v, bool):
        return lit
    if isinstance(v, float):
        if not math.isfinite(v):
            return lit
        v = decimal.Decimal(v)  # the float's exact value
    elif isinstance(v, int):
        v = decimal.Decimal(v)
    elif not (isinstance(v, decimal.Decimal) and v.is_finite()):
        return lit
    v = max(-bound, min(bound, v))
    with decimal.localcontext() as ctx:
        ctx.prec = 80  # exact for every value left after clamping
        whole = (v / unit).to_integral_value(rounding=decimal.ROUND_FLOOR) * unit
        exact = whole if whole == v else whole + unit / 2
    try:
        render_literal(exact)
    except ValueError:  # beyond 38 digits (a decimal(38, 0) column): Lance's own error stands
        return lit
    return Literal(exact)


class _Binder(Rewriter):
    """Bound references and typed literals; a predicate whose literal cannot be
    converted exactly becomes Opaque, rendered with ``_exact_for``'s literal."""

    def __init__(self, schema: Schema):
        self.schema = schema

    def _bound(self, ref: Ref) -> Ref:
        return Ref(ref.name, self.schema.field_id_at(ref.column), ref.path)

    def _type(self, ref: Ref) -> pa.DataType:
        """The type of the column or struct field ``ref`` names; FilterError naming the
        path and the struct's fields when there is none."""
        if not ref.path:
            return self.schema.field(ref.name).type
        try:
            return self.schema.field_at(ref.column).type
        except SchemaError as exc:
            raise FilterError(f"filter references unknown field {ref.dotted!r}: {exc}") from None

    def visit_compare(self, node: Compare) -> Expr:
        name = node.ref.dotted
        t = self._type(node.ref)
        ok, v = convert_literal(node.literal.value, t, name)
        if ok:
            return Compare(node.op, self._bound(node.ref), Literal(v))
        neighbours = _float_neighbours(v, t)
        if neighbours is not None:  # no value of the float column equals v
            return _between_floats(node.op, self._bound(node.ref), *neighbours)
        beyond = _beyond_timestamps(node.op, self._bound(node.ref), v, t)
        if beyond is not None:
            return beyond
        return Opaque(
            to_sql(Compare(node.op, node.ref, _exact_for(Literal(v), t))), (node.ref.name,)
        )

    def visit_in(self, node: In) -> Expr:
        name = node.ref.dotted
        t = self._type(node.ref)
        vals = [convert_literal(lit.value, t, name) for lit in node.values]
        # a number no value of a float column equals, or a time beyond a timestamp[ns]
        # column's range, matches no row: left out
        ref = self._bound(node.ref)
        never = [v for ok, v in vals if not ok and self._never_equal(ref, v, t) is not None]
        vals = [(ok, v) for ok, v in vals if ok or self._never_equal(ref, v, t) is None]
        if not vals:
            return self._never_equal(ref, never[0], t, "!=" if node.negated else "=")
        if all(ok for ok, _ in vals):
            return In(self._bound(node.ref), tuple(Literal(v) for _, v in vals), node.negated)
        exact = In(
            node.ref,
            tuple(Literal(v) if ok else _exact_for(Literal(v), t) for ok, v in vals),
            node.negated,
        )
        return Opaque(to_sql(exact), (node.ref.name,))

    @staticmethod
    def _never_equal(ref: Ref, v: Any, t: pa.DataType, op: str = "=") -> Expr | None:
        """``ref op v`` when no value of column type ``t`` equals ``v``, else None."""
        neighbours = _float_neighbours(v, t)
        if neighbours is not None:
            return _between_floats(op, ref, *neighbours)
        return _beyond_timestamps(op, ref, v, t)

    def visit_date_part(self, node: DatePart) -> Expr:
        name = node.ref.dotted
        t = self._type(node.ref)
        if pa.types.is_time(t):  # Lance's date_part reads a time of day: left to it
            return Opaque(to_sql(node), (node.ref.name,))
        if not (pa.types.is_date(t) or pa.types.is_timestamp(t)):
            raise FilterError(
                f"filter applies {node.unit}() to column {name!r} of type {t}; "
                f"{node.unit}() needs a date or timestamp column"
            )
        pred = node.pred
        literals = (pred.literal,) if isinstance(pred, Compare) else pred.values
        numbers = [_part_number(lit.value, node.unit, name) for lit in literals]
        if any(v is None for v in numbers):  # NULL, or no whole int32: Lance compares it
            return Opaque(to_sql(node), (node.ref.name,))
        ref = self._bound(node.ref)
        if isinstance(pred, Compare):
            bound: Compare | In = Compare(pred.op, ref, Literal(numbers[0]))
        else:
            bound = In(ref, tuple(Literal(v) for v in numbers), pred.negated)
        if node.unit == "year":
            years = _year_range(bound, t)
            if years is not None:
                return visit(years, self)
        return DatePart(node.unit, bound)

    def visit_is_null(self, node: IsNull) -> Expr:
        self._type(node.ref)
        return IsNull(self._bound(node.ref), node.negated)

    def visit_like(self, node: Like) -> Expr:
        self._type(node.ref)
        return Like(self._bound(node.ref), node.pattern, node.negated)

    def visit_ref(self, node: Ref) -> Expr:
        self._type(node)
        return self._bound(node)


_INT32 = (-(2**31), 2**31 - 1)


def _part_number(value: Any, unit: str, column: str) -> int | None:
    """A literal compared with ``unit(column)`` as the whole number it is; None for NULL,
    or a number that is not a whole int32 (the comparison is then Lance's). A string
    is read as a number; FilterError for anything that is not one."""
    if value is None:
        return None
    number = value
    if isinstance(value, str):
        try:
            number = decimal.Decimal(value.strip())
        except decimal.InvalidOperation:
            number = None
    if isinstance(number, bool) or not isinstance(number, (int, float, decimal.Decimal)):
        raise FilterError(
            f"filter compares {unit}({column}) with {render_literal(value)}: {unit}() is a "
            "whole number, compare it with numbers"
        )
    value = number
    if isinstance(value, (float, decimal.Decimal)) and not math.isfinite(value):
        return None
    if value != int(value) or not _INT32[0] <= int(value) <= _INT32[1]:
        return None
    return int(value)


def _year_start(year: int, t: pa.DataType) -> dt.date | None:
    """The first value of calendar ``year`` in a column of type ``t`` (date or timestamp):
    January 1, as a date, a naive midnight, or the instant a zoned column's clocks show
    midnight. None outside Python's calendar (years 1-9999), or when the clocks show
    that midnight twice or never (the year is then no range of instants)."""
    if not 1 <= year <= 9999:
        return None
    if pa.types.is_date(t):
        return dt.date(year, 1, 1)
    midnight = dt.datetime(year, 1, 1)
    if t.tz is None:
        return midnight
    if zones.is_utc(t.tz):
        return midnight.replace(tzinfo=dt.timezone.utc)
    try:
        return zones.instant(zones.localize(t.tz, zones.to_us(midnight)))
    except (AmbiguousTimeError, OverflowError):  # OverflowError: an instant in year 0
        return None


def _year_range(pred: Compare | In, t: pa.DataType) -> Expr | None:
    """``year(col) <pred>`` as comparisons of ``col`` with year starts (unbound literals);
    None when a year start it needs is not one (``_year_start``).

    Exact, NULL included: ``year(c) = y`` is ``c >= start(y) AND c < start(y + 1)``,
    NULL where ``c`` is. A zone's clocks show each midnight once (``_year_start``
    checks), so the instants of one year on its wall clock lie between its start
    and the next year's."""
    ref = pred.ref
    if isinstance(pred, In):
        op = "!=" if pred.negated else "="
        parts = [_year_range(Compare(op, ref, v), t) for v in pred.values]
        if any(p is None for p in parts):
            return None
        return balanced(And if pred.negated else Or, parts)  # type: ignore[arg-type]
    year = pred.literal.value
    if pa.types.is_timestamp(t) and t.unit == "ns":
        # Every value lies in 1677-2262, so a year further out compares as one just
        # outside does. Left to Lance, ``date_part('year', c) != 9999`` is turned into
        # a range whose nanosecond bounds overflow, and matches no row.
        year = min(max(year, 1600), 2300)
    lo, hi = _year_start(year, t), _year_start(year + 1, t)
    shapes = {
        "<": (("<", lo),),
        ">=": ((">=", lo),),
        "<=": (("<", hi),),
        ">": ((">=", hi),),
        "=": ((">=", lo), ("<", hi)),
        "!=": (("<", lo), (">=", hi)),
    }[pred.op]
    if any(bound is None for _, bound in shapes):
        return None
    compares = [Compare(op, ref, Literal(bound)) for op, bound in shapes]
    return balanced(Or if pred.op == "!=" else And, compares)


def bind(expr: Expr, schema: Schema) -> Expr:
    """``expr`` with every column reference bound to its field id in ``schema`` and
    literals converted to their column types where exact.

    A predicate whose literal cannot be converted exactly becomes Opaque: it
    does not prune, and the scan still applies it with Lance's own coercion.
    A reference may name a field of a struct column (``s.a``: bound to that
    field's own id; no partition field has it as a source, so it never prunes and
    leaves evaluate it). An unknown column or struct field, or a literal that
    cannot be compared with its column, raises FilterError (``convert_literal`` states the rules, time zones included).
    Pure: whether Lance can plan the filter is ``operations.read.filter_check``'s
    question, asked by the scan after binding.
    """
    for name in referenced_columns(expr):
        if not schema.has_field(name):
            raise FilterError(
                f"filter references unknown column {name!r}; columns are {schema.names}"
            )
    return visit(expr, _Binder(schema))
