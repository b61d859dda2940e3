"""Spark ships manifests and snapshots to executors with cloudpickle: they must pickle,
storage layer included (its locks and file systems are rebuilt, not pickled)."""

from __future__ import annotations

import pickle

import pyarrow as pa

import lance_partitioned as lp


def test_manifest_and_snapshot_pickle_and_read_the_same_rows(tmp_path):
    table = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "c": ["a", "b", "a"]})
    ns = lp.create(str(tmp_path / "ns"), table.schema, "c")
    ns.append(table)
    snapshot = pickle.loads(pickle.dumps(ns.snapshot))
    manifest = pickle.loads(pickle.dumps(ns.manifest))
    assert manifest.root == ns.root
    assert sorted(leaf.object_id for leaf in snapshot.leaves()) == sorted(
        leaf.object_id for leaf in ns.snapshot.leaves()
    )
    rows = sum(snapshot.open_leaf(leaf).count_rows() for leaf in snapshot.leaves())
    assert rows == table.num_rows
