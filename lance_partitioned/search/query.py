"""Searching one leaf at its pinned version: vector k-NN and full-text candidates.

Each function reads one leaf (``Snapshot.open_leaf``: the version the
snapshot's ``__manifest`` row pins), runs the search inside Lance with the
leaf's residual filter as a *prefilter* (rows are filtered before the top k
is taken, so a selective filter still returns k rows), and returns the hits
in namespace form: the requested columns mapped by field id
(``ReadMapping``), plus ``_rowid`` and the score column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import lance
import numpy as np
import pyarrow as pa

from lance_partitioned.catalog.leaf_open import open_pinned
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.format.filters.evaluate import filter_batch
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.leaf.leaf_schema import ReadMapping, leaf_fields_by_id
from lance_partitioned.operations.read.scan import Scan
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
    # The leaf holds every output column under its namespace name and type, so
    # hits are its columns as they are (no per-search conform).
    direct: bool = False
    _schemas: dict[str, pa.Schema] = field(default_factory=dict, repr=False)
    _by_id: dict[int, pa.Field] | None = field(default=None, repr=False)
    _rows: int | None = field(default=None, repr=False)

    @property
    def rows(self) -> int:
        """The leaf's row count at its pinned version (from its manifest, read once)."""
        if self._rows is None:
            self._rows = self.ds.count_rows()
        return self._rows

    def leaf_column(self, field_id: int) -> str | None:
        """The leaf's name for namespace field ``field_id``; None when the leaf lacks it."""
        if self._by_id is None:  # the pinned version's schema never changes
            self._by_id = leaf_fields_by_id(self.ds)
        f = self._by_id.get(field_id)
        return None if f is None else f.name

    def hit_schema(self, score: str) -> pa.Schema:
        """The schema of this leaf's hits: the output columns, ``_rowid``, ``score``, ``_lp_leaf``."""
        schema = self._schemas.get(score)
        if schema is None:
            schema = self._schemas[score] = pa.schema(
                [
                    *self.mapping.targets,
                    pa.field("_rowid", pa.uint64()),
                    pa.field(score, pa.float64()),
                    pa.field("_lp_leaf", pa.int32()),
                ]
            )
        return schema


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
    direct = mapping.is_identity
    if sql is None or ReadMapping(schema, list(filter_columns), ds, label).is_identity:
        return LeafContext(ordinal, leaf, ds, sql, mapping, direct=direct)
    wide = ReadMapping(schema, list(filter_columns), ds, label)
    ids: list[int] = []
    for batch in ds.to_batches(columns=wide.leaf_columns, with_row_id=True):
        rows = wide.conform(batch).append_column("_lp_rowid", batch.column("_rowid"))
        ids.extend(filter_batch(rows, sql, ["_lp_rowid"]).column(0).to_pylist())
    if not ids:
        return LeafContext(ordinal, leaf, ds, None, mapping, empty=True)
    rows = f"_rowid IN ({', '.join(map(str, ids))})"
    return LeafContext(ordinal, leaf, ds, rows, mapping, direct=direct)


def _hits(ctx: LeafContext, table: pa.Table, score: str, values: pa.Array) -> pa.Table:
    """The leaf's result rows in namespace form with ``_rowid``, ``score`` and the leaf ordinal."""
    n = table.num_rows
    if ctx.direct:  # the common case, on every search: no conform, no concat
        rowid = table.column("_rowid")
        return pa.Table.from_arrays(
            [
                *(table.column(t.name) for t in ctx.mapping.targets),
                rowid if rowid.type == pa.uint64() else rowid.cast(pa.uint64()),
                values,
                pa.repeat(pa.scalar(ctx.ordinal, pa.int32()), n),
            ],
            schema=ctx.hit_schema(score),
        )
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


def nearest_rows(
    ctx: LeafContext,
    column: str,
    q: np.ndarray,
    k: int,
    metric: str,
    nprobes: int | None,
    refine_factor: int | None,
    *,
    flat: bool = False,
) -> pa.Table:
    """Lance's top ``k`` rows of the leaf for one query vector, as Lance returns them:
    the leaf's output columns, ``_rowid`` and ``_distance``, nearest first.

    ``flat``: search exactly, by a scan of every vector, even where the leaf
    has an index (``nprobes`` and ``refine_factor`` then do not apply).
    """
    # An Arrow float32 array is what Lance turns any query into (a numpy one
    # goes through float64 and back, on every search).
    vector = pa.array(q, pa.float32())
    nearest: dict[str, Any] = {"column": column, "q": vector, "k": k, "metric": metric}
    if flat:
        nearest["use_index"] = False
    else:
        if nprobes is not None:
            nearest["nprobes"] = nprobes
        if refine_factor is not None:
            nearest["refine_factor"] = refine_factor
    return ctx.ds.to_table(
        nearest=nearest,
        # _distance named: Lance adds it to a projection unasked only until a future
        # version, and warns on every search that relies on that
        columns=[*ctx.mapping.leaf_columns, "_distance"],
        filter=ctx.prefilter,
        prefilter=True,
        with_row_id=True,
    )


def nearest_hits(ctx: LeafContext, table: pa.Table) -> pa.Table:
    """``nearest_rows``'s table in hit form: namespace columns, ``_rowid``, ``_distance``
    (float64) and ``_lp_leaf``."""
    distance = table.column("_distance")
    if distance.type != pa.float64():
        distance = distance.cast(pa.float64())
    return _hits(ctx, table, "_distance", distance)


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
            # scores are ours (BM25 over every leaf, bm25.py): Lance's _score is not
            # wanted, and asking for none spares a deprecation warning per search
            disable_scoring_autoprojection=True,
        )
    else:
        t = ctx.ds.to_table(columns=cols, filter=ctx.prefilter, with_row_id=True)
    docs = [bm25.tokens(x, tokenizer) for x in t.column(column).to_pylist()]
    keep = [i for i, doc in enumerate(docs) if query_tokens.intersection(doc)]
    t = t.take(pa.array(keep, pa.int64()))
    docs = [docs[i] for i in keep]
    return _hits(ctx, t, "_score", pa.nulls(t.num_rows, pa.float64())), docs, stats
