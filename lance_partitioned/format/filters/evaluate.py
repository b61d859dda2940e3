"""A SQL filter (or projection) evaluated on one in-memory batch with DataFusion.

DataFusion speaks the dialect Lance's ``filter=`` evaluates, so rows that Lance
cannot filter itself (a leaf whose columns must first be conformed to the
namespace schema, partition expressions, zone arithmetic) are evaluated here with
the same meaning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

TABLE = "t"
"""The name the batch is registered under in :func:`one_batch_context`."""


def one_batch_context(batch: pa.RecordBatch) -> Any:
    """A DataFusion ``SessionContext`` with ``batch`` registered as table ``t``.

    One target partition: DataFusion would otherwise repartition round-robin
    and return rows out of order, misaligning results with the batch's rows.
    """
    from datafusion import SessionConfig, SessionContext

    ctx = SessionContext(SessionConfig().with_target_partitions(1))
    ctx.register_record_batches(TABLE, [[with_struct_nulls(batch)]])
    return ctx


def with_struct_nulls(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` with every struct's NULLs also set in its fields.

    DataFusion 55 reads ``s.a`` of a NULL struct as whatever its field holds
    there (``s.a IS NULL`` is then false), where Lance, Spark, DuckDB and
    ``pyarrow.compute.struct_field`` give NULL. Fields that carry their struct's
    NULLs make DataFusion agree. Batches without struct columns are returned as
    they are.
    """
    if not any(pa.types.is_struct(f.type) for f in batch.schema):
        return batch
    arrays = [_struct_nulls(c) for c in batch.columns]
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema)


def _struct_nulls(array: pa.Array) -> pa.Array:
    if not pa.types.is_struct(array.type):
        return array
    # ``flatten`` gives each field with its struct's NULLs merged in
    fields = [_struct_nulls(f) for f in array.flatten()]
    mask = array.is_null() if array.null_count else None
    return pa.StructArray.from_arrays(fields, fields=list(array.type), mask=mask)


def filter_batch(
    batch: pa.RecordBatch, sql: str, columns: Sequence[str] | None = None
) -> pa.RecordBatch:
    """The rows of ``batch`` for which ``sql`` is TRUE, in order, as a RecordBatch of
    ``columns`` (all columns, with ``batch``'s schema, when None)."""
    select = "*" if columns is None else ", ".join(f'"{c}"' for c in columns)
    out = one_batch_context(batch).sql(f"SELECT {select} FROM {TABLE} WHERE {sql}")
    table = out.to_arrow_table()
    schema = (
        batch.schema if columns is None else pa.schema([batch.schema.field(c) for c in columns])
    )
    return pa.RecordBatch.from_arrays(
        [table.column(i).combine_chunks() for i in range(table.num_columns)], schema=schema
    )
