"""Input streaming helpers: coalescing small batches before the partition split."""

from __future__ import annotations

import pyarrow as pa

from lance_partitioned.operations.write.input import coalesce_batches


def _batch(start: int, n: int, schema: pa.Schema | None = None) -> pa.RecordBatch:
    return pa.record_batch({"x": list(range(start, start + n))}, schema=schema)


def test_small_batches_are_merged_in_order():
    batches = [_batch(i * 10, 10) for i in range(25)]
    out = list(coalesce_batches(batches, min_rows=100))
    assert [b.num_rows for b in out] == [100, 100, 50]
    assert [v for b in out for v in b["x"].to_pylist()] == list(range(250))


def test_big_batches_pass_through_uncopied_and_empty_ones_are_dropped():
    big, quarter = _batch(10, 500), _batch(510, 25)
    small = [_batch(0, 5), _batch(5, 5)]
    out = list(coalesce_batches([_batch(0, 0), *small, big, _batch(0, 0), quarter], min_rows=100))
    assert [b.num_rows for b in out] == [10, 500, 25]
    assert out[1] is big and out[2] is quarter


def test_batches_with_different_schemas_are_not_merged():
    other = pa.schema([pa.field("x", pa.int32())])
    batches = [_batch(0, 10), _batch(10, 10), _batch(20, 10, other), _batch(30, 10)]
    out = list(coalesce_batches(batches, min_rows=1000))
    assert [(b.num_rows, b.schema.field("x").type) for b in out] == [
        (20, pa.int64()),
        (10, pa.int32()),
        (10, pa.int64()),
    ]
