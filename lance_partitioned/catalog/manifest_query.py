"""The ``__manifest`` queries: which rows are leaf tables, which belong to a spec version,
and which partitions a filter may match.

Pruning (``format.pruning``) is pure: it turns a row filter into one predicate
on partition columns per spec version. This module is where that meets the
``__manifest`` layout: the ``object_type`` column, and object ids that start with
their spec version namespace (``layout.spec_members_like``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lance_partitioned.catalog import layout
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.filters.render import render_literal, to_sql

TABLE_ROWS = "object_type = 'table'"
NAMESPACE_ROWS = "object_type = 'namespace'"


def where(kind: str, condition: str | None = None) -> str:
    """``kind`` (``TABLE_ROWS`` or ``NAMESPACE_ROWS``) AND ``condition``, when there is one."""
    return kind + (f" AND ({condition})" if condition else "")


def object_ids_in(object_ids: Sequence[str]) -> str:
    """Rows whose ``object_id`` is one of ``object_ids`` (answered by its index)."""
    return f"object_id IN ({', '.join(render_literal(o) for o in object_ids)})"


def spec_members(spec_id: int) -> str:
    """Rows whose object id lies under spec version ``spec_id``'s namespace (``v<N>$…``).

    Spelled ``left(object_id, n) = 'v<N>$'`` rather than a ``LIKE`` on that prefix: Lance
    answers a LIKE prefix from the ``object_id`` index as a range over every row
    of the spec (two million at a million partitions), which costs more than all
    the rest of a plan; ``left(...)`` stays a refine filter applied to the few rows
    the partition column indexes select (``catalog.manifest_index``).
    """
    prefix = layout.spec_members_like(spec_id).removesuffix("%")
    return f"left(object_id, {len(prefix)}) = {render_literal(prefix)}"


def partitions_matching(predicates: Mapping[int, Expr | None]) -> str | None:
    """SQL over ``__manifest`` table rows for per-spec partition predicates.

    ``predicates`` maps every spec version to the predicate its partition values
    must meet, or None when that spec prunes nothing. The result is the OR over
    spec versions (in spec id order) of ``spec_members(N) AND (predicate)``; None
    means every table row, which is also the answer when no spec prunes. Callers
    add ``TABLE_ROWS`` (``Snapshot.leaves`` does).
    """
    branches = []
    any_pruned = False
    for sid in sorted(predicates):
        members = spec_members(sid)
        predicate = predicates[sid]
        if predicate is None:
            branches.append(members)
        else:
            any_pruned = True
            branches.append(f"({members} AND ({to_sql(predicate)}))")
    if not any_pruned:
        return None
    return branches[0] if len(branches) == 1 else "(" + " OR ".join(branches) + ")"
