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
    lps.compact(spark, root)                # maintenance on the executors, one commit
    lps.vacuum(spark, root, older_than=timedelta(days=1))  # also lps.cleanup
    lps.create_index(spark, root, "embedding", "IVF_PQ", num_partitions=16)
    lps.stop_session(spark)                 # stops Spark *and* its JVM

Spark's own filters prune partitions and run inside Lance (``pushFilters``, on by
default) in a session with the extension that gives every scan its own read plan
(``local_session`` loads it; for your own session, ``extension_conf()``): PySpark 4.3
shares one read plan among the scans of a relation (see
``lance_partitioned.spark.extension``); without it every filter stays with Spark. Options
are documented in ``lance_partitioned.spark.options``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from lance_partitioned.spark.datasource import NAME, LancePartitionedDataSource
from lance_partitioned.spark.extension import extension_conf
from lance_partitioned.spark.maintenance import (
    cleanup,
    compact,
    create_index,
    optimize_indexes,
    rewrite_partitions,
    vacuum,
)
from lance_partitioned.spark.map_read import read_arrow
from lance_partitioned.spark.merge import merge
from lance_partitioned.spark.planning import DEFAULT_MIN_TASKS, load_snapshot, plan_read
from lance_partitioned.spark.refresh import refresh
from lance_partitioned.spark.registration import register
from lance_partitioned.spark.search import plan_search, search
from lance_partitioned.spark.session import local_session, stop_session
from lance_partitioned.spark.types import UnsupportedTypeError, arrow_to_spark, spark_to_arrow

log = logging.getLogger(__name__)

OVERWRITE_MODE_CONF = "spark.sql.sources.partitionOverwriteMode"


def write(
    df: DataFrame,
    root: str,
    mode: str = "append",
    spec: str | None = None,
    **options: Any,
) -> None:
    """``df.write.format("lance_partitioned")`` that also honours the session's
    ``spark.sql.sources.partitionOverwriteMode`` (Spark does not pass session
    confs to Python data sources, so the raw writer needs the option instead).
    A write that creates the namespace needs ``spec`` (``""``: unpartitioned)."""
    writer = df.write.format(NAME).mode(mode)
    if spec is not None:
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
    "cleanup",
    "compact",
    "create_index",
    "optimize_indexes",
    "rewrite_partitions",
    "vacuum",
    "LancePartitionedDataSource",
    "UnsupportedTypeError",
    "arrow_to_spark",
    "extension_conf",
    "local_session",
    "merge",
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
