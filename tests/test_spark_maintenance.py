"""Maintenance on Spark's executors (``lps.compact``, ``lps.create_index``,
``lps.optimize_indexes``, ``lps.cleanup``, ``lps.vacuum``, ``lps.rewrite_partitions``)
against the single-machine calls on an identical namespace, on local disk and on the S3
server (``store``; the options reach the executors only as ``storage_options``: their
Python workers started before the test set its AWS environment).

The comparisons and their oracles live in ``maintenance_checks`` (the standalone-cluster
test runs them too): the rows come from the source tables (sorted with pyarrow), the
fragment counts and index coverage from Lance's own datasets, and both namespaces must
pass ``validate``. A task that fails (a compaction raising, or the process of a
compaction, partition rewrite or index build task killed) publishes nothing, a retry
never builds on what it left, and ``vacuum`` leaves the leaves as they were. The
retention cutoff means the same moment on executors in another time zone.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
import time
from unittest import mock

import pytest
from maintenance_checks import (
    build,
    check_cleanup_and_vacuum,
    check_compact,
    check_failed_compaction,
    check_failed_rewrite,
    check_index,
    check_rewrite_partitions,
    counts,
    expected,
    fragments,
    kill_mid_task,
    leaf_dataset,
    leaf_versions,
    leave_crashed_compactions,
    published,
    raise_mid_task,
    vectors,
)

import lance_partitioned as lp
from lance_partitioned.catalog import storage
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import DistributedTaskError, InvalidArgumentError
from lance_partitioned.operations.maintain import maintenance
from lance_partitioned.operations.txn import driver as txn_driver
from lance_partitioned.search import build as index_build

pytest.importorskip("pyspark")

from pyspark import cloudpickle  # noqa: E402

from lance_partitioned import spark as lps  # noqa: E402
from lance_partitioned.spark import maintenance as spark_maintenance  # noqa: E402


def _opts(store) -> dict[str, str] | None:
    return store.server.options() if store.is_s3 else None


def _roots(store) -> tuple[str, str]:
    """Two roots: the one ``lps`` maintains and its twin for the single-machine call."""
    return store.root("a"), store.root("b")


def test_compact_on_spark_equals_ns_compact(spark, store):
    check_compact(spark, _roots(store), _opts(store))


REAL_INDEX_STAGE = index_build.stage_at_published
# Spark pickles this module's functions by value, so tasks run the failing stage
# function below (which calls the real one) without importing the tests.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _index_then_die(work, txn, opts):
    """Builds and stages a partition's index for real, then the task's Python worker dies
    (no rollback) on partition t1 (with the other partitions' builds, on its threads)."""
    staged = REAL_INDEX_STAGE(work, txn, opts)
    if work.leaf.values == ("t1",):
        os._exit(3)
    return staged


REAL_COMPACT_STAGE = maintenance.stage_compaction


def _slow_stage(work, txn, opts):
    """Compaction's stage, a second slower: tasks end in waves that progress can see."""
    time.sleep(1.0)
    return REAL_COMPACT_STAGE(work, txn, opts)


def _skip_one_stage(work, txn, opts):
    """Compaction's stage, which leaves the partition of values ``SKIPPED`` alone (as it
    does a leaf it cannot stage now), saying why."""
    if work.leaf.values == SKIPPED:
        work.skipped = "left alone by the test"
        return None
    return REAL_COMPACT_STAGE(work, txn, opts)


SKIPPED: tuple = ()  # the partition values _skip_one_stage leaves alone (set by a test)


def test_a_partition_a_task_leaves_alone_is_reported_skipped_and_stays_as_it_was(
    spark, tmp_path, monkeypatch
):
    """What a task's staging found out about a work (why it skipped it, the counters of
    its change) reaches the driver's report, though the task sends back neither the
    leaf nor the work itself."""
    ns = build(str(tmp_path / "ns"), None)
    before = fragments(ns)
    leaf = min(Snapshot.load(ns.manifest).leaves(), key=lambda leaf: leaf.object_id)
    monkeypatch.setattr(sys.modules[__name__], "SKIPPED", leaf.values)
    monkeypatch.setattr(maintenance, "stage_compaction", _skip_one_stage)
    report = lps.compact(spark, ns.root, tasks=3)
    assert report.skipped == [leaf.object_id]
    assert report.leaves_compacted == len(before) - 1
    assert report.fragments_rewritten == sum(n for v, n in before.items() if v != leaf.values)
    assert fragments(lp.open(ns.root)) == {
        v: n if v == leaf.values else 1 for v, n in before.items()
    }


def test_progress_follows_the_jobs_tasks_not_only_its_end(spark, tmp_path, monkeypatch):
    """``progress=`` of a distributed call reports the partitions of the tasks that have
    finished while the job runs (five one-partition tasks on two cores end in three
    waves), then every partition, once, at the end."""
    ns = build(str(tmp_path / "ns"), None)
    monkeypatch.setattr(spark_maintenance, "POLL_SECONDS", 0.05)
    monkeypatch.setattr(maintenance, "stage_compaction", _slow_stage)
    events = []
    report = lps.compact(spark, ns.root, tasks=5, progress=events.append)
    assert report.leaves_compacted == 5
    done = [e.done for e in events]
    assert (events[0].done, events[0].total) == (0, 5) and done == sorted(done)
    assert 0 < done[1] < 5  # a wave of tasks, reported before the job ended
    assert [e.finished for e in events].count(True) == 1 and events[-1].finished
    assert (events[-1].done, events[-1].total, events[-1].unit) == (5, 5, "partitions")
    swept = []
    lps.vacuum(spark, ns.root, older_than=dt.timedelta(0), progress=swept.append)
    assert (swept[-1].task, swept[-1].done, swept[-1].total) == ("vacuum", 5, 5)


def _driver_must_not_check(staged, opts):
    raise AssertionError("the driver looked for the staged files itself")


def test_from_check_on_tasks_min_staged_leaves_tasks_look_for_the_files(spark, store, monkeypatch):
    """Above ``CHECK_ON_TASKS_MIN`` staged leaves the check before publishing looks for
    their files in Spark tasks (the driver's own lookup, patched to fail, is not used),
    and the result is still the single-machine compaction's."""
    monkeypatch.setattr(spark_maintenance, "CHECK_ON_TASKS_MIN", 1)
    real_compact = lps.compact

    def compact_checked_by_tasks(*args, **kwargs):
        with mock.patch.object(txn_driver, "lacking", _driver_must_not_check):
            return real_compact(*args, **kwargs)

    monkeypatch.setattr(lps, "compact", compact_checked_by_tasks)
    check_compact(spark, _roots(store), _opts(store))


def test_a_staged_file_removed_before_publishing_is_found_by_the_tasks_check(
    spark, store, monkeypatch, caplog
):
    """A staged leaf's new data file removed between the job and the commit: the tasks'
    check finds it, the driver names it (StagedFilesMissingError, which compaction
    logs and gives up on for this time), nothing is published and the staged versions
    are rolled back."""
    monkeypatch.setattr(spark_maintenance, "CHECK_ON_TASKS_MIN", 1)
    ns = build(_roots(store)[0], _opts(store))
    before = (ns.version, published(ns), fragments(ns))
    gone: list[str] = []

    def stage_then_lose_a_file(tx, works, one, record):
        check_many = spark_maintenance.stager(spark, "compact")(tx, works, one, record)
        staged = next(s for s in tx.staged.leaves.values() if s.changed)
        name = sorted(f for f in staged.added if f.startswith("data/"))[0]
        storage.resolve(staged.uri, _opts(store)).delete(storage.Storage.join(staged.uri, name))
        gone.append(name.split("/")[-1])
        return check_many

    with (
        mock.patch.object(txn_driver, "lacking", _driver_must_not_check),
        caplog.at_level(logging.WARNING, logger=maintenance.__name__),
    ):
        report = maintenance.compact(
            ns.manifest, compact_manifest=False, stage_many=stage_then_lose_a_file
        )
    assert report.leaves_compacted == 0
    said = [r.getMessage() for r in caplog.records if "published nothing" in r.getMessage()]
    assert gone and len(said) == 1 and gone[0] in said[0], said
    ns = lp.open(ns.root, storage_options=_opts(store))
    assert (ns.version, published(ns), fragments(ns)) == before
    assert ns.to_arrow().sort_by("id").equals(expected())
    assert ns.validate() == []
    assert maintenance.compact(ns.manifest).leaves_compacted == 5  # nothing left in the way


@pytest.mark.parametrize("stage", [raise_mid_task, kill_mid_task])
def test_a_failed_task_publishes_nothing_and_vacuum_removes_its_leftovers(spark, store, stage):
    check_failed_compaction(spark, _roots(store), _opts(store), stage)


def test_compact_on_spark_refuses_a_bad_target_before_anything(spark, tmp_path):
    ns = build(str(tmp_path / "ns"), None)
    version = ns.version
    with pytest.raises(InvalidArgumentError, match="target_rows_per_fragment"):
        lps.compact(spark, ns.root, target_rows_per_fragment=0)
    assert lp.open(ns.root).version == version


def test_cleanup_and_vacuum_on_spark_equal_the_single_machine_calls(spark, store):
    check_cleanup_and_vacuum(spark, _roots(store), _opts(store))


def test_rewrite_partitions_on_spark_equals_the_single_machine_call(spark, store):
    check_rewrite_partitions(spark, _roots(store), _opts(store))


def test_create_and_optimize_index_on_spark_equal_the_single_machine_calls(spark, store):
    check_index(spark, _roots(store), _opts(store))


@pytest.fixture
def driver_zone(monkeypatch):
    """Sets the time zone of this process (the driver) only: Spark's Python workers keep
    the one they started in. Restored at the end."""

    def to(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()

    yield to
    monkeypatch.undo()
    time.tzset()


# POSIX names: Etc/GMT-10 is ten hours *ahead* of UTC
@pytest.mark.parametrize("zone", ["Etc/GMT-10", "Etc/GMT+10"])
def test_vacuum_on_spark_keeps_its_cutoff_when_the_driver_is_in_another_time_zone(
    spark, tmp_path, driver_zone, zone
):
    driver_zone(zone)
    a, b = (build(str(tmp_path / n), None) for n in ("a", "b"))
    for ns in (a, b):
        leave_crashed_compactions(ns)  # seconds ago
    versions = leaf_versions(a)
    # an hour's grace keeps what is seconds old, whatever the executors' clocks read
    young = lps.vacuum(spark, a.root, older_than=dt.timedelta(hours=1))
    assert counts(young) == counts(b.vacuum(older_than=dt.timedelta(hours=1)))
    assert (young.leaves_healed, young.files_removed) == (0, 0)
    assert leaf_versions(a) == versions
    # and no grace removes it
    now = lps.vacuum(spark, a.root, older_than=dt.timedelta(0))
    assert counts(now) == counts(b.vacuum(older_than=dt.timedelta(0)))
    assert now.leaves_healed == 5 and now.files_removed > 0
    for ns in (a, b):
        assert ns.to_arrow().sort_by("id").equals(expected())
        assert ns.validate() == []


def test_a_killed_rewrite_task_publishes_nothing_and_vacuum_removes_its_files(spark, store):
    check_failed_rewrite(spark, _roots(store), _opts(store))


def _index_dirs(ns: lp.PartitionedNamespace, store) -> set[str]:
    """The index segments (``<leaf>/_indices/<uuid>/``) the store lists under the root."""
    return {k.split("/")[2] for k in store.tree(ns.root) if k.split("/")[1:2] == ["_indices"]}


def _published_segments(ns: lp.PartitionedNamespace) -> set[str]:
    """The index segments the published version of every partition holds, as Lance reads them."""
    snap = Snapshot.load(ns.manifest)
    return {
        str(segment.uuid)
        for leaf in snap.leaves()
        for index in leaf_dataset(ns, snap, leaf, version=leaf.read_version).describe_indices()
        for segment in index.segments
    }


def test_a_killed_index_task_publishes_nothing_ever_and_vacuum_removes_its_files(
    spark, store, monkeypatch
):
    opts = _opts(store)
    ns = lp.create(store.root("ns"), vectors(1, 0).schema, "tenant", storage_options=opts)
    ns.append(vectors(300, 1))
    published = fragments(ns)
    monkeypatch.setattr(index_build, "stage_at_published", _index_then_die)
    params = {"num_partitions": 2, "min_rows": 10}
    with pytest.raises(DistributedTaskError, match="nothing was published"):
        lps.create_index(spark, ns.root, "emb", "IVF_FLAT", metric="l2", storage_options=opts,
                         tasks=1, **params)  # fmt: skip
    monkeypatch.undo()
    ns.refresh()
    assert ns.list_indexes() == [] and fragments(ns) == published
    stray = _index_dirs(ns, store)
    assert stray  # the partition t1's index at least, staged before its task died
    # a retry with other parameters builds every partition's index anew
    retry = lps.create_index(
        spark, ns.root, "emb", "IVF_FLAT", metric="cosine", storage_options=opts, **params
    )
    assert len(retry.partitions) == 3
    assert len(_published_segments(ns)) == 3 and not _published_segments(ns) & stray
    lps.vacuum(spark, ns.root, older_than=dt.timedelta(0), storage_options=opts)
    assert _index_dirs(ns, store) == _published_segments(ns)
    assert ns.validate() == []
