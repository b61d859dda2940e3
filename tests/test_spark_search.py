"""Batch k-NN from Spark (``lps.search``) and vector columns through the Spark sink.

Issue 13 item 3. Embeddings are written from Spark into a new namespace (the
``<column>.arrow.fixed-size-list.size`` option), then searched from Spark.
Oracles are independent of the code under test: numpy brute force over the
source vectors for the answers, plain pylance for what is stored.
"""

from __future__ import annotations

import os
import shutil

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyspark")

import lance_partitioned as lp  # noqa: E402
from lance_partitioned import spark as lps  # noqa: E402
from lance_partitioned.search import SearchError  # noqa: E402

DIM = 16
TENANTS = ["t0", "t1", "t2", "t3"]
ROWS = 1200


def make_rows() -> tuple[np.ndarray, list[str], np.ndarray]:
    """ids, tenants and clustered vectors (one cluster per tenant), with exact
    duplicates across tenants so that ties occur and must be broken."""
    rng = np.random.default_rng(13)
    centers = rng.normal(size=(len(TENANTS), DIM)) * 3
    tenant_of = np.arange(ROWS) % len(TENANTS)
    vecs = (centers[tenant_of] + rng.normal(size=(ROWS, DIM))).astype(np.float32)
    vecs[1] = vecs[0]  # ids 0 (t0), 1 (t1), 2 (t2) hold the same vector
    vecs[2] = vecs[0]
    return np.arange(ROWS), [TENANTS[i] for i in tenant_of], vecs


def queries_df(spark, qs: np.ndarray, ids=None):
    ids = list(range(len(qs))) if ids is None else ids
    return spark.createDataFrame(
        [(int(i), q.tolist()) for i, q in zip(ids, qs, strict=True)],
        "query_id long, q array<float>",
    )


def brute_force(ns, ids, tenants, vecs, q, k, keep=None, metric="l2") -> list[int]:
    """The exact top k ids; ties by partition (manifest) order, then row order (= id order)."""
    order = {t.partition_values["tenant"]: i for i, t in enumerate(ns.plan())}
    x, q64 = vecs.astype(np.float64), np.asarray(q, np.float64)
    if metric == "l2":
        d = ((x - q64) ** 2).sum(1)
    else:  # cosine
        d = 1 - (x @ q64) / np.linalg.norm(x, axis=1) / np.linalg.norm(q64)
    rows = [i for i in range(len(ids)) if keep is None or keep(ids[i], tenants[i])]
    rows.sort(key=lambda i: (round(d[i], 4), order[tenants[i]], ids[i]))
    return [int(ids[i]) for i in rows[:k]]


def per_query(rows) -> dict[int, list[int]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for r in rows:
        out.setdefault(r["query_id"], []).append((r["_rank"], r["id"]))
    return {q: [i for _, i in sorted(v)] for q, v in out.items()}


def listing(root) -> dict[str, int]:
    return {
        os.path.relpath(os.path.join(d, f), root): os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(root)
        for f in files
    }


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """A namespace created by a Spark write of embeddings (array<float> -> vector), indexed."""
    ids, tenants, vecs = make_rows()
    df = spark.createDataFrame(
        [(int(i), t, v.tolist()) for i, t, v in zip(ids, tenants, vecs, strict=True)],
        "id long, tenant string, emb array<float>",
    )
    root = str(tmp_path_factory.mktemp("spark_search") / "ns")
    (
        df.write.format("lance_partitioned")
        .option("spec", "tenant")
        .option("emb.arrow.fixed-size-list.size", str(DIM))
        .mode("append")
        .save(root)
    )
    ns = lp.open(root)
    # IVF_FLAT probed in full is exact: the answers must equal brute force
    ns.create_index("emb", "IVF_FLAT", num_partitions=2, min_rows=100)
    return root, ids, tenants, vecs


def test_embeddings_written_from_spark_are_vector_columns(spark, written):
    root, ids, tenants, vecs = written
    ns = lp.open(root)
    assert ns.schema.field("emb").type == pa.list_(pa.float32(), DIM)
    seen = {}
    for task in ns.plan():
        leaf = lance.dataset(task.uri, version=task.read_version).to_table()
        assert leaf.schema.field("emb").type == pa.list_(pa.float32(), DIM)
        for i, v in zip(leaf["id"].to_pylist(), leaf["emb"].to_pylist(), strict=True):
            seen[i] = v
    assert len(seen) == ROWS
    np.testing.assert_array_equal(np.asarray([seen[i] for i in ids], np.float32), vecs)
    # and back to Spark: array<float>, same values
    back = lps.read_arrow(spark, root, columns=["id", "emb"])
    assert back.schema["emb"].dataType.simpleString() == "array<float>"
    got = {r["id"]: r["emb"] for r in back.where("id < 40").collect()}
    np.testing.assert_array_equal(np.asarray([got[i] for i in range(40)], np.float32), vecs[:40])


def test_spark_search_equals_brute_force_with_ties_broken_like_core(spark, written):
    root, ids, tenants, vecs = written
    ns = lp.open(root)
    rng = np.random.default_rng(1)
    qs = np.vstack([vecs[0], vecs[7], rng.normal(size=(4, DIM)) * 3]).astype(np.float32)
    got = lps.search(spark, root, queries_df(spark, qs), 5, columns=["id", "tenant"], nprobes=2)
    rows = got.collect()
    assert sorted(got.columns) == sorted(
        ["query_id", "id", "tenant", "partition_field_tenant", "_distance", "_rank"]
    )
    by_q = per_query(rows)
    for qi, q in enumerate(qs):
        assert by_q[qi] == brute_force(ns, ids, tenants, vecs, q, 5), qi
    # query 0: rows 0, 1, 2 tie at distance 0; the order is the core search's
    assert by_q[0][:3] == [0, 1, 2]
    for r in rows:
        assert r["partition_field_tenant"] == r["tenant"]
    core = ns.search(qs, k=5, columns=["id"], nprobes=2)
    for qi in range(len(qs)):
        mine = core.filter(pc.equal(core["query_index"], qi)).column("id").to_pylist()
        assert by_q[qi] == mine
    d0 = sorted((r["_rank"], r["_distance"]) for r in rows if r["query_id"] == 2)
    want = np.sort(((vecs.astype(np.float64) - qs[2]) ** 2).sum(1))[:5]
    np.testing.assert_allclose([d for _, d in d0], want, rtol=1e-4, atol=1e-4)


def test_spark_search_is_pruned_like_the_core_search(spark, written, tmp_path):
    root, ids, tenants, vecs = written
    copy = str(tmp_path / "ns")
    shutil.copytree(root, copy)
    ns = lp.open(copy)
    flt = "tenant = 't1' AND id % 3 = 1"
    plan = lps.plan_search(copy, 4, filter=flt)
    assert plan.partitions_scanned == 1 and plan.partitions_total == len(TENANTS)
    assert [t.leaf.location for g in plan.groups for t in g] == [
        t.uri.rstrip("/").split("/")[-1] for t in ns.plan(flt)
    ]
    # the other tenants' tables are gone: a pruned search never opens them
    for task in ns.plan():
        if task.partition_values["tenant"] != "t1":
            shutil.rmtree(task.uri)
    qs = np.random.default_rng(2).normal(size=(3, DIM)).astype(np.float32) * 3
    rows = lps.search(spark, copy, queries_df(spark, qs), 4, filter=flt, columns=["id"]).collect()
    by_q = per_query(rows)
    keep = lambda i, t: t == "t1" and i % 3 == 1  # noqa: E731
    for qi, q in enumerate(qs):
        assert by_q[qi] == brute_force(ns, ids, tenants, vecs, q, 4, keep), qi
    assert {r["partition_field_tenant"] for r in rows} == {"t1"}


def test_every_task_reads_the_snapshot_the_driver_pinned(spark, written, tmp_path):
    root, ids, tenants, vecs = written
    copy = str(tmp_path / "ns")
    shutil.copytree(root, copy)
    ns = lp.open(copy)
    q = vecs[9]
    pinned = lps.search(spark, copy, queries_df(spark, q[None, :]), 2, columns=["id"])
    # written after planning: an exact copy of row 9 in its tenant, and a new tenant
    extra = pa.table(
        {
            "id": pa.array([50_000, 50_001], pa.int64()),
            "tenant": ["t1", "new"],
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(np.concatenate([q, q])), DIM),
        },
        schema=ns.schema.arrow,
    )
    ns.append(extra)
    assert {r["id"] for r in pinned.collect()} == {9, brute_force(ns, ids, tenants, vecs, q, 2)[1]}
    latest = lps.search(spark, copy, queries_df(spark, q[None, :]), 3, columns=["id"]).collect()
    assert {r["id"] for r in latest} == {9, 50_000, 50_001}


def test_cosine_metric_and_a_query_set_split_over_partitions(spark, written):
    root, ids, tenants, vecs = written
    ns = lp.open(root)
    qs = np.random.default_rng(3).normal(size=(6, DIM)).astype(np.float32)
    df = queries_df(spark, qs, ids=[10 * i for i in range(6)]).repartition(3)
    rows = lps.search(spark, root, df, 3, metric="cosine", columns=["id"], tasks=3).collect()
    by_q = per_query(rows)
    for i, q in enumerate(qs):
        assert by_q[10 * i] == brute_force(ns, ids, tenants, vecs, q, 3, metric="cosine")


def test_bad_requests_are_refused_and_change_nothing(spark, written):
    root, *_ = written
    before = listing(root)
    good = queries_df(spark, np.zeros((1, DIM), np.float32))
    cases = [
        (lambda: lps.search(spark, root, good, 0), SearchError, "k must be a positive integer"),
        (lambda: lps.search(spark, root, good, 3, metric="manhattan"), SearchError, "metric"),
        (lambda: lps.search(spark, root, good, 3, column="tenant"), SearchError, "not a vector"),
        (lambda: lps.search(spark, root, good, 3, column="nope"), lp.ColumnNotFoundError, "nope"),
        (lambda: lps.search(spark, root, good, 3, nprobes=0), SearchError, "nprobes"),
        (lambda: lps.search(spark, root, good, 3, id_column="qid"), SearchError, "'qid'"),
        (
            lambda: lps.search(spark, root, good.selectExpr("query_id", "'x' AS q"), 3),
            SearchError,
            "array<float>",
        ),
        (
            lambda: lps.search(spark, root, good, 3, columns=["id", "query_id"]),
            lp.ColumnNotFoundError,
            "query_id",
        ),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc, match=text):
            call()
    short = queries_df(spark, np.zeros((1, DIM - 1), np.float32))
    with pytest.raises(Exception, match="dimension 15, but column 'emb' has dimension 16"):
        lps.search(spark, root, short, 3).collect()
    assert listing(root) == before


def test_new_namespace_vector_option_is_checked(spark, tmp_path):
    df = spark.createDataFrame([(1, "a", [1.0, 2.0])], "id long, tenant string, emb array<float>")
    root = str(tmp_path / "bad")
    for key, value, text in [
        ("tenant.arrow.fixed-size-list.size", "2", "cannot be stored as a vector"),
        ("nope.arrow.fixed-size-list.size", "2", "names no column"),
        ("emb.arrow.fixed-size-list.size", "0", "positive"),
    ]:
        with pytest.raises(Exception, match=text):
            df.write.format("lance_partitioned").option("spec", "tenant").option(key, value).mode(
                "append"
            ).save(root)
        assert not os.path.exists(root) or not os.listdir(root)


def test_spark_arrays_are_cast_into_an_existing_vector_column(spark, tmp_path):
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("emb", pa.list_(pa.float32(), 3))]
    )
    root = str(tmp_path / "ns")
    lp.create(root, schema, "bucket(2, id)")
    df = spark.createDataFrame(
        [(1, [1.0, 2.0, 3.0]), (2, [4.0, 5.0, 6.0])], "id long, emb array<float>"
    )
    lps.write(df, root)
    got = lp.open(root).scan().to_arrow().sort_by("id")
    assert got.schema.field("emb").type == pa.list_(pa.float32(), 3)
    assert got["emb"].to_pylist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    before = listing(root)
    wrong = spark.createDataFrame([(3, [1.0, 2.0])], "id long, emb array<float>")
    with pytest.raises(Exception, match="emb"):
        lps.write(wrong, root)
    assert listing(root) == before
