"""Maintenance on Spark's executors (``lps.compact``, ``lps.create_index``,
``lps.optimize_indexes``, ``lps.cleanup``, ``lps.vacuum``, ``lps.rewrite_partitions``) against the single-machine calls on an identical namespace.

The oracle of every comparison is independent of the code under test: the rows come
from the source tables (sorted with pyarrow), the fragment counts and index coverage
from Lance's own datasets, and both namespaces must pass ``validate``. A task that
fails (raising, or its process killed) publishes nothing, and ``vacuum`` leaves the
leaves as they were.
"""

from __future__ import annotations

import datetime as dt
import os
import sys

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS_SCHEMA, local_only, make_events

import lance_partitioned as lp
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import DistributedTaskError, InvalidArgumentError
from lance_partitioned.operations.leaf.leaf_changes import CompactFiles
from lance_partitioned.operations.maintain import maintenance
from lance_partitioned.operations.txn.staging import stage_leaf

pytest.importorskip("pyspark")

from pyspark import cloudpickle  # noqa: E402

from lance_partitioned import spark as lps  # noqa: E402

APPENDS = 4
ROWS = 60


def _source() -> list[pa.Table]:
    return [make_events(ROWS, start_id=i * ROWS) for i in range(APPENDS)]


def _build(root: str, opts: dict[str, str] | None) -> lp.PartitionedNamespace:
    """A namespace with one fragment per append in each of its five partitions."""
    ns = lp.create(root, EVENTS_SCHEMA, "country", storage_options=opts)
    for table in _source():
        ns.append(table)
    return ns


def _expected() -> pa.Table:
    return pa.concat_tables(_source()).sort_by("id")


def _fragments(ns: lp.PartitionedNamespace) -> dict[str, int]:
    """Fragments per partition (by its values) at the published versions, as Lance counts."""
    snap = Snapshot.load(ns.manifest)
    return {leaf.values: len(snap.open_leaf(leaf).get_fragments()) for leaf in snap.leaves()}


def _opts(store) -> dict[str, str] | None:
    return store.server.options() if store.is_s3 else None


def test_compact_on_spark_equals_ns_compact(spark, store):
    opts = _opts(store)
    a, b = _build(store.root("a"), opts), _build(store.root("b"), opts)
    assert set(_fragments(a).values()) == {APPENDS}
    before = a.version
    report = lps.compact(spark, a.root, storage_options=opts, tasks=3)
    single = b.compact()
    a.refresh()
    new = [_commits(ns, before) for ns in (a, b)]
    assert new[0] == new[1] and new[0].count("compact") == 1  # one commit for every leaf
    assert (report.leaves_compacted, report.fragments_rewritten) == (
        single.leaves_compacted,
        single.fragments_rewritten,
    )
    assert report.leaves_compacted == 5 and report.skipped == []
    assert _fragments(a) == _fragments(b) == dict.fromkeys(_fragments(b), 1)
    assert a.to_arrow().sort_by("id").equals(_expected())
    assert b.to_arrow().sort_by("id").equals(_expected())
    assert a.validate() == [] and b.validate() == []


def _commits(ns: lp.PartitionedNamespace, after: int) -> list[str]:
    """The operations of the ``__manifest`` commits after version ``after``, oldest first."""
    h = ns.history().sort_by("version")
    pairs = zip(h["version"].to_pylist(), h["operation"].to_pylist(), strict=True)
    return [op for v, op in pairs if v > after]


REAL_STAGE = maintenance.stage_compaction
# Spark pickles this module's functions by value, so tasks run the failing stage
# functions below (which call the real one) without importing the tests.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _raise_mid_task(work, txn, opts):
    """Stages a leaf for real, then fails the task on partition FR."""
    staged = REAL_STAGE(work, txn, opts)
    if work.leaf.values == ("FR",):
        raise RuntimeError("injected task failure")
    return staged


def _kill_mid_task(work, txn, opts):
    """Stages a leaf for real, then the task's Python worker dies (no rollback) on FR."""
    staged = REAL_STAGE(work, txn, opts)
    if work.leaf.values == ("FR",):
        os._exit(3)
    return staged


def _unpublished_files(ns: lp.PartitionedNamespace) -> int:
    """Data files in the leaves' directories that their published versions do not read
    (every earlier published version read a subset: appends only add files)."""
    snap = Snapshot.load(ns.manifest)
    extra = 0
    for leaf in snap.leaves():
        uri = snap.leaf_uri(leaf.location)
        ds = lance.dataset(uri, version=leaf.read_version)
        read = {f.path for frag in ds.get_fragments() for f in frag.metadata.files}
        extra += len(set(os.listdir(os.path.join(uri, "data"))) - read)
    return extra


@local_only
@pytest.mark.parametrize("stage", [_raise_mid_task, _kill_mid_task])
def test_a_failed_task_publishes_nothing_and_vacuum_removes_its_leftovers(
    spark, store, monkeypatch, stage
):
    ns = _build(store.root("ns"), None)
    version, fragments = ns.version, _fragments(ns)
    assert _unpublished_files(ns) == 0
    monkeypatch.setattr(maintenance, "stage_compaction", stage)
    with pytest.raises(DistributedTaskError, match="nothing was published") as info:
        lps.compact(spark, ns.root, tasks=1)
    assert "/rustc/" not in str(info.value) and ".rs:" not in str(info.value)
    monkeypatch.undo()
    ns.refresh()
    assert ns.version == version and _fragments(ns) == fragments
    assert ns.to_arrow().sort_by("id").equals(_expected())
    assert _unpublished_files(ns) > 0  # the compacted files the tasks wrote
    lps.vacuum(spark, ns.root, older_than=dt.timedelta(0))
    assert _unpublished_files(ns) == 0
    snap = Snapshot.load(ns.manifest)
    for leaf in snap.leaves():  # the latest version of every leaf reads the published files
        uri = snap.leaf_uri(leaf.location)
        latest, published = lance.dataset(uri), lance.dataset(uri, version=leaf.read_version)
        assert latest.to_table().sort_by("id").equals(published.to_table().sort_by("id"))
    assert ns.validate() == []
    assert lps.compact(spark, ns.root).leaves_compacted == 5  # and it runs again


def test_compact_on_spark_refuses_a_bad_target_before_anything(spark, tmp_path):
    ns = _build(str(tmp_path / "ns"), None)
    version = ns.version
    with pytest.raises(InvalidArgumentError, match="target_rows_per_fragment"):
        lps.compact(spark, ns.root, target_rows_per_fragment=0)
    assert lp.open(ns.root).version == version


def _leave_crashed_compactions(ns: lp.PartitionedNamespace) -> None:
    """Every leaf gets a staged, never published compaction: a writer that crashed."""
    snap = Snapshot.load(ns.manifest)
    opts = ns.manifest.storage_options
    for leaf in snap.leaves():
        uri = snap.leaf_uri(leaf.location)
        stage_leaf(uri, leaf.read_version, CompactFiles(), "crashed", opts)


def _counts(report) -> tuple:
    """What a report counts, but bytes: manifest files differ in size between namespaces
    (random object ids)."""
    return (
        report.manifest_versions_removed,
        report.leaf_versions_removed,
        report.files_removed,
        report.dirs_removed,
        report.leaves_healed,
        report.skipped,
    )


def _leaf_versions(ns: lp.PartitionedNamespace) -> dict[tuple, int]:
    snap = Snapshot.load(ns.manifest)
    opts = ns.manifest.storage_options
    return {
        leaf.values: len(
            lance.dataset(snap.leaf_uri(leaf.location), storage_options=opts).versions()
        )
        for leaf in snap.leaves()
    }


def test_cleanup_and_vacuum_on_spark_equal_the_single_machine_calls(spark, store):
    opts = _opts(store)
    a, b = _build(store.root("a"), opts), _build(store.root("b"), opts)
    for ns in (a, b):
        _leave_crashed_compactions(ns)
    vacuumed = lps.vacuum(spark, a.root, older_than=dt.timedelta(0), storage_options=opts)
    single = b.vacuum(older_than=dt.timedelta(0))
    assert _counts(vacuumed) == _counts(single)
    assert vacuumed.leaves_healed == 5 and vacuumed.files_removed > 0
    cleaned = lps.cleanup(spark, a.root, older_than=dt.timedelta(0), storage_options=opts)
    single = b.cleanup(older_than=dt.timedelta(0))
    assert _counts(cleaned) == _counts(single)
    assert cleaned.manifest_versions_removed > 0 and cleaned.leaf_versions_removed > 0
    # the published version, and the healing restore above it (the latest is never removed)
    assert _leaf_versions(a) == _leaf_versions(b) == dict.fromkeys(_leaf_versions(b), 2)
    for ns in (a, b):
        ns.refresh()
        assert len(ns.versions()) == 1
        assert ns.to_arrow().sort_by("id").equals(_expected())
        assert ns.validate() == []


def _layout(ns: lp.PartitionedNamespace) -> list[tuple]:
    """(spec id, partition values, rows) of every partition, as Lance counts its rows."""
    snap = Snapshot.load(ns.manifest)
    return sorted(
        (leaf.spec_id, tuple(map(str, leaf.values)), snap.open_leaf(leaf).count_rows())
        for leaf in snap.leaves()
    )


@local_only
def test_rewrite_partitions_on_spark_equals_the_single_machine_call(spark, store):
    pair = [_build(store.root(n), None) for n in ("a", "b")]
    for ns in pair:
        ns.evolve_spec("year(event_date), country")
        ns.append(make_events(40, start_id=APPENDS * ROWS))
    a, b = pair
    before = a.version
    result = lps.rewrite_partitions(spark, a.root, "country <> 'CN'", tasks=3)
    single = b.rewrite_partitions("country <> 'CN'")
    a.refresh()
    assert _commits(a, before) == ["rewrite_partitions"]  # one commit
    assert (result.rows, result.partitions, result.new_partitions) == (
        single.rows,
        single.partitions,
        single.new_partitions,
    )
    # the rows of the old partitions the filter may match (NULL <> 'CN' is not true)
    old = pa.concat_tables(_source())
    assert result.rows == pc.sum(pc.not_equal(old["country"], "CN")).as_py()
    assert _layout(a) == _layout(b)
    assert {s for s, values, _ in _layout(a) if values in {("CN",), ("None",)}} == {1}
    expected = pa.concat_tables([old, make_events(40, start_id=APPENDS * ROWS)])
    for ns in pair:
        assert ns.to_arrow().sort_by("id").equals(expected.sort_by("id"))
        assert ns.validate() == []
    nothing = lps.rewrite_partitions(spark, a.root, "country <> 'CN'")
    assert (nothing.version, nothing.rows) == (a.version, 0)


def _vectors(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    flat = rng.standard_normal(n * 8).astype(np.float32)
    return pa.table(
        {
            "id": pa.array(np.arange(n) + seed * n, pa.int64()),
            "tenant": pa.array([f"t{i % 3}" for i in range(n)]),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(flat), 8),
        }
    )


def _coverage(ns: lp.PartitionedNamespace) -> list[tuple]:
    return sorted(
        (i.name, i.partitions, i.partitions_indexed, i.rows, i.rows_indexed)
        for i in ns.list_indexes()
    )


def _lance_coverage(ns: lp.PartitionedNamespace) -> dict[tuple, int]:
    """Rows of the fragments Lance's index ``emb_ivf_flat`` covers, per partition."""
    snap = Snapshot.load(ns.manifest)
    out = {}
    for leaf in snap.leaves():
        ds = lance.dataset(snap.leaf_uri(leaf.location), version=leaf.read_version)
        [index] = [d for d in ds.describe_indices() if d.name == "emb_ivf_flat"]
        covered = {int(i) for seg in index.segments for i in seg.fragment_ids}
        out[leaf.values] = sum(
            f.count_rows() for f in ds.get_fragments() if f.fragment_id in covered
        )
    return out


@local_only
def test_create_and_optimize_index_on_spark_equal_the_single_machine_calls(spark, store):
    schema = _vectors(1, 0).schema
    pair = [lp.create(store.root(n), schema, "tenant") for n in ("a", "b")]
    for ns in pair:
        ns.append(_vectors(600, 1))
    a, b = pair
    params = {"num_partitions": 2, "metric": "l2", "min_rows": 100}
    before = a.version
    report = lps.create_index(spark, a.root, "emb", "IVF_FLAT", tasks=2, **params)
    single = b.create_index("emb", "IVF_FLAT", **params)
    a.refresh()
    assert _commits(a, before) == _commits(b, before)
    assert _commits(a, before).count("create_index") == 1  # one commit for every leaf
    assert len(report.partitions) == len(single.partitions) == 3
    assert _coverage(a) == _coverage(b) == [("emb_ivf_flat", 3, 3, 600, 600)]
    assert _lance_coverage(a) == _lance_coverage(b) == {("t0",): 200, ("t1",): 200, ("t2",): 200}
    for ns in pair:
        ns.append(_vectors(300, 2))
    optimized = lps.optimize_indexes(spark, a.root)
    assert len(optimized.partitions) == len(b.optimize_indexes().partitions) == 3
    a.refresh()
    assert _coverage(a) == _coverage(b) == [("emb_ivf_flat", 3, 3, 900, 900)]
    assert _lance_coverage(a) == _lance_coverage(b) == {("t0",): 300, ("t1",): 300, ("t2",): 300}
    assert a.validate() == [] and b.validate() == []
