"""``PartitionedNamespace``: the user-facing handle on one partitioned namespace root."""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import lance
import pyarrow as pa

from lance_partitioned.catalog import history, layout, repair
from lance_partitioned.catalog.manifest import (
    Manifest,
    manifest_schema,
)
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import (
    NamespaceExistsError,
    NotAPartitionedNamespaceError,
    PinnedSnapshotError,
    SchemaError,
)
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec, parse_spec
from lance_partitioned.operations import describe, evolution, maintenance, realign
from lance_partitioned.operations.delete import DeleteResult, delete_rows, require_filter
from lance_partitioned.operations.input import DataLike, iter_batches
from lance_partitioned.operations.maintenance import MaintenanceReport
from lance_partitioned.operations.partition_writer import PartitionWriter, WrittenFiles
from lance_partitioned.operations.placement import misplaced_leaves
from lance_partitioned.operations.progress import ProgressLike, reporter
from lance_partitioned.operations.publish import WriteMode
from lance_partitioned.operations.realign import RealignReport
from lance_partitioned.operations.scan import FilterLike, Scan, ScanTask
from lance_partitioned.operations.time_ranges import warn_cyclic_fields
from lance_partitioned.operations.write import WriteJob

if TYPE_CHECKING:
    from lance_partitioned.seed003 import Seed003Namespace

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
            sum(leaf_write.is_new for leaf_write in written.leaves.values()),
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
        """Create an empty namespace at ``root`` and return its handle.

        ``schema`` is a pyarrow Schema, a ``Schema`` or JsonArrowSchema JSON; field
        ids are assigned depth-first from 0 where absent. ``spec`` is Iceberg-style
        text (``"year(d), country"``), seed-000 JSON, a ``PartitionSpec`` or a list of
        ``PartitionField`` (``""``: unpartitioned). ``storage_options`` go to Lance
        (object-store credentials, endpoint, region). Raises NamespaceExistsError if
        ``root`` already holds a namespace, SpecError/SchemaError on bad input.

        Example::

            ns = PartitionedNamespace.create("/data/events", schema, "year(event_date), country")
        """
        root = str(root)
        ns_schema = to_schema(schema)
        ns_spec = parse_spec(spec, ns_schema, spec_id=1)
        warn_cyclic_fields(ns_spec, ns_schema)
        manifest = Manifest(root, storage_options)
        if manifest._local_exists():
            raise NamespaceExistsError(f"{root!r} already contains a __manifest table")
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
            first_row, manifest.uri, mode="create", storage_options=storage_options
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

    def refresh(self) -> PartitionedNamespace:
        """Move this handle to the latest ``__manifest`` version (and unpin it). Returns self.

        Example::

            ns.refresh().count()
        """
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
        """Add rows; partitions are created as needed and one atomic commit publishes them.

        ``data`` is a pyarrow Table, RecordBatch, RecordBatchReader, an iterator of
        batches or a pandas DataFrame (columns in any order, cast exactly to the
        schema). ``options``: ``max_buffer_bytes`` (memory for buffered rows, default
        1 GiB), ``max_rows_per_file`` and ``progress`` (None: a bar on a terminal;
        True/False; or a callable receiving ``ProgressEvent``s of rows written).
        Returns a ``WriteResult``.

        Example::

            result = ns.append(table, progress=False)
            result.rows, result.partitions
        """
        return self._write(data, WriteMode.APPEND, **options)

    @mutator
    def overwrite(self, data: DataLike, dynamic: bool = False, **options: Any) -> WriteResult:
        """Replace the whole namespace with ``data``, atomically.

        With ``dynamic=True`` only the partitions ``data`` touches are replaced
        (Spark's dynamic partition overwrite). ``data`` and ``options`` are as for
        ``append``. Returns a ``WriteResult``.

        Example::

            ns.overwrite(fixed_rows, dynamic=True)
        """
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

    # -- reads --------------------------------------------------------------
    def scan(
        self,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
    ) -> Scan:
        """A lazy, pruned read of this handle's version; nothing is read until asked.

        ``filter`` is SQL text, a pyarrow ``Expression``, a DataFusion ``Expr`` or
        None; it prunes partitions through ``__manifest`` and runs inside each leaf,
        so results are exact. ``columns`` projects (default all); ``batch_size``
        bounds the batches streamed. Call ``to_arrow()``, ``to_batches()``,
        ``to_reader()``, ``to_pandas()``, ``to_duckdb()``, ``to_polars()``,
        ``count()`` or ``explain()`` on the result.

        Example::

            ns.scan("country = 'US'", columns=["id"]).to_arrow()
        """
        return Scan(self._snapshot, filter, columns, batch_size)

    def plan(self, filter: FilterLike = None) -> list[ScanTask]:
        """The partition tables a scan with ``filter`` reads (``ScanTask``s).

        Each task has object_id, location, uri, read_version/branch/tag, spec_id,
        partition values, and the residual filter still run inside it.

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

    def versions(self) -> list[dict[str, Any]]:
        """``__manifest`` versions, oldest first: ``{"version", "timestamp"}`` each.

        Every commit (write, delete, evolution, compaction) adds one; each is a
        consistent snapshot that ``lp.open(root, version=N)`` reads.

        Example::

            [v["version"] for v in ns.versions()]
        """
        return [
            {"version": v["version"], "timestamp": v["timestamp"]}
            for v in self._manifest.dataset().versions()
        ]

    # -- evolution (never rewrites leaf data) ---------------------------------
    @mutator
    def evolve_spec(self, spec: SpecLike) -> PartitionSpec:
        """Add partition spec version N+1; new writes use it. No data is rewritten.

        ``spec`` is anything ``create`` accepts. Existing partitions stay under
        their own spec version and reads prune each version by its own spec.
        Returns the new ``PartitionSpec``.

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
                with reporter(progress, "rewrite_partitions", "partitions") as moved:
                    moved.start(len(old))
                    for leaf in old:
                        for batch in everything._leaf_batches(leaf):
                            writer.write(batch)
                        moved.advance()

            written = job.write(fill)
            self._snapshot = job.commit(written) or job.snapshot
        return WriteResult.of(self._snapshot.version, written)

    @mutator
    def add_column(self, name: str, type: pa.DataType, nullable: bool = True) -> Schema:
        """Add column ``name`` of Arrow ``type`` with a fresh field id; existing rows read NULL.

        ``nullable=False`` is refused when rows exist. Returns the new ``Schema``.

        Example::

            ns.add_column("score", pa.float64())
        """
        return self._evolve_schema(lambda s: s.add_column(pa.field(name, type, nullable)))

    @mutator
    def rename_column(self, old: str, new: str) -> Schema:
        """Rename column ``old`` to ``new``. Its field id is stable, so specs and pruning keep working.

        Example::

            ns.rename_column("country", "nation")
        """
        return self._evolve_schema(lambda s: s.rename_column(old, new))

    @mutator
    def drop_column(self, name: str) -> Schema:
        """Drop column ``name``; refused while the current spec partitions by it.

        Older specs that used it read it as NULL. Returns the new ``Schema``.

        Example::

            ns.drop_column("legacy")
        """
        return self._evolve_schema(lambda s: s.drop_column(name))

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

        Example::

            report = ns.realign_field_ids()
        """
        report = realign.realign_field_ids(self._manifest)
        self.refresh()
        return report

    # -- indexes and search (lance_partitioned.search; docs/SEARCH.md) ----------
    # The search engine sits above this module (layering: namespace -> engines),
    # so each method imports it when called.
    @mutator
    def create_index(
        self,
        column: str,
        index_type: str,
        *,
        name: str | None = None,
        filter: FilterLike = None,
        accelerator: str | None = None,
        **params: Any,
    ) -> Any:
        """Define a Lance index and build it on every partition (or those ``filter`` selects).

        ``index_type``: ``IVF_PQ``, ``IVF_HNSW_SQ``, ``IVF_FLAT`` (``metric=`` l2,
        cosine or dot, Lance's parameters such as ``num_partitions``,
        ``num_sub_vectors``, and ``min_rows``: partitions with fewer rows stay flat),
        ``BTREE``, ``BITMAP``, ``LABEL_LIST``, ``INVERTED`` (Lance's tokenizer
        parameters). ``accelerator="cuda"`` trains IVF on a GPU. Partitions are built
        in parallel and published by one ``__manifest`` commit; the definition is
        stored in ``__manifest`` metadata (FORMAT.md §10). Returns an ``IndexReport``.

        Example::

            ns.create_index("embedding", "IVF_PQ", num_partitions=16, num_sub_vectors=8,
                            metric="cosine")
            ns.create_index("body", "INVERTED")
        """
        from lance_partitioned.search import build

        report = build.create_index(
            self._manifest, column, index_type, name, filter, accelerator, **params
        )
        self.refresh()
        return report

    def list_indexes(self) -> list[Any]:
        """Every index definition with its coverage (``IndexInfo``: partitions and rows
        indexed, against the totals), at this handle's version.

        Example::

            for info in ns.list_indexes():
                print(info.name, info.partitions_indexed, "/", info.partitions)
        """
        from lance_partitioned.search import build

        return build.list_indexes(self._snapshot)

    @mutator
    def drop_index(self, name: str) -> Any:
        """Remove index ``name`` from every partition (one commit) and its definition.

        Example::

            ns.drop_index("embedding_ivf_pq")
        """
        from lance_partitioned.search import build

        report = build.drop_index(self._manifest, name)
        self.refresh()
        return report

    @mutator
    def optimize_indexes(self, accelerator: str | None = None) -> Any:
        """Index what writes added since the last build: new partitions get every
        definition, partitions with appended rows are rebuilt; one commit.

        Example::

            ns.append(more_rows)
            ns.optimize_indexes()
        """
        from lance_partitioned.search import build

        report = build.optimize_indexes(self._manifest, accelerator)
        self.refresh()
        return report

    def search(
        self,
        query: Any,
        k: int = 10,
        *,
        column: str | None = None,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
        query_type: str = "vector",
        metric: str | None = None,
        nprobes: int | None = None,
        refine_factor: int | None = None,
    ) -> pa.Table:
        """Search this handle's snapshot; returns an Arrow table, best first.

        ``query_type="vector"``: ``query`` is one vector (or a 2-D array: a batch,
        with a ``query_index`` column), the result has ``_distance`` (Lance's:
        squared L2, 1 - cosine, 1 - dot). ``"fts"``: ``query`` is text, searched in
        a column with an INVERTED index, the result has ``_score`` (BM25 with the
        statistics of all searched partitions). ``"hybrid"``: ``query`` is
        ``(vector, text)``, ranked by reciprocal rank fusion (``_score``).
        ``filter`` prunes partitions as ``scan`` does and runs inside Lance as a
        prefilter; ``columns`` selects columns (default: all); the partition
        values follow as ``partition_field_<field_id>`` columns. Every partition
        is read at the version this snapshot pins; ties are broken by partition
        order, then row id.

        Example::

            hits = ns.search(vec, k=5, filter="tenant = 'acme'", columns=["id", "text"])
        """
        from lance_partitioned.search import api

        return api.search(
            self._snapshot,
            query,
            k,
            column=column,
            filter=filter,
            columns=columns,
            query_type=query_type,
            metric=metric,
            nprobes=nprobes,
            refine_factor=refine_factor,
        )

    # -- description ---------------------------------------------------------
    def partitions(self, with_counts: bool = True) -> pa.Table:
        """One row per partition table: object_id, spec version, partition values,
        location, read version and (``with_counts``, the default) its row count.

        Example::

            ns.partitions(with_counts=False).to_pylist()
        """
        return describe.partitions_table(self._snapshot, with_counts)

    def namespace_properties(self, namespace_id: Sequence[str]) -> dict[str, str]:
        """Runtime properties of Appendix E for ``namespace_id``, a path like ``["v1", "k7m2..."]``.

        Raises KeyError for a path that names no row (``operations.describe``).

        Example::

            ns.namespace_properties(["v1"])["partition_spec"]
        """
        return describe.namespace_properties(self._snapshot, self.root, namespace_id)

    def describe(self) -> str:
        """A readable report (``operations.describe.describe``): schema, every spec
        version, partitions sorted by value with only their own spec's fields, row
        and file counts, sizes, size on disk, and the versions and tags.

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

        Example::

            ns.delete("country = 'FR' AND event_date < '2025-01-01'")
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

        Example::

            for line in ns.repair():
                print(line)
        """
        done = repair.repair(self._manifest, self._manifest.open_checked(for_write=True))
        self.refresh()
        return done

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
    def compact(
        self,
        target_rows_per_fragment: int = 1 << 20,
        compact_manifest: bool = True,
        progress: ProgressLike = None,
    ) -> MaintenanceReport:
        """Merge small files of every partition (one atomic transaction) and of ``__manifest``.

        ``target_rows_per_fragment`` is the size files are merged up to;
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
        """Remove versions no longer needed by any snapshot current within ``older_than``.

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
        """Remove what crashed or failed writers left behind: orphan partition
        directories, unpublished leaf versions and unreferenced files, only those
        older than ``older_than`` (a non-negative ``datetime.timedelta``).
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
) -> PartitionedNamespace | Seed003Namespace:  # noqa: A001
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
        from lance_partitioned import seed003

        if version is None and asof is None and seed003.detect(str(root), storage_options):
            return seed003.Seed003Namespace.open(str(root), storage_options)
        raise


__all__ = ["PartitionedNamespace", "PartitionField", "WriteResult", "create", "open"]
