"""The ``lance_partitioned`` Spark sink: tasks write files, the driver publishes once.

Protocol (the two phases of a ``WriteJob``, ``operations.write.job``, mapped onto Spark):

1. ``plan_write`` (driver, once per job) creates the namespace if the write is
   the first (schema from the DataFrame, spec from the ``spec`` option or Spark's
   partitioning; neither is refused, ``creation_spec``), checks the
   DataFrame schema against the namespace schema, and pins the ``__manifest``
   version plus a fresh job secret into the pickled writer.
2. ``write`` (every task) runs ``WriteJob.write`` against that same snapshot
   and secret, so tasks that meet the same new partition derive the same
   location; it writes Lance data files and returns its ``WrittenFiles``. It
   commits nothing. No rows go to the driver, only file lists.
3. ``commit`` (driver) merges the messages and runs ``WriteJob.commit`` once:
   one atomic ``__manifest`` commit for all partitions (none when nothing was
   written and nothing is overwritten).
4. ``abort`` (driver, on task or job failure) removes the files named in the
   messages it receives (``WriteJob.abort``), and a namespace this job created.

Files that no message names are not reclaimed here: a task killed after it
flushed files (a lost executor, speculation's losing attempt, a retried task's
first attempt), or a task that failed inside a flush. A failing task deletes the
files it had recorded itself before it re-raises. The rest are orphans that no
version references and no reader sees; ``vacuum`` removes them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from lance.fragment import FragmentMetadata
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import ArrayType, DataType, MapType, StructType, TimestampNTZType

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import (
    FilterError,
    NamespaceExistsError,
    SchemaError,
    SpecError,
    UnsupportedFeatureError,
)
from lance_partitioned.format.filters.evaluate import filter_batch
from lance_partitioned.format.spec import parse_spec
from lance_partitioned.namespace import PartitionedNamespace
from lance_partitioned.operations.change.predicate import where_sql
from lance_partitioned.operations.read.scan import Scan
from lance_partitioned.operations.write.input import InputConformer
from lance_partitioned.operations.write.job import WriteJob
from lance_partitioned.operations.write.partition_writer import WrittenFiles, new_job_secret
from lance_partitioned.operations.write.publish import WriteMode
from lance_partitioned.spark.options import SourceOptions
from lance_partitioned.spark.refresh import notify_drivers
from lance_partitioned.spark.timing import TIMING_LOG_ENV, log_timing
from lance_partitioned.spark.types import spark_to_arrow

log = logging.getLogger(__name__)

# Batches a task splits at once. Spark already runs one task per core, and each
# task's input comes from a JVM thread converting rows to Arrow, which is slower
# than the split (tasks wait for input most of their time): a second split thread
# only competes with it for the cores.
TASK_SPLIT_THREADS = 1


class _TimedInput:
    """Wraps a task's batch iterator, adding up the seconds spent waiting for Spark."""

    def __init__(self, batches: Iterator[pa.RecordBatch]):
        self._batches = batches
        self.wait = 0.0
        self.batches = 0
        self.rows = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            start = time.perf_counter()
            batch = next(self._batches, None)
            self.wait += time.perf_counter() - start
            if batch is None:
                return
            self.batches += 1
            self.rows += batch.num_rows
            yield batch


@dataclass
class LanceCommitMessage(WriterCommitMessage):
    """What one task wrote (file lists per partition); never row data."""

    written: WrittenFiles


def merge_messages(version: int, messages: Sequence[WriterCommitMessage | None]) -> WrittenFiles:
    """One ``WrittenFiles`` from every task message that arrived."""
    merged = WrittenFiles(version)
    for m in messages:
        if isinstance(m, LanceCommitMessage):
            merged.merge(m.written)
    return merged


def _published(manifest: Manifest, written: WrittenFiles) -> bool:
    """Whether the latest ``__manifest`` already references files of ``written``.

    Guards ``abort`` against deleting a write that did get published (for
    example when the commit worker died after committing).
    """
    latest = Snapshot.load(manifest)
    if latest.version == written.snapshot_version:
        return False
    by_location = {leaf.location: leaf for leaf in latest.leaves()}
    for leaf_write in written.leaves.values():
        leaf = by_location.get(leaf_write.location)
        if leaf is None:
            continue
        if leaf_write.is_new:
            return True
        if leaf.read_version == leaf_write.base_version:
            continue
        ours = {f.path for fj in leaf_write.fragments for f in FragmentMetadata.from_json(fj).files}
        current = {
            f.path for frag in latest.open_leaf(leaf).get_fragments() for f in frag.metadata.files
        }
        if ours & current:
            return True
    return False


class LancePartitionedWriter(DataSourceArrowWriter):
    """Pickled from the driver to every task; holds only plain planning data."""

    def __init__(
        self,
        opts: SourceOptions,
        snapshot_version: int,
        secret: bytes,
        mode: WriteMode,
        created_version: int | None,
    ):
        self.root = opts.root
        self.storage_options = opts.storage_options
        self.snapshot_version = snapshot_version
        self.secret = secret
        self.mode = mode
        self.max_buffer_bytes = opts.max_buffer_bytes
        self.max_rows_per_file = opts.max_rows_per_file
        self.created_version = created_version
        # an overwrite of the rows matching a condition (``overwrite_where``): the leaves
        # it replaces, and the condition as Lance SQL, which every written row must match
        self.replaces: tuple[str, ...] = ()
        self.where_sql: str | None = None

    def _manifest(self) -> Manifest:
        return Manifest(self.root, self.storage_options)

    def _job(self, manifest: Manifest | None = None, version: int | None = None) -> WriteJob:
        """The job, planned against the pinned snapshot (loaded when first needed), or
        against ``version`` (the one the received files were written for)."""
        manifest = manifest or self._manifest()
        version = self.snapshot_version if version is None else version
        return WriteJob(manifest, version, self.mode, self.secret, replaces=self.replaces)

    # -- executors ------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> LanceCommitMessage:
        if self.where_sql is not None:
            iterator = _matching_only(iterator, self.where_sql)
        timed = _TimedInput(iterator) if os.environ.get(TIMING_LOG_ENV) else None
        start, cpu = time.perf_counter(), time.process_time()
        # shared: other tasks may be writing into the same new partition directories
        written = self._job().write(
            lambda writer: writer.write_all(timed or iterator, threads=TASK_SPLIT_THREADS),
            shared=True,
            max_buffer_bytes=self.max_buffer_bytes,
            max_rows_per_file=self.max_rows_per_file,
        )
        if timed is not None:
            log_timing(
                {
                    "phase": "task",
                    "pid": os.getpid(),  # a new pid per job: the worker imported us again
                    "seconds": time.perf_counter() - start,
                    "cpu_seconds": time.process_time() - cpu,
                    "input_wait_seconds": timed.wait,
                    "batches": timed.batches,
                    "rows": timed.rows,
                    "partitions": len(written.leaves),
                    "files": sum(len(w.fragments) for w in written.leaves.values()),
                }
            )
        return LanceCommitMessage(written)

    # -- driver -----------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        info = None
        if self.where_sql is not None:
            info = CommitInfo("overwrite", {"mode": "where", "where": self.where_sql})
        self.publish(merge_messages(self.snapshot_version, messages), info)

    def publish(self, written: WrittenFiles, info: CommitInfo | None = None) -> Snapshot | None:
        """Publish ``written`` with one ``__manifest`` commit recording ``info`` (default:
        the mode's); None when there was nothing to publish. The batch sink's ``commit``,
        and the streaming sink's for each micro-batch."""
        start = time.perf_counter()
        snapshot = self._job(version=written.snapshot_version).commit(written, info=info)
        published = time.perf_counter()
        if snapshot is None:
            log.info("lance_partitioned: nothing to commit to %s", self.root)
            notified = 0
        else:
            # Nothing below may raise: Spark would call abort() on a published write.
            # Views cache their read plan; make the next query over them plan again.
            notified = notify_drivers()
        log_timing(
            {
                "phase": "commit",
                "seconds": published - start,
                "notify_seconds": time.perf_counter() - published,
                "drivers_notified": notified,
                "partitions": len(written.leaves),
                "files": sum(len(w.fragments) for w in written.leaves.values()),
            }
        )
        if snapshot is None:
            return None
        try:
            log.info(
                "lance_partitioned: %s of %d rows into %d partitions of %s published as __manifest version %d",
                self.mode.value,
                written.rows,
                len(written.leaves),
                self.root,
                snapshot.version,
            )
        except Exception:  # pragma: no cover - logging only
            pass
        return snapshot

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self.discard(merge_messages(self.snapshot_version, messages))

    def discard(self, written: WrittenFiles) -> None:
        """Remove the files of ``written`` unless a commit published them (and the
        namespace this job created, if nobody wrote to it)."""
        manifest = self._manifest()
        try:
            if written.leaves and _published(manifest, written):
                log.warning("lance_partitioned: abort after a published commit; keeping the files")
                return
        except Exception as exc:  # cannot tell: keeping files is the safe side
            log.warning(
                "lance_partitioned: abort could not check the manifest (%s); keeping files", exc
            )
            return
        self._job(manifest, written.snapshot_version).abort(written)
        if self.created_version is not None:
            self._drop_created_namespace(manifest)

    def _drop_created_namespace(self, manifest: Manifest) -> None:
        """Remove the namespace this job created, if nobody else has written to it since."""
        try:
            if manifest.dataset().version != self.created_version:
                return
        except Exception:
            return
        st = manifest.storage
        try:
            st.delete_tree(manifest.uri)
            st.remove_empty_dir(manifest.root)  # only when empty
        except Exception as exc:  # best effort: the namespace is empty either way
            log.warning("lance_partitioned: abort could not remove %s: %s", manifest.uri, exc)


def _incoming_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark hands to ``write`` (per column, so errors name it)."""
    fields = []
    for f in schema.fields:
        try:
            t = to_arrow_type(f.dataType, timezone="UTC")
        except Exception as exc:
            raise SchemaError(
                f"column {f.name!r}: Spark type {f.dataType.simpleString()} cannot be written: {exc}"
            ) from exc
        fields.append(pa.field(f.name, t, f.nullable))
    return pa.schema(fields)


def check_input_schema(snapshot: Snapshot, schema: StructType) -> None:
    """Fail before any task runs when the DataFrame cannot fit the namespace.

    Runs the same ``InputConformer`` tasks use on an empty batch: unknown or
    missing non-null columns and impossible casts raise ``SchemaError`` naming
    the column. NULLs in non-null columns can only be found per batch, in tasks.
    """
    for f in schema.fields:
        if snapshot.schema.has_field(f.name):
            _refuse_ntz_into_instants(f.name, f.dataType, snapshot.schema.field(f.name).type)
    InputConformer(snapshot.schema)(
        pa.RecordBatch.from_pylist([], schema=_incoming_arrow_schema(schema))
    )


def _refuse_ntz_into_instants(name: str, spark_type: DataType, target: pa.DataType) -> None:
    """Refuse a TIMESTAMP_NTZ value for a column holding instants (Spark's TimestampType).

    Spark itself would read the wall clock in the session time zone (store
    assignment casts it); the rows arrive as naive Arrow values, which the core
    rule reads as UTC: in New York, 2020-01-01 00:00 was stored as 2019-12-31
    19:00. Only Spark knows the session zone, so the user casts it there.
    """
    if isinstance(spark_type, TimestampNTZType):
        if pa.types.is_timestamp(target) and target.tz is not None:
            raise SchemaError(
                f"column {name!r} is TIMESTAMP_NTZ but the namespace holds instants there "
                f"({target}, Spark's TIMESTAMP); cast it in Spark first "
                f"(CAST({name} AS TIMESTAMP) reads the wall clock in the session time zone)"
            )
    elif isinstance(spark_type, StructType) and pa.types.is_struct(target):
        for f in spark_type.fields:
            i = target.get_field_index(f.name)
            if i >= 0:
                _refuse_ntz_into_instants(f"{name}.{f.name}", f.dataType, target.field(i).type)
    elif isinstance(spark_type, ArrayType) and (
        pa.types.is_list(target)
        or pa.types.is_large_list(target)
        or pa.types.is_fixed_size_list(target)
    ):
        _refuse_ntz_into_instants(f"{name}[]", spark_type.elementType, target.value_type)
    elif isinstance(spark_type, MapType) and pa.types.is_map(target):
        _refuse_ntz_into_instants(f"{name}.key", spark_type.keyType, target.key_type)
        _refuse_ntz_into_instants(f"{name}.value", spark_type.valueType, target.item_type)


def plan_write(opts: SourceOptions, schema: StructType, overwrite: bool) -> LancePartitionedWriter:
    """Driver-side planning of one write job (see the module docstring)."""
    manifest = Manifest(opts.root, opts.storage_options)
    created_version = None
    if not manifest.exists():
        arrow = spark_to_arrow(schema, opts.vector_sizes)
        try:
            ns = PartitionedNamespace.create(
                opts.root, arrow, creation_spec(opts), opts.storage_options
            )
            created_version = ns.version
        except NamespaceExistsError:
            pass  # created concurrently: write into it like any existing namespace
    mode = WriteMode.APPEND
    if overwrite and opts.overwrite_where is None:  # by a condition: APPEND, replacing leaves
        mode = WriteMode.DYNAMIC if opts.dynamic_overwrite else WriteMode.OVERWRITE
    writer = LancePartitionedWriter(opts, 0, new_job_secret(), mode, created_version)
    try:
        snapshot = Snapshot.load(manifest, for_write=True)
        if opts.spec and created_version is None:
            _check_spec(opts.root, snapshot, opts.spec, f"spec {opts.spec!r}")
        if opts.partition_by is not None:
            _check_spec(opts.root, snapshot, opts.partition_by, PARTITION_BY_WORDS)
        if opts.vector_sizes and created_version is None:
            _check_vector_sizes(opts, snapshot, schema)
        check_input_schema(snapshot, schema)
        if overwrite and opts.overwrite_where is not None:
            writer.replaces, writer.where_sql = replaced_by(snapshot, opts.overwrite_where)
    except BaseException:
        if created_version is not None:
            writer._drop_created_namespace(manifest)
        raise
    writer.snapshot_version = snapshot.version
    return writer


PARTITION_BY_WORDS = "Spark's partitioning (partitionBy / PARTITIONED BY)"


def replaced_by(snapshot: Snapshot, where: str) -> tuple[tuple[str, ...], str]:
    """The leaves an overwrite of the rows matching ``where`` replaces, and ``where`` as
    Lance SQL. Every row of those leaves must match (their partition values decide it),
    so that replacing whole leaves replaces exactly the matching rows; a leaf whose rows
    the partition values do not decide (one of an older spec without the column) is
    refused, before anything is written."""
    sql = where_sql(snapshot, where)
    leaves = []
    for task in Scan(snapshot, where).plan():
        if task.filter_sql is not None:
            raise UnsupportedFeatureError(
                f"cannot overwrite the rows matching {where!r} in {snapshot.manifest.root!r}: "
                f"partition {task.partition_values} holds rows that do and rows that do not "
                "match (its spec does not partition by those columns); use "
                f"lp.open(root).overwrite(rows, where={where!r}) on the driver"
            )
        leaves.append(task.object_id)
    return tuple(leaves), sql


def _matching_only(batches: Iterator[pa.RecordBatch], sql: str) -> Iterator[pa.RecordBatch]:
    """``batches``, refusing (FilterError) a row outside the condition an overwrite
    replaces: it would land outside the rows it replaces (Spark's static partition insert
    never makes one; ``writeTo(t).overwrite(cond)`` may)."""
    for batch in batches:
        if batch.num_rows and filter_batch(batch, sql).num_rows != batch.num_rows:
            raise FilterError(
                f"a row to write does not match {sql!r}: an overwrite of the rows matching "
                "a condition writes only rows it would select. Nothing was published"
            )
        yield batch


def creation_spec(opts: SourceOptions) -> str:
    """The spec of the namespace a write creates: the ``spec`` option, else Spark's
    partitioning; neither is refused, so that forgetting the spec never silently
    creates an unpartitioned namespace (``spec ""`` asks for one)."""
    if opts.spec is not None:
        return opts.spec
    if opts.partition_by is not None:
        return opts.partition_by
    raise SpecError(
        f"{opts.root!r} is not a namespace yet and this write would create it, so it needs "
        'the partition spec: .option("spec", "year(ts), month(ts)") (in SQL: OPTIONS '
        "(spec '...')), or .partitionBy(...) for identity fields; "
        '.option("spec", "") creates an unpartitioned namespace'
    )


def _check_spec(root: str, snapshot: Snapshot, spec: str, asked: str) -> None:
    """Refuse a write whose spec text (the ``spec`` option, Spark's partitioning)
    differs from the namespace's current spec, naming both."""
    current = snapshot.current_spec
    wanted = parse_spec(spec, snapshot.schema, spec_id=current.spec_id)
    if wanted.describe(snapshot.schema) != current.describe(snapshot.schema):
        raise SpecError(
            f"{root!r} is partitioned by {current.describe(snapshot.schema)!r}, but the "
            f"write asks for {asked}: {wanted.describe(snapshot.schema)!r}; changing the "
            "spec through Spark is not supported"
        )


def _check_vector_sizes(opts: SourceOptions, snapshot: Snapshot, schema: StructType) -> None:
    """``<column>.arrow.fixed-size-list.size`` on an existing namespace must match its schema."""
    wanted = spark_to_arrow(schema, opts.vector_sizes)
    for name in opts.vector_sizes:
        f = next(f for f in wanted if f.name.lower() == name)
        have = snapshot.schema.field(f.name).type if snapshot.schema.has_field(f.name) else None
        if have is None or not have.equals(f.type):
            raise SchemaError(
                f"column {f.name!r} of {opts.root!r} is {have}, but the write asks for "
                f"{f.type} ({f.name}.arrow.fixed-size-list.size); changing a column's type "
                "through Spark is not supported"
            )
