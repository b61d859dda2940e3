"""``ns.history()``: every commit records its operation, parameters and counts in itself.

Expected counts come from what each test step did (rows it wrote, rows the
oracle says it removed), never from the library's own results.
"""

from __future__ import annotations

import datetime as dt
import json

import lance
import pyarrow as pa
import pytest

import lance_partitioned as lp
from lance_partitioned.catalog.commit_info import CommitInfo

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string())])


def _entries(ns) -> dict[int, dict]:
    return {r["version"]: r for r in ns.history().to_pylist()}


def _check(entry: dict, operation: str, added, removed, partitions, **parameters) -> None:
    assert entry["operation"] == operation, entry
    assert (entry["rows_added"], entry["rows_removed"], entry["partitions"]) == (
        added,
        removed,
        partitions,
    ), entry
    got = json.loads(entry["parameters"])
    for key, value in parameters.items():
        assert got.get(key) == value, (key, got)


@pytest.fixture
def ns(tmp_path):
    return lp.create(str(tmp_path / "ns"), SCHEMA, "k")


def test_each_operation_records_what_it_did(ns):
    ns.append(pa.table({"id": [1, 2, 3], "k": ["a", "b", "a"]}), progress=False)
    v_append = ns.version
    ns.delete("id = 2")
    v_delete = ns.version
    ns.overwrite(pa.table({"id": [5], "k": ["a"]}), dynamic=True, progress=False)
    v_dynamic = ns.version
    ns.add_column("x", pa.float64())
    v_add = ns.version
    src = pa.table({"id": [5, 7], "k": ["a", "c"], "x": [1.0, 2.0]})
    ns.merge(src, on="id").when_matched_update_all().when_not_matched_insert_all().execute()
    v_merge = ns.version
    ns.update({"x": "3.0"}, where="id = 7")
    v_update = ns.version
    before_overwrite = ns.count()
    ns.overwrite(pa.table({"id": [9], "k": ["z"], "x": [0.0]}), progress=False)
    v_overwrite = ns.version
    ns.restore(v_append)
    h = _entries(ns)
    first = min(h)
    _check(h[first], "create", 0, 0, 0)
    _check(h[v_append], "append", 3, 0, 2)  # two partitions: a and b
    _check(h[v_delete], "delete", 0, 1, 1, filter="id = 2")
    _check(h[v_dynamic], "overwrite", 1, 2, 1, mode="dynamic")  # a held ids 1 and 3
    _check(h[v_add], "add_column", 0, 0, 0, name="x", type="double")
    # one row updated (removed and added), one inserted; partitions a and c
    _check(h[v_merge], "merge", 2, 1, 2, on=["id"])
    _check(h[v_update], "update", 1, 1, 1, where="id = 7")
    # every partition removed (a, c, and b, which the delete emptied), z created
    _check(h[v_overwrite], "overwrite", 1, before_overwrite, 4, mode="static")
    restore = [r for r in h.values() if r["operation"] == "restore"]
    assert restore and all(json.loads(r["parameters"]) == {"version": v_append} for r in restore)


def test_history_is_newest_first_with_utc_instants(ns):
    t0 = dt.datetime.now(dt.timezone.utc)
    ns.append(pa.table({"id": [1], "k": ["a"]}), progress=False)
    table = ns.history()
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    versions = table.column("version").to_pylist()
    assert versions == sorted(versions, reverse=True)
    newest = table.column("timestamp")[0].as_py()
    assert abs((newest - t0).total_seconds()) < 60
    assert ns.history(limit=1).num_rows == 1


def test_compaction_records_no_rows_moved(ns):
    for i in range(3):
        ns.append(pa.table({"id": [i], "k": ["a"]}), progress=False)
    ns.compact()
    compacts = [r for r in ns.history().to_pylist() if r["operation"] == "compact"]
    assert compacts and all((r["rows_added"], r["rows_removed"]) == (0, 0) for r in compacts)


def test_a_commit_without_a_record_is_unknown(ns):
    ns.append(pa.table({"id": [1], "k": ["a"]}), progress=False)
    # another writer's commit of __manifest metadata, through plain Lance
    lance.dataset(f"{ns.root}/__manifest").update_metadata({"foreign": "1"})
    top = ns.history().to_pylist()[0]
    assert top["operation"] == "unknown"
    assert top["rows_added"] is None and top["partitions"] is None


def test_the_record_is_plain_lance_transaction_properties(ns):
    ns.append(pa.table({"id": [1, 2], "k": ["a", "b"]}), progress=False)
    ds = lance.dataset(f"{ns.root}/__manifest")
    props = ds.read_transaction(ds.version).transaction_properties
    assert CommitInfo.read(props) == CommitInfo("append", {}, 2, 0, 2)


def test_newest_commit_walks_back_to_the_first_match(ns, monkeypatch):
    """``newest_commit`` finds the newest matching record and reads no version older than
    it; None when nothing matches (oracle: the versions this test committed)."""
    from lance_partitioned.catalog.history import newest_commit
    from lance_partitioned.catalog.manifest import Manifest

    ns.append(pa.table({"id": [1], "k": ["a"]}), progress=False)
    ns.append(pa.table({"id": [2], "k": ["b"]}), progress=False)
    v_second = ns.version
    ns.delete("id = 1")
    manifest = Manifest(ns.root)
    read: list[int] = []
    real = lance.LanceDataset.read_transaction

    def counting(self, version):
        read.append(version)
        return real(self, version)

    monkeypatch.setattr(lance.LanceDataset, "read_transaction", counting)
    found = newest_commit(manifest, lambda info: info.operation == "append")
    assert found is not None and found[0] == v_second and found[1].rows_added == 1
    assert read == [ns.version, v_second]
    assert newest_commit(manifest, lambda info: info.operation == "merge") is None
