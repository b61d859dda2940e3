"""A scan's filter: from what a caller passes to an expression bound to the namespace.

``prepare_filter`` is the one way a read turns a filter into what it plans with:
parsed, bound to the schema by field id, checked against what Lance can
evaluate, and projected onto every spec's partition columns.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, Union

import pyarrow.compute as pc

from lance_partitioned.catalog.manifest_query import partitions_matching
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import FilterError
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.filters.bind import bind
from lance_partitioned.format.filters.from_datafusion import from_datafusion
from lance_partitioned.format.filters.from_pyarrow import from_pyarrow
from lance_partitioned.format.filters.parse import parse_filter
from lance_partitioned.format.filters.render import to_sql
from lance_partitioned.format.filters.tokens import FilterParseError
from lance_partitioned.format.pruning import partition_predicates
from lance_partitioned.operations.read.filter_check import check_filter

# Union[] rather than ``|``: the DataFusion member is a forward reference, since
# DataFusion is imported lazily, only when a filter needs it.
FilterLike: TypeAlias = Union[str, pc.Expression, "datafusion.Expr", Expr, None]
"""A row filter: Lance SQL text, a pyarrow compute or DataFusion expression, or a parsed AST."""

if TYPE_CHECKING:
    import datafusion


# How much of an untranslatable expression an error message quotes
SHOWN_FILTER_CHARS = 300


def parse_any_filter(filter: FilterLike, columns: Collection[str] | None = None) -> Expr | None:
    """The filter AST from SQL text, a pyarrow or DataFusion expression, or an AST.

    ``columns``: the namespace's column names, which tell a table qualifier
    (``t.col``) from a struct column (``s.a``) in SQL text (``parse_filter``)."""
    if filter is None:
        return None
    if isinstance(filter, Expr):
        return filter
    if isinstance(filter, str):
        if not filter.strip():
            return None
        try:
            return parse_filter(filter, columns)
        except FilterParseError as exc:
            raise FilterError(str(exc)) from exc
    mod = type(filter).__module__
    try:
        if mod.startswith("pyarrow"):
            expr = from_pyarrow(filter)
        elif mod.startswith("datafusion"):
            expr = from_datafusion(filter)
        else:
            raise FilterError(
                f"unsupported filter type {type(filter).__name__}: pass SQL text, a pyarrow "
                "compute Expression or a DataFusion Expr"
            )
    except (ValueError, NotImplementedError) as exc:
        shown = str(filter)
        if len(shown) > SHOWN_FILTER_CHARS:  # a generated filter may be 100,000s of characters
            shown = f"{shown[:SHOWN_FILTER_CHARS]}… ({len(shown):,} characters)"
        raise FilterError(f"cannot translate filter {shown}: {exc}") from exc
    return expr


class PreparedFilter(NamedTuple):
    """A filter bound to a snapshot's schema: the bound expression, its Lance SQL,
    and the ``__manifest`` condition selecting the partitions it may match (None:
    no filter)."""

    expr: Expr | None
    sql: str | None
    manifest_sql: str | None


# Bound filters kept per schema and specs (``Snapshot.prepared_filters``).
_PREPARED_LIMIT = 256


def prepare_filter(snapshot: Snapshot, filter: FilterLike) -> PreparedFilter:
    """Parse ``filter``, bind it to ``snapshot``'s schema, refuse what Lance could
    not evaluate, and project it onto the partition columns.

    A pure function of the filter and the namespace's schema and specs, so the
    result for filter text is kept with them (``Snapshot.prepared_filters``): a
    query repeated on an unchanged namespace skips this (a quarter of a small
    query's planning). Raises FilterError; errors are not kept.
    """
    key = filter if isinstance(filter, str) else None
    if key is not None:
        hit = snapshot.prepared_filters.get(key)
        if hit is not None:
            return hit
    expr = parse_any_filter(filter, snapshot.schema.names)
    if expr is not None:
        # Lance does not coerce text to dates, so leaves get the bound filter,
        # rendered with typed literals, rather than the caller's text.
        expr = bind(expr, snapshot.schema)
        # what Lance would refuse is refused here, before any read
        check_filter(expr, snapshot.schema)
    prepared = PreparedFilter(
        expr,
        None if expr is None else to_sql(expr),
        partitions_matching(partition_predicates(expr, snapshot.specs, snapshot.schema)),
    )
    if key is not None:
        if len(snapshot.prepared_filters) >= _PREPARED_LIMIT:
            snapshot.prepared_filters.clear()
        snapshot.prepared_filters[key] = prepared
    return prepared
