"""Search latency work (issue 13): per-handle planning, the single-partition path, ``flat_below``.

No timings here (benchmarks/search_bench.py and search_flat_bench.py measure).
These tests pin down what the faster paths must keep: a handle plans a search
once per (filter, columns) and still sees exactly its own snapshot; a search
pruned to one partition orders and types its rows as the general merge does;
``flat_below`` makes an indexed partition's search exact. Oracles: numpy brute
force over the source rows, and plain pylance.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_partitioned as lp
from lance_partitioned.search import SearchError, api, memory

DIM = 16
TENANTS = ("acme", "globex", "initech")
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("tenant", pa.string()),
        pa.field("emb", pa.list_(pa.float32(), DIM)),
    ]
)


def _rows(start: int, n: int, seed: int, tenant: str | None = None) -> tuple[pa.Table, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(6, DIM)).astype(np.float32)
    x = (centres[rng.integers(0, 6, n)] + rng.normal(scale=0.4, size=(n, DIM))).astype(np.float32)
    tenants = [tenant or TENANTS[i % 3] for i in range(n)]
    table = pa.table(
        {
            "id": np.arange(start, start + n),
            "tenant": tenants,
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM),
        },
        schema=SCHEMA,
    )
    return table, x


@pytest.fixture
def data(tmp_path):
    table, x = _rows(0, 3000, 0)
    x[7] = x[4] = x[1]  # three equal vectors in tenant "globex" (ids 1, 4, 7): ties
    table = table.set_column(2, "emb", pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM))
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "tenant")
    ns.append(table)
    # coarse on purpose: 2 PQ sub-vectors, so that an indexed search is visibly approximate
    ns.create_index("emb", "IVF_PQ", num_partitions=4, num_sub_vectors=2, min_rows=256)
    return ns, table, x


def _exact(table: pa.Table, x: np.ndarray, q: np.ndarray, k: int, tenant: str) -> list[int]:
    """Ids of the exact top k of one tenant (numpy), ties by id (= row order in the leaf)."""
    mask = np.asarray(table.column("tenant").to_pylist()) == tenant
    ids = table.column("id").to_numpy()[mask]
    d = ((x[mask].astype(np.float64) - q.astype(np.float64)) ** 2).sum(1)
    return [int(ids[i]) for i in np.lexsort((ids, np.round(d, 4)))[:k]]


def test_repeated_searches_of_one_handle_plan_once(data, monkeypatch):
    ns, table, x = data
    scans, opens = [], []
    real_scan, real_open = api.Scan, api.open_context
    monkeypatch.setattr(api, "Scan", lambda *a, **kw: scans.append(1) or real_scan(*a, **kw))
    monkeypatch.setattr(api, "open_context", lambda *a: opens.append(1) or real_open(*a))
    leaf = next(t for t in ns.plan() if t.partition_values["tenant"] == "acme")
    plain = lance.dataset(leaf.uri, version=leaf.read_version)  # the oracle: pylance itself
    for q in np.random.default_rng(5).normal(size=(4, DIM)).astype(np.float32):
        got = ns.search(q, k=5, filter="tenant = 'acme'", columns=["id"], flat_below=0)
        # our defaults for IVF_PQ: Lance's nprobes, refine_factor 5
        want = plain.to_table(nearest={"column": "emb", "q": q, "k": 5, "refine_factor": 5})
        assert got.column("id").to_pylist() == want.column("id").to_pylist()
    # the filter is bound, pruned and its partition opened by the first search only
    assert (len(scans), len(opens)) == (1, 1)
    ns.search(x[0], k=5, filter="tenant = 'acme'", columns=["id", "tenant"])
    assert (len(scans), len(opens)) == (2, 2)  # other columns: planned once more


def test_a_handle_searches_its_own_snapshot_after_later_writes(data, tmp_path):
    ns, table, x = data
    old = lp.open(ns.root, version=ns.version)
    new_rows, nx = _rows(10_000, 50, 9, tenant="acme")
    q = nx[0]
    before = old.search(q, k=3, filter="tenant = 'acme'", columns=["id"], flat_below=10**6)
    ns.append(new_rows)
    latest = lp.open(ns.root)
    got = latest.search(q, k=3, filter="tenant = 'acme'", columns=["id"], flat_below=10**6)
    assert got.column("id")[0].as_py() == 10_000 and got.column("_distance")[0].as_py() == 0.0
    again = old.search(q, k=3, filter="tenant = 'acme'", columns=["id"], flat_below=10**6)
    assert again.to_pylist() == before.to_pylist()
    assert 10_000 not in again.column("id").to_pylist()


def test_single_partition_search_breaks_ties_by_row_and_keeps_the_schema(data):
    ns, table, x = data
    got = ns.search(x[1], k=4, filter="tenant = 'globex'", columns=["id", "tenant"])
    assert got.column("id").to_pylist()[:3] == [1, 4, 7]  # distance 0, in row order
    assert got.column("_distance").to_pylist()[:3] == [0.0, 0.0, 0.0]
    everyone = ns.search(x[1], k=4, columns=["id", "tenant"])
    assert got.schema == everyone.schema  # same names, types and nullability as the merge's


def test_flat_below_searches_an_indexed_partition_exactly(data):
    ns, table, x = data
    leaf = next(t for t in ns.plan() if t.partition_values["tenant"] == "initech")
    assert lance.dataset(leaf.uri, version=leaf.read_version).describe_indices()  # it is indexed
    queries = np.random.default_rng(3).normal(size=(12, DIM)).astype(np.float32)
    misses = 0
    for q in queries:
        want = _exact(table, x, q, 10, "initech")
        kw = dict(k=10, filter="tenant = 'initech'", columns=["id"], nprobes=1, refine_factor=1)
        indexed = ns.search(q, flat_below=1000, **kw)  # the partition has 1000 rows: indexed
        exact = ns.search(q, flat_below=1001, **kw)  # 1000 < 1001: flat
        misses += indexed.column("id").to_pylist() != want
        assert exact.column("id").to_pylist() == want
        mask = np.asarray(table.column("tenant").to_pylist()) == "initech"
        d = np.sort(((x[mask].astype(np.float64) - q) ** 2).sum(1))[:10]
        np.testing.assert_allclose(exact.column("_distance").to_numpy(), d, rtol=1e-4)
    assert misses > 0  # the index (1 probe, 2 PQ sub-vectors, no refine) is approximate


@pytest.mark.parametrize("bad", [-1, 1.5, "100", True])
def test_bad_flat_below_is_refused(data, bad):
    ns, _, x = data
    with pytest.raises(SearchError, match="flat_below"):
        ns.search(x[0], k=3, flat_below=bad)


def test_small_partitions_are_searched_exactly_by_default(data):
    ns, table, x = data  # 1,000-row partitions of 16-d vectors: under the default
    for q in np.random.default_rng(4).normal(size=(12, DIM)).astype(np.float32):
        got = ns.search(q, k=10, filter="tenant = 'initech'", columns=["id"], nprobes=1)
        assert got.column("id").to_pylist() == _exact(table, x, q, 10, "initech")


def test_the_default_flat_threshold_scales_with_the_dimension(tmp_path, monkeypatch):
    # rows x dimension decides: 10,000 rows at 128-d, so 1,000 rows at 1,280-d. This is
    # the threshold of Lance's flat scan, so the in-memory path (search.memory) is off.
    monkeypatch.setattr(memory, "_budget_override", 0)
    flats = []
    real = memory.nearest_rows
    monkeypatch.setattr(
        memory, "nearest_rows", lambda *a, **kw: flats.append(kw["flat"]) or real(*a, **kw)
    )
    for dim, rows, flat in ((1280, 1000, False), (1280, 999, True), (128, 9999, True)):
        schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.list_(pa.float32(), dim))])
        x = np.random.default_rng(dim + rows).normal(size=(rows, dim)).astype(np.float32)
        t = pa.table(
            {
                "id": np.arange(rows),
                "v": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), dim),
            },
            schema=schema,
        )
        ns = lp.create(str(tmp_path / f"ns{dim}_{rows}"), schema, "")  # one partition
        ns.append(t)
        flats.clear()
        got = ns.search(x[3], k=1, columns=["id"])
        assert flats == [flat], (dim, rows)
        assert got.column("id").to_pylist() == [3]
