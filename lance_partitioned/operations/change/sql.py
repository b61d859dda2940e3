"""SQL over a change's rows: conditions and assignments naming ``source.`` and ``target.``.

A merge's conditions and ``set`` expressions are SQL (DataFusion's dialect, as
filters are) over two tables: ``source`` (the source rows, their extra columns
included) and ``target`` (the namespace rows they matched), row ``i`` of one
paired with row ``i`` of the other. An update's are over ``target`` alone.
Assigned values are cast to the namespace type as SQL's ``SET`` does
(DataFusion's cast: a float assigned to a decimal column is rounded to its scale).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.errors import ColumnNotFoundError, InvalidArgumentError
from lance_partitioned.format.schema import Schema

PAIR = "_lp_pair"  # row i of source and row i of target share PAIR = i


def quoted(name: str) -> str:
    """``name`` as a DataFusion SQL identifier (double quotes, case kept)."""
    return '"' + name.replace('"', '""') + '"'


def require_columns(names: Iterable[str], schema: Schema) -> None:
    """ColumnNotFoundError naming the assigned columns (a ``set``'s keys) ``schema`` lacks.

    Checked when the change is asked for and again on each snapshot it is planned on:
    a column renamed or dropped by a concurrent commit fails the change (as it would
    after the rename) instead of silently losing the assignment."""
    unknown = [n for n in names if not schema.has_field(n)]
    if unknown:
        raise ColumnNotFoundError(f"set names column(s) {unknown} the namespace does not have")


class PairedRows:
    """Rows to evaluate SQL over: ``source`` and/or ``target``, each with ``PAIR``."""

    def __init__(self, source: pa.Table | None, target: pa.Table | None):
        from datafusion import SessionConfig, SessionContext

        self.tables = {n: t for n, t in (("source", source), ("target", target)) if t is not None}
        self.num_rows = next(iter(self.tables.values())).num_rows
        self.ctx = SessionContext(SessionConfig().with_target_partitions(1))
        pair = pa.array(np.arange(self.num_rows, dtype=np.int64))
        for name, table in self.tables.items():
            self.ctx.from_arrow(table.append_column(PAIR, pair), name)
        first = next(iter(self.tables))
        self.pair = f"{first}.{PAIR}"
        self.from_ = " JOIN ".join(self.tables)
        if len(self.tables) == 2:
            self.from_ = f"source JOIN target ON source.{PAIR} = target.{PAIR}"

    def _sql(self, select: str, what: str, text: str) -> Any:
        try:
            return self.ctx.sql(f"SELECT {self.pair} AS {PAIR}, {select} FROM {self.from_}")
        except Exception as exc:
            raise _invalid(what, text, exc) from exc

    def truth(self, condition: str | None, what: str) -> np.ndarray:
        """Whether ``condition`` is TRUE for each row (NULL counts as false); None: all true."""
        if condition is None:
            return np.ones(self.num_rows, dtype=bool)
        try:
            out = self._sql(f"({condition}) AS c", what, condition).to_arrow_table()
        except InvalidArgumentError:
            raise
        except Exception as exc:
            raise _invalid(what, condition, exc) from exc
        if not pa.types.is_boolean(out.schema.field("c").type):
            raise InvalidArgumentError(
                f"{what} {condition!r} is {out.schema.field('c').type}, not a condition (boolean)"
            )
        result = np.zeros(self.num_rows, dtype=bool)
        pairs = out.column(PAIR).to_numpy()
        result[pairs] = pc.fill_null(out.column("c"), False).to_numpy(zero_copy_only=False)
        return result

    def assigned(self, exprs: dict[str, str], schema: Schema, what: str) -> pa.Table:
        """Each expression's value per row, cast to its column's namespace type, rows in order."""
        from datafusion import col

        names = list(exprs)
        select = ", ".join(f"({exprs[n]}) AS _lp_c{i}" for i, n in enumerate(names))
        try:
            df = self._sql(select, what, ", ".join(f"{n} = {e}" for n, e in exprs.items()))
            df = df.select(
                col(PAIR),
                *(
                    col(f"_lp_c{i}").cast(schema.field(n).type).alias(n)
                    for i, n in enumerate(names)
                ),
            )
            out = df.to_arrow_table()
        except InvalidArgumentError:
            raise
        except Exception as exc:
            text = ", ".join(f"{n} = {e}" for n, e in exprs.items())
            raise _invalid(what, text, exc) from exc
        order = np.argsort(out.column(PAIR).to_numpy(), kind="stable")
        out = out.take(order).drop_columns([PAIR])
        return pa.Table.from_arrays(
            [c.combine_chunks() for c in out.columns],
            schema=pa.schema([schema.arrow.field(n) for n in names]),
        )


def _invalid(what: str, text: str, exc: BaseException) -> InvalidArgumentError:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return InvalidArgumentError(
        f"{what} {text!r} is not valid SQL over the change's rows "
        f"(name columns source.<column> and target.<column>): {message}"
    )
