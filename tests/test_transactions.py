"""The transaction protocol in one process: staging invariants, G4, deletes, time travel,
tags, and (explicit) repair after a foreign ``DirectoryNamespace`` writer.

Crash and multi-process behaviour is in ``test_crash.py`` and ``test_concurrency.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import lance
import pyarrow as pa
import pytest
from conftest import local_only
from lance.fragment import write_fragments
from lance.namespace import (
    CreateNamespaceRequest,
    DescribeNamespaceRequest,
    DirectoryNamespace,
    ListNamespacesRequest,
)
from txn_helpers import SCHEMA, SPEC, disk_listing, rows, state, table_state

import lance_partitioned as lp
from lance_partitioned.catalog.manifest import READ_MIRROR_KEYS
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.operations.leaf.leaf_changes import AppendFiles, LeafChange, ReplaceFiles
from lance_partitioned.operations.txn.staging import TXN_PROPERTY, fragment_signature, stage_leaf
from lance_partitioned.operations.write.partition_writer import PartitionWriter, new_job_secret
from lance_partitioned.operations.write.publish import commit_write


@pytest.fixture
def ns(store):
    ns = lp.create(store.root("ns"), SCHEMA, SPEC)
    ns.append(rows("b0", [0, 1, 2, 3, 4], 3, 0))
    return ns


def leaf_uri(ns, part: int) -> tuple[str, int]:
    (task,) = ns.plan(f"part = {part}")
    return os.path.join(ns.root, task.location), task.read_version


def manifest_table(root: str) -> pa.Table:
    return lance.dataset(os.path.join(root, "__manifest")).to_table()


# -- the protocol ------------------------------------------------------------------


def test_one_manifest_commit_per_write_and_read_version_mirror(ns):
    v = ns.version
    ns.append(rows("a", [1, 2, 9], 2, 100))
    assert ns.version == v + 1
    for row in manifest_table(ns.root).to_pylist():
        if row["object_type"] == "table":
            meta = json.loads(row["metadata"])
            assert meta[READ_MIRROR_KEYS["read_version"]] == str(row["read_version"])
            assert all(isinstance(val, str) for val in meta.values())


def test_unpublished_leaf_versions_never_become_visible(ns):
    """G4: a writer that staged a leaf version and died must not leak into the next append."""
    uri, published = leaf_uri(ns, 1)
    ghost = rows("ghost", [1], 4, 900)
    frags = write_fragments(ghost, uri, schema=lance.dataset(uri).schema)
    staged = stage_leaf(uri, published, AppendFiles(frags), "dead-writer")
    assert staged.version == published + 1
    assert lance.dataset(uri).count_rows() == 3 + 4  # the leaf's latest holds the ghost rows
    before = state(ns.root)
    mine = rows("a", [1, 2], 2, 100)
    ns.append(mine)
    assert state(ns.root) == before + table_state(mine)
    # the published version was built on a Restore of the old content, not on the ghost
    (task,) = ns.plan("part = 1")
    parent = lance.dataset(uri, version=task.read_version - 1)
    assert fragment_signature(parent) == fragment_signature(lance.dataset(uri, version=published))
    txn = lance.dataset(uri).read_transaction(task.read_version)
    assert TXN_PROPERTY in txn.transaction_properties


class Interfering(LeafChange):
    """Lands another (namespace) commit on the leaf right before ours: the race staging guards."""

    def __init__(self, inner: LeafChange, uri: str, extra: pa.Table):
        self.inner, self.uri, self.extra, self.fired = inner, uri, extra, False

    def operation(self, base):
        if not self.fired:
            self.fired = True
            frags = write_fragments(self.extra, self.uri, schema=base.schema)
            stage_leaf(self.uri, base.version, AppendFiles(frags), "other")
        return self.inner.operation(base)


@pytest.mark.parametrize("kind", ["append", "replace"])
def test_staging_never_accepts_a_version_with_someone_elses_commit_below(ns, kind):
    uri, published = leaf_uri(ns, 2)
    mine = rows("a", [2], 2, 100)
    frags = write_fragments(mine, uri, schema=lance.dataset(uri).schema)
    inner = AppendFiles(frags) if kind == "append" else ReplaceFiles(None, frags)
    change = Interfering(inner, uri, rows("other", [2], 5, 500))
    staged = stage_leaf(uri, published, change, "me")
    assert change.fired
    ds = lance.dataset(uri, version=staged.version)
    parent = lance.dataset(uri, version=staged.version - 1)
    assert fragment_signature(parent) == fragment_signature(lance.dataset(uri, version=published))
    got = set(ds.to_table()["txn"].to_pylist())
    assert got == ({"b0", "a"} if kind == "append" else {"a"})  # never "other"


@local_only
def test_plain_lance_write_to_a_leaf_stays_invisible_and_does_not_block(ns, caplog):
    uri, published = leaf_uri(ns, 3)
    lance.write_dataset(rows("foreign", [3], 1, 700), uri, mode="append")
    with caplog.at_level("WARNING"):
        ns.append(rows("a", [3, 4], 1, 100))  # built on the published version
    assert "not written by a namespace transaction" in caplog.text
    (task,) = ns.plan("part = 3")
    parent = lance.dataset(uri, version=task.read_version - 1)
    assert fragment_signature(parent) == fragment_signature(lance.dataset(uri, version=published))
    ns.append(rows("c", [3], 1, 300))
    assert {t for t, p, _ in state(ns.root) if p == 3} == {"b0", "a", "c"}
    assert "foreign" not in set(lance.dataset(uri).to_table()["txn"].to_pylist())


def test_write_planned_before_a_foreign_clobber_fails_cleanly_until_repaired(ns):
    snap = Snapshot.load(ns.manifest, for_write=True)
    writer = PartitionWriter(snap, new_job_secret())
    writer.write(rows("a", [1, 7], 2, 100).to_batches()[0])
    written = writer.finish()
    before = state(ns.root)
    DirectoryNamespace(root=ns.root).create_namespace(CreateNamespaceRequest(id=["foreign"]))
    clobbered = ns.manifest.dataset().version
    with pytest.raises(lp.NamespaceDamagedError, match=r"call ns.repair\(\)"):
        commit_write(ns.manifest, snap, written)  # conflicts; the reload finds the damage
    assert ns.manifest.dataset().version == clobbered  # nothing published, nothing repaired
    assert state(ns.root) == before
    ns.repair()
    ns.append(rows("a", [1, 7], 2, 100))
    assert state(ns.root) == before + table_state(rows("a", [1, 7], 2, 100))
    assert "foreign" in manifest_table(ns.root)["object_id"].to_pylist()


# -- failed writes leave nothing ---------------------------------------------------------


class Injected(RuntimeError):
    pass


@pytest.mark.parametrize("create", [True, False], ids=["created", "files"])
@pytest.mark.parametrize("where", ["sequential", "parallel", "publish"])
def test_failed_write_leaves_nothing_behind(ns, store, monkeypatch, caplog, where, create):
    """D15: new partition directories are removed, existing partitions restored, no warning.

    ``created``: the writer creates the new leaves' datasets itself (the default
    for a job's only writer), so only the existing leaves are staged at publish
    time; ``files``: the new leaves' files are staged with ``stage_new_leaf``.
    """
    import lance_partitioned.operations.write.job as job_mod
    import lance_partitioned.operations.write.publish as write_mod

    if not create:
        real_writer = job_mod.PartitionWriter
        monkeypatch.setattr(
            job_mod,
            "PartitionWriter",
            lambda *a, **k: real_writer(*a, **{**k, "create_leaves": False}),
        )
    if where == "sequential":  # staging stops at the first failure: some leaves never staged
        import lance_partitioned.operations.txn.driver as driver

        monkeypatch.setattr(driver, "STAGE_THREADS", 1)
    calls = []

    def failing(real):
        def wrapped(*args, **kwargs):
            calls.append(args[0])
            if where != "publish" and len(calls) == 2:
                raise Injected("injected staging failure")
            return real(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(write_mod, "stage_leaf", failing(write_mod.stage_leaf))
    monkeypatch.setattr(write_mod, "stage_new_leaf", failing(write_mod.stage_new_leaf))
    if where == "publish":

        def no_publish(*args, **kwargs):
            raise Injected("injected failure of the __manifest commit")

        monkeypatch.setattr(write_mod.Manifest, "commit", no_publish)
    leaves = {t.location: t.read_version for t in ns.plan("part IN (1, 2)")}
    data = {loc: store.listdir(os.path.join(ns.root, loc, "data")) for loc in leaves}
    published = {
        loc: lance.dataset(os.path.join(ns.root, loc), version=v) for loc, v in leaves.items()
    }
    root_before, before = store.listdir(ns.root), state(ns.root)
    with pytest.raises(Injected), caplog.at_level("WARNING"):
        ns.append(rows("x", [1, 7, 2, 8], 2, 100))  # two existing partitions, two new ones
    if where == "sequential" or create:
        assert len(calls) == 2
    elif where == "parallel":  # no leaf starts after the failure; those running finish
        assert 2 <= len(calls) <= 4
    else:
        assert len(calls) == 4
    assert store.listdir(ns.root) == root_before  # no new partition directory
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
    for loc, v in leaves.items():
        latest = lance.dataset(os.path.join(ns.root, loc))
        if latest.version == v:  # never staged: not even a data file is left
            assert store.listdir(os.path.join(ns.root, loc, "data")) == data[loc]
        else:  # staged, then restored: the latest version holds the published rows again
            assert latest.to_table().sort_by("id") == published[loc].to_table().sort_by("id")
    assert state(ns.root) == before
    monkeypatch.undo()
    ns.append(rows("y", [1, 7], 1, 200))
    assert state(ns.root) == before + table_state(rows("y", [1, 7], 1, 200))


# -- deletes -------------------------------------------------------------------------


def test_delete_prunes_and_commits_all_partitions_at_once(ns):
    before = {t.object_id: t.read_version for t in ns.plan()}
    v = ns.version
    result = ns.delete("part IN (1, 3) AND id % 3 = 0")
    assert result.version == v + 1 and ns.version == v + 1
    after = {t.object_id: t.read_version for t in ns.plan()}
    changed = {oid for oid in before if before[oid] != after[oid]}
    assert len(changed) == result.partitions == 2
    expected = {
        r
        for r in table_state(rows("b0", [0, 1, 2, 3, 4], 3, 0))
        if not (r[1] in (1, 3) and r[2] % 3 == 0)
    }
    assert set(state(ns.root)) == expected
    assert result.rows == 15 - len(expected)
    assert state(ns.root, v) == table_state(rows("b0", [0, 1, 2, 3, 4], 3, 0))


@local_only
def test_delete_edge_cases(ns):
    v = ns.version
    assert ns.delete("part = 42").partitions == 0
    assert ns.version == v  # nothing to delete: no commit
    with pytest.raises(ValueError, match="needs a filter"):
        ns.delete(None)
    with pytest.raises(lp.PinnedSnapshotError, match="pinned"):
        lp.open(ns.root, version=v).delete("true")
    assert ns.delete("part = 0").rows == 3  # a whole partition: fragments dropped
    assert ns.count("part = 0") == 0
    ns.append(rows("a", [0], 1, 100))
    assert ns.count("part = 0") == 1
    total = ns.count()
    assert ns.delete("true").rows == total and ns.count() == 0


@local_only
@pytest.mark.parametrize("blank", [None, "", "   ", "\n", "\t \r\n"])
def test_delete_refuses_a_missing_or_blank_filter_and_changes_nothing(ns, blank):
    before, listing = state(ns.root), disk_listing(ns.root)
    with pytest.raises(lp.FilterError, match='needs a filter.*delete\\("true"\\)'):
        ns.delete(blank)
    assert disk_listing(ns.root) == listing  # byte for byte: not even a lock or a version
    assert state(ns.root) == before
    # the explicit spelling of a full delete still works, in any case
    assert ns.delete("TRUE").rows == 15 and ns.count() == 0


# -- time travel and tags ----------------------------------------------------------------


@local_only
def test_every_version_reads_exactly_what_was_committed(ns):
    history = [(ns.version, state(ns.root), dt.datetime.now())]
    ops = [
        lambda: ns.append(rows("a", [1, 5], 2, 100)),
        lambda: ns.overwrite(rows("d", [2, 6], 1, 200), dynamic=True),
        lambda: ns.delete("part = 1"),
        lambda: ns.compact(compact_manifest=False),
        lambda: ns.overwrite(rows("o", [7], 2, 300)),
    ]
    for op in ops:
        time.sleep(0.01)
        op()
        time.sleep(0.01)
        history.append((ns.version, state(ns.root), dt.datetime.now()))
    for version, expected, when in history:
        assert state(ns.root, version) == expected
        assert state_asof(ns.root, when) == expected
        aware = when.astimezone(dt.timezone.utc)
        assert state_asof(ns.root, aware) == expected
    with pytest.raises(lp.PartitionedNamespaceError, match="no __manifest version at or before"):
        lp.open(ns.root, asof=dt.datetime(2000, 1, 1))
    with pytest.raises(ValueError, match="either version or asof"):
        lp.open(ns.root, version=1, asof=dt.datetime.now())


def state_asof(root, when):
    t = lp.open(root, asof=when).to_arrow(columns=["id", "part", "txn"])
    return table_state(t)


def test_tags_name_consistent_snapshots_and_survive_cleanup(ns):
    first = ns.version
    assert ns.tag("first") == first
    ns.append(rows("a", [1, 2], 2, 100))
    middle = ns.version
    ns.tag("middle")
    ns.overwrite(rows("o", [9], 1, 200))
    assert ns.tags() == {"first": first, "middle": middle}
    with pytest.raises(lp.PartitionedNamespaceError, match="already exists"):
        ns.tag("first")
    expected = state(ns.root, middle)
    ns.cleanup(older_than=dt.timedelta(0))
    assert state(ns.root, "middle") == expected
    assert lp.open(ns.root, version="first").count() == 15
    with pytest.raises(lp.VersionNotFoundError, match="it was cleaned up"):
        lp.open(ns.root, version=first - 1)  # untagged and cleaned up
    ns.delete_tag("middle")
    ns.cleanup(older_than=dt.timedelta(0))
    with pytest.raises(lp.VersionNotFoundError, match="no tag 'middle'; tags: first"):
        lp.open(ns.root, version="middle")
    assert ns.count() == 1


# -- foreign writers -----------------------------------------------------------------------


def _rows_by_id(table: pa.Table) -> dict[str, dict]:
    return {r["object_id"]: r for r in table.to_pylist()}


def test_foreign_directory_namespace_write_is_repaired_from_history(ns, caplog):
    ns.append(rows("a", [1, 2, 8], 2, 100))
    before = _rows_by_id(manifest_table(ns.root))
    DirectoryNamespace(root=ns.root).create_namespace(CreateNamespaceRequest(id=["foreign"]))
    clobbered = lance.dataset(os.path.join(ns.root, "__manifest"))
    assert "read_version" not in clobbered.schema.names
    expected = table_state(rows("b0", [0, 1, 2, 3, 4], 3, 0)) + table_state(
        rows("a", [1, 2, 8], 2, 100)
    )
    with caplog.at_level("WARNING"):
        reopened = lp.open(ns.root)
    assert "lacks the read columns" in caplog.text and "from history" in caplog.text
    assert ns.manifest.dataset().version == clobbered.version  # opening did not repair
    assert state(ns.root) == expected  # read through the in-memory reconstruction
    assert state(ns.root, clobbered.version) == expected  # so is the damaged version itself
    done = reopened.repair()
    assert "restored them as version" in done[0] and "from history" in done[1]
    after = _rows_by_id(manifest_table(ns.root))
    assert after.pop("foreign")["object_type"] == "namespace"
    assert after == before
    assert state(ns.root) == expected
    assert reopened.repair() == []  # nothing left to do: no commit
    reopened.append(rows("c", [8], 1, 300))
    assert reopened.count("part = 8") == 3


@local_only
def test_foreign_write_is_repaired_from_the_metadata_mirror_alone(ns):
    ns.append(rows("a", [1, 2, 8], 2, 100))
    before = _rows_by_id(manifest_table(ns.root))
    DirectoryNamespace(root=ns.root).create_namespace(CreateNamespaceRequest(id=["foreign"]))
    # lose every version that still had the columns: only the mirror is left
    lance.dataset(os.path.join(ns.root, "__manifest")).cleanup_old_versions(
        older_than=dt.timedelta(0)
    )
    assert len(lance.dataset(os.path.join(ns.root, "__manifest")).versions()) == 1
    lp.open(ns.root).repair()
    after = _rows_by_id(manifest_table(ns.root))
    after.pop("foreign")
    assert after == before
    # DirectoryNamespace still reads the repaired manifest
    dn = DirectoryNamespace(root=ns.root)
    assert sorted(dn.list_namespaces(ListNamespacesRequest(id=[])).namespaces) == ["foreign", "v1"]
    level1 = dn.list_namespaces(ListNamespacesRequest(id=["v1"])).namespaces
    props = dn.describe_namespace(DescribeNamespaceRequest(id=["v1", level1[0]])).properties
    assert set(props) == {"partition.part"}


@local_only
def test_delete_matches_by_field_id_after_schema_evolution(store):
    """A leaf written before ``a`` was renamed to ``b`` (and a new ``a`` added) must not
    have its old ``a`` column matched by a filter on the new ``a``."""
    schema = pa.schema(
        [pa.field("id", pa.int64(), False), pa.field("part", pa.int32()), pa.field("a", pa.int64())]
    )
    ns = lp.create(store.root("ns"), schema, "part")
    ns.append(pa.table({"id": [1, 2, 3, 4], "part": [1, 1, 2, 2], "a": [10, 20, 10, 20]}, schema))
    ns.rename_column("a", "b")
    ns.add_column("a", pa.int64())
    ns.append(
        pa.table({"id": [5, 6, 7], "part": [1, 3, 3], "b": [10, 10, 20], "a": [None, 10, 99]})
    )
    assert ns.delete("a = 10").rows == 1
    assert sorted(ns.to_arrow(columns=["id"])["id"].to_pylist()) == [1, 2, 3, 4, 5, 7]
    assert ns.delete("b = 20").rows == 3
    assert sorted(ns.to_arrow(columns=["id"])["id"].to_pylist()) == [1, 3, 5]
