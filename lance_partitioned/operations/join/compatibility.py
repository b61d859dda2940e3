"""Which partition specs of two join inputs are compatible on the join keys.

A *component* is a function of the join key values that every compatible spec
version can compute from a leaf's partition values alone (bucket divisibility,
the calendar hierarchy, truncate widths, identity and identical expressions; see
``lance_partitioned.operations.join`` for the rules). This module finds the
components two specs share (``compatibility``), says why there are none, and
derives a component's value from one partition value (``derive``). Pure: it
opens no namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec
from lance_partitioned.format.transforms import (
    Bucket,
    Identity,
    MultiBucket,
    TimeTransform,
    Truncate,
)
from lance_partitioned.operations.join.sides import normalize_on

# -- key types -----------------------------------------------------------------


def key_family(t: pa.DataType) -> str | None:
    """Types whose equal values have equal partition values on both sides, or None.

    Integers of any width hash and compare alike (the canonical int64 encoding);
    floats are refused: Spark's join treats NaN = NaN and -0.0 = 0.0, which a
    partition-wise hash join would not reproduce.
    """
    if pa.types.is_integer(t) and not pa.types.is_uint64(t):
        return "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is None else "timestamptz"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"  # the hash encodes the unscaled value
    return None


def common_key_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both sides' key columns are cast to for the local join (None: no SPJ)."""
    fa, fb = key_family(a), key_family(b)
    if fa is None or fa != fb:
        return None
    if a.equals(b):
        return a
    if fa == "int":
        return pa.int64()
    if fa == "string":
        return pa.large_string()
    if fa == "binary":
        return pa.large_binary()
    if fa == "date":
        return pa.date32()
    if fa.startswith("timestamp"):
        units = ["s", "ms", "us", "ns"]
        unit = max(a.unit, b.unit, key=units.index)
        return pa.timestamp(unit, a.tz)
    return None


# -- components and offers -------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One part of the group key: ``kind`` of the join keys ``keys`` (indices into ``on``)."""

    kind: str  # bucket | year | month | day | hour | truncate | identity | expression
    keys: tuple[int, ...]
    param: Any = None  # bucket modulus, truncate width, expression text

    def describe(self, pairs: Sequence[tuple[str, str]]) -> str:
        names = ", ".join(_pair_name(pairs[k]) for k in self.keys)
        if self.kind == "bucket":
            return f"bucket[{self.param}]({names})"
        if self.kind == "truncate":
            return f"truncate[{self.param}]({names})"
        if self.kind == "expression":
            return f"expression({self.param!r} of {names})"
        return f"{self.kind}({names})"

    @property
    def null_means_null_key(self) -> bool:
        """A NULL component implies a NULL key (never matches); not so for expressions."""
        return self.kind != "expression"


def _pair_name(pair: tuple[str, str]) -> str:
    return pair[0] if pair[0] == pair[1] else f"{pair[0]}={pair[1]}"


@dataclass(frozen=True)
class Offer:
    """A partition field of one spec whose sources are all join keys."""

    index: int  # position of the field in its spec (and in ``Leaf.values``)
    field: PartitionField
    kind: str
    keys: tuple[int, ...]
    param: Any
    source_types: tuple[pa.DataType, ...]


def spec_offers(spec: PartitionSpec, schema: Schema, key_names: Sequence[str]) -> list[Offer]:
    """The fields of ``spec`` that are functions of the join keys alone."""
    key_by_id: dict[int, int] = {}
    for k, name in enumerate(key_names):
        key_by_id.setdefault(schema.field_id(name), k)
    out = []
    for i, f in enumerate(spec.fields):
        if not f.source_ids or any(s not in key_by_id for s in f.source_ids):
            continue
        keys = tuple(key_by_id[s] for s in f.source_ids)
        types = tuple(schema.field_by_id(s).type for s in f.source_ids)
        t = f.transform
        if isinstance(t, (Bucket, MultiBucket)):
            kind, param = "bucket", t.num_buckets
        elif isinstance(t, TimeTransform):
            kind, param = t.type, None
        elif isinstance(t, Truncate):
            kind, param = "truncate", t.width
        elif isinstance(t, Identity):
            kind, param = "identity", None
        elif f.expression is not None:
            kind, param = "expression", f.expression
        else:  # pragma: no cover - every transform is listed above
            continue
        out.append(Offer(i, f, kind, keys, param, types))
    return out


def _truncate_coarsens(fine: int, coarse: int, family: str | None) -> bool:
    """True when truncate[coarse] is a function of truncate[fine] for this key family."""
    if fine == coarse:
        return True
    if family in ("string", "binary"):
        return coarse < fine  # a shorter prefix of a longer prefix
    if family == "int":
        return coarse % fine == 0  # v - v%c == t - t%c for t = v - v%f when f | c
    return False


def _pair_component(lo: Offer, ro: Offer, families: Sequence[str | None]) -> Component | None:
    """The component a left and a right offer share, if any."""
    if lo.kind != ro.kind or lo.keys != ro.keys:
        return None
    fam = families[lo.keys[0]] if len(lo.keys) == 1 else None
    if lo.kind == "bucket":
        n, m = lo.param, ro.param
        if n % m == 0 or m % n == 0:
            return Component("bucket", lo.keys, min(n, m))
        return None
    if lo.kind == "truncate":
        for coarse in sorted({lo.param, ro.param}, reverse=fam == "int"):
            if _truncate_coarsens(lo.param, coarse, fam) and _truncate_coarsens(
                ro.param, coarse, fam
            ):
                return Component("truncate", lo.keys, coarse)
        return None
    if lo.kind == "expression":
        same = lo.param == ro.param and all(
            a.equals(b) for a, b in zip(lo.source_types, ro.source_types, strict=True)
        )
        return Component("expression", lo.keys, lo.param) if same else None
    return Component(lo.kind, lo.keys, None)  # identity and calendar fields


def _why_not(lo: Offer, ro: Offer) -> str:
    """Why a left and a right offer on the same keys give no component."""
    ld, rd = lo.field.transform or lo.kind, ro.field.transform or ro.kind
    if lo.kind != ro.kind:
        return f"{ld} and {rd} are different transforms"
    if lo.kind == "bucket":
        return f"bucket counts {lo.param} and {ro.param}: neither divides the other"
    if lo.kind == "truncate":
        return f"truncate widths {lo.param} and {ro.param} do not nest"
    return f"{ld} and {rd} differ"


def shared_components(
    loffers: Sequence[Offer], roffers: Sequence[Offer], families: Sequence[str | None]
) -> tuple[tuple[Component, ...], str]:
    """Every component a left and a right spec share, and (when none) why not."""
    comps: list[Component] = []
    why: list[str] = []
    for lo in loffers:
        for ro in roffers:
            if lo.keys != ro.keys or any(families[k] is None for k in lo.keys):
                continue
            c = _pair_component(lo, ro, families)
            if c is None:
                why.append(_why_not(lo, ro))
            elif c not in comps:
                comps.append(c)
    if comps:
        return tuple(comps), ""
    if why:
        return (), "; ".join(why)
    if not loffers or not roffers:
        side = "either side" if not loffers and not roffers else "left" if not loffers else "right"
        return (), f"no partition field of {side} is a transform of the join keys alone"
    return (), "their partition fields are on different join keys (or key types differ)"


def compatibility(
    left_spec: PartitionSpec,
    left_schema: Schema,
    right_spec: PartitionSpec,
    right_schema: Schema,
    on: Any,
) -> tuple[tuple[Component, ...], str]:
    """The group key two spec versions share on the join keys ``on``.

    Returns the components (empty when the specs are incompatible) and the
    reason when there are none. Pure: no namespace is opened.
    """
    pairs = normalize_on(on)
    families = []
    for a, b in pairs:
        lt, rt = left_schema.field(a).type, right_schema.field(b).type
        families.append(key_family(lt) if common_key_type(lt, rt) is not None else None)
    lo = spec_offers(left_spec, left_schema, [a for a, _ in pairs])
    ro = spec_offers(right_spec, right_schema, [b for _, b in pairs])
    return shared_components(lo, ro, families)


def derive(offer: Offer, comp: Component, family: str | None) -> Callable[[Any], Any] | None:
    """How ``offer``'s partition value gives ``comp``'s value, or None when it cannot."""
    if offer.kind != comp.kind or offer.keys != comp.keys:
        return None
    if comp.kind == "bucket":
        if offer.param % comp.param:
            return None
        m = comp.param
        return lambda v: None if v is None else v % m
    if comp.kind == "truncate":
        if not _truncate_coarsens(offer.param, comp.param, family):
            return None
        if offer.param == comp.param:
            return _same
        coarse, rtype = Truncate(comp.param), offer.field.result_type
        return lambda v: None if v is None else coarse.apply([pa.array([v], type=rtype)])[0].as_py()
    if comp.kind == "expression" and offer.param != comp.param:
        return None
    return _same


def _same(v: Any) -> Any:
    return v
