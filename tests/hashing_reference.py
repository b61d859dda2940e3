"""The scalar reference encoder of the bucket hash, in pure Python (tests only).

One Python value at a time: ``canonical_bytes`` (the canonical encoding of
docs/FORMAT.md "Hashing"), ``murmur3_32_bytes`` (MurmurHash3_x86_32 written out
from the algorithm), ``murmur3_scalar`` and ``bucket_scalar``. The library's
vectorised kernels in ``lance_partitioned.format.hashing`` are tested against
it; it shares only the list of hashable types (``hash_type``) with them, so the
bytes and the hash are computed independently.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import struct
import uuid

import numpy as np
import pyarrow as pa

from lance_partitioned.format.hashing import hash_type

__all__ = ["bucket_scalar", "canonical_bytes", "murmur3_32_bytes", "murmur3_scalar"]

_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_C3 = 0xE6546B64
_F1 = 0x85EBCA6B
_F2 = 0xC2B2AE35
_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_MS_PER_DAY = 86_400_000
_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_CANONICAL_NAN_BITS = 0x7FF8000000000000


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def murmur3_32_bytes(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of ``data`` in pure Python, returned as a signed int32.

    The reference implementation; the vectorised kernels are tested against it."""
    data = bytes(data)
    n = len(data)
    h = seed & _M32
    nblocks = n // 4
    for (k,) in struct.iter_unpack("<I", data[: nblocks * 4]):
        k = (k * _C1) & _M32
        k = _rotl32(k, 15)
        k = (k * _C2) & _M32
        h ^= k
        h = _rotl32(h, 13)
        h = (h * 5 + _C3) & _M32
    tail = data[nblocks * 4 :]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * _C1) & _M32
        k = _rotl32(k, 15)
        k = (k * _C2) & _M32
        h ^= k
    h ^= n & _M32
    h ^= h >> 16
    h = (h * _F1) & _M32
    h ^= h >> 13
    h = (h * _F2) & _M32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def _int64_bytes(v: int) -> bytes:
    return (v & _M64).to_bytes(8, "little")


def _float_bytes(v: float) -> bytes:
    v = float(v)
    if v != v:
        return _CANONICAL_NAN_BITS.to_bytes(8, "little")
    if v == 0.0:
        v = 0.0
    return struct.pack("<d", v)


def _minimal_twos_complement(v: int) -> bytes:
    """Minimal big-endian two's complement bytes, like Java BigInteger.toByteArray()."""
    length = v.bit_length() // 8 + 1 if v >= 0 else (~v).bit_length() // 8 + 1
    return v.to_bytes(length, "big", signed=True)


def _decimal_unscaled(value: object, scale: int) -> int:
    if isinstance(value, bool):
        raise TypeError("a bool is not a decimal value")
    if isinstance(value, int):
        value = decimal.Decimal(value)
    if not isinstance(value, decimal.Decimal):
        raise TypeError(f"expected decimal.Decimal or int for a decimal type, got {value!r}")
    if not value.is_finite():
        raise ValueError(f"cannot hash non-finite decimal {value!r}")
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    mantissa = int("".join(map(str, digits))) if digits else 0
    shift = exponent + scale
    if shift >= 0:
        unscaled = mantissa * 10**shift
    else:
        unscaled, rest = divmod(mantissa, 10**-shift)
        if rest:
            raise ValueError(f"{value} is not representable with scale {scale}")
    return -unscaled if sign else unscaled


def _datetime_micros(value: _dt.datetime) -> int:
    days = value.toordinal() - _EPOCH_ORDINAL
    micros = (
        days * 86_400 + value.hour * 3600 + value.minute * 60 + value.second
    ) * 1_000_000 + value.microsecond
    offset = value.utcoffset()
    if offset is not None:
        micros -= (offset.days * 86_400 + offset.seconds) * 1_000_000 + offset.microseconds
    return micros


def _unit_to_micros(v: int, unit: str) -> int:
    if unit == "s":
        return v * 1_000_000
    if unit == "ms":
        return v * 1_000
    if unit == "us":
        return v
    if unit == "ns":
        return v // 1_000
    raise ValueError(f"unknown time unit {unit!r}")


def _require_int(value: object, what: str) -> int:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"expected {what}, got {value!r}")


def canonical_bytes(value: object, arrow_type: pa.DataType) -> bytes | None:
    """The canonical bytes hashed for one Python ``value`` of ``arrow_type`` (None for NULL).

    Raises TypeError if hashing is not defined for ``arrow_type``, even for None.
    Temporal types also accept an int in the type's storage unit (days for date32,
    ms for date64, the type's unit for timestamp/time)."""
    t = hash_type(arrow_type)
    if value is None:
        return None
    if isinstance(value, pa.Scalar):
        if not value.is_valid:
            return None
        st = value.type
        if (pa.types.is_timestamp(st) and pa.types.is_timestamp(t)) or (
            pa.types.is_time(st) and pa.types.is_time(t)
        ):
            # Through the integer value, so ns precision never needs a Python object.
            return _int64_bytes(_unit_to_micros(value.value, st.unit))
        if pa.types.is_date(st) and pa.types.is_date(t):
            # Through the integer value: it may lie outside datetime.date's range.
            days = value.value if pa.types.is_date32(st) else value.value // _MS_PER_DAY
            return _int64_bytes(days)
        return canonical_bytes(value.as_py(), t)
    if pa.types.is_boolean(t):
        if isinstance(value, (bool, np.bool_)):
            return _int64_bytes(int(value))
        v = _require_int(value, "bool or 0/1")
        if v not in (0, 1):
            raise ValueError(f"{v} is not a boolean")
        return _int64_bytes(v)
    if pa.types.is_integer(t):
        if isinstance(value, (bool, np.bool_)):
            value = int(value)
        v = _require_int(value, "int")
        if not -(1 << 63) <= v <= _M64:
            raise OverflowError(f"{v} does not fit in 64 bits")
        return _int64_bytes(v)
    if pa.types.is_date(t):
        if isinstance(value, _dt.datetime):
            value = value.date()
        if isinstance(value, _dt.date):
            return _int64_bytes(value.toordinal() - _EPOCH_ORDINAL)
        v = _require_int(value, "datetime.date or int")
        return _int64_bytes(v if pa.types.is_date32(t) else v // _MS_PER_DAY)
    if pa.types.is_timestamp(t):
        if isinstance(value, _dt.datetime):
            return _int64_bytes(_datetime_micros(value))
        if isinstance(value, _dt.date):
            value = _dt.datetime(value.year, value.month, value.day)
            return _int64_bytes(_datetime_micros(value))
        return _int64_bytes(_unit_to_micros(_require_int(value, "datetime or int"), t.unit))
    if pa.types.is_time(t):
        if isinstance(value, _dt.time):
            micros = (
                value.hour * 3600 + value.minute * 60 + value.second
            ) * 1_000_000 + value.microsecond
            return _int64_bytes(micros)
        return _int64_bytes(_unit_to_micros(_require_int(value, "datetime.time or int"), t.unit))
    if pa.types.is_floating(t):
        if isinstance(value, (str, bytes)):
            raise TypeError(f"expected a float, got {value!r}")
        return _float_bytes(value)  # type: ignore[arg-type]
    if pa.types.is_decimal(t):
        return _minimal_twos_complement(_decimal_unscaled(value, t.scale))
    if not pa.types.is_null(t):  # hash_type leaves only bytes-like types (or null)
        if isinstance(value, str):
            return value.encode("utf-8")
        if isinstance(value, uuid.UUID):
            return value.bytes
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise TypeError(f"expected str or bytes, got {value!r}")
    raise TypeError(f"a value of Arrow type {t} must be None, got {value!r}")


def murmur3_scalar(value: object, arrow_type: pa.DataType) -> int | None:
    """murmur3 (signed int32) of one Python value of ``arrow_type``; None for NULL."""
    data = canonical_bytes(value, arrow_type)
    return None if data is None else murmur3_32_bytes(data)


def bucket_scalar(value: object, arrow_type: pa.DataType, num_buckets: int) -> int | None:
    """Bucket (``abs(murmur3) % num_buckets``) of one Python value; None for NULL."""
    if not 0 < num_buckets <= 2**31 - 1:
        raise ValueError(f"num_buckets must be in [1, 2**31 - 1], got {num_buckets}")
    h = murmur3_scalar(value, arrow_type)
    return None if h is None else abs(h) % num_buckets
