"""Partition transforms (seed 000 "Supported Transforms"), vectorised over Arrow.

Each transform maps source columns to one partition value per row:

- NULL in gives NULL out (NULL is its own partition);
- time transforms extract calendar fields (``date_part``); timestamps with a
  time zone are evaluated in that zone, as DataFusion (seed 000's reference
  engine) evaluates ``date_part``, and naive ones as stored;
- ``truncate`` follows the spec's expression literally: ``left(col, W)`` in code
  points for strings, ``col - (col % W)`` with a *truncated* remainder for numbers;
- ``bucket``/``multi_bucket`` use the canonical murmur3 of ``hashing``.

Results are cast to the field's ``result_type`` by ``PartitionField``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import SpecError
from lance_partitioned.format import hashing, zones
from lance_partitioned.format.types import is_bytes, is_numeric, is_temporal, is_text

TIME_UNITS = ("year", "month", "day", "hour")


def _to_array(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    return a


@dataclass(frozen=True)
class Transform:
    """A well-known transform. Subclasses set ``type`` and implement ``apply``."""

    type: ClassVar[str]
    arity: ClassVar[int | None] = 1  # number of source columns; None means "one or more"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}

    def result_type(self, source_types: Sequence[pa.DataType]) -> pa.DataType:
        """The natural result type; raises SpecError when the sources don't fit."""
        raise NotImplementedError

    def apply(self, arrays: Sequence[pa.Array]) -> pa.Array:
        """Partition values for each row of the source arrays (natural type)."""
        raise NotImplementedError

    def expression(self, num_sources: int = 1) -> str:
        """The derived DataFusion expression of seed 000."""
        raise NotImplementedError

    @property
    def preserves_order(self) -> bool:
        """True when ``a <= b`` implies ``f(a) <= f(b)``, so ranges project."""
        return False

    def __str__(self) -> str:
        return self.type

    def _check_arity(self, source_types: Sequence[pa.DataType]) -> None:
        n = len(source_types)
        if self.arity is not None and n != self.arity:
            raise SpecError(f"{self.type} takes {self.arity} source column(s), got {n}")
        if self.arity is None and n < 1:
            raise SpecError(f"{self.type} needs at least one source column")


@dataclass(frozen=True)
class Identity(Transform):
    type: ClassVar[str] = "identity"

    def result_type(self, source_types):
        self._check_arity(source_types)
        t = source_types[0]
        if pa.types.is_nested(t) or pa.types.is_dictionary(t):
            raise SpecError(f"identity cannot partition by a column of type {t}")
        return t

    def apply(self, arrays):
        return _to_array(arrays[0])

    def expression(self, num_sources=1):
        return "col0"

    @property
    def preserves_order(self):
        return True


@dataclass(frozen=True)
class TimeTransform(Transform):
    """year / month / day / hour: a calendar field of a date or timestamp, as int32."""

    def result_type(self, source_types):
        self._check_arity(source_types)
        t = source_types[0]
        if self.type == "hour":
            if not pa.types.is_timestamp(t):
                raise SpecError(f"hour needs a timestamp source column, got {t}")
        elif not is_temporal(t):
            raise SpecError(f"{self.type} needs a date or timestamp source column, got {t}")
        return pa.int32()

    def apply(self, arrays):
        arr = _to_array(arrays[0])
        if pa.types.is_timestamp(arr.type) and arr.type.tz is not None:
            # In the column's zone, by DataFusion's rules (pyarrow's differ after 2037).
            return zones.date_part(self.type, arr)
        fn = {"year": pc.year, "month": pc.month, "day": pc.day, "hour": pc.hour}[self.type]
        return fn(arr).cast(pa.int32())

    def expression(self, num_sources=1):
        return f"date_part('{self.type}', col0)"

    @property
    def preserves_order(self):
        # Only the year is monotonic on its own; month/day/hour wrap around.
        return self.type == "year"


@dataclass(frozen=True)
class Year(TimeTransform):
    type: ClassVar[str] = "year"


@dataclass(frozen=True)
class Month(TimeTransform):
    type: ClassVar[str] = "month"


@dataclass(frozen=True)
class Day(TimeTransform):
    type: ClassVar[str] = "day"


@dataclass(frozen=True)
class Hour(TimeTransform):
    type: ClassVar[str] = "hour"


# num_buckets and width are JSON ints that other implementations read as 32-bit
# (Iceberg's are Java ints; bucket values are int32 by definition), so a larger
# parameter is refused when the spec is made, not at the first write.
_MAX_PARAM = 2**31 - 1


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_PARAM:
        raise SpecError(f"{name} must be an integer in [1, {_MAX_PARAM}], got {value!r}")


def _check_hashable(t: pa.DataType, what: str) -> None:
    try:
        hashing.hash_type(t)
    except Exception as exc:  # the hashing module rejects types it cannot encode
        raise SpecError(f"{what} cannot hash a column of type {t}: {exc}") from exc
    if pa.types.is_nested(t):
        raise SpecError(f"{what} cannot hash a column of type {t}")


@dataclass(frozen=True)
class Bucket(Transform):
    num_buckets: int = 0
    type: ClassVar[str] = "bucket"

    def __post_init__(self):
        _check_positive("bucket num_buckets", self.num_buckets)

    def to_json(self):
        return {"type": self.type, "num_buckets": self.num_buckets}

    def result_type(self, source_types):
        self._check_arity(source_types)
        _check_hashable(source_types[0], "bucket")
        return pa.int32()

    def apply(self, arrays):
        return hashing.bucket(_to_array(arrays[0]), self.num_buckets)

    def expression(self, num_sources=1):
        return f"abs(murmur3(col0)) % {self.num_buckets}"

    def __str__(self):
        return f"bucket[{self.num_buckets}]"


@dataclass(frozen=True)
class MultiBucket(Transform):
    num_buckets: int = 0
    type: ClassVar[str] = "multi_bucket"
    arity: ClassVar[int | None] = None

    def __post_init__(self):
        _check_positive("multi_bucket num_buckets", self.num_buckets)

    def to_json(self):
        return {"type": self.type, "num_buckets": self.num_buckets}

    def result_type(self, source_types):
        self._check_arity(source_types)
        for t in source_types:
            _check_hashable(t, "multi_bucket")
        return pa.int32()

    def apply(self, arrays):
        return hashing.multi_bucket([_to_array(a) for a in arrays], self.num_buckets)

    def expression(self, num_sources=1):
        cols = ", ".join(f"col{i}" for i in range(num_sources))
        return f"abs(murmur3_multi({cols})) % {self.num_buckets}"

    def __str__(self):
        return f"multi_bucket[{self.num_buckets}]"


@dataclass(frozen=True)
class Truncate(Transform):
    width: int = 0
    type: ClassVar[str] = "truncate"

    def __post_init__(self):
        _check_positive("truncate width", self.width)

    def to_json(self):
        return {"type": self.type, "width": self.width}

    def result_type(self, source_types):
        self._check_arity(source_types)
        t = source_types[0]
        if not (is_text(t) or is_bytes(t) or is_numeric(t)):
            raise SpecError(f"truncate needs a string, binary or numeric source column, got {t}")
        if pa.types.is_fixed_size_binary(t):
            raise SpecError("truncate cannot keep a fixed_size_binary type; use binary")
        return t

    def apply(self, arrays):
        arr = _to_array(arrays[0])
        t = arr.type
        w = self.width
        if is_text(t):
            return pc.utf8_slice_codeunits(arr, 0, w)
        if is_bytes(t):
            return pc.binary_slice(arr, 0, w)
        if pa.types.is_decimal(t):
            return _truncate_decimal(arr, w)
        return _truncate_numeric(arr, w)

    def expression(self, num_sources=1):
        return f"truncate({self.width})"  # replaced per source type by PartitionField

    def expression_for(self, source_type: pa.DataType) -> str:
        if is_text(source_type) or is_bytes(source_type):
            return f"left(col0, {self.width})"
        return f"col0 - (col0 % {self.width})"

    @property
    def preserves_order(self):
        return True

    def __str__(self):
        return f"truncate[{self.width}]"


def _truncate_numeric(arr: pa.Array, w: int) -> pa.Array:
    """``v - fmod(v, w)``: the remainder takes the dividend's sign (SQL/DataFusion ``%``)."""
    t = arr.type
    mask = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    vals = arr.fill_null(0).to_numpy(zero_copy_only=False) if arr.null_count else arr.to_numpy()
    if pa.types.is_floating(t):
        out = vals - np.fmod(vals, w)
    else:
        # In the source's own dtype a width wider than it wraps (int8 and 1000 gives
        # -24); DataFusion evaluates the expression in int64, so do the same. The
        # result lies between 0 and v, so it fits the source type again.
        wide = np.uint64 if pa.types.is_unsigned_integer(t) else np.int64
        v64 = vals.astype(wide)
        out = (v64 - np.fmod(v64, wide(w))).astype(vals.dtype)
    return pa.array(out, type=t, mask=mask)


def _truncate_decimal(arr: pa.Array, w: int) -> pa.Array:
    """Decimal ``v - (v % w)`` computed on the unscaled integers: w is scaled by 10**scale."""
    t = arr.type
    scaled_w = w * 10**t.scale
    out = []
    for v in arr.to_pylist():
        if v is None:
            out.append(None)
            continue
        unscaled = int(v.scaleb(t.scale))
        rem = abs(unscaled) % scaled_w
        rem = -rem if unscaled < 0 else rem
        out.append(unscaled - rem)
    from decimal import Decimal

    return pa.array(
        [None if u is None else Decimal(u).scaleb(-t.scale) for u in out],
        type=t,
    )


_SIMPLE = {c.type: c for c in (Identity, Year, Month, Day, Hour)}


def transform_from_json(obj: Any) -> Transform:
    """Parse a seed-000 transform object, e.g. ``{"type": "bucket", "num_buckets": 16}``."""
    if not isinstance(obj, dict):
        raise SpecError(f"transform must be a JSON object, got {obj!r}")
    kind = obj.get("type")
    allowed = {"type"}
    if kind in _SIMPLE:
        out: Transform = _SIMPLE[kind]()
    elif kind in ("bucket", "multi_bucket"):
        if "num_buckets" not in obj:
            raise SpecError(f"{kind} transform needs num_buckets: {obj}")
        out = (Bucket if kind == "bucket" else MultiBucket)(obj["num_buckets"])
        allowed.add("num_buckets")
    elif kind == "truncate":
        if "width" not in obj:
            raise SpecError(f"truncate transform needs width: {obj}")
        out = Truncate(obj["width"])
        allowed.add("width")
    else:
        known = sorted([*_SIMPLE, "bucket", "multi_bucket", "truncate"])
        raise SpecError(f"unknown transform type {kind!r}; known transforms are {known}")
    extra = set(obj) - allowed
    if extra:
        raise SpecError(f"unexpected keys {sorted(extra)} in {kind} transform {obj}")
    return out


def parse_transform_call(name: str, args: Sequence[int]) -> Transform:
    """Build a transform from Iceberg-style call syntax: ``bucket(16, ...)``, ``year(...)``."""
    name = name.lower()
    if name in _SIMPLE:
        if args:
            raise SpecError(f"{name} takes no parameters, got {list(args)}")
        return _SIMPLE[name]()
    if name in ("bucket", "multi_bucket", "truncate"):
        if len(args) != 1:
            raise SpecError(f"{name} takes exactly one integer parameter, got {list(args)}")
        cls = {"bucket": Bucket, "multi_bucket": MultiBucket, "truncate": Truncate}[name]
        return cls(args[0])
    raise SpecError(
        f"unknown transform {name!r}; known transforms are "
        "identity, year, month, day, hour, bucket, multi_bucket, truncate"
    )
