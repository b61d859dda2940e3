"""Hashing for ``bucket`` partition transforms: murmur3 over a canonical encoding.

The hash is MurmurHash3_x86_32 with seed 0, read as a signed int32, computed over
a *canonical encoding* of each value so that it does not change under type
promotion (int32 -> int64, float32 -> float64, timestamp[s] -> timestamp[us],
utf8 -> large_utf8, decimal(4,2) -> decimal(10,2), ...). The encoding matches
Apache Iceberg's bucket hash for every type Iceberg defines one for; see
docs/FORMAT.md ("Hashing") for the normative description and test vectors.

Canonical encoding (bytes that are hashed):

- integers (signed and unsigned, any width), bool (0/1), date32 (days): the value
  as an 8-byte little-endian int64 (a uint64 above the int64 range: its own
  8 little-endian bytes);
- date64: days since the epoch (floor of ms / 86400000) as int64;
- timestamp (any unit, any time zone): microseconds since the epoch of the UTC
  instant as int64 (floor division for ns);
- time32 / time64: microseconds since midnight as int64;
- float16 / float32 / float64: the value as float64 with -0.0 -> 0.0 and every NaN
  -> 0x7ff8000000000000, as its 8 little-endian bytes;
- utf8 / large_utf8 / string_view: the UTF-8 bytes;
- binary / large_binary / fixed_size_binary / binary_view (and uuid): raw bytes;
- decimal32/64/128/256: the unscaled integer as minimal big-endian two's
  complement bytes (Java ``BigInteger.toByteArray()``);
- dictionary arrays: the decoded values; extension arrays: their storage.

NULL hashes to NULL. ``murmur3_multi`` hashes the concatenation of the canonical
bytes of the non-NULL inputs of a row (NULL only if all inputs are NULL).
``bucket`` is ``abs(h) % N`` evaluated in int64 (so -2**31 is handled).

Integer arithmetic that does not fit int64 (e.g. seconds -> microseconds for
timestamps beyond +-292,000 years) wraps modulo 2**64, identically in these
vectorised kernels and in the pure-Python scalar reference encoder they are
tested against (``tests/hashing_reference.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import mmh3
import numpy as np
import pyarrow as pa

from lance_partitioned.format.hash_encoding import (
    AllNull,
    Encoded,
    FixedWidth,
    VariableWidth,
    encode,
    encode_array,
    encoded_length,
    encoded_validity,
    fixed_buffer,
    hash_type,
    validity,
)
from lance_partitioned.format.murmur3_kernels import (
    LONG_VALUE,
    hash_fixed_width,
    hash_streams,
    hash_variable_width,
)

__all__ = [
    "bucket",
    "bucket_of_hashes",
    "hash_type",
    "multi_bucket",
    "murmur3",
    "murmur3_multi",
]

_M32 = 0xFFFFFFFF
# Arrays are hashed in slices of _SLICE rows, so that temporaries stay small and
# cache resident.
_SLICE = 1 << 16


def _hash_rep(rep: Encoded) -> tuple[np.ndarray, np.ndarray | None]:
    """(uint32 hashes, validity) of a canonical representation."""
    if isinstance(rep, AllNull):
        return np.zeros(rep.length, np.uint32), np.zeros(rep.length, dtype=bool)
    if isinstance(rep, FixedWidth):
        return hash_fixed_width([(rep.values, None)], len(rep.values)), rep.valid
    return hash_variable_width(rep.data, rep.starts, rep.lengths), rep.valid


def _int32_array(values: np.ndarray, valid: np.ndarray | None) -> pa.Int32Array:
    values = np.ascontiguousarray(values).view(np.int32)
    n = len(values)
    if valid is None or bool(valid.all()):
        return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(values)])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    null_count = n - int(np.count_nonzero(valid))
    return pa.Array.from_buffers(pa.int32(), n, [bitmap, pa.py_buffer(values)], null_count)


def _slices(n: int) -> range:
    return range(0, n, _SLICE) if n else range(1)


def _join(parts: list[tuple[np.ndarray, np.ndarray | None]]) -> pa.Int32Array:
    if len(parts) == 1:
        return _int32_array(*parts[0])
    hashes = np.concatenate([h for h, _ in parts])
    if all(v is None for _, v in parts):
        return _int32_array(hashes, None)
    valid = np.concatenate([np.ones(len(h), bool) if v is None else v for h, v in parts])
    return _int32_array(hashes, valid)


def murmur3(array: pa.Array | pa.ChunkedArray) -> pa.Int32Array:
    """Vectorised murmur3 (signed int32) of every value; NULL where the input is NULL.

    A ChunkedArray yields one combined array."""
    if isinstance(array, pa.ChunkedArray):
        if array.num_chunks == 0:
            hash_type(array.type)
            return pa.array([], type=pa.int32())
        if array.num_chunks == 1:
            return murmur3(array.chunk(0))
        return pa.concat_arrays([murmur3(c) for c in array.chunks])
    if not isinstance(array, pa.Array):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, got {type(array).__name__}")
    if isinstance(array.type, pa.BaseExtensionType):
        return murmur3(array.storage)
    if pa.types.is_dictionary(array.type):
        if len(array.dictionary) > len(array):  # cheaper to decode the few values used
            return murmur3(array.dictionary_decode())
        # Hash each dictionary entry once, then gather.
        return murmur3(array.dictionary).take(array.indices)
    # Work in slices so every temporary stays small (and cache resident).
    parts = [_hash_rep(encode_array(array.slice(s, _SLICE))) for s in _slices(len(array))]
    return _join(parts)


def murmur3_multi(arrays: Sequence[pa.Array | pa.ChunkedArray]) -> pa.Int32Array:
    """Row-wise murmur3 of the concatenated canonical bytes of the non-NULL inputs.

    NULL only where every input is NULL."""
    if len(arrays) == 0:
        raise ValueError("murmur3_multi needs at least one array")
    for a in arrays:
        if not isinstance(a, (pa.Array, pa.ChunkedArray)):
            raise TypeError(f"expected pyarrow Arrays or ChunkedArrays, got {type(a).__name__}")
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError(f"arrays have different lengths: {[len(a) for a in arrays]}")
    parts = [_hash_multi_slice([a.slice(s, _SLICE) for a in arrays]) for s in _slices(n)]
    return _join(parts)


def _hash_multi_slice(
    arrays: list[pa.Array | pa.ChunkedArray],
) -> tuple[np.ndarray, np.ndarray | None]:
    reps = [encode(a) for a in arrays]
    n = encoded_length(reps[0])
    any_valid: np.ndarray | None = np.zeros(n, dtype=bool)
    for r in reps:
        v = encoded_validity(r)
        if v is None:
            any_valid = None
            break
        any_valid |= v
    present = [r for r in reps if not isinstance(r, AllNull)]
    if not present:
        return np.zeros(n, np.uint32), np.zeros(n, dtype=bool)
    if all(isinstance(r, FixedWidth) for r in present):
        hashes = hash_fixed_width([(r.values, r.valid) for r in present], n)  # type: ignore[union-attr]
        return hashes, any_valid
    return _hash_multi_var(present, n), any_valid


def _hash_multi_var(reps: list[Encoded], n: int) -> np.ndarray:
    """murmur3_multi when some column is variable width (uint32 hashes)."""
    streams = []
    for r in reps:
        if isinstance(r, FixedWidth):
            data = np.ascontiguousarray(r.values).view(np.uint8)
            starts = np.arange(n, dtype=np.int64) * 8
            lengths = np.full(n, 8, dtype=np.int64)
        else:
            assert isinstance(r, VariableWidth)
            data = r.data
            starts = r.starts.astype(np.int64, copy=False)
            lengths = r.lengths.astype(np.int64, copy=True)
        if r.valid is not None:
            lengths = np.where(r.valid, lengths, 0)
        streams.append((data, starts, lengths))
    is_long = np.zeros(n, dtype=bool)
    for r, (_, _, lengths) in zip(reps, streams, strict=True):
        if isinstance(r, VariableWidth):
            is_long |= lengths > LONG_VALUE
    if not is_long.any():
        return hash_streams(streams, n)
    out = np.empty(n, dtype=np.uint32)
    for i in np.flatnonzero(is_long).tolist():
        row = b"".join(
            data[starts[i] : starts[i] + lengths[i]].tobytes() for data, starts, lengths in streams
        )
        out[i] = mmh3.mmh3_32_sintdigest(row, 0) & _M32
    short = np.flatnonzero(~is_long)
    if len(short):
        out[short] = hash_streams([(d, s[short], ln[short]) for d, s, ln in streams], len(short))
    return out


def _check_num_buckets(num_buckets: int) -> None:
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)):
        raise TypeError(f"num_buckets must be an int, got {num_buckets!r}")
    if not 0 < num_buckets <= 2**31 - 1:
        raise ValueError(f"num_buckets must be in [1, 2**31 - 1], got {num_buckets}")


def bucket_of_hashes(hashes: pa.Int32Array | pa.ChunkedArray, num_buckets: int) -> pa.Int32Array:
    """``abs(h) % num_buckets`` evaluated in int64 (so h = -2**31 is fine), as int32."""
    _check_num_buckets(num_buckets)
    if isinstance(hashes, pa.ChunkedArray):
        hashes = pa.concat_arrays(hashes.chunks) if hashes.num_chunks else pa.array([], pa.int32())
    if hashes.type != pa.int32():
        raise TypeError(f"expected int32 hashes, got {hashes.type}")
    h = fixed_buffer(hashes, np.int32)
    # abs() in int32 wraps -2**31 to itself, whose uint32 reading is 2**31: exactly
    # abs(h) evaluated in int64, and every abs(h) fits uint32, where % is cheap.
    magnitude = np.abs(h).view(np.uint32)
    b = (magnitude % np.uint32(num_buckets)).view(np.int32)
    return _int32_array(b, validity(hashes))


def bucket(array: pa.Array | pa.ChunkedArray, num_buckets: int) -> pa.Int32Array:
    """Bucket number ``abs(murmur3(v)) % num_buckets`` of every value (int32, NULL stays NULL)."""
    _check_num_buckets(num_buckets)
    return bucket_of_hashes(murmur3(array), num_buckets)


def multi_bucket(arrays: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int) -> pa.Int32Array:
    """Bucket number ``abs(murmur3_multi(row)) % num_buckets`` of every row (int32)."""
    _check_num_buckets(num_buckets)
    return bucket_of_hashes(murmur3_multi(arrays), num_buckets)
