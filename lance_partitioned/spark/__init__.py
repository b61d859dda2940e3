"""PySpark integration: a partitioned namespace as a Spark source and sink.

    from lance_partitioned import spark as lps
    spark = lps.local_session()             # or your own session, then lps.register(spark)
    df.write.format("lance_partitioned").option("spec", "year(ts), country").mode("append").save(root)
    spark.read.format("lance_partitioned").load(root)                    # whole namespace
    spark.read.format("lance_partitioned").option("filter", "country = 'US'").load(root)  # pruned
    spark.sql(f"CREATE TEMPORARY VIEW t USING lance_partitioned OPTIONS (root '{root}')")
    lps.plan_info(spark, root, "ts >= '2025-01-01'")   # partitions scanned / total
    lps.read_arrow(spark, root, columns=["id"], filter="country = 'US'")
    lps.search(spark, root, queries_df, k=10, filter="tenant = 'acme'")  # batch k-NN
    lps.stop_session(spark)                 # stops Spark *and* its JVM

Spark's own filters prune only with ``option("pushFilters", "true")``, in a session
with the extension that gives every scan its own read plan (``local_session`` loads
it; for your own session, ``extension_conf()``): PySpark 4.3 shares one read plan
among the scans of a relation (see ``lance_partitioned.spark.extension``). Options
are documented in ``lance_partitioned.spark.options``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lance_partitioned.spark.datasource import NAME, LancePartitionedDataSource, projected_schema
from lance_partitioned.spark.extension import EXTENSION_CLASS, extension_active, extension_conf
from lance_partitioned.spark.options import install_log_redaction
from lance_partitioned.spark.planning import (
    DEFAULT_MIN_TASKS,
    DEFAULT_ROWS_PER_TASK,
    ReadOptions,
    load_snapshot,
    plan_read,
    read_task,
)
from lance_partitioned.spark.refresh import install as install_refresh_hook
from lance_partitioned.spark.refresh import refresh
from lance_partitioned.spark.search import plan_search, search
from lance_partitioned.spark.session import local_session, stop_session
from lance_partitioned.spark.types import (
    UnsupportedTypeError,
    arrow_to_spark,
    spark_arrow_schema,
    spark_to_arrow,
)

log = logging.getLogger(__name__)

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
OVERWRITE_MODE_CONF = "spark.sql.sources.partitionOverwriteMode"


def register(spark: SparkSession) -> None:
    """Register the ``lance_partitioned`` source and turn on Python filter pushdown.

    Also makes this session's temporary views see the writes made through Spark
    (``lance_partitioned.spark.refresh``), and keeps storage secrets passed as
    ``storage.<key>`` options out of py4j's DEBUG log of driver-JVM commands.
    Warns when the session lacks the extension ``pushFilters`` needs
    (``extension_conf()``): its filters then all stay with Spark.
    """
    install_log_redaction()
    spark.dataSource.register(LancePartitionedDataSource)
    if not extension_active(spark):
        log.warning(
            "this Spark session was started without %s, so pushFilters cannot prune: "
            "Spark applies every filter itself. Start sessions with "
            "lance_partitioned.spark.extension_conf() (spark.sql.extensions and "
            "spark.driver.extraClassPath), as local_session() does",
            EXTENSION_CLASS,
        )
    try:
        install_refresh_hook(spark)
    except Exception as exc:  # e.g. no writable temp dir: reads and writes still work
        log.warning(
            "could not install the view refresh hook (%s): after a write, re-create "
            "temporary views or call lance_partitioned.spark.refresh(spark)",
            exc,
        )
    try:
        spark.conf.set(PUSHDOWN_CONF, "true")
    except Exception as exc:  # e.g. a locked-down session; reads still work, unpruned
        log.warning(
            "could not set %s=true (%s): filters will not be pushed down", PUSHDOWN_CONF, exc
        )


def write(
    df: DataFrame,
    root: str,
    mode: str = "append",
    spec: str | None = None,
    **options: Any,
) -> None:
    """``df.write.format("lance_partitioned")`` that also honours the session's
    ``spark.sql.sources.partitionOverwriteMode`` (Spark does not pass session
    confs to Python data sources, so the raw writer needs the option instead)."""
    writer = df.write.format(NAME).mode(mode)
    if spec:
        writer = writer.option("spec", spec)
    if "partitionOverwriteMode" not in options:
        conf_mode = df.sparkSession.conf.get(OVERWRITE_MODE_CONF, "static")
        writer = writer.option("partitionOverwriteMode", str(conf_mode).lower())
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save(root)


def plan_info(
    spark: SparkSession | None,
    root: str,
    filter: Any = None,
    *,
    version: int | str | None = None,
    columns: Sequence[str] | None = None,
    storage_options: dict[str, str] | None = None,
    min_partitions: int = DEFAULT_MIN_TASKS,
) -> dict[str, Any]:
    """How a read with ``filter`` would be planned: partitions scanned / total, tasks.

    ``filter`` is SQL text, a pyarrow/DataFusion expression or our AST. ``spark``
    is unused (planning needs only the namespace) and may be None.
    """
    del spark
    snapshot = load_snapshot(str(root), version, storage_options)
    plan, _ = plan_read(snapshot, filter, columns, min_tasks=min_partitions)
    return plan.as_dict()


def read_scan_log(path: str) -> list[dict[str, Any]]:
    """The entries the ``scanLog`` option (or ``LANCE_PARTITIONED_SCAN_LOG``) recorded, oldest first."""
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except FileNotFoundError:
        return []


def read_arrow(
    spark: SparkSession,
    root: str,
    columns: Sequence[str] | None = None,
    filter: Any = None,
    *,
    version: int | str | None = None,
    batch_size: int | None = None,
    storage_options: dict[str, str] | None = None,
    rows_per_task: int = DEFAULT_ROWS_PER_TASK,
) -> DataFrame:
    """A DataFrame of the namespace with projection and filter applied at the source.

    Planned here on the driver (one pinned snapshot), then read by ``mapInArrow``
    over one task descriptor per input partition. The filter runs inside Lance with
    Lance's SQL semantics; Spark does not evaluate it again.
    """
    snapshot = load_snapshot(str(root), version, storage_options)
    arrow = projected_schema(snapshot, tuple(columns) if columns else None)
    schema = arrow_to_spark(arrow)
    min_tasks = max(1, spark.sparkContext.defaultParallelism)
    # At least one task per core, however small the data (callers such as the
    # join planner rely on the scan being spread out).
    plan, scan = plan_read(
        snapshot,
        filter,
        arrow.names,
        rows_per_task=rows_per_task,
        min_tasks=min_tasks,
        min_rows_per_task=1,
    )
    if not plan.tasks:
        return spark.createDataFrame([], schema)
    tasks = plan.tasks
    options = ReadOptions(
        columns=tuple(arrow.names),
        target=spark_arrow_schema(schema),
        schema=scan.snapshot.schema,
        filter_columns=tuple(scan.filter_columns),
        batch_size=batch_size,
        storage_options=storage_options,
    )

    def read_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column(0).to_pylist():
                yield from read_task(tasks[i], options)

    n = len(tasks)
    return spark.range(0, n, 1, n).mapInArrow(read_tasks, schema)


# Storage partitioned join; imported last because it uses read_arrow above.
from lance_partitioned.spark.storage_partitioned_join import (  # noqa: E402
    Side,
    join,
    join_explain,
    shuffle_write_bytes,
)

__all__ = [
    "Side",
    "join",
    "join_explain",
    "shuffle_write_bytes",
    "NAME",
    "LancePartitionedDataSource",
    "UnsupportedTypeError",
    "arrow_to_spark",
    "extension_conf",
    "local_session",
    "plan_info",
    "read_arrow",
    "plan_search",
    "read_scan_log",
    "register",
    "search",
    "refresh",
    "spark_to_arrow",
    "stop_session",
    "write",
]
