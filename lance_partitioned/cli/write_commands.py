"""Commands that change a namespace: tag, restore, evolve, the column changes, and maintenance
(compact, cleanup, vacuum, repair), plus validate. Each prints what it did."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from lance_partitioned.cli.common import (
    Context,
    parse_duration,
    parse_type,
    parse_version,
    shared_options,
)
from lance_partitioned.cli.output import emit, table


def _done(ctx: Context, data: dict[str, Any], message: str) -> None:
    emit(ctx.json, data, lambda console: console.print(message))


def _report(ctx: Context, what: str, report: Any) -> None:
    data = asdict(report)
    shown = [(k, v) for k, v in data.items() if v not in (0, False, None, [])]

    def render(console: Any) -> None:
        console.print(f"{what}: done, __manifest version {report.version}")
        if shown:
            console.print(table(None, ["", "count"], shown))

    emit(ctx.json, data, render)


@click.command()
@shared_options
@click.argument("name")
@click.option("--delete", is_flag=True, help="Remove the tag instead.")
def tag(ctx: Context, name: str, delete: bool) -> None:
    """Name the version read (latest, or --at-version) NAME; --delete removes the tag."""
    ns = ctx.open()
    if delete:
        ns.delete_tag(name)
        _done(ctx, {"tag": name, "deleted": True}, f"deleted tag {name!r}")
        return
    version = ns.tag(name)
    _done(ctx, {"tag": name, "version": version}, f"tagged version {version} as {name!r}")


@click.command()
@shared_options
@click.argument("target", metavar="VERSION_OR_TAG")
def restore(ctx: Context, target: str) -> None:
    """Make __manifest version or tag VERSION_OR_TAG current again, as a new version
    (partitions created since are unpublished; the versions in between stay readable)."""
    result = ctx.open().restore(parse_version(target))
    if result.version == result.restored_from:
        message = f"version {result.version} is already the current one: nothing to restore"
    else:
        message = (
            f"restored version {result.restored_from} as __manifest version {result.version} "
            f"({result.partitions_changed} partition(s) changed)"
        )
    _done(ctx, asdict(result), message)


@click.command()
@shared_options
@click.argument("spec")
def evolve(ctx: Context, spec: str) -> None:
    """Add partition spec version N+1, e.g. "year(event_date), country" (no data is rewritten)."""
    ns = ctx.open()
    new = ns.evolve_spec(spec)
    text = new.describe(ns.schema)
    _done(
        ctx,
        {"spec_id": new.spec_id, "spec": text, "version": ns.version},
        f"spec v{new.spec_id}: {text} (new writes use it; version {ns.version})",
    )


def _schema_done(ctx: Context, ns: Any, message: str) -> None:
    cols = {f.name: str(f.type) for f in ns.schema.arrow}
    _done(ctx, {"version": ns.version, "columns": cols}, f"{message} (version {ns.version})")


@click.command("add-column")
@shared_options
@click.argument("name")
@click.argument("type_", metavar="TYPE")
def add_column(ctx: Context, name: str, type_: str) -> None:
    """Add a nullable column NAME of TYPE (int64, string, date32, decimal(10,2), ...)."""
    arrow_type = parse_type(type_)
    ns = ctx.open()
    ns.add_column(name, arrow_type)
    _schema_done(ctx, ns, f"added column {name}: {arrow_type}")


@click.command("rename-column")
@shared_options
@click.argument("old")
@click.argument("new")
def rename_column(ctx: Context, old: str, new: str) -> None:
    """Rename column OLD to NEW (its field id, specs and pruning stay)."""
    ns = ctx.open()
    ns.rename_column(old, new)
    _schema_done(ctx, ns, f"renamed column {old} to {new}")


@click.command("drop-column")
@shared_options
@click.argument("name")
def drop_column(ctx: Context, name: str) -> None:
    """Drop column NAME (refused while the current spec partitions by it)."""
    ns = ctx.open()
    ns.drop_column(name)
    _schema_done(ctx, ns, f"dropped column {name}")


@click.command("widen-column")
@shared_options
@click.argument("name")
@click.argument("type_", metavar="TYPE")
def widen_column(ctx: Context, name: str, type_: str) -> None:
    """Widen column NAME to TYPE losslessly (int32 to int64, float to double, ...)."""
    arrow_type = parse_type(type_)
    ns = ctx.open()
    ns.widen_column(name, arrow_type)
    _schema_done(ctx, ns, f"widened column {name} to {arrow_type}")


@click.command()
@shared_options
@click.option(
    "--target-rows-per-fragment", default=1 << 20, show_default=True, type=click.IntRange(1)
)
@click.option("--no-manifest", is_flag=True, help="Leave __manifest's own files alone.")
def compact(ctx: Context, target_rows_per_fragment: int, no_manifest: bool) -> None:
    """Merge small files of every partition (one atomic commit) and of __manifest."""
    report = ctx.open().compact(target_rows_per_fragment, compact_manifest=not no_manifest)
    _report(ctx, "compact", report)


@click.command()
@shared_options
@click.option(
    "--older-than", default="7d", show_default=True, help="Retention: 7d, 12h, 30m, 0 ..."
)
def cleanup(ctx: Context, older_than: str) -> None:
    """Remove old versions (tags are kept), ending time travel to them.

    Removes __manifest versions superseded more than --older-than ago and the
    partition versions and files only they read: Iceberg's expire_snapshots, the
    old-version half of Delta's VACUUM. Orphan files are vacuum's.
    """
    retention = parse_duration(older_than, "--older-than")
    _report(ctx, "cleanup", ctx.open().cleanup(retention))


@click.command()
@shared_options
@click.option("--older-than", default="1d", show_default=True, help="Grace period: 1d, 2h, 0 ...")
def vacuum(ctx: Context, older_than: str) -> None:
    """Remove orphan files that crashed or failed writers left, older than --older-than.

    Removes no version (time travel is unchanged): Iceberg's remove_orphan_files, the
    untracked-file half of Delta's VACUUM. Old versions are cleanup's; Delta's whole
    VACUUM is cleanup then vacuum.
    """
    grace = parse_duration(older_than, "--older-than")
    _report(ctx, "vacuum", ctx.open().vacuum(grace))


@click.command()
@shared_options
def validate(ctx: Context) -> int:
    """Check every partition against the schema and field ids; exit 1 if any problem."""
    problems = ctx.open().validate()

    def render(console: Any) -> None:
        if not problems:
            console.print("valid: no problems found")
        for p in problems:
            console.print(f"problem: {p}")

    emit(ctx.json, {"valid": not problems, "problems": problems}, render)
    return 1 if problems else 0


@click.command()
@shared_options
def align(ctx: Context) -> None:
    """Bring every partition table in line with the schema: columns renamed, dropped
    columns removed, columns older than a widen-column rewritten in the wider type."""
    _report(ctx, "align", ctx.open().align_leaves())


@click.command()
@shared_options
def repair(ctx: Context) -> None:
    """Restore __manifest columns a foreign writer dropped, or remove what an interrupted
    create left (no data); exit 1, changing nothing, when __manifest files are damaged."""
    import lance_partitioned as lp

    if ctx.version is not None:  # a pinned handle refuses, saying why
        ctx.open().repair()
    done = lp.repair(ctx.root, storage_options=ctx.storage_options)
    _done(ctx, {"repaired": done}, "\n".join(done) if done else "nothing to repair")


@click.command()
@shared_options
@click.argument("destination")
def convert(ctx: Context, destination: str) -> None:
    """Rewrite the seed-003 namespace ROOT in seed 000's layout at DESTINATION (a new
    local path; it appears atomically once complete). ROOT is only read."""
    import lance_partitioned as lp

    if ctx.version is not None:
        raise click.UsageError(
            "convert reads the latest seed-003 state; --at-version does not apply"
        )
    result = lp.convert(ctx.root, destination, storage_options=ctx.storage_options)
    _done(
        ctx,
        asdict(result),
        f"converted {result.rows} rows from {result.source_tables} seed-003 tables into "
        f"{result.partitions} partitions at {result.destination} (__manifest version "
        f"{result.version})",
    )


COMMANDS = [
    tag,
    restore,
    evolve,
    add_column,
    rename_column,
    drop_column,
    widen_column,
    compact,
    cleanup,
    vacuum,
    validate,
    align,
    repair,
    convert,
]


def register(group: click.Group) -> None:
    """Add the writing and maintenance commands to ``group``."""
    for command in COMMANDS:
        group.add_command(command)
