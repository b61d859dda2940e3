"""``PartitionedNamespace``: the user-facing handle on one partitioned namespace root."""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import lance
import pyarrow as pa

from lance_partitioned.catalog import history, layout, repair
from lance_partitioned.catalog.manifest import (
    Manifest,
    check_create_target,
    manifest_schema,
)
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import PinnedSnapshotError, SchemaError
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec, parse_spec
from lance_partitioned.operations import describe, evolution, maintenance, realign
from lance_partitioned.operations.delete import DeleteResult, delete_rows, require_filter
from lance_partitioned.operations.input import DataLike, iter_batches
from lance_partitioned.operations.maintenance import MaintenanceReport
from lance_partitioned.operations.partition_writer import PartitionWriter, WrittenFiles
from lance_partitioned.operations.placement import misplaced_leaves
from lance_partitioned.operations.publish import WriteMode
from lance_partitioned.operations.realign import RealignReport
from lance_partitioned.operations.scan import FilterLike, Scan, ScanTask
from lance_partitioned.operations.time_ranges import warn_cyclic_fields
from lance_partitioned.operations.write import WriteJob

log = logging.getLogger(__name__)

SchemaLike: TypeAlias = pa.Schema | Schema | str | dict[str, Any]
"""A namespace schema: Arrow, our ``Schema``, or JsonArrowSchema JSON (text or dict)."""
SpecLike: TypeAlias = str | dict[str, Any] | PartitionSpec | Sequence[PartitionField]
"""A partition spec: Iceberg-style text (``"year(d), country"``) or JSON, a JSON dict,
a ``PartitionSpec``, or its fields."""


def to_schema(schema: SchemaLike) -> Schema:
    """Accept an Arrow schema, a Schema, or JsonArrowSchema JSON (str or dict)."""
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, pa.Schema):
        return Schema.from_arrow(schema)
    if isinstance(schema, (str, dict)):
        return Schema.from_json(schema)
    raise SchemaError(
        f"expected a pyarrow Schema or JsonArrowSchema JSON, got {type(schema).__name__}"
    )


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the new ``__manifest`` version and the rows/partitions written."""

    version: int
    rows: int
    partitions: int
    new_partitions: int

    @classmethod
    def of(cls, version: int, written: WrittenFiles) -> WriteResult:
        """The result of a write that wrote ``written`` and left the namespace at ``version``."""
        return cls(
            version,
            written.rows,
            len(written.leaves),
            sum(lw.is_new for lw in written.leaves.values()),
        )


F = TypeVar("F", bound=Callable[..., Any])


def mutator(method: F) -> F:
    """Mark a method that changes the namespace; on a pinned handle it raises PinnedSnapshotError.

    A handle opened at an old version (``lp.open(root, version=...)``) reads
    that one snapshot. Changing the namespace through it would either act on
    the latest version behind the reader's back or silently unpin the handle,
    so every mutator refuses, before it reads or writes anything. (Tagging and
    the housekeeping of ``cleanup``/``vacuum`` do not change what any version
    holds; they stay allowed and keep the handle pinned.)
    """

    @functools.wraps(method)
    def guarded(self: PartitionedNamespace, *args: Any, **kwargs: Any) -> Any:
        if self._pinned:
            raise PinnedSnapshotError(
                f"this handle is pinned to __manifest version {self.version} of {self.root!r}; "
                f"{method.__name__}() changes the namespace: use refresh() (or lp.open(root)) "
                "before writing"
            )
        return method(self, *args, **kwargs)

    guarded.changes_namespace = True  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]


class PartitionedNamespace:
    """A Lance partitioned namespace (seed 000) rooted at ``root``.

    Reads are pinned to one ``__manifest`` version (``version``); writes always
    plan against the latest version and publish with one atomic commit.
    """

    def __init__(self, manifest: Manifest, snapshot: Snapshot, pinned: bool = False):
        self._manifest = manifest
        self._snapshot = snapshot
        self._pinned = pinned

    # -- lifecycle ----------------------------------------------------------
    @classmethod
    def create(
        cls,
        root: str,
        schema: SchemaLike,
        spec: SpecLike = "",
        storage_options: dict[str, str] | None = None,
    ) -> PartitionedNamespace:
        """Create an empty namespace. Field ids are assigned depth-first from 0 when absent."""
        root = str(root)
        ns_schema = to_schema(schema)
        ns_spec = parse_spec(spec, ns_schema, spec_id=1)
        warn_cyclic_fields(ns_spec, ns_schema)
        manifest = Manifest(root, storage_options)
        check_create_target(manifest)
        metadata = {**evolution.schema_metadata(ns_schema), ns_spec.key: ns_spec.to_json_str()}
        columns = [pa.field(f.column, f.result_type) for f in ns_spec.fields]
        first_row = pa.Table.from_pylist(
            [
                {
                    "object_id": layout.spec_namespace(ns_spec.spec_id),
                    "object_type": "namespace",
                    "metadata": "{}",
                }
            ],
            schema=manifest_schema(columns),
        )
        ds = lance.write_dataset(
            first_row, manifest.uri, mode="create", storage_options=manifest.storage_options
        )
        ds.update_metadata(metadata)
        return cls(manifest, Snapshot.load(manifest))

    @classmethod
    def open(
        cls,
        root: str,
        version: int | str | None = None,
        storage_options: dict[str, str] | None = None,
        asof: Any = None,
    ) -> PartitionedNamespace:
        """Open an existing namespace, at its latest ``__manifest`` version or at ``version`` (number or tag).

        ``version`` is an integer or a tag name; a bool, a non-integer number or
        a datetime raises TypeError (for a point in time pass ``asof=``).
        """
        version = history.check_version_arg(version)
        manifest = Manifest(str(root), storage_options)
        if asof is not None:  # the newest version committed at or before a datetime
            if version is not None:
                raise ValueError("pass either version or asof, not both")
            version = history.version_asof(manifest, asof)
        return cls(manifest, Snapshot.load(manifest, version), pinned=version is not None)

    def refresh(self) -> PartitionedNamespace:
        """Move to the latest ``__manifest`` version."""
        self._snapshot = Snapshot.load(self._manifest)
        self._pinned = False
        return self

    # -- properties ---------------------------------------------------------
    @property
    def root(self) -> str:
        return self._manifest.root

    @property
    def version(self) -> int:
        """The ``__manifest`` version this handle reads."""
        return self._snapshot.version

    @property
    def schema(self) -> Schema:
        return self._snapshot.schema

    @property
    def spec(self) -> PartitionSpec:
        """The current (newest) partition spec."""
        return self._snapshot.current_spec

    @property
    def specs(self) -> dict[int, PartitionSpec]:
        return dict(self._snapshot.specs)

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    # -- writes -------------------------------------------------------------
    @mutator
    def append(self, data: DataLike, **options: Any) -> WriteResult:
        """Add rows. Partitions are created as needed; one atomic commit publishes them."""
        return self._write(data, WriteMode.APPEND, **options)

    @mutator
    def overwrite(self, data: DataLike, dynamic: bool = False, **options: Any) -> WriteResult:
        """Replace the whole namespace with ``data``; with ``dynamic=True`` replace only the partitions ``data`` touches."""
        return self._write(data, WriteMode.DYNAMIC if dynamic else WriteMode.OVERWRITE, **options)

    def _write(
        self,
        data: DataLike,
        mode: WriteMode,
        *,
        max_buffer_bytes: int = 1 << 30,
        max_rows_per_file: int = 1 << 20,
        progress: Callable[[int], None] | None = None,
    ) -> WriteResult:
        with WriteJob.begin(self._manifest, mode) as job:
            written = job.write(
                lambda writer: writer.write_all(iter_batches(data)),
                max_buffer_bytes=max_buffer_bytes,
                max_rows_per_file=max_rows_per_file,
                progress=progress,
            )
            self._snapshot = job.commit(written) or job.snapshot
        return WriteResult.of(self._snapshot.version, written)

    # -- reads --------------------------------------------------------------
    def scan(
        self,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
    ) -> Scan:
        """A pruned scan; call ``to_arrow()``, ``to_batches()``, ``to_pandas()`` or ``count()``."""
        return Scan(self._snapshot, filter, columns, batch_size)

    def plan(self, filter: FilterLike = None) -> list[ScanTask]:
        """The leaf tables a scan with ``filter`` reads: object_id, location, read_version, values."""
        return self.scan(filter).plan()

    def to_arrow(self, filter: FilterLike = None, columns: Sequence[str] | None = None) -> pa.Table:
        return self.scan(filter, columns).to_arrow()

    def count(self, filter: FilterLike = None) -> int:
        return self.scan(filter).count()

    def versions(self) -> list[dict[str, Any]]:
        """``__manifest`` versions: number and timestamp, oldest first."""
        return [
            {"version": v["version"], "timestamp": v["timestamp"]}
            for v in self._manifest.dataset().versions()
        ]

    # -- evolution (never rewrites leaf data) ---------------------------------
    @mutator
    def evolve_spec(self, spec: SpecLike) -> PartitionSpec:
        """Add partition spec version N+1 (e.g. ``"year(event_date), country"``); new writes use it.

        Existing partitions stay where they are, under their own spec version, and
        reads prune each version by its own spec.
        """
        snapshot = Snapshot.load(self._manifest, for_write=True)
        new = evolution.evolve_spec(self._manifest, snapshot, spec)
        self.refresh()
        return new

    @mutator
    def rewrite_partitions(self, filter: FilterLike = None) -> WriteResult:
        """Move partitions written under older specs into the current spec, in one atomic commit.

        Partitions of the current spec whose rows do not have the partition's
        values (time fields of a zoned column written by 0.1 in UTC, which
        ``validate()`` reports) are rewritten too, each into new leaves.
        ``filter`` limits the rewrite to partitions it may match (whole partitions
        move). Readers see the old partitions or the new ones, never both or neither.
        """
        with WriteJob.begin(self._manifest, WriteMode.APPEND, "rewrite_partitions") as job:
            snapshot = job.snapshot
            current = snapshot.current_spec.spec_id
            scan = Scan(snapshot, filter)
            misplaced = misplaced_leaves(
                snapshot, [leaf for leaf in scan.leaves if leaf.spec_id == current]
            )
            old = [
                leaf
                for leaf in scan.leaves
                if leaf.spec_id != current or leaf.object_id in misplaced
            ]
            if not old:
                return WriteResult(snapshot.version, 0, 0, 0)
            # the old leaves go in the same commit; misplaced current-spec ones
            # get new leaves for their rows, never appends
            job.replaces = [leaf.object_id for leaf in old]
            everything = Scan(snapshot)

            def fill(writer: PartitionWriter) -> None:
                for leaf in old:
                    for batch in everything._leaf_batches(leaf):
                        writer.write(batch)

            written = job.write(fill)
            self._snapshot = job.commit(written) or job.snapshot
        return WriteResult.of(self._snapshot.version, written)

    @mutator
    def add_column(self, name: str, type: pa.DataType, nullable: bool = True) -> Schema:
        """Add a nullable column with a fresh field id; existing rows read it as NULL."""
        return self._evolve_schema(lambda s: s.add_column(pa.field(name, type, nullable)))

    @mutator
    def rename_column(self, old: str, new: str) -> Schema:
        """Rename a column. Its field id is stable, so partition specs and pruning keep working."""
        return self._evolve_schema(lambda s: s.rename_column(old, new))

    @mutator
    def drop_column(self, name: str) -> Schema:
        """Drop a column; refused if the current spec partitions by it. Older specs read it as NULL."""
        return self._evolve_schema(lambda s: s.drop_column(name))

    @mutator
    def widen_column(self, name: str, type: pa.DataType) -> Schema:
        """Widen a column's type losslessly (int32→int64, float→double, decimal precision up).

        identity and truncate partition fields on the column widen with it.
        """
        snapshot = Snapshot.load(self._manifest, for_write=True)
        schema = evolution.widen_column(self._manifest, snapshot, name, type)
        self.refresh()
        return schema

    def _evolve_schema(self, change: Callable[[Schema], Schema]) -> Schema:
        snapshot = Snapshot.load(self._manifest, for_write=True)
        schema = evolution.update_schema(
            self._manifest, snapshot, change(evolution.evolving_schema(snapshot))
        )
        self.refresh()
        return schema

    def validate(self) -> list[str]:
        """Check every partition table against the namespace schema and field ids.

        Returns the inconsistencies found (an empty list when all is well); see
        ``operations.describe.validate`` for everything it checks.

        Example::

            assert ns.validate() == []
        """
        return describe.validate(self._snapshot)

    @mutator
    def realign_field_ids(self) -> RealignReport:
        """Give every partition whose Lance field ids drift from the namespace's the
        namespace ``lance:field_id``s (seed 000), in one atomic transaction.

        Leaves written by versions of this library before issue 10 may drift
        (``validate()`` reports them). Data files are reused, not rewritten, except
        fragments with deleted rows; aligned partitions are not touched.
        """
        report = realign.realign_field_ids(self._manifest)
        self.refresh()
        return report

    # -- description ---------------------------------------------------------
    def partitions(self, with_counts: bool = True) -> pa.Table:
        """One row per partition table: spec version, partition values, read version, row count."""
        return describe.partitions_table(self._snapshot, with_counts)

    def namespace_properties(self, namespace_id: Sequence[str]) -> dict[str, str]:
        """Runtime properties of Appendix E for a namespace path like ``["v1", "k7m2..."]``.

        Raises KeyError for a path that names no row (``operations.describe``).
        """
        return describe.namespace_properties(self._snapshot, self.root, namespace_id)

    def describe(self) -> str:
        """A readable report: schema, every spec version, and partitions with values
        and row counts (``operations.describe.describe``).

        Example::

            print(ns.describe())
        """
        return describe.describe(self._snapshot, self.root)

    # -- transactions, time travel, maintenance (docs/TRANSACTIONS.md) ---------
    @mutator
    def delete(self, filter: FilterLike) -> DeleteResult:
        """Delete the rows matching ``filter`` in one atomic transaction.

        ``filter`` is SQL text, a pyarrow or DataFusion expression. It is
        required: ``None`` and blank text (``""``, ``"   "``, ``"\\n"``) raise
        ``FilterError`` and change nothing, because they would match every row.
        To delete every row, say so: ``delete("true")`` (partitions stay, empty).
        Partitions are pruned through ``__manifest`` first; every affected
        partition changes in the same ``__manifest`` commit.
        """
        require_filter(filter)
        result = delete_rows(self._manifest, filter)
        self._snapshot = Snapshot.load(self._manifest, result.version)
        return result

    @mutator
    def repair(self) -> list[str]:
        """Restore ``__manifest`` columns a foreign writer dropped, in one commit.

        Opening and reading never write: a damaged latest version (for example
        after a ``DirectoryNamespace`` ``create_namespace``, which keeps only its
        base columns) is read through an in-memory reconstruction and writes
        refuse with NamespaceDamagedError until this is called. Values come from
        the newest intact ``__manifest`` version, else the metadata mirror
        (FORMAT.md §5). Returns what was done, in words (empty: nothing to repair).
        """
        done = repair.repair(self._manifest, self._manifest.open_checked(for_write=True))
        self.refresh()
        return done

    def tag(self, name: str, version: int | None = None) -> int:
        """Name a ``__manifest`` version (default: this handle's) so it can be opened later
        with ``lp.open(root, version=name)``; cleanup keeps it. Returns the version."""
        target = self.version if version is None else version
        history.create_tag(self._manifest, name, target)
        return target

    def tags(self) -> dict[str, int]:
        """Tag name → ``__manifest`` version."""
        return history.tags(self._manifest)

    def delete_tag(self, name: str) -> None:
        """Remove a tag; its versions become eligible for cleanup."""
        history.delete_tag(self._manifest, name)

    @mutator
    def compact(
        self, target_rows_per_fragment: int = 1 << 20, compact_manifest: bool = True
    ) -> MaintenanceReport:
        """Merge small files of every partition (one atomic transaction) and of ``__manifest``."""
        report = maintenance.compact(self._manifest, target_rows_per_fragment, compact_manifest)
        self.refresh()
        return report

    def cleanup(self, older_than: dt.timedelta = dt.timedelta(days=7)) -> MaintenanceReport:
        """Remove versions no longer needed by any snapshot current within ``older_than``.

        Tagged snapshots are kept with every partition version they read.
        ``older_than`` must be a ``datetime.timedelta`` of zero or more
        (``RetentionError`` otherwise, and nothing is removed). Reading a removed
        version later raises ``VersionNotFoundError`` naming this cleanup.
        """
        # a damaged latest version may hide which leaf versions are published
        Snapshot.load(self._manifest, for_write=True)
        report = maintenance.cleanup(self._manifest, older_than)
        if not self._pinned:
            self.refresh()
        return report

    def vacuum(self, older_than: dt.timedelta = dt.timedelta(days=1)) -> MaintenanceReport:
        """Remove what crashed or failed writers left behind (only things older than ``older_than``,
        a non-negative ``datetime.timedelta``)."""
        Snapshot.load(self._manifest, for_write=True)  # refuses a damaged namespace
        report = maintenance.vacuum(self._manifest, older_than)
        if not self._pinned:
            self.refresh()
        return report

    def __repr__(self) -> str:
        return f"PartitionedNamespace({self.root!r}, version={self.version}, spec={self.spec.describe(self.schema)!r})"


def create(
    root: str,
    schema: SchemaLike,
    spec: SpecLike = "",
    storage_options: dict[str, str] | None = None,
) -> PartitionedNamespace:
    """Create a partitioned namespace at ``root`` (see ``PartitionedNamespace.create``)."""
    return PartitionedNamespace.create(root, schema, spec, storage_options)


def open(
    root: str,
    version: int | str | None = None,
    storage_options: dict[str, str] | None = None,
    asof: Any = None,
) -> PartitionedNamespace:  # noqa: A001
    """Open the partitioned namespace at ``root`` (see ``PartitionedNamespace.open``)."""
    return PartitionedNamespace.open(root, version, storage_options, asof=asof)


__all__ = ["PartitionedNamespace", "PartitionField", "WriteResult", "create", "open"]
