"""Which partition specs of two join inputs are compatible on the join keys.

A *group key component* (``GroupKeyComponent``) is a function of the join key
values that every compatible spec version can compute from a leaf's partition values alone (bucket divisibility,
the calendar hierarchy, truncate widths, identity and identical expressions; see
``lance_partitioned.operations.join`` for the rules). The rules per transform
are the transforms' own (``Transform.coarsens_to``, ``shared_coarsening``,
``derivation``); this module pairs the fields of two specs that are functions of
the same keys (``KeyPartitionField``; ``compatibility``), says why none pair, and derives a component's value from
one partition value (``component_derivation``). Pure: it opens no namespace.
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


# -- group key components and the partition fields that compute them -------------------------------------------------------


@dataclass(frozen=True)
class GroupKeyComponent:
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
class KeyPartitionField:
    """A partition field of one spec whose sources are all join keys."""

    index: int  # position of the field in its spec (and in ``Leaf.values``)
    field: PartitionField
    keys: tuple[int, ...]
    source_types: tuple[pa.DataType, ...]

    @property
    def transform(self) -> Transform:
        return self.field.function


def key_partition_fields(
    spec: PartitionSpec, schema: Schema, key_names: Sequence[str]
) -> list[KeyPartitionField]:
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
        out.append(KeyPartitionField(i, f, keys, types))
    return out


def _single_key_family(
    keys: tuple[int, ...], families: Sequence[TypeFamily | None]
) -> TypeFamily | None:
    """The key family a single-key component is computed over (None for several keys)."""
    return families[keys[0]] if len(keys) == 1 else None


def _sources_typed_alike(left_field: KeyPartitionField, right_field: KeyPartitionField) -> bool:
    return all(
        a.equals(b) for a, b in zip(left_field.source_types, right_field.source_types, strict=True)
    )


def _shared_component(
    left_field: KeyPartitionField,
    right_field: KeyPartitionField,
    families: Sequence[TypeFamily | None],
) -> GroupKeyComponent | None:
    """The group key component a left and a right partition field share, if any."""
    if left_field.keys != right_field.keys:
        return None
    if left_field.transform.depends_on_source_type and not _sources_typed_alike(
        left_field, right_field
    ):
        return None
    shared = left_field.transform.shared_coarsening(
        right_field.transform, _single_key_family(left_field.keys, families)
    )
    return None if shared is None else GroupKeyComponent(shared, left_field.keys)


def shared_group_key(
    left_fields: Sequence[KeyPartitionField],
    right_fields: Sequence[KeyPartitionField],
    families: Sequence[TypeFamily | None],
) -> tuple[tuple[GroupKeyComponent, ...], str]:
    """Every component a left and a right spec share, and (when none) why not."""
    components: list[GroupKeyComponent] = []
    why: list[str] = []
    for left_field in left_fields:
        for right_field in right_fields:
            if left_field.keys != right_field.keys or any(
                families[k] is None for k in left_field.keys
            ):
                continue
            component = _shared_component(left_field, right_field, families)
            if component is None:
                why.append(left_field.transform.why_not_shared(right_field.transform))
            elif component not in components:
                components.append(component)
    if components:
        return tuple(components), ""
    if why:
        return (), "; ".join(why)
    if not left_fields or not right_fields:
        side = (
            "either side"
            if not left_fields and not right_fields
            else "left"
            if not left_fields
            else "right"
        )
        return (), f"no partition field of {side} is a transform of the join keys alone"
    return (), "their partition fields are on different join keys (or key types differ)"


def compatibility(
    left_spec: PartitionSpec,
    left_schema: Schema,
    right_spec: PartitionSpec,
    right_schema: Schema,
    on: Any,
) -> tuple[tuple[GroupKeyComponent, ...], str]:
    """The group key two spec versions share on the join keys ``on``.

    Returns the components (empty when the specs are incompatible) and the
    reason when there are none. Pure: no namespace is opened.
    """
    pairs = normalize_on(on)
    families = []
    for a, b in pairs:
        left_type, right_type = left_schema.field(a).type, right_schema.field(b).type
        usable = common_key_type(left_type, right_type) is not None
        families.append(join_key_family(left_type) if usable else None)
    left_fields = key_partition_fields(left_spec, left_schema, [a for a, _ in pairs])
    right_fields = key_partition_fields(right_spec, right_schema, [b for _, b in pairs])
    return shared_group_key(left_fields, right_fields, families)


def component_derivation(
    key_field: KeyPartitionField, component: GroupKeyComponent, family: TypeFamily | None
) -> Callable[[Any], Any] | None:
    """How ``key_field``'s partition value gives ``component``'s value, or None when it cannot."""
    if key_field.keys != component.keys:
        return None
    return key_field.transform.derivation(component.transform, family, key_field.field.result_type)
