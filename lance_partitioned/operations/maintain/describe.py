"""Reports on one snapshot: ``validate``, the partitions table, Appendix E
properties and the readable ``describe``. Read-only: nothing here writes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.catalog import history, layout
from lance_partitioned.catalog.mirror import MIRROR_PREFIX, format_partition_value
from lance_partitioned.catalog.snapshot import Leaf, Snapshot, spec_problem
from lance_partitioned.errors import CorruptNamespaceError
from lance_partitioned.format.filters.render import render_literal
from lance_partitioned.operations.evolve import evolution
from lance_partitioned.operations.evolve.placement import misplaced_leaves
from lance_partitioned.operations.leaf.leaf_schema import check_leaf


def validate(snap: Snapshot) -> list[str]:
    """Check every partition table against the namespace schema and field ids.

    Returns the inconsistencies found (an empty list when all is well); reads
    of an inconsistent partition raise instead of returning wrong data.
    Files of the ``__manifest`` version that are missing or damaged are the one
    problem reported then (``CorruptNamespaceError``'s message, naming them):
    without its rows no partition can be checked.
    Also reports a current partition spec that fails validation (it names a
    dropped or unknown column; writes refuse until a valid spec is added),
    and leaf columns whose field id is above the namespace's high-water mark
    (columns of dropped ids are not problems: old leaves keep them).
    Also reports partitions whose rows' time-field values (year/month/day/hour
    of a zoned column, in its zone) differ from the partition's: written by
    0.1, which computed them in UTC; ``rewrite_partitions()`` fixes them.
    """
    try:  # a damaged __manifest: its rows, hence the partitions, cannot be read
        snap.manifest.check_intact(snap.dataset)
    except CorruptNamespaceError as exc:
        return [str(exc)]
    problem = spec_problem(snap)  # open() warns and writes refuse; say so here too
    problems: list[str] = [] if problem is None else [problem]
    try:
        # leaf columns of dropped (retired) ids are legitimate, unknown ids are not
        schema = evolution.evolving_schema(snap)
    except Exception:  # an unreadable leaf: reported below, one by one
        schema = snap.schema
    for leaf in snap.leaves():
        try:
            ds = snap.open_leaf(leaf)
        except Exception as exc:
            problems.append(f"partition {leaf.object_id}: cannot open {leaf.location!r}: {exc}")
            continue
        problems.extend(check_leaf(schema, ds, leaf.object_id))
    problems.extend(misplaced_leaves(snap).values())
    return problems


def partitions_table(snap: Snapshot, with_counts: bool = True) -> pa.Table:
    """One row per partition table: spec version, partition values, read version, row count."""
    rows = []
    for leaf in snap.leaves():
        spec = snap.specs[leaf.spec_id]
        row: dict[str, Any] = {
            "object_id": leaf.object_id,
            "spec_id": leaf.spec_id,
            "partition": {
                f.field_id: format_partition_value(v)
                for f, v in zip(spec.fields, leaf.values, strict=True)
            },
            "location": leaf.location,
            "read_version": leaf.read_version,
        }
        if with_counts:
            row["rows"] = snap.open_leaf(leaf).count_rows()
        rows.append(row)
    if not rows:
        return pa.table({"object_id": pa.array([], pa.string())})
    out = pa.Table.from_pylist(rows)
    return out


def namespace_properties(snap: Snapshot, root: str, namespace_id: Sequence[str]) -> dict[str, str]:
    """Runtime properties of Appendix E for a namespace path like ``["v1", "k7m2..."]``.

    ``["v<N>"]`` gives ``partition_spec``; a partition namespace at level k
    gives ``partition.<field_id>`` of field k only (its own level), built from
    the typed ``partition_field_*`` columns, so rows another implementation
    wrote (with no ``metadata`` mirror) show their values too. A table path
    gives every field of its spec. A NULL value has no key (FORMAT.md §5).
    Raises KeyError for a path that names no row.
    """
    path = list(namespace_id)
    oid = layout.join_id(*path)
    try:
        spec = snap.specs[layout.spec_id_of(oid)] if path else None
    except (ValueError, KeyError):
        spec = None
    if spec is None:
        raise KeyError(f"no namespace {oid!r} in {root!r}")
    if len(path) == 1:
        return {"partition_spec": spec.to_json_str()}
    columns = [f.column for f in spec.fields]
    rows = snap.rows_dataset.to_table(
        columns=["object_type", *columns], filter=f"object_id = {render_literal(oid)}"
    ).to_pylist()
    if not rows:
        raise KeyError(f"no namespace {oid!r} in {root!r}")
    row = rows[0]
    if row["object_type"] == "table":
        fields = list(spec.fields)
    elif len(path) - 1 <= len(spec.fields):
        fields = [spec.fields[len(path) - 2]]
    else:
        raise KeyError(f"{oid!r} is deeper than the {len(spec.fields)} fields of {spec.key}")
    values = {f.field_id: row[f.column] for f in fields}
    return {
        MIRROR_PREFIX + fid: format_partition_value(v) for fid, v in values.items() if v is not None
    }


def _leaf_order(spec_id: int, values: Sequence[Any]) -> tuple[Any, ...]:
    """Sort key: spec version, then values in their own order (all values of one field
    share the field's result_type, so they compare), NULL last."""
    return (spec_id, tuple((True, 0) if v is None else (False, v) for v in values))


def _pinned(leaf: Leaf) -> str:
    if leaf.read_tag is not None:
        return f"leaf tag {leaf.read_tag!r}"
    if leaf.read_branch is not None:
        at = "latest" if leaf.read_version is None else f"version {leaf.read_version}"
        return f"leaf branch {leaf.read_branch!r} {at}"
    return f"leaf version {leaf.read_version}"


def _leaf_files(ds: Any) -> tuple[int, int]:
    """(data and deletion files, their bytes) of the leaf version ``ds`` reads."""
    files = size = 0
    for frag in ds.get_fragments():
        for df in frag.data_files():
            files += 1
            size += df.file_size_bytes or 0
        if frag.metadata.deletion_file is not None:
            files += 1
    return files, size


def _disk_bytes(snap: Snapshot) -> int | None:
    """Bytes of every object under the root (all versions, through the storage layer);
    None when the store cannot list them."""
    store = snap.manifest.storage
    try:
        return sum(e.size for e in store.list(snap.manifest.root, recursive=True) if not e.is_dir)
    except Exception:  # a listing error must not break a report
        return None


def human_bytes(n: int) -> str:
    """``880 B``, ``1.5 KiB``, ``3.2 MiB``: sizes for people."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def summary(snap: Snapshot, root: str) -> dict[str, Any]:
    """Everything ``describe`` shows, as plain data (what ``lance-partitioned describe --json``
    prints): root, version, schema (JsonArrowSchema), specs (seed-000 JSON), partitions sorted
    by spec version then value (each with only its own spec's fields), row, file and byte
    counts, bytes under the root (any store), and the ``__manifest`` versions and tags.
    """
    parts: list[dict[str, Any]] = []
    for leaf in sorted(snap.leaves(), key=lambda lf: _leaf_order(lf.spec_id, lf.values)):
        spec = snap.specs[leaf.spec_id]
        ds = snap.open_leaf(leaf)
        files, size = _leaf_files(ds)
        parts.append(
            {
                "object_id": leaf.object_id,
                "spec_id": leaf.spec_id,
                "values": {
                    f.field_id: None if v is None else format_partition_value(v)
                    for f, v in zip(spec.fields, leaf.values, strict=True)
                },
                "rows": ds.count_rows(),
                "files": files,
                "bytes": size,
                "read_version": leaf.read_version,
                "read_tag": leaf.read_tag,
                "read_branch": leaf.read_branch,
                "pinned": _pinned(leaf),
            }
        )
    versions = history.versions(snap.manifest)
    return {
        "root": root,
        "version": snap.version,
        "schema": snap.schema.to_json(),
        "specs": {sid: json.loads(snap.specs[sid].to_json_str()) for sid in sorted(snap.specs)},
        "current_spec": max(snap.specs),
        "partitions": parts,
        "rows": sum(p["rows"] for p in parts),
        "files": sum(p["files"] for p in parts),
        "bytes": sum(p["bytes"] for p in parts),
        "disk_bytes": _disk_bytes(snap),
        "versions": {
            "count": len(versions),
            "oldest": versions[0]["version"] if versions else None,
            "latest": versions[-1]["version"] if versions else None,
            "tags": history.tags(snap.manifest),
        },
    }


def describe(snap: Snapshot, root: str) -> str:
    """A readable report: schema, specs, partitions, sizes and versions.

    Partitions are listed by spec version, then by their partition values in
    the spec's field order, compared as values (month 2 before month 10; dates
    by date), NULL last. Each shows only its own spec's fields, its row count,
    its files and their size, and the leaf version it is read at; totals follow
    the header. Versions are explained: which ``__manifest`` version this is,
    how many are kept, and the tags.
    """
    info = summary(snap, root)
    v = info["versions"]
    lines = [
        f"Partitioned namespace {root}",
        f"namespace version {snap.version} (the __manifest table's Lance version; "
        f"lp.open(root, version={snap.version}) reads this state)",
        "Schema:",
    ]
    for f in snap.schema.arrow:
        fid = (f.metadata or {}).get(b"lance:field_id", b"?").decode()
        lines.append(f"  {fid:>3}  {f.name}: {f.type}{'' if f.nullable else ' NOT NULL'}")
    lines.append("Partition specs:")
    for sid in sorted(snap.specs):
        mark = " (current: new writes use it)" if sid == info["current_spec"] else ""
        lines.append(f"  v{sid}{mark}: {snap.specs[sid].describe(snap.schema)}")
    body = []
    for p in info["partitions"]:
        vals = ", ".join(
            f"{fid}={'NULL' if val is None else val}" for fid, val in p["values"].items()
        )
        rows, files = p["rows"], p["files"]
        body.append(
            f"  v{p['spec_id']} {vals or '(unpartitioned)'}: "
            f"{rows:,} row{'' if rows == 1 else 's'}, {files:,} file{'' if files == 1 else 's'}, "
            f"{human_bytes(p['bytes'])}, {p['pinned']}"
        )
    lines.append(
        f"Partitions: {len(body):,}, {info['rows']:,} rows in all, {info['files']:,} files, "
        f"{human_bytes(info['bytes'])} of data "
        "(leaf version: the Lance version of the partition's table that this namespace version reads)"
    )
    lines.extend(body)
    if info["disk_bytes"] is not None:
        lines.append(
            f"Size on disk: {human_bytes(info['disk_bytes'])} under the root (every kept "
            "version of every partition and of __manifest; cleanup() removes old ones)"
        )
    tags = ", ".join(f"{name} -> {ver}" for name, ver in v["tags"].items()) or "none"
    lines.append(
        f"Versions: {v['count']:,} __manifest versions kept ({v['oldest']}..{v['latest']}); "
        "each commit (write, delete, evolution, compaction) adds one and each one is a "
        "consistent snapshot of every partition; tags: " + tags
    )
    return "\n".join(lines)
