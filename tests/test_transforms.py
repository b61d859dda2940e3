"""Transform semantics (DESIGN §2 items 7-11), checked against the vectors in docs/FORMAT.md."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from lance_partitioned import PartitionField, Schema
from lance_partitioned.format.transforms import Bucket, Day, Hour, Identity, Month, Truncate, Year

UTC = dt.timezone.utc
NY = "America/New_York"

# (transform, arrow type, input, expected output) - the same table is in docs/FORMAT.md
TRANSFORM_VECTORS = [
    (Year(), pa.date32(), dt.date(2017, 11, 16), 2017),
    (Month(), pa.date32(), dt.date(2017, 11, 16), 11),
    (Day(), pa.date32(), dt.date(2017, 11, 16), 16),
    (Year(), pa.date32(), dt.date(1969, 12, 31), 1969),
    (Hour(), pa.timestamp("us"), dt.datetime(2017, 11, 16, 22, 31, 8), 22),
    (Hour(), pa.timestamp("us", tz="UTC"), dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=UTC), 22),
    # zoned timestamps are evaluated in their zone, as DataFusion's date_part (seed 000):
    # 2018-01-01 01:00 UTC is 2017-12-31 20:00 in New York
    (Year(), pa.timestamp("us", tz=NY), dt.datetime(2018, 1, 1, 1, 0, tzinfo=UTC), 2017),
    (Day(), pa.timestamp("us", tz=NY), dt.datetime(2018, 1, 1, 1, 0, tzinfo=UTC), 31),
    (Hour(), pa.timestamp("ns", tz=NY), dt.datetime(2018, 1, 1, 1, 0, tzinfo=UTC), 20),
    (Hour(), pa.timestamp("ns", tz=NY), dt.datetime(2017, 12, 31, 23, 30, tzinfo=UTC), 18),
    # New York: 01:30 happens twice on 2018-11-04 (EDT, then EST); both are hour 1
    (Hour(), pa.timestamp("us", tz=NY), dt.datetime(2018, 11, 4, 5, 30, tzinfo=UTC), 1),
    (Hour(), pa.timestamp("us", tz=NY), dt.datetime(2018, 11, 4, 6, 30, tzinfo=UTC), 1),
    (Hour(), pa.timestamp("us", tz=NY), dt.datetime(2018, 3, 11, 7, 0, tzinfo=UTC), 3),
    (
        Year(),
        pa.timestamp("us", tz="Asia/Kolkata"),
        dt.datetime(2017, 12, 31, 18, 30, tzinfo=UTC),
        2018,
    ),
    (
        Day(),
        pa.timestamp("ns", tz="Asia/Kolkata"),
        dt.datetime(2017, 12, 31, 18, 29, 59, tzinfo=UTC),
        31,
    ),
    (Hour(), pa.timestamp("us", tz="+05:30"), dt.datetime(2017, 12, 31, 18, 30, tzinfo=UTC), 0),
    (
        Month(),
        pa.timestamp("us", tz="Pacific/Chatham"),
        dt.datetime(2018, 6, 30, 12, 15, tzinfo=UTC),
        7,
    ),
    (
        Hour(),
        pa.timestamp("us", tz="Australia/Lord_Howe"),
        dt.datetime(2018, 3, 31, 15, 15, tzinfo=UTC),
        1,
    ),
    (Hour(), pa.timestamp("us", tz="Europe/London"), dt.datetime(2018, 3, 25, 1, 0, tzinfo=UTC), 2),
    # after 2037 pyarrow applies no daylight saving time; DataFusion does (until 2099)
    (Day(), pa.timestamp("us", tz="Europe/London"), dt.datetime(2050, 7, 1, 23, 30, tzinfo=UTC), 2),
    (Hour(), pa.timestamp("us", tz=NY), dt.datetime(2050, 7, 1, 3, 30, tzinfo=UTC), 23),
    (Hour(), pa.timestamp("us", tz="UTC"), dt.datetime(2017, 12, 31, 23, 30, tzinfo=UTC), 23),
    (Truncate(10), pa.int64(), 123, 120),
    (Truncate(10), pa.int64(), -1, 0),
    (Truncate(10), pa.int64(), -11, -10),
    (Truncate(10), pa.int32(), -10, -10),
    (Truncate(3), pa.string(), "iceberg", "ice"),
    (Truncate(3), pa.string(), "éèêë", "éèê"),
    (Truncate(3), pa.string(), "ab", "ab"),
    (Truncate(3), pa.binary(), b"\x00\x01\x02\x03", b"\x00\x01\x02"),
    (Truncate(10), pa.decimal128(9, 2), Decimal("12.34"), Decimal("10.00")),
    (Truncate(10), pa.decimal128(9, 2), Decimal("-12.34"), Decimal("-10.00")),
    (Truncate(10), pa.float64(), -12.5, -10.0),
    (Bucket(16), pa.int32(), 34, 3),
    (Bucket(16), pa.int64(), 34, 3),
    (Bucket(16), pa.string(), "iceberg", 9),
    (Identity(), pa.string(), "Zürich$/=", "Zürich$/="),
]


@pytest.mark.parametrize("transform, typ, value, expected", TRANSFORM_VECTORS, ids=str)
def test_transform_vectors(transform, typ, value, expected):
    out = transform.apply([pa.array([value, None], type=typ)])
    assert out.to_pylist() == [expected, None]  # NULL in gives NULL out


def test_bucket_is_type_promotion_resistant():
    for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32(), pa.uint64()):
        assert (
            Bucket(16).apply([pa.array([5], t)]).to_pylist()
            == Bucket(16).apply([pa.array([5], pa.int64())]).to_pylist()
        )
    assert Bucket(7).apply([pa.array([1.5], pa.float32())]) == Bucket(7).apply(
        [pa.array([1.5], pa.float64())]
    )
    same_instant = [
        pa.array([dt.datetime(2020, 1, 1, 12)], pa.timestamp(u)) for u in ("s", "ms", "us", "ns")
    ]
    assert len({Bucket(11).apply([a])[0].as_py() for a in same_instant}) == 1


def test_bucket_result_range_and_nulls():
    values = pa.array(list(range(-5000, 5000)) + [None, -(2**63), 2**63 - 1], pa.int64())
    out = Bucket(13).apply([values])
    assert out.type == pa.int32()
    assert out.null_count == 1
    assert all(0 <= v < 13 for v in out.to_pylist() if v is not None)


@pytest.mark.parametrize(
    "typ", [pa.int8(), pa.int16(), pa.uint8(), pa.int32(), pa.uint16()], ids=str
)
@pytest.mark.parametrize("width", [3, 100, 1000, 70000, 2**31 - 1])
def test_truncate_wider_than_the_source_type_follows_datafusion(typ, width):
    # The oracle is seed 000's expression run by DataFusion (which evaluates it in
    # int64), cast back to the source type as the field's result_type says.
    import datafusion

    info = np.iinfo(typ.to_pandas_dtype())
    candidates = [info.min, info.min + 1, -100, -1, 0, 1, 99, int(info.max)]
    col = pa.array([int(v) for v in candidates if v >= info.min] + [None], typ)
    ctx = datafusion.SessionContext()
    ctx.register_record_batches("t", [[pa.record_batch({"col0": col})]])
    expected = ctx.sql(f"SELECT col0 - (col0 % {width}) AS r FROM t").to_arrow_table()["r"]
    assert Truncate(width).apply([col]).to_pylist() == expected.cast(typ).to_pylist()


def test_partition_field_casts_to_result_type_and_reads_missing_sources_as_null():
    schema = Schema.from_arrow(pa.schema([pa.field("a", pa.int32()), pa.field("b", pa.string())]))
    widened = PartitionField("a", (0,), pa.int64(), transform=Identity())
    widened.validate(schema)
    batch = pa.record_batch({"a": pa.array([1, None], pa.int32()), "b": ["x", "y"]})
    out = widened.values(batch, schema)
    assert out.type == pa.int64() and out.to_pylist() == [1, None]
    gone = PartitionField("gone", (7,), pa.int32(), transform=Bucket(4))
    assert gone.values(batch, schema).to_pylist() == [None, None]


def test_expression_fields_bind_sources_and_register_murmur3():
    schema = Schema.from_arrow(pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string())]))
    batch = pa.record_batch({"a": pa.array([34, None], pa.int64()), "b": ["iceberg", None]})
    # seed 003's `hash` function, expressed as a custom expression
    h = PartitionField("a_hash", (0,), pa.int32(), expression="murmur3(col0)")
    h.validate(schema)
    assert h.values(batch, schema).to_pylist() == [2017239379, None]
    both = PartitionField("ab", (0, 1), pa.int32(), expression="abs(murmur3_multi(col0, col1)) % 8")
    both.validate(schema)
    from lance_partitioned.format.transforms import MultiBucket

    expected = MultiBucket(8).apply([batch.column(0), batch.column(1)]).to_pylist()
    assert both.values(batch, schema).to_pylist() == expected
    assert expected[1] is None  # all sources NULL


@pytest.mark.parametrize(
    "expression, result_type, message",
    [
        ("now()", pa.int64(), "not deterministic"),
        ("random() * col0", pa.float64(), "not deterministic"),
        ("col0 + col3", pa.int64(), "references col3"),
        ("upper(col1)", pa.int32(), "does not fit result_type"),
        ("no_such_fn(col0)", pa.int32(), "invalid expression"),
    ],
)
def test_bad_expressions_are_rejected(expression, result_type, message):
    from lance_partitioned import SpecError

    schema = Schema.from_arrow(pa.schema([pa.field("a", pa.int64()), pa.field("b", pa.string())]))
    with pytest.raises(SpecError, match=message):
        PartitionField("e", (0, 1), result_type, expression=expression).validate(schema)


def test_expression_values_stay_aligned_with_rows_on_large_batches():
    # DataFusion repartitions large inputs; values must still come back in row order
    schema = Schema.from_arrow(pa.schema([pa.field("a", pa.int64())]))
    batch = pa.record_batch({"a": pa.array(range(200_000), pa.int64())})
    field = PartitionField("h", (0,), pa.int32(), expression="abs(murmur3(col0)) % 16")
    from lance_partitioned.format.transforms import Bucket as B

    assert field.values(batch, schema).equals(B(16).apply([batch.column(0)]))
