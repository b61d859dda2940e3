"""The Arrow C data interface's ``struct ArrowSchema`` (a stable ABI), read with ctypes.

pyarrow hides two things we need: schema metadata in its original order with
duplicates, and the metadata of built-in extension types. Both are in the
C export.
"""

from __future__ import annotations

import ctypes


class CArrowSchema(ctypes.Structure):
    """``struct ArrowSchema``."""

    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.CFUNCTYPE(None, ctypes.c_void_p)),
        ("private_data", ctypes.c_void_p),
    ]


def read_metadata(ptr: int | None) -> list[tuple[bytes, bytes]]:
    """Decode the C interface's metadata encoding (int32 count, then length-prefixed pairs)."""
    if not ptr:
        return []
    count = ctypes.c_int32.from_address(ptr).value
    pos, out = ptr + 4, []
    for _ in range(count):
        klen = ctypes.c_int32.from_address(pos).value
        key = ctypes.string_at(pos + 4, klen)
        pos += 4 + klen
        vlen = ctypes.c_int32.from_address(pos).value
        out.append((key, ctypes.string_at(pos + 4, vlen)))
        pos += 4 + vlen
    return out
