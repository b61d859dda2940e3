"""Hand a pruned scan to DuckDB or Polars (``Scan.to_duckdb``, ``Scan.to_polars``).

Both keep the scan's pruning and projection: the scan's filter has already
chosen the leaves (through ``__manifest``) and runs inside every leaf read;
its ``columns`` are the only columns read. Neither engine can push its own
predicates into our pruning (they have no way to hand them to a Python
source), so put the filter that should prune in ``ns.scan(filter)``; a
``WHERE`` in DuckDB or a ``filter`` in Polars then runs on the rows the scan
yields, which is correct but reads every partition the scan kept.

``duckdb`` and ``polars`` are optional (``pip install lance-partitioned[engines]``);
they are imported only when these functions run.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa

if TYPE_CHECKING:
    import duckdb
    import polars


class ScanLike(Protocol):
    """What DuckDB and Polars read of a ``read.scan.Scan`` (which imports this module,
    so this module names the members it uses instead of importing the class)."""

    columns: list[str] | None
    leaves: Any  # the planned leaves (counted here)
    sql: str | None

    @property
    def output_schema(self) -> pa.Schema: ...

    def to_reader(self) -> pa.RecordBatchReader: ...

    def to_arrow(self) -> pa.Table: ...

    def to_batches(self) -> Iterator[pa.RecordBatch]: ...


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{module} is not installed: pip install {module} "
            "(or lance-partitioned[engines], which pins a tested version)"
        ) from exc


class _ScanStream:
    """An Arrow C stream source that starts a fresh read of the scan each time it is asked.

    DuckDB keeps the object behind a relation and asks it for a stream on every
    execution, so the relation can run more than once (a plain
    RecordBatchReader could be consumed only once). Leaves are read lazily,
    batch by batch, as DuckDB pulls them.
    """

    def __init__(self, scan: ScanLike):
        self.scan = scan

    def __arrow_c_schema__(self) -> Any:
        return self.scan.output_schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.scan.to_reader().__arrow_c_stream__(requested_schema)


def to_duckdb(
    scan: ScanLike, con: duckdb.DuckDBPyConnection | None = None
) -> duckdb.DuckDBPyRelation:
    """A DuckDB relation over ``scan``'s rows (pruned and projected by the scan), read lazily.

    ``con`` is the connection the relation belongs to (default: DuckDB's
    default connection). The relation can be executed more than once; each
    execution reads the scan's leaves again, at the scan's pinned version.

    Example::

        rel = ns.scan("l_shipdate >= '1994-01-01'", columns=["l_quantity"]).to_duckdb(con)
        rel.create_view("li")
        con.sql("SELECT sum(l_quantity) FROM li").fetchall()
    """
    duckdb_mod = _require("duckdb")
    if con is None:
        con = duckdb_mod.default_connection()
    return con.from_arrow(_ScanStream(scan))


def _projected(scan: ScanLike, columns: Sequence[str] | None) -> ScanLike:
    """The same scan (filter, leaves, pinned version) reading only ``columns``."""
    if columns is None or list(columns) == [f.name for f in scan.output_schema]:
        return scan
    narrow = copy.copy(scan)  # shares the planned leaves and their rendered filters
    narrow.columns = list(columns)
    narrow.__dict__.pop("output_schema", None)  # a cached_property of the wider projection
    return narrow


def to_polars(scan: ScanLike, lazy: bool = True) -> polars.LazyFrame | polars.DataFrame:
    """``scan``'s rows as a Polars LazyFrame (default) or, with ``lazy=False``, a DataFrame.

    The LazyFrame is a Polars IO source: Polars' projection pushdown narrows
    the columns read from each leaf, ``head``/``limit`` stop reading early,
    and each ``collect()`` reads the leaves again at the scan's pinned version.
    Polars predicates run on the rows read (the scan's filter is what prunes).

    Example::

        lf = ns.scan("country = 'US'").to_polars()
        lf.group_by("event_date").len().collect()
    """
    pl = _require("polars")
    if not lazy:
        return pl.from_arrow(scan.to_arrow())
    from polars.io.plugins import register_io_source

    schema = pl.from_arrow(scan.output_schema.empty_table()).schema

    def source(
        with_columns: list[str] | None,
        predicate: Any,
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator[polars.DataFrame]:
        left = n_rows
        for batch in _projected(scan, with_columns).to_batches():
            if left is not None and left <= 0:
                return
            df = pl.from_arrow(pa.Table.from_batches([batch]))
            if predicate is not None:
                df = df.filter(predicate)
            if left is not None:
                df = df.head(left)
                left -= df.height
            yield df

    detail = f"{len(scan.leaves)} partitions, filter: {scan.sql or '(none)'}"
    return register_io_source(
        source, schema=schema, explain_name="lance_partitioned", explain_detail=detail
    )


__all__ = ["to_duckdb", "to_polars"]
