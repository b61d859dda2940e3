"""The namespace schema: an Arrow schema whose every field carries ``lance:field_id``.

Field ids are what partition specs reference (``source_ids``), so they must be
stable across renames and never reused (seed 000). A ``Schema`` therefore
carries a high-water mark, ``last_field_id``: the largest id ever assigned,
dropped columns included, persisted beside the schema under
``LAST_FIELD_ID_KEY`` (docs/FORMAT.md §2). New columns get ids above it. At creation they are assigned
depth-first from 0, as Lance assigns them to a new dataset (a map's
``entries`` struct, which Arrow metadata cannot label, keeps an id of its own
between the map and its key, as in Lance; a fixed-size list's item has an id
that Lance does not use).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.errors import SchemaError
from lance_partitioned.format.type_json import (
    TypeConversionError,
    arrow_schema_to_json,
    json_to_arrow_schema,
)

FIELD_ID_KEY = "lance:field_id"
# our own ``__manifest`` table-metadata key (other readers ignore it): the
# largest field id ever assigned in the namespace, written with every schema change
LAST_FIELD_ID_KEY = "lance-partitioned:last_field_id"


def recorded_last_field_id(metadata: dict[str, str]) -> int | None:
    """The high-water mark recorded in ``__manifest`` metadata, or None when absent.

    Namespaces written by 0.1 or by other implementations have no such key; a
    value that is not a non-negative integer is treated as absent too (the
    caller then derives a safe bound, never trusting a damaged one).
    """
    try:
        value = int(metadata[LAST_FIELD_ID_KEY])
    except (KeyError, TypeError, ValueError):
        return None
    return value if value >= 0 else None


def _field_id(field: pa.Field) -> int | None:
    meta = field.metadata or {}
    raw = meta.get(FIELD_ID_KEY.encode())
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise SchemaError(
            f"field {field.name!r} has a non-integer {FIELD_ID_KEY}: {raw!r}"
        ) from exc


def _with_id(field: pa.Field, field_id: int) -> pa.Field:
    meta = dict(field.metadata or {})
    meta[FIELD_ID_KEY.encode()] = str(field_id).encode()
    return field.with_metadata(meta)


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_field]
    return []


def _rebuild(t: pa.DataType, children: list[pa.Field]) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct(children)
    if pa.types.is_map(t):
        return pa.map_(children[0], children[1], keys_sorted=t.keys_sorted)
    if pa.types.is_large_list(t):
        return pa.large_list(children[0])
    if pa.types.is_fixed_size_list(t):
        return pa.list_(children[0], t.list_size)
    if pa.types.is_list(t):
        return pa.list_(children[0])
    return t


def _assign_ids(field: pa.Field, counter: list[int]) -> pa.Field:
    """Depth-first assignment: parent first, then its children in order."""
    my_id = counter[0]
    counter[0] += 1
    if pa.types.is_map(field.type):
        # Lance gives a map's entries struct its own id (depth-first, before the
        # key): reserve it, so leaves can carry exactly the namespace's ids
        counter[0] += 1
    kids = [_assign_ids(c, counter) for c in _children(field.type)]
    typ = _rebuild(field.type, kids) if kids else field.type
    return _with_id(pa.field(field.name, typ, field.nullable, field.metadata), my_id)


def _strip_ids(t: pa.DataType) -> pa.DataType:
    kids = _children(t)
    if not kids:
        return t
    plain = []
    for c in kids:
        meta = {k: v for k, v in (c.metadata or {}).items() if k != FIELD_ID_KEY.encode()}
        plain.append(pa.field(c.name, _strip_ids(c.type), c.nullable, meta or None))
    return _rebuild(t, plain)


def is_lossless_widening(src: pa.DataType, dst: pa.DataType) -> bool:
    """Type promotions a column may take without rewriting data (and without moving buckets)."""
    t = pa.types
    if src.equals(dst):
        return False
    if t.is_signed_integer(src) and t.is_signed_integer(dst):
        return dst.bit_width > src.bit_width
    if t.is_unsigned_integer(src) and t.is_integer(dst):
        return dst.bit_width > src.bit_width
    if t.is_floating(src) and t.is_floating(dst):
        return dst.bit_width > src.bit_width
    if t.is_decimal(src) and t.is_decimal(dst):
        return dst.scale == src.scale and dst.precision > src.precision
    return (t.is_string(src) and t.is_large_string(dst)) or (
        t.is_binary(src) and t.is_large_binary(dst)
    )


def _walk(fields: list[pa.Field], prefix: str = "") -> Iterator[tuple[str, pa.Field]]:
    for f in fields:
        path = f"{prefix}{f.name}"
        yield path, f
        yield from _walk(_children(f.type), prefix=f"{path}.")


def check_column_names(fields: Sequence[pa.Field], top_level: bool = True) -> None:
    """Refuse names Lance cannot store or read back, before anything is written.

    Lance refuses a top-level name with a ``.`` (it reads the dot as a struct
    path) and cannot project a column whose name holds a backtick (its SQL
    quote): such a column could be written by a rename and then never read.
    Raises SchemaError naming the column.
    """
    for path, f in _walk(list(fields)):
        if "`" in f.name:
            raise SchemaError(
                f"column name {path!r} contains a backtick (`), which Lance cannot read back"
            )
        if top_level and "." in f.name and path == f.name:
            raise SchemaError(
                f"top-level column name {path!r} contains a '.', which Lance reads as a "
                "struct path; use a struct column or another name"
            )
        if not f.name:
            raise SchemaError(f"a column name cannot be empty (in {path!r})")


class Schema:
    """An immutable namespace schema with field ids on every (nested) field.

    ``last_field_id`` is at least the largest id present; pass the recorded
    high-water mark so that ids of dropped columns are never handed out again.
    """

    def __init__(self, arrow: pa.Schema, last_field_id: int | None = None):
        self._arrow = arrow
        ids: dict[int, str] = {}
        for path, f in _walk(list(arrow)):
            fid = _field_id(f)
            if fid is None:
                raise SchemaError(f"field {path!r} has no {FIELD_ID_KEY} metadata")
            if fid in ids:
                raise SchemaError(
                    f"field id {fid} is used by both {ids[fid]!r} and {path!r}; field ids must be unique"
                )
            ids[fid] = path
        self._path_by_id = ids
        self._top_by_name = {f.name: f for f in arrow}
        if len(self._top_by_name) != len(arrow):
            names = [f.name for f in arrow]
            dup = sorted({n for n in names if names.count(n) > 1})
            raise SchemaError(f"duplicate column names in schema: {dup}")
        self._last_field_id = max(self.max_field_id, -1 if last_field_id is None else last_field_id)

    # -- construction -------------------------------------------------------
    @classmethod
    def from_arrow(cls, schema: pa.Schema) -> Schema:
        """Adopt an Arrow schema. Fields without ids get ids depth-first from 0
        (all fields must then lack ids); a schema that already has ids keeps them."""
        has = [_field_id(f) is not None for _, f in _walk(list(schema))]
        if all(has) and has:
            return cls(schema)
        if any(has):
            raise SchemaError(
                f"schema mixes fields with and without {FIELD_ID_KEY}; give all fields ids or none"
            )
        counter = [0]
        fields = [_assign_ids(f, counter) for f in schema]
        return cls(pa.schema(fields, metadata=schema.metadata))

    @classmethod
    def from_json(cls, obj: str | dict[str, Any], last_field_id: int | None = None) -> Schema:
        """Parse a JsonArrowSchema (string or dict); ``last_field_id`` as for ``Schema()``."""
        if isinstance(obj, str):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as exc:
                raise SchemaError(f"schema is not valid JSON: {exc}") from exc
        if not isinstance(obj, dict) or "fields" not in obj:
            raise SchemaError("schema JSON must be an object with a 'fields' array")
        try:
            arrow = json_to_arrow_schema(obj)
        except TypeConversionError as exc:
            raise SchemaError(f"invalid schema JSON: {exc}") from exc
        return cls(arrow, last_field_id)

    def to_json(self) -> dict[str, Any]:
        """The JsonArrowSchema dict (field ids in each field's metadata)."""
        return arrow_schema_to_json(self._arrow)

    def to_json_str(self) -> str:
        """The compact JSON text of ``to_json`` (computed once: the schema is immutable
        and filter checks key their caches by it)."""
        text = self.__dict__.get("_json_str")
        if text is None:
            text = self._json_str = json.dumps(self.to_json(), separators=(",", ":"))
        return text

    # -- access -------------------------------------------------------------
    @property
    def arrow(self) -> pa.Schema:
        """The Arrow schema, field ids included in field metadata."""
        return self._arrow

    @property
    def names(self) -> list[str]:
        return [f.name for f in self._arrow]

    @property
    def max_field_id(self) -> int:
        """The largest field id present in this schema (-1 when none)."""
        return max(self._path_by_id, default=-1)

    @property
    def last_field_id(self) -> int:
        """The high-water mark: the largest field id ever assigned, dropped columns included.

        Ids at or below it that the schema lacks are retired (old leaves and
        specs may still carry them); ``add_column`` assigns ids above it.
        """
        return self._last_field_id

    def with_last_field_id(self, floor: int) -> Schema:
        """This schema with its high-water mark raised to at least ``floor``."""
        if floor <= self._last_field_id:
            return self
        return Schema(self._arrow, floor)

    def field(self, name: str) -> pa.Field:
        """Top-level field by name."""
        try:
            return self._top_by_name[name]
        except KeyError:
            raise SchemaError(f"no column named {name!r}; columns are {self.names}") from None

    def has_field(self, name: str) -> bool:
        return name in self._top_by_name

    def field_id(self, name: str) -> int:
        """Field id of a top-level column."""
        fid = _field_id(self.field(name))
        assert fid is not None
        return fid

    def has_id(self, field_id: int) -> bool:
        return field_id in self._path_by_id

    def field_by_id(self, field_id: int) -> pa.Field:
        """The top-level field with this id (partition sources are top-level)."""
        path = self._path_by_id.get(field_id)
        if path is None:
            raise SchemaError(f"no field with id {field_id} in the schema")
        if "." in path and path not in self._top_by_name:
            raise SchemaError(
                f"field id {field_id} is the nested field {path!r}; only top-level columns can be partition sources"
            )
        return self._top_by_name[path]

    # -- evolution (each returns a new Schema; ids are never reused) ----------
    def add_column(self, field: pa.Field) -> Schema:
        """Append a nullable column; it and its children get fresh ids after ``last_field_id``
        (never an id a dropped column had)."""
        if self.has_field(field.name):
            raise SchemaError(f"column {field.name!r} already exists")
        if not field.nullable:
            raise SchemaError(
                f"cannot add the non-nullable column {field.name!r}: existing rows have no value for it"
            )
        check_column_names([field])
        counter = [self.last_field_id + 1]
        plain = pa.field(field.name, _strip_ids(field.type), True, field.metadata)
        return Schema(self._arrow.append(_assign_ids(plain, counter)), self._last_field_id)

    def rename_column(self, old: str, new: str) -> Schema:
        """Rename a top-level column; its field id (and every spec using it) is unchanged."""
        i = self._arrow.get_field_index(self.field(old).name)
        if self.has_field(new):
            raise SchemaError(f"cannot rename {old!r} to {new!r}: a column named {new!r} exists")
        check_column_names([pa.field(new, pa.null())])
        return Schema(self._arrow.set(i, self._arrow.field(i).with_name(new)), self._last_field_id)

    def drop_column(self, name: str) -> Schema:
        """Remove a top-level column; its id is retired, never reused."""
        i = self._arrow.get_field_index(self.field(name).name)
        if len(self._arrow) == 1:
            raise SchemaError(f"cannot drop {name!r}: it is the only column")
        return Schema(self._arrow.remove(i), self._last_field_id)

    def widen_column(self, name: str, new_type: pa.DataType) -> Schema:
        """Promote a column's type losslessly (int32→int64, float→double, decimal(p,s)→decimal(p',s))."""
        f = self.field(name)
        if not is_lossless_widening(f.type, new_type):
            raise SchemaError(
                f"cannot change column {name!r} from {f.type} to {new_type}: only lossless widening "
                "is allowed (int8→16→32→64, float32→float64, decimal(p,s)→decimal(p',s) with p'≥p)"
            )
        i = self._arrow.get_field_index(name)
        return Schema(
            self._arrow.set(i, pa.field(name, new_type, f.nullable, f.metadata)),
            self._last_field_id,
        )

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Schema)
            and self._arrow.equals(other._arrow, check_metadata=True)
            and self._last_field_id == other._last_field_id
        )

    def __repr__(self) -> str:
        cols = ", ".join(f"{f.name}: {f.type}" for f in self._arrow)
        return f"Schema({cols})"
