"""``query_type="auto"`` (the default) infers the search from the query, as LanceDB does.

On a namespace with a full-text and a vector index: a string is a full-text search
(oracle: plain Lance's full-text search over one dataset of the same rows, whose BM25
statistics are those of all partitions), a vector a vector search (oracle: numpy brute
force), a ``(vector, text)`` pair or a dict hybrid (oracle: reciprocal rank fusion of
those two rankings). Explicit ``query_type`` values keep their meaning.
"""

from __future__ import annotations

import os
from collections import Counter

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_partitioned as lp
from lance_partitioned.search import SearchError

DIM, ROWS, K = 8, 900, 5
VOCAB = [
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "river",
    "stone",
    "cloud",
    "amber",
    "field",
    "night",
    "ocean",
]


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    rng = np.random.default_rng(7)
    docs = [" ".join(rng.choice(VOCAB, rng.integers(3, 14))) for _ in range(ROWS)]
    vectors = rng.normal(size=(ROWS, DIM)).astype(np.float32)
    return pa.table(
        {
            "id": pa.array(range(ROWS), pa.int64()),
            "tenant": [f"t{i % 3}" for i in range(ROWS)],
            "body": docs,
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        }
    )


@pytest.fixture(scope="module")
def ns(tmp_path_factory, rows) -> lp.PartitionedNamespace:
    ns = lp.create(str(tmp_path_factory.mktemp("auto") / "ns"), rows.schema, "tenant")
    ns.append(rows)
    ns.create_index("body", "INVERTED")
    ns.create_index("emb", "IVF_FLAT", num_partitions=2, min_rows=256)
    return ns


@pytest.fixture(scope="module")
def plain_fts(tmp_path_factory, rows):
    """Lance's own full-text search over one dataset holding every row."""
    ds = lance.write_dataset(rows, str(tmp_path_factory.mktemp("plain") / "ds"))
    ds.create_scalar_index("body", "INVERTED")

    def search(text: str) -> list[tuple[int, float]]:
        out = ds.to_table(full_text_query=text, columns=["id"], limit=ROWS)
        pairs = zip(out["id"].to_pylist(), out["_score"].to_pylist(), strict=True)
        return sorted(pairs, key=lambda p: -p[1])

    return search


def _vectors(rows: pa.Table) -> np.ndarray:
    return np.asarray(rows["emb"].combine_chunks().values, np.float32).reshape(-1, DIM)


def _nearest(rows: pa.Table, q: np.ndarray, k: int) -> list[int]:
    d = ((_vectors(rows).astype(np.float64) - q.astype(np.float64)) ** 2).sum(1)
    return [int(i) for i in np.argsort(d, kind="stable")[:k]]


@pytest.mark.parametrize("text", ["fox", "amber ocean", "lazy dog jumps"])
def test_a_string_query_is_a_full_text_search(ns, plain_fts, text):
    got = ns.search(text, k=K, columns=["id"])
    want = plain_fts(text)
    assert got.column_names == ["id", "_score", "partition_field_tenant"]
    np.testing.assert_allclose(got["_score"].to_numpy(), [s for _, s in want[:K]], rtol=1e-5)
    scores = dict(want)
    for i, s in zip(got["id"].to_pylist(), got["_score"].to_pylist(), strict=True):
        assert s == pytest.approx(scores[i], rel=1e-5)
    assert got.equals(ns.search(text, k=K, columns=["id"], query_type="fts"))


def test_a_vector_query_is_a_vector_search(ns, rows):
    q = _vectors(rows)[17]
    got = ns.search(q, k=K, columns=["id"])
    assert got["id"].to_pylist() == _nearest(rows, q, K)
    assert got.equals(ns.search(q, k=K, columns=["id"], query_type="vector"))
    batch = ns.search(_vectors(rows)[:2], k=K, columns=["id"])  # a batch stays a batch
    assert batch["query_index"].to_pylist() == [0] * K + [1] * K


def test_a_vector_and_text_pair_is_hybrid(ns, rows, plain_fts):
    q, text = _vectors(rows)[17], "lazy dog jumps"
    fts = plain_fts(text)
    assert fts[K - 1][1] != fts[K][1], "the text ranking's top k is unambiguous"
    fused: Counter = Counter()
    for ranking in (_nearest(rows, q, K), [i for i, _ in fts[:K]]):
        for rank, i in enumerate(ranking, start=1):
            fused[i] += 1 / (60 + rank)
    want = sorted(fused.values(), reverse=True)[:K]
    for query in ((q, text), [q, text], {"vector": q, "text": text}):
        got = ns.search(query, k=K, columns=["id"])
        np.testing.assert_allclose(got["_score"].to_numpy(), want, rtol=1e-12)
        assert got.equals(ns.search((q, text), k=K, columns=["id"], query_type="hybrid"))


def _files(root: str) -> dict[str, int]:
    return {
        os.path.join(d, n): os.stat(os.path.join(d, n)).st_mtime_ns
        for d, _, names in os.walk(root)
        for n in names
    }


def test_what_auto_cannot_search_is_refused_by_name(tmp_path, rows):
    """A string on a namespace without a full-text index says it was read as full text;
    an explicit query type is not second-guessed; nothing is written."""
    ns = lp.create(str(tmp_path / "ns"), rows.schema, "tenant")
    ns.append(rows)
    before = _files(str(tmp_path))
    with pytest.raises(
        SearchError, match="query_type='auto' searched this query as 'fts'.*INVERTED"
    ):
        ns.search("fox", k=K)
    with pytest.raises(SearchError, match="vector of 8 numbers"):
        ns.search("fox", k=K, query_type="vector")
    with pytest.raises(SearchError, match="unknown query_type.*'auto'"):
        ns.search("fox", k=K, query_type="text")
    assert _files(str(tmp_path)) == before
