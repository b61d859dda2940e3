"""MurmurHash3_x86_32 (seed 0) over many byte strings at once, with numpy.

uint32 arithmetic wraps modulo 2**32, exactly as the reference C code. Two
kernels: ``hash_fixed_width`` for rows of 8-byte values, ``hash_streams`` for rows
of variable-width byte strings (streamed column after column, so a row's
concatenation is never materialised); ``hash_variable_width`` hashes values longer
than ``LONG_VALUE`` bytes one by one with mmh3 (C) instead. The bytes come from
``hash_encoding``; ``hashing`` is the public API.
"""

from __future__ import annotations

import mmh3
import numpy as np

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_C3 = 0xE6546B64
_F1 = 0x85EBCA6B
_F2 = 0xC2B2AE35

# The fixed-width kernel works on _CHUNK rows at a time, so that temporaries stay
# small and cache resident.
_CHUNK = 1 << 14
# Variable-width values longer than this are hashed one by one with mmh3 (C);
# shorter ones go through the length-sorted numpy kernel.
LONG_VALUE = 64

_U32_C1 = np.uint32(_C1)
_U32_C2 = np.uint32(_C2)
_U32_C3 = np.uint32(_C3)
_U32_F1 = np.uint32(_F1)
_U32_F2 = np.uint32(_F2)
_U32_5 = np.uint32(5)
_TAIL_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)


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


def hash_fixed_width(columns: list[tuple[np.ndarray, np.ndarray | None]], n: int) -> np.ndarray:
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


def hash_variable_width(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """murmur3 of ``data[starts[i] : starts[i] + lengths[i]]`` for every i (uint32)."""
    n = len(starts)
    lengths = lengths.astype(np.int64, copy=False)
    starts = starts.astype(np.int64, copy=False)
    is_long = lengths > LONG_VALUE
    if not is_long.any():
        return hash_streams([(data, starts, lengths)], n)
    out = np.empty(n, dtype=np.uint32)
    long_rows = np.flatnonzero(is_long)
    buf = memoryview(np.ascontiguousarray(data)).cast("B")
    digest = mmh3.mmh3_32_sintdigest
    ends = (starts[long_rows] + lengths[long_rows]).tolist()
    hashes = [digest(buf[s:e], 0) for s, e in zip(starts[long_rows].tolist(), ends, strict=True)]
    out[long_rows] = np.array(hashes, dtype=np.int32).view(np.uint32)
    short_rows = np.flatnonzero(~is_long)
    if len(short_rows):
        out[short_rows] = hash_streams(
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


def hash_streams(columns: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n: int) -> np.ndarray:
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
