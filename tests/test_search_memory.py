"""The in-memory exact search of small partitions (``search.memory``, docs/SEARCH.md §3).

A partition read at a pinned version, searched without a prefilter, is
searched from its vectors held in the process. These tests pin down that the
answer is Lance's flat search's: the same rows (NULL vectors, NaN vectors,
deleted rows and, under cosine, zero vectors left out; ties by row id) and
the same distances to float32 rounding. Oracles: numpy brute force in float64
over the source vectors, rounded to float32 (exact equality), and plain
pylance's flat search of the leaf at its pinned version. No timings.
"""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_partitioned as lp
from lance_partitioned.search import memory

DIM = 24
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("tenant", pa.string()),
        pa.field("emb", pa.list_(pa.float32(), DIM)),
    ]
)
DELETED = (3, 5, 99, 1200)
NULLS = (10, 11, 501)


@pytest.fixture(autouse=True)
def _fresh_cache():
    memory.clear()
    memory.set_budget(None)
    yield
    memory.clear()
    memory.set_budget(None)


def _table(x: np.ndarray, start: int = 0, nulls=(), tenant=None) -> pa.Table:
    n = len(x)
    mask = np.zeros(n, bool)
    mask[list(nulls)] = True
    return pa.table(
        {
            "id": np.arange(start, start + n),
            "tenant": [tenant or ("a" if i % 2 else "b") for i in range(n)],
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM, mask=pa.array(mask)),
        },
        schema=SCHEMA,
    )


def _vectors(n: int = 3000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(5, DIM)) * 3
    x = (centres[rng.integers(0, 5, n)] + rng.normal(size=(n, DIM))).astype(np.float32)
    x[7] = 0.0  # a zero vector: cosine distance NaN, left out by Lance
    x[9, 3] = np.nan  # a NaN component: every distance NaN, left out
    x[13] = x[15] = x[17]  # equal vectors in tenant "a": ties, broken by row id
    return x


@pytest.fixture
def data(tmp_path):
    x = _vectors()
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "tenant")
    ns.append(_table(x, nulls=NULLS))
    ns.delete(f"id IN {DELETED}")
    return lp.open(str(tmp_path / "ns")), x


def _oracle(x: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int, metric: str):
    """Brute force in float64 over ``x[ids]`` (live, non-NULL rows), rounded to float32,
    NaN distances left out, ordered by (distance, id): (ids, float32 distances)."""
    v = x[ids].astype(np.float64)
    q = q.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        if metric == "l2":
            d = ((v - q) ** 2).sum(1)
        elif metric == "dot":
            d = 1.0 - v @ q
        else:
            d = 1.0 - (v @ q) / (np.linalg.norm(v, axis=1) * np.linalg.norm(q))
    d32 = d.astype(np.float32)
    keep = ~np.isnan(d32)
    ids, d32 = ids[keep], d32[keep]
    order = np.lexsort((ids, d32))[:k]
    return ids[order], d32[order]


def _live(x: np.ndarray, tenant: str | None) -> np.ndarray:
    ids = np.arange(len(x))
    keep = ~np.isin(ids, DELETED + NULLS)
    if tenant is not None:
        keep &= (ids % 2 == 1) == (tenant == "a")
    return ids[keep]


def _no_lance_search(monkeypatch):
    def refuse(*a, **kw):
        raise AssertionError("searched through Lance, not from memory")

    monkeypatch.setattr(memory, "nearest_rows", refuse)


@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_memory_search_equals_lance_flat_search(data, metric, monkeypatch):
    ns, x = data
    leaf = ns.plan("tenant = 'a'")[0]
    ds = lance.dataset(leaf.uri, version=leaf.read_version)
    _no_lance_search(monkeypatch)
    rng = np.random.default_rng(1)
    queries = [x[17], x[101] + 0.01, *rng.normal(size=(6, DIM)).astype(np.float32) * 3]
    for q in queries:
        for k in (1, 10, 2000):
            got = ns.search(q, k=k, filter="tenant = 'a'", columns=["id", "emb"], metric=metric)
            want_ids, want_d = _oracle(x, _live(x, "a"), q, k, metric)
            assert got.column("id").to_pylist() == want_ids.tolist()
            # float64 arithmetic rounded to float32 (two float64 orders of summation may
            # differ by an ulp, which matters only at a cosine distance of 0)
            np.testing.assert_allclose(got.column("_distance").to_numpy(), want_d, 2e-7, 1e-7)
            # the vectors returned are the rows' own
            emb = np.array(got.column("emb").to_pylist(), np.float32).reshape(-1, DIM)
            assert np.array_equal(emb, x[want_ids], equal_nan=True)
            lance_flat = ds.to_table(
                nearest={"column": "emb", "q": q, "k": k, "metric": metric, "use_index": False},
                columns=["id"],
            )
            # Lance's own float32 arithmetic: the same rows, distances to float32 rounding
            # (its order may differ only between rows whose distances differ by an ulp)
            lance_ids = lance_flat.column("id").to_pylist()
            by_id = dict(zip(lance_ids, lance_flat["_distance"].to_numpy(), strict=True))
            assert set(by_id) == set(want_ids.tolist())
            if by_id:
                scale = max(1.0, float(np.abs(want_d).max()))
                lance_d = np.array([by_id[i] for i in want_ids.tolist()])
                np.testing.assert_allclose(want_d, lance_d, rtol=1e-5, atol=1e-5 * scale)
            if k == 10:
                assert lance_flat.column("id").to_pylist() == want_ids.tolist()
    assert memory.held()[0] == 1


def test_ties_are_ordered_by_row_id(data, monkeypatch):
    ns, x = data
    _no_lance_search(monkeypatch)
    got = ns.search(x[17], k=3, filter="tenant = 'a'", columns=["id"])
    assert got.column("id").to_pylist() == [13, 15, 17]
    assert got.column("_distance").to_pylist() == [0.0, 0.0, 0.0]


def test_unpruned_and_batch_searches_from_memory(data, monkeypatch):
    ns, x = data
    _no_lance_search(monkeypatch)
    qs = np.random.default_rng(2).normal(size=(4, DIM)).astype(np.float32) * 3
    got = ns.search(qs, k=10, columns=["id"])
    for i, q in enumerate(qs):
        rows = got.filter(pa.compute.equal(got.column("query_index"), i))
        want_ids, want_d = _oracle(x, _live(x, None), q, 10, "l2")
        assert rows.column("id").to_pylist() == want_ids.tolist()
        np.testing.assert_allclose(rows.column("_distance").to_numpy(), want_d, 2e-7, 1e-7)
    assert memory.held()[0] == 2


def test_a_residual_prefilter_is_searched_by_lance(data, monkeypatch):
    ns, x = data
    loads = []
    real = memory.load
    monkeypatch.setattr(memory, "load", lambda *a: loads.append(a) or real(*a))
    q = x[101] + 0.01
    got = ns.search(q, k=10, filter="tenant = 'a' AND id > 1000", columns=["id"])
    ids = _live(x, "a")
    want_ids, _ = _oracle(x, ids[ids > 1000], q, 10, "l2")
    assert got.column("id").to_pylist() == want_ids.tolist()
    assert loads == [] and memory.held() == (0, 0)


def test_the_byte_budget_is_respected(data, monkeypatch):
    ns, x = data
    rows = len(_live(x, "a")) + len(NULLS) + 10  # a bound on one tenant's live vectors
    one = memory.entry_bytes(rows, DIM)
    memory.set_budget(one)  # room for one tenant, not two
    for tenant in ("a", "b", "a", "b"):
        q = x[101] if tenant == "a" else x[100]
        got = ns.search(q, k=10, filter=f"tenant = '{tenant}'", columns=["id"])
        assert got.column("id").to_pylist() == _oracle(x, _live(x, tenant), q, 10, "l2")[0].tolist()
        entries, nbytes = memory.held()
        assert entries == 1 and 0 < nbytes <= one
    memory.set_budget(one // 4)  # smaller than a tenant: nothing held, searched by Lance
    assert memory.held() == (0, 0)
    got = ns.search(x[101], k=10, filter="tenant = 'a'", columns=["id"])
    assert got.column("id").to_pylist() == _oracle(x, _live(x, "a"), x[101], 10, "l2")[0].tolist()
    assert memory.held() == (0, 0)


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("LP_SEARCH_MEMORY_BYTES", "12345")  # the documented name
    assert memory.budget() == 12345
    monkeypatch.setenv(memory.BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match=memory.BUDGET_ENV):
        memory.budget()
    monkeypatch.delenv(memory.BUDGET_ENV)
    assert memory.budget() == 512 * 1024 * 1024


def test_a_leaf_read_at_a_tag_is_not_held(data):
    ns, x = data
    leaf = ns.plan("tenant = 'a'")[0]
    root = ns.root
    lance.dataset(leaf.uri).tags.create("pub", leaf.read_version)
    # pin the leaf by tag in __manifest, with plain pylance (seed 000 Read Behavior)
    manifest = lance.dataset(f"{root}/__manifest")
    manifest.update(
        {"read_tag": "'pub'", "read_version": "NULL"}, where=f"object_id = '{leaf.object_id}'"
    )
    tagged = lp.open(root)
    assert tagged.plan("tenant = 'a'")[0].read_tag == "pub"
    q = x[101] + 0.01
    got = tagged.search(q, k=10, filter="tenant = 'a'", columns=["id"])
    assert got.column("id").to_pylist() == _oracle(x, _live(x, "a"), q, 10, "l2")[0].tolist()
    assert memory.held() == (0, 0)


def test_a_later_write_is_a_new_entry_and_the_old_snapshot_keeps_its_answer(data, tmp_path):
    ns, x = data
    q = x[101] + 0.5
    before = ns.search(q, k=5, filter="tenant = 'a'", columns=["id"])
    old_ids = _oracle(x, _live(x, "a"), q, 5, "l2")[0].tolist()
    assert before.column("id").to_pylist() == old_ids
    old = lp.open(str(tmp_path / "ns"), version=ns.version)
    # a new row equal to the query in tenant "a": the nearest from now on
    ns.append(_table(q[None, :].astype(np.float32), start=5000, tenant="a"))
    after = lp.open(str(tmp_path / "ns"))
    got = after.search(q, k=5, filter="tenant = 'a'", columns=["id"])
    assert got.column("id").to_pylist() == [5000, *old_ids[:4]]
    assert got.column("_distance")[0].as_py() == 0.0
    assert memory.held()[0] == 2  # the new version is its own entry
    # the old handle still reads its own snapshot, from its entry
    assert old.search(q, k=5, filter="tenant = 'a'", columns=["id"]).equals(before)
    assert memory.held()[0] == 2


def test_the_memory_threshold_counts_rows_times_dimension(data, monkeypatch):
    ns, x = data
    rows = ns.count("tenant = 'a'")  # the rule counts the leaf's rows, NULL vectors included
    used = []
    real = memory.memory_rows
    monkeypatch.setattr(memory, "memory_rows", lambda *a: used.append(1) or real(*a))
    q = x[101]
    for values, expect in (((rows + 1) * DIM, True), (rows * DIM, False)):
        monkeypatch.setattr(memory, "MEMORY_FLAT_BELOW_VALUES", values)
        used.clear()
        got = ns.search(q, k=3, filter="tenant = 'a'", columns=["id"])
        assert bool(used) is expect, values
        assert got.column("id").to_pylist() == _oracle(x, _live(x, "a"), q, 3, "l2")[0].tolist()
    used.clear()
    ns.search(q, k=3, filter="tenant = 'a'", columns=["id"], flat_below=0)  # index side
    assert used == []


def test_a_leaf_with_infinite_values_is_searched_by_lance(tmp_path):
    # Lance's float32 arithmetic decides where an infinite vector ranks (inf or NaN
    # distances); the memory path does not imitate it and hands the leaf to Lance.
    x = _vectors(400, seed=3)
    x[9] = 1.0  # no NaN row here: only the infinity
    x[21, 2] = np.inf
    ns = lp.create(str(tmp_path / "inf"), SCHEMA, "tenant")
    ns.append(_table(x, tenant="a"))
    leaf = ns.plan()[0]
    ds = lance.dataset(leaf.uri, version=leaf.read_version)
    for metric in ("l2", "dot"):
        q = x[21].copy()
        q[2] = 1.0
        got = ns.search(q, k=400, columns=["id"], metric=metric)
        want = ds.to_table(
            nearest={"column": "emb", "q": q, "k": 400, "metric": metric, "use_index": False},
            columns=["id"],
            with_row_id=True,
        )
        order = np.lexsort((want["_rowid"].to_numpy(), want["_distance"].to_numpy()))
        assert got.column("id").to_pylist() == want["id"].to_numpy()[order].tolist()
        assert 21 in got.column("id").to_pylist()
    entry = next(iter(memory._CACHE.values()))
    assert entry.matrix is None  # held as "search by Lance", not as vectors
