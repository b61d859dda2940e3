"""Real data: TPC-H lineitem from tpchgen-cli, partitioned and queried through the core library."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp

Q6 = (
    "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
    "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
)


def q6_revenue(t: pa.Table) -> Decimal:
    return pc.sum(pc.multiply(t["l_extendedprice"], t["l_discount"])).as_py() or Decimal(0)


def q6_reference(lineitem: pa.Table) -> Decimal:
    d = lineitem["l_shipdate"]
    mask = pc.and_(
        pc.and_(pc.greater_equal(d, dt.date(1994, 1, 1)), pc.less(d, dt.date(1995, 1, 1))),
        pc.and_(
            pc.and_(
                pc.greater_equal(lineitem["l_discount"], Decimal("0.05")),
                pc.less_equal(lineitem["l_discount"], Decimal("0.07")),
            ),
            pc.less(lineitem["l_quantity"], Decimal(24)),
        ),
    )
    return q6_revenue(lineitem.filter(mask))


@pytest.fixture(scope="module")
def lineitem_ns(tmp_path_factory, lineitem):
    root = str(tmp_path_factory.mktemp("tpch") / "lineitem")
    ns = lp.create(
        root, lineitem.schema, "year(l_shipdate), month(l_shipdate), bucket(8, l_orderkey)"
    )
    ns.append(lineitem)
    return ns


def test_lineitem_round_trip(lineitem_ns, lineitem):
    assert lineitem_ns.count() == lineitem.num_rows
    got = lineitem_ns.scan(columns=["l_orderkey", "l_linenumber"]).to_arrow()
    assert sorted(
        zip(got["l_orderkey"].to_pylist(), got["l_linenumber"].to_pylist(), strict=True)
    ) == sorted(
        zip(lineitem["l_orderkey"].to_pylist(), lineitem["l_linenumber"].to_pylist(), strict=True)
    )


def test_q6_matches_parquet(lineitem_ns, lineitem):
    scan = lineitem_ns.scan(Q6, columns=["l_extendedprice", "l_discount"])
    assert q6_revenue(scan.to_arrow()) == q6_reference(lineitem)
    # only 1994's months are read: 12 months x up to 8 buckets
    total = len(lineitem_ns.plan())
    kept = scan.plan()
    assert {t.partition_values["l_shipdate_year"] for t in kept} == {1994}
    assert len(kept) <= 12 * 8 < total


def test_bucket_pruning_on_orderkey(lineitem_ns, lineitem):
    key = lineitem["l_orderkey"][100].as_py()
    plan = lineitem_ns.plan(f"l_orderkey = {key}")
    assert len({t.partition_values["l_orderkey_bucket"] for t in plan}) == 1
    got = lineitem_ns.scan(f"l_orderkey = {key}").to_arrow()
    assert got.num_rows == pc.sum(pc.equal(lineitem["l_orderkey"], key)).as_py()


def test_pyarrow_expression_filter(lineitem_ns, lineitem):
    expr = (pc.field("l_shipdate") >= pa.scalar(dt.date(1995, 6, 1))) & (
        pc.field("l_shipdate") < pa.scalar(dt.date(1995, 7, 1))
    )
    scan = lineitem_ns.scan(expr)
    assert {
        (t.partition_values["l_shipdate_year"], t.partition_values["l_shipdate_month"])
        for t in scan.plan()
    } == {(1995, 6)}
    assert scan.count() == lineitem.filter(expr).num_rows


def test_datafusion_expression_filter(lineitem_ns, lineitem):
    from datafusion import col, lit

    expr = (col("l_shipdate") >= lit(dt.date(1996, 2, 1))) & (
        col("l_shipdate") < lit(dt.date(1996, 3, 1))
    )
    scan = lineitem_ns.scan(expr)
    months = {
        (t.partition_values["l_shipdate_year"], t.partition_values["l_shipdate_month"])
        for t in scan.plan()
    }
    assert months == {(1996, 2)}
    d = lineitem["l_shipdate"]
    mask = pc.and_(pc.greater_equal(d, dt.date(1996, 2, 1)), pc.less(d, dt.date(1996, 3, 1)))
    assert scan.count() == pc.sum(mask).as_py()
