"""Quantized vector indexes are re-ranked with exact distances by default.

Every partition trains its own PQ/SQ codebooks, so the approximate distances of
two partitions are not comparable; ``search.api.DEFAULT_REFINE_FACTOR`` makes
Lance re-rank the candidates with exact distances unless ``refine_factor`` is
given. Oracle: numpy distances of the returned rows' source vectors.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import lance_partitioned as lp

DIM = 16


@pytest.fixture
def ns(tmp_path):
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(1200, DIM)).astype(np.float32)
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("tenant", pa.string()),
            pa.field("vec", pa.list_(pa.float32(), DIM)),
        ]
    )
    table = pa.table(
        {
            "id": np.arange(len(vecs)),
            "tenant": [f"t{i % 2}" for i in range(len(vecs))],
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), DIM),
        },
        schema=schema,
    )
    ns = lp.create(str(tmp_path / "ns"), schema, "tenant")
    ns.append(table)
    return ns, vecs


@pytest.mark.parametrize(
    "index_type, params",
    [("IVF_PQ", {"num_sub_vectors": 2}), ("IVF_HNSW_SQ", {})],
)
def test_quantized_indexes_return_exact_distances_by_default(ns, index_type, params):
    ns, vecs = ns
    ns.create_index("vec", index_type, num_partitions=2, min_rows=256, **params)
    q = np.random.default_rng(8).normal(size=DIM).astype(np.float32)
    for flt in (None, "tenant = 't1'"):
        # flat_below=0: through the index (these 600-row partitions are otherwise scanned flat)
        got = ns.search(q, k=10, filter=flt, columns=["id"], flat_below=0)
        exact = ((vecs[got["id"].to_numpy()].astype(np.float64) - q) ** 2).sum(1)
        np.testing.assert_allclose(got["_distance"].to_numpy(), exact, rtol=1e-4, atol=1e-4)
        assert list(got["_distance"].to_numpy()) == sorted(got["_distance"].to_numpy())
