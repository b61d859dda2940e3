"""Scans hand Spark the reader's Arrow batches as column batches (``ColumnarHandoff.java``).

The extension's reader factory runs PySpark's own Arrow runner and returns its batches
instead of copying every row into an ``UnsafeRow``; decimals of precision 18 or less
are read as their 64-bit unscaled values. The oracle of every comparison is the
pyarrow table the namespace was written from: its values as Python objects, and its
sums computed by ``pyarrow.compute``.
"""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp

pytest.importorskip("pyspark")

CONF = "spark.lance_partitioned.columnarReads"
FMT = "lance_partitioned"
ROWS = 3000  # several Arrow batches per task

# the edges of a 64-bit unscaled value, negative values and NULLs
EDGE_DECIMALS = [
    decimal.Decimal("999999999999999999"),
    decimal.Decimal("-999999999999999999"),
    decimal.Decimal("0"),
    decimal.Decimal("-1"),
    None,
]


def _source() -> pa.Table:
    n = ROWS
    ids = list(range(n))
    cents = [decimal.Decimal(i * 7919 % 1_000_003 - 500_000).scaleb(-2) for i in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "g": pa.array([i % 3 for i in ids], pa.int32()),
            "small": pa.array([i % 100 - 50 for i in ids], pa.int8()),
            "f": pa.array([i / 7 if i % 11 else None for i in ids], pa.float64()),
            "flag": pa.array([i % 2 == 0 if i % 13 else None for i in ids], pa.bool_()),
            "s": pa.array([f"row-{i}" if i % 17 else None for i in ids], pa.string()),
            "bin": pa.array([bytes([i % 256, 0]) for i in ids], pa.binary()),
            "d": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in ids], pa.date32()),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i)
                    for i in ids
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "money": pa.array(
                [c if i % 19 else None for i, c in enumerate(cents)], pa.decimal128(15, 2)
            ),
            "edge": pa.array(
                [EDGE_DECIMALS[i % len(EDGE_DECIMALS)] for i in ids], pa.decimal128(18, 0)
            ),
            "frac": pa.array(
                [decimal.Decimal(i % 997 - 498).scaleb(-18) for i in ids], pa.decimal128(18, 18)
            ),
            "wide": pa.array(
                [decimal.Decimal(10**25 + i).scaleb(-4) * (1 if i % 2 else -1) for i in ids],
                pa.decimal128(38, 4),
            ),
            "tags": pa.array(
                [[str(i), None] if i % 5 else None for i in ids], pa.list_(pa.string())
            ),
            "st": pa.array(
                [{"a": i, "b": str(i)} if i % 7 else None for i in ids],
                pa.struct([("a", pa.int64()), ("b", pa.string())]),
            ),
        }
    )


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("columnar") / "ns")
    source = _source()
    ns = lp.create(path, source.schema, "g")
    for start in range(0, ROWS, 1000):  # three fragments per partition
        ns.append(source.slice(start, 1000))
    return path


def _view(spark, root: str, name: str = "columnar_t") -> str:
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} USING {FMT} OPTIONS (root '{root}')")
    return name


def _executed(spark, sql: str, columnar: str) -> tuple[list, str]:
    spark.conf.set(CONF, columnar)
    try:
        df = spark.sql(sql)
        rows = df.collect()
        return rows, df._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.unset(CONF)


def test_scans_hand_spark_column_batches(spark, root):
    view = _view(spark, root)
    _, plan = _executed(spark, f"SELECT sum(id) FROM {view}", "auto")
    assert "ColumnarToRow" in plan and "BatchScan lance_partitioned" in plan
    _, plan = _executed(spark, f"SELECT sum(id) FROM {view}", "false")
    assert "ColumnarToRow" not in plan


def test_every_column_reads_as_the_source_rows(spark, root):
    source = _source()
    view = _view(spark, root)
    rows, plan = _executed(spark, f"SELECT * FROM {view}", "auto")
    assert "ColumnarToRow" in plan
    got = sorted((r.asDict(recursive=True) for r in rows), key=lambda r: r["id"])
    want = source.to_pylist()
    for row in want:  # Spark gives structs as Rows (compared as dicts) and ts as local time
        row["ts"] = row["ts"].astimezone().replace(tzinfo=None)
    assert [r.keys() for r in got[:1]] == [want[0].keys()]
    for column in source.column_names:
        assert [r[column] for r in got] == [r[column] for r in want], column


def test_decimal_arithmetic_on_column_batches_equals_pyarrow(spark, root):
    source = _source()
    view = _view(spark, root)
    sql = (
        f"SELECT g, sum(money), sum(edge), sum(frac), sum(wide), min(edge), max(edge), "
        f"count(money) FROM {view} GROUP BY g ORDER BY g"
    )
    rows, plan = _executed(spark, sql, "auto")
    assert "ColumnarToRow" in plan
    for row in rows:
        part = source.filter(pc.equal(source["g"], row[0]))
        assert row[1] == pc.sum(part["money"]).as_py()
        assert row[2] == pc.sum(part["edge"]).as_py()
        assert row[3] == pc.sum(part["frac"]).as_py()
        assert row[4] == pc.sum(part["wide"]).as_py()
        assert row[5] == pc.min(part["edge"]).as_py() and row[6] == pc.max(part["edge"]).as_py()
        assert row[7] == pc.count(part["money"]).as_py()


def test_filtered_and_joined_scans_read_the_same_either_way(spark, root):
    view = _view(spark, root)
    sql = (
        f"SELECT a.g, count(*), sum(b.money) FROM {view} a JOIN {view} b ON a.id = b.id + 1 "
        f"WHERE a.money > 0 AND b.s IS NOT NULL GROUP BY a.g ORDER BY a.g"
    )
    columnar, plan = _executed(spark, sql, "auto")
    assert "ColumnarToRow" in plan
    by_rows, _ = _executed(spark, sql, "false")
    source = _source().to_pandas()
    # the oracle: pandas on the source rows
    left = source[source["money"].notna() & (source["money"] > 0)]
    right = source[source["s"].notna()].assign(id=lambda t: t["id"] + 1)
    joined = left.merge(right, on="id", suffixes=("", "_b"))
    want = [
        (g, len(part), sum(part["money_b"].dropna(), decimal.Decimal("0.00")))
        for g, part in sorted(joined.groupby("g"))
    ]
    assert [tuple(r) for r in columnar] == want
    assert [tuple(r) for r in by_rows] == want
