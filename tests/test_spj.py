"""Storage partitioned join (issue 6): planning without Spark, then results against Spark's own join.

Every Spark comparison uses Spark's plain ``df.join`` of the same rows as the
reference, so column layout, NULL handling and join types must match exactly.
"""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest
from hashing_reference import bucket_scalar

import lance_partitioned as lp
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import parse_spec
from lance_partitioned.operations import join as jp

SPARK_HOW = {
    "inner": "inner",
    "left": "left",
    "right": "right",
    "full": "full",
    "semi": "left_semi",
    "anti": "left_anti",
}

# -- data -----------------------------------------------------------------------


def orders_table(n: int = 1500, seed: int = 1) -> pa.Table:
    """Appendix F orders: some NULL customers, customers that do not exist."""
    rnd = random.Random(seed)
    return pa.table(
        {
            "o_id": pa.array(range(n), pa.int64()),
            "customer_id": pa.array(
                [None if i % 37 == 0 else rnd.randrange(260) for i in range(n)], pa.int64()
            ),
            "amount": pa.array([round(rnd.random() * 100, 2) for _ in range(n)]),
            "tags": pa.array([[f"t{i % 3}"] for i in range(n)]),  # a list payload
        }
    )


def customers_table(lo: int = 0, hi: int = 240) -> pa.Table:
    """Appendix F customers: int32 ids (orders use int64) and one NULL id."""
    ids = [*range(lo, hi), None]
    return pa.table(
        {
            "id": pa.array(ids, pa.int32()),
            "name": pa.array([f"c{i}" for i in ids]),
        }
    )


def dated_table(n: int, seed: int, value: str) -> pa.Table:
    rnd = random.Random(seed)
    base = dt.date(2023, 11, 1)
    days = [None if i % 41 == 0 else base + dt.timedelta(days=rnd.randrange(500)) for i in range(n)]
    return pa.table({"d": pa.array(days, pa.date32()), value: pa.array(range(n), pa.int64())})


def make_ns(
    root: str, table: pa.Table, spec: str, storage_options: dict[str, str] | None = None
) -> lp.PartitionedNamespace:
    ns = lp.create(root, table.schema, spec, storage_options)
    ns.append(table)
    return ns


@pytest.fixture(scope="module")
def appendix_f(tmp_path_factory):
    """orders by bucket(customer_id, 16), customers by bucket(id, 8), as in Appendix F."""
    base = tmp_path_factory.mktemp("spj_f")
    orders, customers = orders_table(), customers_table()
    o = make_ns(str(base / "orders"), orders, "bucket(customer_id, 16) AS customer_bucket")
    c = make_ns(str(base / "customers"), customers, "bucket(id, 8) AS id_bucket")
    return o, c, orders, customers


ON_F = [("customer_id", "id")]
CUSTOMERS_I64 = pa.schema([("id", pa.int64()), ("name", pa.string())])


# -- compatibility without any I/O --------------------------------------------------

KEY_SCHEMA = Schema.from_arrow(
    pa.schema(
        [
            ("k", pa.int64()),
            ("s", pa.string()),
            ("d", pa.date32()),
            ("f", pa.float64()),
            ("other", pa.int64()),
        ]
    )
)
NARROW_SCHEMA = Schema.from_arrow(pa.schema([("k", pa.int32()), ("s", pa.large_string())]))


def comps(left: str, right: str, on, rschema: Schema = KEY_SCHEMA) -> tuple[str, ...]:
    found, _ = jp.compatibility(
        parse_spec(left, KEY_SCHEMA), KEY_SCHEMA, parse_spec(right, rschema), rschema, on
    )
    pairs = jp.normalize_on(on)
    return tuple(c.describe(pairs) for c in found)


@pytest.mark.parametrize(
    "left,right,on,expected",
    [
        ("bucket(k, 8)", "bucket(k, 8)", "k", ("bucket[8](k)",)),
        ("bucket(k, 16)", "bucket(k, 8)", "k", ("bucket[8](k)",)),
        ("bucket(k, 8)", "bucket(k, 16)", "k", ("bucket[8](k)",)),
        ("bucket(k, 12)", "bucket(k, 8)", "k", ()),
        ("k", "bucket(k, 8)", "k", ()),
        ("k", "k", "k", ("identity(k)",)),
        ("year(d), month(d), day(d)", "year(d), month(d)", "d", ("year(d)", "month(d)")),
        ("year(d), month(d)", "year(d)", "d", ("year(d)",)),
        ("year(d), month(d), day(d)", "year(d)", "d", ("year(d)",)),
        ("day(d)", "month(d)", "d", ()),
        ("month(d)", "year(d)", "d", ()),
        ("truncate(s, 4)", "truncate(s, 4)", "s", ("truncate[4](s)",)),
        ("truncate(s, 4)", "truncate(s, 2)", "s", ("truncate[2](s)",)),
        ("truncate(k, 10)", "truncate(k, 100)", "k", ("truncate[100](k)",)),
        ("truncate(k, 10)", "truncate(k, 15)", "k", ()),
        ("bucket(f, 8)", "bucket(f, 8)", "f", ()),  # floats: Spark's NaN/-0.0 rules
        ("bucket(other, 8)", "bucket(k, 8)", "k", ()),  # not on the join key
        ("bucket(k, 16), other", "bucket(k, 4)", "k", ("bucket[4](k)",)),
        ("multi_bucket(8, k, s)", "multi_bucket(4, k, s)", ["k", "s"], ("bucket[4](k, s)",)),
        ("multi_bucket(8, k, s)", "multi_bucket(8, s, k)", ["k", "s"], ()),
        ("bucket(k, 8), year(d)", "bucket(k, 4), year(d)", ["k", "d"], ("bucket[4](k)", "year(d)")),
    ],
)
def test_compatibility_matrix(left, right, on, expected):
    assert comps(left, right, on) == expected


def test_compatibility_across_key_widths_and_names():
    # int64 vs int32 keys hash alike (canonical int64), string vs large_string too.
    assert comps("bucket(k, 16)", "bucket(k, 8)", "k", NARROW_SCHEMA) == ("bucket[8](k)",)
    assert comps("truncate(s, 3)", "truncate(s, 3)", "s", NARROW_SCHEMA) == ("truncate[3](s)",)
    _, why = jp.compatibility(
        parse_spec("bucket(k, 12)", KEY_SCHEMA),
        KEY_SCHEMA,
        parse_spec("bucket(k, 8)", KEY_SCHEMA),
        KEY_SCHEMA,
        "k",
    )
    assert "neither divides" in why


# -- plans ----------------------------------------------------------------------------


def test_appendix_f_groups(appendix_f):
    o, c, _, _ = appendix_f
    plan = jp.plan_join(o, c, ON_F, "inner")
    assert [x.describe(plan.on) for x in plan.components] == ["bucket[8](customer_id=id)"]
    assert not plan.fallback
    assert len(plan.groups) == 8  # the NULL bucket joins nothing in an inner join
    for i, g in enumerate(plan.groups):
        assert g.key == (i,)
        assert sorted(lf.values[0] for lf in g.left) == [i, i + 8]
        assert [lf.values[0] for lf in g.right] == [i]
    text = jp.explain_join(o, c, ON_F)
    assert "bucket[8](customer_id=id)" in text and "fallback: none" in text


@pytest.mark.parametrize(
    "how,null_left,null_right",
    [("inner", None, None), ("left", 1, 0), ("right", 0, 1), ("full", 1, 1), ("anti", 1, 0)],
)
def test_null_bucket_group(appendix_f, how, null_left, null_right):
    """The NULL partition never matches, but its rows stay in outer and anti results."""
    o, c, _, _ = appendix_f
    plan = jp.plan_join(o, c, ON_F, how)
    null_groups = [g for g in plan.groups if g.key == (None,)]
    if null_left is None:
        assert not null_groups
        return
    (g,) = null_groups
    assert (len(g.left), len(g.right)) == (null_left, null_right)


def assert_matches_arrow(got: pa.Table, orders: pa.Table, customers: pa.Table, how: str) -> None:
    """``got`` (an Appendix F join) has the rows of pyarrow's join of the source tables."""
    ref = orders.drop_columns(["tags"]).join(
        customers.cast(CUSTOMERS_I64),
        "customer_id",
        "id",
        join_type=jp.ARROW_JOIN_TYPE[how],
        coalesce_keys=False,
    )
    cols = [c for c in got.column_names if c != "tags"]
    assert sorted(map(repr, got.select(cols).to_pylist())) == sorted(
        map(repr, ref.select(cols).to_pylist())
    )


@pytest.mark.parametrize("how", jp.JOIN_TYPES)
@pytest.mark.parametrize("max_group_rows", [jp.DEFAULT_MAX_GROUP_ROWS, 150])
def test_local_execution_matches_arrow(appendix_f, how, max_group_rows):
    """Groups (and hash sub-partitions with spilling) reproduce a plain join."""
    o, c, orders, customers = appendix_f
    plan = jp.plan_join(o, c, ON_F, how, max_group_rows=max_group_rows)
    if max_group_rows == 150:
        assert max(g.parts for g in plan.groups) > 1
    got = jp.execute_local(plan)
    assert_matches_arrow(got, orders, customers, how)
    if how not in ("semi", "anti"):
        assert got.column_names == ["o_id", "customer_id", "amount", "tags", "id", "name"]
    else:
        assert got.column_names == ["o_id", "customer_id", "amount", "tags"]


def test_sub_partition_spreads_one_bucket():
    """Rows of one group share bucket % 8; the sub-partition hash must still spread them."""
    keys = pa.array([k for k in range(20000) if bucket_scalar(k, pa.int64(), 8) == 3])
    parts = jp.sub_partition([keys], [pa.int64()], 16)
    counts = [int((parts == i).sum()) for i in range(16)]
    assert min(counts) > len(keys) / 16 * 0.7
    # Same keys, narrower type: same sub-partitions (both sides must agree).
    again = jp.sub_partition([keys.cast(pa.int32())], [pa.int64()], 16)
    assert (again == parts).all()


def test_mixed_versions_plan(tmp_path):
    orders = orders_table(400)
    o = make_ns(str(tmp_path / "o"), orders, "bucket(customer_id, 16)")
    c = make_ns(str(tmp_path / "c"), customers_table(0, 100), "bucket(id, 8)")
    c.evolve_spec("bucket(id, 3)")
    c.append(customers_table(100, 200))
    customers = pa.concat_tables([customers_table(0, 100), customers_table(100, 200)])
    inner = jp.plan_join(o, c, ON_F, "inner")
    assert inner.groups and len(inner.fallback) == 1
    (part,) = inner.fallback
    assert part.left is None and {lf.spec_id for lf in part.right} == {2}
    assert any("right v2" in r for r in inner.reasons)
    right = jp.plan_join(o, c, ON_F, "right")
    assert right.groups and right.fallback[0].left is None
    for how in ("left", "full", "semi", "anti"):  # right rows of v2 could match any left row
        plan = jp.plan_join(o, c, ON_F, how)
        assert plan.is_full_fallback and not plan.groups, how
    for how in jp.JOIN_TYPES:  # groups + fallback parts: every row exactly once
        assert_matches_arrow(
            jp.execute_local(jp.plan_join(o, c, ON_F, how)), orders, customers, how
        )
    # Both sides mixed: inner splits into groups + two fallback parts.
    more = orders_table(300, seed=5)
    o.evolve_spec("customer_id")
    o.append(more)
    plan = jp.plan_join(o, c, ON_F, "inner")
    assert plan.groups and len(plan.fallback) == 2
    assert_matches_arrow(
        jp.execute_local(plan), pa.concat_tables([orders, more]), customers, "inner"
    )


def test_evolved_but_compatible_picks_coarser_key(tmp_path):
    o = make_ns(str(tmp_path / "o"), orders_table(300), "bucket(customer_id, 16)")
    c = make_ns(str(tmp_path / "c"), customers_table(0, 100), "bucket(id, 8)")
    c.evolve_spec("bucket(id, 4)")
    c.append(customers_table(100, 200))
    plan = jp.plan_join(o, c, ON_F, "full")
    assert [x.param for x in plan.components] == [4]
    assert not plan.fallback and len(plan.groups) == 5  # 4 buckets + NULL


def test_one_side_pruned_away(appendix_f):
    o, c, _, _ = appendix_f
    empty = jp.Side(c, filter="id IS NULL AND id IS NOT NULL")
    assert not jp.plan_join(o, empty, ON_F, "inner").groups
    left = jp.plan_join(o, empty, ON_F, "left")
    assert left.groups and not left.fallback
    assert jp.execute_local(left).num_rows == o.count()


def test_bad_inputs(appendix_f):
    o, c, _, _ = appendix_f
    with pytest.raises(ValueError, match="unknown join type"):
        jp.plan_join(o, c, ON_F, "cross")
    with pytest.raises(lp.SchemaError, match="join key 'nope'"):
        jp.plan_join(o, c, [("nope", "id")])
    with pytest.raises(lp.SchemaError, match="suffixes"):
        jp.plan_join(o, o, [("o_id", "customer_id")])  # amount, tags... on both sides
    plan = jp.plan_join(o, o, [("o_id", "customer_id")], suffixes=("_a", "_b"))
    assert "amount_a" in plan.output_schema.names and "amount_b" in plan.output_schema.names


# -- Spark ------------------------------------------------------------------------------


def spark_rows(df) -> list[str]:
    return sorted(repr(tuple(r)) for r in df.collect())


def assert_same(df, ref) -> None:
    assert df.columns == ref.columns
    assert spark_rows(df) == spark_rows(ref)


def fingerprint(df) -> tuple:
    """Row count and the sum of row hashes: equal for equal multisets of rows (whp)."""
    from pyspark.sql import functions as F

    h = F.xxhash64(*[F.col(c) for c in df.columns]).cast("decimal(38,0)")
    return tuple(df.agg(F.count(F.lit(1)), F.sum(h)).first())


def assert_same_large(df, ref) -> None:
    """Equal multisets of rows, checked inside Spark (for results too big to collect)."""
    assert df.columns == ref.columns
    assert fingerprint(df) == fingerprint(ref)


def plain_join(spark, left: pa.Table, right: pa.Table, on, how: str):
    ldf, rdf = spark.createDataFrame(left), spark.createDataFrame(right)
    pairs = jp.normalize_on(on)
    if all(a == b for a, b in pairs):
        return ldf.join(rdf, [a for a, _ in pairs], SPARK_HOW[how])
    cond = [ldf[a] == rdf[b] for a, b in pairs]
    return ldf.join(rdf, cond, SPARK_HOW[how])


def no_exchange(df) -> bool:
    from lance_partitioned.spark.storage_partitioned_join import executed_plan

    return "Exchange" not in executed_plan(df)


@pytest.mark.parametrize("how", jp.JOIN_TYPES)
def test_spark_appendix_f_every_join_type(spark, appendix_f, how):
    from lance_partitioned.spark.storage_partitioned_join import join

    o, c, orders, customers = appendix_f
    df = join(spark, o, c, ON_F, how, require_spj=True)
    assert no_exchange(df)
    assert_same(df, plain_join(spark, orders, customers, ON_F, how))


def test_spark_spj_writes_no_shuffle_bytes(spark, appendix_f):
    from lance_partitioned.spark.storage_partitioned_join import (
        Side,
        executed_plan,
        join,
        shuffle_write_bytes,
    )

    o, c, _, _ = appendix_f
    before = shuffle_write_bytes(spark)
    join(spark, o, c, ON_F, "full", max_group_rows=200).write.format("noop").mode(
        "overwrite"
    ).save()
    assert shuffle_write_bytes(spark) == before
    # The measurement is live: a join of two large-looking sides shuffles.
    big = Side(o, columns=["o_id", "customer_id"])
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        fallback = join(spark, big, big, [("o_id", "customer_id")], suffixes=("_a", "_b"))
        assert "SortMergeJoin" in executed_plan(fallback)
        fallback.write.format("noop").mode("overwrite").save()
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    assert shuffle_write_bytes(spark) > before


@pytest.mark.parametrize("buckets", [(16, 8), (16, 16)])
def test_spark_tpch_orders_lineitem(spark, tmp_path, orders, lineitem, buckets):
    from lance_partitioned.spark.storage_partitioned_join import join

    o = make_ns(str(tmp_path / "orders"), orders, f"bucket(o_orderkey, {buckets[0]})")
    li = make_ns(str(tmp_path / "lineitem"), lineitem, f"bucket(l_orderkey, {buckets[1]})")
    on = [("o_orderkey", "l_orderkey")]
    df = join(spark, o, li, on, require_spj=True)
    assert no_exchange(df)
    assert len(jp.plan_join(o, li, on).groups) == min(buckets)
    assert_same_large(df, plain_join(spark, orders, lineitem, on, "inner"))


def test_spark_time_hierarchy(spark, tmp_path):
    from lance_partitioned.spark.storage_partitioned_join import Side, join

    lt, rt = dated_table(600, 3, "a"), dated_table(300, 4, "b")
    left = make_ns(str(tmp_path / "l"), lt, "year(d), month(d), day(d)")
    right = make_ns(str(tmp_path / "r"), rt, "year(d), month(d)")
    plan = jp.plan_join(left, right, "d", "full")
    assert [x.kind for x in plan.components] == ["year", "month"] and not plan.fallback
    assert all(len({lf.values[:2] for lf in g.left}) <= 1 for g in plan.groups)
    df = join(spark, left, right, "d", "full", require_spj=True)
    assert no_exchange(df)
    assert_same(df, plain_join(spark, lt, rt, "d", "full"))
    # Filters prune partitions first and apply before the join.
    cut = "d >= DATE '2024-06-01'"
    pruned = jp.plan_join(Side(left, filter=cut), right, "d", "left")
    assert len(pruned.left.leaves) < len(plan.left.leaves)
    df = join(spark, Side(left, filter=cut), right, "d", "left")
    ref_left = lt.filter(pa.compute.greater_equal(lt["d"], dt.date(2024, 6, 1)))
    assert_same(df, plain_join(spark, ref_left, rt, "d", "left"))


@pytest.mark.parametrize("how", ["inner", "full"])
def test_spark_mixed_spec_versions(spark, tmp_path, how):
    from lance_partitioned.spark.storage_partitioned_join import join

    orders = orders_table(500)
    c1, c2 = customers_table(0, 120), customers_table(120, 240)
    o = make_ns(str(tmp_path / "o"), orders, "bucket(customer_id, 16)")
    c = make_ns(str(tmp_path / "c"), c1, "bucket(id, 8)")
    c.evolve_spec("bucket(id, 3)")
    c.append(c2.filter(pa.compute.is_valid(c2["id"])))
    plan = jp.plan_join(o, c, ON_F, how)
    assert bool(plan.groups) == (how != "full")  # full outer cannot be split: all falls back
    df = join(spark, o, c, ON_F, how)
    customers = pa.concat_tables([c1, c2.filter(pa.compute.is_valid(c2["id"]))])
    assert_same(df, plain_join(spark, orders, customers, ON_F, how))


@pytest.mark.parametrize(
    ("how", "store"), [("right", "local"), ("full", "local"), ("full", "s3")], indirect=["store"]
)
def test_spark_using_key_of_different_widths(spark, store, how):
    """Same-named keys are output once (Spark's USING layout), int64 on one side, int32 on the
    other. On S3 the join tasks read the leaves with the namespaces' storage_options (Spark's
    Python workers do not see the test's AWS environment)."""
    from lance_partitioned.spark.storage_partitioned_join import join

    orders = orders_table(400)
    customers = customers_table(0, 200).rename_columns(["customer_id", "name"])
    o = make_ns(store.root("o"), orders, "bucket(customer_id, 4)", store.options())
    c = make_ns(store.root("c"), customers, "bucket(customer_id, 8)", store.options())
    df = join(spark, o, c, "customer_id", how, require_spj=True)
    assert df.columns[0] == "customer_id" and df.columns.count("customer_id") == 1
    assert_same(df, plain_join(spark, orders, customers, "customer_id", how))
