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

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass

import mmh3
import numpy as np
import pyarrow as pa

__all__ = [
    "bucket",
    "bucket_of_hashes",
    "hash_type",
    "multi_bucket",
    "murmur3",
    "murmur3_multi",
]

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_C3 = 0xE6546B64
_F1 = 0x85EBCA6B
_F2 = 0xC2B2AE35
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF

_MS_PER_DAY = 86_400_000
_US_PER_DAY = 86_400_000_000
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_CANONICAL_NAN_BITS = 0x7FF8000000000000

# Arrays are hashed in slices of _SLICE rows and the fixed-width kernel works on
# _CHUNK rows at a time, so that temporaries stay small and cache resident.
_SLICE = 1 << 16
_CHUNK = 1 << 14
# Variable-width values longer than this are hashed one by one with mmh3 (C);
# shorter ones go through the length-sorted numpy kernel.
_LONG_VALUE = 64

_U32_C1 = np.uint32(_C1)
_U32_C2 = np.uint32(_C2)
_U32_C3 = np.uint32(_C3)
_U32_F1 = np.uint32(_F1)
_U32_F2 = np.uint32(_F2)
_U32_5 = np.uint32(5)
_TAIL_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)


# --------------------------------------------------------------------------------------
# Which Arrow types hash
# --------------------------------------------------------------------------------------


def _is_bytes_like(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
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
    if (
        pa.types.is_null(t)
        or pa.types.is_boolean(t)
        or pa.types.is_integer(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_time(t)
        or pa.types.is_floating(t)
        or pa.types.is_decimal(t)
        or _is_bytes_like(t)
    ):
        return t
    raise TypeError(f"hashing is not defined for Arrow type {t}")


# --------------------------------------------------------------------------------------
# Canonical representation of arrays (numpy)
# --------------------------------------------------------------------------------------


@dataclass
class _Fixed:
    """Every value is canonically 8 bytes: ``values`` (int64 bit patterns)."""

    values: np.ndarray  # int64, length n
    valid: np.ndarray | None  # bool, None = all valid


@dataclass
class _Var:
    """Value i is ``data[starts[i] : starts[i] + lengths[i]]``."""

    data: np.ndarray  # uint8
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    valid: np.ndarray | None


@dataclass
class _AllNull:
    length: int


_Rep = _Fixed | _Var | _AllNull


def _validity(arr: pa.Array) -> np.ndarray | None:
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


def _fixed_buffer(arr: pa.Array, dtype: np.dtype | type) -> np.ndarray:
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


def _decimal_rep(arr: pa.Array, valid: np.ndarray | None) -> _Var:
    width = arr.type.byte_width
    n = len(arr)
    buf = arr.buffers()[1]
    if n == 0 or buf is None:
        z = np.zeros(n, dtype=np.int64)
        return _Var(np.zeros(0, np.uint8), z, z.copy(), valid)
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
    return _Var(data, starts, lengths, valid)


def _binary_rep(arr: pa.Array, valid: np.ndarray | None, offset_dtype: type) -> _Var:
    n = len(arr)
    bufs = arr.buffers()
    itemsize = np.dtype(offset_dtype).itemsize
    if n == 0 or bufs[1] is None:
        z = np.zeros(n, dtype=np.int64)
        return _Var(np.zeros(0, np.uint8), z, z.copy(), valid)
    offsets = np.frombuffer(bufs[1], dtype=offset_dtype, count=n + 1, offset=arr.offset * itemsize)
    offsets = offsets.astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return _Var(data, offsets[:-1], np.diff(offsets), valid)


def _take_rep(rep: _Rep, indices: np.ndarray, valid: np.ndarray | None, n: int) -> _Rep:
    """``rep`` gathered by dictionary ``indices`` (garbage where ``valid`` is False)."""
    if isinstance(rep, _AllNull):
        return _AllNull(n)
    if valid is not None:
        indices = np.where(valid, indices, 0)
    indices = indices.astype(np.intp, copy=False)
    out_valid = valid
    if rep.valid is not None:
        dv = rep.valid[indices]
        out_valid = dv if out_valid is None else (out_valid & dv)
    if isinstance(rep, _Fixed):
        return _Fixed(rep.values[indices], out_valid)
    return _Var(rep.data, rep.starts[indices], rep.lengths[indices], out_valid)


def _canonical(arr: pa.Array) -> _Rep:
    """Canonical representation of one (non-chunked) array."""
    t = arr.type
    n = len(arr)
    if isinstance(t, pa.BaseExtensionType):
        return _canonical(arr.storage)
    if pa.types.is_null(t):
        return _AllNull(n)
    if pa.types.is_dictionary(t):
        if len(arr.dictionary) > n:  # cheaper to decode the few values used
            return _canonical(arr.dictionary_decode())
        indices = arr.indices
        idx = _fixed_buffer(indices, indices.type.to_pandas_dtype())
        if len(arr.dictionary) == 0:  # then every index is NULL
            hash_type(t.value_type)
            return _AllNull(n)
        return _take_rep(_canonical(arr.dictionary), idx, _validity(indices), n)
    valid = _validity(arr)
    if pa.types.is_boolean(t):
        buf = arr.buffers()[1]
        if n == 0 or buf is None:
            return _Fixed(np.zeros(n, np.int64), valid)
        first = arr.offset // 8
        last = (arr.offset + n + 7) // 8
        bits = np.frombuffer(buf, dtype=np.uint8, count=last - first, offset=first)
        lo = arr.offset - first * 8
        return _Fixed(np.unpackbits(bits, bitorder="little")[lo : lo + n].astype(np.int64), valid)
    if pa.types.is_integer(t):
        v = _fixed_buffer(arr, t.to_pandas_dtype())
        if v.dtype == np.uint64:
            return _Fixed(v.view(np.int64), valid)
        return _Fixed(v.astype(np.int64, copy=False), valid)
    if pa.types.is_date32(t):
        return _Fixed(_fixed_buffer(arr, np.int32).astype(np.int64), valid)
    if pa.types.is_date64(t):
        return _Fixed(np.floor_divide(_fixed_buffer(arr, np.int64), np.int64(_MS_PER_DAY)), valid)
    if pa.types.is_timestamp(t):
        return _Fixed(_to_micros(_fixed_buffer(arr, np.int64), t.unit), valid)
    if pa.types.is_time32(t):
        return _Fixed(_to_micros(_fixed_buffer(arr, np.int32), t.unit), valid)
    if pa.types.is_time64(t):
        return _Fixed(_to_micros(_fixed_buffer(arr, np.int64), t.unit), valid)
    if pa.types.is_float16(t):
        return _Fixed(_canonical_floats(_fixed_buffer(arr, np.float16)), valid)
    if pa.types.is_float32(t):
        return _Fixed(_canonical_floats(_fixed_buffer(arr, np.float32)), valid)
    if pa.types.is_float64(t):
        return _Fixed(_canonical_floats(_fixed_buffer(arr, np.float64)), valid)
    if pa.types.is_decimal(t):
        return _decimal_rep(arr, valid)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return _binary_rep(arr, valid, np.int32)
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return _binary_rep(arr, valid, np.int64)
    if pa.types.is_string_view(t):
        return _canonical(arr.cast(pa.large_string()))
    if pa.types.is_binary_view(t):
        return _canonical(arr.cast(pa.large_binary()))
    if pa.types.is_fixed_size_binary(t):
        width = t.byte_width
        buf = arr.buffers()[1]
        data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
        starts = (np.arange(n, dtype=np.int64) + arr.offset) * width
        return _Var(data, starts, np.full(n, width, dtype=np.int64), valid)
    raise TypeError(f"hashing is not defined for Arrow type {t}")


def _canonical_any(array: pa.Array | pa.ChunkedArray) -> _Rep:
    """Canonical representation of an array or chunked array (chunks concatenated)."""
    if isinstance(array, pa.Array):
        return _canonical(array)
    if not isinstance(array, pa.ChunkedArray):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, got {type(array).__name__}")
    reps = [_canonical(c) for c in array.chunks]
    if not reps:
        hash_type(array.type)
        return _AllNull(0)
    if len(reps) == 1:
        return reps[0]
    return _concat_reps(reps)


def _rep_len(rep: _Rep) -> int:
    if isinstance(rep, _AllNull):
        return rep.length
    if isinstance(rep, _Fixed):
        return len(rep.values)
    return len(rep.starts)


def _rep_valid(rep: _Rep) -> np.ndarray | None:
    """Validity as a bool array, or None when every value is valid."""
    if isinstance(rep, _AllNull):
        return np.zeros(rep.length, dtype=bool)
    return rep.valid


def _concat_reps(reps: list[_Rep]) -> _Rep:
    lengths = [_rep_len(r) for r in reps]
    total = sum(lengths)
    if all(isinstance(r, _AllNull) for r in reps):
        return _AllNull(total)
    valids = [_rep_valid(r) for r in reps]
    if all(v is None for v in valids):
        valid = None
    else:
        valid = np.concatenate(
            [np.ones(n, bool) if v is None else v for v, n in zip(valids, lengths, strict=True)]
        )
    kinds = {type(r) for r in reps if not isinstance(r, _AllNull)}
    if kinds == {_Fixed}:
        values = np.concatenate(
            [
                np.zeros(n, np.int64) if isinstance(r, _AllNull) else r.values
                for r, n in zip(reps, lengths, strict=True)
            ]
        )
        return _Fixed(values, valid)
    if kinds != {_Var}:  # pragma: no cover - chunks share one type
        raise TypeError("chunks of a chunked array have incompatible canonical encodings")
    datas, starts, lens = [], [], []
    base = 0
    for r, n in zip(reps, lengths, strict=True):
        if isinstance(r, _AllNull):
            starts.append(np.zeros(n, np.int64))
            lens.append(np.zeros(n, np.int64))
            continue
        assert isinstance(r, _Var)
        datas.append(r.data)
        starts.append(r.starts + base)
        lens.append(r.lengths)
        base += len(r.data)
    data = np.concatenate(datas) if datas else np.zeros(0, np.uint8)
    return _Var(data, np.concatenate(starts), np.concatenate(lens), valid)


# --------------------------------------------------------------------------------------
# numpy murmur3 kernels (uint32 arithmetic wraps modulo 2**32)
# --------------------------------------------------------------------------------------


def _mix_block(h: np.ndarray, k: np.ndarray, t: np.ndarray) -> None:
    """h = murmur3 body step of h with block k, in place (k and t are clobbered)."""
    _mix_tail(h, k, t)  # the body step starts with the same scramble-and-xor
    np.left_shift(h, 13, out=t)
    np.right_shift(h, 19, out=h)
    np.bitwise_or(h, t, out=h)
    np.multiply(h, _U32_5, out=h)
    np.add(h, _U32_C3, out=h)


def _mix_tail(h: np.ndarray, k: np.ndarray, t: np.ndarray) -> None:
    """h ^= scrambled tail k, in place (k = 0 is a no-op)."""
    np.multiply(k, _U32_C1, out=k)
    np.left_shift(k, 15, out=t)
    np.right_shift(k, 17, out=k)
    np.bitwise_or(k, t, out=k)
    np.multiply(k, _U32_C2, out=k)
    np.bitwise_xor(h, k, out=h)


def _fmix(h: np.ndarray, length: np.ndarray | np.uint32, t: np.ndarray) -> None:
    np.bitwise_xor(h, length, out=h)
    np.right_shift(h, 16, out=t)
    np.bitwise_xor(h, t, out=h)
    np.multiply(h, _U32_F1, out=h)
    np.right_shift(h, 13, out=t)
    np.bitwise_xor(h, t, out=h)
    np.multiply(h, _U32_F2, out=h)
    np.right_shift(h, 16, out=t)
    np.bitwise_xor(h, t, out=h)


def _hash_fixed(columns: list[tuple[np.ndarray, np.ndarray | None]], n: int) -> np.ndarray:
    """murmur3 of the concatenated 8-byte values of the valid columns of each row.

    Skipping a null column for a row is exactly "omitting its bytes", because each
    8-byte value is two whole 4-byte blocks. Returns uint32 hashes."""
    out = np.empty(n, dtype=np.uint32)
    c = min(_CHUNK, max(n, 1))
    h = np.empty(c, np.uint32)
    k = np.empty(c, np.uint32)
    t = np.empty(c, np.uint32)
    h2 = np.empty(c, np.uint32)
    lengths = np.empty(c, np.uint32)
    any_null = any(v is not None for _, v in columns)
    const_len = np.uint32(8 * len(columns))
    for s in range(0, n, _CHUNK):
        e = min(s + _CHUNK, n)
        m = e - s
        hs, ks, ts = h[:m], k[:m], t[:m]
        hs.fill(0)
        if any_null:
            ls = lengths[:m]
            ls.fill(0)
        for values, valid in columns:
            words = values[s:e].view(np.uint32)
            target = hs
            if valid is not None:
                target = h2[:m]
                np.copyto(target, hs)
            np.copyto(ks, words[0::2])
            _mix_block(target, ks, ts)
            np.copyto(ks, words[1::2])
            _mix_block(target, ks, ts)
            if valid is not None:
                vs = valid[s:e]
                np.copyto(hs, target, where=vs)
                np.add(ls, vs, out=ls)
            elif any_null:
                np.add(ls, np.uint32(1), out=ls)
        if any_null:
            np.left_shift(ls, 3, out=ls)  # 8 bytes per valid column
            _fmix(hs, ls, ts)
        else:
            _fmix(hs, const_len, ts)
        out[s:e] = hs
    return out


def _hash_var(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """murmur3 of ``data[starts[i] : starts[i] + lengths[i]]`` for every i (uint32)."""
    n = len(starts)
    lengths = lengths.astype(np.int64, copy=False)
    starts = starts.astype(np.int64, copy=False)
    is_long = lengths > _LONG_VALUE
    if not is_long.any():
        return _hash_streams([(data, starts, lengths)], n)
    out = np.empty(n, dtype=np.uint32)
    long_rows = np.flatnonzero(is_long)
    buf = memoryview(np.ascontiguousarray(data)).cast("B")
    digest = mmh3.mmh3_32_sintdigest
    ends = (starts[long_rows] + lengths[long_rows]).tolist()
    hashes = [digest(buf[s:e], 0) for s, e in zip(starts[long_rows].tolist(), ends, strict=True)]
    out[long_rows] = np.array(hashes, dtype=np.int32).view(np.uint32)
    short_rows = np.flatnonzero(~is_long)
    if len(short_rows):
        out[short_rows] = _hash_streams(
            [(data, starts[short_rows], lengths[short_rows])], len(short_rows)
        )
    return out


def _byte_windows(data: np.ndarray) -> tuple[np.ndarray, int]:
    """Every 4-byte little-endian window of ``data`` as an unaligned uint32 view (no
    copy), and the index of the last window."""
    if len(data) < 4:  # too small for one window: pad (a tiny copy)
        data = np.concatenate([data, np.zeros(4 - len(data), np.uint8)])
    words = np.ndarray(shape=(len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
    return words, len(data) - 4


def _read4(words: np.ndarray, last: int, pos: np.ndarray) -> np.ndarray:
    """The (up to) 4 bytes at ``pos`` as a little-endian uint32. Near the end of the
    buffer the missing high bytes are garbage or zero: callers mask them off."""
    if len(pos) == 0 or int(pos.max()) <= last:
        return words[pos]
    window = np.minimum(pos, last)
    k = words[window]
    shift = (np.minimum(pos - window, 3) << 3).astype(np.uint32)
    np.right_shift(k, shift, out=k)
    return k


def _hash_streams(columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n: int) -> np.ndarray:
    """murmur3 of, per row, the concatenation over ``columns`` of
    ``data[starts[i] : starts[i] + lengths[i]]`` (give a NULL a length of 0).

    The hash state of each row (h, the 0-3 pending bytes ``carry`` and their count
    ``cl``, the total length) is streamed through the columns one after the other,
    so the concatenation is never materialised. Within a column, rows are sorted by
    block count (descending) so the rows still consuming block j are a prefix."""
    h = np.zeros(n, dtype=np.uint32)
    carry = np.zeros(n, dtype=np.uint32)
    cl = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.int64)
    for data, starts, lengths in columns:
        words, last = _byte_windows(data)
        stream = cl + lengths
        nblocks = stream >> 2
        new_cl = stream & 3
        # Block 0 (if any) or the new carry (if none) starts with the old carry.
        head = _read4(words, last, starts)
        np.left_shift(head, (cl << 3).astype(np.uint32), out=head)
        np.bitwise_or(head, carry, out=head)
        # The bytes left over after the last full block become the new carry.
        has_block = nblocks > 0
        tail = _read4(words, last, np.where(has_block, starts + 4 * nblocks - cl, starts))
        carry = np.where(has_block, tail, head)
        np.bitwise_and(carry, _TAIL_MASK[new_cl], out=carry)
        total += lengths
        # Block j >= 1 of the stream is the value's bytes at 4 * j - (old cl).
        pos = starts - cl
        cl = new_cl
        max_blocks = int(nblocks.max()) if n else 0
        if max_blocks == 0:
            continue
        if int(nblocks.min()) == max_blocks:
            order = None
            hs = h
            active = [n] * max_blocks
        else:
            key = (max_blocks - nblocks).astype(np.uint8 if max_blocks < 256 else np.int64)
            order = np.argsort(key, kind="stable")
            hs = h[order]
            head = head[order]
            pos = pos[order]
            counts = np.bincount(nblocks, minlength=max_blocks + 1)
            # active[j] = number of rows with more than j blocks
            active = (n - np.cumsum(counts)[:max_blocks]).tolist()
        t = np.empty(n, dtype=np.uint32)
        m = active[0]
        _mix_block(hs[:m], head[:m], t[:m])
        for j in range(1, max_blocks):
            m = active[j]
            k = words[pos[:m] + 4 * j]
            _mix_block(hs[:m], k, t[:m])
        if order is not None:
            h[order] = hs
    _mix_tail(h, carry, np.empty(n, dtype=np.uint32))
    _fmix(h, total.astype(np.uint32), np.empty(n, dtype=np.uint32))
    return h


def _hash_rep(rep: _Rep) -> tuple[np.ndarray, np.ndarray | None]:
    """(uint32 hashes, validity) of a canonical representation."""
    if isinstance(rep, _AllNull):
        return np.zeros(rep.length, np.uint32), np.zeros(rep.length, dtype=bool)
    if isinstance(rep, _Fixed):
        return _hash_fixed([(rep.values, None)], len(rep.values)), rep.valid
    return _hash_var(rep.data, rep.starts, rep.lengths), rep.valid


def _int32_array(values: np.ndarray, valid: np.ndarray | None) -> pa.Int32Array:
    values = np.ascontiguousarray(values).view(np.int32)
    n = len(values)
    if valid is None or bool(valid.all()):
        return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(values)])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    null_count = n - int(np.count_nonzero(valid))
    return pa.Array.from_buffers(pa.int32(), n, [bitmap, pa.py_buffer(values)], null_count)


# --------------------------------------------------------------------------------------
# Public vectorised API
# --------------------------------------------------------------------------------------


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
    parts = [_hash_rep(_canonical(array.slice(s, _SLICE))) for s in _slices(len(array))]
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
    reps = [_canonical_any(a) for a in arrays]
    n = _rep_len(reps[0])
    any_valid: np.ndarray | None = np.zeros(n, dtype=bool)
    for r in reps:
        v = _rep_valid(r)
        if v is None:
            any_valid = None
            break
        any_valid |= v
    present = [r for r in reps if not isinstance(r, _AllNull)]
    if not present:
        return np.zeros(n, np.uint32), np.zeros(n, dtype=bool)
    if all(isinstance(r, _Fixed) for r in present):
        hashes = _hash_fixed([(r.values, r.valid) for r in present], n)  # type: ignore[union-attr]
        return hashes, any_valid
    return _hash_multi_var(present, n), any_valid


def _hash_multi_var(reps: list[_Rep], n: int) -> np.ndarray:
    """murmur3_multi when some column is variable width (uint32 hashes)."""
    streams = []
    for r in reps:
        if isinstance(r, _Fixed):
            data = np.ascontiguousarray(r.values).view(np.uint8)
            starts = np.arange(n, dtype=np.int64) * 8
            lengths = np.full(n, 8, dtype=np.int64)
        else:
            assert isinstance(r, _Var)
            data = r.data
            starts = r.starts.astype(np.int64, copy=False)
            lengths = r.lengths.astype(np.int64, copy=True)
        if r.valid is not None:
            lengths = np.where(r.valid, lengths, 0)
        streams.append((data, starts, lengths))
    is_long = np.zeros(n, dtype=bool)
    for r, (_, _, lengths) in zip(reps, streams, strict=True):
        if isinstance(r, _Var):
            is_long |= lengths > _LONG_VALUE
    if not is_long.any():
        return _hash_streams(streams, n)
    out = np.empty(n, dtype=np.uint32)
    for i in np.flatnonzero(is_long).tolist():
        row = b"".join(
            data[starts[i] : starts[i] + lengths[i]].tobytes() for data, starts, lengths in streams
        )
        out[i] = mmh3.mmh3_32_sintdigest(row, 0) & _M32
    short = np.flatnonzero(~is_long)
    if len(short):
        out[short] = _hash_streams([(d, s[short], ln[short]) for d, s, ln in streams], len(short))
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
    h = _fixed_buffer(hashes, np.int32)
    # abs() in int32 wraps -2**31 to itself, whose uint32 reading is 2**31: exactly
    # abs(h) evaluated in int64, and every abs(h) fits uint32, where % is cheap.
    magnitude = np.abs(h).view(np.uint32)
    b = (magnitude % np.uint32(num_buckets)).view(np.int32)
    return _int32_array(b, _validity(hashes))


def bucket(array: pa.Array | pa.ChunkedArray, num_buckets: int) -> pa.Int32Array:
    """Bucket number ``abs(murmur3(v)) % num_buckets`` of every value (int32, NULL stays NULL)."""
    _check_num_buckets(num_buckets)
    return bucket_of_hashes(murmur3(array), num_buckets)


def multi_bucket(arrays: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int) -> pa.Int32Array:
    """Bucket number ``abs(murmur3_multi(row)) % num_buckets`` of every row (int32)."""
    _check_num_buckets(num_buckets)
    return bucket_of_hashes(murmur3_multi(arrays), num_buckets)
