"""Writes never store a different value than the one given (issue 10 item 14).

Arrow's safe cast refuses integer overflow and sub-unit timestamps, but silently
truncates a timestamp to its date, rounds float64 to float32 and floats to a
decimal's scale, and reads a naive timestamp as UTC. Each such write must be
refused with an error naming the column and leave the namespace untouched; the
same values, when exact, are written as given.
"""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pyarrow as pa
import pytest

import lance_partitioned as lp

NY = "America/New_York"
UTC = dt.timezone.utc

SCHEMA = pa.schema(
    [
        pa.field("k", pa.string()),
        pa.field("d", pa.date32()),
        pa.field("f32", pa.float32()),
        pa.field("dec", pa.decimal128(10, 1)),
        pa.field("f64", pa.float64()),
        pa.field("ts_us", pa.timestamp("us")),
        pa.field("ts_ny", pa.timestamp("us", tz=NY)),
        pa.field("i32", pa.int32()),
        pa.field("tags", pa.list_(pa.date32())),
        pa.field("s", pa.struct([pa.field("when", pa.date32()), pa.field("x", pa.float32())])),
    ]
)


def files_under(root: str) -> dict[str, bytes]:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            with open(os.path.join(d, n), "rb") as fh:
                out[os.path.join(d, n)] = fh.read()
    return out


@pytest.fixture
def ns(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(pa.table({"k": ["a"]}, schema=pa.schema([SCHEMA.field("k")])))
    return ns


def one_column(name: str, array: pa.Array) -> pa.Table:
    return pa.table({"k": pa.array(["a"] * len(array)), name: array})


MIDNIGHT = dt.datetime(2024, 2, 29)
AFTERNOON = dt.datetime(2024, 2, 29, 13, 30)

REFUSED = [
    # the case: a timestamp with a time of day is not a date
    ("d", pa.array([MIDNIGHT, AFTERNOON], pa.timestamp("us")), r"column 'd'.*2024, 2, 29, 13, 30"),
    ("d", pa.array([AFTERNOON], pa.timestamp("ns")), "column 'd'"),
    ("d", pa.array([AFTERNOON.replace(tzinfo=UTC)], pa.timestamp("ms", tz="UTC")), "column 'd'"),
    # which date is a New York instant on? its UTC one or its local one: refused
    ("d", pa.array([MIDNIGHT.replace(tzinfo=UTC)], pa.timestamp("us", tz=NY)), "no single date"),
    # float64 → float32 rounding and overflow
    ("f32", pa.array([0.5, 1.1]), r"column 'f32'.*1\.1 to 1\.10000002"),
    ("f32", pa.array([1e300]), "to inf"),
    # floats rounded to the decimal's scale, decimals rounded to a float
    ("dec", pa.array([1.25]), r"column 'dec'.*1\.25 to Decimal\('1\.2'\)"),
    (
        "f64",
        pa.array([Decimal("123456789012345678.5")], pa.decimal128(20, 1)),
        "column 'f64'",
    ),
    # naive ↔ zoned other than UTC: the wall clock would change
    ("ts_us", pa.array([AFTERNOON.replace(tzinfo=UTC)], pa.timestamp("us", tz=NY)), "UTC or local"),
    (
        "ts_ny",
        pa.array([AFTERNOON], pa.timestamp("us")),
        "no single instant in zone America/New_York",
    ),
    # nested values too, named by their path
    (
        "tags",
        pa.array([[MIDNIGHT, AFTERNOON]], pa.list_(pa.timestamp("us"))),
        r"column 'tags\[\]'",
    ),
    (
        "s",
        pa.array(
            [{"when": MIDNIGHT, "x": 2.2}],
            pa.struct([pa.field("when", pa.timestamp("us")), pa.field("x", pa.float64())]),
        ),
        r"column 's\.x'.*2\.2",
    ),
    # refused by Arrow's safe cast already; kept here so it stays refused
    ("ts_us", pa.array([1001], pa.timestamp("ns")), "column 'ts_us'.*would lose data"),
    ("dec", pa.array([Decimal("1.25")], pa.decimal128(10, 2)), "column 'dec'"),
    ("i32", pa.array([2**40], pa.int64()), "column 'i32'"),
]


@pytest.mark.parametrize(
    "column, array, match", REFUSED, ids=[f"{c}-{a.type}" for c, a, _ in REFUSED]
)
def test_lossy_write_is_refused_and_changes_nothing(ns, column, array, match):
    version, files = lp.open(ns.root).version, files_under(ns.root)
    with pytest.raises(lp.SchemaError, match=match):
        ns.append(one_column(column, array))
    assert lp.open(ns.root).version == version
    assert files_under(ns.root) == files


# (column, input, the value stored, written independently of our code)
KEPT = [
    ("d", pa.array([MIDNIGHT], pa.timestamp("us")), dt.date(2024, 2, 29)),
    (
        "d",
        pa.array([MIDNIGHT.replace(tzinfo=UTC)], pa.timestamp("s", tz="UTC")),
        dt.date(2024, 2, 29),
    ),
    ("f32", pa.array([0.5]), 0.5),
    ("dec", pa.array([0.1]), Decimal("0.1")),
    ("f64", pa.array([Decimal("1.5")], pa.decimal128(10, 1)), 1.5),
    ("ts_us", pa.array([AFTERNOON.replace(tzinfo=UTC)], pa.timestamp("us", tz="UTC")), AFTERNOON),
    (
        "ts_ny",
        pa.array([AFTERNOON.replace(tzinfo=UTC)], pa.timestamp("ns", tz="Europe/Paris")),
        AFTERNOON.replace(tzinfo=UTC),
    ),
    (
        "tags",
        pa.array([[MIDNIGHT, None]], pa.list_(pa.timestamp("us"))),
        [dt.date(2024, 2, 29), None],
    ),
]


@pytest.mark.parametrize("column, array, stored", KEPT, ids=[f"{c}-{a.type}" for c, a, _ in KEPT])
def test_exact_values_are_written_as_given(ns, column, array, stored):
    ns.append(one_column(column, array))
    got = [v for v in lp.open(ns.root).scan().to_arrow()[column].to_pylist() if v is not None]
    assert got == [stored]


def test_a_write_into_a_leaf_older_than_a_widening_widens_it_first(tmp_path):
    ns = lp.create(str(tmp_path / "w"), pa.schema([("k", pa.string()), ("x", pa.float32())]), "k")
    ns.append(pa.table({"k": ["a"], "x": pa.array([0.5], pa.float32())}))
    ns.widen_column("x", pa.float64())
    # partition 'a' still has a float32 leaf: storing 1.1 there would round it to
    # 1.100000023841858, so the write widens the leaf's column first (issue 28 B5)
    ns.append(pa.table({"k": ["a", "b"], "x": pa.array([1.1, 2.2])}))
    got = sorted(lp.open(ns.root).scan().to_arrow().to_pylist(), key=lambda r: (r["k"], r["x"]))
    assert got == [{"k": "a", "x": 0.5}, {"k": "a", "x": 1.1}, {"k": "b", "x": 2.2}]
    assert ns.count("x = 1.1") == 1
