"""Seed 003's earlier layout: read its root properties and value-named tables.

Seed 003 (an earlier draft of the partitioned namespace) keeps a partitioned
namespace in a V2 directory namespace:

- the root's properties ``lance.partitioning.enabled = "true"``,
  ``lance.partitioning.partition-columns`` (a JSON array of
  ``{"name", "function", "properties"}`` objects) and
  ``lance.partitioning.schema`` (a JsonArrowSchema) are the ``__manifest``
  table's metadata (the root namespace of a V2 directory namespace has no row
  of its own; ``docs/FORMAT.md`` section 11 gives the full mapping);
- every partition level is a namespace named ``<column name>=<value>`` and the
  last one a table, so a leaf's object id is ``event_date=2025-12-10$country=US``
  and its directory ``<8 hex>_event_date=2025-12-10$country=US`` (the
  ``location`` column of ``__manifest``, as ``DirectoryNamespace`` writes it).

This module only reads: it parses the properties into a :class:`Seed003Layout`
and maps each partition column to a seed-000 partition field
(:func:`seed000_spec_json`). Nothing here writes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import lance
import pyarrow as pa

from lance_partitioned.catalog.layout import join_uri
from lance_partitioned.errors import NotAPartitionedNamespaceError, SchemaError, SpecError
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.type_json import (
    TypeConversionError,
    arrow_type_to_json,
    json_to_arrow_schema,
)

PREFIX = "lance.partitioning."
ENABLED_KEY = PREFIX + "enabled"
COLUMNS_KEY = PREFIX + "partition-columns"
SCHEMA_KEY = PREFIX + "schema"
MANIFEST_DIR = "__manifest"

# Seed 003 writes a level as ``<name><suffix>=<value>`` (its "Write Path" lines).
_SUFFIX = {
    "identity": "",
    "bucket": "_bucket",
    "truncate": "_trunc",
    "hash": "_hash",
    "year": "_year",
    "month": "_month",
    "day": "_day",
    "hour": "_hour",
}
# The draft spells the parameters three ways (§2.1 example, §3.1 table, §3.3/§3.4 text).
_BUCKETS_KEYS = ("num-buckets", "num_buckets", "bucket_size", "bucket-size")
_WIDTH_KEYS = ("width", "truncate_size", "truncate-size")
_BRACKET = re.compile(r"^([a-z_]+)\[(\d+)\]$")
# Partition values of identity columns of these kinds are read back from the table
# names for pruning; other kinds' text forms are not pinned down by seed 003.
_EXACT_TEXT_KINDS = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer)
_AMBIGUOUS_TEXT = {"", "null", "NULL", "__HIVE_DEFAULT_PARTITION__"}


@dataclass(frozen=True)
class Seed003Column:
    """One entry of ``lance.partitioning.partition-columns``, resolved against the schema."""

    source: str  # the source column's name
    function: str  # identity, bucket, truncate, hash, year, month, day, hour
    parameter: int | None = None  # num_buckets or width

    @property
    def level_name(self) -> str:
        """The name left of ``=`` in this level's namespace or table name."""
        return self.source + _SUFFIX[self.function]


@dataclass(frozen=True)
class Seed003Leaf:
    """One value-named table: its object id, directory, and the text of each level's value."""

    object_id: str
    location: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Seed003Layout:
    """A seed-003 partitioned namespace as of one ``__manifest`` version."""

    root: str
    manifest_version: int
    schema: Schema
    columns: tuple[Seed003Column, ...]
    leaves: tuple[Seed003Leaf, ...]

    def leaf_uri(self, leaf: Seed003Leaf) -> str:
        return join_uri(self.root, leaf.location)


def manifest_metadata(root: str, storage_options: dict[str, str] | None = None) -> dict | None:
    """The ``__manifest`` table metadata of ``root``, or None when it has no ``__manifest``."""
    try:
        ds = lance.dataset(join_uri(root, MANIFEST_DIR), storage_options=storage_options)
    except (ValueError, OSError, RuntimeError):
        return None
    return ds.metadata


def is_seed003(metadata: dict[str, str] | None) -> bool:
    """Whether ``__manifest`` metadata marks a seed-003 partitioned namespace root."""
    return metadata is not None and metadata.get(ENABLED_KEY) == "true"


def _json_value(raw: Any, key: str) -> Any:
    # The draft's example shows the values as JSON, its text says "a JSON string".
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise SpecError(f"seed-003 property {key} is not valid JSON: {exc}") from exc
    return raw


def _upstream_type_json(obj: Any) -> Any:
    """Drop the empty keys Java-style JsonArrowSchema writers emit (``"fields": []`` on
    a primitive, ``"length": null``, ``"metadata": {}``), which our strict reader refuses."""
    if isinstance(obj, list):
        return [_upstream_type_json(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        if v is None or (k in ("fields", "metadata") and v in ([], {})):
            continue
        out[k] = _upstream_type_json(v)
    return out


def parse_schema(raw: Any) -> Schema:
    """``lance.partitioning.schema`` as a Schema; field ids depth-first where absent."""
    obj = _upstream_type_json(_json_value(raw, SCHEMA_KEY))
    if not isinstance(obj, dict) or "fields" not in obj:
        raise SchemaError(f"{SCHEMA_KEY} must be a JsonArrowSchema object, got {obj!r}")
    try:
        return Schema.from_arrow(json_to_arrow_schema(obj))
    except TypeConversionError as exc:
        raise SchemaError(f"{SCHEMA_KEY} is not a valid JsonArrowSchema: {exc}") from exc


def _parameter(function: str, props: dict[str, Any], where: str) -> int:
    keys = _BUCKETS_KEYS if function == "bucket" else _WIDTH_KEYS
    found = [props[k] for k in keys if k in props]
    if not found:
        raise SpecError(f"{where}: {function} needs one of the properties {list(keys)}")
    try:
        value = int(found[0])
    except (TypeError, ValueError):
        value = 0
    if value <= 0 or str(found[0]).strip() != str(value):
        raise SpecError(
            f"{where}: {function} parameter must be a positive integer, got {found[0]!r}"
        )
    return value


def parse_columns(raw: Any, schema: Schema) -> tuple[Seed003Column, ...]:
    """``lance.partitioning.partition-columns`` resolved against ``schema``.

    A column is named by ``name``, or by ``source-id`` / a one-element
    ``source-ids`` (a ``lance:field_id`` of the schema). ``function`` is a name
    (parameters in ``properties``) or ``bucket[N]`` / ``truncate[W]``.
    """
    entries = _json_value(raw, COLUMNS_KEY)
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{COLUMNS_KEY} must be a non-empty JSON array, got {entries!r}")
    by_id = {schema.field_id(n): n for n in schema.names}
    out: list[Seed003Column] = []
    for i, entry in enumerate(entries):
        where = f"{COLUMNS_KEY}[{i}]"
        if not isinstance(entry, dict):
            raise SpecError(f"{where} must be a JSON object, got {entry!r}")
        ids = entry.get("source-ids", [entry["source-id"]] if "source-id" in entry else None)
        if "name" in entry:
            name = entry["name"]
        elif isinstance(ids, list) and len(ids) == 1 and ids[0] in by_id:
            name = by_id[ids[0]]
        else:
            raise SpecError(f"{where} names no single schema column (name or source-id): {entry}")
        if name not in schema.names:
            raise SpecError(f"{where}: partition column {name!r} is not in {SCHEMA_KEY}")
        function = str(entry.get("function", "")).strip().lower()
        props = entry.get("properties") or {}
        m = _BRACKET.match(function)
        parameter: int | None = None
        if m:
            function, parameter = m.group(1), int(m.group(2))
        if function not in _SUFFIX:
            raise SpecError(f"{where}: unknown seed-003 function {entry.get('function')!r}")
        if function in ("bucket", "truncate") and parameter is None:
            parameter = _parameter(function, props, where)
        out.append(Seed003Column(name, function, parameter))
    return tuple(out)


def _leaves(
    ds: lance.LanceDataset, columns: tuple[Seed003Column, ...], root: str
) -> tuple[Seed003Leaf, ...]:
    rows = ds.to_table(columns=["object_id", "object_type", "location"]).to_pylist()
    out = []
    for row in rows:
        if row["object_type"] != "table":
            continue
        oid = row["object_id"]
        levels = oid.split("$")
        if len(levels) != len(columns):
            raise NotAPartitionedNamespaceError(
                f"{root!r}: table {oid!r} has {len(levels)} levels, but seed-003 "
                f"{COLUMNS_KEY} has {len(columns)} partition columns"
            )
        values = []
        for level, col in zip(levels, columns, strict=True):
            key, sep, value = level.partition("=")
            if not sep or key != col.level_name:
                raise NotAPartitionedNamespaceError(
                    f"{root!r}: table {oid!r}: level {level!r} should be named "
                    f"'{col.level_name}=<value>' (seed 003 naming)"
                )
            values.append(value)
        out.append(Seed003Leaf(oid, row["location"] or oid, tuple(values)))
    return tuple(out)


def load(
    root: str, storage_options: dict[str, str] | None = None, version: int | None = None
) -> Seed003Layout:
    """The seed-003 namespace at ``root`` (its ``__manifest`` at ``version``, default latest).

    Raises NotAPartitionedNamespaceError when ``root`` is no seed-003 root, SpecError
    or SchemaError when its properties are malformed. Reads only.
    """
    root = str(root).rstrip("/")
    try:
        ds = lance.dataset(
            join_uri(root, MANIFEST_DIR), version=version, storage_options=storage_options
        )
    except (ValueError, OSError, RuntimeError) as exc:
        raise NotAPartitionedNamespaceError(
            f"{root!r} is not a seed-003 partitioned namespace: it has no readable "
            f"{MANIFEST_DIR} table ({exc})"
        ) from exc
    meta = ds.metadata
    if not is_seed003(meta):
        raise NotAPartitionedNamespaceError(
            f"{root!r} is not a seed-003 partitioned namespace: its {MANIFEST_DIR} metadata "
            f'has no {ENABLED_KEY} = "true"'
        )
    for key in (SCHEMA_KEY, COLUMNS_KEY):
        if key not in meta:
            raise NotAPartitionedNamespaceError(f"{root!r}: seed-003 property {key} is missing")
    schema = parse_schema(meta[SCHEMA_KEY])
    columns = parse_columns(meta[COLUMNS_KEY], schema)
    return Seed003Layout(root, ds.version, schema, columns, _leaves(ds, columns, root))


def seed000_field_json(col: Seed003Column, schema: Schema) -> dict[str, Any]:
    """The seed-000 partition field a seed-003 partition column becomes.

    ``field_id`` is the seed-003 level name (``country``, ``city_bucket``,
    ``ts_year``); ``hash`` becomes ``{"expression": "murmur3(col0)"}`` with
    result type int32; the others are the seed-000 transforms of the same name.
    """
    source_type = schema.arrow.field(col.source).type
    out: dict[str, Any] = {"field_id": col.level_name, "source_ids": [schema.field_id(col.source)]}
    if col.function == "hash":
        out["expression"] = "murmur3(col0)"
        out["result_type"] = {"type": "int32"}
        return out
    transform: dict[str, Any] = {"type": col.function}
    if col.function == "bucket":
        transform["num_buckets"] = col.parameter
    elif col.function == "truncate":
        transform["width"] = col.parameter
    out["transform"] = transform
    same = col.function in ("identity", "truncate")
    out["result_type"] = arrow_type_to_json(source_type) if same else {"type": "int32"}
    return out


def seed000_spec_json(layout: Seed003Layout) -> dict[str, Any]:
    """The seed-000 ``partition_spec_v1`` a conversion of ``layout`` is written with."""
    return {"id": 1, "fields": [seed000_field_json(c, layout.schema) for c in layout.columns]}


def prunable_columns(layout: Seed003Layout) -> list[int]:
    """Indexes of the partition columns whose table-name values prune reads exactly.

    Only ``identity`` columns of string or integer type whose every value text is
    unambiguous (not empty, not a NULL spelling, no ``%`` that could be an
    escape) qualify. Seed 003 leaves the other functions' text forms open
    (years since 1970 or the calendar year, the sign of ``mod``, the hex width of
    ``hash``, UTC or local time), so their leaves are kept and the filter decides
    inside them.
    """
    out = []
    for i, col in enumerate(layout.columns):
        if col.function != "identity":
            continue
        t = layout.schema.arrow.field(col.source).type
        if not any(kind(t) for kind in _EXACT_TEXT_KINDS):
            continue
        texts = [leaf.values[i] for leaf in layout.leaves]
        if any(v in _AMBIGUOUS_TEXT or "%" in v for v in texts):
            continue
        if pa.types.is_integer(t):
            try:
                pa.array(texts, pa.string()).cast(t)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
            # "007" and "7" parse alike; only canonical texts are trusted
            if any(str(int(v)) != v for v in texts):
                continue
        out.append(i)
    return out
