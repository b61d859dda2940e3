"""DuckDB and Polars over a pruned scan (issue 14 item 6): TPC-H Q6 and Q1.

The expected answers are computed on the source lineitem table directly, with
pyarrow.compute (Q6) and with DuckDB on the source Arrow table (Q1), never
through our scan. Pushdown is checked by recording what the scan reads.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.operations.read.scan import Scan

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")

Q6_FILTER = (
    "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
    "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
)
Q1_CUTOFF = dt.date(1998, 12, 1) - dt.timedelta(days=90)
Q1_SQL = """
    SELECT l_returnflag, l_linestatus,
           sum(l_quantity) AS sum_qty,
           sum(l_extendedprice) AS sum_base_price,
           sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
           sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
           count(*) AS count_order
    FROM {table} {where}
    GROUP BY l_returnflag, l_linestatus
    ORDER BY l_returnflag, l_linestatus
"""
Q1_COLUMNS = [
    "l_returnflag",
    "l_linestatus",
    "l_quantity",
    "l_extendedprice",
    "l_discount",
    "l_tax",
    "l_shipdate",
]


@pytest.fixture(scope="module")
def lineitem_ns(tmp_path_factory, lineitem):
    root = str(tmp_path_factory.mktemp("engines") / "lineitem")
    ns = lp.create(root, lineitem.schema, "year(l_shipdate), month(l_shipdate)")
    ns.append(lineitem)
    return ns


def dec(column: str):
    """A decimal column widened to scale 6, so Polars products keep every digit."""
    return pl.col(column).cast(pl.Decimal(38, 6))


def q6_expected(li: pa.Table) -> Decimal:
    d = li["l_shipdate"]
    mask = pc.and_(
        pc.and_(pc.greater_equal(d, dt.date(1994, 1, 1)), pc.less(d, dt.date(1995, 1, 1))),
        pc.and_(
            pc.and_(
                pc.greater_equal(li["l_discount"], Decimal("0.05")),
                pc.less_equal(li["l_discount"], Decimal("0.07")),
            ),
            pc.less(li["l_quantity"], Decimal(24)),
        ),
    )
    kept = li.filter(mask)
    return pc.sum(pc.multiply(kept["l_extendedprice"], kept["l_discount"])).as_py()


def q1_expected(li: pa.Table) -> list[tuple]:
    con = duckdb.connect()
    try:
        con.register("src", li)  # the source table itself, not our scan
        sql = Q1_SQL.format(table="src", where=f"WHERE l_shipdate <= DATE '{Q1_CUTOFF}'")
        return con.sql(sql).fetchall()
    finally:
        con.close()


@pytest.fixture
def reads(monkeypatch):
    """The (columns, partitions) of every scan read through ``to_batches``."""
    seen: list[tuple[list[str], int]] = []
    original = Scan.to_batches

    def recording(self):
        seen.append(([f.name for f in self.output_schema], len(self.leaves)))
        return original(self)

    monkeypatch.setattr(Scan, "to_batches", recording)
    return seen


def test_duckdb_q6(lineitem_ns, lineitem, reads):
    con = duckdb.connect()
    try:
        scan = lineitem_ns.scan(Q6_FILTER, columns=["l_extendedprice", "l_discount"])
        rel = scan.to_duckdb(con)
        rel.create_view("li")
        got = con.sql("SELECT sum(l_extendedprice * l_discount) FROM li").fetchall()[0][0]
        assert Decimal(got) == q6_expected(lineitem)
        # the relation runs again (a fresh read each time)
        assert con.sql("SELECT sum(l_extendedprice * l_discount) FROM li").fetchall()[0][0] == got
    finally:
        con.close()
    # pruned (only 1994's 12 months) and projected
    assert reads and all(cols == ["l_extendedprice", "l_discount"] for cols, _ in reads)
    assert {n for _, n in reads} == {12} and len(lineitem_ns.plan()) > 12


def test_duckdb_q1_sql_over_the_namespace(lineitem_ns, lineitem):
    con = duckdb.connect()
    try:
        scan = lineitem_ns.scan(f"l_shipdate <= DATE '{Q1_CUTOFF}'", columns=Q1_COLUMNS)
        scan.to_duckdb(con).create_view("lineitem")
        got = con.sql(Q1_SQL.format(table="lineitem", where="")).fetchall()
    finally:
        con.close()
    assert got == q1_expected(lineitem)
    assert len(got) == 4


def test_duckdb_default_connection(lineitem_ns, lineitem):
    rel = lineitem_ns.scan("l_quantity < 5", columns=["l_quantity"]).to_duckdb()
    expected = pc.sum(pc.less(lineitem["l_quantity"], Decimal(5))).as_py()
    assert rel.aggregate("count(*)").fetchall()[0][0] == expected


def test_polars_q6_lazy_with_projection_pushdown(lineitem_ns, lineitem, reads):
    lf = lineitem_ns.scan(Q6_FILTER).to_polars()
    assert isinstance(lf, pl.LazyFrame)
    assert reads == []  # lazy: nothing read yet
    # Polars keeps the operands' scale in a decimal product: widen it first
    got = lf.select((dec("l_extendedprice") * dec("l_discount")).sum()).collect().item()
    assert Decimal(got) == q6_expected(lineitem)
    # Polars asked for two columns of sixteen, and the scan read only those, from 12 partitions
    assert len(reads) == 1
    cols, partitions = reads[0]
    assert sorted(cols) == ["l_discount", "l_extendedprice"] and partitions == 12


def test_polars_q1(lineitem_ns, lineitem):
    lf = lineitem_ns.scan(f"l_shipdate <= DATE '{Q1_CUTOFF}'").to_polars()
    price = dec("l_extendedprice")
    disc = price * (1 - dec("l_discount"))
    got = (
        lf.group_by("l_returnflag", "l_linestatus")
        .agg(
            pl.col("l_quantity").sum().alias("sum_qty"),
            price.sum().alias("sum_base_price"),
            disc.sum().alias("sum_disc_price"),
            (disc * (1 + dec("l_tax"))).sum().alias("sum_charge"),
            pl.len().alias("count_order"),
        )
        .sort("l_returnflag", "l_linestatus")
        .collect()
    )
    expected = q1_expected(lineitem)
    rows = got.rows()
    assert [r[:2] for r in rows] == [e[:2] for e in expected]
    for r, e in zip(rows, expected, strict=True):
        assert r[6] == e[6]  # counts
        for a, b in zip(r[2:6], e[2:6], strict=True):  # sums: exact decimals
            assert Decimal(str(a)) == Decimal(str(b))


def test_polars_eager_predicate_and_limit(lineitem_ns, lineitem):
    scan = lineitem_ns.scan("l_shipdate < DATE '1993-01-01'", columns=["l_orderkey", "l_quantity"])
    df = scan.to_polars(lazy=False)
    assert isinstance(df, pl.DataFrame)
    before = pc.less(lineitem["l_shipdate"], dt.date(1993, 1, 1))
    assert df.height == pc.sum(before).as_py()
    # a Polars predicate the scan does not know runs on the rows read
    small = scan.to_polars().filter(pl.col("l_quantity") < 3).collect()
    both = pc.and_(before, pc.less(lineitem["l_quantity"], Decimal(3)))
    assert small.height == pc.sum(both).as_py()
    assert scan.to_polars().head(7).collect().height == 7
