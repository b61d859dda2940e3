"""One classification of Arrow types into families, and the questions asked of it.

``family_of`` says what a type's values *are* (integers, strings, instants, ...),
regardless of width, unit, time zone or physical layout. Every rule that depends
on the kind of a type is stated here in terms of that family:

- ``cast_group``: which types a written column may be cast into (input checks);
- ``expression_kind``: which result types an ``expression`` field's SQL may
  return for its declared ``result_type`` (spec validation);
- ``join_key_family`` / ``join_key_types_match``: which join keys hash and compare
  alike on both sides of a storage-partitioned join;
- ``literal_family`` / ``is_literal_of``: which Python literal is a value of a
  column's family (Spark filter translation);
- ``is_text``, ``is_bytes``, ``is_numeric``, ``is_temporal``: the families the
  transforms, filter checks and literal binding ask about.

Engine-specific knowledge stays with the engine (which Arrow types Spark holds
as they are is in ``spark/filters.py``); the Arrow <-> JSON form of types is in
``format/type_json.py``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
from typing import Any

import pyarrow as pa

__all__ = [
    "TypeFamily",
    "cast_group",
    "expression_kind",
    "family_of",
    "is_bytes",
    "is_literal_of",
    "is_numeric",
    "is_temporal",
    "is_text",
    "join_key_family",
    "join_key_types_match",
    "literal_family",
]


class TypeFamily(enum.Enum):
    """What a type's values are, regardless of width, unit, time zone or layout."""

    NULL = "null"
    BOOLEAN = "boolean"
    INTEGER = "integer"  # signed and unsigned, any width
    FLOAT = "float"  # float16, float32, float64
    DECIMAL = "decimal"  # any width, precision and scale
    STRING = "string"  # utf8, large_utf8, utf8_view
    BINARY = "binary"  # binary, large_binary, binary_view, fixed_size_binary
    DATE = "date"  # date32, date64
    TIMESTAMP = "timestamp"  # any unit, naive or zoned
    TIME = "time"  # time32, time64
    DURATION = "duration"
    LIST = "list"  # list, large_list, fixed_size_list (not the list views)
    STRUCT = "struct"
    MAP = "map"
    DICTIONARY = "dictionary"  # an encoding: ask about ``t.value_type`` for its values
    OTHER = "other"  # intervals, unions, list views, run-end encoded, extension types


_FAMILY_TESTS: tuple[tuple[TypeFamily, Any], ...] = (
    (TypeFamily.NULL, pa.types.is_null),
    (TypeFamily.BOOLEAN, pa.types.is_boolean),
    (TypeFamily.INTEGER, pa.types.is_integer),
    (TypeFamily.FLOAT, pa.types.is_floating),
    (TypeFamily.DECIMAL, pa.types.is_decimal),
    (TypeFamily.STRING, lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
    (TypeFamily.STRING, pa.types.is_string_view),
    (TypeFamily.BINARY, lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
    (TypeFamily.BINARY, lambda t: pa.types.is_binary_view(t) or pa.types.is_fixed_size_binary(t)),
    (TypeFamily.DATE, pa.types.is_date),
    (TypeFamily.TIMESTAMP, pa.types.is_timestamp),
    (TypeFamily.TIME, pa.types.is_time),
    (TypeFamily.DURATION, pa.types.is_duration),
    (TypeFamily.LIST, pa.types.is_list),
    (TypeFamily.LIST, lambda t: pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)),
    (TypeFamily.STRUCT, pa.types.is_struct),
    (TypeFamily.MAP, pa.types.is_map),
    (TypeFamily.DICTIONARY, pa.types.is_dictionary),
)


def family_of(t: pa.DataType) -> TypeFamily:
    """The family of ``t`` itself; a dictionary is ``DICTIONARY`` (not its values' family)
    and an extension type ``OTHER`` (not its storage's)."""
    for family, test in _FAMILY_TESTS:
        if test(t):
            return family
    return TypeFamily.OTHER


# -- the families transforms and filters ask about --------------------------------


def is_text(t: pa.DataType) -> bool:
    """utf8, large_utf8 or string_view."""
    return family_of(t) is TypeFamily.STRING


def is_bytes(t: pa.DataType) -> bool:
    """binary, large_binary, fixed_size_binary or binary_view."""
    return family_of(t) is TypeFamily.BINARY


def is_numeric(t: pa.DataType) -> bool:
    """Integers, floats and decimals."""
    return family_of(t) in (TypeFamily.INTEGER, TypeFamily.FLOAT, TypeFamily.DECIMAL)


def is_temporal(t: pa.DataType) -> bool:
    """Dates and timestamps."""
    return family_of(t) in (TypeFamily.DATE, TypeFamily.TIMESTAMP)


# -- casts ---------------------------------------------------------------------------

# Families whose values convert into each other (a cast may still fail per value).
_CAST_GROUP_NAME = {
    TypeFamily.INTEGER: "number",
    TypeFamily.FLOAT: "number",
    TypeFamily.DECIMAL: "number",
    TypeFamily.DATE: "datetime",
    TypeFamily.TIMESTAMP: "datetime",
    TypeFamily.BOOLEAN: "boolean",
    TypeFamily.STRING: "string",
    TypeFamily.BINARY: "binary",
    TypeFamily.LIST: "list",
    TypeFamily.STRUCT: "struct",
}


def cast_group(t: pa.DataType) -> str:
    """The group of types values of ``t`` may be cast within, never across.

    ``"number"`` (integer, float, decimal), ``"datetime"`` (date, timestamp),
    ``"boolean"``, ``"string"``, ``"binary"``, ``"list"``, ``"struct"``; a
    dictionary is in its values' group. Any other type is alone with the types of
    its own Arrow type id (``"arrow type id 19"``), so time32 and time64, say, are
    not cast into each other.
    """
    if pa.types.is_dictionary(t):
        return cast_group(t.value_type)
    name = _CAST_GROUP_NAME.get(family_of(t))
    return name if name is not None else f"arrow type id {t.id}"


def expression_kind(t: pa.DataType) -> str:
    """What an ``expression`` field's SQL result must share with its ``result_type``.

    The family for integers, floats, decimals, dates and timestamps (which must
    not silently become one another), otherwise the ``cast_group``. A dictionary
    is its values' ``cast_group``, so ``dictionary<int64>`` is "number" and does
    not match ``int64`` ("integer") while ``dictionary<utf8>`` matches ``utf8``.
    """
    family = family_of(t)
    if family in (
        TypeFamily.INTEGER,
        TypeFamily.FLOAT,
        TypeFamily.DECIMAL,
        TypeFamily.DATE,
        TypeFamily.TIMESTAMP,
    ):
        return family.value
    return cast_group(t)


# -- storage-partitioned join keys ------------------------------------------------------

_JOIN_KEY_FAMILIES = frozenset(
    {
        TypeFamily.BOOLEAN,
        TypeFamily.INTEGER,
        TypeFamily.DECIMAL,
        TypeFamily.STRING,
        TypeFamily.BINARY,
        TypeFamily.DATE,
        TypeFamily.TIMESTAMP,
    }
)


def join_key_family(t: pa.DataType) -> TypeFamily | None:
    """The family of a join key of type ``t`` whose equal values have equal partition
    values on both sides, or None when a partition-wise join cannot use ``t``.

    Integers of any width hash and compare alike (the canonical int64 encoding),
    except uint64, whose large values have no int64 form; floats are refused:
    Spark's join treats NaN = NaN and -0.0 = 0.0, which a partition-wise hash join
    would not reproduce. Dictionaries and nested types are refused too.
    """
    family = family_of(t)
    if family not in _JOIN_KEY_FAMILIES or pa.types.is_uint64(t):
        return None
    return family


def join_key_types_match(a: pa.DataType, b: pa.DataType) -> bool:
    """Whether join keys of types ``a`` and ``b`` hash and compare alike.

    The same ``join_key_family``, and for decimals the same precision and scale
    (the hash encodes the unscaled value), for timestamps both naive or both zoned.
    """
    family = join_key_family(a)
    if family is None or family is not join_key_family(b):
        return False
    if family is TypeFamily.DECIMAL:
        return (a.precision, a.scale) == (b.precision, b.scale)
    if family is TypeFamily.TIMESTAMP:
        return (a.tz is None) == (b.tz is None)
    return True


# -- literals ---------------------------------------------------------------------------


def literal_family(value: Any) -> TypeFamily | None:
    """The family a Python literal is a value of, or None (``None`` included).

    bool is BOOLEAN (not INTEGER), a datetime is TIMESTAMP (not DATE); bytes and
    bytearray are BINARY.
    """
    if isinstance(value, bool):
        return TypeFamily.BOOLEAN
    if isinstance(value, int):
        return TypeFamily.INTEGER
    if isinstance(value, float):
        return TypeFamily.FLOAT
    if isinstance(value, decimal.Decimal):
        return TypeFamily.DECIMAL
    if isinstance(value, str):
        return TypeFamily.STRING
    if isinstance(value, (bytes, bytearray)):
        return TypeFamily.BINARY
    if isinstance(value, dt.datetime):
        return TypeFamily.TIMESTAMP
    if isinstance(value, dt.date):
        return TypeFamily.DATE
    if isinstance(value, dt.time):
        return TypeFamily.TIME
    return None


def is_literal_of(value: Any, t: pa.DataType) -> bool:
    """Whether ``value`` is a literal of column type ``t``'s own family.

    A Decimal must be finite (NaN and infinities are no decimal value), and a
    datetime must be aware exactly when ``t`` is zoned: an instant for an instant
    column, a wall-clock time for a naive one. Whether the value fits ``t``'s
    width, precision or unit is not checked.
    """
    family = family_of(t)
    if family is TypeFamily.DICTIONARY or literal_family(value) is not family:
        return False
    if family is TypeFamily.DECIMAL:
        return value.is_finite()
    if family is TypeFamily.TIMESTAMP:
        return (value.tzinfo is not None) == (t.tz is not None)
    return True
