"""The Arrow C data interface's ``struct ArrowSchema`` (a stable ABI), read with ctypes.

pyarrow hides two things we need: schema metadata in its original order with
duplicates, and the metadata of built-in extension types. Both are in the
C export.
"""

from __future__ import annotations

import ctypes

import pyarrow as pa


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


_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)

_EXTENSION_METADATA_KEY = b"ARROW:extension:metadata"


def extension_metadata(t: pa.BaseExtensionType) -> bytes:
    """The serialized ``ARROW:extension:metadata`` of any extension type (b"" when it has none).

    pyarrow exposes it only for Python-defined extension types, so read it from
    the type's C data interface export, which carries it for every kind."""
    capsule = t.__arrow_c_schema__()
    c_schema = CArrowSchema.from_address(_capsule_pointer(capsule, b"arrow_schema"))
    for key, value in read_metadata(c_schema.metadata):
        if key == _EXTENSION_METADATA_KEY:
            return value
    return b""
