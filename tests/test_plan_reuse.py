"""What a query reuses from the last one: parsed ``__manifest`` metadata and bound filters.

Both are kept by the exact metadata text, so a reused plan is only ever one the
current namespace would produce anew. Expected rows come from pyarrow on the
source data, never from our binder.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.compute as pc

import lance_partitioned as lp
from lance_partitioned.format import schema as schema_module
from lance_partitioned.operations.read import scan_filter


def _count_calls(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


def test_a_repeated_query_parses_metadata_and_binds_its_filter_once(tmp_path, monkeypatch):
    root = str(tmp_path / "ns")
    t = pa.table({"k": pa.array([1, 2, 3, 4], pa.int64()), "v": pa.array([5, 6, 7, 8])})
    lp.create(root, t.schema, "k").append(t)
    parses = _count_calls(monkeypatch, schema_module.Schema, "from_json")
    binds = _count_calls(monkeypatch, scan_filter, "bind")
    for _ in range(3):
        got = lp.open(root).scan("k >= 2 AND v < 8").to_arrow()
        assert sorted(got["k"].to_pylist()) == [2, 3]
    # the first open may parse (another test may have left nothing to reuse); the
    # later two reuse it
    assert len(parses) <= 1
    assert len(binds) <= 1
    lp.open(root).scan("k >= 3").to_arrow()
    assert len(binds) <= 2  # another filter text is bound anew


def test_a_namespace_recreated_at_the_same_path_binds_to_its_new_schema(tmp_path):
    """Same root, same ``__manifest`` version numbers, another column type: a cache
    keyed by path and version would compare text with text and lose rows."""
    root = str(tmp_path / "ns")
    as_text = pa.table({"k": pa.array(["1", "2", "10"]), "p": pa.array([0, 0, 1])})
    lp.create(root, as_text.schema, "p").append(as_text)
    # as text, '10' < '2'; the bound literal is text
    assert sorted(lp.open(root).scan("k < '2'").to_arrow()["k"].to_pylist()) == ["1", "10"]
    shutil.rmtree(root)
    as_int = pa.table({"k": pa.array([1, 2, 10], pa.int64()), "p": pa.array([0, 0, 1])})
    lp.create(root, as_int.schema, "p").append(as_int)
    got = lp.open(root).scan("k < '2'").to_arrow()
    want = as_int.filter(pc.less(as_int["k"], 2))
    assert got["k"].to_pylist() == want["k"].to_pylist() == [1]


def test_a_new_spec_version_is_planned_for_by_a_repeated_filter(tmp_path):
    """The filter prunes through every spec: one bound before ``evolve_spec`` must
    not be reused after it, or the new spec's leaves would be pruned by nothing."""
    root = str(tmp_path / "ns")
    first = pa.table({"k": pa.array([1, 2, 15], pa.int64())})
    ns = lp.create(root, first.schema, "k")
    ns.append(first)
    query = "k >= 10"
    assert lp.open(root).scan(query).to_arrow()["k"].to_pylist() == [15]
    ns = lp.open(root)
    ns.evolve_spec("truncate(10, k)")
    second = pa.table({"k": pa.array([3, 27, 31], pa.int64())})
    ns.append(second)
    scan = lp.open(root).scan(query)
    both = pa.concat_tables([first, second])
    want = sorted(both.filter(pc.greater_equal(both["k"], 10))["k"].to_pylist())
    assert sorted(scan.to_arrow()["k"].to_pylist()) == want == [15, 27, 31]
    # the partition of k in [0, 10) under the new spec is pruned
    assert "partition_field" in (scan.manifest_sql or "")
    assert len(scan.leaves) == 3


def test_a_repeated_query_reads_the_manifest_rows_of_a_version_once(tmp_path, monkeypatch):
    from lance_partitioned.catalog import snapshot as snapshot_module

    root = str(tmp_path / "ns")
    t = pa.table({"k": pa.array([1, 2, 3], pa.int64())})
    lp.create(root, t.schema, "k").append(t)
    reads = _count_calls(monkeypatch, snapshot_module.Snapshot, "_leaf_rows")
    for _ in range(3):
        assert sorted(lp.open(root).scan("k > 1").to_arrow()["k"].to_pylist()) == [2, 3]
    assert len(reads) <= 1
    lp.clear_caches()
    before = len(reads)
    assert sorted(lp.open(root).scan("k > 1").to_arrow()["k"].to_pylist()) == [2, 3]
    assert len(reads) == before + 1


def test_kept_leaf_rows_follow_the_version_they_were_read_from(tmp_path):
    """Each commit is a new version with its own rows; a version opened by number
    after later commits still plans its own leaves. Expected leaves come from the
    ``__manifest`` rows read with plain pylance."""
    import lance

    root = str(tmp_path / "ns")
    t = pa.table({"k": pa.array([1, 2], pa.int64())})
    ns = lp.create(root, t.schema, "k")
    ns.append(t)
    v1 = lp.open(root).version
    assert len(lp.open(root).scan("k >= 1").leaves) == 2
    lp.open(root).append(pa.table({"k": pa.array([3, 4], pa.int64())}))
    for version in (v1, None):
        manifest = lance.dataset(f"{root}/__manifest", version=version)
        want = sorted(manifest.to_table(filter="object_type = 'table'")["object_id"].to_pylist())
        got = sorted(
            leaf.object_id for leaf in lp.open(root, version=version).scan("k >= 1").leaves
        )
        assert got == want
        assert len(got) == (2 if version == v1 else 4)
    # rows deleted by another writer (plain pylance) are gone from the next plan
    manifest = lance.dataset(f"{root}/__manifest")
    manifest.delete("partition_field_k = 4 AND object_type = 'table'")
    assert manifest.count_rows("object_type = 'table'") == 3
    leaves = lp.open(root).scan("k >= 1").leaves
    assert sorted(leaf.values for leaf in leaves) == [(1,), (2,), (3,)]
