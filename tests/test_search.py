"""Search inside and across partitions (issue 13): indexes, exact merges, BM25, bad input.

Oracles are independent of the code under test: vector results are checked
against numpy brute force over the source rows, BM25 against a plain-Python
BM25 over the documents, index presence against plain pylance.
Data: TPC-H ``part`` (tpchgen-cli, no download), ``p_comment`` embedded with
TF-IDF + truncated SVD (scikit-learn), tenants = ``p_mfgr``; plus small
clustered synthetic vectors.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections import Counter

import lance
import numpy as np
import pyarrow as pa
import pytest

import lance_partitioned as lp
from demo import tpch
from lance_partitioned.search import INDEXES_KEY, SearchError, build

DIM = 32


@pytest.fixture(scope="session")
def parts(tmp_path_factory) -> pa.Table:
    """TPC-H part at SF 0.01 (2,000 rows), with a deterministic 32-d embedding of p_comment."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    out = str(tmp_path_factory.mktemp("tpch_part"))
    path = tpch.generate(0.01, out, ("part",))["part"]
    t = tpch.read(path, ["p_partkey", "p_mfgr", "p_comment"])
    comments = t.column("p_comment").to_pylist()
    tfidf = TfidfVectorizer().fit_transform(comments)
    emb = TruncatedSVD(DIM, random_state=0).fit_transform(tfidf).astype(np.float32)
    # a few exact duplicates across tenants, so that ties occur and must be broken
    emb[1] = emb[0]
    emb[2] = emb[0]
    vec = pa.FixedSizeListArray.from_arrays(pa.array(emb.ravel()), DIM)
    return pa.table(
        {
            "id": t.column("p_partkey").cast(pa.int64()),
            "tenant": t.column("p_mfgr"),
            "comment": t.column("p_comment"),
            "emb": vec,
        }
    )


SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("tenant", pa.string()),
        pa.field("comment", pa.string()),
        pa.field("emb", pa.list_(pa.float32(), DIM)),
    ]
)


@pytest.fixture
def ns(tmp_path, parts):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "tenant")
    ns.append(parts)
    return ns


def _emb(table: pa.Table) -> np.ndarray:
    return np.asarray(table.column("emb").combine_chunks().values, np.float32).reshape(-1, DIM)


def _dist(x: np.ndarray, q: np.ndarray, metric: str) -> np.ndarray:
    x64, q64 = x.astype(np.float64), q.astype(np.float64)
    if metric == "l2":
        return ((x64 - q64) ** 2).sum(1)
    if metric == "cosine":
        return 1 - (x64 @ q64) / np.linalg.norm(x64, axis=1) / np.linalg.norm(q64)
    return 1 - x64 @ q64  # Lance's "dot" distance


def brute_force(ns, parts: pa.Table, q, k, metric="l2", tenant=None) -> list[int]:
    """Ids of the exact top k, ties broken by partition order (manifest order) then row order."""
    order = {task.partition_values["tenant"]: i for i, task in enumerate(ns.plan())}
    rows = parts if tenant is None else parts.filter(pa.compute.equal(parts["tenant"], tenant))
    d = _dist(_emb(rows), np.asarray(q, np.float32), metric)
    ids, tenants = rows["id"].to_pylist(), rows["tenant"].to_pylist()
    # within a leaf, row ids follow insertion order, which is id order here
    ranked = sorted(range(len(ids)), key=lambda i: (round(d[i], 4), order[tenants[i]], ids[i]))
    return [ids[i] for i in ranked[:k]]


# -- exact merge ------------------------------------------------------------------
@pytest.mark.parametrize("metric", ["l2", "cosine", "dot"])
def test_global_top_k_equals_brute_force(ns, parts, metric):
    rng = np.random.default_rng(1)
    queries = [_emb(parts)[0], *rng.normal(size=(3, DIM)).astype(np.float32)]
    for q in queries:
        got = ns.search(q, k=10, metric=metric, columns=["id"])
        assert got.column("id").to_pylist() == brute_force(ns, parts, q, 10, metric)
        want = np.sort(_dist(_emb(parts), q, metric))[:10]
        np.testing.assert_allclose(got.column("_distance").to_numpy(), want, rtol=1e-4, atol=1e-4)


def test_ties_are_broken_by_partition_then_row(ns, parts):
    q = _emb(parts)[0]  # rows 0, 1, 2 hold this exact vector (distance 0)
    got = ns.search(q, k=3, columns=["id", "tenant"])
    assert got.column("_distance").to_pylist() == [0.0, 0.0, 0.0]
    assert got.column("id").to_pylist() == brute_force(ns, parts, q, 3)
    assert got.to_pylist() == ns.search(q, k=3, columns=["id", "tenant"]).to_pylist()


def test_pruned_search_equals_brute_force_over_the_tenant(ns, parts):
    q = np.random.default_rng(2).normal(size=DIM).astype(np.float32)
    for tenant in ("Manufacturer#1", "Manufacturer#4"):
        got = ns.search(q, k=7, filter=f"tenant = '{tenant}'", columns=["id", "tenant"])
        assert got.column("id").to_pylist() == brute_force(ns, parts, q, 7, tenant=tenant)
        assert set(got.column("partition_field_tenant").to_pylist()) == {tenant}


def test_residual_filter_is_a_prefilter(ns, parts):
    q = np.random.default_rng(3).normal(size=DIM).astype(np.float32)
    got = ns.search(q, k=5, filter="id % 7 = 3", columns=["id"])
    rows = parts.filter(pa.compute.equal(pa.compute.modulo(parts["id"], 7), 3))
    d = _dist(_emb(rows), q, "l2")
    assert got.column("id").to_pylist() == [rows["id"][int(i)].as_py() for i in np.argsort(d)[:5]]


def test_batch_search_equals_one_search_per_query(ns, parts):
    qs = np.random.default_rng(4).normal(size=(3, DIM)).astype(np.float32)
    batch = ns.search(qs, k=4, columns=["id"])
    assert batch.column("query_index").to_pylist() == [0] * 4 + [1] * 4 + [2] * 4
    for i, q in enumerate(qs):
        one = batch.filter(pa.compute.equal(batch["query_index"], i)).column("id").to_pylist()
        assert one == brute_force(ns, parts, q, 4)


def test_search_reads_each_leaf_at_the_pinned_version(ns, parts):
    old = ns.version
    q = _emb(parts)[5]
    extra = parts.slice(5, 1).set_column(0, "id", pa.array([999_999], pa.int64()))
    ns.append(extra)  # an exact copy of row 5 in the same tenant, at a later version
    latest = ns.search(q, k=2, columns=["id"]).column("id").to_pylist()
    assert 999_999 in latest
    pinned = lp.open(ns.root, version=old).search(q, k=2, columns=["id"])
    assert 999_999 not in pinned.column("id").to_pylist()
    assert pinned.column("id").to_pylist()[0] == parts["id"][5].as_py()


# -- indexes ----------------------------------------------------------------------
def _leaf_index_names(ns) -> dict[str, list[str]]:
    """Index names per partition at the published version, read with plain pylance."""
    out = {}
    for task in ns.plan():
        ds = lance.dataset(task.uri, version=task.read_version)
        out[task.partition_values["tenant"]] = sorted(d.name for d in ds.describe_indices())
    return out


@pytest.mark.parametrize(
    "index_type, params",
    [
        ("IVF_PQ", {"num_partitions": 4, "num_sub_vectors": 8}),
        ("IVF_HNSW_SQ", {"num_partitions": 2}),
        ("IVF_FLAT", {"num_partitions": 4}),
    ],
)
def test_vector_index_is_built_on_every_leaf_and_published_at_once(ns, parts, index_type, params):
    before = ns.version
    report = ns.create_index("emb", index_type, min_rows=256, **params)
    assert len(report.partitions) == 5
    # one metadata commit (the definition), then ONE commit moving every leaf
    assert ns.version == before + 2
    middle = lp.open(ns.root, version=before + 1)
    assert [t.read_version for t in middle.plan()] == [
        t.read_version for t in lp.open(ns.root, version=before).plan()
    ]
    assert set(map(tuple, _leaf_index_names(middle).values())) == {()}
    assert set(map(tuple, _leaf_index_names(ns).values())) == {(f"emb_{index_type.lower()}",)}
    meta = json.loads(lance.dataset(os.path.join(ns.root, "__manifest")).metadata[INDEXES_KEY])
    assert meta[0]["index_type"] == index_type and meta[0]["field_id"] == 3
    # recall against brute force, pruned and unpruned
    rng = np.random.default_rng(5)
    hits = total = 0
    for q in rng.normal(size=(10, DIM)).astype(np.float32):
        for tenant in (None, "Manufacturer#2"):
            f = None if tenant is None else f"tenant = '{tenant}'"
            got = ns.search(q, k=10, filter=f, nprobes=4, refine_factor=5, columns=["id"])
            want = brute_force(ns, parts, q, 10, tenant=tenant)
            hits += len(set(got.column("id").to_pylist()) & set(want))
            total += 10
    assert hits / total >= 0.9


def test_small_partitions_stay_flat_and_list_indexes_shows_coverage(ns, parts):
    ns.create_index("emb", "IVF_FLAT", num_partitions=2, min_rows=1000)  # every tenant < 1000
    (info,) = ns.list_indexes()
    assert (info.partitions, info.partitions_indexed, info.partitions_flat) == (5, 0, 5)
    assert (info.rows, info.rows_indexed) == (parts.num_rows, 0)
    ns.drop_index("emb_ivf_flat")
    ns.create_index(
        "emb", "IVF_FLAT", num_partitions=2, min_rows=256, filter="tenant <= 'Manufacturer#2'"
    )
    (info,) = ns.list_indexes()
    in_scope = parts.filter(pa.compute.less_equal(parts["tenant"], "Manufacturer#2")).num_rows
    assert (info.partitions, info.partitions_indexed, info.rows, info.rows_indexed) == (
        2, 2, in_scope, in_scope,
    )  # fmt: skip


def test_later_writes_are_indexed_by_optimize_indexes(ns, parts):
    ns.create_index("emb", "IVF_FLAT", num_partitions=2, min_rows=256)
    ns.create_index("comment", "INVERTED")
    untouched = {t.object_id: t.read_version for t in ns.plan("tenant <> 'Manufacturer#1'")}
    more = parts.filter(pa.compute.equal(parts["tenant"], "Manufacturer#1"))
    more = more.set_column(0, "id", pa.compute.add(more["id"], 100_000))
    new = parts.slice(0, 300).set_column(1, "tenant", pa.array(["NewCo"] * 300))
    new = new.set_column(0, "id", pa.compute.add(new["id"], 200_000))
    ns.append(pa.concat_tables([more, new]))
    infos = {i.name: i for i in ns.list_indexes()}
    assert infos["emb_ivf_flat"].partitions == 6
    assert infos["emb_ivf_flat"].partitions_indexed == 5  # NewCo not yet
    assert infos["emb_ivf_flat"].rows_indexed == parts.num_rows
    report = ns.optimize_indexes()
    assert len(report.partitions) == 2  # Manufacturer#1 (appended) and NewCo (new)
    total = parts.num_rows + more.num_rows + new.num_rows
    for info in ns.list_indexes():
        assert (info.partitions_indexed, info.rows_indexed, info.rows) == (6, total, total)
    after = {t.object_id: t.read_version for t in ns.plan() if t.object_id in untouched}
    assert after == untouched  # partitions nobody wrote to are not rebuilt
    assert ns.optimize_indexes().partitions == []  # nothing left to do


def test_scalar_indexes_and_drop_index(ns):
    tags = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "tenant": ["a", "a", "b"],
            "tags": [["x", "y"], ["y"], ["z"]],
        }
    )
    ns2 = lp.create(ns.root + "_tags", tags.schema, "tenant")
    ns2.append(tags)
    ns2.create_index("id", "BTREE")
    ns2.create_index("tags", "LABEL_LIST")
    ns.create_index("tenant", "BITMAP")
    assert {tuple(v) for v in _leaf_index_names(ns2).values()} == {("id_btree", "tags_label_list")}
    flt = "array_has_any(tags, ['y'])"
    for task in ns2.plan():  # plain pylance: the leaf's LABEL_LIST index answers the filter
        scanner = lance.dataset(task.uri, version=task.read_version).scanner(filter=flt)
        assert "ScalarIndexQuery" in scanner.explain_plan()
        assert scanner.count_rows() == {"a": 2, "b": 0}[task.partition_values["tenant"]]
    before = ns2.version
    report = ns2.drop_index("tags_label_list")
    assert len(report.partitions) == 2
    assert ns2.version == before + 2  # one commit for every leaf, one for the definition
    assert {tuple(v) for v in _leaf_index_names(ns2).values()} == {("id_btree",)}
    assert [i.name for i in ns2.list_indexes()] == ["id_btree"]


# -- full text --------------------------------------------------------------------
TOKENIZER = dict(
    base_tokenizer="whitespace", lower_case=True, stem=False, remove_stop_words=False,
    ascii_folding=False,
)  # fmt: skip


def independent_bm25(docs: list[str], query: str) -> list[float]:
    """Okapi BM25 (k1 = 1.2, b = 0.75, Lance's idf) over ``docs``, in plain Python."""
    toks = [d.lower().split() for d in docs]
    n = len(toks)
    avgdl = sum(map(len, toks)) / n
    terms = set(query.lower().split())
    df = {t: sum(1 for d in toks if t in d) for t in terms}
    out = []
    for d in toks:
        tf = Counter(d)
        s = 0.0
        for t in terms:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * 2.2 / (tf[t] + 1.2 * (0.25 + 0.75 * len(d) / avgdl))
        out.append(s)
    return out


def _expected_fts(ns, rows: pa.Table, query: str, k: int) -> list[tuple[int, float]]:
    order = {task.partition_values["tenant"]: i for i, task in enumerate(ns.plan())}
    scores = independent_bm25(rows["comment"].to_pylist(), query)
    ids, tenants = rows["id"].to_pylist(), rows["tenant"].to_pylist()
    ranked = sorted(
        (i for i in range(len(ids)) if scores[i] > 0),
        key=lambda i: (-round(scores[i], 9), order[tenants[i]], ids[i]),
    )
    return [(ids[i], scores[i]) for i in ranked[:k]]


@pytest.mark.parametrize(
    "query", ["furiously", "carefully regular deposits", "ironic packages sleep"]
)
def test_fts_ranking_is_bm25_over_all_searched_partitions(ns, parts, query):
    ns.create_index("comment", "INVERTED", **TOKENIZER)
    got = ns.search(query, k=15, query_type="fts", columns=["id"])
    want = _expected_fts(ns, parts, query, 15)
    assert got.column("id").to_pylist() == [i for i, _ in want]
    np.testing.assert_allclose(got.column("_score").to_numpy(), [s for _, s in want], rtol=1e-9)
    # pruned to one tenant: BM25 over that tenant's documents, which is Lance's own score
    tenant = "Manufacturer#3"
    rows = parts.filter(pa.compute.equal(parts["tenant"], tenant))
    got = ns.search(query, k=15, query_type="fts", filter=f"tenant = '{tenant}'", columns=["id"])
    want = _expected_fts(ns, rows, query, 15)
    assert got.column("id").to_pylist() == [i for i, _ in want]
    (leaf,) = ns.plan(f"tenant = '{tenant}'")
    plain = lance.dataset(leaf.uri, version=leaf.read_version).to_table(
        full_text_query=query, columns=["id"], limit=10_000
    )
    lance_scores = dict(zip(plain["id"].to_pylist(), plain["_score"].to_pylist(), strict=True))
    for i, s in zip(got["id"].to_pylist(), got["_score"].to_pylist(), strict=True):
        assert s == pytest.approx(lance_scores[i], rel=1e-5)


@pytest.mark.parametrize("blank", ["", "   ", "-- !!"])
def test_fts_documents_without_tokens_count_as_in_lance(tmp_path, blank):
    """Lance's inverted index has no entry for a document without tokens, so it counts
    in neither the corpus size nor the average length; counting 30 of them reversed
    the ranking below. The oracle is Lance itself on one dataset of the same rows."""
    bodies = ["gamma", "gamma gamma gamma gamma x", "x y z", None, *[blank] * 30]
    n = len(bodies)
    rows = pa.table({"id": pa.array(range(n), pa.int64()), "tenant": ["t0"] * n, "body": bodies})
    ns = lp.create(str(tmp_path / "ns"), rows.schema, "tenant")
    ns.append(rows)
    ns.create_index("body", "INVERTED")
    plain = lance.write_dataset(rows, str(tmp_path / "plain"))
    plain.create_scalar_index("body", "INVERTED")
    want = plain.to_table(full_text_query="gamma", columns=["id", "_score"], limit=10)
    for flt in (None, "tenant = 't0'"):
        got = lp.open(ns.root).search("gamma", k=10, query_type="fts", columns=["id"], filter=flt)
        assert got["id"].to_pylist() == want["id"].to_pylist() == [1, 0]
        np.testing.assert_allclose(got["_score"].to_numpy(), want["_score"].to_numpy(), rtol=1e-5)


def test_fts_covers_rows_written_after_the_build(ns, parts):
    ns.create_index("comment", "INVERTED", **TOKENIZER)
    new = pa.table(
        {"id": pa.array([7_000_001], pa.int64()), "tenant": ["NewCo"],
         "comment": ["zyzzyva zyzzyva"], "emb": parts["emb"].slice(0, 1)},
        schema=SCHEMA,
    )  # fmt: skip
    ns.append(new)
    got = ns.search("zyzzyva", k=3, query_type="fts", columns=["id"])
    assert got.column("id").to_pylist() == [7_000_001]


def test_hybrid_is_reciprocal_rank_fusion_of_exact_rankings(ns, parts):
    ns.create_index("comment", "INVERTED", **TOKENIZER)
    q, text, k = _emb(parts)[10], "furiously regular", 10
    got = ns.search((q, text), k=k, query_type="hybrid", columns=["id"])
    vec = brute_force(ns, parts, q, k)
    fts = [i for i, _ in _expected_fts(ns, parts, text, k)]
    fused = Counter()
    for ranking in (vec, fts):
        for r, i in enumerate(ranking, start=1):
            fused[i] += 1 / (60 + r)
    want = sorted(fused.items(), key=lambda kv: -kv[1])[:k]
    np.testing.assert_allclose(got.column("_score").to_numpy(), [s for _, s in want], rtol=1e-12)
    assert set(got.column("id").to_pylist()) <= set(fused)


# -- bad input changes nothing ------------------------------------------------------
def files_under(root: str) -> dict[str, int]:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            out[os.path.join(d, n)] = os.stat(os.path.join(d, n)).st_mtime_ns
    return out


def unchanged(ns, action, error, match):
    root = os.path.dirname(ns.root.rstrip("/"))
    before = files_under(root)
    with pytest.raises(error, match=match):
        action()
    assert files_under(root) == before


def test_bad_index_requests_change_nothing(ns):
    ns.create_index("comment", "INVERTED")
    cases = [
        (lambda: ns.create_index("nope", "BTREE"), lp.ColumnNotFoundError, "nope"),
        (lambda: ns.create_index("comment", "IVF_PQ"), SearchError, "vector column"),
        (lambda: ns.create_index("emb", "BTREE"), SearchError, "scalar column"),
        (lambda: ns.create_index("id", "INVERTED"), SearchError, "string column"),
        (lambda: ns.create_index("emb", "IVF_SQUARE"), SearchError, "unknown index type"),
        (
            lambda: ns.create_index("emb", "IVF_PQ", metric="manhattan"),
            SearchError,
            "unknown metric",
        ),
        (lambda: ns.create_index("emb", "IVF_PQ", num_sub_vectors=5), SearchError, "divisor"),
        (lambda: ns.create_index("emb", "IVF_FLAT", nlist=3), SearchError, "unknown parameter"),
        (lambda: ns.create_index("comment", "BTREE"), SearchError, "already has index"),
        (lambda: ns.drop_index("missing"), SearchError, "no index named"),
    ]
    for action, error, match in cases:
        unchanged(ns, action, error, match)


def test_bad_searches_are_refused(ns, parts):
    q = _emb(parts)[0]
    cases = [
        (lambda: ns.search(q[:5]), SearchError, "dimension 5"),
        (lambda: ns.search(q, k=0), SearchError, "k must be a positive integer"),
        (lambda: ns.search(q, k=-3), SearchError, "k must be"),
        (lambda: ns.search(q, metric="hamming-ish"), SearchError, "unknown metric"),
        (lambda: ns.search(q, column="nope"), lp.ColumnNotFoundError, "nope"),
        (lambda: ns.search(q, column="comment"), SearchError, "not a vector column"),
        (lambda: ns.search("hello", query_type="fts"), SearchError, "INVERTED"),
        (
            lambda: ns.search("hello", query_type="fts", column="comment"),
            SearchError,
            "no INVERTED index",
        ),
        (lambda: ns.search(q, query_type="knn"), SearchError, "unknown query_type"),
        (lambda: ns.search(q, columns=["nope"]), lp.ColumnNotFoundError, "nope"),
    ]
    for action, error, match in cases:
        unchanged(ns, action, error, match)


def test_cosine_zero_query_and_empty_batch_are_refused(ns, parts):
    # issue 28 D11: a zero query under cosine returned 0 rows silently (its cosine
    # distance is undefined); an empty batch said "dimension 32 ... has dimension 32"
    q = _emb(parts)[0]
    zero = np.zeros(DIM, np.float32)
    cases = [
        (lambda: ns.search(zero, metric="cosine"), "all zeros"),
        (lambda: ns.search(np.stack([q, zero]), metric="cosine"), "query 1 of the batch: .*zeros"),
        (lambda: ns.search(np.zeros((0, DIM), np.float32)), "the query batch is empty"),
        (lambda: ns.search([]), "dimension 0"),
    ]
    for action, match in cases:
        unchanged(ns, action, SearchError, match)
    # the zero vector has a distance under l2 and dot: those searches are answered exactly
    for metric in ("l2", "dot"):
        got = ns.search(zero, k=5, metric=metric, columns=["id"])
        want = np.sort(_dist(_emb(parts), zero, metric))[:5]
        np.testing.assert_allclose(got.column("_distance").to_numpy(), want, atol=1e-4)


def test_a_build_failing_halfway_publishes_nothing_and_vacuum_leaves_nothing(ns, monkeypatch):
    before_version = ns.version
    real = build.build_segment
    calls = []

    def flaky(ds, column, d, accelerator):
        segment = real(ds, column, d, accelerator)  # the segment's files are written...
        calls.append(ds.uri)
        if len(calls) == 3:
            raise OSError("injected: disk full")  # ...then this leaf fails
        return segment

    monkeypatch.setattr(build, "build_segment", flaky)
    with pytest.raises(SearchError, match="injected"):
        ns.create_index("emb", "IVF_FLAT", num_partitions=2, min_rows=256)
    assert lp.open(ns.root).version == before_version
    assert lp.open(ns.root).list_indexes() == []
    assert set(map(tuple, _leaf_index_names(lp.open(ns.root)).values())) == {()}
    lp.open(ns.root).vacuum(older_than=dt.timedelta(0))
    for task in lp.open(ns.root).plan():
        ds = lance.dataset(task.uri)
        tracked = set(ds.tracked_files().read_all().column("path").to_pylist())
        present = {
            p
            for p in ds.all_files().read_all().column("path").to_pylist()
            if p.startswith(("data/", "_deletions/", "_indices/", "_transactions/"))
        }
        assert present <= tracked, sorted(present - tracked)
        assert not [p for p in present if p.startswith("_indices/")]
        assert ds.describe_indices() == []
    assert lp.open(ns.root).count() == 2000


def test_a_compaction_never_publishes_the_index_of_a_build_that_died(ns, parts):
    """A build that staged a partition's index and died before publishing (its process
    killed) leaves that unpublished index as the partition's latest Lance version. The
    next change to the partition (a compaction: it stages on the latest version when that
    holds the published content) must restore the published version under it."""
    from lance_partitioned.catalog.snapshot import Snapshot
    from lance_partitioned.operations.txn.staging import stage_leaf
    from lance_partitioned.search.definitions import make_definition

    ns.append(parts.set_column(0, "id", pa.compute.add(parts["id"], 10_000)))  # 2 fragments
    snap = Snapshot.load(ns.manifest)
    params = {"num_partitions": 2, "min_rows": 10}
    d = make_definition(snap.schema, "emb", "IVF_FLAT", None, None, params)
    leaf = snap.leaves()[0]
    uri = snap.leaf_uri(leaf.location)
    stage_leaf(uri, leaf.read_version, build.BuildIndexes([d], leaf.object_id), "died")
    assert [i.name for i in lance.dataset(uri).describe_indices()] == ["emb_ivf_flat"]
    assert ns.compact().leaves_compacted == len(snap.leaves())
    after = Snapshot.load(lp.open(ns.root).manifest)
    for published in after.leaves():
        assert after.open_leaf(published).describe_indices() == []
    assert lp.open(ns.root).list_indexes() == []
    assert lp.open(ns.root).count() == 2 * parts.num_rows


# -- GPU (optional) -----------------------------------------------------------------
def test_accelerator_cuda_trains_ivf_on_the_gpu(ns):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU on this machine")
    ns.create_index("emb", "IVF_PQ", num_partitions=4, num_sub_vectors=8, min_rows=256,
                    accelerator="cuda")  # fmt: skip
    (info,) = ns.list_indexes()
    assert info.partitions_indexed == 5


def test_filter_on_a_column_renamed_after_the_leaves_were_written(ns, parts):
    ns.rename_column("id", "pid")  # the leaves are renamed too (issue 28 B6)
    task = ns.plan()[0]
    assert "pid" in lance.dataset(task.uri, version=task.read_version).schema.names
    q = np.random.default_rng(6).normal(size=DIM).astype(np.float32)
    got = ns.search(q, k=5, filter="pid % 7 = 3", columns=["pid"])
    rows = parts.filter(pa.compute.equal(pa.compute.modulo(parts["id"], 7), 3))
    d = _dist(_emb(rows), q, "l2")
    assert got.column("pid").to_pylist() == [rows["id"][int(i)].as_py() for i in np.argsort(d)[:5]]
    assert ns.search(q, k=5, filter="pid < 0", columns=["pid"]).num_rows == 0


def test_search_engine_sits_above_the_namespace():
    """Layering: search imports no Spark and no CLI; the facade imports it lazily."""
    import ast
    from pathlib import Path

    import lance_partitioned.search as search

    for path in Path(search.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(
                    ("lance_partitioned.spark", "lance_partitioned.cli")
                ), f"{path.name} imports {node.module}"
    package = Path(search.__file__).parent.parent
    for facade in [package / "namespace.py", *sorted((package / "facade").glob("*.py"))]:
        top_level = [n for n in ast.parse(facade.read_text()).body if isinstance(n, ast.ImportFrom)]
        engine = [
            n.module for n in top_level if (n.module or "").startswith("lance_partitioned.search")
        ]
        assert not engine, f"{facade.name} imports the search engine at load time: {engine}"
