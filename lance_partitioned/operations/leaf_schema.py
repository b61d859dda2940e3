"""Schema consistency between the namespace and its leaf tables (seed 003 §4).

Leaves keep the schema they were created with while the namespace schema
evolves (columns added, renamed, dropped, widened), so every read and write
maps namespace columns to leaf columns **by field id**:

| operation | namespace has | leaf has | behaviour |
|---|---|---|---|
| read | column | no column | reads as NULL |
| read | no column | column | ignored |
| read | column | other type | cast to the namespace type; error if impossible |
| write | column | no column | error (unless every value written is NULL) |
| write | no column | column | NULL written; error if the leaf column is not nullable |
| write | column | other type | cast to the leaf type; error if impossible |

Lance strips ``lance:``-prefixed field metadata from a dataset's schema, so a
leaf records namespace field ids under ``LEAF_FIELD_ID_KEY``. Leaves without it
(written by other tools) fall back to Lance's own field ids, which equal the
namespace's for a leaf created before any evolution.
"""

from __future__ import annotations

import lance
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import SchemaError
from lance_partitioned.format.schema import FIELD_ID_KEY, Schema, is_lossless_widening
from lance_partitioned.operations.input import check_lossless

LEAF_FIELD_ID_KEY = "lance-partitioned:field_id"


def leaf_arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema a new leaf is written with: namespace columns, ids under a key Lance keeps."""
    fields = []
    for f in schema.arrow:
        meta = {k: v for k, v in (f.metadata or {}).items() if k != FIELD_ID_KEY.encode()}
        meta[LEAF_FIELD_ID_KEY.encode()] = str(schema.field_id(f.name)).encode()
        fields.append(pa.field(f.name, f.type, f.nullable, meta))
    return pa.schema(fields)


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

    def __init__(self, schema: Schema, columns: list[str], leaf: lance.LanceDataset, label: str):
        self.label = label
        by_id = leaf_fields_by_id(leaf)
        self.targets = [
            pa.field(c, schema.field(c).type, schema.field(c).nullable) for c in columns
        ]
        self.sources: list[pa.Field | None] = [by_id.get(schema.field_id(c)) for c in columns]
        for target, source in zip(self.targets, self.sources, strict=True):
            if (
                source is not None
                and not source.type.equals(target.type)
                and not _castable(source.type, target.type)
            ):
                raise SchemaError(
                    f"partition {label}: column {target.name!r} is {source.type} in the leaf and "
                    f"{target.type} in the namespace; the leaf is inconsistent with the namespace schema"
                )

    @property
    def leaf_columns(self) -> list[str]:
        return [s.name for s in self.sources if s is not None]

    @property
    def is_identity(self) -> bool:
        """Every column exists in the leaf under its namespace name (types may differ)."""
        return all(
            s is not None and s.name == t.name
            for s, t in zip(self.sources, self.targets, strict=True)
        )

    def conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        arrays = []
        for target, source in zip(self.targets, self.sources, strict=True):
            if source is None:
                arrays.append(pa.nulls(batch.num_rows, type=target.type))
            else:
                col = batch.column(source.name)
                arrays.append(
                    _cast(target.name, col, target.type, f"reading partition {self.label}")
                )
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(self.targets))


def _castable(src: pa.DataType, dst: pa.DataType) -> bool:
    try:
        pc.cast(pa.array([], type=src), dst)
        return True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False


class WriteMapping:
    """Turns batches in the namespace schema into batches in an existing leaf's schema."""

    def __init__(
        self, schema: Schema, leaf_schema: pa.Schema, leaf_by_id: dict[int, pa.Field], label: str
    ):
        self.schema = schema
        self.leaf_schema = leaf_schema
        self.label = label
        ns_by_id = {schema.field_id(f.name): f for f in schema.arrow}
        self.plan: list[tuple[pa.Field, pa.Field | None]] = []
        id_of_leaf = {f.name: fid for fid, f in leaf_by_id.items()}
        for lf in leaf_schema:
            nf = ns_by_id.get(id_of_leaf.get(lf.name, -1))
            self.plan.append((lf, nf))
        covered = {id_of_leaf[lf.name] for lf in leaf_schema if lf.name in id_of_leaf}
        self.unmapped = [f.name for fid, f in ns_by_id.items() if fid not in covered]

    def conform(self, table: pa.Table) -> pa.Table:
        for name in self.unmapped:
            if table.column(name).null_count != table.num_rows:
                raise SchemaError(
                    f"partition {self.label} has no column {name!r} (it was added to the namespace "
                    "after this partition was created); rewrite the partition before writing values to it"
                )
        arrays = []
        for lf, nf in self.plan:
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
            arrays.append(_cast(nf.name, col, lf.type, f"writing partition {self.label}"))
        return pa.Table.from_arrays(arrays, schema=self.leaf_schema)


def check_leaf(schema: Schema, leaf: lance.LanceDataset, label: str) -> list[str]:
    """Inconsistencies between one leaf and the namespace schema (empty when consistent)."""
    problems = []
    try:
        by_id = leaf_fields_by_id(leaf)
    except KeyError as exc:
        return [f"partition {label}: cannot map leaf columns to field ids ({exc})"]
    for fid, lf in by_id.items():
        if fid > schema.max_field_id:
            problems.append(
                f"partition {label}: column {lf.name!r} has field id {fid}, unknown to the namespace"
            )
            continue
        if not schema.has_id(fid):
            continue  # a dropped column: ignored on read, NULL on write
        nf = schema.field_by_id(fid)
        # evolution only ever widens; any other difference means someone else wrote the leaf
        if not lf.type.equals(nf.type) and not is_lossless_widening(lf.type, nf.type):
            problems.append(
                f"partition {label}: column {nf.name!r} is {lf.type} in the leaf but {nf.type} in the namespace"
            )
    return problems
