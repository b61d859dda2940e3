"""Commands that only read: describe, partitions, plan, explain, history/versions, tags,
count, head. None of them writes anything."""

from __future__ import annotations

import json
from typing import Any

import click

from lance_partitioned.cli.common import Context, shared_options
from lance_partitioned.cli.output import emit, table

# The library loads inside each command, not here: ``--help`` imports only click and
# these modules (tests/test_startup.py).

# the most rows ``head`` can slice (Arrow lengths are signed 64-bit)
MAX_ROWS = 2**63 - 1


def _columns(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [c.strip() for c in value.split(",") if c.strip()]
    if not names:
        raise click.BadParameter("name at least one column", param_hint="'--columns'")
    return names


def _summary(ns: Any) -> dict[str, Any]:
    """``describe``'s data: a seed-003 namespace reports in its own layout's terms."""
    import lance_partitioned as lp
    from lance_partitioned.operations.maintain import describe as describe_ops

    if isinstance(ns, lp.Seed003Namespace):
        return ns.summary()
    return describe_ops.summary(ns.snapshot, ns.root)


@click.command()
@shared_options
def describe(ctx: Context) -> None:
    """Schema, partition specs, partitions with row/file counts and sizes, and versions."""
    ns = ctx.open()
    if ctx.json:
        emit(True, _summary(ns), lambda c: None)
    else:
        click.echo(ns.describe())


@click.command()
@shared_options
@click.option("--filter", "filter_", metavar="SQL", help="Only partitions this filter may match.")
def partitions(ctx: Context, filter_: str | None) -> None:
    """One row per partition: spec version, values, rows, files, bytes, read version."""
    from lance_partitioned.operations.maintain import describe as describe_ops

    ns = ctx.open()
    parts = _summary(ns)["partitions"]
    if filter_ is not None:
        kept = {t.object_id for t in ns.plan(filter_)}
        parts = [p for p in parts if p["object_id"] in kept]

    def render(console: Any) -> None:
        console.print(
            table(
                f"{len(parts)} partitions of {ns.root} (version {ns.version})",
                ["spec", "values", "rows", "files", "bytes", "read at", "object_id"],
                [
                    [
                        f"v{p['spec_id']}",
                        p["values"],
                        f"{p['rows']:,}",
                        p["files"],
                        describe_ops.human_bytes(p["bytes"]),
                        p["pinned"],
                        p["object_id"],
                    ]
                    for p in parts
                ],
            )
        )

    emit(ctx.json, parts, render)


def _plan(ctx: Context, filter_: str) -> None:
    ns = ctx.open()
    tasks = ns.plan(filter_)
    rows = [
        {
            "object_id": t.object_id,
            "spec_id": t.spec_id,
            "values": t.partition_values,
            "location": t.location,
            "read_version": t.read_version,
            "read_tag": t.read_tag,
            "read_branch": t.read_branch,
            "filter": t.filter_sql,
        }
        for t in tasks
    ]

    def render(console: Any) -> None:
        console.print(
            table(
                f"{len(rows)} of {len(ns.plan())} partitions to read",
                ["spec", "values", "read version", "residual filter", "location"],
                [
                    [f"v{r['spec_id']}", r["values"], r["read_version"], r["filter"], r["location"]]
                    for r in rows
                ],
            )
        )

    emit(ctx.json, rows, render)


@click.command()
@shared_options
@click.argument("filter_", metavar="FILTER")
def plan(ctx: Context, filter_: str) -> None:
    """The partitions a scan with FILTER reads, each with its residual filter."""
    _plan(ctx, filter_)


@click.command()
@shared_options
@click.argument("filter_", metavar="FILTER")
def explain(ctx: Context, filter_: str) -> None:
    """How FILTER prunes: the __manifest predicate and partitions kept of all."""
    ns = ctx.open()
    scan = ns.scan(filter_)
    data = {
        "filter": scan.sql,
        "version": ns.version,
        "manifest_predicate": scan.manifest_sql,
        "partitions": len(scan.leaves),
        "partitions_total": len(ns.snapshot.leaf_table()),
    }
    emit(ctx.json, data, lambda console: console.print(scan.explain()))


def _history(ctx: Context) -> None:
    ns = ctx.open()
    by_version: dict[int, list[str]] = {}
    for name, v in ns.tags().items():
        by_version.setdefault(v, []).append(name)
    rows = [
        {
            **r,
            "timestamp": r["timestamp"].isoformat(),
            "parameters": json.loads(r["parameters"] or "{}"),
            "tags": by_version.get(r["version"], []),
            "read": r["version"] == ns.version,
        }
        for r in ns.history().to_pylist()
    ]

    def count(value: int | None) -> str:
        return "unknown" if value is None else str(value)

    def render(console: Any) -> None:
        console.print(
            table(
                f"commits of {ns.root}, newest first (* = the version read)",
                [
                    "version",
                    "committed (UTC)",
                    "operation",
                    "parameters",
                    "+rows",
                    "-rows",
                    "partitions",
                    "tags",
                ],
                [
                    [
                        f"{r['version']}{' *' if r['read'] else ''}",
                        r["timestamp"][:19].replace("T", " "),
                        r["operation"],
                        json.dumps(r["parameters"], ensure_ascii=False)[1:-1],
                        count(r["rows_added"]),
                        count(r["rows_removed"]),
                        count(r["partitions"]),
                        ", ".join(r["tags"]),
                    ]
                    for r in rows
                ],
            )
        )

    emit(ctx.json, rows, render)


@click.command()
@shared_options
def history(ctx: Context) -> None:
    """Every commit, newest first: time, operation, parameters, rows added and removed,
    partitions touched, tags (--json: one object per commit)."""
    _history(ctx)


@click.command()
@shared_options
def versions(ctx: Context) -> None:
    """Same as history."""
    _history(ctx)


@click.command()
@shared_options
def tags(ctx: Context) -> None:
    """Tag names and the __manifest version each names."""
    found = ctx.open().tags()
    emit(
        ctx.json,
        found,
        lambda console: console.print(table("tags", ["tag", "version"], found.items())),
    )


@click.command()
@shared_options
@click.option("--filter", "filter_", metavar="SQL", help="Count only the rows matching it.")
def count(ctx: Context, filter_: str | None) -> None:
    """Number of rows (matching --filter)."""
    n = ctx.open().count(filter_)
    emit(ctx.json, {"rows": n}, lambda console: console.print(str(n)))


@click.command()
@shared_options
@click.option("--filter", "filter_", metavar="SQL", help="Only rows matching it.")
@click.option("--columns", metavar="A,B,...", help="Only these columns.")
@click.option(
    "-n", "--rows", "limit", default=10, show_default=True, type=click.IntRange(0, MAX_ROWS)
)
def head(ctx: Context, filter_: str | None, columns: str | None, limit: int) -> None:
    """The first rows (matching --filter), read leaf by leaf until enough are found."""
    import pyarrow as pa

    scan = ctx.open().scan(filter_, columns=_columns(columns))
    batches, got = [], 0
    if limit:
        for batch in scan.to_batches():
            batches.append(batch.slice(0, limit - got))
            got += batches[-1].num_rows
            if got >= limit:
                break
    result = pa.Table.from_batches(batches, schema=scan.output_schema)
    records = result.to_pylist()

    def render(console: Any) -> None:
        console.print(
            table(None, result.column_names, ([r[c] for c in result.column_names] for r in records))
        )

    emit(ctx.json, records, render)


COMMANDS = [describe, partitions, plan, explain, history, versions, tags, count, head]


def register(group: click.Group) -> None:
    """Add the read commands to ``group``."""
    for command in COMMANDS:
        group.add_command(command)


__all__ = ["register"]
