"""Storage partitioned join in Spark: one task per partition group, no shuffle.

    from lance_partitioned.spark.storage_partitioned_join import Side, join, join_explain
    df = join(spark, Side(orders_root, filter="o_orderdate >= '1995-01-01'"), customers_root,
              on=[("customer_id", "id")], how="left")
    print(join_explain(orders_root, customers_root, on=[("customer_id", "id")]))

A PySpark Python data source cannot report its partitioning (DESIGN §4), so
Spark alone always shuffles both sides of a join. Here the planning of
``operations.join`` runs on the driver, and the groups become the input
partitions of ``spark.range(0, n, 1, n).mapInArrow(...)``: task ``i`` reads the
leaves of group ``i`` at their pinned versions and hash-joins them locally.
Range and MapInArrow have no ``Exchange``, so the SPJ part writes no shuffle
bytes. Leaves of spec versions outside the group key (or whole joins whose
partitioning is incompatible) go through an ordinary Spark join, and the parts
are combined with ``unionByName`` (which adds no exchange either).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lance_partitioned.catalog.snapshot import Leaf
from lance_partitioned.errors import SPJNotPossibleError
from lance_partitioned.operations.join import (
    DEFAULT_MAX_GROUP_ROWS,
    FallbackPart,
    JoinPlan,
    Side,
    SideLike,
    SidePlan,
    explain_join,
    plan_join,
)
from lance_partitioned.spark.types import BatchConformer, arrow_to_spark, spark_arrow_schema

log = logging.getLogger(__name__)

_SPARK_HOW = {
    "inner": "inner",
    "left": "left",
    "right": "right",
    "full": "full",
    "semi": "left_semi",
    "anti": "left_anti",
}


def join(
    spark: SparkSession,
    left: SideLike,
    right: SideLike,
    on: Any,
    how: str = "inner",
    *,
    suffixes: tuple[str, str] | None = None,
    max_group_rows: int = DEFAULT_MAX_GROUP_ROWS,
    require_spj: bool = False,
) -> DataFrame:
    """Join two partitioned namespaces partition-wise; an ordinary DataFrame comes back.

    ``left``/``right``: a ``Side(source, filter=None, columns=None, version=None)``,
    a root path, an open ``PartitionedNamespace``, or ``(source, filter[, columns])``.
    ``on``: a column name, names present on both sides, or ``(left, right)`` pairs.
    ``how``: inner, left, right, full (outer), semi (left_semi), anti (left_anti).

    Output columns follow Spark's ``df.join``: same-named keys once and first
    (from the right for a right join, coalesced for a full join), then the left
    columns, then the right ones (none for semi/anti). Other names present on
    both sides need ``suffixes=("_l", "_r")``. NULL keys never match.

    Both snapshots are pinned here, on the driver. Groups larger than
    ``max_group_rows`` (estimated) are joined in hash sub-partitions that spill
    to local disk. Where partitioning is incompatible the join (or only the
    incompatible part of it) falls back to a Spark shuffle join and the reason
    is logged; with ``require_spj=True`` that raises ``SPJNotPossibleError``.
    """
    plan = plan_join(left, right, on, how, suffixes=suffixes, max_group_rows=max_group_rows)
    if require_spj and plan.fallback:
        raise SPJNotPossibleError(
            "part of this join needs a shuffle:\n" + "\n".join(p.why for p in plan.fallback)
        )
    return plan_to_dataframe(spark, plan)


def join_explain(
    left: SideLike, right: SideLike, on: Any, how: str = "inner", **options: Any
) -> str:
    """Matched partition groups and the reason for any fallback (needs no Spark session)."""
    return explain_join(left, right, on, how, **options)


def plan_to_dataframe(spark: SparkSession, plan: JoinPlan) -> DataFrame:
    """The DataFrame computing ``plan``: SPJ tasks, plus Spark joins for fallback parts."""
    schema = arrow_to_spark(plan.output_schema)
    frames: list[DataFrame] = []
    if plan.groups:
        frames.append(_group_tasks_frame(spark, plan))
    if plan.fallback:
        level = logging.WARNING if plan.is_full_fallback else logging.INFO
        log.log(
            level,
            "storage partitioned join: %d part(s) fall back to a Spark shuffle join: %s",
            len(plan.fallback),
            "; ".join([p.why for p in plan.fallback] + plan.reasons),
        )
    for part in plan.fallback:
        frames.append(_fallback_frame(spark, plan, part))
    log.info(
        "storage partitioned join: %d group task(s), %d fallback part(s)",
        len(plan.groups),
        len(plan.fallback),
    )
    if not frames:
        return spark.createDataFrame([], schema)
    return reduce(lambda a, b: a.unionByName(b), frames)


def _group_tasks_frame(spark: SparkSession, plan: JoinPlan) -> DataFrame:
    """One input partition per group; each task joins its group's leaves locally."""
    schema = arrow_to_spark(plan.output_schema)
    target = spark_arrow_schema(schema)
    runner = plan.runner()
    groups = plan.groups

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        conform = BatchConformer(target)
        for batch in batches:
            for i in batch.column(0).to_pylist():
                for out in runner.run(groups[i]):
                    if out.num_rows:
                        yield conform(out)

    n = len(groups)
    return spark.range(0, n, 1, n).mapInArrow(run, schema)


def _read_leaves(
    spark: SparkSession, side_plan: SidePlan, leaves: Sequence[Leaf] | None
) -> DataFrame:
    """A side's read columns from ``leaves`` (None: every selected leaf) at the pinned version."""
    if leaves is None:
        from lance_partitioned.spark.map_read import read_arrow

        return read_arrow(
            spark,
            side_plan.root,
            columns=list(side_plan.read_columns),
            filter=side_plan.filter,
            version=side_plan.snapshot.version,
            storage_options=side_plan.snapshot.manifest.storage_options,
        )
    schema = arrow_to_spark(side_plan.arrow_schema)
    if not leaves:
        return spark.createDataFrame([], schema)
    target = spark_arrow_schema(schema)
    reader = side_plan.reader()
    chosen = list(leaves)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        conform = BatchConformer(target)
        for batch in batches:
            for i in batch.column(0).to_pylist():
                for out in reader.batches([chosen[i]]):
                    if out.num_rows:
                        yield conform(out)

    n = len(chosen)
    return spark.range(0, n, 1, n).mapInArrow(read, schema)


def _fallback_frame(spark: SparkSession, plan: JoinPlan, part: FallbackPart) -> DataFrame:
    """A plain Spark join of two leaf subsets, shaped exactly like the SPJ output."""
    # both sides' columns renamed apart, so same-named columns cannot clash in the join
    left_columns, right_columns = plan.left.read_columns, plan.right.read_columns
    left_alias = {c: f"__l{i}" for i, c in enumerate(left_columns)}
    right_alias = {c: f"__r{i}" for i, c in enumerate(right_columns)}
    left_df = _read_leaves(spark, plan.left, part.left).toDF(*[left_alias[c] for c in left_columns])
    right_df = _read_leaves(spark, plan.right, part.right).toDF(
        *[right_alias[c] for c in right_columns]
    )
    condition = reduce(
        lambda a, b: a & b, [F.col(left_alias[a]) == F.col(right_alias[b]) for a, b in plan.on]
    )
    left_df, right_df = _with_strategy(spark, plan, part, left_df, right_df)
    joined = left_df.join(right_df, condition, _SPARK_HOW[plan.how])
    schema = arrow_to_spark(plan.output_schema)
    exprs: list[Column] = []
    for col, spark_field in zip(plan.output, schema.fields, strict=True):
        spark_type = spark_field.dataType
        if col.origin == "left":
            value = F.col(left_alias[col.left])
        elif col.origin == "right":
            value = F.col(right_alias[col.right])
        else:
            value = F.coalesce(
                F.col(left_alias[col.left]).cast(spark_type),
                F.col(right_alias[col.right]).cast(spark_type),
            )
        exprs.append(value.cast(spark_type).alias(col.name))
    return joined.select(*exprs)


def _estimated_bytes(side_plan: SidePlan, leaves: Sequence[Leaf] | None) -> int | None:
    """Rows (Lance metadata, before filters) times a rough row width; None if unknown."""
    chosen = side_plan.leaves if leaves is None else leaves
    rows = [side_plan.rows.get(lf.object_id) for lf in chosen]
    if any(r is None for r in rows):
        return None
    width = 0
    for f in side_plan.arrow_schema:
        try:
            width += max(1, f.type.bit_width // 8)
        except ValueError:  # variable width
            width += 32
    return sum(rows) * width  # type: ignore[arg-type]


def _with_strategy(
    spark: SparkSession,
    plan: JoinPlan,
    part: FallbackPart,
    left_df: DataFrame,
    right_df: DataFrame,
) -> tuple[DataFrame, DataFrame]:
    """Join hints standing in for the statistics our readers cannot report.

    ``mapInArrow`` over a small ``range`` looks tiny to Spark's planner, which
    would then broadcast a side of any size. With the planner's own threshold
    applied to our estimates, a small side is broadcast and large sides get a
    sort-merge join, as Spark would choose with true statistics.
    """
    threshold = int(spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())
    left_bytes = _estimated_bytes(plan.left, part.left)
    right_bytes = _estimated_bytes(plan.right, part.right)

    def small(size: int | None) -> bool:
        return threshold > 0 and size is not None and size <= threshold

    # Spark can broadcast the right side except for right/full outer joins, the left
    # side only for inner and right outer joins.
    if small(right_bytes) and plan.how in ("inner", "left", "semi", "anti"):
        return left_df, right_df.hint("broadcast")
    if small(left_bytes) and plan.how in ("inner", "right"):
        return left_df.hint("broadcast"), right_df
    return left_df.hint("merge"), right_df


def shuffle_write_bytes(spark: SparkSession) -> int:
    """Shuffle bytes written by every stage of this application so far (Spark's status store).

    Take the difference around an action to measure it; the listener bus is
    drained first so that finished stages are counted.
    """
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    scala_context = spark.sparkContext._jsc.sc()
    scala_context.listenerBus().waitUntilEmpty()
    # AppStatusStore.stageList(statuses=null (all), details, withSummaries, quantiles, taskStatus):
    # Scala default arguments do not exist for py4j, so all five are passed.
    stages = scala_context.statusStore().stageList(
        None, False, False, gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList()
    )
    total, stage_iterator = 0, stages.iterator()
    while stage_iterator.hasNext():
        total += int(stage_iterator.next().shuffleWriteBytes())
    return total


def executed_plan(df: DataFrame) -> str:
    """The physical plan Spark runs, as text (look for ``Exchange`` in it)."""
    return df._jdf.queryExecution().executedPlan().toString()


__all__ = [
    "SPJNotPossibleError",
    "Side",
    "executed_plan",
    "join",
    "join_explain",
    "plan_to_dataframe",
    "shuffle_write_bytes",
]
