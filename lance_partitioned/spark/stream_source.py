"""The Structured Streaming source: ``spark.readStream.format("lance_partitioned").load(root)``.

Offsets are ``__manifest`` versions, ``{"version": N}``: a micro-batch from offset
``a`` to ``b`` holds the change feed of the versions ``a + 1 .. b``
(``operations.read.changes``, ``ns.changes(a, b)``). The rules
(docs/STREAMING.md):

- **Start.** ``startingVersion``: ``latest`` (default: only commits after the query
  starts), ``earliest`` (every row any commit inserted, from the namespace's first
  version) or a number ``N`` (the commits from version ``N`` on). A restarted query
  resumes from its checkpoint instead.
- **Appends only, unless asked.** Without ``readChangeFeed`` a batch streams the rows
  its versions inserted, with the namespace's columns. A version whose change rows
  (within ``filter``) include deleted rows (a delete, an update, a merge, an overwrite
  of rows) stops the stream: every version before it is delivered, then the query
  fails with ``RowsRemovedError`` naming the version and its operation. Commits that
  only move rows (compaction, index builds, evolution) add nothing and never stop it.
  The commit record (``catalog.commit_info``) is read first: a version that records
  no removed rows is never read on the driver. With ``readChangeFeed=true`` every
  change row streams, with ``_change_type``, ``_commit_version``, ``_commit_timestamp``.
- **Bounds.** ``maxVersionsPerTrigger`` caps the versions one batch covers (PySpark
  4.3 admission control knows only row, file and byte limits: the cap travels as a
  ``ReadMaxFiles`` limit, one ``__manifest`` version being one manifest file);
  ``Trigger.AvailableNow`` reads up to the version that was latest when it started.

Where each piece runs: offsets and ``partitions`` in the query's long-lived Python
worker on the driver; ``read`` on executors, with a pickled reader and partitions that
hold no Lance handles (each ``StreamPartition`` names the range, the end version and
the partitions to read, ``PlannedChange``s).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import CaseInsensitiveDict, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from lance_partitioned.catalog import history
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import InvalidArgumentError, RowsRemovedError, SchemaError
from lance_partitioned.operations.read.change_images import UPDATE_PREIMAGE
from lance_partitioned.operations.read.changes import (
    CHANGE_FIELDS,
    CHANGE_TYPE,
    DELETE,
    ROW_KEEPING,
    ChangeFeed,
    PlannedChange,
    changes,
)
from lance_partitioned.spark.options import SourceOptions, _bool, _int
from lance_partitioned.spark.planning import DEFAULT_MIN_TASKS, coalesce_small_batches
from lance_partitioned.spark.types import BatchConformer, spark_arrow_schema

READ_CHANGE_FEED = "readChangeFeed"
STARTING_VERSION = "startingVersion"
MAX_VERSIONS_PER_TRIGGER = "maxVersionsPerTrigger"
CHANGE_COLUMNS = tuple(f.name for f in CHANGE_FIELDS)
# A task costs Spark far more than reading one changed partition's rows (about 3 ms for
# a few hundred rows; a task of a micro-batch on local[2] costs tens of ms): a batch
# gets one task per this many changed partitions, up to ``DEFAULT_MIN_TASKS``.
CHANGES_PER_TASK = 16


@dataclass(frozen=True)
class StreamOptions:
    """The streaming options (the others are ``SourceOptions``').

    ``starting_version``: ``"latest"``, ``"earliest"`` or a version number.
    """

    read_change_feed: bool = False
    starting_version: int | str = "latest"
    max_versions: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        options = CaseInsensitiveDict(options)
        raw = str(options.get(STARTING_VERSION) or "latest").strip().lower()
        start: int | str = raw
        if raw.isdigit():
            start = int(raw)
        elif raw not in ("latest", "earliest"):
            raise InvalidArgumentError(
                f"option {STARTING_VERSION!r} must be 'latest', 'earliest' or a "
                f"__manifest version number, got {options.get(STARTING_VERSION)!r}"
            )
        return cls(
            read_change_feed=_bool(options, READ_CHANGE_FEED, False),
            starting_version=start,
            max_versions=_int(options, MAX_VERSIONS_PER_TRIGGER, None),
        )


def with_change_columns(schema: pa.Schema, options: Mapping[str, str]) -> pa.Schema:
    """``schema`` plus the change feed's columns when ``readChangeFeed`` is on."""
    if not StreamOptions.parse(options).read_change_feed:
        return schema
    return pa.schema([*schema, *CHANGE_FIELDS])


def refuse_batch_change_feed(options: Mapping[str, str]) -> None:
    """A batch read does not stream changes: ``readChangeFeed`` is for ``readStream``."""
    if StreamOptions.parse(options).read_change_feed:
        raise SchemaError(
            f"option {READ_CHANGE_FEED!r} is for spark.readStream; a batch read of the "
            "changes between two versions is lp.open(root).changes(start, end).to_arrow()"
        )


class StreamPartition(InputPartition):
    """One task of a micro-batch: some of the partitions the versions after ``start`` up
    to ``end`` changed, in commit order, and how to read them. Plain data."""

    def __init__(
        self, index: int, start: int, end: int, planned: Sequence[PlannedChange], spec: ReadSpec
    ):
        super().__init__(index)
        self.start = start
        self.end = end
        self.planned = tuple(planned)
        self.spec = spec


@dataclass(frozen=True)
class ReadSpec:
    """What every task of a stream reads: root, storage, filter, columns, target schema."""

    root: str
    storage_options: dict[str, str] | None
    filter: str | None
    columns: tuple[str, ...]
    target: pa.Schema


def read_stream_partition(part: StreamPartition) -> Iterator[pa.RecordBatch]:
    """The change rows of one task, as batches of exactly ``part.spec.target`` (which
    drops the change columns unless the stream reads the change feed)."""
    spec = part.spec
    manifest = Manifest(spec.root, spec.storage_options)
    end = Snapshot.load(manifest, part.end)
    feed = ChangeFeed(manifest, part.start, end, spec.filter, spec.columns)
    conform = BatchConformer(spec.target)

    def batches() -> Iterator[pa.RecordBatch]:
        for planned in part.planned:
            for batch in feed.read_planned(planned):
                yield conform(batch)

    return coalesce_small_batches(batches())


def _chunks(items: list[PlannedChange], count: int) -> list[list[PlannedChange]]:
    """``items`` cut into ``count`` runs (at most ``DEFAULT_MIN_TASKS``) of nearly equal
    length, order kept."""
    count = max(1, min(count, DEFAULT_MIN_TASKS, len(items)))
    size, extra = divmod(len(items), count)
    out, at = [], 0
    for i in range(count):
        n = size + (1 if i < extra else 0)
        out.append(items[at : at + n])
        at += n
    return out


class LancePartitionedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets, admission control and planning of the streaming source (module docstring)."""

    def __init__(self, options: Mapping[str, str], schema: StructType):
        self.opts = SourceOptions.parse(options)
        self.stream = StreamOptions.parse(options)
        names = [f.name for f in schema.fields]
        self.spec = ReadSpec(
            root=self.opts.root,
            storage_options=self.opts.storage_options,
            filter=self.opts.filter,
            columns=tuple(n for n in names if n not in CHANGE_COLUMNS),
            target=spark_arrow_schema(schema),
        )
        self._until: int | None = None  # Trigger.AvailableNow: the version it stops at

    def _manifest(self) -> Manifest:
        return Manifest(self.opts.root, self.opts.storage_options)

    def _latest(self) -> int:
        return self._manifest().dataset().version

    # -- offsets -------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (Spark's names)
        """Where a new query starts (``startingVersion``); the batch after it holds the
        commits after this version."""
        manifest = self._manifest()
        latest = manifest.dataset().version
        wanted = self.stream.starting_version
        if wanted == "latest":
            return {"version": latest}
        first = history.versions(manifest)[0]["version"]
        if wanted == "earliest":
            return {"version": first}
        assert isinstance(wanted, int)
        if wanted > latest + 1:
            raise InvalidArgumentError(
                f"option {STARTING_VERSION!r} is {wanted}, but the latest __manifest version "
                f"of {self.opts.root!r} is {latest}"
            )
        return {"version": max(first, wanted - 1)}

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802
        if self.stream.max_versions is None:
            return ReadAllAvailable()
        return ReadMaxFiles(self.stream.max_versions)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._until = self._latest()

    def reportLatestOffset(self) -> dict[str, int]:  # noqa: N802
        return {"version": self._latest()}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:  # noqa: N802
        """The end of the next batch: the latest version (``Trigger.AvailableNow``: the one
        latest when it started), at most ``limit`` versions after ``start``; without
        ``readChangeFeed``, just before a version that removed rows (raising when that
        version is the first of the batch)."""
        begin = int(start["version"])
        end = self._latest() if self._until is None else self._until
        if isinstance(limit, ReadMaxFiles):
            end = min(end, begin + limit.max_files)
        if end <= begin:
            return start
        if not self.stream.read_change_feed:
            end = self._before_removal(begin, end)
        return {"version": end}

    # -- versions that removed rows ------------------------------------------------------
    def _before_removal(self, begin: int, end: int) -> int:
        """``end``, or the version before the first one in ``begin + 1 .. end`` that
        deleted rows the stream reads; raises RowsRemovedError when that is ``begin + 1``."""
        manifest = self._manifest()
        latest = manifest.dataset()
        for version in range(begin + 1, end + 1):
            # ``first``: ``begin``, never a version looked at here (only the first is a create)
            record = history.commit_record(latest, version, first=begin)
            if record.operation in ROW_KEEPING or record.rows_removed == 0:
                continue
            deleted = self._deleted_rows(manifest, version)
            if not deleted:
                continue
            if version > begin + 1:
                return version - 1
            raise self._removal_error(version, record.operation, deleted)
        return end

    def _deleted_rows(self, manifest: Manifest, version: int) -> int:
        """How many rows (within the filter) ``version`` deleted or updated, from its change
        feed (an updated row is a ``delete``, or an ``update_preimage`` where the feed pairs
        its images)."""
        feed = changes(
            manifest,
            version - 1,
            Snapshot.load(manifest, version),
            self.spec.filter,
            self.spec.columns[:1] or None,
        )
        removed = pa.array([DELETE, UPDATE_PREIMAGE])
        return sum(
            pc.sum(pc.is_in(b.column(CHANGE_TYPE), removed)).as_py() or 0 for b in feed.to_batches()
        )

    def _removal_error(self, version: int, operation: str, rows: int) -> RowsRemovedError:
        where = f" matching the filter {self.spec.filter!r}" if self.spec.filter else ""
        return RowsRemovedError(
            f"__manifest version {version} of {self.opts.root!r} deleted or updated {rows} "
            f"row(s){where} (operation {operation!r}): a stream of appended rows stops there, "
            f"after delivering every version before it. Set option({READ_CHANGE_FEED!r}, "
            f"'true') to stream deletes as rows with {CHANGE_TYPE}, or start a new query "
            f"(a new checkpoint) after it with option({STARTING_VERSION!r}, '{version + 1}').",
            version,
            operation,
            rows,
        )

    # -- planning and reading ------------------------------------------------------------
    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        """The tasks of the batch ``start`` .. ``end``: the partitions its versions changed
        (only ``__manifest`` is read here), cut into runs in commit order
        (``CHANGES_PER_TASK``)."""
        begin, stop = int(start["version"]), int(end["version"])
        if stop <= begin:
            return []
        manifest = self._manifest()
        feed = changes(
            manifest, begin, Snapshot.load(manifest, stop), self.spec.filter, self.spec.columns
        )
        planned = list(feed.planned())
        if not planned:
            return []
        return [
            StreamPartition(i, begin, stop, run, self.spec)
            for i, run in enumerate(_chunks(planned, -(-len(planned) // CHANGES_PER_TASK)))
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, StreamPartition):
            return iter(())
        return read_stream_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: offsets are versions, and reading pins none."""
