"""Deleting rows by predicate across partitions, in one transaction.

Partitions are pruned through ``__manifest`` first; each remaining leaf gets a
Lance ``Delete`` (deletion vectors) staged on its published version, and one
``__manifest`` commit publishes them all (``operations.txn.driver``).

A delete *reads* (it decides which rows match), so it must not be rebased over
a concurrent change: its commit also rewrites the ``v<N>`` lock row of every
spec, and any conflict re-plans the whole delete on the latest version. That
makes it serialisable in ``__manifest`` commit order, including against
writers that create new matching partitions meanwhile.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest, lock_rows
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import FilterError
from lance_partitioned.format.filters.render import to_lance_sql
from lance_partitioned.format.filters.visitor import referenced_columns
from lance_partitioned.operations.leaf.leaf_changes import DeleteRows
from lance_partitioned.operations.read.scan import Scan
from lance_partitioned.operations.read.scan_filter import FilterLike
from lance_partitioned.operations.txn.driver import LeafTransaction, replanned
from lance_partitioned.operations.txn.failpoints import pause_point
from lance_partitioned.operations.txn.leases import Lease
from lance_partitioned.operations.txn.staged_check import StagedLeaf

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeleteResult:
    """What a delete did: the new ``__manifest`` version, rows removed, partitions changed."""

    version: int
    rows: int
    partitions: int


FULL_DELETE = "true"  # the one explicit spelling of "delete every row" the errors suggest


def require_filter(filter: FilterLike) -> None:
    """Refuse a delete filter that is missing: None, or text that is empty or only whitespace.

    Such a filter would match every row, and it is what a bug or an unset
    variable produces, not what a user writes to empty a namespace. A full
    delete must be spelled out: ``"true"`` (any case), or any other predicate
    that is true for every row (``"1 = 1"``, ``pc.scalar(True)``), as in
    Iceberg's ``delete(AlwaysTrue())`` or SQL's ``DELETE ... WHERE true``.
    Raises FilterError (a ValueError) before anything is read or written.
    """
    if filter is None:
        got = "None"
    elif isinstance(filter, str) and not filter.strip():
        got = f"{filter!r}, which is empty" if not filter else f"{filter!r}, only whitespace"
    else:
        return
    raise FilterError(
        f"delete needs a filter, got {got}; nothing was deleted. "
        f'To delete every row, say so explicitly: delete("{FULL_DELETE}")'
    )


def delete_rows(manifest: Manifest, filter: FilterLike) -> DeleteResult:
    """Delete every row matching ``filter`` in one transaction.

    ``filter`` is required (``require_filter``): a missing or blank filter is
    refused, ``"true"`` deletes every row. Contract: readers of any
    ``__manifest`` version see all of the delete or none of it; on failure
    nothing is published. Retries by re-planning on conflict, then raises a
    retryable CommitConflictError.
    """
    require_filter(filter)
    return replanned(
        manifest, "delete", lambda snapshot, lease: _delete_once(manifest, snapshot, filter, lease)
    )


def _delete_once(
    manifest: Manifest, snapshot: Snapshot, filter: FilterLike, lease: Lease | None
) -> DeleteResult:
    scan = Scan(snapshot, filter)
    predicate = FULL_DELETE if scan.expr is None else to_lance_sql(scan.expr)
    columns = sorted(referenced_columns(scan.expr)) if scan.expr is not None else []
    changes: dict[str, DeleteRows] = {}
    with LeafTransaction(manifest, snapshot, "delete", lease=lease) as tx:

        def stage(leaf: Leaf) -> StagedLeaf:
            change = changes.setdefault(
                leaf.object_id, DeleteRows(predicate, snapshot.schema, columns, leaf.object_id)
            )
            return tx.stage_change(leaf, change)  # a branch-pinned leaf changes on its branch

        tx.stage(scan.leaves, stage)
        versions = tx.versions()
        if not versions:
            return DeleteResult(snapshot.version, 0, 0)
        pause_point("leaves_staged")
        deleted = sum(changes[oid].deleted for oid in versions)
        published = tx.publish(
            lambda base: tx.republished(base, lock_rows(snapshot.specs)),
            info=CommitInfo("delete", {"filter": predicate}, rows_added=0, rows_removed=deleted),
        )
    return DeleteResult(published, deleted, len(versions))
