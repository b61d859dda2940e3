"""Commands that change rows: merge (an upsert from a Parquet file or a Lance dataset),
update and delete. Each is one atomic ``__manifest`` commit (docs/CHANGES.md) and prints
the rows it changed, the partitions it touched and the new version."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from lance_partitioned.cli.common import Context, parse_assignments, shared_options
from lance_partitioned.cli.output import emit
from lance_partitioned.errors import InvalidArgumentError, lance_message

if TYPE_CHECKING:
    import pyarrow as pa


def _changed(ctx: Context, what: str, data: dict[str, Any], counts: str) -> None:
    """Print a change's result: its counts (none when no partition was touched)."""
    version, touched = data["version"], data["partitions_touched"]
    if touched:
        message = f"{what}: {counts} in {touched} partition(s) (__manifest version {version})"
    else:
        message = f"{what}: no row changed (__manifest version {version})"
    emit(ctx.json, data, lambda console: console.print(message))


def read_changes(location: str, storage_options: dict[str, str] | None) -> pa.Table:
    """The rows at ``location``: a Lance dataset (a directory holding ``_versions``), a
    directory of Parquet files (as Spark writes them) or a Parquet file; local or on an
    object store (``storage_options`` as for the root). InvalidArgumentError, naming
    ``location``, when nothing is there or it cannot be read as such."""
    # here, not at the top: the CLI's modules load only click (a fast --help)
    import lance
    import pyarrow as pa
    import pyarrow.dataset as pads

    from lance_partitioned.catalog import storage

    store = storage.resolve(location, storage_options)
    found = store.info(location)
    if found is None:
        raise InvalidArgumentError(f"CHANGES {location!r}: no such file or directory")
    is_lance = found.is_dir and store.exists(store.join(location, "_versions"))
    kind = "a Lance dataset" if is_lance else "a Parquet file"
    if found.is_dir and not is_lance:
        kind = "a directory of Parquet files"
    try:
        if is_lance:
            return lance.dataset(location, storage_options=storage_options).to_table()
        parquet = pads.dataset(store.path(location), format="parquet", filesystem=store.fs)
        return parquet.to_table()
    except (pa.ArrowException, OSError, ValueError, RuntimeError) as exc:
        first = (lance_message(exc).splitlines() or [type(exc).__name__])[0]
        raise InvalidArgumentError(
            f"CHANGES {location!r} cannot be read as {kind} (a Parquet file or directory, "
            f"or a Lance dataset): {first}"
        ) from exc


@click.command()
@shared_options
@click.argument("changes")
@click.option(
    "--on",
    "on",
    multiple=True,
    required=True,
    metavar="COL",
    help="Key column (repeat for a composite key).",
)
@click.option(
    "--delete-when",
    metavar="SQL",
    help="Delete the matched rows for which SQL is true (before the update).",
)
@click.option("--update-when", metavar="SQL", help="Update a matched row only when SQL is true.")
@click.option("--no-update", is_flag=True, help="Leave matched rows as they are.")
@click.option("--insert-when", metavar="SQL", help="Insert an unmatched row only when SQL is true.")
@click.option("--no-insert", is_flag=True, help="Insert no row.")
@click.option(
    "--delete-not-matched",
    metavar="SQL",
    help="Delete namespace rows no source row matches where SQL (over target.<col>) is "
    "true ('true': all of them; every partition is searched).",
)
def merge(
    ctx: Context,
    changes: str,
    on: tuple[str, ...],
    delete_when: str | None,
    update_when: str | None,
    no_update: bool,
    insert_when: str | None,
    no_insert: bool,
    delete_not_matched: str | None,
) -> None:
    """Merge the rows of CHANGES (a Parquet file or directory, or a Lance dataset) into
    ROOT by the key columns --on, in one commit. By default an upsert: a matched row
    takes the source's values, an unmatched source row is inserted. SQL names
    source.<col> and target.<col>."""
    if no_update and update_when is not None:
        raise click.UsageError("--no-update and --update-when contradict each other")
    if no_insert and insert_when is not None:
        raise click.UsageError("--no-insert and --insert-when contradict each other")
    ns = ctx.open()
    builder = ns.merge(read_changes(changes, ctx.storage_options), on=list(on))
    if delete_when is not None:  # first: a row it deletes is not updated
        builder.when_matched_delete(delete_when)
    if not no_update:
        builder.when_matched_update_all(update_when)
    if not no_insert:
        builder.when_not_matched_insert_all(insert_when)
    if delete_not_matched is not None:
        from lance_partitioned.operations.write.delete import FULL_DELETE

        # "true" needs no condition: then only the unmatched rows' addresses are read
        everything = delete_not_matched.strip().lower() == FULL_DELETE
        builder.when_not_matched_by_source_delete(None if everything else delete_not_matched)
    r = builder.execute()
    counts = f"{r.rows_updated} updated, {r.rows_inserted} inserted, {r.rows_deleted} deleted"
    _changed(ctx, "merge", asdict(r), counts)


def _where_required(what: str, where: str | None) -> str:
    if where is None:
        raise click.UsageError(f"{what} needs --where SQL; to {what} every row say --where true")
    return where


@click.command()
@shared_options
@click.option(
    "--set",
    "set_",
    multiple=True,
    required=True,
    metavar="COL=SQL",
    help="COL's new value, SQL over the row (--set 'price=price * 1.1'); repeatable.",
)
@click.option("--where", metavar="SQL", help="The rows to update (required; 'true': every row).")
def update(ctx: Context, set_: tuple[str, ...], where: str | None) -> None:
    """Give the rows matching --where new values, in one commit; a row whose partition
    columns change moves to its new partition."""
    where = _where_required("update", where)
    assignments = parse_assignments(set_)
    r = ctx.open().update(assignments, where=where)
    _changed(ctx, "update", asdict(r), f"{r.rows_updated} updated")


@click.command()
@shared_options
@click.option("--where", metavar="SQL", help="The rows to delete (required; 'true': every row).")
def delete(ctx: Context, where: str | None) -> None:
    """Delete the rows matching --where, in one commit (partitions pruned first)."""
    r = ctx.open().delete(_where_required("delete", where))
    data = {"version": r.version, "rows_deleted": r.rows, "partitions_touched": r.partitions}
    _changed(ctx, "delete", data, f"{r.rows} deleted")


COMMANDS = [merge, update, delete]


def register(group: click.Group) -> None:
    """Add the row-changing commands to ``group``."""
    for command in COMMANDS:
        group.add_command(command)
