"""Scans: prune partitions through ``__manifest``, then read each leaf at its pinned version.

The filter decides twice: once on partition values (``pruning``), which only
removes whole leaves, and once inside every leaf scan through Lance's own
filter, which makes the result exact.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any, NamedTuple, NoReturn, overload

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog.leaf_open import read_session
from lance_partitioned.catalog.leaf_table import BLOCK, LeafTable
from lance_partitioned.catalog.row_counts import trusted_counts
from lance_partitioned.catalog.snapshot import Leaf, Snapshot, paused_gc
from lance_partitioned.errors import (
    ColumnNotFoundError,
    SchemaError,
    lance_boundaries,
    positive_int,
    raise_for_user,
)
from lance_partitioned.format.expressions import Expr, and_all
from lance_partitioned.format.filters.evaluate import filter_batch
from lance_partitioned.format.filters.render import to_lance_sql
from lance_partitioned.format.filters.visitor import conjuncts, referenced_columns, to_nnf
from lance_partitioned.format.pruning import ResidualPlan
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.leaf.leaf_schema import ReadMapping, leaf_fields_by_id
from lance_partitioned.operations.read.scan_filter import FilterLike, prepare_filter


def _threads() -> int:
    return max(2, min(8, os.cpu_count() or 2))


# Leaves ``to_arrow`` reads at once. Lance releases the GIL, and one leaf's scan
# alternates between waiting for I/O and decoding on Lance's own threads, so more
# leaves in flight than cores keeps the cores busy: TPC-H Q6's 12 leaves on 2 cores
# read in 59 ms with 2 at once, 47 ms with 4, 40 ms with 6 (plain Lance). Bounded,
# since every leaf in flight holds its scan buffers.
READ_THREADS = 8


# "not given" for an optional residual, whose known value may be None (every row matches)
_UNKNOWN: Any = object()


def _read_threads(leaves: int) -> int:
    return max(1, min(leaves, READ_THREADS))


class ScanTask(NamedTuple):
    """One leaf to read: where, at which version, and what it holds."""

    object_id: str
    location: str
    uri: str
    read_version: int | None
    read_branch: str | None
    read_tag: str | None
    spec_id: int
    partition_values: dict[str, Any]
    # The Lance SQL filter this leaf's rows still need: the scan filter without
    # the conjuncts its partition values guarantee. None: every row matches.
    filter_sql: str | None = None


def _filter_batch(batch: pa.RecordBatch, sql: str | None) -> pa.RecordBatch:
    """Apply a SQL filter to one batch with DataFusion (same dialect as Lance's filter)."""
    if sql is None or batch.num_rows == 0:
        return batch
    return filter_batch(batch, sql)


def read_leaf(
    ds: lance.LanceDataset,
    schema: Schema,
    columns: list[str],
    sql: str | None,
    filter_columns: Sequence[str],
    label: str,
    *,
    batch_size: int | None = None,
    fragments: list[Any] | None = None,
    with_address: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Rows of one leaf matching ``sql``, as namespace ``columns`` (mapped by field id).

    When the leaf names every filter column as the namespace does, Lance
    filters; otherwise (renamed or missing columns) the rows are conformed
    first and filtered with DataFusion, the same SQL dialect. ``with_address``
    adds each row's Lance row address as a last column, ``ROW_ADDRESS``.
    """
    mapping = ReadMapping(schema, columns, ds, label)
    kwargs = _scanner_options(sql, batch_size, fragments)
    if with_address:
        kwargs["with_row_address"] = True
    if ReadMapping(schema, list(filter_columns), ds, label).is_identity:
        for batch in ds.scanner(columns=mapping.leaf_columns, filter=sql, **kwargs).to_batches():
            yield _addressed(mapping.conform(batch), batch, with_address)
        return
    kwargs.pop("late_materialization", None)  # no Lance filter here
    both = list(dict.fromkeys([*columns, *filter_columns]))
    wide = ReadMapping(schema, both, ds, label)
    for batch in ds.scanner(columns=wide.leaf_columns, **kwargs).to_batches():
        kept = _filter_batch(_addressed(wide.conform(batch), batch, with_address), sql)
        if kept.num_rows:
            yield kept.select([*columns, ROW_ADDRESS] if with_address else columns)


REPR_TASKS = 5  # tasks a plan's repr shows: enough to see what it kept

ROW_ADDRESS = "_rowaddr"  # Lance's name for a row's address (fragment id << 32 | offset)


def _addressed(rows: pa.RecordBatch, read: pa.RecordBatch, with_address: bool) -> pa.RecordBatch:
    """``rows`` with the row address column of ``read``, the batch they were conformed from."""
    if not with_address:
        return rows
    return rows.append_column(ROW_ADDRESS, read.column(ROW_ADDRESS))


def _array(a: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        return a.combine_chunks()
    return a


class ScanPlan(Sequence[ScanTask]):
    """The tasks of a scan plan: a read-only, list-like sequence of ``ScanTask``.

    A plan can cover a million partitions. It keeps them as Arrow columns (the
    ``LeafTable`` and each leaf's residual filter as an index into the distinct
    texts) and builds a ``ScanTask`` only for the entries read: ``len`` costs
    nothing, ``plan[i]`` builds one task, iteration builds them a block at a
    time. Compares equal to a list of the same tasks.
    """

    def __init__(
        self,
        leaves: LeafTable,
        residual_index: np.ndarray,
        residual_texts: list[str | None],
        field_ids: dict[int, tuple[int, ...]],
        root: str,
    ):
        self.leaves = leaves
        self._index = residual_index
        self._texts = residual_texts
        self._field_ids = field_ids
        self._root = root

    def __len__(self) -> int:
        return len(self.leaves)

    @overload
    def __getitem__(self, index: int) -> ScanTask: ...
    @overload
    def __getitem__(self, index: slice) -> list[ScanTask]: ...
    def __getitem__(self, index: int | slice) -> ScanTask | list[ScanTask]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self._tasks(start, stop - start) if stop > start else []
            return [self[i] for i in range(start, stop, step)]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"plan index {index} out of range ({n} tasks)")
        return self._tasks(index % n, 1)[0]

    def __iter__(self) -> Iterator[ScanTask]:
        for start in range(0, len(self), BLOCK):
            yield from self._tasks(start, BLOCK)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # list semantics: unhashable

    def __repr__(self) -> str:
        """The task count and the first tasks' partition values and versions, e.g.
        ``ScanPlan(2 tasks: {'country': 'US'} @ v1, {'country': 'FR'} @ v1)``."""
        shown = [f"{t.partition_values} @ v{t.read_version}" for t in self[:REPR_TASKS]]
        more = f", ... {len(self) - REPR_TASKS} more" if len(self) > REPR_TASKS else ""
        tasks = "1 task" if len(self) == 1 else f"{len(self)} tasks"
        return f"ScanPlan({tasks}: {', '.join(shown)}{more})" if shown else "ScanPlan(0 tasks)"

    def _tasks(self, start: int, length: int) -> list[ScanTask]:
        """Tasks of the plan's entries ``start .. start + length``, built straight from
        the columns (no ``Leaf`` in between)."""
        oids, locations, sids, values, versions, branches, tags = self.leaves.block_columns(
            start, length
        )
        texts = self._texts
        residuals = [texts[i] for i in self._index[start : start + len(oids)].tolist()]
        names, root = self._field_ids, self._root
        make = ScanTask._make
        with paused_gc():
            return [
                make(
                    (
                        object_id,
                        location,
                        root + location,
                        read_version,
                        read_branch,
                        read_tag,
                        spec_id,
                        dict(zip(names[spec_id], vals, strict=True)),
                        residual,
                    )
                )
                for object_id, location, spec_id, vals, read_version, read_branch, read_tag, residual in zip(
                    oids, locations, sids, values, versions, branches, tags, residuals, strict=True
                )
            ]


def read_leaf_rows(
    ds: lance.LanceDataset,
    schema: Schema,
    columns: list[str],
    sql: str | None,
    filter_columns: Sequence[str],
    label: str,
    *,
    batch_size: int | None = None,
    with_address: bool = False,
) -> pa.Table:
    """``read_leaf``'s rows as one table, with the same contract.

    When Lance can filter the leaf, it also assembles the table (``to_table``):
    no Python work per batch, and the leaf's column chunks become the result's
    without a copy. Otherwise the batches of ``read_leaf`` are collected.
    """
    by_id = leaf_fields_by_id(ds)  # once for both mappings
    mapping = ReadMapping(schema, columns, ds, label, by_id)
    if not ReadMapping(schema, list(filter_columns), ds, label, by_id).is_identity:
        batches = read_leaf(
            ds, schema, columns, sql, filter_columns, label,
            batch_size=batch_size, with_address=with_address,
        )  # fmt: skip
        out = pa.schema(mapping.targets)
        if with_address:
            out = out.append(pa.field(ROW_ADDRESS, pa.uint64()))
        return pa.Table.from_batches(list(batches), schema=out)
    kwargs = _scanner_options(sql, batch_size, None)
    table = ds.scanner(
        columns=mapping.leaf_columns, filter=sql, with_row_address=with_address, **kwargs
    ).to_table()
    rows = mapping.conform_table(table)
    if not with_address:
        return rows
    # from arrays, not append_column: a projection of no columns has no length
    return pa.Table.from_arrays(
        [*rows.columns, table.column(ROW_ADDRESS)],
        schema=rows.schema.append(table.schema.field(ROW_ADDRESS)),
    )


def _scanner_options(
    sql: str | None, batch_size: int | None, fragments: list[Any] | None
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if batch_size:
        kwargs["batch_size"] = batch_size
    if fragments is not None:
        kwargs["fragments"] = fragments
    if sql is not None:
        # Late materialisation (take the other columns row by row after the
        # filter) loses to reading them whole at typical selectivities.
        kwargs["late_materialization"] = False
    return kwargs


def _projection(schema: Schema, columns: Sequence[str]) -> list[str]:
    """``columns`` as a list, each a column of ``schema`` named once.

    A column named twice is refused (SchemaError), not read once: the result
    would have fewer columns than asked for, or two of one name, which Arrow
    tables allow but most consumers do not.
    """
    columns = list(columns)
    missing = [c for c in columns if not schema.has_field(c)]
    if missing:
        raise ColumnNotFoundError(
            f"unknown column {missing[0]!r} in the projection; columns are {schema.names}",
            tuple(missing),
        )
    counts = Counter(columns)
    repeated = [c for c in columns if counts[c] > 1]
    if repeated:
        raise SchemaError(
            f"the projection names column {repeated[0]!r} more than once ({columns}); "
            "name each column once"
        )
    return columns


@lance_boundaries
class Scan:
    """A lazy, pruned read of a snapshot. Nothing is read until a ``to_*``/``count`` call."""

    def __init__(
        self,
        snapshot: Snapshot,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
    ):
        self.snapshot = snapshot
        self.expr, self.sql, self.manifest_sql = prepare_filter(snapshot, filter)
        self.columns = None if columns is None else _projection(snapshot.schema, columns)
        self.batch_size = None if batch_size is None else positive_int("batch_size", batch_size)
        self._leaf_filters: dict[str, str | None] = {}
        self._residual_plans: dict[int, ResidualPlan] = {}
        self._rendered: dict[tuple[int, ...], str | None] = {}

    @cached_property
    def output_schema(self) -> pa.Schema:
        """The namespace schema (projected), without field-id metadata."""
        fields = [pa.field(f.name, f.type, f.nullable) for f in self.snapshot.schema.arrow]
        if self.columns is not None:
            by_name = {f.name: f for f in fields}
            fields = [by_name[c] for c in self.columns]
        return pa.schema(fields)

    @cached_property
    def leaves(self) -> LeafTable:
        """The leaves the filter may match, in manifest order: a ``Sequence[Leaf]``
        kept as Arrow columns (``catalog.leaf_table``); ``Leaf`` tuples are built
        only for the leaves a consumer reads."""
        return self.snapshot.leaf_table(self.manifest_sql, keep=True)

    @cached_property
    def _residuals(self) -> tuple[np.ndarray, list[str | None]]:
        """Every leaf's residual filter, column-wise: per leaf of ``leaves`` an index
        into the list of distinct residual SQL texts (``leaf_filter`` of each leaf)."""
        return self._residuals_of(self.leaves)

    def _residuals_of(self, leaves: LeafTable) -> tuple[np.ndarray, list[str | None]]:
        out = np.zeros(len(leaves), dtype=np.int64)
        if self.expr is None:
            return out, [None]
        texts: list[str | None] = []
        position: dict[str | None, int] = {}
        for sid in np.unique(leaves.spec_ids).tolist():
            rows = np.flatnonzero(leaves.spec_ids == sid)
            spec = self.snapshot.specs[sid]
            take = pa.array(rows)
            columns = [_array(leaves.rows.column(f.column).take(take)) for f in spec.fields]
            index, answers = self._residual_plan(sid).kept_array(columns, len(rows))
            ids = []
            for kept in answers:
                sql = self._render(kept)
                if sql not in position:
                    position[sql] = len(texts)
                    texts.append(sql)
                ids.append(position[sql])
            out[rows] = np.asarray(ids, dtype=np.int64)[index]
        return out, texts

    def _residual_plan(self, spec_id: int) -> ResidualPlan:
        plan = self._residual_plans.get(spec_id)
        if plan is None:
            spec = self.snapshot.specs[spec_id]
            plan = self._residual_plans[spec_id] = ResidualPlan(
                self._parts, spec, self.snapshot.schema
            )
        return plan

    def leaf_filter(self, leaf: Leaf) -> str | None:
        """The Lance SQL filter ``leaf`` still needs: its residual. None: every row matches.

        Conjuncts the leaf's partition values guarantee are dropped. Rendered once
        per leaf and shared by every reader of this scan: core reads, ``count``,
        ``plan()`` and the Spark tasks planned from it.
        """
        if self.expr is None:
            return None
        plan = self._residual_plan(leaf.spec_id)
        if plan.constant is not None:  # no partition value of this spec guarantees anything
            return self._render(plan.constant)
        try:
            return self._leaf_filters[leaf.object_id]
        except KeyError:
            pass
        sql = self._leaf_filters[leaf.object_id] = self._render(plan.kept(leaf.values))
        return sql

    def _render(self, kept: tuple[int, ...]) -> str | None:
        """The Lance SQL of the conjuncts ``kept`` (None: none). Many leaves keep the
        same conjuncts, so each distinct residual is rendered once. Threads reading
        leaves may race here; both compute the same text."""
        try:
            return self._rendered[kept]
        except KeyError:
            parts = [self._parts[i] for i in kept]
            sql = self._rendered[kept] = to_lance_sql(and_all(parts)) if parts else None
            return sql

    @cached_property
    def _parts(self) -> list[Expr]:
        return conjuncts(self._nnf)

    @cached_property
    def _nnf(self) -> Expr:
        return to_nnf(self.expr)

    def plan(self) -> ScanPlan:
        """The selected leaf tables, in manifest order, each with its residual filter.

        A ``ScanPlan``: a read-only sequence of ``ScanTask`` that behaves as a list
        (``len``, indexing, slicing, iteration, ``==``), kept as columns and
        building each task only when it is read.
        """
        names = {
            sid: tuple(f.field_id for f in spec.fields) for sid, spec in self.snapshot.specs.items()
        }
        root = self.snapshot.manifest.root.rstrip("/") + "/"
        index, texts = self._residuals
        return ScanPlan(self.leaves, index, texts, names, root)

    # -- reading ------------------------------------------------------------
    def _leaf_read_args(self, leaf: Leaf, residual: Any = _UNKNOWN) -> tuple[Any, ...]:
        """What ``read_leaf`` and ``read_leaf_rows`` take for ``leaf``: the leaf opened at
        its pinned version, the schema, output columns, residual and filter columns.
        ``residual``: the leaf's ``leaf_filter`` when the caller has it already."""
        return (
            self.snapshot.open_leaf(leaf, read_session()),
            self.snapshot.schema,
            [f.name for f in self.output_schema],
            self.leaf_filter(leaf) if residual is _UNKNOWN else residual,
            self.filter_columns,
            leaf.object_id,
        )

    def _leaf_batches(self, leaf: Leaf) -> Iterator[pa.RecordBatch]:
        """One leaf's matching rows in namespace form (seed 003 §4 read rules, by field id)."""
        try:
            yield from read_leaf(*self._leaf_read_args(leaf), batch_size=self.batch_size)
        except (OSError, ValueError) as exc:
            self._leaf_failed(exc, leaf)

    @cached_property
    def filter_columns(self) -> list[str]:
        """Namespace columns the filter reads."""
        return sorted(referenced_columns(self.expr)) if self.expr is not None else []

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream record batches leaf by leaf; memory holds about one leaf batch at a time."""
        for leaf in self.leaves:
            yield from self._leaf_batches(leaf)

    def _leaf_rows(self, leaf: Leaf, residual: Any = _UNKNOWN) -> pa.Table:
        """One leaf's matching rows as a table (``_leaf_batches``' rows, read at once)."""
        try:
            table = read_leaf_rows(
                *self._leaf_read_args(leaf, residual), batch_size=self.batch_size
            )
        except (OSError, ValueError) as exc:
            self._leaf_failed(exc, leaf)
        return table

    def _leaf_failed(self, exc: BaseException, leaf: Leaf) -> NoReturn:
        """Raise the error of reading ``leaf``: a VersionNotFoundError naming the cleanup
        that removed its files under a long read, else Lance's, naming the partition."""
        self.snapshot.raise_if_cleaned_up(exc, leaf)
        raise_for_user(exc, f"reading partition {leaf.object_id} ({leaf.location})")

    def to_arrow(self) -> pa.Table:
        """Read everything into one Arrow table, in manifest order of the leaves.

        Up to ``READ_THREADS`` (8) leaves are read at once, each whole by Lance
        at the version the scan's ``__manifest`` pins, through the process's
        shared Lance session (``catalog.leaf_open.read_session``); the leaves'
        column chunks become the table's without a copy.
        """
        leaves = self.leaves
        if not leaves:
            return self.output_schema.empty_table()
        # every leaf's residual at once, column-wise (as ``plan`` does), rather than
        # one ``leaf_filter`` per leaf under the GIL while the other leaves are read
        index, texts = self._residuals
        residuals = [texts[i] for i in index.tolist()]
        with ThreadPoolExecutor(_read_threads(len(leaves))) as pool:
            tables = list(pool.map(self._leaf_rows, leaves, residuals))
        return pa.concat_tables(tables)

    def to_pandas(self, **kwargs: Any):
        """``to_arrow().to_pandas(**kwargs)``."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_reader(self) -> pa.RecordBatchReader:
        """A ``pyarrow.RecordBatchReader`` streaming the scan leaf by leaf (for any
        Arrow consumer: DuckDB, Polars, ``pyarrow.dataset.write_dataset``, Flight).

        Example::

            reader = ns.scan("country = 'US'").to_reader()
            for batch in reader: ...
        """
        return pa.RecordBatchReader.from_batches(self.output_schema, self.to_batches())

    def to_duckdb(self, con: Any = None) -> Any:
        """A DuckDB relation over this scan's rows (``operations.read.dataframes.to_duckdb``).

        The scan's filter has pruned partitions and runs in each leaf; its columns
        are the only ones read. ``con`` is the DuckDB connection (default: DuckDB's
        default connection). The relation reads lazily and can run more than once.

        Example::

            ns.scan("l_shipdate >= '1994-01-01'").to_duckdb(con).create_view("li")
            con.sql("SELECT count(*) FROM li")
        """
        from lance_partitioned.operations.read.dataframes import to_duckdb

        return to_duckdb(self, con)

    def to_polars(self, lazy: bool = True) -> Any:
        """A Polars LazyFrame of this scan (``operations.read.dataframes.to_polars``), or a
        DataFrame with ``lazy=False``. Polars' projection pushdown narrows the
        columns read; the scan's filter is what prunes partitions.

        Example::

            ns.scan("country = 'US'").to_polars().group_by("event_date").len().collect()
        """
        from lance_partitioned.operations.read.dataframes import to_polars

        return to_polars(self, lazy)

    def count(self) -> int:
        """Number of matching rows.

        A leaf the filter selects whole (no filter, or only partition columns
        decide it: no residual) is counted from the row count ``__manifest``
        keeps with it (docs/FORMAT.md "Row counts") without opening it; any
        other leaf is counted inside Lance without materialising its rows.
        Which leaves are whole is decided column-wise, so a partition-only
        filter over a million partitions costs about what ``count()`` does.
        """
        if self.expr is None:
            known, rest = self.snapshot.row_counts(self.manifest_sql)
            return known + self._count_opened(rest)
        leaves = self.snapshot.leaf_table(self.manifest_sql, extra=("metadata",), keep=True)
        index, texts = self._residuals_of(leaves)
        whole = np.isin(index, [i for i, sql in enumerate(texts) if sql is None])
        counts = trusted_counts(leaves.rows)
        stored = pc.is_valid(counts).to_numpy(zero_copy_only=False)
        counted = whole & stored
        known = int(pc.sum(pc.filter(counts, pa.array(counted))).as_py() or 0)
        return known + self._count_opened(leaves.take(np.flatnonzero(~counted)))

    def _count_opened(self, leaves: list[Leaf]) -> int:
        """Rows of ``leaves`` matching their residual filter, counted by opening each."""

        def count_leaf(leaf: Leaf) -> int:
            ds = self.snapshot.open_leaf(leaf, read_session())
            if ReadMapping(
                self.snapshot.schema, self.filter_columns, ds, leaf.object_id
            ).is_identity:
                try:
                    return ds.count_rows(filter=self.leaf_filter(leaf))
                except (OSError, ValueError) as exc:
                    self._leaf_failed(exc, leaf)
            return sum(b.num_rows for b in self._leaf_batches(leaf))

        if not leaves:
            return 0
        with ThreadPoolExecutor(_threads()) as pool:
            return sum(pool.map(count_leaf, leaves))

    def explain(self) -> str:
        """Human-readable pruning summary."""
        total = len(self.snapshot.leaf_table())
        return (
            f"filter: {self.sql or '(none)'}\n"
            f"__manifest version: {self.snapshot.version}\n"
            f"__manifest predicate: {self.manifest_sql or '(all partitions)'}\n"
            f"partitions: {len(self.leaves)} of {total}"
        )
