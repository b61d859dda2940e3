"""A namespace read into a DataFrame by ``mapInArrow``: ``read_arrow``.

Planned on the driver (one pinned snapshot, ``spark.planning``), read by tasks,
one per input partition, each reading its task descriptors with ``read_task``.
The storage partitioned join reads its sides this way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lance_partitioned.spark.datasource import projected_schema
from lance_partitioned.spark.planning import (
    DEFAULT_ROWS_PER_TASK,
    ReadOptions,
    load_snapshot,
    plan_read,
    read_task,
)
from lance_partitioned.spark.types import arrow_to_spark, spark_arrow_schema


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
