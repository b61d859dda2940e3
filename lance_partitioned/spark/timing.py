"""The Spark timing log: where a task's time goes, one JSON line per task.

Set the environment variable ``LANCE_PARTITIONED_SPARK_TIMING`` to a file before
Spark starts (the Python workers inherit it). Then every write task and every
driver commit of the sink (``spark.sink``) and every read task of the source
(``spark.planning.read_task``) append one JSON line to it. Off (the variable
unset), nothing is measured. Appending never raises: a log is best effort.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

log = logging.getLogger(__name__)

TIMING_LOG_ENV = "LANCE_PARTITIONED_SPARK_TIMING"


def timing_enabled() -> bool:
    """Whether a timing log is set for this process."""
    return bool(os.environ.get(TIMING_LOG_ENV))


def log_timing(entry: dict[str, Any], path: str | None = None) -> None:
    """Append ``entry`` to the timing log ``path`` (default: ``TIMING_LOG_ENV``'s value),
    if there is one (best effort, never raises)."""
    path = path or os.environ.get(TIMING_LOG_ENV)
    if not path:
        return
    try:  # never raises: the driver calls this after a write is published
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
    except Exception as exc:
        log.warning("could not append to timing log %s: %s", path, exc)


def timed_read(
    batches: Iterator[pa.RecordBatch], entry: dict[str, Any]
) -> Iterator[pa.RecordBatch]:
    """``batches`` unchanged; when they end (or the consumer stops), one log line:
    ``entry`` plus the task's seconds, CPU seconds, rows and batches, split into
    ``read_seconds`` (producing the batches: Lance, conforming, coalescing) and
    ``handoff_seconds`` (the consumer holding each batch: PySpark's worker writing
    it to the JVM, which waits while the JVM is busy).
    """
    start, cpu = time.perf_counter(), time.process_time()
    read, rows, count = 0.0, 0, 0
    try:
        while True:
            begun = time.perf_counter()
            batch = next(batches, None)
            read += time.perf_counter() - begun
            if batch is None:
                return
            count += 1
            rows += batch.num_rows
            yield batch
    finally:
        seconds = time.perf_counter() - start
        log_timing(
            {
                **entry,
                "pid": os.getpid(),
                "seconds": seconds,
                "cpu_seconds": time.process_time() - cpu,
                "read_seconds": read,
                "handoff_seconds": seconds - read,
                "rows": rows,
                "batches": count,
            }
        )
