"""What ``describe`` shows of a seed-003 namespace, read-only: its schema, its partition
columns, the seed-000 spec ``lp.convert`` would write, partitions with row, file and
byte counts, size on disk, and the ``__manifest`` versions and tags.

The counts are ``operations.maintain.describe.summary``'s (one home for them); what
differs is said in seed 003's terms: each partition's values are its table name's
texts (all levels, not only the ones that prune), the schema has no field ids of its
own, and every ``__manifest`` version is listed (seed 003 commits each change to it),
although a seed-003 namespace opens at its latest state only.
"""

from __future__ import annotations

from typing import Any

from lance_partitioned.catalog import history
from lance_partitioned.operations.maintain import describe as describe_ops
from lance_partitioned.seed003 import layout as seed003
from lance_partitioned.seed003.read import Seed003Snapshot


def _column_text(col: seed003.Seed003Column) -> str:
    if col.parameter is None:
        return f"{col.function}({col.source})"
    return f"{col.function}({col.parameter}, {col.source})"


def summary(snap: Seed003Snapshot) -> dict[str, Any]:
    """Everything ``describe`` shows, as plain data (``lance-partitioned describe --json``).

    Partitions carry the keys of a seed-000 summary's (``object_id`` as ``plan`` names
    the leaf, ``spec_id`` 1: the spec ``lp.convert`` writes), with ``values`` keyed by
    level name (``country``, ``ts_year``, ``city_bucket``) and holding the table name's
    texts.
    """
    layout = snap.layout
    assert layout is not None
    out = describe_ops.summary(snap, layout.root)
    names = [c.level_name for c in layout.columns]
    texts = {f"v1${leaf.object_id}": leaf.values for leaf in layout.leaves}
    for part in out["partitions"]:
        part["values"] = dict(zip(names, texts[part["object_id"]], strict=True))
    listed = sorted(v["version"] for v in snap.manifest.dataset().versions())
    out.update(
        layout="seed 003",
        partition_columns=[
            {"level": c.level_name, "function": c.function, "source": c.source}
            | ({} if c.parameter is None else {"parameter": c.parameter})
            for c in layout.columns
        ],
        specs={1: seed003.seed000_spec_json(layout)},
        current_spec=1,
        versions={
            "count": len(listed),
            "oldest": listed[0] if listed else None,
            "latest": listed[-1] if listed else None,
            "tags": history.tags(snap.manifest),
        },
    )
    return out


def describe(snap: Seed003Snapshot) -> str:
    """A readable report of ``summary`` (partitions sorted as ``describe`` sorts them)."""
    info = summary(snap)
    layout = snap.layout
    assert layout is not None
    lines = [
        f"Seed-003 namespace {layout.root} (an earlier layout, read-only here: "
        f"lp.convert(root, NEW_ROOT) or `lance-partitioned convert` rewrites it in seed "
        "000's layout)",
        f"__manifest version {layout.manifest_version} (its latest: a seed-003 namespace "
        "opens at its latest state only)",
        "Schema (no field ids in seed 003; convert assigns them depth-first):",
    ]
    for f in layout.schema.arrow:
        lines.append(f"  {f.name}: {f.type}{'' if f.nullable else ' NOT NULL'}")
    lines.append(
        "Partition columns: " + (", ".join(_column_text(c) for c in layout.columns) or "none")
    )
    body = []
    for p in info["partitions"]:
        vals = ", ".join(f"{k}={v}" for k, v in p["values"].items())
        rows, files = p["rows"], p["files"]
        body.append(
            f"  {vals or '(unpartitioned)'}: {rows:,} row{'' if rows == 1 else 's'}, "
            f"{files:,} file{'' if files == 1 else 's'}, "
            f"{describe_ops.human_bytes(p['bytes'])}, {p['pinned']}"
        )
    lines.append(
        f"Partitions: {len(body):,}, {info['rows']:,} rows in all, {info['files']:,} files, "
        f"{describe_ops.human_bytes(info['bytes'])} of data (leaf version: the latest "
        "Lance version of the partition's table, read at open)"
    )
    lines.extend(body)
    if info["disk_bytes"] is not None:
        lines.append(f"Size on disk: {describe_ops.human_bytes(info['disk_bytes'])} under the root")
    v = info["versions"]
    tags = ", ".join(f"{name} -> {ver}" for name, ver in v["tags"].items()) or "none"
    lines.append(
        f"Versions: {v['count']:,} __manifest versions kept ({v['oldest']}..{v['latest']}); "
        "tags: " + tags
    )
    return "\n".join(lines)
