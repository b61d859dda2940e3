"""The source rows of a merge: read once, typed as the namespace, keys checked.

A merge matches source rows to namespace rows by key columns (``on``). The
source is read into memory once (a merge that re-plans after a conflict reuses
it), its namespace columns are cast to the namespace types with the same
checks as a write (``operations.write.input``), and its other columns stay as
given, for conditions (``source.op = 'D'``). Keys follow SQL's rule: a NULL
key never matches; a key given twice is refused before anything is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import (
    ColumnNotFoundError,
    DuplicateKeyError,
    InvalidArgumentError,
    SchemaError,
)
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.write.input import DataLike, cast_column, iter_batches

SOURCE_INDEX = "_lp_source_row"  # a source row's position, carried through joins


@dataclass(frozen=True)
class ChangeSource:
    """A merge's source: ``table`` holds the namespace columns it has (``columns``, in
    namespace types) and its other columns (``extra``), as given; ``on`` are the keys;
    ``schema`` is the namespace schema it was read by, ``given`` the rows as given."""

    table: pa.Table
    columns: list[str]
    extra: list[str]
    on: list[str]
    schema: Schema
    given: pa.Table

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def on_schema(self, schema: Schema) -> ChangeSource:
        """The source read by ``schema`` (itself when read by it already): after a
        concurrent rename a column is taken by its new name, after a widening in the
        wider type, with ``read_source``'s checks."""
        return self if schema == self.schema else read_source(self.given, schema, self.on)

    def keyed(self) -> pa.Table:
        """The key columns and ``SOURCE_INDEX`` of the rows whose keys are all non-NULL
        (a NULL key matches nothing)."""
        keys = self.table.select(self.on)
        keys = keys.append_column(SOURCE_INDEX, pa.array(np.arange(keys.num_rows)))
        valid = None
        for name in self.on:
            ok = pc.is_valid(keys.column(name))
            valid = ok if valid is None else pc.and_(valid, ok)
        return keys if valid is None or pc.all(valid).as_py() else keys.filter(valid)


def key_names(on: str | Sequence[str]) -> list[str]:
    """``on`` as a non-empty list of distinct column names (InvalidArgumentError otherwise)."""
    names = [on] if isinstance(on, str) else list(on)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidArgumentError(f"on must name one or more key columns, got {on!r}")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"on names a column twice: {names}")
    return names


def read_source(data: DataLike, schema: Schema, on: str | Sequence[str]) -> ChangeSource:
    """Read ``data`` (anything ``append`` takes) as a merge source keyed by ``on``.

    Raises ColumnNotFoundError for a key that is not a namespace column,
    SchemaError for a key the source lacks or a column whose values the
    namespace type cannot hold, DuplicateKeyError naming a key given twice.
    """
    on = key_names(on)
    table = _as_table(data)
    for name in on:
        if not schema.has_field(name):
            raise ColumnNotFoundError(
                f"key column {name!r} is not a column of the namespace (columns: {schema.names})"
            )
        if name not in table.column_names:
            raise SchemaError(
                f"the source has no key column {name!r} (it has {table.column_names})"
            )
        if pa.types.is_nested(schema.field(name).type):
            raise SchemaError(
                f"key column {name!r} is {schema.field(name).type}: keys must be scalars"
            )
    if len(set(table.column_names)) != table.num_columns:
        raise SchemaError(f"the source has duplicate column names: {table.column_names}")
    columns = [n for n in schema.names if n in table.column_names]
    extra = [n for n in table.column_names if not schema.has_field(n)]
    arrays = [
        cast_column(n, table.column(n).combine_chunks(), schema.field(n).type) for n in columns
    ]
    typed = pa.Table.from_arrays(
        [*arrays, *(table.column(n) for n in extra)],
        names=[*columns, *extra],
    )
    source = ChangeSource(typed, columns, extra, on, schema, table)
    _refuse_duplicates(source)
    return source


def _as_table(data: DataLike) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    batches = list(iter_batches(data))
    if not batches:
        raise InvalidArgumentError("the source has no batches: pass a table (it may be empty)")
    return pa.Table.from_batches(batches)


def _refuse_duplicates(source: ChangeSource) -> None:
    """DuplicateKeyError naming one key that two source rows share (NULL keys excepted)."""
    keys = source.keyed()
    if keys.num_rows < 2:
        return
    counts = keys.group_by(source.on, use_threads=False).aggregate([(SOURCE_INDEX, "count")])
    dup = counts.filter(pc.greater(counts.column(f"{SOURCE_INDEX}_count"), 1))
    if dup.num_rows:
        row = dup.slice(0, 1).to_pylist()[0]
        key = {n: row[n] for n in source.on}
        raise DuplicateKeyError(
            f"the source has {dup.num_rows} key(s) given more than once, e.g. {key} "
            f"({row[f'{SOURCE_INDEX}_count']} rows); a merge needs each key at most once. "
            "Nothing was written"
        )
