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
from collections.abc import Callable, Iterator, Sequence
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


def column_path(name: str) -> tuple[str, ...]:
    """The path a column name names: ``"s.a"`` is field ``a`` of struct column ``s``.

    A top-level name cannot hold a ``.`` (``check_column_names``), so a dotted
    name is always a path into struct columns, as in Lance's own filters.
    """
    return tuple(name.split("."))


def _dotted(path: Sequence[str]) -> str:
    return ".".join(path)


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

    def field_at(self, path: Sequence[str]) -> pa.Field:
        """The field at ``path``: a top-level column, then a field of each struct.

        Raises SchemaError naming the path and the fields of the struct it was
        looked up in (only structs have named fields: not lists or maps).
        """
        f = self.field(path[0])
        for i in range(1, len(path)):
            if not pa.types.is_struct(f.type):
                raise SchemaError(
                    f"no field {_dotted(path[: i + 1])!r}: {_dotted(path[:i])!r} is {f.type}, "
                    "not a struct"
                )
            index = f.type.get_field_index(path[i])
            if index < 0:
                raise SchemaError(
                    f"no field {_dotted(path[: i + 1])!r}: struct {_dotted(path[:i])!r} has "
                    f"fields {[c.name for c in f.type]}"
                )
            f = f.type.field(index)
        return f

    def field_id_at(self, path: Sequence[str]) -> int:
        """Field id of the (possibly nested) field at ``path`` (``field_at``)."""
        fid = _field_id(self.field_at(path))
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
    # A dotted name is a path into struct columns: ``"s.a"`` evolves field ``a`` of
    # struct ``s`` (seed 000 gives nested fields ids of their own, so they evolve
    # as columns do: a new field gets a fresh id, a renamed one keeps it).
    def add_column(self, field: pa.Field) -> Schema:
        """Append a nullable column (or, for ``"s.z"``, a field of struct ``s``); it and its
        children get fresh ids after ``last_field_id`` (never an id a dropped field had)."""
        path = column_path(field.name)
        if not field.nullable:
            raise SchemaError(
                f"cannot add the non-nullable column {field.name!r}: existing rows have no value for it"
            )
        if len(path) == 1 and self.has_field(field.name):
            raise SchemaError(f"column {field.name!r} already exists")
        check_column_names([field.with_name(path[-1])], top_level=len(path) == 1)
        counter = [self.last_field_id + 1]
        plain = _assign_ids(
            pa.field(path[-1], _strip_ids(field.type), True, field.metadata), counter
        )
        if len(path) == 1:
            return Schema(self._arrow.append(plain), self._last_field_id)
        if not self.has_field(path[0]):
            raise SchemaError(
                f"cannot add {field.name!r}: a name with '.' is a struct path, and there is "
                f"no column {path[0]!r} (columns are {self.names}); a top-level name cannot "
                "hold a '.'"
            )

        def add(kids: list[pa.Field]) -> list[pa.Field]:
            if any(k.name == path[-1] for k in kids):
                raise SchemaError(f"field {field.name!r} already exists")
            return [*kids, plain]

        return self._with_children(path[:-1], add)

    def rename_column(self, old: str, new: str) -> Schema:
        """Rename a column (or, for ``"s.a"``, a field of struct ``s``: ``new`` is its new
        name, or its whole new path in the same struct); its field id (and every spec
        using it) is unchanged."""
        path = column_path(old)
        if len(path) == 1:
            i = self._arrow.get_field_index(self.field(old).name)
            if self.has_field(new):
                raise SchemaError(
                    f"cannot rename {old!r} to {new!r}: a column named {new!r} exists"
                )
            check_column_names([pa.field(new, pa.null())])
            return Schema(
                self._arrow.set(i, self._arrow.field(i).with_name(new)), self._last_field_id
            )
        self.field_at(path)
        target = column_path(new)
        if len(target) > 1 and target[:-1] != path[:-1]:
            raise SchemaError(
                f"cannot rename {old!r} to {new!r}: a field stays in its struct "
                f"({_dotted(path[:-1])!r}); give the new name alone"
            )
        name = target[-1]
        check_column_names([pa.field(name, pa.null())], top_level=False)

        def rename(kids: list[pa.Field]) -> list[pa.Field]:
            if any(k.name == name for k in kids):
                raise SchemaError(
                    f"cannot rename {old!r} to {name!r}: struct {_dotted(path[:-1])!r} has a "
                    f"field named {name!r}"
                )
            return [k.with_name(name) if k.name == path[-1] else k for k in kids]

        return self._with_children(path[:-1], rename)

    def drop_column(self, name: str) -> Schema:
        """Remove a column (or a field of a struct, ``"s.a"``); its id and its children's
        are retired, never reused."""
        path = column_path(name)
        if len(path) == 1:
            i = self._arrow.get_field_index(self.field(name).name)
            if len(self._arrow) == 1:
                raise SchemaError(f"cannot drop {name!r}: it is the only column")
            return Schema(self._arrow.remove(i), self._last_field_id)
        self.field_at(path)

        def drop(kids: list[pa.Field]) -> list[pa.Field]:
            if len(kids) == 1:
                raise SchemaError(
                    f"cannot drop {name!r}: it is the only field of struct "
                    f"{_dotted(path[:-1])!r}; drop the struct instead"
                )
            return [k for k in kids if k.name != path[-1]]

        return self._with_children(path[:-1], drop)

    def widen_column(self, name: str, new_type: pa.DataType) -> Schema:
        """Promote a column's (or a struct field's, ``"s.a"``) type losslessly
        (int32→int64, float→double, decimal(p,s)→decimal(p',s))."""
        path = column_path(name)
        f = self.field_at(path)
        if not is_lossless_widening(f.type, new_type):
            raise SchemaError(
                f"cannot change column {name!r} from {f.type} to {new_type}: only lossless widening "
                "is allowed (int8→16→32→64, float32→float64, decimal(p,s)→decimal(p',s) with p'≥p)"
            )
        wider = pa.field(f.name, new_type, f.nullable, f.metadata)
        if len(path) == 1:
            i = self._arrow.get_field_index(name)
            return Schema(self._arrow.set(i, wider), self._last_field_id)
        return self._with_children(
            path[:-1], lambda kids: [wider if k.name == f.name else k for k in kids]
        )

    def _with_children(
        self, parent: Sequence[str], change: Callable[[list[pa.Field]], list[pa.Field]]
    ) -> Schema:
        """This schema with the fields of struct ``parent`` replaced by ``change(fields)``."""
        top = self.field_at(parent)
        if not pa.types.is_struct(top.type):
            raise SchemaError(f"{_dotted(parent)!r} is {top.type}, not a struct; it has no fields")

        def rebuild(f: pa.Field, rest: Sequence[str]) -> pa.Field:
            kids = list(f.type)
            if rest:
                i = f.type.get_field_index(rest[0])
                kids[i] = rebuild(kids[i], rest[1:])
            else:
                kids = change(kids)
            return pa.field(f.name, pa.struct(kids), f.nullable, f.metadata)

        i = self._arrow.get_field_index(parent[0])
        return Schema(
            self._arrow.set(i, rebuild(self._arrow.field(i), parent[1:])), self._last_field_id
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
