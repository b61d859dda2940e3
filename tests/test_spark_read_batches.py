"""A Spark read task hands Spark few, large batches even when the filter is selective.

Lance yields its scan batches after the filter; at 1% selectivity a 1,024-row scan
batch keeps about 10 rows. Spark pays a fixed cost per batch a Python source hands
it, so ``read_task`` concatenates runs of small batches. Driven without a JVM.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("pyspark")

import lance_partitioned as lp  # noqa: E402
from lance_partitioned.spark.planning import (  # noqa: E402
    SMALL_BATCH_ROWS,
    ReadOptions,
    coalesce_small_batches,
    plan_read,
    read_task,
)

N = 50_000


def _source() -> pa.Table:
    ids = pa.array(range(N), pa.int64())
    return pa.table({"g": pc.cast(pc.divide(ids, 25_000), pa.int64()), "id": ids})


def test_selective_filter_reaches_spark_in_few_batches(tmp_path):
    source = _source()
    ns = lp.create(str(tmp_path / "ns"), source.schema, "g")
    ns.append(source)
    where = "id % 100 = 7"  # 1% of every scan batch
    plan, scan = plan_read(ns.snapshot, where, ["g", "id"], min_tasks=1)
    options = ReadOptions(
        columns=("g", "id"),
        target=pa.schema([pa.field("g", pa.int64()), pa.field("id", pa.int64())]),
        batch_size=1024,
        schema=scan.snapshot.schema,
        filter_columns=tuple(scan.filter_columns),
    )
    batches = [b for task in plan.tasks for b in read_task(task, options)]
    got = pa.Table.from_batches(batches).sort_by("id")
    # the oracle: pyarrow's filter of the source rows
    ids = source["id"]
    expected = source.filter(pc.equal(pc.subtract(ids, pc.multiply(pc.divide(ids, 100), 100)), 7))
    assert got.equals(expected.sort_by("id"))
    # 500 rows from 50 scan batches of 1,024 rows: one batch per task, not ~50
    assert len(batches) == len(plan.tasks)


def test_coalescing_keeps_order_and_passes_big_batches_uncopied():
    small = [pa.record_batch({"x": pa.array([i] * 10, pa.int64())}) for i in range(5)]
    big = pa.record_batch({"x": pa.array(range(SMALL_BATCH_ROWS), pa.int64())})
    stream = [*small[:3], pa.record_batch({"x": pa.array([], pa.int64())}), big, *small[3:]]
    out = list(coalesce_small_batches(iter(stream)))
    assert [b.num_rows for b in out] == [30, SMALL_BATCH_ROWS, 20]
    assert out[1] is big
    assert pa.Table.from_batches(out).column("x").to_pylist() == [
        x for b in stream for x in b.column("x").to_pylist()
    ]


def test_coalescing_stops_at_the_row_and_byte_limits():
    small = [pa.record_batch({"x": pa.array([i] * 10, pa.int64())}) for i in range(10)]
    by_rows = list(coalesce_small_batches(iter(small), max_rows=25))
    assert [b.num_rows for b in by_rows] == [30, 30, 30, 10]
    by_bytes = list(coalesce_small_batches(iter(small), max_bytes=160))  # 80 bytes each
    assert [b.num_rows for b in by_bytes] == [20] * 5
