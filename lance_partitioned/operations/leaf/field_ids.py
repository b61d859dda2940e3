"""Giving leaf tables the namespace's field ids (seed 000: ids "must remain
consistent across partition tables").

Lance assigns field ids itself: depth-first from 0 when a dataset is created,
``max + 1`` for columns added later, and it never renumbers a column. The
namespace's ids have gaps once a column is dropped, so a leaf created with the
namespace's columns would number them ``0, 1, 2, …`` while the namespace says
``0, 2, 3, …``. What Lance does honour (measured on pylance 14):

- a ``LanceSchema`` keeps its ids when committed with ``Overwrite`` on an
  *existing* dataset, or with ``Merge``/``Project`` that keep every existing id;
- a data file maps its columns to field ids through ``DataFile.fields`` in the
  fragment metadata (Lance format: "each data file should contain a distinct
  set of field ids"), which readers use; ``-2`` marks a column to ignore.

So we write data files with Lance's natural ids, rewrite ``DataFile.fields`` to
the wanted ids, and commit them with a ``LanceSchema`` carrying the wanted ids.
Such a schema is obtained from Lance itself: an empty in-memory dataset is
created with one placeholder column per unused id (Lance numbers them
depth-first), and the placeholders are dropped (Lance keeps the other ids).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import lance
import pyarrow as pa
from lance.fragment import FragmentMetadata
from lance.schema import LanceSchema

from lance_partitioned.errors import FieldIdLayoutError
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache
from lance_partitioned.format.schema import FIELD_ID_KEY

PLACEHOLDER_PREFIX = "__lp_unused_id_"
TOMBSTONE = -2  # Lance: a data-file column to ignore


def lance_field_ids(field: object) -> list[int]:
    """Depth-first ids of a ``LanceField`` and its children (Lance's own numbering order)."""
    out = [field.id()]  # type: ignore[attr-defined]
    for child in field.children():  # type: ignore[attr-defined]
        out.extend(lance_field_ids(child))
    return out


def natural_field_ids(arrow: pa.Schema) -> list[list[int]]:
    """The ids Lance gives each top-level column of a dataset created with ``arrow``."""
    return [lance_field_ids(f) for f in LanceSchema.from_pyarrow(arrow).fields()]


def _meta_id(field: pa.Field | None) -> int | None:
    raw = None if field is None else (field.metadata or {}).get(FIELD_ID_KEY.encode())
    return None if raw is None else int(raw)


def namespace_field_ids(field: pa.Field, field_id: int) -> list[int]:
    """The Lance ids (depth-first, as Lance lays out this column) a namespace column must have.

    ``field`` is the namespace field (children carry ``lance:field_id``). Lance
    models struct children and list items like the namespace; a fixed-size
    list's item has no Lance field (its namespace id stays unused); a map has
    Lance's ``entries`` struct, which takes the id just before the key's.
    """
    lance_top = LanceSchema.from_pyarrow(pa.schema([field])).fields()[0]
    out: list[int] = []

    def walk(lf: object, af: pa.Field | None, fid: int | None, path: str) -> None:
        if fid is None:
            raise FieldIdLayoutError(f"field {path!r} has no {FIELD_ID_KEY}")
        out.append(fid)
        kids = lf.children()  # type: ignore[attr-defined]
        if not kids:
            return
        t = None if af is None else af.type
        if t is not None and pa.types.is_struct(t):
            arrow_kids: list[pa.Field | None] = [t.field(i) for i in range(t.num_fields)]
            pairs = [(k, a, _meta_id(a)) for k, a in zip(kids, arrow_kids, strict=True)]
        elif t is not None and pa.types.is_map(t):
            (entries,) = kids
            key_id = _meta_id(t.key_field)
            entries_id = None if key_id is None else key_id - 1
            if entries_id is None or entries_id <= fid:
                raise FieldIdLayoutError(
                    f"map column {path!r}: no id is reserved for Lance's entries field "
                    f"between the map ({fid}) and its key ({key_id})"
                )
            out.append(entries_id)
            ek, ev = entries.children()
            walk(ek, t.key_field, key_id, f"{path}.key")
            walk(ev, t.item_field, _meta_id(t.item_field), f"{path}.value")
            return
        elif t is not None and (pa.types.is_list(t) or pa.types.is_large_list(t)):
            pairs = [(kids[0], t.value_field, _meta_id(t.value_field))]
        else:
            raise FieldIdLayoutError(f"field {path!r}: unexpected Lance children for {t}")
        for k, a, i in pairs:
            walk(k, a, i, f"{path}.{k.name()}")

    walk(lance_top, field, field_id, field.name)
    return out


def _placeholder(fid: int, taken: set[str]) -> pa.Field:
    name = f"{PLACEHOLDER_PREFIX}{fid}"
    if name in taken:
        raise FieldIdLayoutError(f"a column is named {name!r}, which is reserved")
    return pa.field(name, pa.null(), True)


@dataclass(frozen=True)
class _Unit:
    """A part of a column Lance numbers in one step: ``field`` (restricted to the
    children that continue its depth-first numbering) with ids ``ids``, consecutive
    from ``ids[0]``, added to the struct at ``parent`` (``()``: a top-level column)."""

    parent: tuple[str, ...]
    field: pa.Field
    ids: tuple[int, ...]


def _units(f: pa.Field, lf: object, ids: Sequence[int], parent: tuple[str, ...]) -> list[_Unit]:
    """``f``'s subtree as units: ``f`` with the struct children that continue its numbering,
    then the units of every other child (a child added to the struct later, or one
    after a dropped sibling: Lance gives an added field ``max + 1``)."""
    kids = lf.children()  # type: ignore[attr-defined]
    if not (pa.types.is_struct(f.type) and kids):
        if list(ids) != list(range(ids[0], ids[0] + len(ids))):
            raise FieldIdLayoutError(
                f"column {'.'.join((*parent, f.name))!r}: its nested fields need ids "
                f"{list(ids[1:])}, but Lance numbers them consecutively from {ids[0] + 1}"
            )
        return [_Unit(parent, f, tuple(ids))]
    kept: list[pa.Field] = []
    kept_ids = [ids[0]]
    later: list[_Unit] = []
    pos = 1
    for i, lchild in enumerate(kids):
        n = len(lance_field_ids(lchild))
        sub = _units(f.type.field(i), lchild, ids[pos : pos + n], (*parent, f.name))
        pos += n
        if sub[0].ids[0] == kept_ids[0] + len(kept_ids):
            kept.append(sub[0].field)
            kept_ids.extend(sub[0].ids)
            sub = sub[1:]
        later.extend(sub)
    if not kept:
        # every child comes later: Lance cannot create an empty struct, so a placeholder
        # child takes the id after the struct's (the first child it had, since dropped)
        kept.append(_placeholder(ids[0] + 1, set()))
        kept_ids.append(ids[0] + 1)
    typ = pa.struct(kept)
    return [_Unit(parent, pa.field(f.name, typ, f.nullable, f.metadata), tuple(kept_ids)), *later]


def _nest(parent: tuple[str, ...], field: pa.Field) -> pa.Field:
    """``field`` inside the structs ``parent`` names: what ``add_columns`` takes to add
    a child to a nested struct."""
    for name in reversed(parent):
        field = pa.field(name, pa.struct([field]))
    return field


def _lay_out(
    fields: Sequence[pa.Field], lance_fields: Sequence[object], ids: Sequence[Sequence[int]]
) -> tuple[pa.Schema, tuple[tuple[tuple[str, ...], pa.Field], ...], tuple[str, ...]]:
    """How Lance comes to number ``fields`` with ``ids``: the columns a new dataset is
    created with, the fields then added one at a time (``(parent, field)``), and the
    placeholder paths to drop at the end.

    Lance numbers a new dataset depth-first from 0 and each added field from the
    largest id + 1; an id no column has is taken by a placeholder column (dropped
    last, Lance keeps the other ids). The units are created or added in id order.
    """
    units = [
        u for f, lf, w in zip(fields, lance_fields, ids, strict=True) for u in _units(f, lf, w, ())
    ]
    units.sort(key=lambda u: u.ids[0])
    taken = {f.name for f in fields}
    create: list[pa.Field] = []
    adds: list[tuple[tuple[str, ...], pa.Field]] = []
    drops: list[str] = []
    nxt = 0
    for u in units:
        want = u.ids[0]
        if want < nxt:
            path = ".".join((*u.parent, u.field.name))
            raise FieldIdLayoutError(
                f"column {path!r} needs field id {want}, but Lance would number it {nxt} or more"
            )
        for gap in range(nxt, want):
            ph = _placeholder(gap, taken)
            if adds:
                adds.append(((), ph))
            else:
                create.append(ph)
            drops.append(ph.name)
        if u.parent or adds:
            adds.append((u.parent, u.field))
        else:
            create.append(u.field)
        drops.extend(_placeholder_children(u.parent, u.field))
        nxt = want + len(u.ids)
    return pa.schema(create), tuple(adds), tuple(drops)


def _placeholder_children(parent: tuple[str, ...], f: pa.Field) -> list[str]:
    """Paths of the placeholder children ``_units`` put in emptied structs of ``f``."""
    if not pa.types.is_struct(f.type):
        return []
    out = []
    for k in f.type:
        if k.name.startswith(PLACEHOLDER_PREFIX):
            out.append(".".join((*parent, f.name, k.name)))
        else:
            out.extend(_placeholder_children((*parent, f.name), k))
    return out


# LanceSchemas Lance made for (columns created, fields added, placeholders dropped).
_templates: BoundedCache = caches.register("field_ids.templates", BoundedCache(maxsize=256))


def _template(
    create: pa.Schema, adds: tuple[tuple[tuple[str, ...], pa.Field], ...], drops: tuple[str, ...]
) -> LanceSchema:
    """A LanceSchema made by Lance: create ``create`` in memory, add ``adds`` in order
    (each an all-NULL field, numbered by Lance), drop ``drops``."""
    key = (
        create.serialize().to_pybytes(),
        tuple((p, pa.schema([f]).serialize().to_pybytes()) for p, f in adds),
        drops,
    )
    hit = _templates.get(key)
    if hit is not None:
        return hit
    # nothing is written to storage: an in-memory dataset, discarded after use
    ds = lance.write_dataset(create.empty_table(), f"memory://lp-ids-{uuid.uuid4().hex}")
    for parent, field in adds:
        ds.add_columns(_nest(parent, field))
    if drops:
        ds.drop_columns(list(drops))
    schema = ds.lance_schema
    _templates.put(key, schema)
    return schema


@dataclass(frozen=True)
class IdLayout:
    """Columns of a leaf together with the Lance field id each must have.

    ``arrow`` is the schema data files are written with (in that column
    order); ``ids[i]`` lists the wanted Lance ids of column ``i`` depth-first,
    in Lance's layout of the column (``natural_field_ids``).
    """

    arrow: pa.Schema
    ids: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, arrow: pa.Schema, ids: Sequence[Sequence[int]]) -> IdLayout:
        # Lance honours lance:field_id metadata when writing files into an
        # existing dataset (and ignores it for a new one): never let it in
        arrow = without_field_id_metadata(arrow)
        natural = natural_field_ids(arrow)
        ids = tuple(tuple(i) for i in ids)
        for f, n, w in zip(arrow, natural, ids, strict=True):
            if len(n) != len(w):
                raise FieldIdLayoutError(
                    f"column {f.name!r}: Lance lays it out as {len(n)} fields, got {len(w)} ids"
                )
        flat = [i for w in ids for i in w]
        if len(set(flat)) != len(flat):
            raise FieldIdLayoutError(f"field ids {flat} are not unique")
        return cls(arrow, ids)

    @property
    def is_natural(self) -> bool:
        """Lance's own numbering of a new dataset already gives the wanted ids."""
        flat = [i for w in self.ids for i in w]
        return flat == list(range(len(flat)))

    def id_of(self, name: str) -> int:
        return self.ids[self.arrow.get_field_index(name)][0]

    @functools.cached_property
    def _placed(
        self,
    ) -> tuple[pa.Schema, tuple[tuple[tuple[str, ...], pa.Field], ...], tuple[str, ...]]:
        # Lance numbers columns in schema order: lay them out by id (a leaf's
        # column order carries no meaning; readers match columns by id)
        order = sorted(range(len(self.arrow)), key=lambda i: self.ids[i][0])
        fields = [self.arrow.field(i) for i in order]
        lance_fields = LanceSchema.from_pyarrow(pa.schema(fields)).fields()
        create, adds, drops = _lay_out(fields, lance_fields, [self.ids[k] for k in order])
        return pa.schema(create, metadata=self.arrow.metadata), adds, drops

    def check(self) -> None:
        """Raise FieldIdLayoutError unless a Lance table can carry exactly these ids."""
        self._placed  # noqa: B018 - computed for its errors

    @property
    def lance_schema(self) -> LanceSchema:
        """A LanceSchema with exactly the wanted ids (checked against Lance's answer)."""
        schema = _template(*self._placed)
        got = sorted(tuple(lance_field_ids(f)) for f in schema.fields())
        if got != sorted(self.ids):
            raise FieldIdLayoutError(f"Lance numbered the columns {got}, wanted {sorted(self.ids)}")
        return schema

    def remap(self, fragments: Sequence[FragmentMetadata]) -> list[FragmentMetadata]:
        """Fragments written with ``arrow`` (Lance's natural ids) → the same files under ``ids``.

        Raises if a file holds an id Lance's natural numbering of ``arrow`` does
        not have: the column it holds could not be told (never guessed).
        """
        mapping, identity = self._natural_to_wanted
        if not identity:
            return remap_fragments(fragments, mapping, strict=True)
        # Lance's numbering already gives the wanted ids (the common case): the
        # fragments stand as written, after the same check remap_fragments makes
        for frag in fragments:
            for f in frag.files:
                unknown = [i for i in f.fields if i != TOMBSTONE and i not in mapping]
                if unknown:
                    raise FieldIdLayoutError(
                        f"data file {f.path!r} holds field ids {unknown} that Lance's "
                        f"numbering of the written columns ({sorted(mapping)}) does not have"
                    )
        return list(fragments)

    @functools.cached_property
    def _natural_to_wanted(self) -> tuple[dict[int, int], bool]:
        # computed once per layout: a write remaps the fragments of every leaf it creates
        natural = [i for w in natural_field_ids(self.arrow) for i in w]
        wanted = [i for w in self.ids for i in w]
        return dict(zip(natural, wanted, strict=True)), natural == wanted


def without_field_id_metadata(arrow: pa.Schema) -> pa.Schema:
    """``arrow`` without ``lance:field_id`` metadata at any depth."""
    key = FIELD_ID_KEY.encode()

    def strip_type(t: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct([strip(t.field(i)) for i in range(t.num_fields)])
        if pa.types.is_map(t):
            return pa.map_(strip(t.key_field), strip(t.item_field), keys_sorted=t.keys_sorted)
        if pa.types.is_large_list(t):
            return pa.large_list(strip(t.value_field))
        if pa.types.is_fixed_size_list(t):
            return pa.list_(strip(t.value_field), t.list_size)
        if pa.types.is_list(t):
            return pa.list_(strip(t.value_field))
        return t

    def strip(f: pa.Field) -> pa.Field:
        meta = {k: v for k, v in (f.metadata or {}).items() if k != key}
        return pa.field(f.name, strip_type(f.type), f.nullable, meta or None)

    return pa.schema([strip(f) for f in arrow], metadata=arrow.metadata)


def remap_fragments(
    fragments: Sequence[FragmentMetadata], mapping: dict[int, int], strict: bool = False
) -> list[FragmentMetadata]:
    """Rewrite ``DataFile.fields`` through ``mapping``.

    Ids ``mapping`` lacks become tombstones (the column is ignored), or with
    ``strict`` raise FieldIdLayoutError.
    """
    out = []
    for frag in fragments:
        data = frag.to_json()
        for f in data["files"]:
            unknown = [i for i in f["fields"] if i != TOMBSTONE and i not in mapping]
            if unknown and strict:
                raise FieldIdLayoutError(
                    f"data file {f['path']!r} holds field ids {unknown} that Lance's numbering of "
                    f"the written columns ({sorted(mapping)}) does not have"
                )
            f["fields"] = [
                TOMBSTONE if i == TOMBSTONE else mapping.get(i, TOMBSTONE) for i in f["fields"]
            ]
        out.append(FragmentMetadata.from_json(json.dumps(data)))
    return out
