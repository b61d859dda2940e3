"""The one classification of Arrow types (lance_partitioned.format.types).

Every expected value is written by hand per Arrow type: what the rule says the
type is, not what the code computes. Type ids are those of Arrow's ``Type`` enum
(arrow/type_fwd.h: TIME32 = 19, TIME64 = 20, DENSE_UNION = 28, MAP = 30,
EXTENSION = 31, DURATION = 33, INTERVAL_MONTH_DAY_NANO = 37, LIST_VIEW = 41).
"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from lance_partitioned.format.types import (
    TypeFamily,
    cast_group,
    expression_kind,
    family_of,
    is_bytes,
    is_literal_of,
    is_numeric,
    is_temporal,
    is_text,
    join_key_family,
    join_key_types_match,
    literal_family,
)

F = TypeFamily


class _Ext(pa.ExtensionType):
    def __init__(self):
        super().__init__(pa.int64(), "test.type_families")

    def __arrow_ext_serialize__(self):
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


# (type, family, cast group, expression kind, join key family)
CASES = [
    (pa.null(), F.NULL, "arrow type id 0", "arrow type id 0", None),
    (pa.bool_(), F.BOOLEAN, "boolean", "boolean", F.BOOLEAN),
    (pa.int8(), F.INTEGER, "number", "integer", F.INTEGER),
    (pa.int16(), F.INTEGER, "number", "integer", F.INTEGER),
    (pa.int32(), F.INTEGER, "number", "integer", F.INTEGER),
    (pa.int64(), F.INTEGER, "number", "integer", F.INTEGER),
    (pa.uint8(), F.INTEGER, "number", "integer", F.INTEGER),
    (pa.uint16(), F.INTEGER, "number", "integer", F.INTEGER),
    (pa.uint32(), F.INTEGER, "number", "integer", F.INTEGER),
    (pa.uint64(), F.INTEGER, "number", "integer", None),  # no int64 form for large values
    (pa.float16(), F.FLOAT, "number", "float", None),
    (pa.float32(), F.FLOAT, "number", "float", None),
    (pa.float64(), F.FLOAT, "number", "float", None),
    (pa.decimal32(9, 2), F.DECIMAL, "number", "decimal", F.DECIMAL),
    (pa.decimal64(18, 0), F.DECIMAL, "number", "decimal", F.DECIMAL),
    (pa.decimal128(38, 10), F.DECIMAL, "number", "decimal", F.DECIMAL),
    (pa.decimal256(76, -3), F.DECIMAL, "number", "decimal", F.DECIMAL),
    (pa.string(), F.STRING, "string", "string", F.STRING),
    (pa.large_string(), F.STRING, "string", "string", F.STRING),
    (pa.string_view(), F.STRING, "string", "string", F.STRING),
    (pa.binary(), F.BINARY, "binary", "binary", F.BINARY),
    (pa.large_binary(), F.BINARY, "binary", "binary", F.BINARY),
    (pa.binary_view(), F.BINARY, "binary", "binary", F.BINARY),
    (pa.binary(16), F.BINARY, "binary", "binary", F.BINARY),
    (pa.date32(), F.DATE, "datetime", "date", F.DATE),
    (pa.date64(), F.DATE, "datetime", "date", F.DATE),
    (pa.timestamp("s"), F.TIMESTAMP, "datetime", "timestamp", F.TIMESTAMP),
    (pa.timestamp("ns", tz="UTC"), F.TIMESTAMP, "datetime", "timestamp", F.TIMESTAMP),
    (pa.timestamp("us", tz="Asia/Tokyo"), F.TIMESTAMP, "datetime", "timestamp", F.TIMESTAMP),
    (pa.time32("s"), F.TIME, "arrow type id 19", "arrow type id 19", None),
    (pa.time64("ns"), F.TIME, "arrow type id 20", "arrow type id 20", None),
    (pa.duration("ms"), F.DURATION, "arrow type id 33", "arrow type id 33", None),
    (pa.month_day_nano_interval(), F.OTHER, "arrow type id 37", "arrow type id 37", None),
    (pa.list_(pa.int32()), F.LIST, "list", "list", None),
    (pa.large_list(pa.string()), F.LIST, "list", "list", None),
    (pa.list_(pa.int8(), 3), F.LIST, "list", "list", None),
    (pa.list_view(pa.int32()), F.OTHER, "arrow type id 41", "arrow type id 41", None),
    (pa.struct([("a", pa.int32())]), F.STRUCT, "struct", "struct", None),
    (pa.map_(pa.string(), pa.int32()), F.MAP, "arrow type id 30", "arrow type id 30", None),
    (
        pa.dense_union([pa.field("a", pa.int32())]),
        F.OTHER,
        "arrow type id 28",
        "arrow type id 28",
        None,
    ),
    (_Ext(), F.OTHER, "arrow type id 31", "arrow type id 31", None),
    # a dictionary is an encoding: its cast group is its values'; joins refuse it
    (pa.dictionary(pa.int32(), pa.string()), F.DICTIONARY, "string", "string", None),
    (pa.dictionary(pa.int8(), pa.int64()), F.DICTIONARY, "number", "number", None),
    (pa.dictionary(pa.int16(), pa.date32()), F.DICTIONARY, "datetime", "datetime", None),
]


@pytest.mark.parametrize(("t", "family", "group", "kind", "key"), CASES, ids=str)
def test_family_cast_group_expression_kind_and_join_key(t, family, group, kind, key):
    assert family_of(t) is family
    assert cast_group(t) == group
    assert expression_kind(t) == kind
    assert join_key_family(t) is key


# (type, is_text, is_bytes, is_numeric, is_temporal)
PREDICATES = [
    (pa.string(), True, False, False, False),
    (pa.large_string(), True, False, False, False),
    (pa.string_view(), True, False, False, False),
    (pa.binary(), False, True, False, False),
    (pa.binary(4), False, True, False, False),
    (pa.binary_view(), False, True, False, False),
    (pa.large_binary(), False, True, False, False),
    (pa.uint64(), False, False, True, False),
    (pa.float16(), False, False, True, False),
    (pa.decimal128(5, 2), False, False, True, False),
    (pa.date64(), False, False, False, True),
    (pa.timestamp("ms", tz="UTC"), False, False, False, True),
    (pa.time64("us"), False, False, False, False),
    (pa.duration("s"), False, False, False, False),
    (pa.bool_(), False, False, False, False),
    (pa.dictionary(pa.int32(), pa.string()), False, False, False, False),
    (pa.list_(pa.string()), False, False, False, False),
]


@pytest.mark.parametrize(("t", "text", "raw", "number", "temporal"), PREDICATES, ids=str)
def test_family_predicates(t, text, raw, number, temporal):
    assert (is_text(t), is_bytes(t), is_numeric(t), is_temporal(t)) == (
        text,
        raw,
        number,
        temporal,
    )


def test_time32_and_time64_are_not_cast_into_each_other():
    assert cast_group(pa.time32("s")) != cast_group(pa.time64("us"))
    assert cast_group(pa.int8()) == cast_group(pa.decimal256(40, 2)) == cast_group(pa.float16())
    assert cast_group(pa.date32()) == cast_group(pa.timestamp("ns", tz="UTC"))


def test_expression_kind_keeps_numbers_and_datetimes_apart():
    assert expression_kind(pa.int64()) != expression_kind(pa.float64())
    assert expression_kind(pa.int64()) != expression_kind(pa.decimal128(10, 0))
    assert expression_kind(pa.date32()) != expression_kind(pa.timestamp("us"))
    assert expression_kind(pa.int8()) == expression_kind(pa.uint64())


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (pa.int8(), pa.int64(), True),
        (pa.uint32(), pa.int16(), True),
        (pa.uint64(), pa.uint64(), False),
        (pa.int64(), pa.uint64(), False),
        (pa.float64(), pa.float64(), False),
        (pa.string(), pa.large_string(), True),
        (pa.string_view(), pa.string(), True),
        (pa.binary(), pa.binary(8), True),
        (pa.string(), pa.binary(), False),
        (pa.date32(), pa.date64(), True),
        (pa.date32(), pa.timestamp("us"), False),
        (pa.timestamp("s"), pa.timestamp("ns"), True),
        (pa.timestamp("us", tz="UTC"), pa.timestamp("ms", tz="Europe/Paris"), True),
        (pa.timestamp("us"), pa.timestamp("us", tz="UTC"), False),
        (pa.decimal128(10, 2), pa.decimal128(10, 2), True),
        (pa.decimal128(10, 2), pa.decimal256(10, 2), True),
        (pa.decimal128(10, 2), pa.decimal128(10, 3), False),
        (pa.decimal128(10, 2), pa.decimal128(12, 2), False),
        (pa.bool_(), pa.bool_(), True),
        (pa.bool_(), pa.int8(), False),
        (pa.dictionary(pa.int32(), pa.string()), pa.string(), False),
        (pa.list_(pa.int32()), pa.list_(pa.int32()), False),
    ],
    ids=str,
)
def test_join_key_types_match(a, b, match):
    assert join_key_types_match(a, b) is match
    assert join_key_types_match(b, a) is match


@pytest.mark.parametrize(
    ("value", "family"),
    [
        (True, F.BOOLEAN),
        (0, F.INTEGER),
        (-(2**70), F.INTEGER),
        (1.5, F.FLOAT),
        (float("nan"), F.FLOAT),
        (decimal.Decimal("1.25"), F.DECIMAL),
        ("x", F.STRING),
        (b"x", F.BINARY),
        (bytearray(b"x"), F.BINARY),
        (dt.date(2024, 1, 2), F.DATE),
        (dt.datetime(2024, 1, 2, 3), F.TIMESTAMP),
        (dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc), F.TIMESTAMP),
        (dt.time(12, 30), F.TIME),
        (None, None),
        ([1], None),
        (memoryview(b"x"), None),
    ],
    ids=repr,
)
def test_literal_family(value, family):
    assert literal_family(value) is family


@pytest.mark.parametrize(
    ("value", "t", "ok"),
    [
        (True, pa.bool_(), True),
        (1, pa.bool_(), False),
        (True, pa.int64(), False),  # a bool is not an integer literal
        (7, pa.int8(), True),  # range is not checked
        (7, pa.float64(), False),
        (7.0, pa.int64(), False),
        (2.5, pa.float32(), True),
        (float("inf"), pa.float64(), True),
        (decimal.Decimal("1.5"), pa.decimal128(5, 2), True),
        (decimal.Decimal("NaN"), pa.decimal128(5, 2), False),
        (decimal.Decimal("Infinity"), pa.decimal128(5, 2), False),
        (1.5, pa.decimal128(5, 2), False),
        ("a", pa.string(), True),
        ("a", pa.large_string(), True),
        ("a", pa.binary(), False),
        (b"a", pa.binary(), True),
        (bytearray(b"a"), pa.large_binary(), True),
        (b"a", pa.string(), False),
        (dt.date(2024, 1, 1), pa.date32(), True),
        (dt.datetime(2024, 1, 1), pa.date32(), False),
        (dt.date(2024, 1, 1), pa.timestamp("us"), False),
        (dt.datetime(2024, 1, 1), pa.timestamp("us"), True),
        (dt.datetime(2024, 1, 1), pa.timestamp("us", tz="UTC"), False),
        (dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), pa.timestamp("us", tz="UTC"), True),
        (dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), pa.timestamp("us"), False),
        (dt.time(1), pa.time64("us"), True),
        (None, pa.int64(), False),
        ("a", pa.dictionary(pa.int32(), pa.string()), False),
        ([1], pa.list_(pa.int64()), False),
    ],
    ids=repr,
)
def test_is_literal_of(value, t, ok):
    assert is_literal_of(value, t) is ok
