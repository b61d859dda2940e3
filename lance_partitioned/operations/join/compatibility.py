"""Which partition specs of two join inputs are compatible on the join keys.

A *component* is a function of the join key values that every compatible spec
version can compute from a leaf's partition values alone (bucket divisibility,
the calendar hierarchy, truncate widths, identity and identical expressions; see
``lance_partitioned.operations.join`` for the rules). The rules per transform
are the transforms' own (``Transform.coarsens_to``, ``shared_coarsening``,
``derivation``); this module pairs the fields of two specs on the same keys
(``compatibility``), says why none pair, and derives a component's value from
one partition value (``derive``). Pure: it opens no namespace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec
from lance_partitioned.format.transform_base import Transform
from lance_partitioned.format.types import TypeFamily, join_key_family, join_key_types_match
from lance_partitioned.operations.join.sides import normalize_on

# -- key types -----------------------------------------------------------------


def common_key_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both sides' key columns are cast to for the local join (None: no SPJ)."""
    if not join_key_types_match(a, b):
        return None
    if a.equals(b):
        return a
    family = join_key_family(a)
    if family is TypeFamily.INTEGER:
        return pa.int64()
    if family is TypeFamily.STRING:
        return pa.large_string()
    if family is TypeFamily.BINARY:
        return pa.large_binary()
    if family is TypeFamily.DATE:
        return pa.date32()
    if family is TypeFamily.TIMESTAMP:
        units = ["s", "ms", "us", "ns"]
        unit = max(a.unit, b.unit, key=units.index)
        return pa.timestamp(unit, a.tz)
    return None


# -- components and offers -------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One part of the group key: ``transform`` of the join keys ``keys`` (indices into ``on``).

    ``transform`` is the coarsest one both sides compute (``bucket[4]`` for a
    ``bucket[8]`` and a ``bucket[4]`` side).
    """

    transform: Transform
    keys: tuple[int, ...]

    @property
    def kind(self) -> str:
        """bucket | year | month | day | hour | truncate | identity | expression"""
        return self.transform.type

    @property
    def param(self) -> Any:
        """The bucket modulus, truncate width or expression text (None otherwise)."""
        return self.transform.parameter

    def describe(self, pairs: Sequence[tuple[str, str]]) -> str:
        return self.transform.describe_on(", ".join(_pair_name(pairs[k]) for k in self.keys))

    @property
    def null_means_null_key(self) -> bool:
        """A NULL component implies a NULL key (never matches); not so for expressions."""
        return self.transform.null_in_null_out


def _pair_name(pair: tuple[str, str]) -> str:
    return pair[0] if pair[0] == pair[1] else f"{pair[0]}={pair[1]}"


@dataclass(frozen=True)
class Offer:
    """A partition field of one spec whose sources are all join keys."""

    index: int  # position of the field in its spec (and in ``Leaf.values``)
    field: PartitionField
    keys: tuple[int, ...]
    source_types: tuple[pa.DataType, ...]

    @property
    def transform(self) -> Transform:
        return self.field.function


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
        out.append(Offer(i, f, keys, types))
    return out


def _family(keys: tuple[int, ...], families: Sequence[TypeFamily | None]) -> TypeFamily | None:
    """The key family a single-key component is computed over (None for several keys)."""
    return families[keys[0]] if len(keys) == 1 else None


def _same_source_types(lo: Offer, ro: Offer) -> bool:
    return all(a.equals(b) for a, b in zip(lo.source_types, ro.source_types, strict=True))


def _pair_component(
    lo: Offer, ro: Offer, families: Sequence[TypeFamily | None]
) -> Component | None:
    """The component a left and a right offer share, if any."""
    if lo.keys != ro.keys:
        return None
    if lo.transform.depends_on_source_type and not _same_source_types(lo, ro):
        return None
    shared = lo.transform.shared_coarsening(ro.transform, _family(lo.keys, families))
    return None if shared is None else Component(shared, lo.keys)


def shared_components(
    loffers: Sequence[Offer], roffers: Sequence[Offer], families: Sequence[TypeFamily | None]
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
                why.append(lo.transform.why_not_shared(ro.transform))
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
        families.append(join_key_family(lt) if common_key_type(lt, rt) is not None else None)
    lo = spec_offers(left_spec, left_schema, [a for a, _ in pairs])
    ro = spec_offers(right_spec, right_schema, [b for _, b in pairs])
    return shared_components(lo, ro, families)


def derive(offer: Offer, comp: Component, family: TypeFamily | None) -> Callable[[Any], Any] | None:
    """How ``offer``'s partition value gives ``comp``'s value, or None when it cannot."""
    if offer.keys != comp.keys:
        return None
    return offer.transform.derivation(comp.transform, family, offer.field.result_type)
