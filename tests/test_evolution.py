"""Partition evolution, schema evolution and seed 003 §4 schema consistency."""

from __future__ import annotations

import datetime as dt
import os

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import local_only, tree_digest

import lance_partitioned as lp

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("event_date", pa.date32()),
        pa.field("country", pa.string()),
    ]
)


def events(dates_countries, start=0):
    return pa.table(
        {
            "id": list(range(start, start + len(dates_countries))),
            "event_date": [d for d, _ in dates_countries],
            "country": [c for _, c in dates_countries],
        },
        schema=SCHEMA,
    )


D = dt.date


@pytest.fixture
def appendix_d(store):
    """v1 partitions by event_date, v2 by year(event_date), country (seed 000 Appendix D)."""
    ns = lp.create(store.root("d"), SCHEMA, "event_date")
    v1_rows = [
        (D(2025, 12, 10), "US"),
        (D(2025, 12, 10), "FR"),
        (D(2025, 12, 11), "US"),
        (D(2024, 1, 1), "US"),
    ]
    ns.append(events(v1_rows))
    ns.evolve_spec("year(event_date) AS event_year, country")
    v2_rows = [
        (D(2025, 12, 10), "US"),
        (D(2025, 3, 1), "US"),
        (D(2025, 12, 10), "CN"),
        (D(2026, 1, 1), "US"),
    ]
    ns.append(events(v2_rows, start=100))
    return ns


@local_only
def test_appendix_d_as_written(appendix_d):
    ns = appendix_d
    assert sorted(ns.specs) == [1, 2]
    plan = ns.plan("event_date = '2025-12-10' AND country = 'US'")
    got = sorted((t.spec_id, tuple(t.partition_values.items())) for t in plan)
    assert got == [
        (1, (("event_date", D(2025, 12, 10)),)),
        (2, (("event_year", 2025), ("country", "US"))),
    ]
    rows = ns.scan("event_date = '2025-12-10' AND country = 'US'").to_arrow()
    assert sorted(rows["id"].to_pylist()) == [0, 100]
    # v1 and v2 rows stay under their own versions; nothing was rewritten
    by_spec = {}
    for t in ns.plan():
        by_spec.setdefault(t.spec_id, 0)
        by_spec[t.spec_id] += 1
    assert by_spec == {1: 3, 2: 3}
    assert ns.count() == 8


@local_only
def test_manifest_gains_columns_and_field_ids_are_reused(appendix_d):
    ns = appendix_d
    schema = lance.dataset(os.path.join(ns.root, "__manifest")).schema
    for c in (
        "partition_field_event_date",
        "partition_field_event_year",
        "partition_field_country",
    ):
        assert c in schema.names
    v3 = ns.evolve_spec("country, event_date")
    assert [f.field_id for f in v3.fields] == ["country", "event_date"]
    assert v3.fields[1] == ns.specs[1].fields[0]
    ns.append(events([(D(2027, 5, 5), "US")], start=200))
    assert {t.spec_id for t in ns.plan("event_date = '2027-05-05'")} == {3}
    assert ns.count() == 9
    assert ns.validate() == []


def test_invalid_evolution_changes_nothing(appendix_d):
    ns = appendix_d
    version = lp.open(ns.root).version
    with pytest.raises(lp.SpecError, match="already used"):
        ns.evolve_spec("bucket(4, id) AS country")
    with pytest.raises(lp.SpecError, match="no column named 'nope'"):
        ns.evolve_spec("year(nope)")
    with pytest.raises(lp.SchemaError, match="current partition spec v2 partitions by it"):
        ns.drop_column("country")
    with pytest.raises(lp.SchemaError, match="only lossless widening"):
        ns.widen_column("id", pa.int32())
    with pytest.raises(lp.SchemaError, match="already exists"):
        ns.add_column("country", pa.string())
    with pytest.raises(lp.SchemaError, match="non-nullable"):
        ns.add_column("x", pa.int64(), nullable=False)
    assert lp.open(ns.root).version == version


def test_add_column_reads_null_from_old_leaves(appendix_d):
    ns = appendix_d
    ns.add_column("score", pa.float64())
    assert ns.schema.field_id("score") == 3
    t = ns.scan(columns=["id", "score"]).to_arrow()
    assert t["score"].null_count == t.num_rows
    fresh = events([(D(2030, 1, 1), "NZ")], start=300).append_column("score", pa.array([1.5]))
    ns.append(fresh)
    assert ns.scan("score > 1", columns=["id"]).to_arrow()["id"].to_pylist() == [300]
    assert ns.count("score IS NULL") == 8


@local_only
def test_rename_keeps_pruning(appendix_d):
    ns = appendix_d
    ns.rename_column("country", "nation")
    assert ns.spec.fields[1].source_ids == (2,)
    plan = ns.plan("nation = 'US' AND event_date = '2025-12-10'")
    assert {t.spec_id for t in plan} == {1, 2} and len(plan) == 2
    got = ns.scan("nation = 'US'").to_arrow()
    assert got.column_names == ["id", "event_date", "nation"]
    assert sorted(got["id"].to_pylist()) == [0, 2, 3, 100, 101, 103]
    with pytest.raises(lp.FilterError, match="unknown column 'country'"):
        ns.scan("country = 'US'")
    ns.append(pa.table({"id": [400], "event_date": [D(2025, 1, 1)], "nation": ["US"]}))
    assert ns.count("nation = 'US'") == 7


@local_only
def test_drop_column_and_older_specs_read_it_as_null(appendix_d):
    ns = appendix_d
    ns.evolve_spec("year(event_date) AS event_year")
    ns.drop_column("country")
    assert "country" not in ns.schema.names
    assert ns.count() == 8
    # v2 still partitions by the dropped column's id: its partitions stay readable
    assert ns.scan("event_date = '2025-12-10'").to_arrow().num_rows == 4
    # writing into an old leaf that still has the column writes NULL there
    ns.append(pa.table({"id": [500], "event_date": [D(2026, 6, 1)]}))
    assert ns.count("event_date = '2026-06-01'") == 1


@local_only
def test_widening_keeps_bucket_values(store):
    schema = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.float32())])
    ns = lp.create(store.root("w"), schema, "bucket(8, k)")
    ns.append(
        pa.table({"k": pa.array(range(100), pa.int32()), "v": pa.array([1.0] * 100, pa.float32())})
    )
    before = {t.object_id: t.partition_values for t in ns.plan()}
    ns.widen_column("k", pa.int64())
    ns.widen_column("v", pa.float64())
    ns.append(pa.table({"k": pa.array(range(100), pa.int64()), "v": pa.array([2.0] * 100)}))
    after = {t.object_id: t.partition_values for t in ns.plan()}
    assert after == before  # the same 8 partitions, no new ones
    t = ns.scan().to_arrow()
    assert t.schema.field("k").type == pa.int64() and t.schema.field("v").type == pa.float64()
    for k in (0, 17, 99):
        assert ns.count(f"k = {k}") == 2
        assert len(ns.plan(f"k = {k}")) == 1
    # a value only the wider type holds goes into an existing partition: the write
    # first widens that leaf's column (issue 28 B5), keeping its field id
    ns.append(pa.table({"k": pa.array([2**40], pa.int64()), "v": [1.0]}))
    assert ns.count(f"k = {2**40}") == 1
    (task,) = ns.plan(f"k = {2**40}")
    leaf = lance.dataset(task.uri, version=task.read_version)
    assert leaf.schema.field("k").type == pa.int64()
    assert {f.name(): f.id() for f in leaf.lance_schema.fields()} == {"k": 0, "v": 1}


@local_only
def test_widening_widens_identity_and_truncate_partition_columns(store):
    schema = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64())])
    ns = lp.create(store.root("w"), schema, "k, truncate(10, k) AS kt, bucket(4, k) AS kb")
    ns.append(pa.table({"k": pa.array([1, 12], pa.int32()), "v": [1, 2]}))
    before = lp.open(ns.root).version
    ns.widen_column("k", pa.int64())
    spec = lp.open(ns.root).specs[1]
    types = {f.field_id: f.result_type for f in spec.fields}
    assert types == {"k": pa.int64(), "kt": pa.int64(), "kb": pa.int32()}
    manifest = lance.dataset(os.path.join(ns.root, "__manifest")).schema
    assert manifest.field("partition_field_k").type == pa.int64()
    assert manifest.field("partition_field_kt").type == pa.int64()
    assert manifest.field("partition_field_kb").type == pa.int32()
    # a value only the wider type holds gets its own partition, and prunes
    big = 2**40 + 3
    ns.append(pa.table({"k": pa.array([big, 1], pa.int64()), "v": [3, 4]}))
    [task] = ns.plan(f"k = {big}")
    assert (task.partition_values["k"], task.partition_values["kt"]) == (big, big - big % 10)
    assert sorted(ns.scan().to_arrow()["v"].to_pylist()) == [1, 2, 3, 4]
    assert ns.count("k = 1") == 2 and len(ns.plan("k = 1")) == 1
    # the write widened partition k=1's leaf; k=12's still lags the widening
    (lagging,) = ns.validate()
    assert "int32 in the leaf, which lags the namespace's int64" in lagging
    assert ns.plan("k = 12")[0].object_id in lagging
    # the version before the change still reads as it was
    old = lp.open(ns.root, version=before)
    assert old.specs[1].fields[0].result_type == pa.int32()
    assert sorted(old.scan().to_arrow()["k"].to_pylist()) == [1, 12]


@local_only
def test_section4_write_new_column_into_old_leaf(appendix_d):
    # issue 10 item 9: the leaf gains the column the namespace added (no rewrite needed)
    ns = appendix_d
    ns.add_column("score", pa.float64())
    old_partition = (D(2025, 12, 10), "US")
    ns.append(events([old_partition], start=600).append_column("score", pa.array([3.0])))
    ns.append(events([old_partition], start=601))
    got = ns.to_arrow(filter="id >= 600").sort_by("id")
    assert got["score"].to_pylist() == [3.0, None]
    assert ns.count("score = 3.0") == 1 and ns.validate() == []


@local_only
def test_section4_read_impossible_cast_is_reported(store):
    ns = lp.create(store.root("bad"), SCHEMA, "country")
    ns.append(events([(D(2025, 1, 1), "US")]))
    (task,) = ns.plan()
    # a foreign tool rewrites the leaf with an incompatible type for event_date
    bad = pa.table({"id": [1], "event_date": ["not a date"], "country": ["US"]})
    leaf = lance.write_dataset(bad, os.path.join(ns.root, task.location), mode="overwrite")
    base = ns.manifest.dataset()
    row = base.to_table(filter=f"object_id = '{task.object_id}'")
    row = row.set_column(
        row.schema.get_field_index("read_version"),
        "read_version",
        pa.array([leaf.version], pa.uint64()),
    )
    ns.manifest.commit(base, row)
    with pytest.raises(lp.SchemaError, match="column 'event_date'"):
        lp.open(ns.root).scan().to_arrow()
    problems = lp.open(ns.root).validate()
    assert len(problems) == 1 and "'event_date' is string in the leaf but date32" in problems[0]


@local_only
def test_expression_fields_evolve_and_prune(appendix_d):
    ns = appendix_d
    spec = {
        "id": 3,
        "fields": [
            {
                "field_id": "id_hash",
                "source_ids": [0],
                "expression": "murmur3(col0)",
                "result_type": {"type": "int32"},
            },
        ],
    }
    ns.evolve_spec(spec)
    ns.append(events([(D(2028, 1, 1), "US"), (D(2028, 1, 2), "FR")], start=700))
    plan = ns.plan("id = 700")
    assert [t.spec_id for t in plan if t.spec_id == 3] == [3]
    assert ns.scan("id = 700").to_arrow()["id"].to_pylist() == [700]
    assert pc.sum(pc.equal(ns.scan().to_arrow()["id"], 701)).as_py() == 1


def test_rewrite_old_partitions_into_the_current_spec(appendix_d):
    ns = appendix_d
    before = sorted(ns.scan().to_arrow()["id"].to_pylist())
    version = ns.version
    result = ns.rewrite_partitions("event_date >= '2025-01-01'")
    assert result.version == version + 1  # one atomic __manifest commit
    specs = {(t.spec_id, tuple(t.partition_values.values())) for t in ns.plan()}
    # the 2024 partition (filtered out) stays in v1; everything else is now v2
    assert {s for s, _ in specs} == {1, 2}
    assert [v for s, v in specs if s == 1] == [(D(2024, 1, 1),)]
    assert sorted(ns.scan().to_arrow()["id"].to_pylist()) == before
    # readers pinned to the old version still see the old layout
    old = lp.open(ns.root, version=version)
    assert sorted(old.scan().to_arrow()["id"].to_pylist()) == before
    assert len([t for t in old.plan() if t.spec_id == 1]) == 3
    ns.rewrite_partitions()
    assert {t.spec_id for t in ns.plan()} == {2}
    assert sorted(ns.scan().to_arrow()["id"].to_pylist()) == before
    assert ns.plan("event_date = '2025-12-10' AND country = 'US'")[0].spec_id == 2


@local_only  # pruning and residual logic: the same on every store
def test_pruning_and_residuals_follow_source_field_ids_after_renames(store):
    """Partition fields are matched to filter columns by source field id, not by name.

    ``country`` and ``d`` are renamed (``nation``, ``day``) and new columns take the
    old names. The partition fields keep their original names (``country``,
    ``d_year``, ``d_month``), so anything that matched by a name would prune the
    new ``country``/``d`` columns through fields that partition other data. Expected
    partitions are written out by hand from the rows; expected rows come from
    pyarrow.compute on the same rows.
    """
    schema = pa.schema(
        [pa.field("id", pa.int64()), pa.field("country", pa.string()), pa.field("d", pa.date32())]
    )
    ns = lp.create(store.root("ns"), schema, "country, year(d), month(d)")
    first = [
        (0, "US", D(2025, 1, 15)),
        (1, "US", D(2025, 3, 10)),
        (2, "FR", D(2025, 3, 20)),
        (3, "FR", D(2025, 4, 5)),
        (4, "CN", D(2025, 6, 30)),
        (5, "US", D(2024, 12, 31)),
    ]
    ns.append(
        pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in first], schema)
    )
    ns.rename_column("country", "nation")
    ns.rename_column("d", "day")
    ns.add_column("country", pa.string())
    ns.add_column("d", pa.date32())
    # the new columns disagree with the partitioned ones
    second = [
        (10, "FR", D(2025, 3, 1), "US", D(2025, 1, 1)),
        (11, "CN", D(2025, 4, 30), "US", None),
        (12, "US", D(2025, 5, 1), "FR", D(2025, 3, 15)),
    ]
    names = ["id", "nation", "day", "country", "d"]
    ns.append(
        pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in second]).cast(
            ns.schema.arrow
        )
    )
    rows = pa.Table.from_pylist(
        [dict(zip(names, (*r, None, None), strict=True)) for r in first]
        + [dict(zip(names, r, strict=True)) for r in second],
        pa.schema(
            [
                ("id", pa.int64()),
                ("nation", pa.string()),
                ("day", pa.date32()),
                ("country", pa.string()),
                ("d", pa.date32()),
            ]
        ),
    )
    every = {
        ("US", 2025, 1), ("US", 2025, 3), ("FR", 2025, 3), ("FR", 2025, 4),
        ("CN", 2025, 6), ("US", 2024, 12), ("CN", 2025, 4), ("US", 2025, 5),
    }  # fmt: skip
    march_april = (pc.field("day") >= D(2025, 3, 1)) & (pc.field("day") < D(2025, 5, 1))
    cases = [
        # (filter, pyarrow oracle, partitions kept by hand, residual of every kept leaf)
        ("nation = 'US'", pc.field("nation") == "US",
         {("US", 2025, 1), ("US", 2025, 3), ("US", 2024, 12), ("US", 2025, 5)}, {None}),
        ("country = 'US'", pc.field("country") == "US", every, {"country = 'US'"}),
        ("day >= '2025-03-01' AND day < '2025-05-01'", march_april,
         {("US", 2025, 3), ("FR", 2025, 3), ("FR", 2025, 4), ("CN", 2025, 4)}, {None}),
        ("d >= '2025-03-01' AND d < '2025-05-01'",
         (pc.field("d") >= D(2025, 3, 1)) & (pc.field("d") < D(2025, 5, 1)), every,
         {"d >= DATE '2025-03-01' AND d < DATE '2025-05-01'"}),
        ("nation = 'US' AND day < '2025-03-01'",
         (pc.field("nation") == "US") & (pc.field("day") < D(2025, 3, 1)),
         {("US", 2025, 1), ("US", 2024, 12)}, {None}),
    ]  # fmt: skip
    assert len(ns.plan()) == len(every)
    for flt, oracle, kept, residuals in cases:
        plan = ns.plan(flt)
        got = {tuple(t.partition_values[k] for k in ("country", "d_year", "d_month")) for t in plan}
        assert got == kept, flt
        assert {t.filter_sql for t in plan} == residuals, flt
        want = sorted(rows.filter(oracle)["id"].to_pylist())
        assert sorted(ns.scan(flt).to_arrow()["id"].to_pylist()) == want, flt
        assert ns.count(flt) == len(want), flt


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda ns: ns.rename_column("v", "v`2"), "backtick"),
        (lambda ns: ns.add_column("a`b", pa.int64()), "backtick"),
        (lambda ns: ns.add_column("a.b", pa.int64()), "struct path"),
        (lambda ns: ns.add_column("s", pa.struct([("x`y", pa.int64())])), "backtick"),
        (lambda ns: ns.rename_column("v", ""), "empty"),
    ],
)
def test_names_lance_cannot_read_back_are_refused(tmp_path, change, message):
    """A rename to ``v`2`` used to be accepted; every scan of a leaf written after it
    then failed in Lance ("No field named"), and renaming back did not help."""
    schema = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("v", pa.int32())])
    ns = lp.create(str(tmp_path / "ns"), schema, "k")
    ns.append(pa.table({"id": [1, 2], "k": [0, 1], "v": [10, 20]}, schema=schema))
    before = tree_digest(tmp_path / "ns")
    with pytest.raises(lp.SchemaError, match=message):
        change(ns)
    assert tree_digest(tmp_path / "ns") == before
    assert lp.open(str(tmp_path / "ns")).to_arrow().num_rows == 2


@pytest.mark.parametrize(
    "schema",
    [
        pa.schema([("x.y", pa.int64()), ("k", pa.int64())]),
        pa.schema([("a`b", pa.int64()), ("k", pa.int64())]),
        pa.schema([("s", pa.struct([("a`b", pa.int64())])), ("k", pa.int64())]),
    ],
)
def test_create_refuses_names_lance_cannot_store(tmp_path, schema):
    """``x.y`` used to be accepted by create, after which every append failed."""
    with pytest.raises(lp.SchemaError, match=r"backtick|struct path"):
        lp.create(str(tmp_path / "ns"), schema, "k")
    assert not (tmp_path / "ns").exists()


def test_write_into_a_lagging_leaf_and_drop_column_on_every_store(store):
    """B5 and B6 on local files and S3: the widening's new files, the Project of a drop."""
    schema = pa.schema(
        [pa.field("p", pa.int32()), pa.field("k", pa.int32()), pa.field("c", pa.string())]
    )
    ns = lp.create(store.root("lag"), schema, "p")
    ns.append(pa.table({"p": [1, 1, 2], "k": [1, 2, 3], "c": ["x", "y", "z"]}, schema=schema))
    ns.delete("k = 2")  # a deletion file the widening must keep
    ns.widen_column("k", pa.int64())
    ns.append(pa.table({"p": pa.array([1], pa.int32()), "k": [3_000_000_000], "c": ["w"]}))
    assert sorted(ns.scan().to_arrow()["k"].to_pylist()) == [1, 3, 3_000_000_000]
    assert ns.count("k > 2147483647") == 1
    ns.drop_column("c")
    ns.add_column("c", pa.string())
    assert ns.scan().to_arrow()["c"].null_count == 3
    assert [p for p in ns.validate() if "lags" not in p] == []
