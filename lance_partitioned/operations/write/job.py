"""One write job: write files, finish, abort, the empty-write rule, commit.

Every write of rows goes through a ``WriteJob``: ``append`` / ``overwrite`` and
``rewrite_partitions`` of a ``PartitionedNamespace``, and the Spark sink. A job
is planned against one snapshot and one job secret; it has two phases that
may run in different processes (Spark tasks and the driver):

1. ``write`` (once, or in every Spark task): a ``PartitionWriter``
   (``operations.write.partition_writer``) splits the rows by partition and writes
   Lance data files, committing nothing. If it fails, its files are reclaimed
   before the error propagates.
2. ``commit`` (once): ``operations.write.publish`` stages every touched leaf and
   publishes the whole write with one ``__manifest`` commit; until then
   readers see nothing of it (``docs/TRANSACTIONS.md``). A write that wrote
   nothing publishes nothing, unless it removes partitions (the empty-write
   rule, ``publishes_nothing``).

``abort`` reclaims the files of a write that will not be committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import positive_int
from lance_partitioned.operations.txn import leases
from lance_partitioned.operations.txn.leases import Lease
from lance_partitioned.operations.write.abandon import abort_write, discard_task_files
from lance_partitioned.operations.write.partition_writer import (
    PartitionWriter,
    WrittenFiles,
    new_job_secret,
)
from lance_partitioned.operations.write.publish import Removals, WriteMode, commit_write

# the options of a write that are sizes, each a positive integer
SIZE_OPTIONS = ("max_buffer_bytes", "max_rows_per_file")


def check_write_sizes(**options: Any) -> dict[str, Any]:
    """``options`` of a write with each size (``SIZE_OPTIONS``) checked a positive integer,
    else InvalidArgumentError naming it; other options pass as they are.

    ``WriteJob.write`` checks them for every writer; the entry points of a write
    (``append``, ``overwrite``, ``convert``) call this first too, so a bad size is
    refused before the write takes its lease. Lance itself would panic on
    ``max_rows_per_file=0``, an error ``except Exception`` does not catch.
    """
    return {k: positive_int(k, v) if k in SIZE_OPTIONS else v for k, v in options.items()}


class WriteJob:
    """One write of rows into a namespace, from the first file to the one commit.

    ``snapshot`` is the snapshot the job plans against (or its ``__manifest``
    version, loaded for writing on first use: a Spark driver that only learns
    at commit time that nothing was written never loads it). ``secret`` names
    new partitions identically in every writer of the job. ``replaces`` lists
    leaves (object ids) the job replaces: rows for their partition keys go to
    new leaves, never into them, and they are removed in the same commit.
    ``lease`` is the lease taken before any file was written (``begin``);
    without one, ``commit`` takes its own, which protects staged versions but
    not files written before.
    """

    def __init__(
        self,
        manifest: Manifest,
        snapshot: Snapshot | int,
        mode: WriteMode = WriteMode.APPEND,
        secret: bytes | None = None,
        replaces: Sequence[str] = (),
        lease: Lease | None = None,
    ):
        self.manifest = manifest
        self._snapshot = snapshot
        self.mode = mode
        self.secret = new_job_secret() if secret is None else secret
        self.replaces: Sequence[str] = replaces
        self.lease = lease

    @classmethod
    @contextmanager
    def begin(
        cls, manifest: Manifest, mode: WriteMode, purpose: str | None = None
    ) -> Iterator[WriteJob]:
        """``with WriteJob.begin(manifest, mode) as job:`` a job on the latest snapshot.

        The lease (``operations.txn.leases``, named ``purpose`` or the mode) is
        taken before the snapshot is loaded and held until the block ends, so
        vacuum and cleanup keep off the job's files until they are published.
        """
        with leases.hold(manifest, purpose or mode.value) as lease:
            snapshot = Snapshot.load(manifest, for_write=True)
            yield cls(manifest, snapshot, mode, lease=lease)

    @property
    def snapshot(self) -> Snapshot:
        """The snapshot the job's files are written for."""
        if not isinstance(self._snapshot, Snapshot):
            self._snapshot = Snapshot.load(self.manifest, self._snapshot, for_write=True)
        return self._snapshot

    def write(
        self,
        fill: Callable[[PartitionWriter], Any],
        *,
        shared: bool = False,
        **options: Any,
    ) -> WrittenFiles:
        """Run ``fill`` on a new ``PartitionWriter``, flush it, and return what it wrote.

        ``options`` go to ``PartitionWriter`` (``max_buffer_bytes``,
        ``max_rows_per_file``, ``progress``). If ``fill`` or the flush fails,
        the files written so far are reclaimed, then the error propagates:
        every file, new partition directories included, for the job's only
        writer; with ``shared`` (one of many writers of the job, such as a
        Spark task, whose peers may write into the same new partition
        directories) only the files this writer recorded.
        """
        options = check_write_sizes(**options)
        # the job's only writer creates its new leaves' datasets itself (one Lance
        # call each); writers sharing new partition directories must not
        writer = PartitionWriter(
            self.snapshot,
            self.secret,
            replacing=set(self.replaces),
            create_leaves=not shared,
            **options,
        )
        try:
            fill(writer)
            return writer.finish()
        except BaseException:
            if shared:
                discard_task_files(self.snapshot, writer.result)
            else:
                self.abort(writer.result)
            raise

    def abort(self, written: WrittenFiles) -> None:
        """Reclaim the files of ``written``, which will not be committed (nothing was staged)."""
        abort_write(self.snapshot, written)

    def publishes_nothing(self, written: WrittenFiles) -> bool:
        """The empty-write rule: nothing written and nothing removed means no commit.

        An ``OVERWRITE`` with no rows still commits (it empties the
        namespace), and so does a job that replaces leaves (they are removed).
        """
        return not written.leaves and self.mode is not WriteMode.OVERWRITE and not self.replaces

    def commit(
        self,
        written: WrittenFiles,
        removals: Removals | None = None,
        info: CommitInfo | Callable[[], CommitInfo] | None = None,
    ) -> Snapshot | None:
        """Publish ``written`` with one ``__manifest`` commit (``publish.commit_write``).

        ``removals`` (object id -> row addresses) are rows of the job's snapshot the
        same commit removes: a row-level change, never rebased (``commit_write``).
        ``info`` is the commit's record (``ns.history()``; default: the write's mode,
        rows written and rows of the partitions it replaces).
        Returns the published snapshot, or None when the empty-write rule
        says there is nothing to publish.
        """
        if not removals and self.publishes_nothing(written):
            return None
        return commit_write(
            self.manifest,
            self.snapshot,
            written,
            self.mode,
            replaces=self.replaces,
            lease=self.lease,
            removals=removals,
            info=info,
        )
