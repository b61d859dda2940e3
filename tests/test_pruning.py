"""Partition pruning through every transform: which partitions does a filter keep?

Each case checks two things: pruning never drops a partition that holds a
matching row (correctness), and it keeps exactly the partitions expected
(effectiveness).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute  # noqa: F401
import pytest
from datafusion import SessionContext

import lance_partitioned as lp
from lance_partitioned.format.filters.bind import bind
from lance_partitioned.format.filters.parse import parse_filter
from lance_partitioned.format.filters.render import to_sql

UTC = dt.timezone.utc

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("name", pa.string()),
        pa.field("n", pa.int32()),
    ]
)


def data() -> pa.Table:
    rows = []
    names = ["apple", "apricot", "banana", "blueberry", "cherry", None, "ap", "a%b_c"]
    for i in range(240):
        rows.append(
            {
                "id": i if i % 41 else None,
                "d": dt.date(2023, 1, 1) + dt.timedelta(days=i * 5),
                "ts": dt.datetime(2025, 1, 1, tzinfo=UTC) + dt.timedelta(hours=i * 7),
                "name": names[i % len(names)],
                "n": (i * 7) % 61 - 30,
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return data()


def make_ns(tmp_path_factory, spec: str, table: pa.Table) -> lp.PartitionedNamespace:
    root = str(tmp_path_factory.mktemp("prune") / "ns")
    ns = lp.create(root, SCHEMA, spec)
    ns.append(table)
    return ns


def key_of(task) -> tuple:
    return tuple(task.partition_values.values())


def oracle_ids(table: pa.Table, flt: str) -> list:
    """Ids of the rows of ``table`` that ``flt`` keeps, evaluated by DataFusion itself.

    The oracle is independent of our parser and binder. The filters here use UTC,
    date, string and integer columns only, where DataFusion reads every literal
    spelling as the same value pyarrow.compute would.
    """
    ctx = SessionContext()
    ctx.from_arrow(table, name="t")
    return ctx.sql(f"SELECT id FROM t WHERE {flt}").to_arrow_table()["id"].to_pylist()


def check(ns: lp.PartitionedNamespace, table: pa.Table, flt: str) -> set[tuple]:
    """Assert correctness and exact rows; return the selected partition keys."""
    selected = {key_of(t) for t in ns.plan(flt)}
    everything = {key_of(t) for t in ns.plan()}
    # partitions whose stored rows match (by the oracle) must all be selected
    for task in ns.plan():
        leaf = next(x for x in ns.snapshot.leaves() if x.object_id == task.object_id)
        if oracle_ids(ns.snapshot.open_leaf(leaf).to_table(), flt):
            assert key_of(task) in selected, (flt, key_of(task))
    got = ns.scan(flt).to_arrow()
    assert sorted(got["id"].to_pylist(), key=str) == sorted(oracle_ids(table, flt), key=str)
    assert selected <= everything
    return selected


@pytest.fixture(scope="module")
def by_year_month(tmp_path_factory, table):
    return make_ns(tmp_path_factory, "year(d), month(d)", table)


def test_year_range_keeps_later_years(tmp_path_factory, table):
    ns = make_ns(tmp_path_factory, "year(d)", table)
    assert {key_of(t) for t in ns.plan()} == {(2023,), (2024,), (2025,), (2026,)}
    assert check(ns, table, "d >= '2025-03-01'") == {(2025,), (2026,)}
    assert check(ns, table, "d < '2025-01-01'") == {(2023,), (2024,)}  # strict at a year boundary
    assert check(ns, table, "d <= '2025-01-01'") == {(2023,), (2024,), (2025,)}
    ts_ns = make_ns(tmp_path_factory, "year(ts)", table)
    assert check(ts_ns, table, "ts >= '2025-03-01'") == {(2025,)}
    assert check(ts_ns, table, "ts >= '2026-03-01'") == set()


def test_year_month_hierarchy_range(by_year_month, table):
    sel = check(by_year_month, table, "d >= '2023-03-01' AND d < '2023-06-01'")
    assert sel == {(2023, 3), (2023, 4), (2023, 5)}
    sel = check(by_year_month, table, "d > DATE '2024-11-15'")
    assert min(sel) == (2024, 11) and all(k >= (2024, 11) for k in sel)
    sel = check(by_year_month, table, "d BETWEEN '2023-12-20' AND '2024-01-10'")
    assert sel == {(2023, 12), (2024, 1)}


def test_time_equality_and_in(by_year_month, table):
    assert check(by_year_month, table, "d = '2023-02-05'") == {(2023, 2)}
    assert check(by_year_month, table, "d IN ('2023-02-05', '2024-07-04')") <= {
        (2023, 2),
        (2023, 7),
        (2024, 2),
        (2024, 7),
    }


def test_month_alone_does_not_prune_ranges(tmp_path_factory, table):
    ns = make_ns(tmp_path_factory, "month(d)", table)
    everything = {key_of(t) for t in ns.plan()}
    # month numbers wrap every year: a range says nothing about them on their own
    assert check(ns, table, "d >= '2024-06-01'") == everything
    assert check(ns, table, "d = '2024-06-05'") == {(6,)}


def test_day_and_hour_hierarchy(tmp_path_factory, table):
    ns = make_ns(tmp_path_factory, "year(ts), month(ts), day(ts), hour(ts)", table)
    sel = check(
        ns,
        table,
        "ts >= TIMESTAMP '2025-01-03 10:00:00+00:00' AND ts < TIMESTAMP '2025-01-04 00:00:00+00:00'",
    )
    assert sel and all((k[0], k[1], k[2]) == (2025, 1, 3) and k[3] >= 10 for k in sel)
    # naive literals on a UTC column are read as UTC
    assert check(ns, table, "ts = '2025-01-02 04:00:00'") == {(2025, 1, 2, 4)}


def test_hour_is_evaluated_in_the_column_zone(tmp_path):
    schema = pa.schema(
        [pa.field("id", pa.int64()), pa.field("ts", pa.timestamp("us", tz="America/New_York"))]
    )
    t = pa.table(
        {
            "id": [1],
            "ts": pa.array(
                [dt.datetime(2025, 1, 1, 23, 30, tzinfo=UTC)], pa.timestamp("us", tz="UTC")
            ),
        }
    ).cast(schema)
    ns = lp.create(str(tmp_path / "tz"), schema, "day(ts), hour(ts)")
    ns.append(t)
    assert [key_of(x) for x in ns.plan()] == [(1, 18)]  # 18:30 in New York, 23:30 UTC


def test_bucket_equality_and_in(tmp_path_factory, table):
    ns = make_ns(tmp_path_factory, "bucket(8, id)", table)
    from lance_partitioned.format.hashing import bucket

    b7 = bucket(pa.array([7], pa.int64()), 8)[0].as_py()
    assert check(ns, table, "id = 7") == {(b7,)}
    in_buckets = {bucket(pa.array([v], pa.int64()), 8)[0].as_py() for v in (3, 9, 100)}
    assert check(ns, table, "id IN (3, 9, 100)") == {(b,) for b in in_buckets}
    assert check(ns, table, "id IS NULL") == {(None,)}
    everything = {key_of(t) for t in ns.plan()}
    assert check(ns, table, "id > 7") == everything  # hashes carry no order


def test_multi_bucket_needs_every_source(tmp_path_factory, table):
    ns = make_ns(tmp_path_factory, "multi_bucket(4, id, name)", table)
    assert len(check(ns, table, "id = 1 AND name = 'apricot'")) == 1
    everything = {key_of(t) for t in ns.plan()}
    assert check(ns, table, "id = 1") == everything


def test_truncate_numbers(tmp_path_factory, table):
    ns = make_ns(tmp_path_factory, "truncate(10, n)", table)
    assert check(ns, table, "n = -11") == {(-10,)}  # truncated remainder: -11 → -10
    assert check(ns, table, "n = -1") == {(0,)}
    sel = check(ns, table, "n >= 15")
    assert sel == {(10,), (20,), (30,)} & {key_of(t) for t in ns.plan()}


def test_truncate_like_prefix(tmp_path_factory, table):
    ns = make_ns(tmp_path_factory, "truncate(2, name)", table)
    # a prefix at least W long pins one partition
    assert check(ns, table, "name LIKE 'apr%'") == {("ap",)}
    # a shorter prefix is a prefix match on the partition values
    assert check(ns, table, "name LIKE 'b%'") == {("bl",), ("ba",)}
    # wildcards inside the prefix are not a prefix: no pruning, still correct
    everything = {key_of(t) for t in ns.plan()}
    assert check(ns, table, "name LIKE 'a_r%'") == everything
    assert check(ns, table, "name = 'cherry'") == {("ch",)}


def test_identity_operators(tmp_path_factory, table):
    ns = make_ns(tmp_path_factory, "name", table)
    everything = {key_of(t) for t in ns.plan()}
    assert check(ns, table, "name = 'apple'") == {("apple",)}
    assert check(ns, table, "name != 'apple'") == everything - {("apple",), (None,)}
    assert check(ns, table, "name IN ('apple', 'ap')") == {("apple",), ("ap",)}
    assert check(ns, table, "name NOT IN ('apple', 'ap')") == everything - {
        ("apple",),
        ("ap",),
        (None,),
    }
    assert check(ns, table, "name IS NULL") == {(None,)}
    assert check(ns, table, "name IS NOT NULL") == everything - {(None,)}
    assert check(ns, table, "name > 'b' AND name < 'c'") == {("banana",), ("blueberry",)}
    assert check(ns, table, "name LIKE 'a\\%b%'") <= everything
    assert check(ns, table, "NOT (name = 'apple' OR name IS NULL)") == everything - {
        ("apple",),
        (None,),
    }
    assert check(ns, table, "name = 'apple' OR name = 'cherry'") == {("apple",), ("cherry",)}
    # an OR with an unprunable side prunes nothing
    assert check(ns, table, "name = 'apple' OR id = 3") == everything
    # opaque predicates do not prune and still filter rows exactly
    assert check(ns, table, "lower(name) = 'apple'") == everything
    assert (
        ns.scan("lower(name) = 'apple'").count()
        == table.filter(pa.compute.equal(table["name"], "apple")).num_rows
    )


def test_pruning_with_two_spec_fields_and_residual(by_year_month, table):
    sel = check(by_year_month, table, "d >= '2024-01-01' AND n > 0 AND name = 'apple'")
    assert all(k[0] >= 2024 for k in sel)


@pytest.mark.parametrize(
    "flt",
    [
        "d < '2023-03-15'",
        "d <= '2023-03-15'",
        "d > '2023-03-15'",
        "d >= '2023-03-15'",
        "d >= '2023-03-01' AND d <= '2023-03-31'",
        "d > '2023-02-28' AND d < '2023-04-01'",
        "d != '2023-03-06'",
        "d IS NOT NULL AND d < '2024-01-01'",
    ],
)
def test_residual_filters_at_and_inside_unit_boundaries(by_year_month, table, flt):
    # rows are every 5 days, so every month holds rows on both sides of the 15th
    check(by_year_month, table, flt)


def test_residual_filter_drops_only_guaranteed_conjuncts(by_year_month):
    from lance_partitioned.format.filters.visitor import to_nnf
    from lance_partitioned.format.pruning import residual_filter

    ns = by_year_month
    expr = to_nnf(bind(parse_filter("d >= '2023-03-01' AND d < '2023-06-01' AND n > 0"), ns.schema))
    spec = ns.spec

    def residual(year, month):
        rest = residual_filter(expr, spec, ns.schema, {"d_year": year, "d_month": month})
        return None if rest is None else to_sql(rest)

    assert residual(2023, 4) == "n > 0"
    assert residual(2023, 3) == "n > 0"  # starts exactly at the bound
    assert residual(2023, 6) == "d < DATE '2023-06-01' AND n > 0"
    assert residual(2023, 2) == "d >= DATE '2023-03-01' AND n > 0"
    mid = to_nnf(bind(parse_filter("d <= '2023-03-15'"), ns.schema))
    assert residual_filter(mid, spec, ns.schema, {"d_year": 2023, "d_month": 3}) is not None
    assert residual_filter(mid, spec, ns.schema, {"d_year": 2023, "d_month": 2}) is None


def test_manifest_query_is_composed_per_spec_version(tmp_path):
    """One __manifest query: ``left(object_id, n) = 'v<N>$'`` AND that spec's predicate, ORed."""
    import lance
    import pyarrow.compute as pc

    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "year(d)")
    ns.append(data().slice(0, 120))
    ns.evolve_spec("name")
    ns.append(data().slice(120))
    manifest = lance.dataset(str(tmp_path / "ns" / "__manifest")).to_table()
    tables = manifest.filter(pc.equal(manifest["object_type"], "table"))
    v1 = pc.starts_with(tables["object_id"], "v1$")
    v2 = pc.starts_with(tables["object_id"], "v2$")

    def selected(mask) -> set[str]:
        return set(tables.filter(mask)["object_id"].to_pylist())

    flt = "d >= '2024-01-01' AND name = 'apple'"
    expected = selected(
        pc.or_kleene(
            pc.and_kleene(v1, pc.greater_equal(tables["partition_field_d_year"], 2024)),
            pc.and_kleene(v2, pc.equal(tables["partition_field_name"], "apple")),
        )
    )
    assert expected and {t.object_id for t in ns.plan(flt)} == expected
    assert ns.scan(flt).explain().splitlines()[2] == (
        "__manifest predicate: ((left(object_id, 3) = 'v1$' AND (partition_field_d_year >= 2024)) "
        "OR (left(object_id, 3) = 'v2$' AND (partition_field_name = 'apple')))"
    )
    # a spec that prunes nothing keeps all its partitions
    flt = "name = 'apple'"
    expected = selected(
        pc.or_kleene(v1, pc.and_kleene(v2, pc.equal(tables["partition_field_name"], "apple")))
    )
    assert {t.object_id for t in ns.plan(flt)} == expected
    assert ns.scan(flt).explain().splitlines()[2] == (
        "__manifest predicate: (left(object_id, 3) = 'v1$' OR "
        "(left(object_id, 3) = 'v2$' AND (partition_field_name = 'apple')))"
    )


def test_bind_gives_every_column_reference_its_field_id(tmp_path):
    """Binding sets ``Ref.field_id`` to the namespace field id (read from the Arrow
    field metadata of the namespace schema, not from the binder) on every predicate."""
    from lance_partitioned.format.expressions import Ref
    from lance_partitioned.format.filters.visitor import predicates

    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "year(d)")
    ids = {f.name: int(f.metadata[b"lance:field_id"]) for f in ns.schema.arrow if f.metadata}
    assert set(ids) == set(SCHEMA.names)
    text = "NOT (id = 3 OR name LIKE 'a%') AND d IS NULL AND n IN (1, 2) AND ts > '2025-01-01Z'"
    parsed = predicates(parse_filter(text))
    assert {p.ref.field_id for p in parsed} == {None}
    bound = predicates(bind(parse_filter(text), ns.schema))
    assert [p.ref for p in bound] == [Ref(p.ref.name, ids[p.ref.name]) for p in parsed]
    # rendering reads the name only
    assert to_sql(bind(parse_filter("n IN (1, 2)"), ns.schema)) == "n IN (1, 2)"


@pytest.mark.parametrize(
    "op, literal", [("<", "24"), ("=", "7"), (">=", "-2"), ("<=", "99999999999999"), (">", "0")]
)
def test_an_integer_literal_prunes_a_decimal_partition_column(tmp_path, op, literal):
    """``qty < 24`` on decimal(15, 2): Arrow will not cast int64 to a type narrower
    than 19 digits, which left such predicates unbound, read by Lance in every leaf
    and pruning nothing. Expected rows and partitions: DataFusion's SQL on the data."""
    import decimal

    qty = [decimal.Decimal(v) / 4 for v in range(-20, 160, 3)]
    t = pa.table({"qty": pa.array(qty, pa.decimal128(15, 2)), "i": pa.array(range(len(qty)))})
    root = str(tmp_path / "ns")
    lp.create(root, t.schema, "qty").append(t)
    ctx = SessionContext()
    ctx.register_record_batches("t", [t.to_batches()])
    want = ctx.sql(f"SELECT i, qty FROM t WHERE qty {op} {literal}").to_arrow_table()
    scan = lp.open(root).scan(f"qty {op} {literal}")
    assert sorted(scan.to_arrow()["i"].to_pylist()) == sorted(want["i"].to_pylist())
    # one partition per distinct value: pruning keeps exactly the matching ones
    assert len(scan.leaves) == len(set(want["qty"].to_pylist()))
