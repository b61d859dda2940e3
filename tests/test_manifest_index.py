"""``__manifest`` scalar indexes, O(touched) commits, and ``__manifest`` kept small.

The expectations come from plain pylance (``list_indices``, ``explain_plan``,
``index_stats``, row counts) and pyarrow, never from our own planner.
"""

from __future__ import annotations

import datetime as dt
import os

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.catalog import manifest as manifest_module
from lance_partitioned.catalog import manifest_index
from lance_partitioned.catalog.snapshot import Snapshot

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64())])


def _man(root: str) -> lance.LanceDataset:
    return lance.dataset(os.path.join(root, "__manifest"))


def _indexed(ds: lance.LanceDataset) -> dict[str, str]:
    return {idx.field_names[0]: idx.index_type for idx in ds.describe_indices()}


@pytest.fixture
def small_thresholds(monkeypatch):
    monkeypatch.setattr(manifest_index, "INDEX_MIN_ROWS", 10)
    monkeypatch.setattr(manifest_index, "LOOSE_FRAGMENTS", 4)


def _rows(ids: list[int], ks: list[int]) -> pa.Table:
    return pa.table({"id": ids, "k": ks}, schema=SCHEMA)


def test_indexes_appear_once_manifest_is_big_and_plans_use_them(tmp_path, small_thresholds):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    assert _indexed(_man(ns.root)) == {}  # small: read whole, nothing to maintain
    ns.append(_rows(list(range(20)), list(range(20))))
    ds = _man(ns.root)
    assert _indexed(ds) == {"object_id": "BTree", "partition_field_k": "BTree"}
    # the query a one-partition plan sends to __manifest is answered by the index
    sql = ns.scan("k = 7").manifest_sql
    plan = ds.scanner(filter=f"object_type = 'table' AND ({sql})").explain_plan()
    assert "ScalarIndexQuery" in plan and "partition_field_k_idx" in plan
    assert "object_id_idx" not in plan  # the spec test is a refine filter, not a range scan
    expected = ds.to_table(filter="object_type = 'table' AND partition_field_k = 7")
    assert [t.object_id for t in ns.plan("k = 7")] == expected["object_id"].to_pylist()


def test_churn_keeps_manifest_compact_and_indexed(tmp_path, small_thresholds):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows(list(range(20)), list(range(20))))
    expected = _rows(list(range(20)), list(range(20)))
    for i in range(12):  # each commit adds a fragment and masks old rows
        extra = _rows([100 + i], [i % 3])
        ns.append(extra)
        expected = pa.concat_tables([expected, extra])
    ds = _man(ns.root)
    assert len(ds.get_fragments()) <= manifest_index.LOOSE_FRAGMENTS + 1
    assert set(_indexed(ds)) == {"object_id", "partition_field_k"}
    assert ds.stats.index_stats("partition_field_k_idx")["num_unindexed_fragments"] <= 4
    got = lp.open(ns.root).to_arrow().sort_by("id")
    assert got.equals(expected.sort_by("id"))
    assert lp.open(ns.root).count("k = 1") == pc.sum(pc.equal(expected["k"], 1)).as_py()


def test_compact_rewrites_manifest_and_keeps_every_row_indexed(tmp_path, small_thresholds):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows(list(range(20)), list(range(20))))
    for i in range(3):
        ns.append(_rows([50 + i], [i]))
    before = len(_man(ns.root).get_fragments())
    ns.compact()
    ds = _man(ns.root)
    # small fragments merged, masked rows dropped
    assert len(ds.get_fragments()) < before
    assert all(f.metadata.deletion_file is None for f in ds.get_fragments())
    for name in ("object_id_idx", "partition_field_k_idx"):
        stats = ds.stats.index_stats(name)
        assert stats["num_unindexed_rows"] == 0 and stats["num_indexed_rows"] == ds.count_rows()
    # an index on a compacted table still finds the right rows
    hit = ds.to_table(filter="partition_field_k = 2 AND object_type = 'table'")
    assert hit.num_rows == 1 and hit["partition_field_k"].to_pylist() == [2]


def test_a_new_spec_columns_are_indexed_too(tmp_path, small_thresholds):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows(list(range(20)), list(range(20))))
    ns.evolve_spec("bucket(4, id)")
    ds = _man(ns.root)
    (bucket_col,) = [
        c for c in ds.schema.names if c.startswith("partition_field_") and c != "partition_field_k"
    ]
    assert bucket_col in _indexed(ds)


def test_a_small_append_reads_only_the_rows_it_touches(tmp_path, monkeypatch):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows(list(range(30)), list(range(30))))

    def whole_spec(self, spec_id):
        raise AssertionError("a small append read every row of the spec")

    whole = Snapshot.leaves

    def leaves(self, filter=None):
        assert filter is not None, "a small append read every leaf"
        return whole(self, filter)

    monkeypatch.setattr(Snapshot, "leaves_of_spec", whole_spec)
    monkeypatch.setattr(Snapshot, "namespace_rows", whole_spec)
    monkeypatch.setattr(Snapshot, "leaves", leaves)
    ns = lp.open(ns.root)
    ns.append(_rows([100, 101], [5, 99]))  # one existing partition, one new
    monkeypatch.undo()
    got = lp.open(ns.root)
    assert got.count() == 32 and got.count("k = 5") == 2
    assert len(got.plan()) == 31


@pytest.mark.parametrize(
    "first",
    [
        pa.array([dt.date(2024, 1, 1), None, dt.date(2024, 1, 2)], pa.date32()),
        pa.array(["a", None, "b'c"], pa.string()),
        pa.array([1.5, None, -0.0], pa.float64()),  # floats: looked up by a full read
    ],
)
def test_keys_looked_up_lazily_never_duplicate_a_partition(tmp_path, first):
    schema = pa.schema([("id", pa.int64()), ("a", first.type), ("b", pa.int32())])
    ns = lp.create(str(tmp_path / "ns"), schema, "a, b")

    def batch(ids: list[int]) -> pa.Table:
        n = len(ids)
        a = pa.array([first[i % 3].as_py() for i in range(n)], first.type)
        b = pa.array([[1, None][i % 2] for i in range(n)], pa.int32())
        return pa.table({"id": ids, "a": a, "b": b}, schema=schema)

    ns.append(batch(list(range(6))))
    ns.append(batch(list(range(6, 12))))  # every key exists already
    ns.append(batch(list(range(12, 13))))
    rows = lance.dataset(os.path.join(ns.root, "__manifest")).to_table(
        filter="object_type = 'table'"
    )
    # as many leaves as distinct (a, b) keys of the data (NULL is a value too)
    data = lp.open(ns.root).to_arrow()
    keys = {(repr(a), b) for a, b in zip(data["a"].to_pylist(), data["b"].to_pylist(), strict=True)}
    assert rows.num_rows == len(keys) == 6
    assert data.num_rows == 13


def test_every_kind_of_commit_works_on_an_indexed_manifest(tmp_path, small_thresholds):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows(list(range(20)), list(range(20))))
    assert _indexed(_man(ns.root))
    ns.overwrite(_rows([100, 101], [3, 30]), dynamic=True)
    ns.delete("k = 4")
    ns.evolve_spec("bucket(2, id)")
    ns.append(_rows([200, 201], [0, 1]))
    ns.rewrite_partitions()
    expected = pa.concat_tables(
        [
            _rows(
                [i for i in range(20) if i not in (3, 4)], [i for i in range(20) if i not in (3, 4)]
            ),
            _rows([100, 101, 200, 201], [3, 30, 0, 1]),
        ]
    ).sort_by("id")
    ns = lp.open(ns.root)
    assert ns.to_arrow().sort_by("id").equals(expected)
    assert ns.count() == expected.num_rows
    ns.overwrite(_rows([300], [1]))
    assert lp.open(ns.root).to_arrow().equals(_rows([300], [1]))
    ds = _man(ns.root)
    hit = ds.to_table(filter="object_type = 'table'")
    assert hit.num_rows == 1


def test_a_writers_upkeep_is_proportional_to_what_commits_added(tmp_path, monkeypatch):
    """The upkeep inside a writer's commit leaves the bulk of ``__manifest`` alone:
    the first index segment is not merged again (deltas are, past
    ``MAX_INDEX_SEGMENTS``) and the first fragment is not rewritten while less than
    ``TIDY_MASKED_SHARE`` of it is masked. ``ns.compact()`` still does both.

    Oracles: Lance's own index statistics, fragment ids and deletion counts, and
    pyarrow on the rows written.
    """
    monkeypatch.setattr(manifest_index, "INDEX_MIN_ROWS", 10)
    monkeypatch.setattr(manifest_index, "LOOSE_FRAGMENTS", 3)
    monkeypatch.setattr(manifest_index, "MAX_INDEX_SEGMENTS", 3)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    expected = _rows(list(range(40)), list(range(40)))
    ns.append(expected)  # 40 partitions: one big fragment, indexed as one segment
    ds = _man(ns.root)
    first = ds.get_fragments()[0]
    base = {d.name: [seg.uuid for seg in d.segments] for d in ds.describe_indices()}
    assert all(len(uuids) == 1 for uuids in base.values()) and len(base) == 2
    for i in range(16):  # each rewrites one partition's row: masks a row of the first fragment
        extra = _rows([1000 + i], [i])
        ns.append(extra)
        expected = pa.concat_tables([expected, extra])
    ds = _man(ns.root)
    masked = ds.get_fragments()[0].num_deletions if ds.get_fragments() else 0
    assert ds.get_fragments()[0].fragment_id == first.fragment_id  # not rewritten
    physical = first.metadata.physical_rows
    assert 0.1 * physical < masked < 0.5 * physical
    now = {d.name: [seg.uuid for seg in d.segments] for d in ds.describe_indices()}
    for name, (uuid,) in base.items():
        segments = now[name]
        assert uuid in segments  # the first segment kept, not merged again
        assert 1 < len(segments) <= manifest_index.MAX_INDEX_SEGMENTS + 1
    assert len(ds.get_fragments()) <= manifest_index.LOOSE_FRAGMENTS + 1
    got = lp.open(ns.root).to_arrow().sort_by("id")
    assert got.equals(expected.sort_by("id"))
    assert lp.open(ns.root).count("k = 3") == pc.sum(pc.equal(expected["k"], 3)).as_py()
    ns.compact()  # everything: masked rows dropped, one segment per index
    ds = _man(ns.root)
    assert all(f.num_deletions == 0 for f in ds.get_fragments())
    assert ds.stats.index_stats("object_id_idx")["num_indices"] == 1
    assert lp.open(ns.root).to_arrow().sort_by("id").equals(expected.sort_by("id"))


def _table_rows(template: pa.Table, n: int, read_version: int) -> pa.Table:
    """``n`` manifest rows of tables shaped like ``template``'s one row (ids of our own;
    no leaf behind them: only the commit is exercised)."""
    rows = template.take([0] * n)
    ids = [f"v1$synthetic{i:010d}$dataset" for i in range(n)]
    rows = rows.set_column(rows.schema.get_field_index("object_id"), "object_id", pa.array(ids))
    version = pa.array([read_version] * n, rows.schema.field("read_version").type)
    return rows.set_column(rows.schema.get_field_index("read_version"), "read_version", version)


def test_a_commit_of_many_rows_joins_by_a_scan_not_in_lances_memory_pool(
    tmp_path, small_thresholds, monkeypatch
):
    """A commit of more than ``MERGE_BY_INDEX_MAX_ROWS`` rows (a compaction republishing a
    million partitions) joins them with ``__manifest`` by a scan: through the index, Lance
    holds every committed row in its DataFusion memory pool, which cannot spill, and
    failed there ("Resources exhausted"). The pool is made small here
    (``LANCE_MEM_POOL_SIZE``) so that 30,000 rows do not fit it; the rows committed are
    read back with plain Lance."""
    from lance_partitioned.catalog.manifest import Manifest

    monkeypatch.setattr(manifest_module, "MERGE_BY_INDEX_MAX_ROWS", 1_000)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows(list(range(20)), list(range(20))))
    manifest = Manifest(ns.root)
    template = _man(ns.root).to_table(filter="object_type = 'table'").slice(0, 1)
    manifest.commit(manifest.dataset(), _table_rows(template, 30_000, 1))
    assert _indexed(_man(ns.root))["object_id"] == "BTree"
    monkeypatch.setenv("LANCE_MEM_POOL_SIZE", str(1_000_000))
    manifest.commit(manifest.dataset(), _table_rows(template, 30_000, 2))
    monkeypatch.delenv("LANCE_MEM_POOL_SIZE")
    got = _man(ns.root).to_table(filter="object_id LIKE 'v1$synthetic%'")
    assert got.num_rows == 30_000
    assert pc.all(pc.equal(got["read_version"], 2)).as_py()
    real = _man(ns.root).to_table(filter="object_type = 'table' AND object_id NOT LIKE 'v1$syn%'")
    assert real.num_rows == 20 and pc.all(pc.equal(real["read_version"], 1)).as_py()
