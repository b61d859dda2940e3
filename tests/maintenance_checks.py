"""Maintenance on Spark against the single-machine call on an identical namespace: the
namespaces, the oracles and the comparisons that ``test_spark_maintenance.py`` runs on
``local[2]`` and ``test_spark_cluster.py`` on the loopback standalone cluster.

Each ``check_*`` builds the same namespace at two roots, runs the ``lps`` call on the
first and the single-machine call on the second, and asserts that they agree, with
oracles independent of the code under test: the rows come from the source tables
(sorted with pyarrow), the fragment counts, versions and index coverage from Lance's
own datasets, and both namespaces pass ``validate``. Every Lance handle gets the
namespace's ``storage_options``: the cluster's processes have no AWS environment.

The ``check_failed_*`` checks make a task fail mid-way (``raise_mid_task``) or its
Python worker die (``kill_mid_task``, ``copy_then_die``): the call publishes nothing,
and ``vacuum`` leaves the files as they were before it but for its healing restores
(listed with ``os`` or boto3, not the code under test). Spark pickles this module's
functions by value, so the executors run the failing functions (which call the real
ones) without importing the tests. On a cluster Spark retries a failed task
(``spark.task.maxFailures``): every attempt fails the same way, and each one's
leftovers are unpublished too.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Callable, Sequence
from unittest import mock

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS_SCHEMA, make_events
from pyspark import cloudpickle
from s3_support import s3_tree

import lance_partitioned as lp
from lance_partitioned import spark as lps
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import DistributedTaskError
from lance_partitioned.operations.leaf.leaf_changes import CompactFiles
from lance_partitioned.operations.maintain import maintenance
from lance_partitioned.operations.txn.staging import stage_leaf
from lance_partitioned.spark import maintenance as spark_maintenance

# the failing functions below reach Spark's executors by value (see the module doc)
cloudpickle.register_pickle_by_value(sys.modules[__name__])

APPENDS = 4
ROWS = 60
Options = dict[str, str] | None


def source() -> list[pa.Table]:
    return [make_events(ROWS, start_id=i * ROWS) for i in range(APPENDS)]


def build(root: str, opts: Options) -> lp.PartitionedNamespace:
    """A namespace with one fragment per append in each of its five partitions."""
    ns = lp.create(root, EVENTS_SCHEMA, "country", storage_options=opts)
    for table in source():
        ns.append(table)
    return ns


def expected() -> pa.Table:
    return pa.concat_tables(source()).sort_by("id")


def leaf_dataset(
    ns: lp.PartitionedNamespace, snap: Snapshot, leaf: Leaf, **kw: int
) -> lance.LanceDataset:
    """Lance's own dataset of ``leaf`` (``kw``: e.g. ``version``), with the namespace's options."""
    uri = snap.leaf_uri(leaf.location)
    return lance.dataset(uri, storage_options=ns.manifest.storage_options, **kw)


def fragments(ns: lp.PartitionedNamespace) -> dict[str, int]:
    """Fragments per partition (by its values) at the published versions, as Lance counts."""
    snap = Snapshot.load(ns.manifest)
    return {leaf.values: len(snap.open_leaf(leaf).get_fragments()) for leaf in snap.leaves()}


def commits(ns: lp.PartitionedNamespace, after: int) -> list[str]:
    """The operations of the ``__manifest`` commits after version ``after``, oldest first."""
    h = ns.history().sort_by("version")
    pairs = zip(h["version"].to_pylist(), h["operation"].to_pylist(), strict=True)
    return [op for v, op in pairs if v > after]


def check_compact(spark, roots: Sequence[str], opts: Options) -> None:  # type: ignore[no-untyped-def]
    """``lps.compact`` against ``ns.compact``: one commit, the same report, one fragment
    per partition, the source rows."""
    a, b = (build(root, opts) for root in roots)
    assert set(fragments(a).values()) == {APPENDS}
    before = a.version
    report = lps.compact(spark, a.root, storage_options=opts, tasks=3)
    single = b.compact()
    a.refresh()
    new = [commits(ns, before) for ns in (a, b)]
    assert new[0] == new[1] and new[0].count("compact") == 1  # one commit for every leaf
    assert (report.leaves_compacted, report.fragments_rewritten) == (
        single.leaves_compacted,
        single.fragments_rewritten,
    )
    assert report.leaves_compacted == 5 and report.skipped == []
    assert fragments(a) == fragments(b) == dict.fromkeys(fragments(b), 1)
    for ns in (a, b):
        assert ns.to_arrow().sort_by("id").equals(expected())
        assert ns.validate() == []


def leave_crashed_compactions(ns: lp.PartitionedNamespace) -> None:
    """Every leaf gets a staged, never published compaction: a writer that crashed."""
    snap = Snapshot.load(ns.manifest)
    opts = ns.manifest.storage_options
    for leaf in snap.leaves():
        uri = snap.leaf_uri(leaf.location)
        stage_leaf(uri, leaf.read_version, CompactFiles(), "crashed", opts)


def counts(report) -> tuple:  # type: ignore[no-untyped-def]
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


def leaf_versions(ns: lp.PartitionedNamespace) -> dict[tuple, int]:
    """Versions of every leaf's Lance dataset, as Lance lists them."""
    snap = Snapshot.load(ns.manifest)
    return {leaf.values: len(leaf_dataset(ns, snap, leaf).versions()) for leaf in snap.leaves()}


def check_cleanup_and_vacuum(spark, roots: Sequence[str], opts: Options) -> None:  # type: ignore[no-untyped-def]
    """``lps.vacuum`` then ``lps.cleanup`` against ``ns.vacuum``/``ns.cleanup`` on namespaces
    whose every leaf holds a crashed writer's staged version: the same counts, the same
    versions left, the source rows."""
    a, b = (build(root, opts) for root in roots)
    for ns in (a, b):
        leave_crashed_compactions(ns)
    vacuumed = lps.vacuum(spark, a.root, older_than=dt.timedelta(0), storage_options=opts)
    single = b.vacuum(older_than=dt.timedelta(0))
    assert counts(vacuumed) == counts(single)
    assert vacuumed.leaves_healed == 5 and vacuumed.files_removed > 0
    cleaned = lps.cleanup(spark, a.root, older_than=dt.timedelta(0), storage_options=opts)
    single = b.cleanup(older_than=dt.timedelta(0))
    assert counts(cleaned) == counts(single)
    assert cleaned.manifest_versions_removed > 0 and cleaned.leaf_versions_removed > 0
    # the published version, and the healing restore above it (the latest is never removed)
    assert leaf_versions(a) == leaf_versions(b) == dict.fromkeys(leaf_versions(b), 2)
    for ns in (a, b):
        ns.refresh()
        assert len(ns.versions()) == 1
        assert ns.to_arrow().sort_by("id").equals(expected())
        assert ns.validate() == []


def layout(ns: lp.PartitionedNamespace) -> list[tuple]:
    """(spec id, partition values, rows) of every partition, as Lance counts its rows."""
    snap = Snapshot.load(ns.manifest)
    return sorted(
        (leaf.spec_id, tuple(map(str, leaf.values)), snap.open_leaf(leaf).count_rows())
        for leaf in snap.leaves()
    )


def check_rewrite_partitions(spark, roots: Sequence[str], opts: Options) -> None:  # type: ignore[no-untyped-def]
    """``lps.rewrite_partitions`` against ``ns.rewrite_partitions`` after a spec change:
    one commit, the same result and layout, the rows the filter matches moved, the
    source rows; a second call finds nothing to move."""
    pair = [build(root, opts) for root in roots]
    for ns in pair:
        ns.evolve_spec("year(event_date), country")
        ns.append(make_events(40, start_id=APPENDS * ROWS))
    a, b = pair
    before = a.version
    result = lps.rewrite_partitions(spark, a.root, "country <> 'CN'", storage_options=opts, tasks=3)
    single = b.rewrite_partitions("country <> 'CN'")
    a.refresh()
    assert commits(a, before) == ["rewrite_partitions"]  # one commit
    assert (result.rows, result.partitions, result.new_partitions) == (
        single.rows,
        single.partitions,
        single.new_partitions,
    )
    # the rows of the old partitions the filter may match (NULL <> 'CN' is not true)
    old = pa.concat_tables(source())
    assert result.rows == pc.sum(pc.not_equal(old["country"], "CN")).as_py()
    assert layout(a) == layout(b)
    assert {s for s, values, _ in layout(a) if values in {("CN",), ("None",)}} == {1}
    everything = pa.concat_tables([old, make_events(40, start_id=APPENDS * ROWS)])
    for ns in pair:
        assert ns.to_arrow().sort_by("id").equals(everything.sort_by("id"))
        assert ns.validate() == []
    nothing = lps.rewrite_partitions(spark, a.root, "country <> 'CN'", storage_options=opts)
    assert (nothing.version, nothing.rows) == (a.version, 0)


def vectors(n: int, seed: int) -> pa.Table:
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
        ds = leaf_dataset(ns, snap, leaf, version=leaf.read_version)
        [index] = [d for d in ds.describe_indices() if d.name == "emb_ivf_flat"]
        covered = {int(i) for seg in index.segments for i in seg.fragment_ids}
        out[leaf.values] = sum(
            f.count_rows() for f in ds.get_fragments() if f.fragment_id in covered
        )
    return out


def check_index(spark, roots: Sequence[str], opts: Options) -> None:  # type: ignore[no-untyped-def]
    """``lps.create_index`` then ``lps.optimize_indexes`` (after an append) against the
    single-machine calls: one commit each, the same reports, and every row covered by
    Lance's index in every partition."""
    schema = vectors(1, 0).schema
    pair = [lp.create(root, schema, "tenant", storage_options=opts) for root in roots]
    for ns in pair:
        ns.append(vectors(600, 1))
    a, b = pair
    params = {"num_partitions": 2, "metric": "l2", "min_rows": 100}
    before = a.version
    report = lps.create_index(
        spark, a.root, "emb", "IVF_FLAT", storage_options=opts, tasks=2, **params
    )
    single = b.create_index("emb", "IVF_FLAT", **params)
    a.refresh()
    assert commits(a, before) == commits(b, before)
    assert commits(a, before).count("create_index") == 1  # one commit for every leaf
    assert len(report.partitions) == len(single.partitions) == 3
    assert _coverage(a) == _coverage(b) == [("emb_ivf_flat", 3, 3, 600, 600)]
    assert _lance_coverage(a) == _lance_coverage(b) == {("t0",): 200, ("t1",): 200, ("t2",): 200}
    for ns in pair:
        ns.append(vectors(300, 2))
    optimized = lps.optimize_indexes(spark, a.root, storage_options=opts)
    assert len(optimized.partitions) == len(b.optimize_indexes().partitions) == 3
    a.refresh()
    assert _coverage(a) == _coverage(b) == [("emb_ivf_flat", 3, 3, 900, 900)]
    assert _lance_coverage(a) == _lance_coverage(b) == {("t0",): 300, ("t1",): 300, ("t2",): 300}
    assert a.validate() == [] and b.validate() == []


REAL_STAGE = maintenance.stage_compaction
REAL_COPY = spark_maintenance._copy_task
Stage = Callable[..., object]


def raise_mid_task(work, txn, opts):  # type: ignore[no-untyped-def]
    """Stages a leaf for real, then fails the task on partition FR (it rolls back)."""
    staged = REAL_STAGE(work, txn, opts)
    if work.leaf.values == ("FR",):
        raise RuntimeError("injected task failure")
    return staged


def kill_mid_task(work, txn, opts):  # type: ignore[no-untyped-def]
    """Stages a leaf for real, then the task's Python worker dies (no rollback) on FR."""
    staged = REAL_STAGE(work, txn, opts)
    if work.leaf.values == ("FR",):
        os._exit(3)
    return staged


def copy_then_die(leaves, **job):  # type: ignore[no-untyped-def]
    """Copies its partitions' rows for real (the files are written), then the task's
    Python worker dies before it returns them."""
    list(REAL_COPY(leaves, **job))
    os._exit(3)


def listing(root: str, opts: Options) -> set[str]:
    """Every file under ``root`` (its path relative to it; on local disk every directory
    too, ending in ``/``), as the store lists it: ``os``, or boto3 with the credentials
    of ``opts``; not the code under test."""
    if not root.startswith("s3://"):
        return {
            os.path.relpath(os.path.join(folder, name), root) + ("/" if name in dirs else "")
            for folder, dirs, files in os.walk(root)
            for name in dirs + files
        }
    import boto3

    assert opts is not None
    client = boto3.client(
        "s3",
        endpoint_url=opts["aws_endpoint"],
        aws_access_key_id=opts["aws_access_key_id"],
        aws_secret_access_key=opts["aws_secret_access_key"],
        region_name=opts["aws_region"],
    )
    return set(s3_tree(client, root))


def _fragment_ids(ds: lance.LanceDataset) -> list[int]:
    return sorted(f.fragment_id for f in ds.get_fragments())


def published(ns: lp.PartitionedNamespace) -> dict[tuple, tuple[int, list[int]]]:
    """Per partition: its published leaf version and that version's fragments, as Lance
    reads them."""
    snap = Snapshot.load(ns.manifest)
    return {
        leaf.values: (
            leaf.read_version,
            _fragment_ids(leaf_dataset(ns, snap, leaf, version=leaf.read_version)),
        )
        for leaf in snap.leaves()
    }


def unpublished(ns: lp.PartitionedNamespace) -> tuple[list[str], int]:
    """The partitions (their directories) whose latest Lance version is not the published
    one, and how many of them hold other fragments there (what vacuum heals)."""
    snap = Snapshot.load(ns.manifest)
    moved, changed = [], 0
    for leaf in snap.leaves():
        latest = leaf_dataset(ns, snap, leaf)
        if latest.version != leaf.read_version:
            moved.append(leaf.location)
            pinned = leaf_dataset(ns, snap, leaf, version=leaf.read_version)
            changed += _fragment_ids(latest) != _fragment_ids(pinned)
    return moved, changed


def vacuum_restores(spark, ns: lp.PartitionedNamespace, opts: Options, before: set[str]) -> None:  # type: ignore[no-untyped-def]
    """``lps.vacuum`` with no grace after a failed call: it heals the partitions whose
    latest version holds unpublished fragments, and leaves the files that were there
    before the call, plus in each partition whose latest version is unpublished one
    version and its transaction file (the restore of the published version, by the task's
    rollback or by the heal: the latest version is never removed)."""
    moved, changed = unpublished(ns)
    report = lps.vacuum(spark, ns.root, older_than=dt.timedelta(0), storage_options=opts)
    assert report.leaves_healed == changed and report.skipped == []
    after = listing(ns.root, opts)
    assert before <= after
    new = sorted(tuple(path.split("/")[:2]) for path in after - before)
    want = sorted((d, kind) for d in moved for kind in ("_transactions", "_versions"))
    assert new == want, f"left after vacuum: {sorted(after - before)}; expected in {want}"
    assert unpublished(ns)[1] == 0  # every latest version reads the published fragments


def check_failed_compaction(
    spark, roots: Sequence[str], opts: Options, stage: Stage = kill_mid_task
) -> None:  # type: ignore[no-untyped-def]
    """``lps.compact`` whose task fails mid-way (``stage``; by default its Python worker
    dies after staging partition FR) publishes nothing: the same version, published leaf
    versions, fragments and rows; ``vacuum`` removes what it left (``vacuum_restores``);
    then ``lps.compact`` runs again and equals ``ns.compact`` on the twin namespace."""
    a, b = (build(root, opts) for root in roots)
    version, leaves, files = a.version, published(a), listing(a.root, opts)
    with (
        mock.patch.object(maintenance, "stage_compaction", stage),
        pytest.raises(DistributedTaskError, match="nothing was published") as info,
    ):
        lps.compact(spark, a.root, storage_options=opts, tasks=1)
    assert "/rustc/" not in str(info.value) and ".rs:" not in str(info.value)
    a.refresh()
    assert (a.version, published(a)) == (version, leaves)
    assert a.to_arrow().sort_by("id").equals(expected())
    assert any("/data/" in path for path in listing(a.root, opts) - files)  # the tasks' files
    vacuum_restores(spark, a, opts, files)
    assert a.validate() == []
    report = lps.compact(spark, a.root, storage_options=opts, tasks=3)
    single = b.compact()
    assert (report.leaves_compacted, report.fragments_rewritten) == (
        single.leaves_compacted,
        single.fragments_rewritten,
    )
    assert report.leaves_compacted == 5 and report.skipped == []
    a.refresh()
    assert fragments(a) == fragments(b) == dict.fromkeys(fragments(b), 1)
    for ns in (a, b):
        assert ns.to_arrow().sort_by("id").equals(expected())
        assert ns.validate() == []


def check_failed_rewrite(spark, roots: Sequence[str], opts: Options) -> None:  # type: ignore[no-untyped-def]
    """``lps.rewrite_partitions`` whose task's Python worker dies once it has written its
    rows publishes nothing: the same version, layout and rows; ``vacuum`` removes the
    files it wrote (``vacuum_restores``); then it runs again and equals
    ``ns.rewrite_partitions`` on the twin namespace."""
    pair = [build(root, opts) for root in roots]
    for ns in pair:
        ns.evolve_spec("year(event_date), country")
    a, b = pair
    version, before, files = a.version, layout(a), listing(a.root, opts)
    with (
        mock.patch.object(spark_maintenance, "_copy_task", copy_then_die),
        pytest.raises(DistributedTaskError, match="nothing was published"),
    ):
        lps.rewrite_partitions(spark, a.root, storage_options=opts, tasks=1)
    a.refresh()
    assert (a.version, layout(a)) == (version, before)
    assert a.to_arrow().sort_by("id").equals(expected())
    assert listing(a.root, opts) - files  # the partitions the task wrote
    vacuum_restores(spark, a, opts, files)
    assert a.validate() == []
    moved = lps.rewrite_partitions(spark, a.root, storage_options=opts, tasks=3)
    single = b.rewrite_partitions()
    assert (moved.rows, moved.partitions, moved.new_partitions) == (
        single.rows,
        single.partitions,
        single.new_partitions,
    )
    assert moved.rows == expected().num_rows and layout(a) == layout(b)
    for ns in pair:
        assert ns.to_arrow().sort_by("id").equals(expected())
        assert ns.validate() == []
