"""NaN partition values name one partition, however often and however they are written.

Python's ``nan != nan``: before ``format.spec.partition_key`` every append of a
NaN row created another NaN partition. The oracles are plain pylance on the
``__manifest`` rows and pyarrow.compute on the written data.
"""

from __future__ import annotations

import pickle

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.operations.write.partition_writer import (
    PartitionWriter,
    WrittenFiles,
    new_job_secret,
)

NAN = float("nan")


def _table(ks: list[float | None], first_v: int = 0) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(ks, pa.float64()),
            "g": pa.array([1.5] * len(ks), pa.float64()),
            "v": pa.array(range(first_v, first_v + len(ks)), pa.int64()),
        }
    )


def _manifest_rows(root: str) -> pa.Table:
    """``__manifest`` rows, read with plain pylance (not our catalog)."""
    return lance.dataset(f"{root}/__manifest").to_table()


def _nan_tables(root: str) -> int:
    rows = _manifest_rows(root)
    tables = rows.filter(pc.equal(rows["object_type"], "table"))
    return pc.sum(pc.is_nan(tables["partition_field_k"])).as_py()


def test_appends_of_nan_rows_share_one_partition(tmp_path):
    root = str(tmp_path / "ns")
    data = _table([1.0, NAN, None, NAN])
    ns = lp.create(root, data.schema, "k")
    ns.append(data)
    ns.append(_table([NAN, 2.0], first_v=10))
    ns.append(_table([NAN], first_v=20))
    assert _nan_tables(root) == 1
    got = ns.scan("isnan(k)").to_arrow()
    assert sorted(got["v"].to_pylist()) == [1, 3, 10, 20]


def test_one_append_of_many_batches_writes_one_nan_partition(tmp_path):
    # batches this big pass ``coalesce_batches`` uncopied: each is split on its own
    n = 40_000
    batches = [
        _table([NAN if i % 3 == 0 else float(i % 7) for i in range(n)], first_v=b * n).to_batches()[
            0
        ]
        for b in range(3)
    ]
    source = pa.Table.from_batches(batches)
    root = str(tmp_path / "ns")
    ns = lp.create(root, source.schema, "k")
    ns.append(pa.RecordBatchReader.from_batches(source.schema, batches))
    assert _nan_tables(root) == 1
    assert ns.scan("isnan(k)").count() == pc.sum(pc.is_nan(source["k"])).as_py()
    assert ns.scan().count() == source.num_rows


def test_two_level_spec_reuses_the_nan_namespace(tmp_path):
    root = str(tmp_path / "ns")
    data = _table([NAN, NAN, 1.0])
    ns = lp.create(root, data.schema, "k, g")
    ns.append(data)
    before = _manifest_rows(root).num_rows
    ns.append(_table([NAN], first_v=5))  # same (k, g) partition: no new row
    assert _manifest_rows(root).num_rows == before
    assert ns.scan("isnan(k)").count() == 3


def test_dynamic_overwrite_replaces_the_nan_partition(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, _table([]).schema, "k")
    ns.append(_table([NAN, NAN, 1.0]))
    ns.overwrite(_table([NAN], first_v=100), dynamic=True)
    assert _nan_tables(root) == 1
    assert ns.scan("isnan(k)").to_arrow()["v"].to_pylist() == [100]
    assert ns.scan("k = 1").count() == 1


@pytest.mark.parametrize("order", ["nan_first", "nan_second"])
def test_merging_writes_from_other_processes_keeps_one_nan_partition(tmp_path, order):
    root = str(tmp_path / "ns")
    ns = lp.create(root, _table([]).schema, "k")
    ns.append(_table([NAN]))  # an existing NaN partition both writers append to
    snap = Snapshot.load(ns.manifest, for_write=True)
    secret = new_job_secret()
    results = []
    for first in (0, 10):
        writer = PartitionWriter(snap, secret)
        writer.write(_table([NAN, 3.0], first_v=first).to_batches()[0])
        # Spark ships each task's result pickled: its NaN is another object
        results.append(pickle.loads(pickle.dumps(writer.finish())))
    if order == "nan_second":
        results.reverse()
    merged = WrittenFiles(snap.version)
    for r in results:
        merged.merge(r)
    nan_keys = [key for (_, key), _ in merged.leaves.items() if key[0] != key[0]]
    assert len(nan_keys) == 1
    assert sum(lw.rows for lw in merged.leaves.values()) == 4
