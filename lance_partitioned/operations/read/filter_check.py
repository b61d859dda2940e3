"""Refusing filters Lance cannot evaluate as a condition, before any namespace data is read.

``bind`` (``format.filters.bind``) checks what it understands (columns, literals). What it passes
through unanalysed (``Opaque`` SQL: arithmetic, functions, casts) or does not
type (``LIKE``) Lance would reject only once a leaf is scanned, with an
``OSError`` full of Rust source paths, and a delete would by then have planned
against the namespace. So a filter is checked first:

- the whole filter must be a condition: a bare ``NULL`` or any other literal
  that is not a boolean is refused (Lance: "does not return a boolean");
- ``LIKE`` needs a string or binary column;
- a filter with ``Opaque`` parts is planned by Lance against an empty,
  in-memory table with the namespace's columns (nothing is written anywhere,
  and the namespace is not touched); an error there is raised as a
  FilterError with Lance's message, without its source paths.
"""

from __future__ import annotations

import uuid

import lance
import pyarrow as pa

from lance_partitioned.errors import FilterError, lance_message
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache
from lance_partitioned.format.expressions import Expr, Like, Literal, Not, Opaque
from lance_partitioned.format.filters.render import to_lance_sql, to_sql
from lance_partitioned.format.filters.visitor import (
    FilterVisitor,
    nesting,
    predicates,
    to_nnf,
    visit,
)
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.types import is_bytes, is_text
from lance_partitioned.operations.leaf.field_ids import without_field_id_metadata


def check_filter(expr: Expr, schema: Schema) -> None:
    """Raise FilterError, naming the problem, unless Lance can evaluate the bound
    filter ``expr`` as a condition on rows of ``schema``. Never reads the namespace."""
    _check_condition(expr)
    parts = predicates(expr)
    # right to left: the LIKE named when several are wrong is the one named before
    for like in reversed([p for p in parts if isinstance(p, Like)]):
        t = schema.field_at(like.ref.column).type
        if not (is_text(t) or is_bytes(t)):
            raise FilterError(
                f"filter applies LIKE to column {like.ref.dotted!r} of type {t}; LIKE needs a "
                "string or binary column"
            )
    # leaves run the negation normal form, where a run of NOTs is gone
    nnf = to_nnf(expr)
    if nesting(nnf) > _NESTING_LANCE_SURELY_READS:
        _check_nesting(nnf, schema)
    elif any(isinstance(p, Opaque) for p in parts):
        shallow = nesting(expr) <= _NESTING_LANCE_SURELY_READS
        _plan_with_lance(to_sql(expr if shallow else nnf), schema)


# Lance's SQL parser has a recursion limit of its own (sqlparser's 50): a filter
# rendered with some 30 levels of alternating AND/OR or NOT (``visitor.nesting``)
# is refused (FORMAT.md §7), and a few hundred nested NOTs take it minutes. Up to
# this many, Lance surely reads it; a deeper one is planned by Lance first, so that
# a refusal is a FilterError before any read.
_NESTING_LANCE_SURELY_READS = 12


def _check_nesting(expr: Expr, schema: Schema) -> None:
    try:
        _plan_with_lance(to_lance_sql(expr), schema)
    except FilterError as exc:
        if "recursion limit" not in str(exc):
            raise
        raise FilterError(
            f"the filter nests AND, OR and NOT {nesting(expr)} levels deep, deeper than "
            "Lance's SQL parser reads (its recursion limit; some 30 levels of "
            "alternating AND/OR or NOT): write it with fewer nested levels (a chain "
            "'a OR b OR …' or an IN list of any length is one level)"
        ) from exc


class _ValueUnderNots(FilterVisitor[Expr | None]):
    """The literal a filter is, under any NOTs (None when it is a condition of rows)."""

    def visit_and(self, node, left, right):
        return None

    visit_or = visit_and

    def visit_not(self, node: Not, child: Expr | None) -> Expr | None:
        return child

    def visit_literal(self, node: Literal) -> Expr | None:
        return node

    def visit_leaf(self, node: Expr) -> Expr | None:
        return None


def _check_condition(expr: Expr) -> None:
    """The filter as a whole (through NOT) must be a condition, not a value."""
    top = visit(expr, _ValueUnderNots())
    if isinstance(top, Literal) and not isinstance(top.value, bool):
        shown = "NULL" if top.value is None else repr(top.value)
        raise FilterError(
            f"filter {shown} is not a condition: a filter must be a boolean expression "
            "(NULL would match no row; write 'false' for that, 'true' for every row)"
        )


# In-memory empty tables by namespace schema (JSON), to plan filters on.
_empty: BoundedCache = caches.register("filter_check.empty_tables", BoundedCache(maxsize=64))


def _empty_table(schema: Schema) -> lance.LanceDataset:
    key = schema.to_json_str()
    hit = _empty.get(key)
    if hit is None:
        arrow = without_field_id_metadata(pa.schema(list(schema.arrow)))
        # in memory only, discarded with the cache: never storage, never the namespace
        hit = lance.write_dataset(arrow.empty_table(), f"memory://lp-filter-{uuid.uuid4().hex}")
        _empty.put(key, hit)
    return hit


# (filter SQL, schema JSON) pairs Lance has planned without error. Planning is a
# pure function of the two, and costs a few ms per scan: as much as pruning a
# namespace, so a query repeated against one schema plans once.
_planned: BoundedCache = caches.register("filter_check.planned", BoundedCache(maxsize=1024))


def _plan_with_lance(sql: str, schema: Schema) -> None:
    key = (sql, schema.to_json_str())
    if key in _planned:
        return
    try:
        _empty_table(schema).count_rows(filter=sql)
    except Exception as exc:  # Lance raises OSError/ValueError for filters it cannot plan
        raise FilterError(
            f"filter {sql!r} cannot be evaluated on the namespace's columns: {lance_message(exc)}"
        ) from exc
    _planned.put(key, True)
