"""MERGE with a Spark DataFrame as the source, run on the executors.

``lps.merge(spark, source_df, root, on=[...])`` returns the same builder as
``ns.merge`` (``operations.change.merge``); ``execute`` runs it as one Spark job:

1. the source is hash-partitioned by the keys (``repartition(n, *on)``), so every
   key lives in exactly one task: a task's duplicate-key check is global and
   its unmatched rows are inserted by it alone;
2. each task plans the merge of its rows on the driver's snapshot
   (``plan_merge``: it opens only the partitions its keys map to when the keys
   determine the partition values, else it searches every partition's keys),
   writes the rows it produces as Lance files (a shared write job: new
   partitions are created by the commit, not by the task) and returns the row
   addresses it removes and the files it wrote, never the rows;
3. the driver publishes everything in one ``__manifest`` commit
   (``WriteJob.commit`` with removals). A concurrent commit makes the whole job
   run again on the latest version, up to the retry policy's tries.

A failed task fails the job and nothing is published (files already written
by other tasks are unreferenced; ``vacuum`` reclaims them).

``when_not_matched_by_source_delete`` needs every task's matches at once and is
refused here (use ``ns.merge`` on a pyarrow source).

Where the time goes: when ``LANCE_PARTITIONED_SPARK_TIMING`` names a file on the
driver as ``execute`` runs, every task appends one JSON line to it (phase
``merge_task``: seconds waiting for Spark's rows, in ``plan_merge`` and in the
write, wall and CPU, in total) and the driver one more (``merge_driver``: the
Spark job's seconds and the commit's). The driver passes the path to the tasks,
so the workers need not inherit the variable; a task on another machine writes
to that path there.

Spark SQL's ``MERGE INTO``, ``UPDATE`` and ``DELETE FROM`` cannot reach a Python
data source in PySpark 4.3 (its Python Data Source API has no row-level
operations); these calls are the equivalent.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import UnsupportedFeatureError
from lance_partitioned.operations.change.merge import (
    MergeBuilder,
    MergeResult,
    merge_info,
    plan_merge,
)
from lance_partitioned.operations.change.source import key_names, read_source
from lance_partitioned.operations.txn import leases
from lance_partitioned.operations.txn.driver import replanned
from lance_partitioned.operations.write.job import WriteJob, check_write_sizes
from lance_partitioned.operations.write.partition_writer import WrittenFiles, new_job_secret
from lance_partitioned.operations.write.publish import WriteMode
from lance_partitioned.spark.timing import TIMING_LOG_ENV, log_timing

PAYLOAD = "payload"  # the one binary column a merge task returns


class SparkMergeBuilder(MergeBuilder):
    """``MergeBuilder`` whose source is a Spark DataFrame, merged by Spark tasks.

    Example::

        (lps.merge(spark, changes_df, root, on=["o_orderkey"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute())
    """

    def __init__(
        self,
        source: DataFrame,
        root: str,
        on: str | Sequence[str],
        storage_options: dict[str, str] | None = None,
        tasks: int | None = None,
    ):
        manifest = Manifest(str(root), storage_options)
        super().__init__(manifest, lambda: Snapshot.load(manifest).schema, source, key_names(on))
        self._tasks = tasks

    def execute(self, **options: Any) -> MergeResult:
        """Run the merge on the executors and publish it in one commit; see the module doc.

        ``options`` are a write's (``max_buffer_bytes``, ``max_rows_per_file``), for
        every task's writer. Returns a ``MergeResult``.
        """
        self._check_clauses()
        if any(c.kind == "delete_by_source" for c in self._clauses):
            raise UnsupportedFeatureError(
                "when_not_matched_by_source_delete is not supported with a Spark source: "
                "every task would need every other task's matches; use ns.merge with a "
                "pyarrow source"
            )
        options = check_write_sizes(**options)
        return replanned(
            self._manifest,
            "spark merge",
            lambda snapshot, lease: self._run(snapshot, lease, options),
        )

    def _run(self, snapshot: Snapshot, lease: leases.Lease, options: dict[str, Any]) -> MergeResult:
        df: DataFrame = self._data  # type: ignore[assignment]
        secret = new_job_secret()
        tasks = self._tasks or df.sparkSession.sparkContext.defaultParallelism
        fn = _task_function(
            self._manifest.root,
            self._manifest.storage_options,
            snapshot.version,
            self._on,
            self._clauses,
            secret,
            options,
            os.environ.get(TIMING_LOG_ENV),
        )
        started = time.perf_counter()
        parts = df.repartition(tasks, *self._on).mapInArrow(fn, f"{PAYLOAD} binary").collect()
        job_seconds = time.perf_counter() - started
        written = WrittenFiles(snapshot.version)
        removals: dict[str, list[np.ndarray]] = {}
        inserted = updated = deleted = 0
        for row in parts:
            task_removals, task_written, counts = pickle.loads(row[PAYLOAD])
            written.merge(task_written)
            for oid, addresses in task_removals.items():
                removals.setdefault(oid, []).append(addresses)
            inserted, updated, deleted = (
                a + b for a, b in zip((inserted, updated, deleted), counts, strict=True)
            )
        merged = {oid: np.concatenate(parts_) for oid, parts_ in removals.items()}
        job = WriteJob(self._manifest, snapshot, WriteMode.APPEND, secret=secret, lease=lease)
        if not merged and not written.leaves:
            return MergeResult(snapshot.version, 0, 0, 0, 0)
        started, cpu = time.perf_counter(), time.process_time()
        published = job.commit(
            written,
            removals=merged,
            info=merge_info(self._on, self._clauses, inserted, updated, deleted),
        )
        assert published is not None
        log_timing(
            {
                "phase": "merge_driver",
                "job_seconds": job_seconds,
                "commit_seconds": time.perf_counter() - started,
                "commit_cpu_seconds": time.process_time() - cpu,
                "tasks": len(parts),
                "files": sum(len(w.fragments) for w in written.leaves.values()),
            }
        )
        touched = set(merged) | {lw.object_id for lw in written.leaves.values()}
        return MergeResult(published.version, inserted, updated, deleted, len(touched))


def _task_function(
    root: str,
    storage_options: dict[str, str] | None,
    version: int,
    on: list[str],
    clauses: Sequence[Any],
    secret: bytes,
    options: dict[str, Any],
    timing_log: str | None,
):
    """The function each Spark task runs on its share of the source (``mapInArrow``);
    with ``timing_log``, it appends where its time went to that file."""

    def merge_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # a few clock reads per task; logged only with a timing log
        marks = [_clocks()]
        rows = [b for b in batches if b.num_rows]
        if not rows:
            return
        marks.append(_clocks())
        manifest = Manifest(root, storage_options)
        snapshot = Snapshot.load(manifest, version, for_write=True)
        source = read_source(pa.Table.from_batches(rows), snapshot.schema, on)
        # fast=False: Lance's merge_insert would need the rows on the driver
        changes, counts = plan_merge(snapshot, source, clauses, fast=False)
        marks.append(_clocks())
        job = WriteJob(manifest, snapshot, WriteMode.APPEND, secret=secret)
        written = job.write(
            lambda writer: writer.write_all(changes.batches()), shared=True, **options
        )
        marks.append(_clocks())
        payload = pickle.dumps((changes.removals, written, counts.totals()))
        if timing_log:
            _log_task(timing_log, marks, source.num_rows, written)
        yield pa.RecordBatch.from_pydict(
            {PAYLOAD: [payload]}, schema=pa.schema([(PAYLOAD, pa.binary())])
        )

    return merge_task


def _clocks() -> tuple[float, float]:
    """(wall clock, this process's CPU seconds, all threads: Lance's included)."""
    return time.perf_counter(), time.process_time()


def _log_task(
    path: str, marks: list[tuple[float, float]], rows: int, written: WrittenFiles
) -> None:
    """One ``merge_task`` line: ``marks`` are the clocks at the task's start, when its
    rows had arrived, after ``plan_merge`` and after the write."""
    start, received, planned, wrote = marks
    log_timing(
        {
            "phase": "merge_task",
            "pid": os.getpid(),
            "input_wait_seconds": received[0] - start[0],
            "plan_seconds": planned[0] - received[0],
            "plan_cpu_seconds": planned[1] - received[1],
            "write_seconds": wrote[0] - planned[0],
            "write_cpu_seconds": wrote[1] - planned[1],
            "seconds": time.perf_counter() - start[0],
            "rows": rows,
            "partitions": len(written.leaves),
            "files": sum(len(w.fragments) for w in written.leaves.values()),
        },
        path,
    )


def merge(
    spark: SparkSession | None,
    source: DataFrame,
    root: str,
    on: str | Sequence[str],
    *,
    storage_options: dict[str, str] | None = None,
    tasks: int | None = None,
) -> SparkMergeBuilder:
    """A merge of the Spark DataFrame ``source`` into the namespace at ``root``, keyed by
    ``on``: add clauses as on ``ns.merge``, then ``execute()``. ``tasks`` is the number
    of Spark tasks (default: the context's default parallelism). ``spark`` is unused
    (the DataFrame carries its session) and may be None.

    Example::

        lps.merge(spark, df, root, on="id").when_matched_update_all().execute()
    """
    del spark
    return SparkMergeBuilder(source, root, on, storage_options, tasks)
