"""Searching one leaf at its pinned version: vector k-NN and full-text candidates.

Each function reads one leaf (``Snapshot.open_leaf``: the version the
snapshot's ``__manifest`` row pins), runs the search inside Lance with the
leaf's residual filter as a *prefilter* (rows are filtered before the top k
is taken, so a selective filter still returns k rows), and returns the hits
in namespace form: the requested columns mapped by field id
(``ReadMapping``), plus ``_rowid`` and the score column.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import lance
import numpy as np
import pyarrow as pa

from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.format.filters.evaluate import filter_batch
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.leaf_schema import ReadMapping
from lance_partitioned.operations.scan import Scan
from lance_partitioned.search import bm25
from lance_partitioned.search.build import covered_fragments
from lance_partitioned.search.definitions import IndexDefinition


@dataclass
class LeafContext:
    """One leaf to search: its pinned dataset, prefilter and column mapping."""

    ordinal: int  # the leaf's place in manifest order: the tie-break after the score
    leaf: Leaf
    ds: lance.LanceDataset
    prefilter: str | None  # Lance SQL in the leaf's own column names; None: every row
    mapping: ReadMapping  # the output columns
    empty: bool = False  # the filter matches no row of this leaf


# Opened leaf datasets by (uri, pinned version, storage options). A pinned
# version never changes, and a LanceDataset keeps its index and metadata caches:
# reopening the leaf for every search would read its index again each time
# (on 10k-row partitions that tripled the latency of a tenant search).
# Only numeric versions are cached: a tag or a branch head can move.
_OPEN_LEAVES: OrderedDict[tuple[Any, ...], lance.LanceDataset] = OrderedDict()
_OPEN_LEAVES_MAX = 256
_OPEN_LEAVES_LOCK = threading.Lock()


def open_pinned(
    uri: str,
    leaf: Leaf,
    storage_options: dict[str, str] | None,
    opener: Callable[[], lance.LanceDataset],
) -> lance.LanceDataset:
    """``opener()`` (the leaf at its pinned version), reused while the process holds it."""
    ref = leaf.version_ref()
    cacheable = leaf.read_tag is None and (
        isinstance(ref, int) or (isinstance(ref, tuple) and ref[1] is not None)
    )
    if not cacheable:
        return opener()
    key = (uri, ref, tuple(sorted((storage_options or {}).items())))
    with _OPEN_LEAVES_LOCK:
        ds = _OPEN_LEAVES.get(key)
        if ds is not None:
            _OPEN_LEAVES.move_to_end(key)
            return ds
    ds = opener()
    with _OPEN_LEAVES_LOCK:
        _OPEN_LEAVES[key] = ds
        while len(_OPEN_LEAVES) > _OPEN_LEAVES_MAX:
            _OPEN_LEAVES.popitem(last=False)
    return ds


def open_context(
    snapshot: Snapshot, scan: Scan, leaf: Leaf, ordinal: int, columns: list[str]
) -> LeafContext:
    """Open ``leaf`` at its pinned version with the scan's residual filter as prefilter.

    A leaf that names the filter's columns as the namespace does gets the
    residual as Lance SQL. A leaf that does not (a column renamed or added
    after it was written) is filtered in namespace form with DataFusion, the
    same dialect, and gets the matching row ids as its prefilter.
    """
    uri = snapshot.leaf_uri(leaf.location)
    opts = snapshot.manifest.storage_options
    return leaf_context(
        open_pinned(uri, leaf, opts, lambda: snapshot.open_leaf(leaf)),
        snapshot.schema,
        leaf,
        ordinal,
        columns,
        scan.leaf_filter(leaf),
        scan.filter_columns,
    )


def leaf_context(
    ds: lance.LanceDataset,
    schema: Schema,
    leaf: Leaf,
    ordinal: int,
    columns: list[str],
    sql: str | None,
    filter_columns: Sequence[str],
) -> LeafContext:
    """``open_context`` for a leaf already opened at its pinned version.

    Needs no snapshot or ``Scan``: the residual filter ``sql`` and the scan's
    ``filter_columns`` are passed in, so Spark tasks (``spark.search``) build
    the same context from what the driver planned.
    """
    label = leaf.object_id
    mapping = ReadMapping(schema, columns, ds, label)
    if sql is None or ReadMapping(schema, list(filter_columns), ds, label).is_identity:
        return LeafContext(ordinal, leaf, ds, sql, mapping)
    wide = ReadMapping(schema, list(filter_columns), ds, label)
    ids: list[int] = []
    for batch in ds.to_batches(columns=wide.leaf_columns, with_row_id=True):
        rows = wide.conform(batch).append_column("_lp_rowid", batch.column("_rowid"))
        ids.extend(filter_batch(rows, sql, ["_lp_rowid"]).column(0).to_pylist())
    if not ids:
        return LeafContext(ordinal, leaf, ds, None, mapping, empty=True)
    return LeafContext(ordinal, leaf, ds, f"_rowid IN ({', '.join(map(str, ids))})", mapping)


def _hits(ctx: LeafContext, table: pa.Table, score: str, values: pa.Array) -> pa.Table:
    """The leaf's result rows in namespace form with ``_rowid``, ``score`` and the leaf ordinal."""
    batch = table.combine_chunks().to_batches()
    conformed = (
        ctx.mapping.conform(batch[0])
        if batch
        else ctx.mapping.conform(pa.RecordBatch.from_pylist([], schema=table.schema))
    )
    out = pa.Table.from_batches([conformed])
    out = out.append_column("_rowid", table.column("_rowid").cast(pa.uint64()))
    out = out.append_column(score, values)
    return out.append_column("_lp_leaf", pa.array([ctx.ordinal] * out.num_rows, pa.int32()))


def vector_hits(
    ctx: LeafContext,
    column: str,
    queries: np.ndarray,
    k: int,
    metric: str,
    nprobes: int | None,
    refine_factor: int | None,
) -> list[pa.Table]:
    """The top ``k`` rows of the leaf for each query vector (one table per query)."""
    out = []
    for q in queries:
        nearest: dict[str, Any] = {"column": column, "q": q, "k": k, "metric": metric}
        if nprobes is not None:
            nearest["nprobes"] = nprobes
        if refine_factor is not None:
            nearest["refine_factor"] = refine_factor
        t = ctx.ds.to_table(
            nearest=nearest,
            columns=ctx.mapping.leaf_columns,
            filter=ctx.prefilter,
            prefilter=True,
            with_row_id=True,
        )
        out.append(_hits(ctx, t, "_distance", t.column("_distance").cast(pa.float64())))
    return out


def text_hits(
    ctx: LeafContext,
    column: str,
    query: str,
    query_tokens: set[str],
    d: IndexDefinition,
    tokenizer: dict[str, Any],
    stats_key: tuple[Any, ...],
) -> tuple[pa.Table, list[list[str]], bm25.CorpusStats]:
    """Every row of the leaf that contains a query token and passes the filter.

    Returns the rows (without scores yet), each row's tokens, and the leaf's
    corpus statistics. Leaves that hold the INVERTED index find candidates
    through it; leaves not indexed yet (written after the last build) are
    matched by tokenizing their rows, with the same tokens.
    """
    stats = bm25.leaf_stats(ctx.ds, column, tokenizer, stats_key)
    cols = list(dict.fromkeys([*ctx.mapping.leaf_columns, column]))
    if stats.docs == 0 or not query_tokens:
        t = ctx.ds.schema.empty_table().select(cols)
        t = t.append_column("_rowid", pa.array([], pa.uint64()))
    elif covered_fragments(ctx.ds, d.name) is not None:
        from lance.query import MatchQuery

        t = ctx.ds.to_table(
            full_text_query=MatchQuery(query, column),
            columns=cols,
            filter=ctx.prefilter,
            prefilter=True,
            with_row_id=True,
            limit=ctx.ds.count_rows(),
        )
    else:
        t = ctx.ds.to_table(columns=cols, filter=ctx.prefilter, with_row_id=True)
    docs = [bm25.tokens(x, tokenizer) for x in t.column(column).to_pylist()]
    keep = [i for i, doc in enumerate(docs) if query_tokens.intersection(doc)]
    t = t.take(pa.array(keep, pa.int64()))
    docs = [docs[i] for i in keep]
    return _hits(ctx, t, "_score", pa.nulls(t.num_rows, pa.float64())), docs, stats
