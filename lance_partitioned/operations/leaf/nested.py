"""Struct columns of a leaf against the namespace's: their fields matched by field id.

A struct's fields evolve as columns do (``Schema.add_column("s.z")``,
``rename_column("s.a", …)``, ``drop_column``, ``widen_column``), so a leaf written
before holds the struct as it was: a field under an older name or type, fields
the namespace dropped, none of those it added. Every nested field has its own
Lance field id, equal to the namespace's ``lance:field_id`` (seed 000), so the
two are matched by id at every depth, never by name or position:

- reads give the namespace's struct: a field the leaf lacks reads as NULL, one
  it holds is cast to the namespace type (``conform``);
- writes give the leaf's struct (``conform`` the other way round), after the
  leaf gained the fields it lacks (``aligned``, ``add=True``);
- ``align_leaves`` renames and drops the leaf's fields (``aligned``), metadata only.

Only struct fields are matched by id; a list's or a map's items are cast as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import lance
import pyarrow as pa
from lance.schema import LanceSchema

from lance_partitioned.format.schema import is_lossless_widening
from lance_partitioned.operations.leaf.field_ids import lance_field_ids, namespace_field_ids


@dataclass(frozen=True)
class Node:
    """A column or struct field with its Lance ids (depth-first, Lance's layout) and,
    for a struct, its fields by id, in order."""

    field: pa.Field
    ids: tuple[int, ...]
    kids: dict[int, Node] = field(default_factory=dict)

    @property
    def id(self) -> int:
        return self.ids[0]

    @property
    def is_struct(self) -> bool:
        return pa.types.is_struct(self.field.type) and bool(self.kids)


def leaf_node(ds: lance.LanceDataset, name: str) -> Node:
    """Leaf column ``name`` with the Lance ids of its fields."""
    return layout_node(ds.schema.field(name), lance_field_ids(ds.lance_schema.field(name)))


def layout_node(f: pa.Field, ids: Sequence[int]) -> Node:
    """Column ``f`` whose Lance ids are ``ids`` (depth-first, as ``IdLayout`` holds them)."""
    return _walk(f, LanceSchema.from_pyarrow(pa.schema([f])).fields()[0], ids)


def _walk(f: pa.Field, lf: object, ids: Sequence[int]) -> Node:
    kids: dict[int, Node] = {}
    if pa.types.is_struct(f.type):
        pos = 1
        for i, lchild in enumerate(lf.children()):  # type: ignore[attr-defined]
            n = len(lance_field_ids(lchild))
            child = _walk(f.type.field(i), lchild, ids[pos : pos + n])
            pos += n
            kids[child.id] = child
    return Node(f, tuple(ids), kids)


def namespace_node(f: pa.Field, field_id: int) -> Node:
    """Namespace column ``f`` (struct fields carrying ``lance:field_id``) with its ids."""
    return layout_node(f, namespace_field_ids(f, field_id))


def differs(leaf: Node, ns: Node) -> bool:
    """Whether the leaf's struct differs from the namespace's in any field (name, type,
    a field added or dropped); False for columns that are not structs."""
    if not (leaf.is_struct and ns.is_struct):
        return False
    return (
        list(leaf.kids) != list(ns.kids)
        or any(k.field.name != ns.kids[i].field.name for i, k in leaf.kids.items())
        or any(
            differs(k, ns.kids[i])
            or (not k.is_struct and not k.field.type.equals(ns.kids[i].field.type))
            for i, k in leaf.kids.items()
        )
    )


def lags(leaf: Node, ns: Node) -> bool:
    """Whether a field of the leaf's struct lags a lossless widening of the namespace's."""
    if not (leaf.is_struct and ns.is_struct):
        return is_lossless_widening(leaf.field.type, ns.field.type)
    return any(lags(k, ns.kids[i]) for i, k in leaf.kids.items() if i in ns.kids)


def lacks(leaf: Node, ns: Node) -> bool:
    """Whether the namespace's struct has a field (at any depth) the leaf's lacks."""
    if not (leaf.is_struct and ns.is_struct):
        return False
    return any(i not in leaf.kids or lacks(leaf.kids[i], k) for i, k in ns.kids.items())


def aligned(leaf: Node, ns: Node, widen: bool, add: bool) -> Node:
    """The leaf's column as the namespace has it: fields under their namespace names,
    fields the namespace dropped left out; with ``widen`` the namespace's types where
    the leaf lags a widening; with ``add`` the fields the leaf lacks appended, with
    their namespace ids. Lance keeps every id the leaf has."""
    name = ns.field.name
    if not (leaf.is_struct and ns.is_struct):
        wider = widen and is_lossless_widening(leaf.field.type, ns.field.type)
        typ = ns.field.type if wider else leaf.field.type
        return Node(pa.field(name, typ, leaf.field.nullable, leaf.field.metadata), leaf.ids)
    kids = [aligned(k, ns.kids[i], widen, add) for i, k in leaf.kids.items() if i in ns.kids]
    if add:
        kids += [k for i, k in ns.kids.items() if i not in leaf.kids]
    if not kids:  # every field dropped (the namespace then added others): kept as they are
        kids = list(leaf.kids.values())
    typ = pa.struct([k.field for k in kids])
    ids = (leaf.id, *(i for k in kids for i in k.ids))
    return Node(
        pa.field(name, typ, leaf.field.nullable, leaf.field.metadata), ids, {k.id: k for k in kids}
    )


Cast = Callable[[str, pa.Array, pa.DataType], pa.Array]


def conform(array: pa.Array, src: Node, dst: Node, cast: Cast, path: str = "") -> pa.Array:
    """``array`` (of ``src``'s type) as ``dst``'s type, struct fields matched by id: a
    field ``src`` lacks is NULL, one ``dst`` lacks is left out, others are converted by
    ``cast(path, array, type)`` (checked casts, leaf_schema's)."""
    path = path or src.field.name
    if isinstance(array, pa.ChunkedArray):
        chunks = [conform(c, src, dst, cast, path) for c in array.chunks]
        return pa.chunked_array(chunks, type=dst.field.type)
    if not (src.is_struct and dst.is_struct):
        return cast(path, array, dst.field.type)
    # ``flatten`` gives each field with its struct's NULLs merged in, offset applied
    fields = dict(zip(src.kids, array.flatten(), strict=True))
    out = [
        conform(fields[i], src.kids[i], k, cast, f"{path}.{k.field.name}")
        if i in src.kids
        else pa.nulls(len(array), k.field.type)
        for i, k in dst.kids.items()
    ]
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(out, fields=[k.field for k in dst.kids.values()], mask=mask)


def incompatible(leaf: Node, ns: Node) -> bool:
    """Whether a field the leaf and the namespace share differs in type other than by a
    lossless widening (names, added and dropped fields are evolution, not this)."""
    if leaf.is_struct and ns.is_struct:
        return any(incompatible(k, ns.kids[i]) for i, k in leaf.kids.items() if i in ns.kids)
    t, nt = leaf.field.type, ns.field.type
    return not (t.equals(nt) or is_lossless_widening(t, nt))
