"""Turning user input into record batches that match the namespace schema exactly."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol, TypeAlias, Union

import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import SchemaError
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.types import cast_group
from lance_partitioned.operations.write.split import write_memory_pool

if TYPE_CHECKING:
    import pandas  # optional at run time: only the "spark" and "dev" extras install it


class ArrowStreamExportable(Protocol):
    """Any object exporting an Arrow C stream (polars, DuckDB, nanoarrow, ...)."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...


# Union[] rather than ``|``: the pandas member is a forward reference, and
# ``type | str`` fails at run time where pandas is not installed.
DataLike: TypeAlias = Union[
    pa.Table,
    pa.RecordBatch,
    pa.RecordBatchReader,
    ArrowStreamExportable,
    Iterable[pa.RecordBatch | pa.Table],
    "pandas.DataFrame",
]
"""What ``append``/``overwrite`` accept: Arrow data in any of these shapes."""


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
    batches: Iterable[pa.RecordBatch],
    min_rows: int = 1 << 17,
    max_bytes: int | None = None,
    memory_pool: pa.MemoryPool | None = None,
    pass_rows: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Concatenate runs of small batches into ones of at least ``min_rows`` rows
    (or ``max_bytes`` bytes, when that comes first: it bounds the copy).

    Splitting by partition costs per batch and per partition in it, so a stream
    of small batches (Spark hands 10,000-row ones) is split far faster in bigger
    pieces. Batches of ``pass_rows`` rows or more (default ``min_rows // 4``) pass
    through uncopied, as do batches whose schema differs from the run's; empty
    ones are dropped.
    """
    pass_rows = min_rows // 4 if pass_rows is None else pass_rows
    pending: list[pa.RecordBatch] = []
    rows = size = 0

    def merged() -> pa.RecordBatch:
        return (
            pending[0] if len(pending) == 1 else pa.concat_batches(pending, memory_pool=memory_pool)
        )

    for batch in batches:
        if not batch.num_rows:
            continue
        big = batch.num_rows >= pass_rows
        if pending and (big or not batch.schema.equals(pending[0].schema, check_metadata=True)):
            yield merged()
            pending, rows, size = [], 0, 0
        if big:
            yield batch
            continue
        pending.append(batch)
        rows += batch.num_rows
        size += batch.nbytes
        if rows >= min_rows or (max_bytes is not None and size >= max_bytes):
            yield merged()
            pending, rows, size = [], 0, 0
    if pending:
        yield merged()


def cast_column(name: str, col: pa.Array, target: pa.DataType) -> pa.Array:
    if col.type.equals(target):
        return col
    if pa.types.is_null(col.type):
        return pa.nulls(len(col), type=target)
    if cast_group(col.type) != cast_group(target) and not pa.types.is_dictionary(col.type):
        raise SchemaError(
            f"column {name!r}: cannot write {col.type} into the namespace type {target}"
        )
    check_zones(name, col.type, target)
    try:
        # into the pool the writer buffers in: the converted batch is what gets buffered
        out = pc.cast(col, target, safe=True, memory_pool=write_memory_pool())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"column {name!r}: cannot cast {col.type} to {target}: {exc}") from exc
    check_lossless(name, col, out)
    return out


# -- casts that Arrow's safe cast lets lose data ----------------------------------
#
# pyarrow's ``safe=True`` refuses integer overflow, sub-unit timestamps/times,
# decimal rescaling and precision overflow, but silently truncates a timestamp to
# its date, rounds float64 to float32 (or to inf), rounds floats to a decimal's
# scale and decimals to a float, and reads a naive timestamp as UTC. A write that
# would store a different value than the one given is refused instead, as
# pyiceberg and delta-rs refuse such writes. The checks are per value (a
# timestamp at midnight is a date), except for the time zone rule below.

_UTC_NAMES = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Etc/Universal", "Zulu", "Etc/Zulu",
     "GMT", "Etc/GMT", "Z", "+00:00", "-00:00", "+0000", "-0000"}
)  # fmt: skip


def _is_utc(tz: str) -> bool:
    return tz in _UTC_NAMES


def _children(t: pa.DataType) -> list[tuple[str, pa.DataType]]:
    if pa.types.is_struct(t):
        return [(f".{f.name}", f.type) for f in t]
    if pa.types.is_map(t):
        return [("{key}", t.key_type), ("{value}", t.item_type)]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [("[]", t.value_type)]
    return []


def check_zones(name: str, src: pa.DataType, dst: pa.DataType) -> None:
    """Refuse casts between a naive timestamp and one zoned other than UTC, at any depth.

    Arrow reads a naive value as UTC and writes a zoned one as its UTC wall clock,
    so the wall-clock reading changes unless the zone is UTC: ambiguous, never
    guessed. A zoned timestamp has no single date either, except in UTC.
    """
    if pa.types.is_dictionary(src):
        src = src.value_type
    if pa.types.is_timestamp(src) and (pa.types.is_timestamp(dst) or pa.types.is_date(dst)):
        zoned = [t.tz for t in (src, dst) if pa.types.is_timestamp(t) and t.tz is not None]
        naive = len(zoned) == 1 or not pa.types.is_timestamp(dst)
        bad = [tz for tz in zoned if not _is_utc(tz)]
        if naive and bad:
            if pa.types.is_date(dst):
                why = f"a timestamp in zone {bad[0]} has no single date (its UTC or its local one?)"
            elif src.tz is not None:
                why = f"a timestamp in zone {bad[0]} has no single naive value (UTC or local wall clock?)"
            else:
                why = f"a naive timestamp is no single instant in zone {bad[0]} (Arrow would read it as UTC)"
            raise SchemaError(
                f"column {name!r}: cannot write {src} into {dst}: {why}; convert it explicitly "
                "first (e.g. with pyarrow.compute.local_timestamp or assume_timezone)"
            )
        return
    src_children, dst_children = _children(src), _children(dst)
    if len(src_children) == len(dst_children):
        for (path, s), (_, d) in zip(src_children, dst_children, strict=True):
            check_zones(name + path, s, d)


def _value_lossy_pair(s: pa.DataType, d: pa.DataType) -> bool:
    """Casts Arrow's safe mode performs although they can change the value."""
    if pa.types.is_timestamp(s) and pa.types.is_date(d):
        return True
    if pa.types.is_floating(s):
        return pa.types.is_decimal(d) or (pa.types.is_floating(d) and d.bit_width < s.bit_width)
    return pa.types.is_decimal(s) and pa.types.is_floating(d)


def _leaves(name: str, src: pa.Array, out: pa.Array) -> Iterator[tuple[str, pa.Array, pa.Array]]:
    """Aligned (path, source values, cast values) pairs down to the lossy leaf casts."""
    if pa.types.is_dictionary(src.type):
        src = src.dictionary_decode()
    if _value_lossy_pair(src.type, out.type):
        yield name, src, out
        return
    pairs = zip(_children(src.type), _children(out.type), strict=False)
    if not any(_needs_value_check(s, d) for (_, s), (_, d) in pairs):
        return
    if pa.types.is_struct(src.type):
        names = [f".{f.name}" for f in src.type]
        kids = zip(names, src.flatten(), out.flatten(), strict=True)
    else:
        if pa.types.is_map(src.type):  # a map is a list of key/value structs
            src = src.view(pa.list_(pa.struct([src.type.key_field, src.type.item_field])))
            out = out.view(pa.list_(pa.struct([out.type.key_field, out.type.item_field])))
            kids = zip(
                ("{key}", "{value}"), src.flatten().flatten(), out.flatten().flatten(), strict=True
            )
        else:
            kids = iter([("[]", src.flatten(), out.flatten())])
    for path, s, o in kids:
        yield from _leaves(name + path, s, o)


def _needs_value_check(s: pa.DataType, d: pa.DataType) -> bool:
    if pa.types.is_dictionary(s):
        s = s.value_type
    if _value_lossy_pair(s, d):
        return True
    return any(
        _needs_value_check(cs, cd)
        for (_, cs), (_, cd) in zip(_children(s), _children(d), strict=False)
    )


def check_lossless(
    name: str, src: pa.Array, out: pa.Array, hint: str = "convert it explicitly first"
) -> None:
    """Refuse when ``out`` (``src`` cast by Arrow's safe cast) holds a different value.

    A value is kept when casting it back gives the original (NaN counts as kept),
    e.g. 2024-03-01T00:00 → 2024-03-01, 0.5 → float32, 0.1 → decimal(10, 2).
    """
    if not _needs_value_check(src.type, out.type):
        return
    for path, s, o in _leaves(name, src, out):
        try:
            back = pc.cast(o, s.type, safe=False)
            same = pc.equal(back, s)
            if pa.types.is_floating(s.type):
                same = pc.or_kleene(same, pc.and_(pc.is_nan(back), pc.is_nan(s)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            same = pa.array([False] * len(s))
        changed = pc.invert(same.fill_null(True))
        if pc.any(changed).as_py():
            i = pc.index(changed, True).as_py()
            raise SchemaError(
                f"column {path!r}: storing {s.type} as {o.type} would change the value "
                f"{s[i].as_py()!r} to {o[i].as_py()!r}; {hint}"
            )


class InputConformer:
    """Checks each batch against the namespace schema and casts it to exactly that schema.

    Missing nullable columns become NULL; missing non-null columns, extra columns,
    impossible or lossy casts (a value that would be stored differently, see
    ``check_lossless`` and ``check_zones``) and NULLs in non-null columns raise
    SchemaError naming the column.
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
                col = cast_column(f.name, batch.column(f.name), f.type)
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
