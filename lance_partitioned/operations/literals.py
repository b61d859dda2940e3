"""Binding a filter literal to its column's type, exactly or not at all.

Rules (FORMAT.md §7 "Literals"):

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
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa

from lance_partitioned.errors import FilterError
from lance_partitioned.format import zones
from lance_partitioned.format.filters.literal_text import parse_date, parse_time, parse_timestamp
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


def cast_literal(value: Any, target: pa.DataType, column: str) -> tuple[bool, Any]:
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
