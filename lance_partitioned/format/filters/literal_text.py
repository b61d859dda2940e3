"""Literal text -> Python values: the typed literals of the filter dialect.

``DATE '…'``, ``TIMESTAMP '…'`` (with or without a UTC offset) and ``TIME '…'``
strings are read by :func:`parse_date`, :func:`parse_timestamp` and
:func:`parse_time`. :func:`fold_cast` folds ``CAST(<literal> AS <type>)`` into
a typed literal when the conversion is exact, and :func:`fold_arrow_cast` reads
``arrow_cast('<timestamp>', 'Timestamp(<unit>, Some("<zone>"))')``, the form in
which instants render. Both return :data:`NOT_CASTABLE` for casts the filter AST
does not model; those stay expressions for DataFusion to evaluate.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any

from lance_partitioned.format import zones
from lance_partitioned.format.filters.tokens import word_set

_DATE_RE = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*")
_TIME_PART = r"(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?"
_TIMESTAMP_RE = re.compile(
    r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:[Tt]|\s+)" + _TIME_PART + r")?"
    r"\s*(Z|z|UTC|[+-]\d{1,2}(?::?\d{2})?)?\s*"
)
_TIME_RE = re.compile(r"\s*" + _TIME_PART + r"\s*")


def _fraction_to_us(frac: str | None) -> int:
    if not frac:
        return 0
    ns = int(frac.ljust(9, "0"))
    if ns % 1000:
        raise ValueError("sub-microsecond precision is not supported")
    return ns // 1000


def parse_date(s: str) -> dt.date:
    m = _DATE_RE.fullmatch(s)
    if not m:
        raise ValueError("expected YYYY-MM-DD")
    return dt.date(int(m[1]), int(m[2]), int(m[3]))


def _parse_offset(s: str) -> dt.tzinfo:
    if s.upper() in ("Z", "UTC"):
        return dt.timezone.utc
    m = re.fullmatch(r"([+-])(\d{1,2})(?::?(\d{2}))?", s)
    if not m:
        raise ValueError(f"invalid UTC offset {s!r}")
    sign = -1 if m[1] == "-" else 1
    hours, minutes = int(m[2]), int(m[3] or 0)
    if hours > 23 or minutes > 59:
        raise ValueError(f"invalid UTC offset {s!r}")
    offset = dt.timedelta(hours=hours, minutes=minutes) * sign
    return dt.timezone.utc if not offset else dt.timezone(offset)


def parse_timestamp(s: str) -> dt.datetime:
    m = _TIMESTAMP_RE.fullmatch(s)
    if not m:
        raise ValueError("expected YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM|Z]")
    value = dt.datetime(
        int(m[1]),
        int(m[2]),
        int(m[3]),
        int(m[4] or 0),
        int(m[5] or 0),
        int(m[6] or 0),
        _fraction_to_us(m[7]),
    )
    if m[8]:
        value = value.replace(tzinfo=_parse_offset(m[8]))
    return value


def parse_time(s: str) -> dt.time:
    m = _TIME_RE.fullmatch(s)
    if not m:
        raise ValueError("expected HH:MM:SS[.ffffff]")
    return dt.time(int(m[1]), int(m[2]), int(m[3] or 0), _fraction_to_us(m[4]))


_INT_TYPES = word_set("TINYINT SMALLINT INT INTEGER BIGINT INT2 INT4 INT8 INT16 INT32 INT64")
_FLOAT_TYPES = {"FLOAT", "REAL", "DOUBLE", "FLOAT4", "FLOAT8", "FLOAT32", "FLOAT64"}
_STRING_TYPES = {"STRING", "VARCHAR", "TEXT", "CHAR", "CHARACTER", "UTF8"}
_BINARY_TYPES = {"BINARY", "VARBINARY", "BYTEA", "BLOB", "BYTES"}
TYPE_SUFFIX_WORDS = word_set("UNSIGNED SIGNED PRECISION VARYING WITH WITHOUT TIME ZONE")

NOT_CASTABLE = object()


def fold_cast(value: Any, words: list[str], params: list[int]) -> Any:
    """Fold ``CAST(<literal> AS <type>)`` into a typed literal.

    A string literal is parsed as the target type and a ValueError says why it
    cannot be. Other literals are folded when the conversion is exact and
    obvious (2 -> 2.0, DATE -> TIMESTAMP, 1.5 -> DECIMAL(3,2)); anything else,
    and any type this module does not model, returns NOT_CASTABLE: the cast
    then stays an (opaque) expression for DataFusion to evaluate."""
    base = words[0]
    if (
        base in ("DATE", "TIMESTAMP", "DATETIME", "TIME")
        and len(words) > 1
        and words[1:] not in (["WITH", "TIME", "ZONE"], ["WITHOUT", "TIME", "ZONE"])
    ):
        return NOT_CASTABLE
    if value is None:
        return None
    number = isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool)
    if isinstance(value, str):
        text = value.strip()
        if base in _INT_TYPES:
            return int(text)
        if base in _FLOAT_TYPES:
            return float(text)
        if base in ("DECIMAL", "NUMERIC", "DEC"):
            return _to_decimal(decimal.Decimal(text), params)
        if base in _STRING_TYPES:
            return value
        if base in ("BOOLEAN", "BOOL"):
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return text.lower() == "true"
        if base in _BINARY_TYPES:
            return value.encode()
        if base == "DATE":
            return parse_date(value)
        if base in ("TIMESTAMP", "DATETIME"):
            return parse_timestamp(value)
        if base == "TIME":
            return parse_time(value)
        return NOT_CASTABLE
    if base in _INT_TYPES and number and value == int(value):
        return int(value)
    if base in _FLOAT_TYPES and number:
        return float(value)
    if base in ("DECIMAL", "NUMERIC", "DEC") and number:
        return _to_decimal(
            decimal.Decimal(repr(value) if isinstance(value, float) else value), params
        )
    if base in ("BOOLEAN", "BOOL") and isinstance(value, bool):
        return value
    if base in _BINARY_TYPES and isinstance(value, bytes):
        return value
    if base == "DATE" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if base in ("TIMESTAMP", "DATETIME") and isinstance(value, dt.date):
        if isinstance(value, dt.datetime):
            return value
        return dt.datetime(value.year, value.month, value.day)
    if base == "TIME" and isinstance(value, dt.time):
        return value
    return NOT_CASTABLE


def _to_decimal(d: decimal.Decimal, params: list[int]) -> decimal.Decimal:
    if not d.is_finite():
        raise ValueError("not a finite number")
    if params:
        precision = params[0]
        scale = params[1] if len(params) > 1 else 0
        context = decimal.Context(prec=precision + abs(scale) + 2)
        d = d.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP, context)
        if d != 0 and d.adjusted() + 1 > precision - scale:
            raise ValueError(f"{d} does not fit DECIMAL({precision},{scale})")
    return d


_ARROW_CAST_RE = re.compile(
    r"Timestamp\((Second|Millisecond|Microsecond|Nanosecond),\s*"
    r"(?:None|Some\(\"([^\"]+)\"\))\)"
)


def fold_arrow_cast(value: Any, type_text: Any) -> Any:
    """``arrow_cast('<timestamp>', 'Timestamp(<unit>, Some("<zone>"))')`` as a datetime literal.

    Text with a UTC offset is that instant, whatever the zone; naive text is
    wall-clock time in the zone (or a naive timestamp with no zone). Anything
    else (a time the zone shows twice or never, an unknown zone) returns
    NOT_CASTABLE and stays an expression."""
    if not (isinstance(value, str) and isinstance(type_text, str)):
        return NOT_CASTABLE
    m = _ARROW_CAST_RE.fullmatch(type_text.strip())
    if not m:
        return NOT_CASTABLE
    try:
        parsed = parse_timestamp(value)
    except ValueError:
        return NOT_CASTABLE
    zone = m[2]
    if zone is None:
        return parsed.replace(tzinfo=None) if parsed.tzinfo is None else NOT_CASTABLE
    if parsed.tzinfo is None:
        # wall-clock time in ``zone``, as Arrow's cast reads it
        try:
            return zones.instant(zones.localize(zone, zones.to_us(parsed)))
        except Exception:  # unknown zone, or a time it shows twice or never
            return NOT_CASTABLE
    return parsed.astimezone(dt.timezone.utc)
