"""Merging per-partition results into one exact, deterministic global ranking.

Every partition returns its own top k (vector) or all its candidates (full
text, already re-scored with corpus statistics). The global top k of the
union is then exact: a row of the global top k is in its partition's top k.
Ties are broken by the partition's place in ``__manifest`` order (object id
order of the snapshot's rows), then by the row id inside the partition, so
the same snapshot always returns the same rows in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

RRF_K = 60  # reciprocal rank fusion constant (Cormack et al. 2009; LanceDB's default)


def top_k(
    tables: Sequence[pa.Table], k: int, score: str, descending: bool, schema: pa.Schema
) -> pa.Table:
    """The best ``k`` rows of the union, ordered by ``score`` then leaf ordinal then row id."""
    parts = [t for t in tables if t.num_rows]
    if not parts:
        return schema.empty_table()
    if len(parts) == 1 and _strictly_ordered(parts[0].column(score), descending):
        # One partition searched (a tenant's search), its rows already in score
        # order without ties: the sort below would return them as they are.
        return parts[0].slice(0, k)
    union = pa.concat_tables(parts)
    order = pc.sort_indices(
        union,
        sort_keys=[
            (score, "descending" if descending else "ascending"),
            ("_lp_leaf", "ascending"),
            ("_rowid", "ascending"),
        ],
    )
    return union.take(order[:k])


def _strictly_ordered(scores: pa.ChunkedArray, descending: bool) -> bool:
    """Whether ``scores`` has no NULL and strictly increases (decreases when ``descending``)."""
    if scores.null_count:
        return False
    values = scores.to_numpy()
    steps = np.diff(values)
    return bool((steps < 0).all() if descending else (steps > 0).all())


def top_k_per_query(per_query: Sequence[Sequence[pa.Table]], k: int, schema: pa.Schema) -> pa.Table:
    """Vector results of a batch: for each query, its top ``k`` by ``_distance``, with
    ``query_index`` first."""
    out = []
    for qi, tables in enumerate(per_query):
        best = top_k(tables, k, "_distance", False, schema)
        out.append(
            best.add_column(0, "query_index", pa.array(np.full(best.num_rows, qi), pa.int32()))
        )
    return pa.concat_tables(out)


def rrf(vector: pa.Table, text: pa.Table, k: int, schema: pa.Schema) -> pa.Table:
    """Hybrid: reciprocal rank fusion of a vector and a text ranking.

    ``_score`` = sum over the rankings a row appears in of 1 / (RRF_K + rank),
    ranks counted from 1; a row is identified by (partition, row id). The
    fused rows keep ``_distance`` and ``_bm25`` (NULL when absent from that
    ranking). Ties go to the partition order, then the row id.
    """
    key = lambda t, i: (t.column("_lp_leaf")[i].as_py(), t.column("_rowid")[i].as_py())  # noqa: E731
    fused: dict[tuple[int, int], dict] = {}
    for rank, i in enumerate(range(vector.num_rows), start=1):
        row = vector.slice(i, 1).to_pylist()[0]
        row["_bm25"] = None
        row["_score"] = 1.0 / (RRF_K + rank)
        fused[key(vector, i)] = row
    for rank, i in enumerate(range(text.num_rows), start=1):
        kk = key(text, i)
        if kk in fused:
            fused[kk]["_score"] += 1.0 / (RRF_K + rank)
            fused[kk]["_bm25"] = text.column("_score")[i].as_py()
        else:
            row = text.slice(i, 1).to_pylist()[0]
            row["_bm25"] = row["_score"]
            row["_distance"] = None
            row["_score"] = 1.0 / (RRF_K + rank)
            fused[kk] = row
    table = pa.Table.from_pylist(list(fused.values()), schema=schema)
    return top_k([table], k, "_score", True, schema)
