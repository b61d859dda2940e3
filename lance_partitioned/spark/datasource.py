"""The ``lance_partitioned`` Python data source: reader side (the writer is in ``sink``).

Where each piece runs (PySpark 4.3):
- ``schema()``: a Python worker on the driver, at ``load()`` / view creation;
- ``reader()``, ``pushFilters()``, ``partitions()``: one planning worker on the
  driver. The reader pins the ``__manifest`` snapshot when it is created, so every
  input partition of one plan reads one version;
- ``read()``: executors, with the pickled reader (which holds no Lance handles).

**Pushed filters and PySpark's shared read plan.** PySpark 4.3 keeps the planned
read (partitions plus read function) in one slot on the relation's provider
(``PythonDataSourceV2.readInfo``). ``PythonScanBuilder.pushFilters`` stores the plan
made for its filters there, and every scan of the relation later reads the slot.
So when a read plan depends on the pushed filters:
- ``df.where(f).count()`` then ``df.count()`` counts only the rows matching ``f``;
- a query that scans one relation twice (self-join, scalar/``EXISTS``/``IN``
  subquery, ``UNION``, a view named twice) reads the plan of its last-planned scan
  in every scan, and Spark does not re-check accepted filters.
No Python code runs per scan at read time, so the source cannot tell scans apart.
The fix is in the JVM (``spark.extension``): an optimizer rule gives every scan of
a relation with ``pushFilters=true`` a provider of its own, marked with the option
``__isolatedScan``. The reader accepts pushed filters only on a marked relation;
otherwise it returns every filter to Spark and plans the whole namespace, which is
correct under any reuse. The ``filter`` option always prunes safely because it
belongs to the relation, not to the query.

Because the plan is cached per relation, a relation would also keep reading the
snapshot of its last planning after new writes (a scan the extension isolates
plans afresh, at the latest version; others reuse the slot). For temporary views, ``spark.refresh`` drops the cached
plan whenever a write through Spark commits, so a query after ``INSERT INTO v``
sees the insert; a DataFrame from ``load()`` keeps its snapshot: re-create it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    Filter,
    InputPartition,
)
from pyspark.sql.types import StructType

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import ColumnNotFoundError, SchemaError
from lance_partitioned.format.expressions import And, Expr
from lance_partitioned.operations.read.scan_filter import parse_any_filter
from lance_partitioned.spark import stream_source
from lance_partitioned.spark.filters import FilterTranslator
from lance_partitioned.spark.options import SourceOptions
from lance_partitioned.spark.planning import (
    DEFAULT_MIN_TASKS,
    MIN_ROWS_PER_TASK,
    ReadOptions,
    ReadPlan,
    ReadTask,
    load_snapshot,
    plan_read,
    read_task,
)
from lance_partitioned.spark.types import arrow_to_spark, spark_arrow_schema

log = logging.getLogger(__name__)

NAME = "lance_partitioned"


def projected_schema(snapshot: Snapshot, columns: tuple[str, ...] | None) -> pa.Schema:
    """The namespace schema restricted to ``columns`` (in that order), without metadata."""
    fields = [pa.field(f.name, f.type, f.nullable) for f in snapshot.schema.arrow]
    if columns is None:
        return pa.schema(fields)
    by_name = {f.name: f for f in fields}
    missing = [c for c in columns if c not in by_name]
    if missing:
        raise ColumnNotFoundError(
            f"option 'columns' names unknown column(s) {missing}; columns are {list(by_name)}",
            tuple(missing),
        )
    return pa.schema([by_name[c] for c in columns])


def record_scan(path: str | None, plan: ReadPlan) -> None:
    """Append one JSON line describing ``plan`` to ``path`` (best effort)."""
    log.info(plan.summary())
    if not path:
        return
    entry = dict(plan.as_dict(), time=time.time())
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, default=str) + "\n")
    except OSError as exc:
        log.warning("could not append to scan log %s: %s", path, exc)


def checked_columns(snapshot: Snapshot, schema: StructType, root: str) -> pa.Schema:
    """The namespace's fields that ``schema`` (Spark's view of the relation) names, in its
    order; a column it lacks, or holds with another type, raises SchemaError."""
    by_name = {f.name: f for f in projected_schema(snapshot, None)}
    wanted = []
    for sf in schema.fields:
        f = by_name.get(sf.name)
        if f is None:
            raise SchemaError(
                f"column {sf.name!r} is not in the namespace {root!r}; columns are {list(by_name)}"
            )
        ours = arrow_to_spark(pa.schema([f])).fields[0]
        if ours.dataType != sf.dataType or (ours.nullable and not sf.nullable):
            raise SchemaError(
                f"column {sf.name!r}: the given schema says {sf.dataType.simpleString()}"
                f"{'' if sf.nullable else ' NOT NULL'}, the namespace holds "
                f"{ours.dataType.simpleString()}{'' if ours.nullable else ' NOT NULL'}"
            )
        wanted.append(f)
    return pa.schema(wanted)


def unwritten_catalog_table(opts: SourceOptions) -> bool:
    """Whether ``opts`` read a catalog table whose first write has yet to create its
    namespace (no ``__manifest`` at its root): it reads as empty, as a Parquet table does.
    Only catalog tables: a view or ``load(root)`` of such a root fails, so that a mistyped
    root does not read as an empty table. Never writes."""
    if not opts.catalog_table or opts.version is not None or opts.timestamp_as_of is not None:
        return False
    return not Manifest(opts.root, opts.storage_options).present()


class LancePartition(InputPartition):
    """One input partition: a group of leaf fragments, and how to read them.

    The read options travel with each partition, not in the reader: PySpark
    pickles the reader for executors *before* it calls ``partitions()``.
    """

    def __init__(self, task: ReadTask, options: ReadOptions):
        super().__init__(task.index)
        self.task = task
        self.options = options


class LancePartitionedReader(DataSourceReader):
    """Plans one query: pushed filters, pruned partitions, fragment groups."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        self.opts = opts
        self.spark_schema = schema
        self._snapshot: Snapshot | None = None
        self.arrow_schema = spark_arrow_schema(schema)
        # The relation's own ``filter`` option; pushed Spark filters are ANDed to it.
        self.base_expr: Expr | None = None
        if not unwritten_catalog_table(opts):  # else: its declared columns, no rows
            self._snapshot = load_snapshot(
                opts.root, opts.version, opts.storage_options, opts.timestamp_as_of
            )
            self.arrow_schema = checked_columns(self._snapshot, schema, opts.root)
            self.base_expr = parse_any_filter(opts.filter, self._snapshot.schema.names)
        self.expr: Expr | None = self.base_expr

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_snapshot"] = None  # Lance handles stay on the driver
        return state

    def pushFilters(self, filters: list[Filter]) -> list[Filter]:  # noqa: N802 (Spark's name)
        """With ``pushFilters=true`` on a scan with a plan of its own (the extension's
        mark): accept the filters we translate exactly, return the rest.

        Otherwise return them all, so that the plan does not depend on the query
        and may serve any scan (see the module docstring for why).
        """
        if not (self.opts.push_filters and self.opts.isolated_scan):
            return list(filters)
        translation = FilterTranslator(self.arrow_schema).translate(filters)
        if translation.expr is not None:
            self.expr = (
                translation.expr
                if self.base_expr is None
                else And(self.base_expr, translation.expr)
            )
        return translation.rejected

    def partitions(self) -> list[InputPartition]:
        if self._snapshot is None:
            return []  # a catalog table before its first write
        columns = tuple(self.arrow_schema.names)
        plan, scan = plan_read(
            self._snapshot,
            self.expr,
            columns,
            rows_per_task=self.opts.rows_per_partition,
            min_tasks=self.opts.min_partitions or DEFAULT_MIN_TASKS,
            min_rows_per_task=1 if self.opts.min_partitions else MIN_ROWS_PER_TASK,
        )
        read_options = ReadOptions(
            columns=columns,
            target=spark_arrow_schema(self.spark_schema),
            schema=scan.snapshot.schema,
            filter_columns=tuple(scan.filter_columns),
            batch_size=self.opts.batch_size,
            storage_options=self.opts.storage_options,
        )
        record_scan(self.opts.scan_log, plan)
        return [LancePartition(t, read_options) for t in plan.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark substitutes InputPartition(None) when partitions() returned nothing.
        if not isinstance(partition, LancePartition):
            return iter(())
        return read_task(partition.task, partition.options)


class LancePartitionedDataSource(DataSource):
    """``spark.read.format("lance_partitioned").load(root)`` and ``df.write.format(...).save(root)``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        opts = SourceOptions.parse(self.options)
        snapshot = load_snapshot(
            opts.root, opts.version, opts.storage_options, opts.timestamp_as_of
        )
        columns = projected_schema(snapshot, opts.columns)
        return arrow_to_spark(stream_source.with_change_columns(columns, self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        stream_source.refuse_batch_change_feed(self.options)
        return LancePartitionedReader(SourceOptions.parse(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        return stream_source.LancePartitionedStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from lance_partitioned.spark.sink import plan_write

        return plan_write(SourceOptions.parse(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802 (Spark's name)
        from lance_partitioned.spark.stream_sink import plan_stream_write

        return plan_stream_write(SourceOptions.parse(self.options), schema, overwrite)
