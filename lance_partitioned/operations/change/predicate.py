"""Changes of the rows a predicate selects: ``update`` and overwrite by predicate.

Both read the rows matching ``where`` (partitions pruned through ``__manifest``,
the residual filter run inside each leaf, as a scan does), remove them by row
address and write rows in their place, through ``apply_changes``: one commit,
re-planned after a conflict. ``update`` writes the same rows with new values
(a row whose partition columns change moves); overwrite by predicate writes
the given rows, each of which must satisfy ``where``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import FilterError, InvalidArgumentError
from lance_partitioned.format.filters.evaluate import filter_batch
from lance_partitioned.format.filters.render import to_lance_sql
from lance_partitioned.operations.change.apply import RowChanges, changed
from lance_partitioned.operations.change.sql import PairedRows, quoted, require_columns
from lance_partitioned.operations.read.scan import ROW_ADDRESS, Scan, read_leaf_rows
from lance_partitioned.operations.read.scan_filter import FilterLike
from lance_partitioned.operations.txn.parallel import for_each
from lance_partitioned.operations.write.input import DataLike, InputConformer, iter_batches

READ_THREADS = 4  # leaves read at once


@dataclass(frozen=True)
class UpdateResult:
    """What an update did: the new ``__manifest`` version (the old one when no row
    matched), rows updated, and partitions changed or created."""

    version: int
    rows_updated: int
    partitions_touched: int


@dataclass(frozen=True)
class OverwriteResult:
    """What an overwrite by predicate did: the new version, rows deleted (those that
    matched ``where``), rows written, and partitions changed or created."""

    version: int
    rows_deleted: int
    rows_written: int
    partitions_touched: int


def require_where(where: FilterLike, what: str) -> None:
    """Refuse a missing or blank ``where``: it would change every row, which a bug
    produces more often than a user means. ``"true"`` says "every row"."""
    if where is None or (isinstance(where, str) and not where.strip()):
        raise FilterError(
            f"{what} needs a where predicate, got {where!r}; nothing was changed. "
            f'To {what} every row, say so explicitly: where="true"'
        )


def update_rows(
    manifest: Manifest,
    schema: Any,
    set: Mapping[str, str],
    where: FilterLike,
    **options: Any,
) -> UpdateResult:
    """Set ``set`` (column -> SQL over the row's columns) on every row matching ``where``,
    in one commit; a row whose partition columns change moves to its new partition."""
    require_where(where, "update")
    if not set:
        raise InvalidArgumentError("update needs at least one column in set")
    require_columns(set, schema)

    def plan(snapshot: Snapshot) -> tuple[RowChanges, int]:
        require_columns(set, snapshot.schema)
        changes = RowChanges()
        exprs = {n: set.get(n, f"target.{quoted(n)}") for n in snapshot.schema.names}
        count = 0
        for leaf, rows in _matching_rows(snapshot, where, snapshot.schema.names):
            changes.remove(leaf.object_id, _addresses(rows))
            values = PairedRows(None, rows.drop_columns([ROW_ADDRESS]))
            changes.write(values.assigned(exprs, snapshot.schema, "the update"))
            count += rows.num_rows
        return changes, count

    return changed(
        manifest,
        "update",
        plan,
        lambda applied, count: UpdateResult(
            applied.version, count if applied.partitions else 0, applied.partitions
        ),
        **options,
    )


def overwrite_where(
    manifest: Manifest, snapshot: Snapshot, data: DataLike, where: FilterLike, **options: Any
) -> OverwriteResult:
    """Delete the rows matching ``where`` and write ``data`` in one commit. Every row of
    ``data`` must satisfy ``where`` (FilterError naming one that does not, before anything
    is written), so the namespace's rows matching ``where`` become exactly ``data``."""
    require_where(where, "overwrite")
    schema = snapshot.schema
    conform = InputConformer(schema)
    rows = pa.Table.from_batches([conform(b) for b in iter_batches(data)], schema=schema.arrow)
    expr = Scan(snapshot, where).expr
    sql = "true" if expr is None else to_lance_sql(expr)
    kept = None
    if rows.num_rows and expr is not None:
        kept = filter_batch(rows.combine_chunks().to_batches()[0], sql)
    if kept is not None and kept.num_rows != rows.num_rows:
        bad = rows.num_rows - kept.num_rows
        raise FilterError(
            f"{bad} of the {rows.num_rows} rows to write do not satisfy where={sql!r}; "
            "an overwrite by predicate writes only rows it would select. Nothing was written"
        )

    def plan(snapshot: Snapshot) -> tuple[RowChanges, int]:
        changes = RowChanges()
        deleted = 0
        for leaf, matched in _matching_rows(snapshot, where, []):
            changes.remove(leaf.object_id, _addresses(matched))
            deleted += matched.num_rows
        changes.write(rows)
        return changes, deleted

    return changed(
        manifest,
        "overwrite",
        plan,
        lambda applied, deleted: OverwriteResult(
            applied.version, deleted, rows.num_rows, applied.partitions
        ),
        **options,
    )


def _addresses(rows: pa.Table) -> np.ndarray:
    return rows.column(ROW_ADDRESS).to_numpy().astype(np.uint64)


def _matching_rows(
    snapshot: Snapshot, where: FilterLike, columns: list[str]
) -> list[tuple[Leaf, pa.Table]]:
    """Per leaf with a match: the rows matching ``where`` as namespace ``columns`` plus
    ``ROW_ADDRESS``, read in parallel."""
    scan = Scan(snapshot, where)
    out: list[tuple[Leaf, pa.Table]] = []
    lock = threading.Lock()

    def read(leaf: Leaf) -> None:
        rows = read_leaf_rows(
            snapshot.open_leaf(leaf),
            snapshot.schema,
            columns,
            scan.leaf_filter(leaf),
            scan.filter_columns,
            leaf.object_id,
            with_address=True,
        )
        if rows.num_rows:
            with lock:
                out.append((leaf, rows))

    leaves = list(scan.leaves)
    for_each(leaves, read, min(READ_THREADS, max(1, len(leaves))))
    out.sort(key=lambda item: item[0].object_id)
    return out
