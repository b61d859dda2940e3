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

The interface every transform implements, with the rules most of them share,
is ``transform_base.Transform``; this module holds seed 000's well-known
transforms and their parsers. Seed 000's derived expression text for each
transform is tabled once, in docs/FORMAT.md §4.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import SpecError
from lance_partitioned.format import hashing, zones
from lance_partitioned.format.calendar import calendar_bound, is_unit_start
from lance_partitioned.format.expressions import (
    Compare,
    DatePart,
    In,
    IsNull,
    Like,
    Literal,
    Opaque,
    Or,
    Ref,
)
from lance_partitioned.format.filters.render import escape_like, quote_identifier
from lance_partitioned.format.transform_base import COMPARISONS, Transform, unchanged
from lance_partitioned.format.types import (
    TypeFamily,
    is_bytes,
    is_numeric,
    is_temporal,
    is_text,
)


def _to_array(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.combine_chunks() if a.num_chunks != 1 else a.chunk(0)
    return a


@dataclass(frozen=True)
class Identity(Transform):
    type: ClassVar[str] = "identity"
    result_follows_source: ClassVar[bool] = True

    def result_type(self, source_types):
        self._check_arity(source_types)
        t = source_types[0]
        if pa.types.is_nested(t) or pa.types.is_dictionary(t):
            raise SpecError(f"identity cannot partition by a column of type {t}")
        return t

    def apply(self, arrays):
        return _to_array(arrays[0])

    @property
    def preserves_order(self):
        return True

    def project(self, pred, column, source_type, result_type):
        """The predicate itself, on the partition column (when no widening intervenes)."""
        if not result_type.equals(source_type) or isinstance(pred, IsNull):
            return super().project(pred, column, source_type, result_type)
        col = Ref(column)
        if isinstance(pred, Compare) and pred.literal.value is not None:
            return Compare(pred.op, col, pred.literal)
        if isinstance(pred, In) and all(v.value is not None for v in pred.values):
            return In(col, pred.values, pred.negated)
        if isinstance(pred, Like):
            return Like(col, pred.pattern, pred.negated)
        return None

    def strict_project(self, pred, value, source_type):
        """The partition value is every row's value: compare it with the literal, or
        look it up in the IN list (``NOT IN`` holds only when no listed value is NULL)."""
        if isinstance(pred, In) and value is not None:
            return _in_verdict(pred, value)
        if value is None or not isinstance(pred, Compare) or pred.literal.value is None:
            return super().strict_project(pred, value, source_type)
        try:
            # all six, as the answer was always computed: a pair that only some
            # operators order (naive vs aware datetimes) guarantees nothing
            verdicts = {op: fn(value, pred.literal.value) for op, fn in COMPARISONS.items()}
        except TypeError:
            return False
        return verdicts[pred.op]

    def strict_project_array(self, pred, values, source_type):
        """``strict_project`` column-wise, for literals whose Arrow comparison is exactly
        Python's (integers, strings, dates, booleans); None for the rest (asked per value)."""
        if isinstance(pred, Compare) and pred.literal.value is not None:
            literal = _exact_scalar(pred.literal.value, values.type)
            kernel = _COMPARE_KERNELS.get(pred.op)
            if literal is None or kernel is None:
                return None
            return kernel(values, literal)  # null value: null (cannot say)
        if isinstance(pred, In):
            literals = [v.value for v in pred.values]
            listed = [v for v in literals if v is not None]
            scalars = [_exact_scalar(v, values.type) for v in listed]
            if any(s is None for s in scalars):
                return None
            member = pc.is_in(values, value_set=pa.array(listed, values.type))
            if not pred.negated:
                verdict = member
            elif len(listed) < len(literals):  # NOT IN with a NULL is never TRUE
                verdict = pa.array(np.zeros(len(values), dtype=bool))
            else:
                verdict = pc.invert(member)
            return pc.if_else(pc.is_valid(values), verdict, pa.scalar(None, pa.bool_()))
        return self._shared_strict_project_array(pred, values)  # as strict_project falls back

    def may_strict_project(self, pred):
        """A comparison or IN list with a non-NULL literal, or what every transform answers."""
        return (
            (isinstance(pred, Compare) and pred.literal.value is not None)
            or (isinstance(pred, In) and any(v.value is not None for v in pred.values))
            or super().may_strict_project(pred)
        )


# Arrow kernels of the six comparisons (``transform_base.COMPARISONS``, column-wise).
_COMPARE_KERNELS = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _exact_scalar(value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
    """``value`` as an Arrow scalar of ``arrow_type`` when Arrow compares it with that
    column exactly as Python compares the Python values (integers, strings in code
    point order, dates, booleans); None otherwise (floats, instants, decimals, a
    value out of range), where the per-value answer is used."""
    ok = (
        (pa.types.is_integer(arrow_type) and type(value) is int)
        or (
            (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))
            and type(value) is str
        )
        or (pa.types.is_date(arrow_type) and type(value) is dt.date)
        or (pa.types.is_boolean(arrow_type) and type(value) is bool)
    )
    if not ok:
        return None
    try:
        return pa.scalar(value, arrow_type)
    except (pa.ArrowInvalid, OverflowError, TypeError):
        return None


def _in_verdict(pred: In, value: Any) -> bool:
    """Whether ``value IN (...)`` (or ``NOT IN``) is TRUE for a non-NULL ``value``."""
    found = False
    for lit in (v.value for v in pred.values):
        if lit is None:
            if pred.negated:
                return False  # x NOT IN (..., NULL) is NULL or FALSE, never TRUE
            continue
        try:
            # all six, as for comparisons: a pair only some operators order is not equal
            verdicts = {op: fn(value, lit) for op, fn in COMPARISONS.items()}
        except TypeError:
            if pred.negated:
                return False  # cannot tell that it differs from every listed value
            continue
        found = found or bool(verdicts["="])
    return found != pred.negated


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
        zoned = pa.types.is_timestamp(arr.type) and arr.type.tz is not None
        if zoned or _beyond_pyarrow_calendar(arr):
            # In the column's zone, by DataFusion's rules (pyarrow's differ after 2037).
            return zones.date_part(self.type, arr)
        fn = {"year": pc.year, "month": pc.month, "day": pc.day, "hour": pc.hour}[self.type]
        return fn(arr).cast(pa.int32())

    @property
    def preserves_order(self):
        # Only the year is monotonic on its own; month/day/hour wrap around.
        return self.type == "year"

    @property
    def calendar_unit(self):
        return self.type

    def _range_bound(self, op, bound, source_type):
        # on the wall clock of a zoned column, where calendar fields are monotonic
        return calendar_bound(op, bound, source_type)

    # A DatePart of this field's unit tests the very value the field holds (both are
    # date_part in the column's zone): it projects, and is guaranteed, as identity's
    # predicates are.
    def _own_part(self, pred):
        """``pred``'s comparison when it is a DatePart of this field's unit, else None."""
        if isinstance(pred, DatePart) and pred.unit == self.type:
            return pred.pred
        return None

    def project(self, pred, column, source_type, result_type):
        """A DatePart of this unit is the same predicate on the partition column."""
        own = self._own_part(pred)
        if own is not None:
            return _IDENTITY.project(own, column, result_type, result_type)
        return super().project(pred, column, source_type, result_type)

    def strict_project(self, pred, value, source_type):
        own = self._own_part(pred)
        if own is not None:
            return _IDENTITY.strict_project(own, value, pa.int32())
        return super().strict_project(pred, value, source_type)

    def strict_project_array(self, pred, values, source_type):
        own = self._own_part(pred)
        if own is not None:
            return _IDENTITY.strict_project_array(own, values, pa.int32())
        return self._shared_strict_project_array(pred, values)

    def may_strict_project(self, pred):
        return self._own_part(pred) is not None or super().may_strict_project(pred)

    def _starts_unit(self, bound):
        return is_unit_start(bound, self.type)


# pyarrow's calendar kernels keep the year in 16 bits: beyond years -32767..32767,
# which a date32 or a timestamp[s], [ms] or [us] column can reach, pc.year wraps
# around (10**12 s is year 33658, pc.year says -31878). Arrays with values beyond
# 28,000 years of the epoch take DataFusion's date_part, seed 000's definition.
_SAFE_DAYS = 28_000 * 365
_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000}


def _beyond_pyarrow_calendar(arr: pa.Array) -> bool:
    """Whether some date or timestamp of ``arr`` is too far from 1970 for pyarrow's kernels."""
    t = arr.type
    if pa.types.is_date32(t):
        per_day = 1
    elif pa.types.is_date64(t):
        per_day = _PER_DAY["ms"]
    else:
        per_day = _PER_DAY.get(t.unit, 0)  # a timestamp[ns] stays within 1677 to 2262
    if not per_day or len(arr) == arr.null_count:
        return False
    storage = pa.int32() if pa.types.is_date32(t) else pa.int64()
    low, high = pc.min_max(arr.view(storage)).values()
    limit = _SAFE_DAYS * per_day
    return low.as_py() < -limit or high.as_py() > limit


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
class _Bucketing(Transform):
    """bucket and multi_bucket: ``abs(murmur3(...)) % num_buckets``.

    Both hash the same bytes for the same key, so for joins they are one kind:
    ``bucket[N]`` gives ``bucket[M]`` as ``value % M`` whenever M divides N.
    """

    num_buckets: int = 0

    def __post_init__(self):
        _check_positive(f"{self.type} num_buckets", self.num_buckets)

    def to_json(self):
        return {"type": self.type, "num_buckets": self.num_buckets}

    @property
    def parameter(self):
        return self.num_buckets

    def __str__(self):
        return f"{self.type}[{self.num_buckets}]"

    def coarsens_to(self, other, family=None):
        return isinstance(other, _Bucketing) and self.num_buckets % other.num_buckets == 0

    def shared_coarsening(self, other, family=None):
        if not isinstance(other, _Bucketing):
            return None
        n, m = self.num_buckets, other.num_buckets
        return Bucket(min(n, m)) if n % m == 0 or m % n == 0 else None

    def derivation(self, other, family, result_type):
        if not self.coarsens_to(other, family):
            return None
        m = other.num_buckets
        return lambda v: None if v is None else v % m

    def why_not_shared(self, other):
        if not isinstance(other, _Bucketing):
            return super().why_not_shared(other)
        return (
            f"bucket counts {self.num_buckets} and {other.num_buckets}: neither divides the other"
        )

    def describe_on(self, names):
        return f"bucket[{self.num_buckets}]({names})"


@dataclass(frozen=True)
class Bucket(_Bucketing):
    type: ClassVar[str] = "bucket"

    def result_type(self, source_types):
        self._check_arity(source_types)
        _check_hashable(source_types[0], "bucket")
        return pa.int32()

    def apply(self, arrays):
        return hashing.bucket(_to_array(arrays[0]), self.num_buckets)


@dataclass(frozen=True)
class MultiBucket(_Bucketing):
    type: ClassVar[str] = "multi_bucket"
    arity: ClassVar[int | None] = None

    def result_type(self, source_types):
        self._check_arity(source_types)
        for t in source_types:
            _check_hashable(t, "multi_bucket")
        return pa.int32()

    def apply(self, arrays):
        return hashing.multi_bucket([_to_array(a) for a in arrays], self.num_buckets)


@dataclass(frozen=True)
class Truncate(Transform):
    width: int = 0
    type: ClassVar[str] = "truncate"
    result_follows_source: ClassVar[bool] = True

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

    @property
    def preserves_order(self):
        return True

    @property
    def parameter(self):
        return self.width

    def __str__(self):
        return f"truncate[{self.width}]"

    def project(self, pred, column, source_type, result_type):
        """Adds ``LIKE 'prefix%'`` on strings: the truncated prefix, or a shorter pattern.

        On floats, ``v - v % W`` of an infinity is NaN, which sorts by its sign (and
        Lance's total order) rather than by the infinity: a range keeps the NaN
        partitions too, and a range bounded by an infinity prunes nothing.
        """
        if pa.types.is_floating(source_type) and isinstance(pred, Compare) and pred.op != "=":
            bound = pred.literal.value
            if pred.op not in (">", ">=", "<", "<=") or bound is None or not np.isfinite(bound):
                return None
            projected = super().project(pred, column, source_type, result_type)
            if projected is None:
                return None
            return Or(projected, Opaque(f"isnan({quote_identifier(column)})", (column,)))
        if not isinstance(pred, Like) or pred.negated:
            return super().project(pred, column, source_type, result_type)
        prefix = _like_prefix(pred.pattern)
        if prefix is None or not is_text(source_type):
            return None
        if len(prefix) >= self.width:
            return Compare("=", Ref(column), Literal(prefix[: self.width]))
        return Like(Ref(column), escape_like(prefix) + "%")

    def coarsens_to(self, other, family=None):
        """truncate[W] gives truncate[V]: strings and binary when V <= W (a prefix of a
        prefix), integers when W divides V (``v - v%V == t - t%V`` for ``t = v - v%W``)."""
        if not isinstance(other, Truncate):
            return False
        fine, coarse = self.width, other.width
        if fine == coarse:
            return True
        if family in (TypeFamily.STRING, TypeFamily.BINARY):
            return coarse < fine
        if family is TypeFamily.INTEGER:
            return coarse % fine == 0
        return False

    def shared_coarsening(self, other, family=None):
        if not isinstance(other, Truncate):
            return None
        # the finest candidate first: the longer prefix, the smaller integer width
        for coarse in sorted({self.width, other.width}, reverse=family is TypeFamily.INTEGER):
            candidate = Truncate(coarse)
            if self.coarsens_to(candidate, family) and other.coarsens_to(candidate, family):
                return candidate
        return None

    def derivation(self, other, family, result_type):
        if not self.coarsens_to(other, family):
            return None
        if other == self:
            return unchanged
        return lambda v: (
            None if v is None else other.apply([pa.array([v], type=result_type)])[0].as_py()
        )

    def why_not_shared(self, other):
        if not isinstance(other, Truncate):
            return super().why_not_shared(other)
        return f"truncate widths {self.width} and {other.width} do not nest"


def _like_prefix(pattern: str) -> str | None:
    """The literal prefix of ``'abc%'``; None if the pattern is anything else."""
    if not pattern.endswith("%"):
        return None
    prefix = pattern[:-1]
    if any(ch in prefix for ch in "%_\\"):
        return None
    return prefix


def _truncate_numeric(arr: pa.Array, w: int) -> pa.Array:
    """``v - fmod(v, w)``: the remainder takes the dividend's sign (SQL/DataFusion ``%``)."""
    t = arr.type
    mask = arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
    vals = arr.fill_null(0).to_numpy(zero_copy_only=False) if arr.null_count else arr.to_numpy()
    if pa.types.is_floating(t):
        with np.errstate(invalid="ignore"):  # an infinity gives NaN, as in SQL
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
_IDENTITY = Identity()


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
