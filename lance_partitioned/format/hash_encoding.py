"""The canonical encoding of Arrow arrays that ``hashing`` hashes, as numpy arrays.

``encode`` turns an array into one of three representations: every value 8 bytes
(``FixedWidth``: integers, bool, dates, timestamps, times, floats), variable-width
byte strings (``VariableWidth``: strings, binary, decimals' minimal big-endian
two's complement), or ``AllNull``. The per-type rules are listed in
``lance_partitioned.format.hashing`` and docs/FORMAT.md ("Hashing"); the kernels
that hash these bytes are in ``murmur3_kernels``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lance_partitioned.format.types import TypeFamily, family_of

_MS_PER_DAY = 86_400_000
_CANONICAL_NAN_BITS = 0x7FF8000000000000

# The families with a canonical encoding (after unwrapping extensions and dictionaries).
_HASHABLE = frozenset(
    {
        TypeFamily.NULL,
        TypeFamily.BOOLEAN,
        TypeFamily.INTEGER,
        TypeFamily.FLOAT,
        TypeFamily.DECIMAL,
        TypeFamily.STRING,
        TypeFamily.BINARY,
        TypeFamily.DATE,
        TypeFamily.TIMESTAMP,
        TypeFamily.TIME,
    }
)


def hash_type(t: pa.DataType) -> pa.DataType:
    """The type whose canonical encoding applies (extension -> storage, dictionary ->
    value type); TypeError if hashing is not defined for it."""
    while True:
        if isinstance(t, pa.BaseExtensionType):
            t = t.storage_type
        elif pa.types.is_dictionary(t):
            t = t.value_type
        else:
            break
    if family_of(t) in _HASHABLE:
        return t
    raise TypeError(f"hashing is not defined for Arrow type {t}")


@dataclass
class FixedWidth:
    """Every value is canonically 8 bytes: ``values`` (int64 bit patterns)."""

    values: np.ndarray  # int64, length n
    valid: np.ndarray | None  # bool, None = all valid


@dataclass
class VariableWidth:
    """Value i is ``data[starts[i] : starts[i] + lengths[i]]``."""

    data: np.ndarray  # uint8
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    valid: np.ndarray | None


@dataclass
class AllNull:
    """Every one of ``length`` values is NULL."""

    length: int


Encoded = FixedWidth | VariableWidth | AllNull


def validity(arr: pa.Array) -> np.ndarray | None:
    """The validity bitmap of ``arr`` as a bool array, or None when no value is NULL."""
    if arr.null_count == 0:
        return None
    n = len(arr)
    buf = arr.buffers()[0]
    if buf is None:  # pragma: no cover - null_count > 0 implies a bitmap here
        return np.zeros(n, dtype=bool)
    start = arr.offset
    first = start // 8
    last = (start + n + 7) // 8
    bits = np.frombuffer(buf, dtype=np.uint8, count=last - first, offset=first)
    lo = start - first * 8
    return np.unpackbits(bits, bitorder="little")[lo : lo + n].view(bool)


def fixed_buffer(arr: pa.Array, dtype: np.dtype | type) -> np.ndarray:
    """The values buffer of a fixed-width array as numpy ``dtype`` (no copy; garbage under NULLs)."""
    dtype = np.dtype(dtype)
    buf = arr.buffers()[1]
    n = len(arr)
    if buf is None or n == 0:
        return np.zeros(n, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=n, offset=arr.offset * dtype.itemsize)


def _to_micros(v: np.ndarray, unit: str) -> np.ndarray:
    v = v.astype(np.int64, copy=False)
    if unit == "s":
        return v * np.int64(1_000_000)
    if unit == "ms":
        return v * np.int64(1_000)
    if unit == "us":
        return v
    if unit == "ns":
        return np.floor_divide(v, np.int64(1_000))
    raise ValueError(f"unknown time unit {unit!r}")  # pragma: no cover


def _canonical_floats(f: np.ndarray) -> np.ndarray:
    f = f.astype(np.float64)  # always a fresh copy
    f[f == 0.0] = 0.0
    bits = f.view(np.int64)
    bits[np.isnan(f)] = _CANONICAL_NAN_BITS
    return bits


def _decimal_rep(arr: pa.Array, valid: np.ndarray | None) -> VariableWidth:
    width = arr.type.byte_width
    n = len(arr)
    buf = arr.buffers()[1]
    if n == 0 or buf is None:
        z = np.zeros(n, dtype=np.int64)
        return VariableWidth(np.zeros(0, np.uint8), z, z.copy(), valid)
    le = np.frombuffer(buf, dtype=np.uint8, count=n * width, offset=arr.offset * width)
    be = le.reshape(n, width)[:, ::-1]
    sign = be[:, 0] >> 7
    fill = sign * np.uint8(0xFF)
    # Leading byte i is redundant if it is pure sign extension and the next byte
    # carries the same sign bit; strip the longest run of redundant leading bytes.
    redundant = (be[:, :-1] == fill[:, None]) & ((be[:, 1:] >> 7) == sign[:, None])
    n_red = np.where(redundant.all(axis=1), width - 1, np.argmin(redundant, axis=1))
    lengths = (width - n_red).astype(np.int64)
    keep = np.arange(width)[None, :] >= n_red[:, None]
    data = np.ascontiguousarray(be[keep])
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return VariableWidth(data, starts, lengths, valid)


def _binary_rep(arr: pa.Array, valid: np.ndarray | None, offset_dtype: type) -> VariableWidth:
    n = len(arr)
    bufs = arr.buffers()
    itemsize = np.dtype(offset_dtype).itemsize
    if n == 0 or bufs[1] is None:
        z = np.zeros(n, dtype=np.int64)
        return VariableWidth(np.zeros(0, np.uint8), z, z.copy(), valid)
    offsets = np.frombuffer(bufs[1], dtype=offset_dtype, count=n + 1, offset=arr.offset * itemsize)
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return VariableWidth(data, offsets[:-1], np.diff(offsets), valid)


def _take_rep(rep: Encoded, indices: np.ndarray, valid: np.ndarray | None, n: int) -> Encoded:
    """``rep`` gathered by dictionary ``indices`` (garbage where ``valid`` is False)."""
    if isinstance(rep, AllNull):
        return AllNull(n)
    if valid is not None:
        indices = np.where(valid, indices, 0)
    indices = indices.astype(np.intp, copy=False)
    out_valid = valid
    if rep.valid is not None:
        dv = rep.valid[indices]
        out_valid = dv if out_valid is None else (out_valid & dv)
    if isinstance(rep, FixedWidth):
        return FixedWidth(rep.values[indices], out_valid)
    return VariableWidth(rep.data, rep.starts[indices], rep.lengths[indices], out_valid)


def encode_array(arr: pa.Array) -> Encoded:
    """Canonical representation of one (non-chunked) array."""
    t = arr.type
    n = len(arr)
    if isinstance(t, pa.BaseExtensionType):
        return encode_array(arr.storage)
    if pa.types.is_null(t):
        return AllNull(n)
    if pa.types.is_dictionary(t):
        if len(arr.dictionary) > n:  # cheaper to decode the few values used
            return encode_array(arr.dictionary_decode())
        indices = arr.indices
        idx = fixed_buffer(indices, indices.type.to_pandas_dtype())
        if len(arr.dictionary) == 0:  # then every index is NULL
            hash_type(t.value_type)
            return AllNull(n)
        return _take_rep(encode_array(arr.dictionary), idx, validity(indices), n)
    valid = validity(arr)
    if pa.types.is_boolean(t):
        buf = arr.buffers()[1]
        if n == 0 or buf is None:
            return FixedWidth(np.zeros(n, np.int64), valid)
        first = arr.offset // 8
        last = (arr.offset + n + 7) // 8
        bits = np.frombuffer(buf, dtype=np.uint8, count=last - first, offset=first)
        lo = arr.offset - first * 8
        return FixedWidth(
            np.unpackbits(bits, bitorder="little")[lo : lo + n].astype(np.int64), valid
        )
    if pa.types.is_integer(t):
        v = fixed_buffer(arr, t.to_pandas_dtype())
        if v.dtype == np.uint64:
            return FixedWidth(v.view(np.int64), valid)
        return FixedWidth(v.astype(np.int64, copy=False), valid)
    if pa.types.is_date32(t):
        return FixedWidth(fixed_buffer(arr, np.int32).astype(np.int64), valid)
    if pa.types.is_date64(t):
        return FixedWidth(
            np.floor_divide(fixed_buffer(arr, np.int64), np.int64(_MS_PER_DAY)), valid
        )
    if pa.types.is_timestamp(t):
        return FixedWidth(_to_micros(fixed_buffer(arr, np.int64), t.unit), valid)
    if pa.types.is_time32(t):
        return FixedWidth(_to_micros(fixed_buffer(arr, np.int32), t.unit), valid)
    if pa.types.is_time64(t):
        return FixedWidth(_to_micros(fixed_buffer(arr, np.int64), t.unit), valid)
    if pa.types.is_float16(t):
        return FixedWidth(_canonical_floats(fixed_buffer(arr, np.float16)), valid)
    if pa.types.is_float32(t):
        return FixedWidth(_canonical_floats(fixed_buffer(arr, np.float32)), valid)
    if pa.types.is_float64(t):
        return FixedWidth(_canonical_floats(fixed_buffer(arr, np.float64)), valid)
    if pa.types.is_decimal(t):
        return _decimal_rep(arr, valid)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return _binary_rep(arr, valid, np.int32)
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return _binary_rep(arr, valid, np.int64)
    if pa.types.is_string_view(t):
        return encode_array(arr.cast(pa.large_string()))
    if pa.types.is_binary_view(t):
        return encode_array(arr.cast(pa.large_binary()))
    if pa.types.is_fixed_size_binary(t):
        width = t.byte_width
        buf = arr.buffers()[1]
        data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
        starts = (np.arange(n, dtype=np.int64) + arr.offset) * width
        return VariableWidth(data, starts, np.full(n, width, dtype=np.int64), valid)
    raise TypeError(f"hashing is not defined for Arrow type {t}")


def encode(array: pa.Array | pa.ChunkedArray) -> Encoded:
    """Canonical representation of an array or chunked array (chunks concatenated)."""
    if isinstance(array, pa.Array):
        return encode_array(array)
    if not isinstance(array, pa.ChunkedArray):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, got {type(array).__name__}")
    reps = [encode_array(c) for c in array.chunks]
    if not reps:
        hash_type(array.type)
        return AllNull(0)
    if len(reps) == 1:
        return reps[0]
    return concat_encoded(reps)


def encoded_length(rep: Encoded) -> int:
    """The number of values in ``rep``."""
    if isinstance(rep, AllNull):
        return rep.length
    if isinstance(rep, FixedWidth):
        return len(rep.values)
    return len(rep.starts)


def encoded_validity(rep: Encoded) -> np.ndarray | None:
    """Validity as a bool array, or None when every value is valid."""
    if isinstance(rep, AllNull):
        return np.zeros(rep.length, dtype=bool)
    return rep.valid


def concat_encoded(reps: list[Encoded]) -> Encoded:
    lengths = [encoded_length(r) for r in reps]
    total = sum(lengths)
    if all(isinstance(r, AllNull) for r in reps):
        return AllNull(total)
    valids = [encoded_validity(r) for r in reps]
    if all(v is None for v in valids):
        valid = None
    else:
        valid = np.concatenate(
            [np.ones(n, bool) if v is None else v for v, n in zip(valids, lengths, strict=True)]
        )
    kinds = {type(r) for r in reps if not isinstance(r, AllNull)}
    if kinds == {FixedWidth}:
        values = np.concatenate(
            [
                np.zeros(n, np.int64) if isinstance(r, AllNull) else r.values
                for r, n in zip(reps, lengths, strict=True)
            ]
        )
        return FixedWidth(values, valid)
    if kinds != {VariableWidth}:  # pragma: no cover - chunks share one type
        raise TypeError("chunks of a chunked array have incompatible canonical encodings")
    datas, starts, lens = [], [], []
    base = 0
    for r, n in zip(reps, lengths, strict=True):
        if isinstance(r, AllNull):
            starts.append(np.zeros(n, np.int64))
            lens.append(np.zeros(n, np.int64))
            continue
        assert isinstance(r, VariableWidth)
        datas.append(r.data)
        starts.append(r.starts + base)
        lens.append(r.lengths)
        base += len(r.data)
    data = np.concatenate(datas) if datas else np.zeros(0, np.uint8)
    return VariableWidth(data, np.concatenate(starts), np.concatenate(lens), valid)
