"""How a leaf's schema evolves towards a target: the Lance operations, one step at a time.

A write into an existing leaf, and ``align_leaves``, may need the leaf's
columns to change first (``leaf_schema.leaf_columns_target``, ``aligned_layout``):
a column that lags a widening is rewritten in the wider type, columns are
renamed or dropped, namespace columns the leaf lacks are added. Lance keeps
every field id throughout (seed 000: a leaf's ids are the namespace's).
Staging commits the steps (``LeafChange.prepare``), each directly on top of
the last, before the write's own operation.
"""

from __future__ import annotations

import json

import lance
import pyarrow as pa
import pyarrow.compute as pc
from lance.fragment import FragmentMetadata
from lance.schema import LanceSchema

from lance_partitioned.errors import SchemaError
from lance_partitioned.format.schema import Schema, is_lossless_widening
from lance_partitioned.operations.leaf.field_ids import TOMBSTONE, IdLayout, lance_field_ids
from lance_partitioned.operations.leaf.leaf_schema import (
    lacks_nothing,
    leaf_columns_target,
    leaf_layout,
    namespace_ids_of_leaf,
)
from lance_partitioned.operations.leaf.nested import (
    Node,
    aligned,
    conform,
    lags,
    layout_node,
    namespace_node,
)


def next_evolution(base: lance.LanceDataset, target: IdLayout) -> object | None:
    """The next Lance operation taking ``base`` towards ``target``'s columns; None when there.

    Lance keeps every id. First a leaf column that lags a widening is rewritten
    in the target's type (``widening``: the only step that writes data, one new
    file per fragment for that column). Then, touching no data, a ``Project``
    renames and drops columns (so that a new column may take a name the leaf
    used for another id), and a ``Merge`` adds the new columns, NULL in
    existing rows.
    """
    current = leaf_layout(base)
    widen = widening(base, current, target)
    if widen is not None:
        return widen
    nodes = _nodes(current)
    targets = _nodes(target)
    # the leaf's columns the target keeps, renamed and with struct fields dropped as
    # the target has them, but none added yet (a Project adds no field)
    kept = [aligned(nodes[t], targets[t], widen=False, add=False) for t in targets if t in nodes]
    before = [(f.name, f.type, lids) for f, lids in zip(current.arrow, current.ids, strict=True)]
    if [(n.field.name, n.field.type, n.ids) for n in kept] != before:
        step = IdLayout.of(
            pa.schema([n.field for n in kept], metadata=target.arrow.metadata),
            [n.ids for n in kept],
        )
        return lance.LanceOperation.Project(step.lance_schema)
    have = {i for lids in current.ids for i in lids}
    if any(i not in have for lids in target.ids for i in lids):
        fragments = [f.metadata for f in base.get_fragments()]
        return lance.LanceOperation.Merge(fragments, target.lance_schema)
    return None


def _nodes(layout: IdLayout) -> dict[int, Node]:
    """Each column of ``layout`` with its fields' ids, by its own id, in column order."""
    nodes = (layout_node(f, lids) for f, lids in zip(layout.arrow, layout.ids, strict=True))
    return {n.id: n for n in nodes}


def widening(base: lance.LanceDataset, current: IdLayout, target: IdLayout) -> object | None:
    """A ``Merge`` giving ``base``'s columns the (wider) types ``target`` has for their
    ids, or None when no type differs.

    Lance's own ``alter_columns`` cast gives the column a new field id, which
    seed 000 forbids. So each fragment gets a new data file with the column
    cast (``merge_columns``, written under a temporary name and id), the new
    file's id is mapped to the column's own id and the old files' copy of it
    becomes a tombstone. Deletion files and fragment ids stay as they are.
    """
    targets = _nodes(target)
    # each lagging column in the wider type, with its own ids (struct fields renamed
    # and dropped as the target has them, none added: ``next_evolution`` adds them)
    lagging = {
        f.name: aligned(layout_node(f, lids), targets[lids[0]], widen=True, add=False)
        for f, lids in zip(current.arrow, current.ids, strict=True)
        if lids[0] in targets and lags(layout_node(f, lids), targets[lids[0]])
    }
    if not lagging:
        return None
    lagging_ids = {current.id_of(name) for name in lagging}
    for index in base.describe_indices():
        covered = set(getattr(index, "fields", None) or [])
        if covered & lagging_ids:
            raise SchemaError(
                f"leaf {base.uri!r}: index {index.name!r} covers column(s) {sorted(lagging)} "
                "whose type must widen to the namespace's before this write; drop the index "
                "(LanceDataset.drop_index), write, then create it again"
            )
    temp = {name: f"__lp_widen_{i}" for i, name in enumerate(lagging)}
    sources = {
        name: layout_node(
            current.arrow.field(name), current.ids[current.arrow.get_field_index(name)]
        )
        for name in lagging
    }

    def cast(batch: pa.RecordBatch) -> pa.RecordBatch:
        arrays = [conform(batch.column(n), sources[n], node, _cast) for n, node in lagging.items()]
        return pa.record_batch(arrays, names=list(temp.values()))

    mapping: dict[int, int] = {}
    fragments = []
    for frag in base.get_fragments():
        written, schema = frag.merge_columns(cast, columns=list(lagging))
        if not mapping:
            for name, node in lagging.items():
                mapping.update(
                    zip(lance_field_ids(schema.field(temp[name])), node.ids, strict=True)
                )
        fragments.append(written)
    fields = [
        lagging[f.name].field.with_name(f.name) if f.name in lagging else f for f in current.arrow
    ]
    ids = [
        lagging[f.name].ids if f.name in lagging else lids
        for f, lids in zip(current.arrow, current.ids, strict=True)
    ]
    layout = IdLayout.of(pa.schema(fields, metadata=current.arrow.metadata), ids)
    return lance.LanceOperation.Merge(_retarget(fragments, mapping), layout.lance_schema)


def _cast(name: str, col: pa.Array, target: pa.DataType) -> pa.Array:
    return pc.cast(col, target, safe=True)


def _retarget(fragments: list[FragmentMetadata], mapping: dict[int, int]) -> list[FragmentMetadata]:
    """Fragments whose new files' ids (``mapping``'s keys) take over the ids they map
    to: every other file's copy of those ids becomes a tombstone."""
    replaced = set(mapping.values())
    keep = lambda i: mapping.get(i, TOMBSTONE if i in replaced else i)  # noqa: E731
    out = []
    for frag in fragments:
        data = frag.to_json()
        data = json.loads(data) if isinstance(data, str) else data
        for f in data["files"]:
            f["fields"] = [keep(i) for i in f["fields"]]
        out.append(FragmentMetadata.from_json(json.dumps(data)))
    return out


def _file_field_ids(fragments: list[FragmentMetadata]) -> set[int]:
    return {i for frag in fragments for f in frag.files for i in f.fields if i >= 0}


def evolution_for(
    base: lance.LanceDataset, schema: Schema, fragments: list[FragmentMetadata], label: str
) -> object | None:
    """The next schema change ``base`` needs before ``fragments`` can be appended to it.

    The files may hold namespace columns the leaf lacks; the leaf gains them
    (``next_evolution``). None when the leaf has every column the files hold.
    """
    if lacks_nothing(base, schema):
        return None  # no column missing at all, so none the files hold
    target = leaf_columns_target(base, schema, label, only=_file_field_ids(fragments))
    return next_evolution(base, target.layout) if target.changes else None


def schema_for(
    base: lance.LanceDataset,
    schema: Schema | None,
    fragments: list[FragmentMetadata],
    label: str,
) -> LanceSchema:
    """The schema an ``Overwrite`` of ``base`` with ``fragments`` commits: the leaf's
    columns and ids, plus the namespace columns the files hold and the leaf lacks.

    Always a LanceSchema: Overwrite renumbers an Arrow schema, and the files'
    columns would then no longer match their field ids.
    """
    if schema is not None:
        target = leaf_columns_target(base, schema, label, only=_file_field_ids(fragments))
        if target.changes:
            return target.layout.lance_schema
    return base.lance_schema


def aligned_layout(schema: Schema, leaf: lance.LanceDataset, widen: bool = True) -> IdLayout:
    """``leaf``'s columns as the namespace has them now: each under its namespace name
    (and, with ``widen``, its namespace type where the leaf lags a widening), with
    the leaf's own field ids; columns the namespace dropped left out.

    No leaf column then shares a name with a namespace column of another field
    id, so a reader that matches columns by name (seed 003, ``DirectoryNamespace``
    clients, plain Lance) never reads a dropped column's values as a new one.
    """
    current = leaf_layout(leaf)
    fields: list[pa.Field] = []
    ids: list[tuple[int, ...]] = []
    for f, lids, fid in zip(current.arrow, current.ids, namespace_ids_of_leaf(leaf), strict=True):
        if not schema.has_id(fid):
            continue
        nf = schema.field_by_id(fid)
        if lids[0] == fid and pa.types.is_struct(f.type) and pa.types.is_struct(nf.type):
            # struct fields renamed and dropped by id (a drifted leaf's are not known)
            node = aligned(layout_node(f, lids), namespace_node(nf, fid), widen, add=False)
            f, lids = node.field, node.ids
        elif widen and is_lossless_widening(f.type, nf.type):
            f = f.with_type(nf.type)
        fields.append(f.with_name(nf.name))
        ids.append(lids)
    return IdLayout.of(pa.schema(fields, metadata=leaf.schema.metadata), ids)
