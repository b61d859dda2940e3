"""Batch k-NN from Spark: ``lps.search(spark, root, queries_df, k, ...)``.

Planned once on the driver, like a read (``spark.planning``):

1. the request is checked (k, column, metric, probes, the queries' columns);
2. one ``__manifest`` snapshot is pinned and the filter prunes partitions with
   ``operations.read.scan.Scan``, exactly as the core ``ns.search`` does; each
   remaining leaf keeps the version that snapshot pins and its residual filter;
3. the leaves are packed into groups of about equal row counts.

Spark then runs one task per (leaf group, partition of ``queries_df``): the
Cartesian product of the groups and the queries. A task opens its leaves at the
pinned versions and searches them with the code the core search uses
(``search.query`` per leaf, prefiltered by the residual; ``search.api.vector_top_k``
merges the group's leaves per query). The candidates (k per query per group)
are grouped by query id and merged by ``search.merge.top_k``: the exact global top
k, with the core search's tie-breaking (distance, then the leaf's place in the
pinned ``__manifest`` rows, then the row id).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from lance_partitioned.catalog.leaf_open import open_pinned
from lance_partitioned.catalog.snapshot import Leaf
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.read.scan import Scan
from lance_partitioned.search import merge
from lance_partitioned.search.api import (
    check_k,
    check_probe_options,
    partition_columns,
    resolve_metric,
    resolve_refine,
    vector_column,
    vector_top_k,
)
from lance_partitioned.search.definitions import (
    SearchError,
    load_definitions,
    query_problem,
    vector_dimension,
)
from lance_partitioned.search.query import leaf_context
from lance_partitioned.spark.planning import load_snapshot
from lance_partitioned.spark.types import BatchConformer, arrow_to_spark, spark_arrow_schema

QUERY_ID = "query_id"
RESULT_COLUMNS = (QUERY_ID, "_distance", "_rank")
# Above this many selected leaves the driver does not open each one to count its
# rows: leaves are dealt round-robin into groups instead.
MAX_LEAVES_TO_COUNT = 2000


@dataclass(frozen=True)
class SearchTarget:
    """One leaf a task searches: where, at which pinned version, with which prefilter."""

    uri: str
    leaf: Leaf
    ordinal: int  # place in the pinned __manifest rows: the tie-break after the distance
    filter_sql: str | None
    partition_values: tuple[Any, ...]


@dataclass(frozen=True)
class SearchPlan:
    """What the driver planned; everything a task needs, and nothing that reads __manifest."""

    root: str
    manifest_version: int
    partitions_total: int
    partitions_scanned: int
    groups: tuple[tuple[SearchTarget, ...], ...]
    schema: Schema  # the namespace schema: leaf columns are found by field id
    columns: tuple[str, ...]  # output columns
    output_schema: pa.Schema  # their Arrow types in the namespace
    partition_fields: tuple[pa.Field, ...]
    filter_columns: tuple[str, ...]
    column: str  # the vector column
    dimension: int
    metric: str
    k: int
    nprobes: int | None
    refine_factor: int | None
    storage_options: dict[str, str] | None

    def as_dict(self) -> dict[str, Any]:
        """Plain-data form: the pruning numbers and the task layout."""
        return {
            "root": self.root,
            "manifest_version": self.manifest_version,
            "partitions_total": self.partitions_total,
            "partitions_scanned": self.partitions_scanned,
            "groups": len(self.groups),
            "leaves_per_group": [len(g) for g in self.groups],
            "column": self.column,
            "metric": self.metric,
        }


def _group_leaves(
    targets: list[SearchTarget], rows: list[int] | None, n: int
) -> list[list[SearchTarget]]:
    """``n`` groups of about equal rows (largest leaf first into the lightest group)."""
    n = max(1, min(n, len(targets)))
    groups: list[list[SearchTarget]] = [[] for _ in range(n)]
    if rows is None:
        for i, t in enumerate(targets):
            groups[i % n].append(t)
    else:
        heap = [(0, g) for g in range(n)]
        for i in sorted(range(len(targets)), key=lambda i: (-rows[i], i)):
            load, g = heapq.heappop(heap)
            groups[g].append(targets[i])
            heapq.heappush(heap, (load + rows[i], g))
    # manifest order inside a group (leaf ordinals ascending), for readable plans
    return [sorted(g, key=lambda t: t.ordinal) for g in groups if g]


def plan_search(
    root: str,
    k: int,
    *,
    column: str | None = None,
    filter: Any = None,
    columns: Sequence[str] | None = None,
    metric: str | None = None,
    nprobes: int | None = None,
    refine_factor: int | None = None,
    storage_options: dict[str, str] | None = None,
    version: int | str | None = None,
    tasks: int = 8,
) -> SearchPlan:
    """Check the request, pin one snapshot, prune with ``filter`` and group the leaves.

    Pruning is the core search's (``Scan(snapshot, filter, columns).leaves``).
    Raises ``SearchError`` / ``ColumnNotFoundError`` before anything is read.
    """
    k = check_k(k)
    check_probe_options(nprobes, refine_factor)
    if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks <= 0:
        raise SearchError(f"tasks must be a positive integer, got {tasks!r}")
    snapshot = load_snapshot(str(root), version, storage_options)
    defs = load_definitions(snapshot)
    schema = snapshot.schema
    vcol = vector_column(schema, column)
    dim = vector_dimension(schema.field(vcol).type)
    assert dim is not None  # vector_column checked it
    resolved_metric = resolve_metric(defs, schema, vcol, metric)
    scan = Scan(snapshot, filter, columns)
    out_names = [f.name for f in scan.output_schema]
    clash = sorted(set(out_names) & set(RESULT_COLUMNS))
    if clash:
        raise SearchError(
            f"column {clash[0]!r} clashes with a result column of the Spark search "
            f"{RESULT_COLUMNS}; leave it out of columns="
        )
    leaves = scan.leaves
    fields, values = partition_columns(snapshot, leaves)
    targets = [
        SearchTarget(
            snapshot.leaf_uri(leaf.location),
            leaf,
            i,
            scan.leaf_filter(leaf),
            tuple(values[i]),
        )
        for i, leaf in enumerate(leaves)
    ]
    rows = None
    if 1 < len(leaves) <= MAX_LEAVES_TO_COUNT and tasks > 1:
        # row counts (from the pinned versions' metadata) balance the groups
        with ThreadPoolExecutor(8) as pool:
            rows = list(pool.map(lambda lf: snapshot.open_leaf(lf).count_rows(), leaves))
    total = len(snapshot.leaf_table()) if scan.manifest_sql else len(leaves)
    return SearchPlan(
        root=snapshot.manifest.root,
        manifest_version=snapshot.version,
        partitions_total=total,
        partitions_scanned=len(leaves),
        groups=tuple(tuple(g) for g in _group_leaves(targets, rows, tasks)),
        schema=schema,
        columns=tuple(out_names),
        output_schema=scan.output_schema,
        partition_fields=tuple(fields),
        filter_columns=tuple(scan.filter_columns),
        column=vcol,
        dimension=dim,
        metric=resolved_metric,
        k=k,
        nprobes=nprobes,
        refine_factor=resolve_refine(defs, schema, vcol, refine_factor),
        storage_options=storage_options,
    )


def _query_vectors(plan: SearchPlan, ids: list[Any], vectors: list[Any]) -> np.ndarray:
    """The task's query vectors as a 2-D float32 array; SearchError naming a bad query."""
    for qid, v in zip(ids, vectors, strict=True):
        if v is None:
            raise SearchError(f"query {qid!r} has no vector (NULL)")
        if len(v) != plan.dimension:
            raise SearchError(
                f"query {qid!r}: query vector has dimension {len(v)}, but column "
                f"{plan.column!r} has dimension {plan.dimension}"
            )
        if any(x is None for x in v):
            raise SearchError(f"query {qid!r}: the query vector holds NULL values")
    arr = np.asarray(vectors, np.float32).reshape(len(vectors), plan.dimension)
    if (problem := query_problem(arr, plan.metric)) is not None:
        raise SearchError(f"query {ids[problem[0]]!r}: {problem[1]}")
    return arr


def search_group(plan: SearchPlan, group: int, queries: pa.Table) -> pa.Table:
    """Run in a task: the top ``k`` of one leaf group for each query of ``queries``.

    ``queries`` has ``query_id`` and ``_lp_query`` (list<float>). The result has
    ``query_id``, the output columns, the partition columns, ``_distance``,
    ``_lp_leaf`` and ``_rowid``: k candidates per query for the global merge.
    """
    targets = plan.groups[group]
    ids = queries.column(QUERY_ID).to_pylist()
    qs = _query_vectors(plan, ids, queries.column("_lp_query").to_pylist())

    def context(t: SearchTarget):
        ds = open_pinned(t.uri, t.leaf, plan.storage_options)
        return leaf_context(
            ds,
            plan.schema,
            t.leaf,
            t.ordinal,
            list(plan.columns),
            t.filter_sql,
            plan.filter_columns,
        )

    with ThreadPoolExecutor(max(1, min(8, len(targets)))) as pool:
        contexts = list(pool.map(context, targets))
    best = vector_top_k(
        contexts,
        plan.schema,
        plan.output_schema,
        plan.column,
        qs,
        plan.k,
        plan.metric,
        plan.nprobes,
        plan.refine_factor,
    )
    # query_index (position in this task's queries) -> the caller's query id
    out = best.drop_columns(["query_index"]).add_column(
        0, QUERY_ID, queries.column(QUERY_ID).take(best.column("query_index"))
    )
    by_ordinal = {t.ordinal: t.partition_values for t in targets}
    ordinals = out.column("_lp_leaf").to_pylist()
    for i, f in enumerate(plan.partition_fields):
        out = out.append_column(f, pa.array([by_ordinal[o][i] for o in ordinals], f.type))
    # Spark has no uint64; Lance row ids (fragment << 32 | offset) fit an int64
    return out.set_column(
        out.schema.get_field_index("_rowid"), "_rowid", out.column("_rowid").cast(pa.int64())
    )


def _check_queries(queries_df: DataFrame, id_column: str, query_column: str | None) -> str:
    """The vector column of ``queries_df``; SearchError naming what is wrong."""
    fields = {f.name: f for f in queries_df.schema.fields}
    if id_column not in fields:
        raise SearchError(
            f"queries_df has no query id column {id_column!r} (pass id_column=); "
            f"its columns are {list(fields)}"
        )
    vectors = [
        n
        for n, f in fields.items()
        if isinstance(f.dataType, ArrayType)
        and isinstance(f.dataType.elementType, (FloatType, DoubleType))
    ]
    if query_column is None:
        if len(vectors) != 1:
            raise SearchError(
                f"pass query_column=: queries_df has {len(vectors)} array<float> columns "
                f"({vectors or 'none'})"
            )
        return vectors[0]
    if query_column not in fields:
        raise SearchError(
            f"queries_df has no column {query_column!r}; its columns are {list(fields)}"
        )
    if query_column not in vectors:
        raise SearchError(
            f"queries_df column {query_column!r} is {fields[query_column].dataType.simpleString()}, "
            "not array<float> or array<double>"
        )
    return query_column


def _result_schemas(plan: SearchPlan, id_type: Any) -> tuple[StructType, StructType]:
    """The Spark schemas of the result and of the per-task candidates (``_lp_leaf``, ``_rowid``
    added for the exact merge)."""
    data_fields = list(arrow_to_spark(plan.output_schema).fields) + list(
        arrow_to_spark(pa.schema(list(plan.partition_fields))).fields
    )
    result = StructType(
        [
            StructField(QUERY_ID, id_type, True),
            *data_fields,
            StructField("_distance", DoubleType(), True),
            StructField("_rank", IntegerType(), False),
        ]
    )
    candidates = StructType(
        [
            *result.fields[:-1],
            StructField("_lp_leaf", IntegerType(), False),
            StructField("_rowid", LongType(), False),
        ]
    )
    return result, candidates


def _task_functions(
    plan: SearchPlan, candidate_arrow: pa.Schema, result_arrow: pa.Schema
) -> tuple[
    Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    Callable[[pa.Table], pa.Table],
]:
    """The functions Spark runs: the search of (leaf group, queries) tasks
    (``mapInArrow``) and the exact merge of one query's candidates (``applyInArrow``)."""

    def search_tasks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        tables = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not tables:
            return
        table = pa.concat_tables(tables)
        conform = BatchConformer(candidate_arrow)
        for g in sorted(set(table.column("_lp_group").to_pylist())):
            mine = table.filter(pc.equal(table.column("_lp_group"), g))
            hits = search_group(plan, g, mine)
            for batch in hits.to_batches():
                yield conform(batch)

    def merge_query(table: pa.Table) -> pa.Table:
        best = merge.top_k([table], plan.k, "_distance", False, table.schema)
        best = best.append_column("_rank", pa.array(range(1, best.num_rows + 1), pa.int32()))
        return pa.Table.from_batches(
            [BatchConformer(result_arrow)(b) for b in best.to_batches()], schema=result_arrow
        )

    return search_tasks, merge_query


def search(
    spark: SparkSession,
    root: str,
    queries_df: DataFrame,
    k: int = 10,
    *,
    column: str | None = None,
    filter: Any = None,
    columns: Sequence[str] | None = None,
    metric: str | None = None,
    nprobes: int | None = None,
    refine_factor: int | None = None,
    storage_options: dict[str, str] | None = None,
    version: int | str | None = None,
    id_column: str = QUERY_ID,
    query_column: str | None = None,
    tasks: int | None = None,
) -> DataFrame:
    """Batch k-NN: the exact global top ``k`` rows of the namespace for every query.

    ``queries_df`` holds one query per row: an id column (``id_column``, default
    ``query_id``, any type; ids should be unique, rows sharing an id are one
    query's candidates merged) and a vector column (``query_column``, default the
    only ``array<float>``/``array<double>`` column) of the dimension of the
    namespace's vector column ``column`` (default: its only vector column).

    Returns a DataFrame with ``query_id`` (the id, its type kept), the selected
    ``columns`` (default all; a vector column reads as ``array<float>``), one
    ``partition_field_<id>`` column per partition field, ``_distance`` and
    ``_rank`` (1 = nearest). Rows are not ordered: order by ``query_id, _rank``.
    Queries with no match (a filter matching no row) have no rows.

    ``filter`` prunes partitions through ``__manifest`` on the driver, exactly as
    ``ns.search`` and ``scan`` do, and the residual runs inside Lance as a
    prefilter. The search is planned here, on the driver: the snapshot
    (``version``, default the latest) is pinned now, and every task reads each
    leaf at the version that snapshot pins, whenever the DataFrame is evaluated.
    ``metric``, ``nprobes`` and ``refine_factor`` are ``ns.search``'s.

    Tasks: one per (group of leaves, partition of ``queries_df``); ``tasks``
    groups (default the session's default parallelism) of about equal row
    counts. Bad arguments raise ``SearchError`` here; a query vector of the wrong
    dimension or a NULL one fails the job with a ``SearchError`` naming the query.
    """
    default_tasks = max(1, spark.sparkContext.defaultParallelism)
    plan = plan_search(
        root,
        k,
        column=column,
        filter=filter,
        columns=columns,
        metric=metric,
        nprobes=nprobes,
        refine_factor=refine_factor,
        storage_options=storage_options,
        version=version,
        tasks=default_tasks if tasks is None else tasks,
    )
    qcol = _check_queries(queries_df, id_column, query_column)
    result, candidates = _result_schemas(plan, queries_df.schema[id_column].dataType)
    if not plan.groups:
        return spark.createDataFrame([], result)

    queries = queries_df.select(
        F.col(id_column).alias(QUERY_ID), F.col(qcol).cast("array<float>").alias("_lp_query")
    )
    n = len(plan.groups)
    groups = spark.range(0, n, 1, n).withColumnRenamed("id", "_lp_group")
    # A Cartesian product (not a broadcast loop join): one task per leaf group and
    # partition of the queries, whichever side is smaller.
    work = groups.hint("shuffle_replicate_nl").crossJoin(queries)
    search_tasks, merge_query = _task_functions(
        plan, spark_arrow_schema(candidates), spark_arrow_schema(result)
    )
    found = work.mapInArrow(search_tasks, candidates)
    return found.groupBy(QUERY_ID).applyInArrow(merge_query, result)
