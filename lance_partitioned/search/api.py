"""``search``: vector, full-text and hybrid search over a snapshot, pruned like a scan.

1. Check the request (k, query type, column and its index, metric, query
   dimension) before any leaf is read.
2. Prune partitions through ``__manifest`` exactly as ``scan`` does
   (``operations.read.scan.Scan``); each remaining leaf is opened at the version
   the snapshot pins, so one search sees one snapshot.
3. Search every leaf in parallel inside Lance, with its residual filter as a
   prefilter (``search.query``).
4. Merge exactly (``search.merge``): vector distances are comparable across
   partitions; BM25 scores are recomputed with the statistics of all searched
   partitions (``search.bm25``); hybrid is reciprocal rank fusion.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from lance_partitioned.catalog.leaf_open import is_pinned
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import ColumnNotFoundError
from lance_partitioned.format.caches import BoundedCache
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.read.scan import Scan
from lance_partitioned.operations.read.scan_filter import FilterLike
from lance_partitioned.search import bm25, memory, merge
from lance_partitioned.search.definitions import (
    TOKENIZER_PARAMS,
    IndexDefinition,
    SearchError,
    load_definitions,
    normalize_metric,
    query_problem,
    vector_dimension,
)
from lance_partitioned.search.query import (
    LeafContext,
    nearest_hits,
    open_context,
    text_hits,
)

QUERY_TYPES = ("auto", "vector", "fts", "hybrid")
T = TypeVar("T")


def _parallel(fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(min(8, len(items))) as pool:
        return list(pool.map(fn, items))


def check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0:
        raise SearchError(f"k must be a positive integer, got {k!r}")
    return int(k)


def vector_column(schema: Schema, column: str | None) -> str:
    """The vector column to search: ``column``, else the only vector column of the schema."""
    if column is not None:
        if not schema.has_field(column):
            raise ColumnNotFoundError(
                f"unknown column {column!r}; columns are {schema.names}", (column,)
            )
        if vector_dimension(schema.field(column).type) is None:
            raise SearchError(
                f"column {column!r} is {schema.field(column).type}, not a vector column "
                "(fixed_size_list<float>); a vector search needs one"
            )
        return column
    found = [f.name for f in schema.arrow if vector_dimension(f.type) is not None]
    if len(found) != 1:
        raise SearchError(
            f"pass column=: the namespace has {len(found)} vector columns ({found or 'none'})"
        )
    return found[0]


def text_definition(
    schema: Schema, defs: dict[str, IndexDefinition], column: str | None
) -> tuple[str, IndexDefinition]:
    """The text column and its INVERTED definition; SearchError when it has none."""
    inverted = {d.column_in(schema): d for d in defs.values() if d.index_type == "INVERTED"}
    inverted.pop(None, None)
    if column is None:
        if len(inverted) != 1:
            raise SearchError(
                "a full-text search needs a column with an INVERTED index; "
                f"indexed text columns: {sorted(inverted) or 'none'} (pass column=)"
            )
        column = next(iter(inverted))
    if not schema.has_field(column):
        raise ColumnNotFoundError(
            f"unknown column {column!r}; columns are {schema.names}", (column,)
        )
    if column not in inverted:
        raise SearchError(
            f"column {column!r} has no INVERTED index; create one first: "
            f"ns.create_index({column!r}, 'INVERTED')"
        )
    return column, inverted[column]


def query_vectors(query: Any, dim: int, column: str, metric: str) -> tuple[np.ndarray, bool]:
    """The query as a 2-D float32 array, and whether it was a batch (2-D input).

    SearchError for a wrong dimension, an empty batch, and what ``query_problem``
    refuses (NaN or infinite values; the zero vector for ``metric`` cosine).
    """
    try:
        arr = np.asarray(query, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise SearchError(f"the query must be a vector of {dim} numbers: {exc}") from exc
    batch = arr.ndim == 2
    if arr.ndim == 1:
        arr = arr[None, :]
    if batch and arr.shape[0] == 0:
        raise SearchError(f"the query batch is empty (shape {arr.shape}): pass at least one vector")
    if arr.ndim != 2 or arr.shape[1] != dim:
        got = arr.shape[-1] if arr.ndim >= 1 else 0
        raise SearchError(
            f"query vector has dimension {got} (shape {np.shape(query)}), but column "
            f"{column!r} has dimension {dim}"
        )
    if (problem := query_problem(arr, metric)) is not None:
        raise SearchError(f"query {problem[0]} of the batch: {problem[1]}" if batch else problem[1])
    return arr, batch


_PRUNED_KEY = "search_pruned_leaves"
_PRUNED_MAX = 1024


def pruned_leaves(snapshot: Snapshot, scan: Scan) -> list[Leaf]:
    """``scan.leaves``, remembered on the snapshot per ``__manifest`` filter.

    A snapshot never changes, so the partitions a filter selects in it do not
    either; a handle searched again and again (a tenant's queries) queries
    ``__manifest`` once per filter instead of once per search (about 4 ms).
    """
    memo = snapshot.memo(_PRUNED_KEY, lambda: BoundedCache(maxsize=_PRUNED_MAX))
    key = scan.manifest_sql
    leaves = memo.get(key)
    if leaves is None:
        leaves = list(scan.leaves)  # searched again and again: build the Leafs once
        memo.put(key, leaves)
    return leaves


def check_probe_options(nprobes: Any, refine_factor: Any) -> None:
    """``nprobes`` and ``refine_factor`` are None or positive integers."""
    for name, value in (("nprobes", nprobes), ("refine_factor", refine_factor)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value <= 0
        ):
            raise SearchError(f"{name} must be a positive integer, got {value!r}")


# Partitions are searched exactly (flat) even when they have a vector index while
# rows × dimension is below this: there a flat scan measured faster than probing
# an IVF_HNSW_SQ index, and it is exact (benchmarks/search_flat_bench.py,
# benchmarks/results/search_flat.md: flat faster up to 12,500 rows at 128-d and
# about 1,000 at 768-d; the scan's cost grows with rows × dimension, the
# index's hardly). 10,000 rows at 128-d. See docs/SEARCH.md §3.
FLAT_BELOW_VALUES = 10_000 * 128


def default_flat_below(dim: int) -> int:
    """The default ``flat_below`` (rows) of a ``dim``-dimensional vector column."""
    return FLAT_BELOW_VALUES // max(1, dim)


def check_flat_below(flat_below: Any) -> int | None:
    """``flat_below``: None (the default, ``default_flat_below``) or a row count >= 0."""
    if flat_below is None:
        return None
    if isinstance(flat_below, bool) or not isinstance(flat_below, int) or flat_below < 0:
        raise SearchError(f"flat_below must be an integer >= 0 (rows), got {flat_below!r}")
    return flat_below


# Quantized indexes (PQ codes, SQ codes) rank by approximate distances, and every
# partition trains its own codebooks, so those distances are neither accurate
# nor comparable across partitions. By default their top candidates are re-ranked
# with exact distances (Lance's refine): recall@10 rises from about 0.4 (IVF_PQ,
# 16 sub-vectors) / 0.87 (IVF_HNSW_SQ) to 0.8 / 0.98 on the benchmark's clustered
# 128-d vectors, and the merge compares exact distances. See docs/SEARCH.md §3.
DEFAULT_REFINE_FACTOR = 5
QUANTIZED_TYPES = ("IVF_PQ", "IVF_HNSW_SQ")


def resolve_refine(
    defs: dict[str, IndexDefinition], schema: Schema, column: str, refine_factor: int | None
) -> int | None:
    """``refine_factor``, else DEFAULT_REFINE_FACTOR when the column's index is quantized."""
    if refine_factor is not None:
        return refine_factor
    quantized = any(
        d.index_type in QUANTIZED_TYPES and d.column_in(schema) == column for d in defs.values()
    )
    return DEFAULT_REFINE_FACTOR if quantized else None


def resolve_metric(
    defs: dict[str, IndexDefinition], schema: Schema, column: str, metric: Any
) -> str:
    """``metric`` checked, else the metric of the column's vector index definition, else l2."""
    if metric is not None:
        return normalize_metric(metric)
    vdef = next((d for d in defs.values() if d.is_vector and d.column_in(schema) == column), None)
    return vdef.metric if vdef is not None else "l2"


def partition_columns(
    snapshot: Snapshot, leaves: Sequence[Leaf]
) -> tuple[list[pa.Field], list[list[Any]]]:
    """The partition-value columns of search results, and each leaf's values for them.

    One ``partition_field_<id>`` column (typed as in ``__manifest``) per
    partition field of any spec; a leaf of a spec without that field has NULL.
    """
    fields: list[pa.Field] = []
    for sid in sorted(snapshot.specs):
        for f in snapshot.specs[sid].fields:
            if f.column not in {x.name for x in fields}:
                fields.append(pa.field(f.column, f.result_type))
    values = []
    for leaf in leaves:
        own = [f.column for f in snapshot.specs[leaf.spec_id].fields]
        values.append([leaf.values[own.index(c.name)] if c.name in own else None for c in fields])
    return fields, values


_DEFINITIONS_KEY = "search_definitions"


def definitions(snapshot: Snapshot) -> dict[str, IndexDefinition]:
    """``load_definitions(snapshot)``, parsed once per snapshot (it never changes)."""
    return snapshot.memo(_DEFINITIONS_KEY, lambda: load_definitions(snapshot))


@dataclass
class Targets:
    """What a search reads: the pruned leaves, opened with their prefilters.

    ``fields``/``values``: the partition-value columns of the results and each
    leaf's values for them (``partition_columns``).
    """

    scan: Scan
    leaves: list[Leaf]
    contexts: list[LeafContext]
    fields: list[pa.Field]
    values: list[list[Any]]

    def result_schema(self, score: str) -> pa.Schema:
        """The schema of a result: the output columns, ``score``, the partition columns."""
        return pa.schema([*self.scan.output_schema, pa.field(score, pa.float64()), *self.fields])


_TARGETS_KEY = "search_targets"
_TARGETS_MAX = 64


def search_targets(
    snapshot: Snapshot, filter: FilterLike, columns: Sequence[str] | None
) -> Targets:
    """The ``Targets`` of a search, remembered on the snapshot per (filter text, columns).

    A snapshot never changes, and its leaves are read at pinned versions, so
    the bound filter, the pruned leaves, their opened datasets, residual
    prefilters and column mappings are the same for every search of one
    handle with one filter: a tenant's repeated searches plan once. Not
    remembered: filters given as expressions, and leaves read at a tag or a
    branch head (which can move; ``leaf_open.is_pinned``).
    """
    key: tuple[Any, ...] | None = None
    if filter is None or isinstance(filter, str):
        key = (filter, None if columns is None else tuple(columns))
        try:
            hit = _targets_memo(snapshot).get(key)
        except TypeError:  # an unhashable column name: Scan refuses it below
            hit, key = None, None
        if hit is not None:
            return hit
    scan = Scan(snapshot, filter, columns)
    leaves = pruned_leaves(snapshot, scan)
    out_columns = [f.name for f in scan.output_schema]
    contexts = _parallel(
        lambda i: open_context(snapshot, scan, leaves[i], i, out_columns), range(len(leaves))
    )
    targets = Targets(scan, leaves, contexts, *partition_columns(snapshot, leaves))
    if key is not None and all(is_pinned(leaf) for leaf in leaves):
        _targets_memo(snapshot).put(key, targets)
    return targets


def _targets_memo(snapshot: Snapshot) -> BoundedCache:
    return snapshot.memo(_TARGETS_KEY, lambda: BoundedCache(maxsize=_TARGETS_MAX))


def _finish(targets: Targets, table: pa.Table) -> pa.Table:
    """Add the partition values of each row's leaf; drop the merge's bookkeeping columns."""
    n = table.num_rows
    one = len(targets.leaves) == 1  # a pruned search: every row has the same values
    ordinals = None if one else table.column("_lp_leaf").to_pylist()
    for i, field in enumerate(targets.fields):
        if ordinals is None:
            column = pa.repeat(pa.scalar(targets.values[0][i], field.type), n)
        else:
            column = pa.array([targets.values[o][i] for o in ordinals], field.type)
        table = table.append_column(field, column)
    return table.drop_columns(["_lp_leaf", "_rowid"])


def _hit_schema(output_schema: pa.Schema, *scores: str) -> pa.Schema:
    fields = list(output_schema)
    fields.append(pa.field("_rowid", pa.uint64()))
    fields.extend(pa.field(s, pa.float64()) for s in scores)
    fields.append(pa.field("_lp_leaf", pa.int32()))
    return pa.schema(fields)


@dataclass(frozen=True)
class VectorRequest:
    """A checked vector query: column, 2-D query vectors, whether a batch, metric, refine."""

    column: str
    queries: np.ndarray
    batch: bool
    metric: str
    refine_factor: int | None


@dataclass(frozen=True)
class TextRequest:
    """A checked full-text query: column, its INVERTED definition, the text."""

    column: str
    definition: IndexDefinition
    text: str


def infer_query_type(query: Any) -> str:
    """What ``query_type="auto"`` searches for ``query``, as LanceDB's ``"auto"`` does
    without an embedding function: text searches the full-text index (``"fts"``), a
    ``(vector, text)`` pair or ``{"vector": ..., "text": ...}`` both (``"hybrid"``),
    anything else the vector index (``"vector"``: one vector, or a 2-D batch)."""
    if isinstance(query, str):
        return "fts"
    if isinstance(query, dict):
        return "hybrid"
    if isinstance(query, (tuple, list)) and len(query) == 2 and isinstance(query[1], str):
        return "hybrid"
    return "vector"


def _split_query(query: Any, query_type: str, column: Any) -> tuple[Any, Any, Any, Any]:
    """(vector query, text query, vector column, text column) of a request."""
    if query_type == "vector":
        return query, None, column, None
    if query_type == "fts":
        return None, query, None, column
    vector_query = text_query = None
    if isinstance(query, dict):
        vector_query, text_query = query.get("vector"), query.get("text")
    elif isinstance(query, (tuple, list)) and len(query) == 2 and isinstance(query[1], str):
        vector_query, text_query = query
    if vector_query is None or text_query is None:
        raise SearchError("a hybrid query is (vector, text) or {'vector': ..., 'text': ...}")
    vcol, tcol = column if isinstance(column, (tuple, list)) else (None, None)
    return vector_query, text_query, vcol, tcol


def check_request(
    snapshot: Snapshot,
    query: Any,
    query_type: str,
    column: Any,
    metric: str | None,
    nprobes: int | None,
    refine_factor: int | None,
) -> tuple[VectorRequest | None, TextRequest | None]:
    """The checked vector and text parts of a search (SearchError before any leaf is read)."""
    if query_type not in QUERY_TYPES:
        raise SearchError(f"unknown query_type {query_type!r}; use one of {QUERY_TYPES}")
    check_probe_options(nprobes, refine_factor)
    if query_type == "auto":
        kind = infer_query_type(query)
        try:
            return check_request(snapshot, query, kind, column, metric, nprobes, refine_factor)
        except SearchError as exc:  # say which search the query was read as
            raise SearchError(f"query_type='auto' searched this query as {kind!r}: {exc}") from exc
    defs, schema = definitions(snapshot), snapshot.schema
    vector_query, text_query, vcol_arg, tcol_arg = _split_query(query, query_type, column)
    vector = text = None
    if vector_query is not None:
        vcol = vector_column(schema, vcol_arg)
        dim = vector_dimension(schema.field(vcol).type)
        m = resolve_metric(defs, schema, vcol, metric)
        queries, batch = query_vectors(vector_query, dim, vcol, m)
        if batch and query_type == "hybrid":
            raise SearchError("a hybrid search takes one query vector")
        vector = VectorRequest(
            vcol, queries, batch, m, resolve_refine(defs, schema, vcol, refine_factor)
        )
    elif metric is not None:
        normalize_metric(metric)  # still refuse nonsense
    if text_query is not None:
        if not isinstance(text_query, str) or not text_query.strip():
            raise SearchError(f"a full-text query must be non-empty text, got {text_query!r}")
        text = TextRequest(*text_definition(schema, defs, tcol_arg), text_query)
    return vector, text


def search(
    snapshot: Snapshot,
    query: Any,
    k: int = 10,
    *,
    column: str | None = None,
    filter: FilterLike = None,
    columns: Sequence[str] | None = None,
    query_type: str = "auto",
    metric: str | None = None,
    nprobes: int | None = None,
    refine_factor: int | None = None,
    flat_below: int | None = None,
) -> pa.Table:
    """Search the snapshot; see ``PartitionedNamespace.search`` for the contract."""
    k = check_k(k)
    flat_below = check_flat_below(flat_below)
    vreq, treq = check_request(snapshot, query, query_type, column, metric, nprobes, refine_factor)
    targets = search_targets(snapshot, filter, columns)
    output_schema = targets.scan.output_schema
    vector = text = None
    if vreq is not None and treq is None and not vreq.batch and len(targets.contexts) == 1:
        return _one_partition(targets, snapshot.schema, vreq, k, nprobes, flat_below)
    if vreq is not None:
        vector = vector_top_k(
            targets.contexts,
            snapshot.schema,
            output_schema,
            vreq.column,
            vreq.queries,
            k,
            vreq.metric,
            nprobes,
            vreq.refine_factor,
            batch=vreq.batch,
            flat_below=flat_below,
        )
        if treq is None:
            return _finish(targets, vector)
    if treq is not None:
        text = _text(targets.contexts, targets.scan, treq.column, treq.definition, treq.text, k)
        if vector is None:
            return _finish(targets, text)
    assert vector is not None and text is not None
    fused = merge.rrf(vector, text, k, _hit_schema(output_schema, "_distance", "_bm25", "_score"))
    return _finish(targets, fused)


def _one_partition(
    targets: Targets,
    schema: Schema,
    vreq: VectorRequest,
    k: int,
    nprobes: int | None,
    flat_below: int | None,
) -> pa.Table:
    """A vector search of one partition (a tenant's search), the same rows and schema as
    ``vector_top_k`` + ``_finish`` with less work per search.

    Lance returns the partition's top k nearest first; when no two distances tie
    (the merge's order is then Lance's) and the leaf's columns need no mapping,
    they become the result as they are, with the partition values added.
    """
    ctx = targets.contexts[0]
    output_schema = targets.scan.output_schema
    name = _leaf_name(ctx, schema, vreq.column)
    if ctx.empty or name is None:
        return _finish(targets, _hit_schema(output_schema, "_distance").empty_table())
    (table,) = memory.leaf_nearest(
        ctx,
        name,
        vreq.queries[:1],
        k,
        vreq.metric,
        nprobes,
        vreq.refine_factor,
        flat_below=flat_below,
        lance_flat_below=default_flat_below(vreq.queries.shape[1]),
    )
    column = table.column("_distance")
    distances = column.to_pylist()
    if (
        not ctx.direct
        or column.null_count
        or any(b <= a for a, b in zip(distances, distances[1:], strict=False))
    ):  # ties (or a mapping): the general merge orders them by row id
        best = merge.top_k(
            [nearest_hits(ctx, table)],
            k,
            "_distance",
            False,
            _hit_schema(output_schema, "_distance"),
        )
        return _finish(targets, best)
    n = len(distances)
    return pa.Table.from_arrays(
        [
            *(table.column(f.name) for f in output_schema),
            pa.array(distances, pa.float64()),
            *(
                pa.repeat(pa.scalar(v, f.type), n)
                for f, v in zip(targets.fields, targets.values[0], strict=True)
            ),
        ],
        schema=targets.result_schema("_distance"),
    )


def _leaf_name(ctx: LeafContext, schema: Schema, column: str) -> str | None:
    return ctx.leaf_column(schema.field_id(column))


def vector_top_k(
    contexts: Sequence[LeafContext],
    schema: Schema,
    output_schema: pa.Schema,
    column: str,
    queries: np.ndarray,
    k: int,
    metric: str,
    nprobes: int | None,
    refine_factor: int | None,
    *,
    batch: bool = True,
    flat_below: int | None = None,
) -> pa.Table:
    """The exact top ``k`` over ``contexts`` of each query vector (``queries``: 2-D).

    Columns: ``query_index`` (when ``batch``), ``output_schema``'s, ``_rowid``,
    ``_distance`` and ``_lp_leaf`` (the leaf ordinal, for ties and partition
    values). ``schema`` is the namespace schema (leaf columns are found by field
    id). Leaves of fewer than ``flat_below`` rows are searched exactly (flat),
    indexed or not, from memory where ``memory.usable``; None: the defaults of
    ``memory.leaf_nearest``. Used by ``search`` and by the Spark tasks of
    ``spark.search``.
    """
    hit_schema = _hit_schema(output_schema, "_distance")
    lance_flat_below = default_flat_below(queries.shape[1])

    def one(ctx: LeafContext) -> list[pa.Table]:
        name = _leaf_name(ctx, schema, column)
        if ctx.empty or name is None:  # no matching row, or no vectors in this leaf
            return []
        tables = memory.leaf_nearest(
            ctx,
            name,
            queries,
            k,
            metric,
            nprobes,
            refine_factor,
            flat_below=flat_below,
            lance_flat_below=lance_flat_below,
        )
        return [nearest_hits(ctx, t) for t in tables]

    per_leaf = _parallel(one, list(contexts))
    per_query = [[hits[q] for hits in per_leaf if hits] for q in range(len(queries))]
    if batch:
        return merge.top_k_per_query(per_query, k, hit_schema)
    return merge.top_k(per_query[0], k, "_distance", False, hit_schema)


def _text(
    contexts: list[LeafContext],
    scan: Scan,
    column: str,
    d: IndexDefinition,
    query: str,
    k: int,
) -> pa.Table:
    schema = _hit_schema(scan.output_schema, "_score")
    tokenizer = {p: v for p, v in d.params.items() if p in TOKENIZER_PARAMS}
    qtokens = set(bm25.tokens(query, tokenizer))

    def one(ctx: LeafContext) -> tuple[pa.Table, list[list[str]], bm25.CorpusStats] | None:
        name = _leaf_name(ctx, scan.snapshot.schema, column)
        if name is None:
            return None
        key = (ctx.ds.uri, ctx.ds.version, ctx.leaf.read_branch)
        hits, docs, stats = text_hits(ctx, name, query, qtokens, d, tokenizer, key)
        if ctx.empty:  # counts in the corpus, contributes no candidate
            return hits.slice(0, 0), [], stats
        return hits, docs, stats

    results = [r for r in _parallel(one, contexts) if r is not None]
    corpus = sum((r[2] for r in results), bm25.CorpusStats(0, 0, bm25.Counter()))
    scored = []
    for hits, docs, _ in results:
        if hits.num_rows:
            values = pa.array([bm25.score(doc, qtokens, corpus) for doc in docs], pa.float64())
            scored.append(hits.set_column(hits.schema.get_field_index("_score"), "_score", values))
    return merge.top_k(scored, k, "_score", True, schema)
