"""Evolution methods of ``PartitionedNamespace``: partition specs, columns,
rewriting partitions, realigning field ids and aligning leaves. None rewrites
leaf data except ``rewrite_partitions`` and ``align_leaves`` (a widened column)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.facade.base import NamespaceHandle, SpecLike, WriteResult, mutator
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionSpec
from lance_partitioned.operations.evolve import align, evolution, realign, rewrite
from lance_partitioned.operations.evolve.align import AlignReport
from lance_partitioned.operations.evolve.realign import RealignReport
from lance_partitioned.operations.progress import ProgressLike, reporter
from lance_partitioned.operations.read.scan_filter import FilterLike


class EvolutionMethods(NamespaceHandle):
    """Evolution methods of ``PartitionedNamespace``: partition specs, columns,"""

    @mutator
    def evolve_spec(self, spec: SpecLike) -> PartitionSpec:
        """Add partition spec version N+1; new writes use it. No data is rewritten.

        ``spec`` is anything ``create`` accepts. Existing partitions stay under
        their own spec version and reads prune each version by its own spec.
        Returns the new ``PartitionSpec``. A ``spec`` equal to the current one
        (the same fields in the same order) changes nothing: no version is
        written and the current spec is returned.

        Example::

            ns.evolve_spec("year(event_date), country")
        """
        snapshot = Snapshot.load(self._manifest, for_write=True)
        new = evolution.evolve_spec(self._manifest, snapshot, spec)
        self.refresh()
        return new

    @mutator
    def rewrite_partitions(
        self, filter: FilterLike = None, progress: ProgressLike = None
    ) -> WriteResult:
        """Move partitions written under older specs into the current spec, in one atomic commit.

        Partitions of the current spec whose rows do not have the partition's
        values (time fields of a zoned column written by 0.1 in UTC, which
        ``validate()`` reports) are rewritten too, each into new leaves.
        ``filter`` limits the rewrite to partitions it may match (whole partitions
        move). ``progress`` reports partitions moved (see ``append``). Readers see
        the old partitions or the new ones, never both or neither.

        Example::

            ns.rewrite_partitions("event_date < '2025-01-01'")
        """
        with reporter(progress, "rewrite_partitions", "partitions") as moved:
            snapshot, written = rewrite.rewrite_partitions(self._manifest, filter, moved)
        if written is None:
            return WriteResult(snapshot.version, 0, 0, 0)
        self._snapshot = snapshot
        return WriteResult.of(snapshot.version, written)

    @mutator
    def add_column(self, name: str, type: pa.DataType, nullable: bool = True) -> Schema:
        """Add column ``name`` of Arrow ``type`` with a fresh field id; existing rows read NULL.

        ``nullable=False`` is refused when rows exist. Returns the new ``Schema``.

        Example::

            ns.add_column("score", pa.float64())
        """
        return self._evolve_schema(
            lambda s: s.add_column(pa.field(name, type, nullable)),
            CommitInfo("add_column", {"name": name, "type": str(type), "nullable": nullable}),
        )

    @mutator
    def rename_column(self, old: str, new: str) -> Schema:
        """Rename column ``old`` to ``new``. Its field id is stable, so specs and pruning keep working.

        Every partition table's column is renamed too (metadata only, no data
        rewritten), so a reader that matches columns by name sees the new name.

        Example::

            ns.rename_column("country", "nation")
        """
        return self._evolve_schema(
            lambda s: s.rename_column(old, new),
            CommitInfo("rename_column", {"old": old, "new": new}),
            align_names=True,
        )

    @mutator
    def drop_column(self, name: str) -> Schema:
        """Drop column ``name``; refused while the current spec partitions by it.

        Older specs that used it read it as NULL. The column is removed from every
        partition table too (metadata only, no data rewritten), so a later
        ``add_column`` of the same name never exposes the dropped values to a
        reader that matches columns by name. Returns the new ``Schema``.

        Example::

            ns.drop_column("legacy")
        """
        return self._evolve_schema(
            lambda s: s.drop_column(name),
            CommitInfo("drop_column", {"name": name}),
            align_names=True,
        )

    @mutator
    def widen_column(self, name: str, type: pa.DataType) -> Schema:
        """Widen column ``name`` to Arrow ``type`` losslessly (int32→int64, float→double,
        decimal precision up). identity and truncate partition fields on the column
        widen with it. Returns the new ``Schema``.

        Example::

            ns.widen_column("id", pa.int64())
        """
        snapshot = Snapshot.load(self._manifest, for_write=True)
        schema = evolution.widen_column(self._manifest, snapshot, name, type)
        self.refresh()
        return schema

    def _evolve_schema(
        self, change: Callable[[Schema], Schema], info: CommitInfo, align_names: bool = False
    ) -> Schema:
        """Publish ``change`` of the schema, recorded as ``info`` (``history()``); with
        ``align_names``, then rename and drop the
        leaves' columns to match (``operations.evolve.align``). The schema goes first: until the
        leaves follow, reads (by field id) are already right, and a crash in between
        leaves what ``validate()`` reports and ``align_leaves()`` finishes."""
        snapshot = Snapshot.load(self._manifest, for_write=True)
        schema = evolution.update_schema(
            self._manifest, snapshot, change(evolution.evolving_schema(snapshot)), info
        )
        self.refresh()
        if align_names:
            try:
                align.align_leaves(self._manifest, widen=False)
            except Exception as exc:
                exc.add_note(
                    "the schema change is published; its partition tables were not all "
                    "updated: run align_leaves() to finish"
                )
                raise
            finally:
                self.refresh()
        return schema

    @mutator
    def align_leaves(self) -> AlignReport:
        """Bring every partition table in line with the namespace schema, in one atomic
        transaction: columns renamed to their namespace names, columns the namespace
        dropped removed, and columns that lag a ``widen_column`` rewritten in the wider
        type, keeping their field ids.

        Reads are right without it (they cast and map by field id) and a write into
        a partition aligns that partition's types itself; this is the explicit,
        namespace-wide call that ``validate()`` recommends. Only a widened column's
        data is rewritten. Partitions already aligned are not touched.

        Example::

            ns.widen_column("id", pa.int64())
            report = ns.align_leaves()  # every partition now stores int64
        """
        report = align.align_leaves(self._manifest)
        self.refresh()
        return report

    @mutator
    def realign_field_ids(self) -> RealignReport:
        """Give every partition whose Lance field ids drift from the namespace's the
        namespace ``lance:field_id``s (seed 000), in one atomic transaction.

        Leaves written by versions of this library before field ids were aligned may drift
        (``validate()`` reports them). Data files are reused, not rewritten, except
        fragments with deleted rows; aligned partitions are not touched.

        Example::

            report = ns.realign_field_ids()
        """
        report = realign.realign_field_ids(self._manifest)
        self.refresh()
        return report
