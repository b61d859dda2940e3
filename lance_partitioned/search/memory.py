"""Exact vector search of small partitions from memory, at pinned versions.

A leaf read at a numeric version never changes, so the vectors Lance's flat
search would scan can be held in the process: the rows with a non-NULL
vector, minus deleted rows, with their row ids. A search of such a leaf that
needs no prefilter then computes its distances with numpy instead of going
through Lance's scanner (which costs about 4 ms per query even for an exact
scan of 10,000 × 128), and fetches the requested columns of the k nearest
rows by their offsets among the leaf's live rows (``LanceDataset.take``).
The answer is Lance's flat search's: the same rows, with the distances Lance
defines (``l2``: squared Euclidean; ``cosine``: 1 - cos; ``dot``: 1 - dot)
rounded to float32, rows whose distance is NaN left out as Lance leaves them
out (NaN components, a zero vector under ``cosine``), ties ordered by row id.

How a distance is computed: a float32 pass over all rows (``np.vecdot``,
which does not start BLAS threads: on a loaded machine threaded BLAS was 30×
slower) gives each row's distance within a rigorous rounding bound; every row
that could be among the k nearest by that bound is then recomputed in
float64 and rounded to float32. So the rows and their order do not depend on
the float32 pass's rounding.

Held: at most ``budget()`` bytes (``LP_SEARCH_MEMORY_BYTES``, default 512 MiB;
``set_budget``), least recently used first out; a leaf whose vectors would
not fit is searched by Lance. Leaves read at a tag or a branch head (which
can move), leaves with a residual prefilter, and vector columns that are not
float32 are searched by Lance as before. A leaf holding infinite values or
NULL components inside a vector is searched by Lance as well (their
distances follow Lance's own arithmetic). docs/SEARCH.md §3.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog.leaf_open import is_pinned
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache
from lance_partitioned.search.query import LeafContext, nearest_rows

BUDGET_ENV = "LP_SEARCH_MEMORY_BYTES"
DEFAULT_BUDGET = 512 * 1024 * 1024

# A partition is searched exactly from memory, even when it has a vector index,
# while rows × dimension is below this (and its vectors fit the budget): there
# the in-memory scan measured faster than probing the index, and it is exact.
# benchmarks/search_flat_bench.py, benchmarks/results/search_flat.md; docs/SEARCH.md §3.
MEMORY_FLAT_BELOW_VALUES = 50_000 * 128

_U32 = 2.0**-24  # float32 unit roundoff
ENTRY_OVERHEAD = 1024  # bytes counted per held leaf besides its arrays


def default_memory_flat_below(dim: int) -> int:
    """The default ``flat_below`` (rows) of a leaf searched from memory, at ``dim``."""
    return MEMORY_FLAT_BELOW_VALUES // max(1, dim)


_budget_override: int | None = None


def budget() -> int:
    """The byte budget of held vectors: ``set_budget``'s value, else the
    ``LP_SEARCH_MEMORY_BYTES`` environment variable, else 512 MiB. 0 turns the
    memory path off."""
    if _budget_override is not None:
        return _budget_override
    raw = os.environ.get(BUDGET_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_BUDGET
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValueError(f"{BUDGET_ENV} must be a byte count, got {raw!r}") from exc
    if value < 0:
        raise ValueError(f"{BUDGET_ENV} must be >= 0, got {raw!r}")
    return value


def set_budget(nbytes: int | None) -> None:
    """Set the byte budget for this process (None: back to the environment/default);
    entries beyond it are dropped at once."""
    global _budget_override
    if nbytes is not None and (
        isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0
    ):
        raise ValueError(f"the memory budget must be an integer >= 0 (bytes), got {nbytes!r}")
    _budget_override = nbytes
    _CACHE.resize(budget())


@dataclass(frozen=True)
class Vectors:
    """A leaf's searchable vectors: ``matrix`` (n × dim float32), their ``row_ids``
    (uint64, Lance's ``_rowid``), ``positions`` (int32 or int64: the row's offset
    among the leaf's live rows, what ``LanceDataset.take`` takes), ``sq`` (float32
    squared L2 norms), ``inv`` (float32 1 / norm; NaN for a zero vector), the
    largest norm and the number of non-zero vectors. ``matrix`` None: the leaf
    holds values whose distances this module does not reproduce (searched by
    Lance). 4 × dim + 20 bytes a row (``entry_bytes``)."""

    matrix: np.ndarray | None
    row_ids: np.ndarray
    positions: np.ndarray
    sq: np.ndarray
    inv: np.ndarray
    max_norm: float = 0.0
    nonzero: int = 0

    @property
    def nbytes(self) -> int:
        arrays = (self.matrix, self.row_ids, self.positions, self.sq, self.inv)
        # + a fixed cost per entry, so that entries of leaves searched by Lance
        # (no matrix) are bounded in number too
        return ENTRY_OVERHEAD + sum(0 if a is None else a.nbytes for a in arrays)


def _unsupported() -> Vectors:
    empty = np.zeros(0)
    return Vectors(None, empty.astype(np.uint64), empty.astype(np.int64), empty, empty)


# Held vectors by leaf version and column, least recently used out beyond ``budget()``
# (its value is read on every load: the environment may change it).
_CACHE: BoundedCache = caches.register(
    "search.memory.vectors", BoundedCache(max_bytes=DEFAULT_BUDGET)
)


def entry_bytes(rows: int, dim: int) -> int:
    """The bytes a leaf of ``rows`` vectors of ``dim`` float32 takes when held."""
    offsets = 8 if rows >= 2**31 else 4
    return ENTRY_OVERHEAD + rows * (4 * dim + 8 + offsets + 4 + 4)


def held() -> tuple[int, int]:
    """(entries, bytes) held now."""
    return len(_CACHE), _CACHE.nbytes


def clear() -> None:
    """Drop every held leaf."""
    _CACHE.clear()


def load(ds: lance.LanceDataset, column: str) -> Vectors:
    """The rows Lance's flat search scans: non-NULL vectors of live rows, with row ids."""
    t = ds.to_table(columns=[column], with_row_id=True)  # in order: offsets are positions
    positions = np.arange(t.num_rows, dtype=np.int32 if t.num_rows < 2**31 else np.int64)
    keep = pc.is_valid(t.column(column)).to_numpy(zero_copy_only=False)
    vec = t.column(column).filter(pa.array(keep)).combine_chunks()
    positions = positions[keep]
    dim = vec.type.list_size
    row_ids = t.column("_rowid").to_numpy()[keep].astype(np.uint64)
    values = vec.flatten()
    if values.null_count:  # NULL components: Lance's arithmetic on them is its own
        return _unsupported()
    matrix = np.ascontiguousarray(
        values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dim)
    )
    finite = np.isfinite(matrix)
    if not finite.all():
        nan_rows = np.isnan(matrix).any(axis=1)
        if (~finite[~nan_rows]).any():  # infinities: Lance's inf/NaN arithmetic
            return _unsupported()
        # a NaN component makes every distance NaN, and Lance leaves such rows out
        matrix = np.ascontiguousarray(matrix[~nan_rows])
        row_ids, positions = row_ids[~nan_rows], positions[~nan_rows]
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64))
    max_norm = float(norms.max()) if norms.size else 0.0
    if max_norm > 1e18:  # squares near float32's range
        return _unsupported()
    with np.errstate(divide="ignore"):
        inv = np.where(norms > 0, 1.0 / norms, np.nan).astype(np.float32)
    sq = (norms * norms).astype(np.float32)
    return Vectors(matrix, row_ids, positions, sq, inv, max_norm, int(np.count_nonzero(norms)))


def vectors(key: Hashable, ds: lance.LanceDataset, column: str) -> Vectors:
    """``load(ds, column)``, held under ``key`` within the budget (least recently used out)."""
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    entry = load(ds, column)
    _CACHE.resize(budget())
    _CACHE.put(key, entry, entry.nbytes)  # not kept when larger than the budget
    return entry


def top_k(entry: Vectors, q: np.ndarray, k: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(indexes into ``entry``, float32 distances) of the ``k`` nearest rows to ``q``,
    nearest first, ties by row id; rows whose distance is NaN are left out.

    A float32 pass ranks every row by a coarse score within ``bound`` of its
    exact value (the rounding error of a float32 dot product of ``dim`` terms,
    gamma = dim·u / (1 - dim·u), and of the few operations after it, doubled);
    the rows that can be among the k nearest by that bound are recomputed in
    float64, rounded to float32 and ordered by (distance, row id).
    """
    x = entry.matrix
    assert x is not None
    n, dim = x.shape
    q32 = np.ascontiguousarray(q, dtype=np.float32)
    q64 = q32.astype(np.float64)
    nq = float(np.sqrt(q64 @ q64))
    if n == 0 or (metric == "cosine" and nq == 0.0):  # a zero query: every cosine NaN
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    slack = 2.0 * (dim * _U32 / (1 - dim * _U32) + 6 * _U32)
    dots = np.vecdot(x, q32)  # no BLAS threads: threaded BLAS was 30× slower under load
    if metric == "l2":
        coarse = entry.sq - 2.0 * dots + np.float32(nq * nq)
        bound = slack * (entry.max_norm + nq) ** 2
    elif metric == "dot":
        coarse = -dots  # 1 - dot, less the constant
        bound = slack * entry.max_norm * nq
    elif metric == "cosine":
        coarse = -(dots * entry.inv) * np.float32(1.0 / nq)  # NaN for a zero vector
        bound = slack
    else:
        raise ValueError(f"unknown metric {metric!r}")
    live = n if metric != "cosine" else entry.nonzero
    if live > k:
        kth = float(np.partition(coarse, k - 1)[k - 1])  # NaN sorts last
        # every row whose exact score can be <= the k-th upper bound, and those that
        # round to the same float32 distance (ties, ordered by row id below)
        t = kth + 2.0 * bound
        t += 4 * _U32 * (1.0 + abs(t))
        cand = np.flatnonzero(coarse <= t)
    else:
        cand = np.arange(n) if metric != "cosine" else np.flatnonzero(~np.isnan(entry.inv))
    exact = _exact(x[cand].astype(np.float64), q64, nq, metric)
    dist = exact.astype(np.float32)
    order = np.lexsort((entry.row_ids[cand], dist))[:k]
    return cand[order], dist[order]


def _exact(x: np.ndarray, q: np.ndarray, nq: float, metric: str) -> np.ndarray:
    """Lance's distance of every row of ``x`` to ``q``, in float64."""
    if metric == "l2":
        d = x - q
        return np.einsum("ij,ij->i", d, d)
    dots = np.einsum("ij,j->i", x, q)
    if metric == "dot":
        return 1.0 - dots
    return 1.0 - dots / (np.sqrt(np.einsum("ij,ij->i", x, x)) * nq)


def usable(ctx: LeafContext, column: str) -> bool:
    """Whether ``ctx``'s leaf can be searched from memory: pinned at a number, no
    prefilter, a float32 vector column, and its vectors would fit the budget."""
    if ctx.prefilter is not None or ctx.empty or not is_pinned(ctx.leaf):
        return False
    t = ctx.ds.schema.field(column).type
    if not pa.types.is_fixed_size_list(t) or t.value_type != pa.float32():
        return False
    return entry_bytes(ctx.rows, t.list_size) <= budget()


def _key(ctx: LeafContext, column: str) -> tuple[Any, ...]:
    return (ctx.ds.uri, ctx.leaf.version_ref(), ctx.ds.version, column)


def memory_rows(
    ctx: LeafContext, column: str, queries: np.ndarray, k: int, metric: str
) -> list[pa.Table] | None:
    """For each query, the table Lance's flat search (``query.nearest_rows`` with
    ``flat=True``) returns: the leaf's output columns, ``_distance`` (float32) and
    ``_rowid``, nearest first. None when the leaf's vectors are not held in the
    form this module searches (the caller asks Lance)."""
    entry = vectors(_key(ctx, column), ctx.ds, column)
    if entry.matrix is None:
        return None
    cols = list(ctx.mapping.leaf_columns)
    out = []
    for q in queries:
        pos, dist = top_k(entry, q, k, metric)
        ids = entry.row_ids[pos]
        if not cols:  # Lance refuses to take no columns
            arrays: list[Any] = []
        elif len(ids):
            rows = ctx.ds.take(entry.positions[pos], columns=cols)
            arrays = [rows.column(c) for c in cols]
        else:
            arrays = list(ctx.ds.schema.empty_table().select(cols).columns)
        arrays += [pa.array(dist, pa.float32()), pa.array(ids, pa.uint64())]
        out.append(pa.Table.from_arrays(arrays, names=[*cols, "_distance", "_rowid"]))
    return out


def leaf_nearest(
    ctx: LeafContext,
    column: str,
    queries: np.ndarray,
    k: int,
    metric: str,
    nprobes: int | None,
    refine_factor: int | None,
    *,
    flat_below: int | None,
    lance_flat_below: int,
) -> list[pa.Table]:
    """The leaf's top ``k`` for each query, as Lance returns them (``query.nearest_rows``).

    ``flat_below`` None (the default): a leaf searchable from memory (``usable``)
    with fewer than ``default_memory_flat_below`` rows is searched from memory;
    otherwise a leaf under ``lance_flat_below`` rows is searched flat by Lance,
    and the rest through their index. A given ``flat_below`` bounds both: a leaf
    under it is searched flat (from memory where usable), the others by index.
    """
    dim = queries.shape[1]
    mem = usable(ctx, column)
    if flat_below is None:
        limit = default_memory_flat_below(dim) if mem else lance_flat_below
    else:
        limit = flat_below
    flat = ctx.rows < limit
    if flat and mem:
        tables = memory_rows(ctx, column, queries, k, metric)
        if tables is not None:
            return tables
        if flat_below is None:
            flat = ctx.rows < lance_flat_below
    return [
        nearest_rows(ctx, column, q, k, metric, nprobes, refine_factor, flat=flat) for q in queries
    ]
