"""Create, write and read a namespace; the on-disk layout of seed 000 Appendices B and C."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections import Counter

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS_SCHEMA, local_only, make_events

import lance_partitioned as lp
from lance_partitioned.catalog.manifest import READ_COLUMNS


def rows_of(table: pa.Table) -> Counter:
    """A multiset of rows, for order-insensitive comparisons."""
    cols = sorted(table.column_names)
    return Counter(zip(*[table.column(c).to_pylist() for c in cols], strict=True))


def manifest_rows(root: str) -> list[dict]:
    return lance.dataset(os.path.join(root, "__manifest")).to_table().to_pylist()


@pytest.fixture
def ns(store, events):
    ns = lp.create(store.root("events"), EVENTS_SCHEMA, "year(event_date), country")
    ns.append(events)
    return ns


def test_round_trip(ns, events):
    assert rows_of(ns.scan().to_arrow()) == rows_of(events)
    assert ns.count() == events.num_rows
    batches = list(ns.scan(batch_size=7).to_batches())
    assert all(b.num_rows <= 7 for b in batches)
    assert rows_of(pa.Table.from_batches(batches)) == rows_of(events)
    assert ns.scan(columns=["id", "country"]).to_arrow().column_names == ["id", "country"]
    assert len(ns.scan().to_pandas()) == events.num_rows


def test_layout_matches_appendix_b_and_c(ns, store):
    root = ns.root
    dirs = sorted(d for d in store.listdir(root) if d != "__manifest")
    assert dirs, "leaf tables must have directories"
    for d in dirs:
        assert re.fullmatch(r"[0-9a-f]{8}_v1\$[a-z0-9]{16}\$[a-z0-9]{16}\$dataset", d), d
    rows = {r["object_id"]: r for r in manifest_rows(root)}
    assert rows["v1"]["object_type"] == "namespace"
    tables = [r for r in rows.values() if r["object_type"] == "table"]
    namespaces = [
        r for r in rows.values() if r["object_type"] == "namespace" and r["object_id"] != "v1"
    ]
    assert {t["location"] for t in tables} == set(dirs)
    for t in tables:
        parts = t["object_id"].split("$")
        assert parts[0] == "v1" and parts[-1] == "dataset" and len(parts) == 4
        assert t["read_version"] is not None and t["read_version"] >= 1
        # values inherited from both ancestor namespaces
        level1, level2 = rows["$".join(parts[:2])], rows["$".join(parts[:3])]
        assert level1["partition_field_event_date_year"] == t["partition_field_event_date_year"]
        assert level1["partition_field_country"] is None
        assert level2["partition_field_event_date_year"] == t["partition_field_event_date_year"]
        assert level2["partition_field_country"] == t["partition_field_country"]
        # metadata mirror (Appendix E form)
        meta = json.loads(t["metadata"])
        assert meta["partition.event_date_year"] == str(t["partition_field_event_date_year"])
        # NULL has no key (DirectoryNamespace rejects JSON null in properties)
        assert meta.get("partition.country") == t["partition_field_country"]
        assert json.loads(level1["metadata"]) == {
            "partition.event_date_year": str(t["partition_field_event_date_year"])
        }
    assert len(namespaces) == len({r["object_id"] for r in namespaces})
    schema = lance.dataset(os.path.join(root, "__manifest")).schema
    assert schema.field("read_version").type == pa.uint64()
    for c in READ_COLUMNS:
        assert c in schema.names
    assert schema.field("partition_field_event_date_year").type == pa.int32()
    assert schema.field("partition_field_country").type == pa.string()
    meta = lance.dataset(os.path.join(root, "__manifest")).metadata
    assert json.loads(meta["partition_spec_v1"])["fields"][0]["transform"] == {"type": "year"}
    assert json.loads(meta["schema"])["fields"][0]["metadata"] == {"lance:field_id": "0"}


@local_only
def test_append_reuses_partitions_including_null(ns):
    before = {r["object_id"] for r in manifest_rows(ns.root)}
    parts_before = ns.partitions().num_rows
    result = ns.append(make_events(100, start_id=1000))
    after = manifest_rows(ns.root)
    assert result.new_partitions == 0
    assert ns.partitions().num_rows == parts_before
    assert {r["object_id"] for r in after} == before
    null_tables = [
        r for r in after if r["object_type"] == "table" and r["partition_field_country"] is None
    ]
    assert len(null_tables) == len({r["partition_field_event_date_year"] for r in null_tables})
    assert ns.count() == 300


@local_only
def test_one_manifest_commit_per_write(ns):
    v = ns.version
    ns.append(make_events(50, start_id=5000))
    assert ns.version == v + 1
    tables = [r for r in manifest_rows(ns.root) if r["object_type"] == "table"]
    for t in tables:
        leaf = lance.dataset(os.path.join(ns.root, t["location"]))
        assert t["read_version"] == leaf.version


def test_overwrite_and_dynamic_overwrite(ns, events):
    fr_2025 = make_events(40, start_id=9000)
    fr_2025 = fr_2025.filter(pc.equal(fr_2025["country"], "FR"))
    ns.overwrite(fr_2025, dynamic=True)
    got = ns.scan().to_arrow()

    def keys(t):
        return {
            (d.year, c)
            for d, c in zip(t["event_date"].to_pylist(), t["country"].to_pylist(), strict=True)
        }

    replaced = keys(fr_2025)
    expected = [
        r for r in events.to_pylist() if (r["event_date"].year, r["country"]) not in replaced
    ]
    expected += fr_2025.to_pylist()
    assert rows_of(got) == rows_of(pa.Table.from_pylist(expected, schema=EVENTS_SCHEMA))
    ns.overwrite(fr_2025)
    assert rows_of(ns.scan().to_arrow()) == rows_of(fr_2025)
    assert {r["object_type"] for r in manifest_rows(ns.root)} == {"namespace", "table"}
    assert ns.partitions().num_rows == len(keys(fr_2025))


@local_only
def test_time_travel_by_manifest_version(ns, events):
    v = ns.version
    ns.append(make_events(10, start_id=7000))
    old = lp.open(ns.root, version=v)
    assert rows_of(old.scan().to_arrow()) == rows_of(events)
    assert lp.open(ns.root).count() == events.num_rows + 10
    assert [x["version"] for x in ns.versions()][-1] == ns.version


def test_every_listed_version_opens(tmp_path):
    """Every ``__manifest`` version on disk is listed and opens (``create`` is one
    commit; a root created in two commits is in tests/test_create.py)."""
    schema = pa.schema([("id", pa.int64()), ("k", pa.int64())])
    ns = lp.create(str(tmp_path / "ns"), schema, "k")
    ns.append(pa.table({"id": [1, 2], "k": [1, 2]}, schema=schema))
    ns.delete("k = 1")
    listed = [v["version"] for v in ns.versions()]
    on_disk = [v["version"] for v in lance.dataset(str(tmp_path / "ns" / "__manifest")).versions()]
    assert listed == on_disk and listed[-1] == ns.version
    assert [lp.open(ns.root, version=v).count() for v in listed] == [0, 2, 1]
    with pytest.raises(lp.VersionNotFoundError, match="the oldest version kept is 2"):
        lp.open(ns.root, version=1)


@local_only
def test_appendix_d_pruning_one_spec(ns):
    plan = ns.plan("event_date = '2025-12-10' AND country = 'US'")
    assert [
        (p.partition_values["event_date_year"], p.partition_values["country"]) for p in plan
    ] == [(2025, "US")]
    got = ns.scan("event_date = DATE '2025-12-10' AND country = 'US'").to_arrow()
    assert all(d == dt.date(2025, 12, 10) for d in got["event_date"].to_pylist())


@local_only
def test_plan_lists_object_id_location_read_version(ns):
    plan = ns.plan()
    assert len(plan) == ns.partitions().num_rows
    for task in plan:
        assert task.object_id.endswith("$dataset")
        assert task.location.endswith(task.object_id)
        assert lance.dataset(task.uri, version=task.read_version).version == task.read_version


def test_open_errors(store):
    with pytest.raises(lp.NotAPartitionedNamespaceError, match="no __manifest"):
        lp.open(store.root("nothing"))
    from lance.namespace import CreateNamespaceRequest, DirectoryNamespace

    DirectoryNamespace(root=store.root("plain")).create_namespace(CreateNamespaceRequest(id=["a"]))
    with pytest.raises(lp.NotAPartitionedNamespaceError, match="not a partitioned namespace"):
        lp.open(store.root("plain"))
    ns = lp.create(store.root("x"), EVENTS_SCHEMA, "country")
    with pytest.raises(lp.NamespaceExistsError):
        lp.create(ns.root, EVENTS_SCHEMA, "country")


@local_only
def test_feature_flags_are_honoured(store, events):
    ns = lp.create(store.root("f"), EVENTS_SCHEMA, "country")
    lance.dataset(os.path.join(ns.root, "__manifest")).update_metadata(
        {"lance.namespace.manifest.writer_feature_flags": "4"}
    )
    lp.open(ns.root).count()  # reading is fine
    with pytest.raises(lp.UnsupportedFeatureError, match="refusing to write"):
        lp.open(ns.root).append(events)
    lance.dataset(os.path.join(ns.root, "__manifest")).update_metadata(
        {"lance.namespace.manifest.reader_feature_flags": "1"}
    )
    with pytest.raises(lp.UnsupportedFeatureError, match="reader features"):
        lp.open(ns.root)


@local_only
def test_unpartitioned_namespace(store, events):
    ns = lp.create(store.root("flat"), EVENTS_SCHEMA, "")
    ns.append(events)
    ns.append(events)
    assert ns.partitions().num_rows == 1
    assert ns.count() == 2 * events.num_rows


@local_only
def test_view_typed_columns_are_written_and_read(store):
    # pyarrow has no take kernel for view types: the partition split must cope
    # (tpchgen-cli's Parquet reads back as string_view)
    schema = pa.schema([("k", pa.string_view()), ("b", pa.binary_view()), ("i", pa.int64())])
    data = pa.table(
        {
            "k": pa.array(["x", "y", "x", None, "y"], pa.string_view()),
            "b": pa.array([b"1", b"2", None, b"4", b"5"], pa.binary_view()),
            "i": list(range(5)),
        },
        schema=schema,
    )
    ns = lp.create(store.root("views"), schema, "k, bucket(4, b)")
    ns.append(data)
    got = ns.scan().to_arrow()
    assert got.schema == schema
    assert sorted(got.to_pylist(), key=lambda r: r["i"]) == data.to_pylist()
    # two partitions (bucket of b): rows come in manifest order of the leaves
    assert sorted(ns.scan("k = 'y'", columns=["i"]).to_arrow()["i"].to_pylist()) == [1, 4]
    leaves = [lance.dataset(task.uri).to_table() for task in ns.plan("k = 'x'")]
    assert sorted(i for t in leaves for i in t["i"].to_pylist()) == [0, 2]


@local_only
def test_streaming_input_and_bounded_buffers(store):
    ns = lp.create(store.root("s"), EVENTS_SCHEMA, "country, year(event_date)")

    def gen():
        for i in range(10):
            yield from make_events(100, start_id=i * 100).to_batches(max_chunksize=30)

    # a tiny budget forces many flushes: several files per partition, all committed once
    result = ns.append(gen(), max_buffer_bytes=4096)
    assert result.rows == 1000
    assert ns.count() == 1000
    ids = sorted(ns.scan(columns=["id"]).to_arrow()["id"].to_pylist())
    assert ids == list(range(1000))
    reader = pa.RecordBatchReader.from_batches(EVENTS_SCHEMA, make_events(10, 5000).to_batches())
    ns.append(reader)
    assert ns.count() == 1010


@local_only
def test_describe_and_properties(ns):
    text = ns.describe()
    assert "year(event_date) AS event_date_year, country" in text
    assert "Partitions:" in text
    assert json.loads(ns.namespace_properties(["v1"])["partition_spec"]) == ns.spec.to_json()
    leaf = ns.plan()[0]
    level1 = leaf.object_id.split("$")[:2]
    assert ns.namespace_properties(level1) == {
        "partition.event_date_year": str(leaf.partition_values["event_date_year"])
    }
