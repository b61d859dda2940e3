"""Publishing a row-level change: rows removed by address and rows written, one commit.

Merge, update and overwrite by predicate each plan a ``RowChanges`` against one
snapshot: the addresses of the rows they remove, leaf by leaf, and the rows
they write. ``apply_changes`` writes the rows through the one write job
(``operations.write.job``: split by partition, new partitions created, rows
whose partition changed land in their new leaf) and publishes removals and
files with one ``__manifest`` commit that is never rebased: a row-level change
read what it changes, so a conflict re-plans it (``changed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.operations.leaf.leaf_changes import LeafChange
from lance_partitioned.operations.txn.driver import replanned
from lance_partitioned.operations.txn.leases import Lease
from lance_partitioned.operations.write.job import WriteJob, check_write_sizes
from lance_partitioned.operations.write.publish import WriteMode


@dataclass
class RowChanges:
    """What one row-level change does: ``removals`` (object id -> row addresses of the
    snapshot's leaf) and ``rows`` to write (tables of namespace columns; a nullable
    column a table lacks is written NULL)."""

    removals: dict[str, np.ndarray] = field(default_factory=dict)
    rows: list[pa.Table] = field(default_factory=list)
    # leaves changed by a ready LeafChange instead (Lance's merge_insert): object id -> change
    leaf_changes: dict[str, LeafChange] = field(default_factory=dict)

    def remove(self, object_id: str, addresses: np.ndarray) -> None:
        if len(addresses):
            old = self.removals.get(object_id)
            self.removals[object_id] = (
                addresses if old is None else np.concatenate([old, addresses])
            )

    def write(self, rows: pa.Table) -> None:
        if rows.num_rows:
            self.rows.append(rows)

    @property
    def empty(self) -> bool:
        return not self.removals and not self.rows and not self.leaf_changes

    def batches(self) -> Iterator[pa.RecordBatch]:
        for table in self.rows:
            yield from table.to_batches()


@dataclass(frozen=True)
class Applied:
    """A published row-level change: the ``__manifest`` version and the partitions it
    changed or created (the snapshot's version and 0 when there was nothing to do)."""

    version: int
    partitions: int


def apply_changes(
    manifest: Manifest,
    snapshot: Snapshot,
    lease: Lease | None,
    changes: RowChanges,
    info: Callable[[], CommitInfo] | None = None,
    **options: Any,
) -> Applied:
    """Write ``changes.rows`` and publish them with ``changes.removals`` in one commit.

    ``info`` gives the commit's record once its leaves are staged (``ns.history()``).
    ``options`` are the write's (``max_buffer_bytes``, ``max_rows_per_file``).
    Raises CommitConflictError when any commit landed since ``snapshot`` that
    rewrote a lock row or a touched leaf's row: nothing is published.
    """
    if changes.empty:
        return Applied(snapshot.version, 0)
    job = WriteJob(manifest, snapshot, WriteMode.APPEND, lease=lease)
    written = job.write(lambda writer: writer.write_all(changes.batches()), **options)
    published = job.commit(
        written, removals={**changes.removals, **changes.leaf_changes}, info=info
    )
    assert published is not None
    touched = {lw.object_id for lw in written.leaves.values()}
    touched |= set(changes.removals) | set(changes.leaf_changes)
    return Applied(published.version, len(touched))


def changed(
    manifest: Manifest,
    what: str,
    plan: Callable[[Snapshot], tuple[RowChanges, Any]],
    finish: Callable[[Applied, Any], Any],
    describe: Callable[[Any], CommitInfo],
    **options: Any,
) -> Any:
    """Plan a row-level change on the latest snapshot, apply it, and plan again after
    each conflict (``driver.replanned``); ``finish(applied, counts)`` makes the result
    from what ``plan`` counted, ``describe(counts)`` the commit's record (called once
    the leaves are staged: Lance's ``merge_insert`` counts its rows then)."""
    options = check_write_sizes(**options)

    def once(snapshot: Snapshot, lease: Lease | None) -> Any:
        changes, counts = plan(snapshot)
        applied = apply_changes(
            manifest, snapshot, lease, changes, lambda: describe(counts), **options
        )
        return finish(applied, counts)

    return replanned(manifest, what, once)
