"""The namespace schema: an Arrow schema whose every field carries ``lance:field_id``.

Field ids are what partition specs reference (``source_ids``), so they must be
stable across renames and never reused. At creation they are assigned
depth-first from 0, exactly as Lance assigns them to a new dataset.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from lance_partitioned.errors import SchemaError
from lance_partitioned.format.types import (
    TypeConversionError,
    arrow_schema_to_json,
    json_to_arrow_schema,
)

FIELD_ID_KEY = "lance:field_id"


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
    kids = [_assign_ids(c, counter) for c in _children(field.type)]
    typ = _rebuild(field.type, kids) if kids else field.type
    return _with_id(pa.field(field.name, typ, field.nullable, field.metadata), my_id)


def _walk(fields: list[pa.Field], prefix: str = "") -> Iterator[tuple[str, pa.Field]]:
    for f in fields:
        path = f"{prefix}{f.name}"
        yield path, f
        yield from _walk(_children(f.type), prefix=f"{path}.")


class Schema:
    """An immutable namespace schema with field ids on every (nested) field."""

    def __init__(self, arrow: pa.Schema):
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
    def from_json(cls, obj: str | dict[str, Any]) -> Schema:
        """Parse a JsonArrowSchema (string or dict)."""
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
        return cls(arrow)

    def to_json(self) -> dict[str, Any]:
        """The JsonArrowSchema dict (field ids in each field's metadata)."""
        return arrow_schema_to_json(self._arrow)

    def to_json_str(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

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
        return max(self._path_by_id, default=-1)

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

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self._arrow.equals(other._arrow, check_metadata=True)

    def __repr__(self) -> str:
        cols = ", ".join(f"{f.name}: {f.type}" for f in self._arrow)
        return f"Schema({cols})"
