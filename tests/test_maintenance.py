"""compact / cleanup / vacuum: what they remove, what they keep, and safety under load."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import Counter

import lance
import pytest
from conftest import local_only
from lance.fragment import write_fragments
from txn_helpers import (
    SCHEMA,
    SPEC,
    assert_no_orphans,
    disk_listing,
    kill,
    records,
    replay,
    rows,
    spawn,
    state,
    table_state,
)

import lance_partitioned as lp
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.operations.leaf.leaf_changes import AppendFiles
from lance_partitioned.operations.txn.staging import stage_leaf
from lance_partitioned.operations.write.partition_writer import PartitionWriter, new_job_secret


@pytest.fixture
def ns(store):
    ns = lp.create(store.root("ns"), SCHEMA, SPEC)
    for i in range(6):
        ns.append(rows(f"t{i}", [0, 1, 2], 2, 100 * i))
    return ns


def fragments(root: str, task) -> int:
    return len(
        lance.dataset(os.path.join(root, task.location), version=task.read_version).get_fragments()
    )


def test_compact_leaves_and_manifest_in_one_transaction(ns):
    before, v = state(ns.root), ns.version
    assert all(fragments(ns.root, t) == 6 for t in ns.plan())
    manifest_frags = len(ns.manifest.dataset().get_fragments())
    assert manifest_frags > 1
    report = ns.compact()
    assert report.leaves_compacted == 3 and report.fragments_rewritten == 18
    assert report.manifest_compacted
    assert all(fragments(ns.root, t) == 1 for t in ns.plan())
    assert len(ns.manifest.dataset().get_fragments()) == 1
    assert state(ns.root) == before
    assert state(ns.root, v) == before  # the old snapshot is still there
    assert state(ns.root, v + 1) == before  # leaf compaction: one manifest version
    again = ns.compact()
    assert again.leaves_compacted == 0 and not again.manifest_compacted


@local_only
def test_cleanup_keeps_snapshots_current_within_retention(ns):
    pinned = lp.open(ns.root, version=ns.version)
    expected = state(ns.root)
    ns.append(rows("late", [0, 3], 1, 9000))
    ns.compact()
    report = ns.cleanup(older_than=dt.timedelta(hours=1))
    assert report.manifest_versions_removed == 0 and report.leaf_versions_removed == 0
    assert table_state(pinned.to_arrow(columns=["id", "part", "txn"])) == expected
    latest = state(ns.root)
    report = ns.cleanup(older_than=dt.timedelta(0))
    assert report.manifest_versions_removed > 0 and report.leaf_versions_removed > 0
    assert [v["version"] for v in ns.versions()] == [ns.version]
    assert state(ns.root) == latest
    for task in ns.plan():  # only the published version of each leaf is left
        ds = lance.dataset(task.uri)
        assert [v["version"] for v in ds.versions()] == [task.read_version]


@local_only
@pytest.mark.parametrize(
    "bad", [dt.timedelta(days=-1), dt.timedelta(microseconds=-1), 0, 3600, 1.5, None, "7d"]
)
def test_cleanup_and_vacuum_refuse_a_negative_or_untyped_retention(ns, bad):
    ns.append(rows("late", [0, 3], 1, 9000))
    ns.compact()
    listing, versions = disk_listing(ns.root), ns.versions()
    for call in (ns.cleanup, ns.vacuum):
        with pytest.raises(lp.RetentionError, match=r"older_than=.*(negative|timedelta)"):
            call(older_than=bad)
    assert disk_listing(ns.root) == listing  # nothing removed, nothing written
    assert ns.versions() == versions


def test_cleanup_keeps_every_version_a_tag_references(ns):
    """A tagged __manifest version keeps every leaf version it pins, through overwrites,
    deletes, compaction and cleanup + vacuum with zero retention; a Lance tag on a leaf
    version keeps that version too."""
    root = ns.root
    expected = Counter()
    for i in range(6):
        expected += table_state(rows(f"t{i}", [0, 1, 2], 2, 100 * i))
    old_version = ns.version
    ns.tag("old")
    pins = {  # what the tagged version pins, read with plain Lance
        r["location"]: r["read_version"]
        for r in lance.dataset(os.path.join(root, "__manifest"), version="old")
        .to_table(filter="object_type = 'table'")
        .to_pylist()
    }
    ns.overwrite(rows("d", [1], 1, 5000), dynamic=True)
    ns.delete("part = 0")
    ns.compact()
    leaf2 = os.path.join(root, ns.plan("part = 2")[0].location)
    lance.dataset(leaf2).tags.create("kept", pins[ns.plan("part = 2")[0].location])
    ns.overwrite(rows("o", [7], 1, 6000))  # the latest version references none of the old leaves
    assert ns.cleanup(older_than=dt.timedelta(0)).manifest_versions_removed > 0
    ns.vacuum(older_than=dt.timedelta(0))
    assert [v["version"] for v in ns.versions()] == [old_version, ns.version]
    assert state(root, "old") == expected
    for location, version in pins.items():
        assert lance.dataset(os.path.join(root, location), version=version).count_rows() == 12
    ns.delete_tag("old")
    ns.cleanup(older_than=dt.timedelta(0))
    assert [v["version"] for v in ns.versions()] == [ns.version]
    assert lance.dataset(leaf2, version="kept").count_rows() == 12  # the leaf's own tag
    assert state(root) == table_state(rows("o", [7], 1, 6000))


@local_only
def test_reading_a_cleaned_up_version_names_the_cleanup_and_its_retention(ns):
    pinned = lp.open(ns.root, version=ns.version)
    plan = pinned.scan("part = 1")
    assert plan.leaves  # planned before the cleanup: the leaf list is already read
    gone = ns.version
    ns.append(rows("late", [0, 1, 2], 1, 9000))
    ns.cleanup(older_than=dt.timedelta(0))
    because = r"it was cleaned up: the cleanup, of .*, used older_than=0:00:00"
    with pytest.raises(
        lp.VersionNotFoundError, match=f"version {gone} .*does not exist \\({because}"
    ):
        lp.open(ns.root, version=gone)
    for read in (pinned.to_arrow, pinned.count, plan.to_arrow, lambda: pinned.scan().count()):
        with pytest.raises(lp.VersionNotFoundError, match=f"version {gone} .*{because}"):
            read()
    # a leaf version the current snapshot reads, removed behind the namespace's back
    (task,) = ns.plan("part = 1")
    lance.write_dataset(rows("foreign", [1], 1, 7000), task.uri, mode="append")  # plain Lance
    lance.dataset(task.uri).cleanup_old_versions(older_than=dt.timedelta(0))
    with pytest.raises(
        lp.VersionNotFoundError,
        match=rf"partition table .* version {task.read_version}, which __manifest version "
        rf"{ns.version} .* does not exist \(it was cleaned up",
    ):
        lp.open(ns.root).to_arrow()


def test_vacuum_reclaims_a_crashed_writers_files_only_when_old_enough(ns):
    expected = state(ns.root)
    snap = Snapshot.load(ns.manifest, for_write=True)
    writer = PartitionWriter(snap, new_job_secret())
    writer.write(rows("dead", [1, 5], 3, 5000).to_batches()[0])
    writer.finish()  # files written, never committed: the process "died" here
    uri = os.path.join(ns.root, ns.plan("part = 2")[0].location)
    frags = write_fragments(rows("ghost", [2], 2, 6000), uri, schema=lance.dataset(uri).schema)
    stage_leaf(uri, ns.plan("part = 2")[0].read_version, AppendFiles(frags), "dead")
    young = ns.vacuum()  # default: only what is older than a day
    assert young.dirs_removed == young.files_removed == young.leaf_versions_removed == 0
    report = ns.vacuum(older_than=dt.timedelta(0))
    assert report.dirs_removed == 1  # the new partition 5
    assert report.files_removed >= 1  # the data file for partition 1
    assert report.leaves_healed == 1 and report.leaf_versions_removed >= 1  # partition 2
    assert state(ns.root) == expected
    assert_no_orphans(ns.root)
    assert lance.dataset(uri).count_rows() == 12
    ns.append(rows("next", [1, 2, 5], 1, 7000))
    assert state(ns.root) == expected + table_state(rows("next", [1, 2, 5], 1, 7000))


@local_only
@pytest.mark.parametrize(
    "folder, suffix, names",
    [
        ("_versions", ".manifest", (".tmpKq3Zx1", ".tmpYg8Wv2")),
        ("_versions", ".manifest", ("{}#1", "{}#2")),
        ("data", ".lance", (".tmpCwGqYR", ".tmpK0kMlT")),
        ("data", ".lance", ("{}#1", "{}#2")),
        ("_transactions", ".txn", ("{}#3", "{}#4")),
    ],
    ids=["commit", "staged-manifest", "data-file", "staged-data-file", "staged-transaction"],
)
def test_vacuum_removes_the_temporary_file_a_killed_writer_left(ns, folder, suffix, names):
    """On local disk a file is written to a temporary name and renamed: ``<dir>/.tmp...``
    by Lance, ``<name>#<n>`` by the object store layer (manifests; any file it puts). A
    process killed in between (a Spark task's worker) leaves the file, which no version
    references; Lance's own listing skips the second kind. Vacuum removes both once they
    are older than the cutoff."""
    expected = state(ns.root)
    where = os.path.join(ns.root, ns.plan()[0].location, folder)
    original = sorted(n for n in os.listdir(where) if n.endswith(suffix))[0]
    old, young = (os.path.join(where, name.format(original)) for name in names)
    for path in (old, young):
        with open(os.path.join(where, original), "rb") as src, open(path, "wb") as dst:
            dst.write(src.read())
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    first = ns.vacuum()  # default grace: a day
    assert not os.path.exists(old) and os.path.exists(young)
    assert first.files_removed == 1
    assert first.bytes_removed == os.path.getsize(young)
    ns.vacuum(older_than=dt.timedelta(0))
    assert not os.path.exists(young)
    assert state(ns.root) == expected
    assert_no_orphans(ns.root)


def test_maintenance_while_writers_and_readers_run(tmp_path, store):
    root = store.root("ns")
    ns = lp.create(root, SCHEMA, SPEC)
    init = rows("init", [0, 1, 2, 3], 1, 10**9)
    successes = [
        {"txn": "init", "op": "append", "parts": [0, 1, 2, 3], "version": ns.append(init).version}
        | {"ids": init["id"].to_pylist()}
    ]
    stop = str(tmp_path / "stop")
    writer = spawn(root, "loop", "1", "20", "3", "6", str(tmp_path / "w.log"))
    readers = [spawn(root, "read", str(tmp_path / f"r{i}.log"), stop) for i in range(2)]
    rounds = removed = compacted = 0
    deadline = None
    try:
        # Keep maintaining until the writer is done and the 3 s retention has let
        # cleanup remove something: on a fast machine the writer can finish first.
        while True:
            if writer.poll() is not None:
                deadline = deadline or time.monotonic() + 15
                if removed > 0 or time.monotonic() > deadline:
                    break
            handle = lp.open(root)
            compacted += handle.compact().leaves_compacted
            removed += handle.cleanup(older_than=dt.timedelta(seconds=3)).manifest_versions_removed
            handle.vacuum(older_than=dt.timedelta(seconds=3))
            rounds += 1
            time.sleep(0.2)
    finally:
        open(stop, "w").close()
        for proc in readers:
            proc.wait(timeout=60)
        for proc in [writer, *readers]:
            if proc.poll() is None:
                kill(proc)
    for proc in [writer, *readers]:
        assert proc.returncode == 0, proc.stderr.read()
    assert rounds >= 2 and compacted > 0 and removed > 0, (rounds, compacted, removed)
    recs = records(str(tmp_path / "w.log"))
    successes += [r for r in recs if not r.get("failed")]
    assert all(r["retryable"] for r in recs if r.get("failed"))
    assert len(successes) == 21
    # maintenance publishes versions with unchanged content: a snapshot at version v
    # holds the transactions committed at or before v
    for i in range(2):
        for rec in records(str(tmp_path / f"r{i}.log")):
            assert "error" not in rec, rec
            assert table_state_from(rec["rows"]) == replay(successes, rec["version"])
    assert state(root) == replay(successes)
    lp.open(root).vacuum(older_than=dt.timedelta(0))
    assert_no_orphans(root)


def table_state_from(triples):
    from collections import Counter

    return Counter(tuple(x) for x in triples)
