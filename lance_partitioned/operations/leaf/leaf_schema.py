"""Schema consistency between the namespace and its leaf tables (seed 003 §4).

Leaves keep the schema they were created with while the namespace schema
evolves (columns added, renamed, dropped, widened), so every read and write
maps namespace columns to leaf columns **by field id**:

| operation | namespace has | leaf has | behaviour |
|---|---|---|---|
| read | column | no column | reads as NULL |
| read | no column | column | ignored |
| read | column | other type | cast to the namespace type; error if impossible |
| write | column | no column | the leaf gains the column first (metadata only, older rows NULL) |
| write | no column | column | NULL written; error if the leaf column is not nullable |
| write | column | other type | cast to the leaf type; error if impossible |

A leaf column's **Lance field id** equals the namespace ``lance:field_id`` of the
column (seed 000), whatever evolution came before: new leaves and columns a
write adds to a leaf get exactly the namespace's ids (``operations.leaf.field_ids``).
Leaf column *names* may lag behind a rename: columns are matched by id.

Lance strips ``lance:``-prefixed field metadata from a dataset's schema, so a
leaf also records namespace field ids under ``LEAF_FIELD_ID_KEY``. Leaves
without it (written by other tools) are matched by their Lance ids. Leaves
written before ids were aligned carry the key with Lance ids that differ
(``check_leaf`` reports them; ``operations.evolve.realign`` fixes them).
"""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass

import lance
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import SchemaError
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache
from lance_partitioned.format.schema import FIELD_ID_KEY, Schema, is_lossless_widening
from lance_partitioned.operations.leaf.field_ids import (
    FieldIdLayoutError,
    IdLayout,
    lance_field_ids,
    namespace_field_ids,
    natural_field_ids,
)
from lance_partitioned.operations.leaf.nested import (
    Cast,
    Node,
    aligned,
    conform,
    incompatible,
    lacks,
    lags,
    layout_node,
    leaf_node,
    namespace_node,
)
from lance_partitioned.operations.write.input import check_lossless

LEAF_FIELD_ID_KEY = "lance-partitioned:field_id"

log = logging.getLogger(__name__)


def leaf_arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema a new leaf is written with: namespace columns, ids under a key Lance keeps."""
    return pa.schema([_leaf_field(f, schema.field_id(f.name)) for f in schema.arrow])


def _leaf_field(f: pa.Field, field_id: int) -> pa.Field:
    meta = {k: v for k, v in (f.metadata or {}).items() if k != FIELD_ID_KEY.encode()}
    meta[LEAF_FIELD_ID_KEY.encode()] = str(field_id).encode()
    return pa.field(f.name, f.type, f.nullable, meta)


# New leaves' layouts by namespace schema (JSON): computing one may ask Lance.
_layouts: BoundedCache = caches.register("leaf_schema.layouts", BoundedCache(maxsize=256))


def namespace_layout(schema: Schema) -> IdLayout:
    """A new leaf: the namespace's columns, each with its namespace field ids.

    Falls back to Lance's own numbering (logged once) for the rare namespace
    whose ids no Lance table can carry (``FieldIdLayoutError``); ``check_leaf``
    reports such leaves.
    """
    key = schema.to_json_str()
    hit = _layouts.get(key)
    if hit is None:
        hit = _namespace_layout(schema)
        _layouts.put(key, hit)
    return hit


def _namespace_layout(schema: Schema) -> IdLayout:
    arrow = leaf_arrow_schema(schema)
    try:
        layout = IdLayout.of(
            arrow, [namespace_field_ids(f, schema.field_id(f.name)) for f in schema.arrow]
        )
        layout.check()
        return layout
    except FieldIdLayoutError as exc:
        log.warning("new partitions get Lance's own field ids: %s", exc)
        return IdLayout.of(arrow, natural_field_ids(arrow))


def leaf_layout(ds: lance.LanceDataset) -> IdLayout:
    """An existing leaf's columns with the Lance ids it has."""
    return IdLayout.of(ds.schema, [lance_field_ids(f) for f in ds.lance_schema.fields()])


def namespace_ids_of_leaf(ds: lance.LanceDataset) -> list[int]:
    """The namespace field id of each top-level leaf column, in leaf order."""
    by_id = leaf_fields_by_id(ds)
    of_name = {f.name: fid for fid, f in by_id.items()}
    return [of_name[f.name] for f in ds.schema]


@dataclass(frozen=True)
class LeafColumnsTarget:
    """The columns (and Lance ids) an existing leaf has once a write has added what it lacks.

    ``namespace_ids[i]`` is the namespace field id column ``i`` holds (None for
    a column the namespace dropped). ``added`` names the columns the leaf gains;
    ``widened`` the leaf columns that lag a lossless widening of the namespace
    column (float32 under float64): the target has the namespace type, and the
    leaf's column is rewritten to it, under the same field id, before the write
    (``leaf_evolution.next_evolution``).
    """

    layout: IdLayout
    namespace_ids: tuple[int | None, ...]
    added: tuple[str, ...]
    widened: tuple[str, ...] = ()
    grown: tuple[str, ...] = ()  # struct columns that gain fields (``nested.aligned``)

    @property
    def changes(self) -> bool:
        """Whether the leaf must evolve before it matches the target."""
        return bool(self.added or self.widened or self.grown)


# Leaves (the open dataset objects: one pinned version each, so their columns never
# change) whose full ``leaf_columns_target`` against a namespace schema found no column
# missing. The writer computes it when it maps a leaf's columns; staging then
# commits on that same object and need not compute it again (about 0.1-0.3 ms of
# CPU per leaf, a third of a 1,000-partition commit's own work).
# Bounded by the datasets alive: an entry goes with its dataset.
_COMPLETE: weakref.WeakKeyDictionary[lance.LanceDataset, Schema] = caches.register(
    "leaf_schema.complete", weakref.WeakKeyDictionary()
)
_COMPLETE_LOCK = threading.Lock()


def lacks_nothing(ds: lance.LanceDataset, schema: Schema) -> bool:
    with _COMPLETE_LOCK:
        return _COMPLETE.get(ds) is schema


def leaf_columns_target(
    ds: lance.LanceDataset, schema: Schema, label: str, only: set[int] | None = None
) -> LeafColumnsTarget:
    """``ds`` with the namespace columns it lacks added under their namespace ids.

    With ``only``, just the lacking columns whose ids occur in ``only`` (the
    ids of data files about to be committed). When columns are added, leaf
    columns whose names lag a rename take their namespace names, and a column
    the namespace dropped gives way to a namespace column of the same name.
    """
    base = leaf_layout(ds)
    ns_ids = namespace_ids_of_leaf(ds)
    missing = [
        f.name
        for f in schema.arrow
        if schema.field_id(f.name) not in ns_ids
        and (only is None or only.intersection(namespace_field_ids(f, schema.field_id(f.name))))
    ]
    widened = _lagging(base, ns_ids, schema, only)
    grown = _grown(base, ns_ids, schema, only)
    if not missing and not widened and not grown:
        if only is None:
            with _COMPLETE_LOCK:
                _COMPLETE[ds] = schema
        ids = tuple(fid if schema.has_id(fid) else None for fid in ns_ids)
        return LeafColumnsTarget(base, ids, ())
    fields: list[pa.Field] = []
    ids: list[list[int]] = []
    held: list[int | None] = []
    for f, lids, fid in zip(base.arrow, base.ids, ns_ids, strict=True):
        if schema.has_id(fid):
            nf = schema.field_by_id(fid)
            if f.name in grown or (f.name in widened and pa.types.is_struct(f.type)):
                node = aligned(
                    layout_node(f, lids), namespace_node(nf, fid), f.name in widened, True
                )
                f, lids = node.field, node.ids
            elif f.name in widened:
                f = f.with_type(nf.type)
            fields.append(f.with_name(nf.name))
            held.append(fid)
        elif schema.has_field(f.name):
            continue  # dropped from the namespace, and its name now belongs to another column
        else:
            fields.append(f)
            held.append(None)
        ids.append(list(lids))
    used = {i for lids in ids for i in lids}
    for name in missing:
        nf = schema.field(name)
        nids = namespace_field_ids(nf, schema.field_id(name))
        clash = sorted(used.intersection(nids))
        if clash:
            raise SchemaError(
                f"partition {label}: cannot add column {name!r} with field ids {nids}: the leaf "
                f"already uses {clash} for other columns (its field ids drift from the "
                "namespace's); run realign_field_ids() first"
            )
        fields.append(_leaf_field(nf, nids[0]))
        ids.append(nids)
        held.append(nids[0])
    layout = IdLayout.of(pa.schema(fields, metadata=ds.schema.metadata), ids)
    try:
        layout.check()
    except FieldIdLayoutError as exc:
        raise SchemaError(f"partition {label}: cannot add columns {missing}: {exc}") from exc
    return LeafColumnsTarget(layout, tuple(held), tuple(missing), tuple(widened), tuple(grown))


def _lagging(base: IdLayout, ns_ids: list[int], schema: Schema, only: set[int] | None) -> list[str]:
    """Leaf columns (leaf names) whose type, or a struct field's, lags a lossless
    widening of the namespace's (``ns_ids[i]`` is the namespace id of column ``i``);
    with ``only``, just those whose field ids occur in it. Other type differences
    are not lags (``check_leaf`` reports them)."""
    out = []
    for f, lids, fid in zip(base.arrow, base.ids, ns_ids, strict=True):
        if not schema.has_id(fid):
            continue
        nf = schema.field_by_id(fid)
        # a data file lists a struct's fields, not always the struct itself
        if (
            only is not None
            and fid not in only
            and not (_nested(f, nf) and only.intersection(namespace_field_ids(nf, fid)))
        ):
            continue
        if is_lossless_widening(f.type, nf.type) or (
            _nested(f, nf) and lags(layout_node(f, lids), namespace_node(nf, fid))
        ):
            out.append(f.name)
    return out


def _grown(base: IdLayout, ns_ids: list[int], schema: Schema, only: set[int] | None) -> list[str]:
    """Leaf struct columns (leaf names) that lack fields the namespace added to them;
    with ``only``, just those lacking a field whose id occurs in it."""
    out = []
    for f, lids, fid in zip(base.arrow, base.ids, ns_ids, strict=True):
        if not (schema.has_id(fid) and _nested(f, schema.field_by_id(fid))):
            continue
        nf = schema.field_by_id(fid)
        wanted = set(namespace_field_ids(nf, fid)) - set(lids)
        if only is not None:
            wanted &= only
        if wanted and lacks(layout_node(f, lids), namespace_node(nf, fid)):
            out.append(f.name)
    return out


def _nested(leaf: pa.Field, ns: pa.Field) -> bool:
    """A struct column whose fields the leaf and the namespace may hold differently."""
    return (
        pa.types.is_struct(leaf.type)
        and pa.types.is_struct(ns.type)
        and not leaf.type.equals(ns.type)
    )


def leaf_fields_by_id(ds: lance.LanceDataset) -> dict[int, pa.Field]:
    """Namespace field id → the leaf's top-level field."""
    arrow = ds.schema
    out: dict[int, pa.Field] = {}
    missing = []
    for f in arrow:
        raw = (f.metadata or {}).get(LEAF_FIELD_ID_KEY.encode())
        if raw is None:
            missing.append(f.name)
        else:
            out[int(raw)] = f
    if missing:
        lance_ids = {lf.name(): lf.id() for lf in ds.lance_schema.fields()}
        for name in missing:
            out[lance_ids[name]] = arrow.field(name)
    return out


def _cast(name: str, col: pa.Array, target: pa.DataType, where: str) -> pa.Array:
    if col.type.equals(target):
        return col
    try:
        out = pc.cast(col, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaError(
            f"column {name!r}: cannot cast {col.type} to {target} {where}: {exc}"
        ) from exc
    # a leaf older than a widening (float32 → float64) would silently round
    check_lossless(
        name,
        col,
        out,
        f"{where}, whose leaf still stores {target} from before the column was widened, "
        "so only values that type holds exactly can be written to it",
    )
    return out


class ReadMapping:
    """How to read some namespace columns from one leaf and present them in namespace form."""

    def __init__(
        self,
        schema: Schema,
        columns: list[str],
        leaf: lance.LanceDataset,
        label: str,
        by_id: dict[int, pa.Field] | None = None,
    ):
        """``by_id``: ``leaf_fields_by_id(leaf)`` when the caller has it already (several
        mappings of one leaf: each call converts the leaf's schema again)."""
        self.label = label
        if by_id is None:
            by_id = leaf_fields_by_id(leaf)
        self.targets = [
            pa.field(c, schema.field(c).type, schema.field(c).nullable) for c in columns
        ]
        self.sources: list[pa.Field | None] = [by_id.get(schema.field_id(c)) for c in columns]
        # struct columns whose fields differ: read field by field, matched by id
        self.nested: dict[int, tuple[Node, Node]] = {}
        for i, (target, source) in enumerate(zip(self.targets, self.sources, strict=True)):
            if source is None or source.type.equals(target.type):
                continue
            if pa.types.is_struct(source.type) and pa.types.is_struct(target.type):
                ns = namespace_node(schema.field(target.name), schema.field_id(target.name))
                self.nested[i] = (leaf_node(leaf, source.name), ns)
                continue
            if not _castable(source.type, target.type):
                raise SchemaError(
                    f"partition {label}: column {target.name!r} is {source.type} in the leaf and "
                    f"{target.type} in the namespace; the leaf is inconsistent with the namespace schema"
                )

    @property
    def leaf_columns(self) -> list[str]:
        return [s.name for s in self.sources if s is not None]

    @property
    def is_identity(self) -> bool:
        """Every column exists in the leaf under its namespace name **and type**, so
        namespace SQL means the same on the leaf's own columns and Lance may evaluate it.

        A leaf whose column lags a widening (float32 under a float64 namespace
        column) is not: Lance would compare ``v = 0.1`` in float32, rounding the
        literal (docs/FORMAT.md "Leaves that lag a widening"). Such leaves are
        conformed to the namespace types first and filtered there.
        """
        return all(
            s is not None and s.name == t.name and s.type.equals(t.type)
            for s, t in zip(self.sources, self.targets, strict=True)
        )

    def conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        arrays = []
        where = f"reading partition {self.label}"
        for i, (target, source) in enumerate(zip(self.targets, self.sources, strict=True)):
            if source is None:
                arrays.append(pa.nulls(batch.num_rows, type=target.type))
            elif i in self.nested:
                leaf, ns = self.nested[i]
                arrays.append(conform(batch.column(source.name), leaf, ns, _caster(where)))
            else:
                col = batch.column(source.name)
                arrays.append(_cast(target.name, col, target.type, where))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(self.targets))

    def conform_table(self, table: pa.Table) -> pa.Table:
        """``conform`` for a whole leaf read at once: the same columns, names and types.

        When the leaf holds every column under its namespace type (the usual case),
        the leaf's column chunks are reused as they are (no copy, one call per leaf);
        otherwise each batch goes through ``conform`` (casts are checked per batch).
        """
        schema = pa.schema(self.targets)
        if all(
            s is not None and s.type.equals(t.type)
            for s, t in zip(self.sources, self.targets, strict=True)
        ):
            return pa.Table.from_arrays([table.column(s.name) for s in self.sources], schema=schema)
        return pa.Table.from_batches([self.conform(b) for b in table.to_batches()], schema=schema)


def _caster(where: str) -> Cast:
    """``_cast`` for ``nested.conform``: each struct field cast as a column is."""
    return lambda name, col, target: _cast(name, col, target, where)


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    try:
        pc.cast(pa.array([], type=src), dst)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False


class WriteMapping:
    """Turns batches in the namespace schema into batches for an existing leaf.

    The target (``layout``) is the leaf's own columns, with their Lance ids,
    plus the namespace columns the leaf lacks, with their namespace ids: the
    commit adds those to the leaf first (``leaf_columns_target``), metadata only.
    """

    def __init__(self, schema: Schema, leaf: lance.LanceDataset, label: str):
        self.schema = schema
        self.label = label
        target = leaf_columns_target(leaf, schema, label)
        self.layout = target.layout
        self.plan: list[tuple[pa.Field, pa.Field | None]] = [
            (lf, None if fid is None else schema.field_by_id(fid))
            for lf, fid in zip(self.layout.arrow, target.namespace_ids, strict=True)
        ]
        # struct columns whose fields differ from the namespace's: written field by
        # field, matched by id (the leaf has gained the fields it lacked)
        self.nested: dict[int, tuple[Node, Node]] = {
            i: (namespace_node(nf, schema.field_id(nf.name)), layout_node(lf, lids))
            for i, ((lf, nf), lids) in enumerate(zip(self.plan, self.layout.ids, strict=True))
            if nf is not None
            and pa.types.is_struct(lf.type)
            and pa.types.is_struct(nf.type)
            and not lf.type.equals(nf.type)
        }

    def conform(self, table: pa.Table) -> pa.Table:
        arrays = []
        where = f"writing partition {self.label}"
        for i, (lf, nf) in enumerate(self.plan):
            if i in self.nested:
                ns, leaf = self.nested[i]
                col = table.column(nf.name)  # type: ignore[union-attr]
                col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
                arrays.append(conform(col, ns, leaf, _caster(where)))
                continue
            if nf is None:
                if not lf.nullable:
                    raise SchemaError(
                        f"partition {self.label}: column {lf.name!r} is not in the namespace schema "
                        "and is not nullable in the leaf, so NULL cannot be written to it"
                    )
                arrays.append(pa.nulls(table.num_rows, type=lf.type))
                continue
            col = table.column(nf.name)
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            arrays.append(_cast(nf.name, col, lf.type, where))
        return pa.Table.from_arrays(arrays, schema=self.layout.arrow)


def namespace_ids_for(schema: Schema, field_id: int, lance_ids: list[int]) -> list[int]:
    """The ids a leaf column holding namespace field ``field_id`` must have (depth-first).

    ``lance_ids`` are the column's current Lance ids. Nested ids are compared
    only where the namespace column still exists with the same Lance layout;
    otherwise just the column's own id is known.
    """
    want = [field_id, *lance_ids[1:]]
    if not schema.has_id(field_id):
        return want
    nf = schema.field_by_id(field_id)
    if lance_ids[0] == field_id and pa.types.is_struct(nf.type):
        # a struct's fields are matched by id and evolve on their own (a leaf may
        # lack a field added since): the same count of ids is no sign of drift
        return want
    try:
        nested = namespace_field_ids(nf, field_id)
    except SchemaError:  # FieldIdLayoutError, or a nested namespace id
        return want
    return nested if len(nested) == len(lance_ids) else want


@dataclass(frozen=True)
class Drift:
    """A leaf column whose Lance field ids differ from the namespace's."""

    name: str
    lance_ids: tuple[int, ...]
    namespace_ids: tuple[int, ...]


def field_id_drift(schema: Schema, leaf: lance.LanceDataset) -> list[Drift]:
    """Leaf columns whose Lance ids are not the namespace ``lance:field_id`` (seed 000).

    Only leaves that record namespace ids under ``LEAF_FIELD_ID_KEY`` can
    drift (written by versions of this library before ids were aligned); other
    leaves are matched by their Lance ids, which then *are* the namespace ids.
    """
    out = []
    current = leaf_layout(leaf)
    for f, lids, fid in zip(current.arrow, current.ids, namespace_ids_of_leaf(leaf), strict=True):
        want = namespace_ids_for(schema, fid, list(lids))
        if list(lids) != want:
            out.append(Drift(f.name, tuple(lids), tuple(want)))
    return out


def realigned_layout(schema: Schema, leaf: lance.LanceDataset) -> tuple[IdLayout, dict[int, int]]:
    """The columns a realigned ``leaf`` keeps, with the namespace's ids, and the map
    from its current Lance ids to those (columns the namespace dropped are left out).

    Raises FieldIdLayoutError (naming the column) when no Lance table can carry them.
    """
    current = leaf_layout(leaf)
    fields: list[pa.Field] = []
    ids: list[list[int]] = []
    mapping: dict[int, int] = {}
    for f, lids, fid in zip(current.arrow, current.ids, namespace_ids_of_leaf(leaf), strict=True):
        if not schema.has_id(fid):
            continue  # the namespace dropped it: its data is ignored from now on
        want = namespace_field_ids(schema.field_by_id(fid), fid)
        if len(want) != len(lids):
            raise FieldIdLayoutError(
                f"column {f.name!r}: the leaf's nested fields {list(lids)} do not match the "
                f"namespace's {want}"
            )
        fields.append(f)
        ids.append(want)
        mapping.update(zip(lids, want, strict=True))
    layout = IdLayout.of(pa.schema(fields, metadata=leaf.schema.metadata), ids)
    layout.check()
    return layout, mapping


def check_leaf(schema: Schema, leaf: lance.LanceDataset, label: str) -> list[str]:
    """Inconsistencies between one leaf and the namespace schema (empty when consistent).

    A leaf column whose id the namespace retired (at or below
    ``schema.last_field_id``, dropped since) is legitimate: old leaves keep
    dropped columns. Only ids above the high-water mark are unknown.
    """
    problems = []
    drift = _drift_or_none(schema, leaf)
    if drift:
        try:
            realigned_layout(schema, leaf)
            remedy = "realign_field_ids() fixes it"
        except SchemaError as exc:  # FieldIdLayoutError
            remedy = f"it cannot be realigned: {exc}"
        problems.extend(
            f"partition {label}: column {d.name!r} has Lance field id(s) {list(d.lance_ids)} "
            f"but namespace field id(s) {list(d.namespace_ids)}; {remedy}"
            for d in drift
        )
    try:
        by_id = leaf_fields_by_id(leaf)
    except KeyError as exc:
        return [f"partition {label}: cannot map leaf columns to field ids ({exc})"]
    for fid, lf in by_id.items():
        if fid > schema.last_field_id:
            problems.append(
                f"partition {label}: column {lf.name!r} has field id {fid}, unknown to the namespace"
            )
            continue
        if not schema.has_id(fid):
            problems.extend(_name_clash(schema, lf.name, fid, label))
            continue  # a dropped column: ignored on read, NULL on write
        nf = schema.field_by_id(fid)
        if lf.name != nf.name:
            problems.extend(_name_clash(schema, lf.name, fid, label))
        if _nested(lf, nf):
            problems.extend(_nested_problems(leaf, lf, nf, fid, label))
        elif is_lossless_widening(lf.type, nf.type):
            problems.append(
                f"partition {label}: column {nf.name!r} is {lf.type} in the leaf, which lags the "
                f"namespace's {nf.type} (reads cast it up; the next write into the partition, "
                "or align_leaves(), widens it)"
            )
        elif not lf.type.equals(nf.type):
            # evolution only ever widens; any other difference means someone else wrote the leaf
            problems.append(
                f"partition {label}: column {nf.name!r} is {lf.type} in the leaf but {nf.type} in the namespace"
            )
    return problems


def _nested_problems(
    leaf: lance.LanceDataset, lf: pa.Field, nf: pa.Field, fid: int, label: str
) -> list[str]:
    """A struct column's fields against the namespace's, by id: renamed, added and
    dropped fields are evolution (reads and writes map them); a lagging widening is
    reported as a lag, any other type difference as an inconsistency."""
    node, ns = leaf_node(leaf, lf.name), namespace_node(nf, fid)
    if incompatible(node, ns):
        return [
            f"partition {label}: column {nf.name!r} is {lf.type} in the leaf but {nf.type} "
            "in the namespace"
        ]
    if lags(node, ns):
        return [
            f"partition {label}: column {nf.name!r} is {lf.type} in the leaf, which lags the "
            f"namespace's {nf.type} (reads cast it up; the next write into the partition, "
            "or align_leaves(), widens it)"
        ]
    return []


def _name_clash(schema: Schema, name: str, fid: int, label: str) -> list[str]:
    """A leaf column of field id ``fid`` named like a namespace column of another id:
    a reader matching columns by name would read its values as that column's."""
    if not schema.has_field(name) or schema.field_id(name) == fid:
        return []
    what = (
        "a dropped column" if not schema.has_id(fid) else f"column {schema.field_by_id(fid).name!r}"
    )
    return [
        f"partition {label}: leaf column {name!r} holds {what} (field id {fid}), not the "
        f"namespace's {name!r} (field id {schema.field_id(name)}); readers that match columns "
        "by name would read the wrong values; align_leaves() fixes it"
    ]


def _drift_or_none(schema: Schema, leaf: lance.LanceDataset) -> list[Drift]:
    try:
        return field_id_drift(schema, leaf)
    except (KeyError, SchemaError):  # unmappable leaves are reported below
        return []
