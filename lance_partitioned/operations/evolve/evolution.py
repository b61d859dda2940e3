"""Partition-spec and schema evolution. Leaf data is never rewritten here.

Each change is published through ``__manifest`` table metadata, after any
structural preparation (new ``partition_field_*`` columns, the ``v<N>`` row), so
readers see either the old definition or the new one. A change planned against
one manifest version is refused if the schema or specs moved meanwhile.
"""

from __future__ import annotations

import json

import pyarrow as pa

from lance_partitioned.catalog import layout
from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import SCHEMA_KEY, Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import CommitConflictError, SchemaError
from lance_partitioned.format.schema import (
    LAST_FIELD_ID_KEY,
    Schema,
    column_path,
    recorded_last_field_id,
)
from lance_partitioned.format.spec import PartitionSpec, parse_spec
from lance_partitioned.format.time_ranges import warn_cyclic_fields
from lance_partitioned.operations.leaf.field_ids import lance_field_ids
from lance_partitioned.operations.leaf.leaf_schema import LEAF_FIELD_ID_KEY


def schema_metadata(schema: Schema) -> dict[str, str]:
    """The ``__manifest`` metadata that publishes ``schema``: the schema and its
    high-water mark, always written together (one metadata commit)."""
    return {
        SCHEMA_KEY: json.dumps(schema.to_json(), separators=(",", ":")),
        LAST_FIELD_ID_KEY: str(schema.last_field_id),
    }


def evolving_schema(planned: Snapshot) -> Schema:
    """``planned.schema`` with a high-water mark that covers every field id ever assigned.

    The recorded mark (``LAST_FIELD_ID_KEY``) is trusted when present and not
    below the ids the schema and the specs use. Otherwise (a namespace written
    by 0.1 or by another implementation, or whose schema another
    implementation changed since) no record says which ids dropped columns
    had, so the mark is raised to the largest field id any published leaf
    carries: its Lance field ids and the namespace ids it records under
    ``LEAF_FIELD_ID_KEY``. That opens every leaf, once per snapshot; the next
    schema change records the mark, so it happens once per namespace.
    """
    recorded = recorded_last_field_id(planned.dataset.metadata)
    if recorded is not None and recorded >= planned.schema.last_field_id:
        return planned.schema
    return planned.memo(
        "evolving_schema",
        lambda: planned.schema.with_last_field_id(_leaf_field_id_floor(planned)),
    )


def _leaf_field_id_floor(snapshot: Snapshot) -> int:
    floor = -1
    key = LEAF_FIELD_ID_KEY.encode()
    for leaf in snapshot.leaves():
        ds = snapshot.open_leaf(leaf)
        for lf in ds.lance_schema.fields():
            floor = max(floor, *lance_field_ids(lf))
        for f in ds.schema:
            raw = (f.metadata or {}).get(key)
            if raw is not None and raw.strip().isdigit():
                floor = max(floor, int(raw))
    return floor


def _check_unchanged(manifest: Manifest, planned: Snapshot) -> Snapshot:
    latest = Snapshot.load(manifest, for_write=True)
    if latest.schema != planned.schema or latest.specs != planned.specs:
        raise CommitConflictError(
            "the namespace schema or partition specs changed concurrently; reload and retry"
        )
    return latest


def evolve_spec(manifest: Manifest, planned: Snapshot, spec: object) -> PartitionSpec:
    """Add spec version N+1. Same sources + same transform reuse a field_id; new ids are new.

    The current spec, or any spec with its fields in its order, is no change: nothing is
    written and the current spec is returned (as an Iceberg spec update that
    changes nothing commits nothing), instead of a version N+1 identical to N.
    """
    specs, current = planned.specs, planned.current_spec
    if spec == current:  # ``ns.evolve_spec(ns.spec)``: its id is not N+1, and it is no change
        return current
    new = parse_spec(spec, planned.schema, spec_id=max(specs) + 1, existing=specs.values())
    if new.fields == current.fields:
        return current
    warn_cyclic_fields(new, planned.schema)
    if isinstance(spec, (dict, PartitionSpec)) and new.spec_id != max(specs) + 1:
        raise SchemaError(f"a new spec must have id {max(specs) + 1}, got {new.spec_id}")
    latest = _check_unchanged(manifest, planned)
    known = {f.column for s in specs.values() for f in s.fields}
    manifest.add_partition_columns(
        [pa.field(f.column, f.result_type) for f in new.fields if f.column not in known]
    )
    base = manifest.dataset()
    row = pa.Table.from_pylist(
        [
            {
                "object_id": layout.spec_namespace(new.spec_id),
                "object_type": "namespace",
                "metadata": "{}",
            }
        ],
        schema=base.schema,
    )
    # both commits say what they are part of: the new spec's row, then its metadata
    info = CommitInfo("evolve_spec", {"spec": new.describe(planned.schema)}, 0, 0, 0)
    manifest.commit(base, row, info=info)
    manifest.set_metadata({new.key: new.to_json_str()}, info)
    del latest
    return new


def update_schema(
    manifest: Manifest, planned: Snapshot, schema: Schema, info: CommitInfo | None = None
) -> Schema:
    """Publish a new namespace schema (already validated against the evolution rules),
    recording ``info`` (``history()``: the operation that changed it)."""
    _check_unchanged(manifest, planned)
    # the ids of columns dropped so far stay retired, whoever built ``schema``
    schema = schema.with_last_field_id(evolving_schema(planned).last_field_id)
    current = planned.current_spec
    for f in current.fields:
        for sid in f.source_ids:
            if not schema.has_id(sid):
                name = (
                    planned.schema.field_by_id(sid).name
                    if planned.schema.has_id(sid)
                    else f"#{sid}"
                )
                raise SchemaError(
                    f"cannot drop column {name!r}: the current partition spec v{current.spec_id} "
                    f"partitions by it (field {f.field_id!r}); evolve the spec first"
                )
    if info is not None:  # a schema change moves no row
        info = info.with_counts(rows_added=0, rows_removed=0, partitions=0)
    manifest.set_metadata(schema_metadata(schema), info)
    return schema


def widen_column(manifest: Manifest, planned: Snapshot, name: str, new_type: pa.DataType) -> Schema:
    """Widen column ``name``, and the identity/truncate partition fields it feeds.

    Those fields' ``partition_field_*`` columns are widened in ``__manifest``
    first (a reader in between sees wider values of the same partitions), then
    the schema and the specs switch together in one metadata commit.
    """
    schema = evolving_schema(planned).widen_column(name, new_type)
    source_id = schema.field_id_at(column_path(name))
    specs = {sid: s.with_widened_source(source_id, new_type) for sid, s in planned.specs.items()}
    changed = [s for sid, s in specs.items() if s != planned.specs[sid]]
    columns = {
        f.column: f.result_type
        for s in changed
        for f, old in zip(s.fields, planned.specs[s.spec_id].fields, strict=True)
        if not f.result_type.equals(old.result_type)
    }
    _check_unchanged(manifest, planned)
    manifest.widen_partition_columns(columns)
    metadata = schema_metadata(schema)
    metadata.update({s.key: s.to_json_str() for s in changed})
    manifest.set_metadata(
        metadata, CommitInfo("widen_column", {"name": name, "type": str(new_type)}, 0, 0, 0)
    )
    return schema
