"""Arrow types <-> JsonArrowDataType / JsonArrowField / JsonArrowSchema dicts.

The namespace schema and every partition field's ``result_type`` are stored in
the lance-namespace JSON form. Type names follow upstream exactly (the Rust
``lance_namespace::schema`` module that pylance uses): ``{"type": "int64"}``,
``{"type": "utf8"}``, ``{"type": "decimal128", "length": 38010}`` and so on.

Upstream drops some parameters (a timestamp's unit and time zone, a time or
duration unit, a dictionary's index type, ...). We keep them losslessly in
extra keys of the same JSON object, which upstream readers ignore, so that every
type round-trips exactly. The rules, in order:

1. Where upstream writes a parameter, we write it the same way (``length`` for
   fixed-size types, ``precision * 1000 + scale`` in ``length`` for decimals,
   the entries field in ``fields`` for maps).
2. Where upstream drops a parameter, we add an extra key (``unit``,
   ``timezone``, ``keys_sorted``, ``view``, ``dictionary``).
3. Stripping our extra keys from our JSON gives exactly what upstream writes.
4. Reading accepts everything upstream's reader accepts, with the same result
   (type names are case-insensitive, ``boolean`` is an alias of ``bool``, a
   timestamp or duration without ``unit`` is microseconds). Anything else that
   is not exactly one of our forms is rejected with ``TypeConversionError``.

Extension types travel as their storage type plus the ``ARROW:extension:name``
and ``ARROW:extension:metadata`` field metadata keys (the Arrow IPC convention,
which is also what upstream writes), so they are supported on fields but not as
bare types. See docs/FORMAT.md section 8 for the full table.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from lance_partitioned.errors import TypeConversionError
from lance_partitioned.format.arrow_c import extension_metadata

__all__ = [
    "TypeConversionError",
    "arrow_field_to_json",
    "arrow_schema_to_json",
    "arrow_type_to_json",
    "json_to_arrow_field",
    "json_to_arrow_schema",
    "json_to_arrow_type",
    "type_to_string",
]


# -- names --------------------------------------------------------------------

# Parameterless types, by their upstream JSON name.
_SIMPLE: dict[str, pa.DataType] = {
    "null": pa.null(),
    "bool": pa.bool_(),
    "int8": pa.int8(),
    "uint8": pa.uint8(),
    "int16": pa.int16(),
    "uint16": pa.uint16(),
    "int32": pa.int32(),
    "uint32": pa.uint32(),
    "int64": pa.int64(),
    "uint64": pa.uint64(),
    "float16": pa.float16(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "utf8": pa.utf8(),
    "large_utf8": pa.large_utf8(),
    "binary": pa.binary(),
    "large_binary": pa.large_binary(),
    "date32": pa.date32(),
    "date64": pa.date64(),
}
_SIMPLE_NAME: dict[pa.DataType, str] = {t: n for n, t in _SIMPLE.items()}

# Names upstream's reader also accepts (after lower-casing).
_ALIASES = {"boolean": "bool"}

_DECIMAL_CTOR = {
    "decimal32": pa.decimal32,
    "decimal64": pa.decimal64,
    "decimal128": pa.decimal128,
    "decimal256": pa.decimal256,
}
_DECIMAL_MAX_PRECISION = {"decimal32": 9, "decimal64": 18, "decimal128": 38, "decimal256": 76}
_SCALE_MIN, _SCALE_MAX = -128, 127  # Arrow's scale is an i8 in the Rust implementation

_UNITS = {
    "timestamp": ("s", "ms", "us", "ns"),
    "duration": ("s", "ms", "us", "ns"),
    "time32": ("s", "ms"),
    "time64": ("us", "ns"),
}
# Upstream's reader turns a unit-less timestamp / duration into microseconds.
_UPSTREAM_DEFAULT_UNIT = {"timestamp": "us", "duration": "us"}

# Extra keys each type may carry besides "type" and "dictionary".
_ALLOWED_KEYS: dict[str, frozenset[str]] = {
    **{n: frozenset() for n in _SIMPLE},
    "utf8": frozenset({"view"}),
    "binary": frozenset({"view"}),
    "fixed_size_binary": frozenset({"length"}),
    **{n: frozenset({"length"}) for n in _DECIMAL_CTOR},
    "timestamp": frozenset({"unit", "timezone"}),
    "duration": frozenset({"unit"}),
    "time32": frozenset({"unit"}),
    "time64": frozenset({"unit"}),
    "list": frozenset({"fields"}),
    "large_list": frozenset({"fields"}),
    "fixed_size_list": frozenset({"fields", "length"}),
    "struct": frozenset({"fields"}),
    "map": frozenset({"fields", "keys_sorted"}),
}

# Names upstream writes but cannot read back (no parameters are written).
_UPSTREAM_WRITE_ONLY = {"interval", "union"}

_INT32_MAX = 2**31 - 1
_EXT_NAME = "ARROW:extension:name"
_EXT_META = "ARROW:extension:metadata"


# -- error helpers ------------------------------------------------------------


def _show(obj: Any, limit: int = 240) -> str:
    try:
        text = json.dumps(obj, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _at(where: str) -> str:
    return f" (at field {where!r})" if where else ""


def _child(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _bad_type(problem: str, d: Any, where: str) -> TypeConversionError:
    return TypeConversionError(f"{problem} in JsonArrowDataType {_show(d)}{_at(where)}")


def _bad_field(problem: str, d: Any, where: str) -> TypeConversionError:
    return TypeConversionError(f"{problem} in JsonArrowField {_show(d)}{_at(where)}")


def _cannot(t: pa.DataType, reason: str, where: str) -> TypeConversionError:
    return TypeConversionError(
        f"cannot convert Arrow type {type_to_string(t)} to JsonArrowDataType: {reason}{_at(where)}"
    )


# -- Arrow -> JSON ------------------------------------------------------------


def _str_metadata(meta: dict[bytes, bytes] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (meta or {}).items():
        try:
            out[k.decode("utf-8")] = v.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TypeConversionError(
                f"{what} has metadata {k!r}: {v!r} that is not valid UTF-8; "
                "JSON metadata values must be strings"
            ) from exc
    return out


def _field_to_json(f: pa.Field, where: str) -> dict[str, Any]:
    meta = _str_metadata(f.metadata, f"field {where!r}")
    t = f.type
    if isinstance(t, pa.BaseExtensionType):
        raw = extension_metadata(t)
        try:
            ext_meta = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _cannot(
                t, f"its serialized extension metadata {raw!r} is not valid UTF-8", where
            ) from exc
        meta[_EXT_NAME] = t.extension_name
        meta[_EXT_META] = ext_meta
        t = t.storage_type
    out: dict[str, Any] = {
        "name": f.name,
        "nullable": f.nullable,
        "type": _type_to_json(t, where),
    }
    if meta:
        out["metadata"] = meta
    return out


def _type_to_json(t: pa.DataType, where: str) -> dict[str, Any]:
    if isinstance(t, pa.BaseExtensionType):
        raise _cannot(
            t,
            "extension types are written as their storage type plus field metadata, "
            "so they are only supported as the type of a field",
            where,
        )
    name = _SIMPLE_NAME.get(t)
    if name is not None:
        return {"type": name}
    if pa.types.is_string_view(t):
        return {"type": "utf8", "view": True}
    if pa.types.is_binary_view(t):
        return {"type": "binary", "view": True}
    if pa.types.is_decimal(t):
        name = f"decimal{t.bit_width}"
        if not _SCALE_MIN <= t.scale <= _SCALE_MAX:
            raise _cannot(t, f"decimal scale must be between {_SCALE_MIN} and {_SCALE_MAX}", where)
        return {"type": name, "length": t.precision * 1000 + t.scale}
    if pa.types.is_fixed_size_binary(t):
        return {"type": "fixed_size_binary", "length": t.byte_width}
    if pa.types.is_timestamp(t):
        out: dict[str, Any] = {"type": "timestamp", "unit": t.unit}
        if t.tz is not None:
            out["timezone"] = t.tz
        return out
    if pa.types.is_duration(t):
        return {"type": "duration", "unit": t.unit}
    if pa.types.is_time32(t):
        return {"type": "time32", "unit": t.unit}
    if pa.types.is_time64(t):
        return {"type": "time64", "unit": t.unit}
    if pa.types.is_map(t):
        out = {
            "type": "map",
            "fields": [_field_to_json(t.field(0), _child(where, t.field(0).name))],
        }
        if t.keys_sorted:
            out["keys_sorted"] = True
        return out
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        vf = t.value_field
        out = {"type": "list", "fields": [_field_to_json(vf, _child(where, vf.name))]}
        if pa.types.is_large_list(t):
            out["type"] = "large_list"
        elif pa.types.is_fixed_size_list(t):
            out["type"] = "fixed_size_list"
            out["length"] = t.list_size
        return out
    if pa.types.is_struct(t):
        kids = [t.field(i) for i in range(t.num_fields)]
        return {
            "type": "struct",
            "fields": [_field_to_json(k, _child(where, k.name)) for k in kids],
        }
    if pa.types.is_dictionary(t):
        out = _type_to_json(t.value_type, where)
        if "dictionary" in out:
            raise _cannot(t, "a dictionary whose values are a dictionary is not supported", where)
        out["dictionary"] = {"index_type": _type_to_json(t.index_type, where), "ordered": t.ordered}
        return out
    raise _cannot(t, "this type is not supported by the JsonArrowDataType format", where)


def arrow_type_to_json(t: pa.DataType) -> dict:
    """The JsonArrowDataType dict of an Arrow type; raises TypeConversionError if it has none."""
    if not isinstance(t, pa.DataType):
        raise TypeConversionError(f"expected a pyarrow DataType, got {type(t).__name__}: {t!r}")
    return _type_to_json(t, "")


def arrow_field_to_json(f: pa.Field) -> dict:
    """The JsonArrowField dict ``{"name", "nullable", "type"[, "metadata"]}`` of a field (metadata values str, key omitted when empty)."""
    if not isinstance(f, pa.Field):
        raise TypeConversionError(f"expected a pyarrow Field, got {type(f).__name__}: {f!r}")
    return _field_to_json(f, f.name)


def arrow_schema_to_json(s: pa.Schema) -> dict:
    """The JsonArrowSchema dict ``{"fields": [...][, "metadata": {...}]}`` of a schema (metadata key omitted when empty)."""
    if not isinstance(s, pa.Schema):
        raise TypeConversionError(f"expected a pyarrow Schema, got {type(s).__name__}: {s!r}")
    out: dict[str, Any] = {"fields": [_field_to_json(f, f.name) for f in s]}
    meta = _str_metadata(s.metadata, "schema")
    if meta:
        out["metadata"] = meta
    return out


# -- JSON -> Arrow ------------------------------------------------------------


def _int_param(d: dict, key: str, where: str, lo: int, hi: int) -> int:
    if key not in d or d[key] is None:
        raise _bad_type(f"missing required key {key!r} for type {d['type']!r}", d, where)
    v = d[key]
    if not isinstance(v, int) or isinstance(v, bool):
        raise _bad_type(f"{key!r} must be an integer, got {_show(v)}", d, where)
    if not lo <= v <= hi:
        raise _bad_type(f"{key!r} must be between {lo} and {hi}, got {v}", d, where)
    return v


def _bool_param(d: dict, key: str, where: str) -> bool:
    v = d.get(key, False)
    if not isinstance(v, bool):
        raise _bad_type(f"{key!r} must be true or false, got {_show(v)}", d, where)
    return v


def _child_fields(d: dict, where: str, exactly: int | None) -> list[pa.Field]:
    raw = d.get("fields")
    if raw is None:
        raise _bad_type(f"missing required key 'fields' for type {d['type']!r}", d, where)
    if not isinstance(raw, list):
        raise _bad_type(f"'fields' must be a list, got {_show(raw)}", d, where)
    if exactly is not None and len(raw) != exactly:
        raise _bad_type(
            f"type {d['type']!r} needs exactly {exactly} child field in 'fields', got {len(raw)}",
            d,
            where,
        )
    return [_json_to_field(c, where, i) for i, c in enumerate(raw)]


def _json_to_type(d: Any, where: str) -> pa.DataType:
    if not isinstance(d, dict):
        raise _bad_type(f"expected a JSON object, got {type(d).__name__}", d, where)
    if "type" not in d:
        raise _bad_type("missing required key 'type'", d, where)
    raw_name = d["type"]
    if not isinstance(raw_name, str):
        raise _bad_type(f"'type' must be a string, got {_show(raw_name)}", d, where)
    name = raw_name.lower()
    name = _ALIASES.get(name, name)
    allowed = _ALLOWED_KEYS.get(name)
    if allowed is None:
        if name in _UPSTREAM_WRITE_ONLY:
            raise _bad_type(
                f"unsupported type {raw_name!r} (written without its parameters, so it cannot be read back)",
                d,
                where,
            )
        raise _bad_type(f"unknown type {raw_name!r}", d, where)
    # Upstream serializers may spell an absent optional as null.
    present = {k for k, v in d.items() if not (k in ("fields", "length") and v is None)}
    extra = present - allowed - {"type", "dictionary"}
    if extra:
        raise _bad_type(f"unexpected key(s) {sorted(extra)} for type {raw_name!r}", d, where)

    t = _build_type(name, d, where)

    dictionary = d.get("dictionary")
    if dictionary is not None:
        t = _build_dictionary(t, dictionary, d, where)
    return t


def _build_type(name: str, d: dict, where: str) -> pa.DataType:
    if name in ("utf8", "binary") and _bool_param(d, "view", where):
        return pa.string_view() if name == "utf8" else pa.binary_view()
    simple = _SIMPLE.get(name)
    if simple is not None:
        return simple
    if name == "fixed_size_binary":
        return pa.binary(_int_param(d, "length", where, 0, _INT32_MAX))
    if name in _DECIMAL_CTOR:
        return _build_decimal(name, d, where)
    if name in _UNITS:
        unit = d.get("unit")
        if unit is None:
            unit = _UPSTREAM_DEFAULT_UNIT.get(name)
            if unit is None:
                raise _bad_type(f"missing required key 'unit' for type {d['type']!r}", d, where)
        if unit not in _UNITS[name]:
            raise _bad_type(
                f"'unit' of {name} must be one of {list(_UNITS[name])}, got {_show(unit)}", d, where
            )
        if name == "timestamp":
            tz = d.get("timezone")
            if tz is not None and (not isinstance(tz, str) or not tz):
                raise _bad_type(
                    f"'timezone' must be a non-empty string or absent, got {_show(tz)}", d, where
                )
            return pa.timestamp(unit, tz=tz)
        return {"duration": pa.duration, "time32": pa.time32, "time64": pa.time64}[name](unit)
    if name in ("list", "large_list"):
        (child,) = _child_fields(d, where, exactly=1)
        return pa.list_(child) if name == "list" else pa.large_list(child)
    if name == "fixed_size_list":
        (child,) = _child_fields(d, where, exactly=1)
        return pa.list_(child, _int_param(d, "length", where, 0, _INT32_MAX))
    if name == "struct":
        return pa.struct(_child_fields(d, where, exactly=None))
    if name == "map":
        return _build_map(d, where)
    raise AssertionError(f"unhandled type name {name!r}")  # pragma: no cover


def _build_decimal(name: str, d: dict, where: str) -> pa.DataType:
    max_p = _DECIMAL_MAX_PRECISION[name]
    encoded = _int_param(d, "length", where, 0, _INT32_MAX)
    # Upstream encodes precision * 1000 + scale; scale may be negative.
    precision = (encoded - _SCALE_MIN) // 1000
    scale = encoded - precision * 1000
    if not (1 <= precision <= max_p and scale <= _SCALE_MAX):
        raise _bad_type(
            f"{name} 'length' must be precision * 1000 + scale with 1 <= precision <= {max_p} "
            f"and {_SCALE_MIN} <= scale <= {_SCALE_MAX}, got {encoded} "
            f"(precision {precision}, scale {scale})",
            d,
            where,
        )
    return _DECIMAL_CTOR[name](precision, scale)


def _build_map(d: dict, where: str) -> pa.DataType:
    (entries,) = _child_fields(d, where, exactly=1)
    keys_sorted = _bool_param(d, "keys_sorted", where)
    et = entries.type
    if not pa.types.is_struct(et) or et.num_fields != 2:
        raise _bad_type(
            "the map entries field must be a struct of exactly two fields (key, value), "
            f"got {type_to_string(et)}",
            d,
            where,
        )
    if entries.nullable:
        raise _bad_type("the map entries field must not be nullable", d, where)
    if entries.metadata:
        raise _bad_type("the map entries field cannot carry metadata (Arrow drops it)", d, where)
    key, item = et.field(0), et.field(1)
    if key.nullable:
        raise _bad_type(f"the map key field {key.name!r} must not be nullable", d, where)
    try:
        return pa.map_(key, item, keys_sorted=keys_sorted)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise _bad_type(f"invalid map: {exc}", d, where) from exc


def _build_dictionary(value: pa.DataType, spec: Any, d: dict, where: str) -> pa.DataType:
    if not isinstance(spec, dict):
        raise _bad_type(f"'dictionary' must be a JSON object, got {_show(spec)}", d, where)
    extra = set(spec) - {"index_type", "ordered"}
    if extra:
        raise _bad_type(f"unexpected key(s) {sorted(extra)} in 'dictionary'", d, where)
    if spec.get("index_type") is None:
        raise _bad_type("missing required key 'index_type' in 'dictionary'", d, where)
    index = _json_to_type(spec["index_type"], where)
    if not pa.types.is_integer(index):
        raise _bad_type(
            f"dictionary 'index_type' must be an integer type, got {type_to_string(index)}",
            d,
            where,
        )
    ordered = spec.get("ordered", False)
    if not isinstance(ordered, bool):
        raise _bad_type(
            f"dictionary 'ordered' must be true or false, got {_show(ordered)}", d, where
        )
    try:
        return pa.dictionary(index, value, ordered=ordered)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise _bad_type(f"invalid dictionary: {exc}", d, where) from exc


def _metadata_param(obj: dict, bad: Any) -> dict[str, str] | None:
    meta = obj.get("metadata")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise bad(f"'metadata' must be a JSON object of strings, got {_show(meta)}")
    for k, v in meta.items():
        if not isinstance(v, str):
            raise bad(f"metadata value of {k!r} must be a string, got {_show(v)}")
    return meta or None


def _json_to_field(d: Any, parent: str, index: int | None = None) -> pa.Field:
    loc = parent if index is None else _child(parent, f"[{index}]")
    if not isinstance(d, dict):
        raise _bad_field(f"expected a JSON object, got {type(d).__name__}", d, loc)
    name = d.get("name")
    if not isinstance(name, str):
        problem = "missing required key 'name'" if name is None else "'name' must be a string"
        raise _bad_field(problem, d, loc)
    where = _child(parent, name)
    extra = set(d) - {"name", "nullable", "type", "metadata"}
    if extra:
        raise _bad_field(f"unexpected key(s) {sorted(extra)}", d, where)
    if "nullable" not in d:
        raise _bad_field("missing required key 'nullable'", d, where)
    if not isinstance(d["nullable"], bool):
        raise _bad_field(f"'nullable' must be true or false, got {_show(d['nullable'])}", d, where)
    if "type" not in d:
        raise _bad_field("missing required key 'type'", d, where)
    meta = _metadata_param(d, lambda p: _bad_field(p, d, where))
    t = _json_to_type(d["type"], where)
    f = pa.field(name, t, nullable=d["nullable"], metadata=meta)
    if meta and _EXT_NAME in meta:
        f = _restore_extension(f, d, where)
    return f


def _restore_extension(f: pa.Field, d: dict, where: str) -> pa.Field:
    # Arrow IPC turns storage type + ARROW:extension:* metadata into the registered
    # extension type (and leaves both untouched when the name is not registered).
    try:
        return pa.ipc.read_schema(pa.py_buffer(pa.schema([f]).serialize())).field(0)
    except Exception as exc:  # a registered type may reject its metadata in any way
        raise _bad_field(f"invalid extension type: {exc}", d, where) from exc


def json_to_arrow_type(d: dict) -> pa.DataType:
    """The Arrow type of a JsonArrowDataType dict; raises TypeConversionError on anything invalid."""
    return _json_to_type(d, "")


def json_to_arrow_field(d: dict) -> pa.Field:
    """The Arrow field of a JsonArrowField dict; raises TypeConversionError on anything invalid."""
    return _json_to_field(d, "")


def json_to_arrow_schema(d: dict) -> pa.Schema:
    """The Arrow schema of a JsonArrowSchema dict ("metadata" optional); raises TypeConversionError on anything invalid."""
    if not isinstance(d, dict):
        raise TypeConversionError(
            f"expected a JsonArrowSchema JSON object, got {type(d).__name__}: {_show(d)}"
        )

    def bad(problem: str) -> TypeConversionError:
        return TypeConversionError(f"{problem} in JsonArrowSchema {_show(d)}")

    extra = set(d) - {"fields", "metadata"}
    if extra:
        raise bad(f"unexpected key(s) {sorted(extra)}")
    fields = d.get("fields")
    if not isinstance(fields, list):
        raise bad("missing required key 'fields'" if fields is None else "'fields' must be a list")
    meta = _metadata_param(d, bad)
    return pa.schema([_json_to_field(f, "", i) for i, f in enumerate(fields)], metadata=meta)


# -- display ------------------------------------------------------------------


def _child_str(f: pa.Field) -> str:
    return type_to_string(f.type) + ("" if f.nullable else " not null")


def type_to_string(t: pa.DataType) -> str:
    """Short human form of a type using the JSON type names, e.g. "int32", "timestamp[us, tz=UTC]"; never raises."""
    try:
        return _type_str(t)
    except Exception:
        return str(t)


def _type_str(t: pa.DataType) -> str:
    if isinstance(t, pa.BaseExtensionType):
        return f"extension<{t.extension_name}: {type_to_string(t.storage_type)}>"
    name = _SIMPLE_NAME.get(t)
    if name is not None:
        return name
    if pa.types.is_string_view(t):
        return "utf8_view"
    if pa.types.is_binary_view(t):
        return "binary_view"
    if pa.types.is_decimal(t):
        return f"decimal{t.bit_width}({t.precision}, {t.scale})"
    if pa.types.is_fixed_size_binary(t):
        return f"fixed_size_binary[{t.byte_width}]"
    if pa.types.is_timestamp(t):
        return f"timestamp[{t.unit}]" if t.tz is None else f"timestamp[{t.unit}, tz={t.tz}]"
    if pa.types.is_duration(t) or pa.types.is_time32(t) or pa.types.is_time64(t):
        kind = "duration" if pa.types.is_duration(t) else f"time{t.bit_width}"
        return f"{kind}[{t.unit}]"
    if pa.types.is_map(t):
        sort = ", keys_sorted" if t.keys_sorted else ""
        return f"map<{_child_str(t.key_field)}, {_child_str(t.item_field)}{sort}>"
    if pa.types.is_fixed_size_list(t):
        return f"fixed_size_list<{_child_str(t.value_field)}>[{t.list_size}]"
    if pa.types.is_large_list(t):
        return f"large_list<{_child_str(t.value_field)}>"
    if pa.types.is_list(t):
        return f"list<{_child_str(t.value_field)}>"
    if pa.types.is_struct(t):
        kids = (t.field(i) for i in range(t.num_fields))
        return "struct<" + ", ".join(f"{k.name}: {_child_str(k)}" for k in kids) + ">"
    if pa.types.is_dictionary(t):
        ordered = ", ordered" if t.ordered else ""
        return (
            f"dictionary<{type_to_string(t.index_type)}, {type_to_string(t.value_type)}{ordered}>"
        )
    return str(t)
