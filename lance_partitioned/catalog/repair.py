"""Repair ``__manifest`` after a foreign writer dropped our columns.

Every ``DirectoryNamespace`` write in pylance (``create_namespace``,
``create_table``, ``drop_table``, ...) rewrites ``__manifest`` as a Lance
``Overwrite`` with only the five base columns. The rows, their ``metadata``
JSON and the table metadata (schema, specs) survive; ``read_*`` and
``partition_field_*`` columns do not. Everything they held is recoverable:

- partition values from the metadata mirror (``partition.<field_id>``): a table
  row lists every field of its spec (missing key = NULL); a namespace row at
  level k holds field k, and inherits fields 1..k-1 from its ancestors' rows;
- ``read_version`` / ``read_branch`` / ``read_tag`` from the newest earlier
  ``__manifest`` version that still had the columns (exact), else from the
  ``lp.read_*`` mirror keys our writers keep in every table row's metadata,
  else NULL (the row then reads the leaf's latest version, and a warning says
  so).

Opening never writes: ``Snapshot.load`` reads a damaged version
through ``view``, an in-memory Lance dataset of the rebuilt rows, and logs what
is missing; writes refuse (``NamespaceDamagedError``) until ``ns.repair()``
calls ``repair``: one strict compare-and-swap ``Overwrite`` on ``__manifest`` on
top of the damaged version; if anyone commits meanwhile, it is retried from there.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import lance
import pyarrow as pa
from lance.fragment import write_fragments

from lance_partitioned.catalog import layout
from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import (
    READ_COLUMNS,
    READ_MIRROR_KEYS,
    SPEC_KEY_PREFIX,
    Manifest,
    manifest_schema,
)
from lance_partitioned.catalog.mirror import MIRROR_PREFIX, parse_partition_value
from lance_partitioned.catalog.retry import COMMIT_RETRY
from lance_partitioned.errors import (
    CommitConflictError,
    CorruptNamespaceError,
    NamespaceDamagedError,
)
from lance_partitioned.format.spec import PartitionSpec

log = logging.getLogger(__name__)

REPAIR_PROPERTY = "lp.txn"


def _partition_fields(meta: dict[str, str]) -> dict[int, list[tuple[str, str, pa.DataType]]]:
    """spec id → [(field_id, column, result_type)] from the table metadata."""
    out = {}
    for key, value in meta.items():
        if key.startswith(SPEC_KEY_PREFIX) and key[len(SPEC_KEY_PREFIX) :].isdigit():
            spec = PartitionSpec.from_json(value)
            out[spec.spec_id] = [(f.field_id, f.column, f.result_type) for f in spec.fields]
    return out


def missing_columns(ds: lance.LanceDataset) -> list[str]:
    """Our columns that ``ds`` lacks (empty when it is intact)."""
    names = set(ds.schema.names)
    wanted = list(READ_COLUMNS)
    try:
        fields = _partition_fields(ds.metadata)
    except Exception:  # a broken spec is reported by Snapshot.load, not here
        fields = {}
    for spec_fields in fields.values():
        wanted.extend(column for _, column, _ in spec_fields)
    return [c for c in dict.fromkeys(wanted) if c not in names]


def describe_damage(ds: lance.LanceDataset, missing: list[str]) -> str:
    """What is missing from ``ds`` and the likely cause, in one sentence (facts, not guesses)."""
    read = [c for c in missing if c in READ_COLUMNS]
    parts = [c for c in missing if c not in READ_COLUMNS]
    what = []
    if read:
        what.append(
            f"the read columns {read} (it was rewritten with the DirectoryNamespace base "
            "columns only, as DirectoryNamespace create_namespace/create_table/drop_table do)"
        )
    if parts:
        owners = sorted(
            f"{SPEC_KEY_PREFIX}{sid}"
            for sid, fields in _partition_fields(ds.metadata).items()
            if any(column in parts for _, column, _ in fields)
        )
        what.append(f"the partition columns {parts} that {', '.join(owners)} call for")
    return f"__manifest version {ds.version} lacks " + " and ".join(what)


def view(manifest: Manifest, damaged: lance.LanceDataset) -> tuple[lance.LanceDataset, list[str]]:
    """The rebuilt rows of ``damaged`` as an in-memory Lance dataset (nothing is written),
    and the notes of ``rebuild``."""
    table, notes, _ = rebuild(manifest, damaged)
    uri = f"memory://lp-view-{uuid.uuid4().hex}"
    return lance.write_dataset(table, uri, schema=table.schema), notes


def _history(manifest: Manifest, damaged: lance.LanceDataset) -> dict[str, dict[str, Any]]:
    """object_id → our columns (read and partition columns, as far as it had them), from
    the newest earlier version that still had the read columns."""
    for v in reversed(damaged.versions()):
        if v["version"] >= damaged.version:
            continue
        try:
            ds = manifest.dataset(v["version"])
        except Exception:
            continue
        if not set(READ_COLUMNS) <= set(ds.schema.names):
            continue
        ours = [c for c in ds.schema.names if c in READ_COLUMNS or c.startswith("partition_field_")]
        data = ds.to_table(columns=["object_id", *ours]).to_pylist()
        log.info("repair: read columns taken from __manifest version %d", v["version"])
        return {row["object_id"]: row for row in data}
    return {}


def rebuild(
    manifest: Manifest, damaged: lance.LanceDataset
) -> tuple[pa.Table, list[str], list[str]]:
    """The repaired rows (full schema), human-readable notes, and the object ids whose
    partition values nothing recorded (they come out NULL)."""
    fields = _partition_fields(damaged.metadata)
    columns: dict[str, pa.DataType] = {}
    for spec_fields in fields.values():
        for _fid, column, rtype in spec_fields:
            columns.setdefault(column, rtype)
    schema = manifest_schema([pa.field(c, t) for c, t in columns.items()])
    rows = damaged.to_table().to_pylist()
    meta_of = {r["object_id"]: json.loads(r.get("metadata") or "{}") for r in rows}
    history = _history(manifest, damaged)
    notes: list[str] = []
    from_history = from_mirror = unknown = 0
    lost: set[str] = set()
    out = []
    for row in rows:
        oid = row["object_id"]
        fixed = {k: row.get(k) for k in schema.names if k in row}
        parts = layout.split_id(oid)
        head = parts[0]
        sid = layout.spec_id_of_namespace(head)
        spec_fields = fields.get(sid) if sid is not None else None
        if spec_fields and len(parts) > 1:
            is_table = row["object_type"] == "table"
            depth = len(spec_fields) if is_table else len(parts) - 1
            for level, (fid, column, rtype) in enumerate(spec_fields[:depth], start=1):
                # a table row lists every value; a namespace row only its own level's
                owner = oid if is_table else layout.join_id(*parts[: level + 1])
                if column in row and row[column] is not None:
                    continue
                old_row = history.get(oid, {})
                owner_meta = meta_of.get(owner, {})
                if column in old_row:  # exact and typed; rows of other writers have no mirror
                    fixed[column] = old_row[column]
                else:
                    text = owner_meta.get(MIRROR_PREFIX + fid)
                    fixed[column] = parse_partition_value(text, rtype)
                    if not any(k.startswith(MIRROR_PREFIX) for k in owner_meta):
                        lost.add(oid)  # no history and no mirror: NULL is a guess
        if row["object_type"] == "table" and not all(c in row for c in READ_COLUMNS):
            old = history.get(oid)
            if old is not None:
                fixed.update({c: old[c] for c in READ_COLUMNS})
                from_history += 1
            else:
                meta = meta_of.get(oid, {})
                mirrored = {c: meta.get(READ_MIRROR_KEYS[c]) for c in READ_COLUMNS}
                if any(v is not None for v in mirrored.values()):
                    rv = mirrored["read_version"]
                    fixed["read_version"] = int(rv) if rv is not None else None
                    fixed["read_branch"] = mirrored["read_branch"]
                    fixed["read_tag"] = mirrored["read_tag"]
                    from_mirror += 1
                else:
                    unknown += 1
                    notes.append(f"{oid}: read_version unknown; it now reads the latest version")
        out.append(fixed)
    if lost:
        notes.append(
            f"partition values of {len(lost)} rows are unknown (no earlier version has them and "
            f"their metadata has no partition.* mirror); they read as NULL: {sorted(lost)[:5]}"
        )
    notes.insert(
        0,
        f"{len(out)} rows; read columns of {from_history} table rows from history, "
        f"{from_mirror} from the metadata mirror, {unknown} unknown",
    )
    return pa.Table.from_pylist(out, schema=schema), notes, sorted(lost)


def latest_to_repair(manifest: Manifest) -> lance.LanceDataset:
    """The latest ``__manifest`` version, checked as for a write. Damaged files are beyond
    repair: CorruptNamespaceError says what repair can and cannot fix."""
    try:
        return manifest.open_checked(for_write=True)
    except CorruptNamespaceError as exc:
        raise CorruptNamespaceError(
            f"cannot repair {manifest.root!r}: {exc}. Repair restores __manifest columns a "
            "foreign writer dropped and removes what an interrupted create left; it cannot "
            "rebuild damaged files, and it changes nothing",
            files=exc.files,
        ) from exc


def repair(manifest: Manifest, damaged: lance.LanceDataset) -> list[str]:
    """Restore our columns on top of ``damaged`` (the latest version), in one commit.

    Only ever called explicitly (``ns.repair()``). Returns what was done, in
    words; an empty list when nothing was missing (no commit).
    """
    for _attempt in COMMIT_RETRY.tries():  # a conflict rebuilds on the newer version
        missing = missing_columns(damaged)
        if not missing:
            return []
        table, notes, lost = rebuild(manifest, damaged)
        if lost:
            # Writing NULL for values nobody recorded would mis-file those partitions
            # for good; the damaged version stays readable (as NULL) meanwhile.
            raise NamespaceDamagedError(
                f"cannot repair {manifest.root!r}: {describe_damage(damaged, missing)}, and "
                f"the partition values of {len(lost)} rows are recorded nowhere (no earlier "
                f"__manifest version has them, their metadata has no partition.* mirror): "
                f"{lost[:5]}. Restore the columns by hand (seed 000, Appendix C)"
            )
        frags = write_fragments(
            table,
            manifest.uri,
            schema=table.schema,
            mode="overwrite",
            storage_options=manifest.storage_options,
        )
        op = lance.LanceOperation.Overwrite(table.schema, frags)
        try:
            repaired = manifest.commit_operation(
                damaged,
                op,
                {REPAIR_PROPERTY: "repair"},
                what="the repair",
                info=CommitInfo("repair", {}, 0, 0, 0),
            )
        except CommitConflictError:
            damaged = manifest.dataset()  # someone committed (or repaired) meanwhile
            continue
        done = [
            f"{describe_damage(damaged, missing)}; restored them as version {repaired.version}",
            *notes,
        ]
        log.info("repaired %s: %s", manifest.root, "; ".join(done))
        return done
    raise RuntimeError(f"could not repair __manifest of {manifest.root!r}: it kept changing")
