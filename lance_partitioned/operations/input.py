"""Turning user input into record batches that match the namespace schema exactly."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import SchemaError
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.types import type_family

DataLike = Any  # pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable[pa.RecordBatch] | pandas.DataFrame


def iter_batches(data: DataLike, max_rows: int = 1 << 20) -> Iterator[pa.RecordBatch]:
    """Stream record batches from a Table, RecordBatch, RecordBatchReader, iterable or DataFrame."""
    if isinstance(data, pa.Table):
        yield from data.to_batches(max_chunksize=max_rows)
    elif isinstance(data, pa.RecordBatch):
        yield data
    elif isinstance(data, pa.RecordBatchReader):
        yield from data
    elif hasattr(data, "__arrow_c_stream__") and not isinstance(data, (list, tuple)):
        if type(data).__module__.startswith("pandas"):
            yield from pa.Table.from_pandas(data, preserve_index=False).to_batches(
                max_chunksize=max_rows
            )
        else:
            yield from pa.RecordBatchReader.from_stream(data)
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes, Mapping)):
        for item in data:
            if isinstance(item, pa.RecordBatch):
                yield item
            elif isinstance(item, pa.Table):
                yield from item.to_batches(max_chunksize=max_rows)
            else:
                raise SchemaError(f"expected pyarrow RecordBatch items, got {type(item).__name__}")
    else:
        raise SchemaError(
            f"cannot write {type(data).__name__}: pass a pyarrow Table, RecordBatchReader, "
            "an iterable of RecordBatches, or a pandas DataFrame"
        )


def coalesce_batches(
    batches: Iterable[pa.RecordBatch], min_rows: int = 1 << 17
) -> Iterator[pa.RecordBatch]:
    """Concatenate runs of small batches into ones of at least ``min_rows`` rows.

    Splitting by partition costs per batch and per partition in it, so a stream
    of small batches (Spark hands 10,000-row ones) is split far faster in bigger
    pieces. Batches of ``min_rows // 4`` rows or more pass through uncopied, as
    do batches whose schema differs from the run's; empty ones are dropped.
    """
    pending: list[pa.RecordBatch] = []
    rows = 0

    def merged() -> pa.RecordBatch:
        return pending[0] if len(pending) == 1 else pa.concat_batches(pending)

    for batch in batches:
        if not batch.num_rows:
            continue
        big = batch.num_rows >= min_rows // 4
        if pending and (big or not batch.schema.equals(pending[0].schema, check_metadata=True)):
            yield merged()
            pending, rows = [], 0
        if big:
            yield batch
            continue
        pending.append(batch)
        rows += batch.num_rows
        if rows >= min_rows:
            yield merged()
            pending, rows = [], 0
    if pending:
        yield merged()


def _cast_column(name: str, col: pa.Array, target: pa.DataType) -> pa.Array:
    if col.type.equals(target):
        return col
    if pa.types.is_null(col.type):
        return pa.nulls(len(col), type=target)
    if type_family(col.type) != type_family(target) and not pa.types.is_dictionary(col.type):
        raise SchemaError(
            f"column {name!r}: cannot write {col.type} into the namespace type {target}"
        )
    try:
        return pc.cast(col, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"column {name!r}: cannot cast {col.type} to {target}: {exc}") from exc


class InputConformer:
    """Checks each batch against the namespace schema and casts it to exactly that schema.

    Missing nullable columns become NULL; missing non-null columns, extra columns,
    impossible casts and NULLs in non-null columns raise SchemaError naming the column.
    """

    def __init__(self, schema: Schema):
        self.schema = schema
        self.target = schema.arrow

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = batch.schema.names
        extra = [n for n in names if not self.schema.has_field(n)]
        if extra:
            raise SchemaError(
                f"input has column(s) {extra} that the namespace schema does not have "
                f"(columns: {self.schema.names}); evolve the schema first"
            )
        if len(set(names)) != len(names):
            raise SchemaError(f"input has duplicate column names: {names}")
        arrays = []
        for f in self.target:
            if f.name in names:
                col = _cast_column(f.name, batch.column(f.name), f.type)
            elif f.nullable:
                col = pa.nulls(batch.num_rows, type=f.type)
            else:
                raise SchemaError(f"input is missing the non-nullable column {f.name!r}")
            if not f.nullable and col.null_count:
                raise SchemaError(
                    f"column {f.name!r} is not nullable but the input has {col.null_count} NULL value(s)"
                )
            arrays.append(col)
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)
