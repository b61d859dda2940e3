"""Inspection, time travel and maintenance methods of ``PartitionedNamespace``:
validate, describe, versions, tags and restore, repair, compact, cleanup and vacuum."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.catalog import history, repair
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import positive_int
from lance_partitioned.facade.base import NamespaceHandle, mutator
from lance_partitioned.operations.maintain import describe, maintenance, restore
from lance_partitioned.operations.maintain.maintenance import MaintenanceReport
from lance_partitioned.operations.maintain.restore import RestoreResult
from lance_partitioned.operations.progress import ProgressLike, reporter


class MaintenanceMethods(NamespaceHandle):
    """Inspection, time travel and maintenance methods of ``PartitionedNamespace``:"""

    def validate(self) -> list[str]:
        """Check every partition table against the namespace schema and field ids.

        Returns the inconsistencies found (an empty list when all is well); see
        ``operations.maintain.describe.validate`` for everything it checks.

        Example::

            assert ns.validate() == []
        """
        return describe.validate(self._snapshot)

    def partitions(self, with_counts: bool = True) -> pa.Table:
        """One row per partition table: object_id, spec version, partition values,
        location, read version and (``with_counts``, the default) its row count.

        Example::

            ns.partitions(with_counts=False).to_pylist()
        """
        return describe.partitions_table(self._snapshot, with_counts)

    def namespace_properties(self, namespace_id: Sequence[str]) -> dict[str, str]:
        """Runtime properties of Appendix E for ``namespace_id``, a path like ``["v1", "k7m2..."]``.

        Raises KeyError for a path that names no row (``operations.maintain.describe``).

        Example::

            ns.namespace_properties(["v1"])["partition_spec"]
        """
        return describe.namespace_properties(self._snapshot, self.root, namespace_id)

    def describe(self) -> str:
        """A readable report (``operations.maintain.describe.describe``): schema, every spec
        version, partitions sorted by value with only their own spec's fields, row
        and file counts, sizes, size on disk, and the versions and tags.

        Example::

            print(ns.describe())
        """
        return describe.describe(self._snapshot, self.root)

    @mutator
    def repair(self) -> list[str]:
        """Restore ``__manifest`` columns a foreign writer dropped, in one commit.

        Opening and reading never write: a damaged latest version (for example
        after a ``DirectoryNamespace`` ``create_namespace``, which keeps only its
        base columns) is read through an in-memory reconstruction and writes
        refuse with NamespaceDamagedError until this is called. Values come from
        the newest intact ``__manifest`` version, else the metadata mirror
        (FORMAT.md §5). Returns what was done, in words (empty: nothing to repair).
        Files a ``__manifest`` version references that are missing or damaged
        cannot be repaired: CorruptNamespaceError names them, and nothing changes.

        Example::

            for line in ns.repair():
                print(line)
        """
        done = repair.repair(self._manifest, repair.latest_to_repair(self._manifest))
        self.refresh()
        return done

    def versions(self) -> list[dict[str, Any]]:
        """``__manifest`` versions, oldest first: ``{"version", "timestamp"}`` each.

        Every commit (write, delete, evolution, compaction) adds one; each is a
        consistent snapshot that ``lp.open(root, version=N)`` reads (a namespace an
        earlier release created also has an empty version 1, which is not listed).

        Example::

            [v["version"] for v in ns.versions()]
        """
        return history.versions(self._manifest)

    def history(self, limit: int | None = None) -> pa.Table:
        """What every commit did, newest first, as an Arrow table (``limit``: the newest only).

        Columns: ``version``, ``timestamp`` (a UTC instant), ``operation`` (``create``,
        ``append``, ``overwrite``, ``delete``, ``merge``, ``update``, ``compact``,
        ``restore``, ``evolve_spec``, ``add_column``, ...), ``parameters`` (JSON text: the
        filter, mode, spec, merge keys...), ``rows_added``, ``rows_removed`` and
        ``partitions`` (touched). Each commit records them in itself (its Lance
        transaction's properties, docs/TRANSACTIONS.md "History"); a version written by an
        earlier release or another writer shows ``unknown`` and NULL counts.

        Example::

            ns.history(limit=5).to_pandas()
        """
        if limit is not None:
            limit = positive_int("limit", limit)
        return history.history_table(self._manifest, limit)

    def tag(self, name: str, version: int | None = None) -> int:
        """Name a ``__manifest`` version ``name`` (``version``, default this handle's) so it
        can be opened later with ``lp.open(root, version=name)``; cleanup keeps it.
        Returns the version tagged.

        Example::

            ns.tag("before-backfill")
        """
        target = self.version if version is None else version
        history.create_tag(self._manifest, name, target)
        return target

    def tags(self) -> dict[str, int]:
        """Tag name → ``__manifest`` version, for every tag.

        Example::

            ns.tags()  # {"before-backfill": 12}
        """
        return history.tags(self._manifest)

    def delete_tag(self, name: str) -> None:
        """Remove tag ``name``; its versions become eligible for cleanup.

        Example::

            ns.delete_tag("before-backfill")
        """
        history.delete_tag(self._manifest, name)

    @mutator
    def restore(self, version_or_tag: int | str) -> RestoreResult:
        """Make an earlier snapshot current again: commit a new ``__manifest`` version whose
        content is that of ``version_or_tag`` (a version number, or a tag name).

        Every partition is published at the version it had then, partitions created
        since are unpublished, and the schema and partition specs are the old ones
        (except that field ids assigned since stay retired). No partition table is
        changed and the versions in between still read (``lp.open(root, version=N)``).
        Restoring the current version commits nothing. Refused, changing nothing:
        a version or tag that does not exist (VersionNotFoundError); one whose
        partition table versions cleanup removed (RestoreError). Returns a
        ``RestoreResult`` (``version``, ``restored_from``, ``partitions_changed``);
        the handle moves to the new version.

        Example::

            ns.tag("before-backfill")
            ...  # a bad backfill
            ns.restore("before-backfill").version
        """
        result = restore.restore(self._manifest, version_or_tag)
        self.refresh()
        return result

    @mutator
    def compact(
        self,
        target_rows_per_fragment: int = 1 << 20,
        compact_manifest: bool = True,
        progress: ProgressLike = None,
    ) -> MaintenanceReport:
        """Merge small files of every partition (one atomic transaction) and of ``__manifest``.

        ``target_rows_per_fragment`` is the size files are merged up to (a positive
        integer, else InvalidArgumentError and nothing changes);
        ``compact_manifest=False`` leaves ``__manifest``'s own files alone;
        ``progress`` reports partitions done (see ``append``). Partitions a
        concurrent writer changes meanwhile are skipped (``report.skipped``).
        Returns a ``MaintenanceReport``.

        Example::

            ns.compact().leaves_compacted
        """
        with reporter(progress, "compact", "partitions") as done:
            report = maintenance.compact(
                self._manifest, target_rows_per_fragment, compact_manifest, progress=done
            )
        self.refresh()
        return report

    def cleanup(
        self, older_than: dt.timedelta = dt.timedelta(days=7), progress: ProgressLike = None
    ) -> MaintenanceReport:
        """Remove old versions: ``__manifest`` versions superseded more than ``older_than``
        ago (unless tagged), then the partition versions and data files only they read.

        Time travel to a removed version ends; files no version refers to are left to
        ``vacuum``. The equivalent of Iceberg's ``expire_snapshots`` and of the part of
        Delta's ``VACUUM`` that deletes files only old versions need; per partition,
        Lance's ``cleanup_old_versions``.

        Tagged snapshots are kept with every partition version they read.
        ``older_than`` must be a ``datetime.timedelta`` of zero or more
        (``RetentionError`` otherwise, and nothing is removed). Reading a removed
        version later raises ``VersionNotFoundError`` naming this cleanup.
        ``progress`` reports partitions swept (see ``append``).

        Example::

            ns.cleanup(older_than=timedelta(days=7))
        """
        # a damaged latest version may hide which leaf versions are published
        Snapshot.load(self._manifest, for_write=True)
        with reporter(progress, "cleanup", "partitions") as done:
            report = maintenance.cleanup(self._manifest, older_than, progress=done)
        if not self._pinned:
            self.refresh()
        return report

    def vacuum(
        self, older_than: dt.timedelta = dt.timedelta(days=1), progress: ProgressLike = None
    ) -> MaintenanceReport:
        """Remove orphan files: what crashed or failed writers left behind (partition
        directories, unpublished partition versions and files that no version refers
        to), only those older than ``older_than`` (a non-negative ``datetime.timedelta``).

        It removes no version: time travel is unchanged (old versions are ``cleanup``'s).
        The equivalent of Iceberg's ``remove_orphan_files``, and of the part of Delta's
        ``VACUUM`` that deletes files the log does not track; Delta users wanting its
        whole ``VACUUM`` run ``cleanup`` then ``vacuum``.
        ``progress`` reports partitions swept (see ``append``).

        Example::

            ns.vacuum(older_than=timedelta(days=1))
        """
        Snapshot.load(self._manifest, for_write=True)  # refuses a damaged namespace
        with reporter(progress, "vacuum", "partitions") as done:
            report = maintenance.vacuum(self._manifest, older_than, progress=done)
        if not self._pinned:
            self.refresh()
        return report
