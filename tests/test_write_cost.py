"""The per-partition work of a write that creates many partitions stays small.

An append creating 10,000 partitions pays its per-leaf Python work 10,000 times.
These tests pin the cheap paths (no timing: they count calls or check identity)
and that the guarantees those paths keep still hold.
"""

from __future__ import annotations

import json
import os
import threading

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lance.fragment import write_fragments

import lance_partitioned as lp
from lance_partitioned.operations.leaf import leaf_schema
from lance_partitioned.operations.leaf.field_ids import FieldIdLayoutError, IdLayout
from lance_partitioned.operations.txn.staged_check import fragment_files
from lance_partitioned.operations.write import publish


def _fragments(tmp_path, table: pa.Table) -> list:
    return write_fragments(table, str(tmp_path / "leaf"), schema=table.schema, mode="create")


def test_remap_with_lance_numbering_returns_the_fragments_as_written(tmp_path):
    table = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array(["x"])})
    frags = _fragments(tmp_path, table)
    layout = IdLayout.of(table.schema, [[0], [1]])
    assert layout.is_natural
    out = layout.remap(frags)
    # no JSON round trip per fragment: the very same objects come back
    assert len(out) == len(frags) and all(a is b for a, b in zip(out, frags, strict=True))


def test_remap_with_lance_numbering_still_refuses_unknown_field_ids(tmp_path):
    table = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array(["x"])})
    frags = _fragments(tmp_path, table)
    data = frags[0].to_json()
    data["files"][0]["fields"] = [0, 7]  # a column Lance's numbering of (a, b) lacks
    bad = lance.fragment.FragmentMetadata.from_json(json.dumps(data))
    with pytest.raises(FieldIdLayoutError, match=r"\[7\]"):
        IdLayout.of(table.schema, [[0], [1]]).remap([bad])


def test_remap_to_other_ids_rewrites_the_file_fields(tmp_path):
    table = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array(["x"])})
    frags = _fragments(tmp_path, table)
    out = IdLayout.of(table.schema, [[5], [3]]).remap(frags)
    assert [f.fields for f in out[0].files] == [[5, 3]]
    assert [f.fields for f in frags[0].files] == [[0, 1]]  # the input is left alone


def test_fragment_files_names_the_same_paths_as_lance(tmp_path):
    table = pa.table({"a": pa.array(range(10), pa.int64())})
    frags = write_fragments(
        table, str(tmp_path / "leaf"), schema=table.schema, mode="create", max_rows_per_file=3
    )
    expected = {"data/" + f.path for frag in frags for f in frag.files}
    assert len(expected) == 4
    assert fragment_files(frags) == expected


def test_namespace_layout_is_computed_once_per_commit_not_per_new_leaf(tmp_path, monkeypatch):
    calls: list[object] = []
    real = leaf_schema.namespace_layout

    def counting(schema):
        calls.append(schema)
        return real(schema)

    monkeypatch.setattr(publish, "namespace_layout", counting)
    table = pa.table({"k": pa.array(range(20), pa.int32()), "v": pa.array(range(20), pa.int64())})
    ns = lp.create(str(tmp_path / "ns"), table.schema, "k")
    result = ns.append(table)
    assert result.partitions == 20
    assert len(calls) == 1
    # and the write is whole: every row back, per partition
    back = lp.open(str(tmp_path / "ns")).scan().to_arrow().sort_by("k")
    assert back.column("v").to_pylist() == list(range(20))


# -- a new partition costs one Lance call --------------------------------------------


def _count_leaf_lance_calls(monkeypatch, root: str) -> list[str]:
    """Record every Lance call that writes into a leaf of ``root`` (not ``__manifest``)."""
    from lance_partitioned.operations.write import partition_writer

    calls: list[str] = []

    def leaf_uri(uri: object) -> str | None:
        text = str(getattr(uri, "uri", uri))
        return text if text.startswith(root) and "__manifest" not in text else None

    def counting(name: str, real):
        def wrapped(*args, **kwargs):
            uri = kwargs.get("uri", args[1] if name == "write_dataset" else args[0])
            if leaf_uri(uri):
                calls.append(name)
            return real(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(lance, "write_dataset", counting("write_dataset", lance.write_dataset))
    monkeypatch.setattr(
        partition_writer,
        "write_fragments",
        counting("write_fragments", partition_writer.write_fragments),
    )
    monkeypatch.setattr(
        lance.LanceDataset, "commit", staticmethod(counting("commit", lance.LanceDataset.commit))
    )
    return calls


def test_an_append_creates_each_new_partition_with_one_lance_call(tmp_path, monkeypatch):
    root = str(tmp_path / "ns")
    table = pa.table(
        {"k": pa.array([i % 20 for i in range(60)], pa.int32()), "v": pa.array(range(60))}
    )
    ns = lp.create(root, table.schema, "k")
    calls = _count_leaf_lance_calls(monkeypatch, root)
    result = ns.append(table, progress=False)
    monkeypatch.undo()
    assert result.new_partitions == 20
    # one write_dataset per new leaf: no separate file write plus staging commit
    assert calls == ["write_dataset"] * 20
    # each leaf is a whole Lance dataset at version 1, tagged with one transaction id,
    # with the namespace's field ids and exactly its partition's rows (oracle: pyarrow)
    want_ids = [int(f.metadata[b"lance:field_id"]) for f in lp.open(root).schema.arrow]
    txns = set()
    for task in lp.open(root).plan():
        ds = lance.dataset(task.uri)
        assert (task.read_version, ds.version) == (1, 1)
        txns.add(ds.read_transaction(1).transaction_properties["lp.txn"])
        assert [f.id() for f in ds.lance_schema.fields()] == want_ids
        k = task.partition_values["k"]
        expected = table.filter(pc.equal(table["k"], k)).sort_by("v")
        assert ds.to_table().sort_by("v").select(["k", "v"]) == expected
    assert len(txns) == 1


def test_writers_sharing_a_job_leave_new_leaves_to_the_commit(tmp_path):
    """Spark tasks write into the same new partition directories: none may create the dataset."""
    from lance_partitioned.operations.write.job import WriteJob
    from lance_partitioned.operations.write.publish import WriteMode

    root = str(tmp_path / "ns")
    table = pa.table({"k": pa.array([1, 2, 3], pa.int32()), "v": pa.array([1, 2, 3])})
    ns = lp.create(root, table.schema, "k")
    job = WriteJob(ns.manifest, ns.manifest.dataset().version, WriteMode.APPEND)
    parts = [job.write(lambda w: w.write_all(iter(table.to_batches())), shared=True)]
    parts.append(job.write(lambda w: w.write_all(iter(table.to_batches())), shared=True))
    for leaf_write in parts[0].leaves.values():
        assert leaf_write.created_version is None
        uri = job.snapshot.leaf_uri(leaf_write.location)
        assert not os.path.exists(os.path.join(uri, "_versions"))  # files only
    written = parts[0].merge(parts[1])
    job.commit(written)
    assert sorted(lp.open(root).to_arrow()["v"].to_pylist()) == [1, 1, 2, 2, 3, 3]


def test_a_write_failing_while_creating_new_partitions_leaves_nothing(tmp_path, monkeypatch):
    from lance_partitioned.operations.write import partition_writer

    root = str(tmp_path / "ns")
    table = pa.table({"k": pa.array(range(8), pa.int32()), "v": pa.array(range(8))})
    ns = lp.create(root, table.schema, "k")
    ns.append(table.slice(0, 2))
    before = sorted(os.listdir(root))
    calls = []
    real = partition_writer.create_leaf

    def failing(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 3:
            raise RuntimeError("injected failure creating a leaf")
        return real(*args, **kwargs)

    monkeypatch.setattr(partition_writer, "create_leaf", failing)
    with pytest.raises(RuntimeError, match="injected"):
        ns.append(table.slice(2), progress=False)
    # Leaves are created 4 at a time: those started before the failure run to the
    # end (and are cleaned up), no further one starts (``parallel.for_each``), so
    # 3 to 6 were attempted, as the machine's load has it.
    assert 3 <= len(calls) <= 6
    assert sorted(os.listdir(root)) == before  # no new partition directory is left
    assert sorted(lp.open(root).to_arrow()["v"].to_pylist()) == [0, 1]


def test_the_check_before_publishing_batches_its_metadata_calls(tmp_path, monkeypatch):
    """Every new leaf is checked right before publishing, in one batched call; a gap is named."""
    from lance_partitioned.catalog import storage
    from lance_partitioned.operations.txn.staged_check import (
        StagedFilesMissingError,
        StagedLeaf,
        check_staged_all,
    )

    leaves = []
    for i in range(5):
        uri = str(tmp_path / f"leaf{i}")
        ds = lance.write_dataset(pa.table({"a": [i]}), uri)
        files = frozenset(fragment_files([f.metadata for f in ds.get_fragments()]))
        leaves.append(StagedLeaf(uri, None, 1, added=files))
    calls = []
    real = storage.Storage.missing
    monkeypatch.setattr(
        storage.Storage, "missing", lambda self, uris: calls.append(1) or real(self, uris)
    )
    check_staged_all(leaves, None)
    assert len(calls) == 1
    gone = sorted(leaves[3].added)[0]
    os.remove(os.path.join(leaves[3].uri, gone))
    with pytest.raises(StagedFilesMissingError, match=gone.split("/")[-1]):
        check_staged_all(leaves, None)


def test_a_created_leaf_whose_file_vanished_is_not_published(tmp_path):
    """The check before publishing looks for the data files of the leaves the writer created."""
    from lance_partitioned.operations.txn.staged_check import StagedFilesMissingError
    from lance_partitioned.operations.write.job import WriteJob
    from lance_partitioned.operations.write.publish import WriteMode

    root = str(tmp_path / "ns")
    table = pa.table({"k": pa.array([1, 2], pa.int32()), "v": pa.array([1, 2])})
    ns = lp.create(root, table.schema, "k")
    version = ns.manifest.dataset().version
    job = WriteJob(ns.manifest, version, WriteMode.APPEND)
    written = job.write(lambda w: w.write_all(iter(table.to_batches())))
    leaf_write = next(iter(written.leaves.values()))
    assert leaf_write.created_version == 1
    data = os.path.join(job.snapshot.leaf_uri(leaf_write.location), "data")
    (name,) = os.listdir(data)
    os.remove(os.path.join(data, name))  # e.g. a vacuum that knew no lease
    with pytest.raises(StagedFilesMissingError, match=name):
        job.commit(written)
    assert lp.open(root).version == version  # nothing published


def test_a_created_leaf_cannot_be_merged_with_another_writers_files(tmp_path):
    """A created leaf's version 1 holds its own writer's rows: merging more would lose them."""
    from lance_partitioned.errors import PartitionedNamespaceError
    from lance_partitioned.operations.write.job import WriteJob
    from lance_partitioned.operations.write.publish import WriteMode

    table = pa.table({"k": pa.array([1, 2], pa.int32()), "v": pa.array([1, 2])})
    ns = lp.create(str(tmp_path / "ns"), table.schema, "k")
    job = WriteJob(ns.manifest, ns.manifest.dataset().version, WriteMode.APPEND)
    shared = job.write(lambda w: w.write_all(iter(table.to_batches())), shared=True)
    created = job.write(lambda w: w.write_all(iter(table.to_batches())))
    with pytest.raises(PartitionedNamespaceError, match="must not create leaves"):
        shared.merge(created)


def test_the_commit_reuses_the_rows_the_writer_looked_up(tmp_path, monkeypatch):
    """An append into existing partitions publishes from the ``__manifest`` rows the
    writer found; it does not look them up again (1,000 lookups cost ~150 ms at a
    million partitions). Also across processes: a pickled LeafWrite keeps its row."""
    import pickle

    from lance_partitioned.catalog.snapshot import Snapshot
    from lance_partitioned.operations.write.job import WriteJob
    from lance_partitioned.operations.write.publish import WriteMode

    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    ns = lp.create(str(tmp_path / "ns"), schema, "k")
    ns.append(pa.table({"k": [1, 2, 3], "v": [1, 2, 3]}, schema=schema))
    lookups: list[list[str]] = []
    real = Snapshot.leaves_by_id
    monkeypatch.setattr(
        Snapshot, "leaves_by_id", lambda self, ids: lookups.append(list(ids)) or real(self, ids)
    )
    data = pa.table({"k": [1, 2, 9], "v": [10, 20, 90]}, schema=schema)
    with WriteJob.begin(ns.manifest, WriteMode.APPEND) as job:
        written = job.write(lambda w: w.write_all(data.to_batches()))
        written = pickle.loads(pickle.dumps(written))  # as Spark ships it to the driver
        job.commit(written)
    assert lookups == []
    # what was published is right: plain Lance reads every leaf at its pinned version
    man = lance.dataset(os.path.join(ns.root, "__manifest"))
    got = []
    for row in man.to_table(filter="object_type = 'table'").to_pylist():
        leaf = lance.dataset(os.path.join(ns.root, row["location"]), version=row["read_version"])
        got += leaf.to_table().to_pylist()
    want = pa.concat_tables([pa.table({"k": [1, 2, 3], "v": [1, 2, 3]}, schema=schema), data])
    assert sorted((r["k"], r["v"]) for r in got) == sorted(
        zip(want["k"].to_pylist(), want["v"].to_pylist(), strict=True)
    )


def test_staging_does_not_map_a_leaf_the_writer_found_complete(tmp_path, monkeypatch):
    """The writer maps each existing leaf's columns against the namespace; when the
    leaf lacks none, staging (on the same open dataset) does not map it again. A leaf
    that lacks a column the files hold still gains it first (checked with plain Lance)."""
    from lance_partitioned.operations.leaf import leaf_schema

    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    ns = lp.create(str(tmp_path / "ns"), schema, "k")
    ns.append(pa.table({"k": [1, 2], "v": [1, 2]}, schema=schema))
    calls: list[object] = []
    real = leaf_schema.leaf_columns_target

    def counting(ds, sch, label, only=None):
        calls.append(only)
        return real(ds, sch, label, only)

    monkeypatch.setattr(leaf_schema, "leaf_columns_target", counting)
    ns.append(pa.table({"k": [1, 2], "v": [3, 4]}, schema=schema))
    assert calls == [None, None]  # the writer's two mappings; staging adds none
    monkeypatch.setattr(leaf_schema, "leaf_columns_target", real)

    ns.add_column("w", pa.string())
    ns = lp.open(ns.root)
    ns.append(pa.table({"k": [1], "v": [5], "w": ["x"]}))
    man = lance.dataset(os.path.join(ns.root, "__manifest"))
    row = man.to_table(filter="object_type = 'table' AND partition_field_k = 1").to_pylist()[0]
    leaf = lance.dataset(os.path.join(ns.root, row["location"]), version=row["read_version"])
    assert leaf.schema.names == ["k", "v", "w"]
    assert sorted(leaf.to_table().to_pylist(), key=lambda r: r["v"]) == [
        {"k": 1, "v": 1, "w": None},
        {"k": 1, "v": 3, "w": None},
        {"k": 1, "v": 5, "w": "x"},
    ]


def _leaf_rows(root: str) -> list[tuple[int, int]]:
    """Every (k, v) readers see, read with plain Lance at each row's pinned version."""
    man = lance.dataset(os.path.join(root, "__manifest"))
    got = []
    for row in man.to_table(filter="object_type = 'table'").to_pylist():
        leaf = lance.dataset(os.path.join(root, row["location"]), version=row["read_version"])
        got += [(r["k"], r["v"]) for r in leaf.to_table().to_pylist()]
    return sorted(got)


def test_a_commit_does_not_decode_the_fragments_its_writer_wrote(tmp_path, monkeypatch):
    """The writer keeps the fragment objects it wrote into existing partitions; the commit
    stages them without decoding their JSON again (~30 us a leaf, on every leaf staged).
    A new partition's are not kept (memory per partition of a write creating millions).
    A LeafWrite that crossed processes (pickled, as Spark ships it) has only the JSON."""
    import pickle

    from lance.fragment import FragmentMetadata

    from lance_partitioned.operations.write.job import WriteJob
    from lance_partitioned.operations.write.publish import WriteMode

    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    ns = lp.create(str(tmp_path / "ns"), schema, "k")
    ns.append(pa.table({"k": [1, 2, 3], "v": [1, 2, 3]}, schema=schema))
    decoded: list[str] = []
    real = FragmentMetadata.from_json
    monkeypatch.setattr(
        FragmentMetadata, "from_json", staticmethod(lambda s: decoded.append(s) or real(s))
    )
    first = pa.table({"k": [1, 2], "v": [10, 20]}, schema=schema)
    with WriteJob.begin(ns.manifest, WriteMode.APPEND) as job:
        written = job.write(lambda w: w.write_all(first.to_batches()))
        job.commit(written)
    assert decoded == []
    ns.append(pa.table({"k": [9], "v": [90]}, schema=schema))  # a new partition
    decoded.clear()
    second = pa.table({"k": [1, 3], "v": [11, 31]}, schema=schema)
    with WriteJob.begin(ns.manifest, WriteMode.APPEND) as job:
        written = job.write(lambda w: w.write_all(second.to_batches()))
        shipped = pickle.loads(pickle.dumps(written))
        assert all(lw.decoded == {} for lw in shipped.leaves.values())
        job.commit(shipped)
    assert sorted(decoded) == sorted(f for lw in shipped.leaves.values() for f in lw.fragments)
    with WriteJob.begin(ns.manifest, WriteMode.APPEND) as job:
        written = job.write(
            lambda w: w.write_all(pa.table({"k": [7], "v": [70]}, schema=schema).to_batches())
        )
        assert [lw.decoded for lw in written.leaves.values()] == [{}]
        job.abort(written)
    want = [(1, 1), (1, 10), (1, 11), (2, 2), (2, 20), (3, 3), (3, 31), (9, 90)]
    assert _leaf_rows(ns.root) == want


def test_published_rows_are_built_without_a_json_round_trip(tmp_path, monkeypatch):
    """Each published table row's metadata is encoded once, from a dict (not JSON
    decoded and encoded again), and says what seed 000 and docs/FORMAT.md promise:
    the partition value mirror, ``lp.read_version`` and ``lp.num_rows``."""
    import json

    from lance_partitioned.catalog import manifest as manifest_mod
    from lance_partitioned.operations.write import publish as publish_mod

    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    ns = lp.create(str(tmp_path / "ns"), schema, "k")
    ns.append(pa.table({"k": [1, 2], "v": [1, 2]}, schema=schema))
    kinds: list[type] = []
    real = manifest_mod.with_read_mirror

    def recording(metadata, *args):
        kinds.append(type(metadata))
        return real(metadata, *args)

    monkeypatch.setattr(publish_mod, "with_read_mirror", recording)
    ns.append(pa.table({"k": [1, 2, 2, 5], "v": [3, 4, 5, 6]}, schema=schema))
    assert kinds == [dict, dict, dict]
    man = lance.dataset(os.path.join(ns.root, "__manifest"))
    for row in man.to_table(filter="object_type = 'table'").to_pylist():
        meta = json.loads(row["metadata"])
        leaf = lance.dataset(os.path.join(ns.root, row["location"]), version=row["read_version"])
        k = leaf.to_table()["k"][0].as_py()
        assert meta["lp.read_version"] == str(row["read_version"])
        assert meta["lp.num_rows"] == str(leaf.count_rows())
        # the mirror of column partition_field_<id> is key partition.<id>
        mirrors = {key: v for key, v in meta.items() if key.startswith("partition.")}
        assert mirrors == {"partition.k": str(k)} and row["partition_field_k"] == k
    # the same JSON from a dict as from the JSON text of that dict
    text = '{"partition.1":"x"}'
    assert real(json.loads(text), 4, None, None, 7) == real(text, 4, None, None, 7)


def test_many_local_lookups_go_in_batches_on_threads_and_keep_their_order(tmp_path, monkeypatch):
    """``Storage.missing`` over more paths than one batch (``_LOCAL_BATCH``): the batches
    run on threads, and what is missing is what ``os.path.exists`` says, in order."""
    from lance_partitioned.catalog import storage

    monkeypatch.setattr(storage, "_LOCAL_BATCH", 4)
    paths = [str(tmp_path / f"f{i:02d}") for i in range(23)]
    for i, path in enumerate(paths):
        if i % 3:
            open(path, "w").close()
    (tmp_path / "d").mkdir()  # a directory exists too
    paths.append(str(tmp_path / "d"))
    threads = set()
    st = storage.resolve(str(tmp_path))
    real = st.fs.get_file_info

    class Spy:
        def get_file_info(self, batch):
            threads.add(threading.get_ident())
            return real(batch)

    monkeypatch.setattr(st, "fs", Spy())
    assert st.missing(paths) == [p for p in paths if not os.path.exists(p)]
    assert len(threads) > 1


def test_rows_by_id_looks_up_a_few_ids_and_scans_for_many(tmp_path, monkeypatch):
    """``rows_by_id``: indexed ``object_id IN`` lookups for a few ids, one scan for a
    large share of the table; the same rows either way (oracle: pyarrow's filter of
    the whole ``__manifest``)."""
    from lance_partitioned.catalog import manifest as manifest_module

    ns = lp.create(str(tmp_path / "ns"), pa.schema([("k", pa.int64()), ("v", pa.int64())]), "k")
    ns.append(pa.table({"k": list(range(40)), "v": list(range(40))}))
    ds = ns.manifest.dataset()
    everything = ds.to_table()
    ids = everything.column("object_id").to_pylist()
    filters = []
    real = lance.LanceDataset.to_table
    monkeypatch.setattr(
        lance.LanceDataset,
        "to_table",
        lambda self, *a, **k: filters.append(k.get("filter")) or real(self, *a, **k),
    )
    for wanted, scans in ((ids[:2], False), (ids[::2], True)):
        filters.clear()
        got = manifest_module.rows_by_id(ds, wanted).sort_by("object_id")
        want = everything.filter(pc.is_in(everything["object_id"], pa.array(wanted)))
        assert got.equals(want.sort_by("object_id"))
        assert filters == ([None] if scans else [filters[0]]) and (scans or "IN" in filters[0])
