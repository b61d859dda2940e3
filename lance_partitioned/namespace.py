"""``PartitionedNamespace``: the user-facing handle on one partitioned namespace root."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.catalog import creation, history, layout
from lance_partitioned.catalog.manifest import Manifest, manifest_schema
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import (
    InvalidArgumentError,
    NotAPartitionedNamespaceError,
    UnsupportedFeatureError,
    lance_boundaries,
)
from lance_partitioned.facade.base import (
    NamespaceHandle,
    SchemaLike,
    SpecLike,
    WriteResult,
    mutator,
    to_schema,
)
from lance_partitioned.facade.changes import ChangeMethods
from lance_partitioned.facade.evolution import EvolutionMethods
from lance_partitioned.facade.maintenance import MaintenanceMethods
from lance_partitioned.facade.search import SearchMethods
from lance_partitioned.format import caches
from lance_partitioned.format.schema import check_column_names
from lance_partitioned.format.spec import PartitionField, parse_spec
from lance_partitioned.format.time_ranges import warn_cyclic_fields
from lance_partitioned.operations.change.predicate import overwrite_where
from lance_partitioned.operations.evolve import evolution
from lance_partitioned.operations.progress import ProgressLike, reporter
from lance_partitioned.operations.read.changes import ChangeFeed, changes
from lance_partitioned.operations.read.scan import Scan, ScanPlan
from lance_partitioned.operations.read.scan_filter import FilterLike
from lance_partitioned.operations.write.delete import DeleteResult, delete_rows, require_filter
from lance_partitioned.operations.write.input import DataLike, iter_batches
from lance_partitioned.operations.write.job import WriteJob, check_write_sizes
from lance_partitioned.operations.write.publish import WriteMode
from lance_partitioned.seed003 import handle as seed003_handle

__all__ = [
    "NamespaceHandle",
    "PartitionField",
    "PartitionedNamespace",
    "SchemaLike",
    "SpecLike",
    "WriteResult",
    "clear_caches",
    "create",
    "mutator",
    "open",
    "repair",
    "to_schema",
]


log = logging.getLogger(__name__)


@lance_boundaries
class PartitionedNamespace(ChangeMethods, EvolutionMethods, MaintenanceMethods, SearchMethods):
    """A Lance partitioned namespace (seed 000) rooted at ``root``.

    Reads are pinned to one ``__manifest`` version (``version``); writes always
    plan against the latest version and publish with one atomic commit. Every
    public method is where Lance's errors reach a user (``errors.lance_boundary``):
    none shows a Rust source path, and Lance's own exception stays ``__cause__``.
    """

    @classmethod
    def create(
        cls,
        root: str,
        schema: SchemaLike,
        spec: SpecLike = "",
        storage_options: dict[str, str] | None = None,
    ) -> PartitionedNamespace:
        """Create an empty namespace at ``root`` and return its handle.

        ``schema`` is a pyarrow Schema, a ``Schema`` or JsonArrowSchema JSON; field
        ids are assigned depth-first from 0 where absent. ``spec`` is Iceberg-style
        text (``"year(d), country"``), seed-000 JSON, a ``PartitionSpec`` or a list of
        ``PartitionField`` (``""``: unpartitioned). ``storage_options`` go to Lance
        (object-store credentials, endpoint, region). Raises NamespaceExistsError if
        ``root`` already holds a namespace, SpecError/SchemaError on bad input.

        All or nothing: the namespace appears with one ``__manifest`` commit (its
        version 2). A root an interrupted create left is accepted: this finishes
        it (same partition columns) or says to remove it with ``lp.repair(root)``.

        Example::

            ns = PartitionedNamespace.create("/data/events", schema, "year(event_date), country")
        """
        root = str(root)
        ns_schema = to_schema(schema)
        check_column_names(ns_schema.arrow)
        ns_spec = parse_spec(spec, ns_schema, spec_id=1)
        warn_cyclic_fields(ns_spec, ns_schema)
        manifest = Manifest(root, storage_options)
        left = creation.check_create_target(manifest)
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
        creation.create_first_version(manifest, first_row, metadata, left)
        return cls(manifest, Snapshot.load(manifest))

    @classmethod
    def open(
        cls,
        root: str,
        version: int | str | None = None,
        storage_options: dict[str, str] | None = None,
        asof: Any = None,
    ) -> PartitionedNamespace:
        """Open the namespace at ``root``, at its latest ``__manifest`` version or at ``version``.

        ``version`` is a ``__manifest`` version number or a tag name (a bool, a
        non-integer number or a datetime raises TypeError); ``asof`` a datetime opens
        the newest version committed at or before it (not both). A handle opened at
        an old version is pinned: it reads that snapshot and refuses writes.
        ``storage_options`` go to Lance. Raises NotAPartitionedNamespaceError or
        VersionNotFoundError.

        Example::

            ns = PartitionedNamespace.open("/data/events", version="before-backfill")
        """
        version = history.check_version_arg(version)
        manifest = Manifest(str(root), storage_options)
        if asof is not None:  # the newest version committed at or before a datetime
            if version is not None:
                raise ValueError("pass either version or asof, not both")
            version = history.version_asof(manifest, asof)
        return cls(manifest, Snapshot.load(manifest, version), pinned=version is not None)

    @mutator
    def append(self, data: DataLike, **options: Any) -> WriteResult:
        """Add rows; partitions are created as needed and one atomic commit publishes them.

        ``data`` is a pyarrow Table, RecordBatch, RecordBatchReader, an iterator of
        batches or a pandas DataFrame (columns in any order, cast exactly to the
        schema). ``options``: ``max_buffer_bytes`` (the write's memory budget, default
        1 GiB: the rows it buffers stay within it, and on Linux so does the growth of
        the process's resident memory while at least a quarter of it is buffered;
        see "Memory of a write" in docs/TRANSACTIONS.md), ``max_rows_per_file`` (both
        positive integers, else InvalidArgumentError before anything is written) and
        ``progress`` (None: a bar on a terminal; True/False; or a callable receiving
        ``ProgressEvent``s of rows written).
        Returns a ``WriteResult``.

        Example::

            result = ns.append(table, progress=False)
            result.rows, result.partitions
        """
        return self._write(data, WriteMode.APPEND, **options)

    @mutator
    def overwrite(
        self, data: DataLike, dynamic: bool = False, where: FilterLike = None, **options: Any
    ) -> Any:
        """Replace the whole namespace with ``data``, atomically.

        With ``dynamic=True`` only the partitions ``data`` touches are replaced
        (Spark's dynamic partition overwrite). With ``where`` (SQL or an
        expression, as for ``delete``) only the rows matching it are replaced:
        they are deleted and ``data`` is written in one commit, and every row of
        ``data`` must match ``where`` (FilterError before anything is written);
        that returns an ``OverwriteResult``. ``data`` and ``options`` are as for
        ``append``. Returns a ``WriteResult``.

        Example::

            ns.overwrite(fixed_rows, dynamic=True)
            ns.overwrite(day_rows, where="event_date = DATE '2025-03-01'")
        """
        if where is not None:
            if dynamic:
                raise InvalidArgumentError("overwrite takes dynamic=True or where=, not both")
            result = overwrite_where(self._manifest, self._snapshot, data, where, **options)
            self._snapshot = Snapshot.load(self._manifest, result.version)
            return result
        return self._write(data, WriteMode.DYNAMIC if dynamic else WriteMode.OVERWRITE, **options)

    def _write(
        self,
        data: DataLike,
        mode: WriteMode,
        *,
        max_buffer_bytes: int = 1 << 30,
        max_rows_per_file: int = 1 << 20,
        progress: ProgressLike = None,
    ) -> WriteResult:
        # refused before the lease, so a bad size changes nothing on disk
        check_write_sizes(max_buffer_bytes=max_buffer_bytes, max_rows_per_file=max_rows_per_file)
        task = "append" if mode is WriteMode.APPEND else "overwrite"
        with reporter(progress, task, "rows") as rows, WriteJob.begin(self._manifest, mode) as job:
            # a table's size is known up front; a stream's is not
            rows.start(getattr(data, "num_rows", None))
            written = job.write(
                lambda writer: writer.write_all(iter_batches(data)),
                max_buffer_bytes=max_buffer_bytes,
                max_rows_per_file=max_rows_per_file,
                progress=rows.advance if rows.active else None,
            )
            self._snapshot = job.commit(written) or job.snapshot
        return WriteResult.of(self._snapshot.version, written)

    def scan(
        self,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
    ) -> Scan:
        """A lazy, pruned read of this handle's version; nothing is read until asked.

        ``filter`` is SQL text, a pyarrow ``Expression``, a DataFusion ``Expr`` or
        None; it prunes partitions through ``__manifest`` and runs inside each leaf,
        so results are exact. ``columns`` projects (default all), each column named
        once (a repeated name raises SchemaError, an unknown one ColumnNotFoundError);
        ``batch_size``, a positive integer, bounds the batches streamed. Call ``to_arrow()``, ``to_batches()``,
        ``to_reader()``, ``to_pandas()``, ``to_duckdb()``, ``to_polars()``,
        ``count()`` or ``explain()`` on the result.

        Example::

            ns.scan("country = 'US'", columns=["id"]).to_arrow()
        """
        return Scan(self._snapshot, filter, columns, batch_size)

    def changes(
        self,
        start_version: int,
        end_version: int | None = None,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
    ) -> ChangeFeed:
        """The rows inserted and deleted by the commits after ``start_version`` up to
        ``end_version`` (default: this handle's version), lazily (docs/CHANGES.md
        "Reading what changed").

        Each row has the namespace's columns (``columns``: those only), then
        ``_change_type`` (``insert`` or ``delete``; a row a merge or update changed is
        an ``update_preimage`` and ``update_postimage`` pair where its key pairs them
        for certain, else its old value deleted and its new value inserted),
        ``_commit_version`` (the ``__manifest``
        version that published it) and ``_commit_timestamp`` (UTC). ``filter`` selects
        rows as ``scan``'s does, pruning partitions through ``__manifest``. Compaction
        and other commits that move rows without changing them add no rows. Cost
        follows the change: partitions a commit did not touch are never opened.
        Call ``to_arrow()``, ``to_batches()``, ``to_reader()``, ``to_pandas()`` or
        ``count()`` on the result. A version removed by ``cleanup`` in the range
        raises VersionNotFoundError naming the cleanup.

        Example::

            last = checkpoint.read()
            ns.changes(last, filter="country = 'FR'").to_arrow()
        """
        version = history.check_version_arg(end_version)
        if version is None or version == self._snapshot.version:  # this handle's: loaded
            end = self._snapshot
        else:
            end = Snapshot.load(self._manifest, version)
        return changes(self._manifest, start_version, end, filter, columns)

    def plan(self, filter: FilterLike = None) -> ScanPlan:
        """The partition tables a scan with ``filter`` reads (``ScanTask``s).

        Each task has object_id, location, uri, read_version/branch/tag, spec_id,
        partition values, and the residual filter still run inside it. The result
        is a ``ScanPlan``: a read-only sequence that behaves as a list of tasks
        (``len``, indexing, slicing, iteration, ``==`` with a list) but keeps the
        tasks as Arrow columns and builds each ``ScanTask`` only when it is read,
        so ``len(ns.plan())`` over a million partitions builds none
        (``list(ns.plan())`` gives a real list).

        Example::

            [t.partition_values for t in ns.plan("country = 'US'")]
        """
        return self.scan(filter).plan()

    def to_arrow(self, filter: FilterLike = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Read the rows matching ``filter`` (all when None), ``columns`` only, as one Arrow table.

        Example::

            ns.to_arrow("amount > 10", columns=["id", "amount"])
        """
        return self.scan(filter, columns).to_arrow()

    def count(self, filter: FilterLike = None) -> int:
        """Number of rows matching ``filter`` (all when None), counted inside Lance.

        Example::

            ns.count("country = 'FR'")
        """
        return self.scan(filter).count()

    @mutator
    def delete(self, filter: FilterLike) -> DeleteResult:
        """Delete the rows matching ``filter`` in one atomic transaction.

        ``filter`` is SQL text, a pyarrow or DataFusion expression. It is
        required: ``None`` and blank text (``""``, ``"   "``, ``"\\n"``) raise
        ``FilterError`` and change nothing, because they would match every row.
        To delete every row, say so: ``delete("true")`` (partitions stay, empty).
        Partitions are pruned through ``__manifest`` first; every affected
        partition changes in the same ``__manifest`` commit.

        Example::

            ns.delete("country = 'FR' AND event_date < '2025-01-01'")
        """
        require_filter(filter)
        result = delete_rows(self._manifest, filter)
        self._snapshot = Snapshot.load(self._manifest, result.version)
        return result

    def __repr__(self) -> str:
        return f"PartitionedNamespace({self.root!r}, version={self.version}, spec={self.spec.describe(self.schema)!r})"


def create(
    root: str,
    schema: SchemaLike,
    spec: SpecLike = "",
    storage_options: dict[str, str] | None = None,
) -> PartitionedNamespace:
    """Create a partitioned namespace at ``root`` and return its handle.

    ``schema`` is a pyarrow Schema, a ``Schema`` or JsonArrowSchema JSON (text or
    dict); field ids are assigned depth-first from 0 where absent. ``spec`` is
    Iceberg-style text with seed-000 meanings (``"year(event_date), country"``,
    ``"bucket(16, id)"``), seed-000 JSON, a ``PartitionSpec`` or a list of
    ``PartitionField`` (``""``: unpartitioned). ``storage_options`` go to Lance
    for object stores. Raises NamespaceExistsError if ``root`` already holds a
    namespace.

    Example::

        schema = pa.schema([("id", pa.int64()), ("event_date", pa.date32()), ("country", pa.string())])
        ns = lp.create("/data/events", schema, "year(event_date), country")
    """
    return PartitionedNamespace.create(root, schema, spec, storage_options)


def open(
    root: str,
    version: int | str | None = None,
    storage_options: dict[str, str] | None = None,
    asof: Any = None,
) -> PartitionedNamespace | seed003_handle.Seed003Namespace:  # noqa: A001
    """Open the partitioned namespace at ``root``.

    At its latest ``__manifest`` version, or at ``version`` (a number or a tag
    name), or ``asof`` a datetime (the newest version committed by then). A
    handle opened at an old version is pinned: it reads that snapshot and
    refuses writes. ``storage_options`` go to Lance for object stores.

    A root in seed 003's earlier layout opens as a read-only ``Seed003Namespace``
    (scan, plan, count; ``lp.convert`` rewrites it in seed 000's layout).

    Example::

        ns = lp.open("/data/events")
        old = lp.open("/data/events", version="before-backfill")
    """
    try:
        return PartitionedNamespace.open(root, version, storage_options, asof=asof)
    except NotAPartitionedNamespaceError:
        # seed 003's earlier layout opens read-only (lp.convert rewrites it)
        if not seed003_handle.detect(str(root), storage_options):
            raise
        if version is not None or asof is not None:
            # seed 003 pins no leaf version: no earlier state can be read consistently
            raise UnsupportedFeatureError(
                f"{str(root)!r} is a namespace in seed 003's earlier layout, which opens at "
                "its latest state only (no version or asof); lp.convert(root, NEW_ROOT) "
                "rewrites it in seed 000's layout, which keeps versions"
            ) from None
        return seed003_handle.Seed003Namespace.open(str(root), storage_options)


def repair(root: str, storage_options: dict[str, str] | None = None) -> list[str]:
    """Repair the namespace at ``root``; returns what was done, in words (empty: nothing).

    A root that an interrupted ``create`` left (``open`` raises
    UnfinishedNamespaceError: no schema, spec or data) has its ``__manifest``
    removed, so that ``create`` can start afresh; anything else is opened and
    ``ns.repair()`` restores columns a foreign writer dropped. Damaged files
    (``CorruptNamespaceError``) are not repairable: it raises, naming them, and
    changes nothing. ``storage_options`` go to Lance for object stores.

    Example::

        for line in lp.repair("/data/events"):
            print(line)
    """
    removed = creation.remove_interrupted(Manifest(str(root), storage_options))
    if removed:
        return removed
    ns = open(str(root), storage_options=storage_options)
    return ns.repair()  # a seed-003 handle refuses, pointing to lp.convert


def clear_caches() -> None:
    """Forget what this process kept from the namespaces it read: every cache.

    Queries keep, by the exact content of each ``__manifest`` version: its parsed
    schema and specs, the filters bound to them, and the leaf rows a filter
    selected (at most 64 MiB in all). A query repeated on an unchanged namespace
    then plans in well under a millisecond; any commit is a new version and is
    read anew. Searches keep opened leaf versions and their vectors. Each cache
    is bounded; this empties all of them (``format/caches.py``). Call it to free
    that memory, or to time a first query.

    Example::

        lp.clear_caches()
        ns = lp.open(root)
        ns.plan("k = 1")  # reads and binds everything again
    """
    caches.clear_all()


# the read-only seed-003 handle refuses every method of PartitionedNamespace by name
# (a property on access)
seed003_handle.NAMESPACE_METHODS.update(
    name for name in dir(PartitionedNamespace) if not name.startswith("_")
)
seed003_handle.NAMESPACE_PROPERTIES.update(
    name
    for name in seed003_handle.NAMESPACE_METHODS
    if isinstance(inspect.getattr_static(PartitionedNamespace, name), property)
)
