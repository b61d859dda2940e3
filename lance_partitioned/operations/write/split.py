"""Splitting a record batch by partition key, vectorised.

Each partition column is coded (a small integer range by its offset from the
minimum while the combined codes stay radix-sortable, anything else by
dictionary encoding); the codes are combined into one
int64 per row, and one stable argsort groups the rows. The batch is reordered
with one ``take``, after which each partition's rows are one contiguous range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import SchemaError
from lance_partitioned.format import caches
from lance_partitioned.format.spec import partition_key


@caches.memoize("split.write_memory_pool", maxsize=1)
def write_memory_pool() -> pa.MemoryPool:
    """The Arrow pool a write's buffered rows are allocated from.

    jemalloc with its decay time set to 0 when this pyarrow has it: memory a
    flush frees goes back to the OS at once, which is what keeps a streaming
    write within its budget. Measured beside Arrow's default pool (mimalloc),
    TPC-H SF3 through 1 GiB: peak RSS 1,326 vs 1,451 MiB; a Spark task at
    ``maxBufferBytes`` 128 MiB: 448 vs 608 MiB, against a goal of 640
    (``benchmarks/results/memory.md``). It costs page faults instead: an
    in-memory SF1 write that never flushes early takes about 0.5 s more CPU.
    Setting the decay affects every jemalloc pool of the process, which only a
    process that chose jemalloc itself uses. Without jemalloc: the default pool.
    """
    try:
        pool = pa.jemalloc_memory_pool()
        pa.jemalloc_set_decay_ms(0)
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return pa.default_memory_pool()
    return pool


def chunk_memory_pool() -> pa.MemoryPool:
    """The Arrow pool a flush copies the chunks it hands Lance into: the C library's malloc.

    A chunk lives only until Lance has encoded it, and the next one is the same
    size. ``write_memory_pool`` (decay 0) would hand each freed chunk's pages
    back at once, so every chunk faults its pages in afresh (about 0.45 s per
    GiB on a VM that returns freed pages to its host); glibc's malloc keeps
    them for the next chunk (its mmap threshold rises to a chunk's size once
    one is freed, up to 32 MiB; chunks are at most 8 MiB) until
    ``release_freed_memory`` trims the heap after the round.
    TPC-H SF1 by month, interleaved with ``lance.write_dataset`` 8 times: median
    2.98 vs 3.15 s, 4.3 vs 4.9 CPU-s (``benchmarks/core_bench.py`` section 2).
    """
    return pa.system_memory_pool()


def write_memory_pools() -> list[pa.MemoryPool]:
    """Each Arrow pool a write allocates from, once: the default pool (reads,
    casts, Lance's conversions), ``write_memory_pool`` and ``chunk_memory_pool``.

    For counting what a write holds: ``pa.total_allocated_bytes`` counts the
    default pool only.
    """
    pools: dict[str, pa.MemoryPool] = {}
    for pool in (pa.default_memory_pool(), write_memory_pool(), chunk_memory_pool()):
        pools.setdefault(pool.backend_name, pool)
    return list(pools.values())


# Combined codes below this are sorted as 16-bit keys, which numpy radix-sorts:
# about 5x faster than a stable int64 sort.
RADIX_SORT_LIMIT = 1 << 15


def _codes(arr: pa.Array, offset_count_limit: int = 0) -> tuple[np.ndarray, int]:
    """Per-row codes in ``range(count)`` (NULL gets its own code) and the code count.

    Equal values get equal codes and distinct values distinct ones. An integer
    key whose count by offset (max - min + 1 values, plus NULL) is at most
    ``offset_count_limit`` is coded by its offset from the minimum: 5x cheaper
    than hashing it into a dictionary (TPC-H SF1, year and month: 0.011 vs 0.06
    CPU-s), though not dense. Anything else is dictionary-encoded (dense codes).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_integer(arr.type) and offset_count_limit > 1:
        bounds = pc.min_max(arr)
        lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
        # in Python ints: no overflow at the int64/uint64 extremes
        if lo is not None and hi - lo + 2 <= offset_count_limit:
            span = hi - lo + 1
            if arr.type.bit_width < 64:  # int8 -100..100 has offsets up to 200
                arr = arr.cast(pa.int64())
            offsets = pc.subtract(arr, pa.scalar(lo, arr.type))  # in [0, span): no wrap
            if offsets.null_count:
                offsets = offsets.fill_null(span)
            return offsets.to_numpy().astype(np.int64), span + 1
    enc = pc.dictionary_encode(arr, null_encoding="mask")
    n = len(enc.dictionary)
    codes = enc.indices.fill_null(n).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return codes, n + 1


def partition_ranges(
    batch: pa.RecordBatch, key_arrays: Sequence[pa.Array]
) -> tuple[pa.RecordBatch, list[tuple[tuple[Any, ...], int, int]]]:
    """``batch`` reordered so each partition's rows are contiguous, and
    ``(partition key tuple, start, length)`` for each distinct key, in the new order.

    Rows keep their input order within a partition. A batch of one partition is
    returned as it is (no copy); otherwise the reordered batch is one new
    allocation (one ``take``), and each partition's rows are a slice of it.

    Partitions come in the order of their codes (``_codes``), not of first
    appearance.

    >>> b = pa.record_batch({"k": [2, 1, 2]})
    >>> ordered, ranges = partition_ranges(b, [b.column("k")])
    >>> ordered.column("k").to_pylist(), ranges
    ([1, 2, 2], [((1,), 0, 1), ((2,), 1, 2)])
    """
    n = batch.num_rows
    if n == 0:
        return batch, []
    if not key_arrays:
        return batch, [((), 0, n)]
    combined = np.zeros(n, dtype=np.int64)
    for arr in key_arrays:
        # offset codes only while the combined codes stay radix-sortable: sparse
        # codes past that would cost a stable int64 sort where dense ones need not
        bound = int(combined.max()) + 1  # the combined codes so far are below it
        codes, card = _codes(arr, RADIX_SORT_LIMIT // bound)
        if bound * card >= 2**62:  # re-densify so the product cannot overflow
            combined = np.unique(combined, return_inverse=True)[1].astype(np.int64)
        combined = combined * card + codes
    if combined.min() == combined.max():
        return batch, [(_key_at(key_arrays, 0), 0, n)]
    if int(combined.max()) < RADIX_SORT_LIMIT:
        combined = combined.astype(np.int16)
    order = np.argsort(combined, kind="stable")
    bounds = np.flatnonzero(np.diff(combined[order])) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [n]))
    # One take of the whole batch; the buffers keep slices of it (``write_buffers``)
    # rather than a copy per partition: one copy fewer per row, and the copy
    # Lance needs is made beside its encoding thread when a partition is written.
    takeable = _without_views(batch)
    ordered = pc.take(takeable, pa.array(order), memory_pool=write_memory_pool())
    if takeable is not batch:
        ordered = ordered.cast(batch.schema)
    ranges = [
        (_key_at(key_arrays, int(order[s])), s, e - s)
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    return ordered, ranges


def _without_views(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with string_view/binary_view columns as string/binary.

    pyarrow has no ``take`` kernel for view types; callers cast the taken rows back.
    """
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    fields = [f.with_type(plain.get(f.type, f.type)) for f in batch.schema]
    target = pa.schema(fields, metadata=batch.schema.metadata)
    return batch if target.equals(batch.schema) else batch.cast(target)


def _key_at(key_arrays: Sequence[pa.Array], row: int) -> tuple[Any, ...]:
    try:
        return partition_key(arr[row].as_py() for arr in key_arrays)
    except OverflowError as exc:  # a date or timestamp beyond years 1-9999
        value = next(arr[row] for arr in key_arrays if _overflows(arr[row]))
        raise SchemaError(
            f"partition value {value!r} ({value.type}) is outside years 1-9999, which "
            "partition values (Python dates and datetimes, ISO text in __manifest) cannot "
            "hold; partition that column by year/month/day instead of its identity"
        ) from exc


def _overflows(scalar: pa.Scalar) -> bool:
    try:
        scalar.as_py()
    except OverflowError:
        return True
    return False
