"""Splitting a record batch by partition key, vectorised.

Each partition column is dictionary-encoded; the codes are combined into one
int64 per row, and one stable argsort groups the rows. The batch is reordered
group by group with ``take``, so every group is a compact batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.format.spec import partition_key


def _codes(arr: pa.Array) -> tuple[np.ndarray, pa.Array, int]:
    """Per-row codes (NULL gets its own code), the dictionary, and the code count."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    enc = pc.dictionary_encode(arr, null_encoding="mask")
    dictionary = enc.dictionary
    n = len(dictionary)
    idx = enc.indices
    codes = idx.fill_null(n).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return codes, dictionary, n + 1


def split_by_keys(
    batch: pa.RecordBatch, key_arrays: Sequence[pa.Array]
) -> Iterator[tuple[tuple[Any, ...], pa.RecordBatch]]:
    """Yield ``(partition key tuple, rows)`` for each distinct key in the batch."""
    n = batch.num_rows
    if n == 0:
        return
    if not key_arrays:
        yield (), batch
        return
    combined = np.zeros(n, dtype=np.int64)
    dicts = []
    for arr in key_arrays:
        codes, dictionary, card = _codes(arr)
        if int(combined.max()) * card >= 2**62:  # re-densify so the product cannot overflow
            combined = np.unique(combined, return_inverse=True)[1].astype(np.int64)
        combined = combined * card + codes
        dicts.append((dictionary, card))
    if combined.min() == combined.max():
        yield _key_at(key_arrays, 0), batch
        return
    if int(combined.max()) < 2**15:
        # numpy radix-sorts 16-bit keys: about 5x faster than a stable int64 sort
        combined = combined.astype(np.int16)
    order = np.argsort(combined, kind="stable")
    sorted_codes = combined[order]
    bounds = np.flatnonzero(np.diff(sorted_codes)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [n]))
    # One compact take per group (not slices of one reordered batch): Lance
    # writes compact arrays ~3x faster, and buffer accounting then measures
    # memory that a flush really frees.
    takeable = _without_views(batch)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        rows = takeable.take(pa.array(order[s:e]))
        if takeable is not batch:
            rows = rows.cast(batch.schema)
        yield _key_at(key_arrays, int(order[s])), rows


def _without_views(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with string_view/binary_view columns as string/binary.

    pyarrow has no ``take`` kernel for view types; callers cast the taken rows back.
    """
    plain = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    fields = [f.with_type(plain.get(f.type, f.type)) for f in batch.schema]
    target = pa.schema(fields, metadata=batch.schema.metadata)
    return batch if target.equals(batch.schema) else batch.cast(target)


def _key_at(key_arrays: Sequence[pa.Array], row: int) -> tuple[Any, ...]:
    return partition_key(arr[row].as_py() for arr in key_arrays)
