"""Rewriting partitions into the current spec, in one write job (``ns.rewrite_partitions``).

The partitions to move are those of older specs and those of the current spec whose
rows do not have the partition's values (``placement.misplaced_leaves``), among the
ones ``filter`` may match. Their rows are read at the job's snapshot and written
through the write job, which replaces those leaves: the same commit removes them and
publishes the new ones, so readers see the old partitions or the new, never both.
Where the rows are copied is the caller's choice (``WriteMany``): this process's one
writer, or Spark tasks, each a shared writer of the job (``spark.maintenance``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.operations.evolve.placement import misplaced_leaves
from lance_partitioned.operations.progress import NO_PROGRESS, Progress
from lance_partitioned.operations.read.scan import Scan
from lance_partitioned.operations.read.scan_filter import FilterLike
from lance_partitioned.operations.write.job import WriteJob
from lance_partitioned.operations.write.partition_writer import PartitionWriter, WrittenFiles
from lance_partitioned.operations.write.publish import WriteMode

# Copies the rows of the leaves into the job's files (``copy_rows`` in one writer or
# many) and returns everything written.
WriteMany = Callable[[WriteJob, Sequence[Leaf]], WrittenFiles]


def copy_rows(
    snapshot: Snapshot, leaves: Sequence[Leaf], progress: Progress = NO_PROGRESS
) -> Callable[[PartitionWriter], None]:
    """The ``fill`` of a write job that copies every row of ``leaves`` (at ``snapshot``)."""
    everything = Scan(snapshot)

    def fill(writer: PartitionWriter) -> None:
        progress.start(len(leaves))
        for leaf in leaves:
            for batch in everything._leaf_batches(leaf):
                writer.write(batch)
            progress.advance()

    return fill


def rewrite_partitions(
    manifest: Manifest,
    filter: FilterLike = None,
    progress: Progress = NO_PROGRESS,
    write_many: WriteMany | None = None,
) -> tuple[Snapshot, WrittenFiles | None]:
    """Move the partitions to rewrite (module doc) into the current spec in one commit.

    Returns the snapshot after it and what was written (None: nothing to move, no
    commit). ``write_many``: where the rows are copied (default this process).
    """
    with WriteJob.begin(manifest, WriteMode.APPEND, "rewrite_partitions") as job:
        snapshot = job.snapshot
        current = snapshot.current_spec.spec_id
        scan = Scan(snapshot, filter)
        misplaced = misplaced_leaves(
            snapshot, [leaf for leaf in scan.leaves if leaf.spec_id == current]
        )
        old = [
            leaf for leaf in scan.leaves if leaf.spec_id != current or leaf.object_id in misplaced
        ]
        if not old:
            return snapshot, None
        # the old leaves go in the same commit; misplaced current-spec ones
        # get new leaves for their rows, never appends
        job.replaces = [leaf.object_id for leaf in old]
        if write_many is None:
            written = job.write(copy_rows(snapshot, old, progress))
        else:
            written = write_many(job, old)
        info = CommitInfo("rewrite_partitions", {"filter": scan.sql} if scan.sql else {})
        return job.commit(written, info=info) or job.snapshot, written
