"""Row-filter expressions: the small predicate AST that pruning and scans share.

A filter arrives as SQL text (or a pyarrow / DataFusion expression) and is parsed
into these nodes. Pruning projects them through partition transforms; scans
render whatever cannot be decided by the partition values back to SQL for
Lance's own filter. Nodes are immutable and hashable.

Normal form produced by the parser:
- a comparison always has the column on the left (``5 < x`` becomes ``x > 5``);
- ``BETWEEN`` is desugared to ``>=`` AND ``<=``, and ``IS [NOT] DISTINCT FROM`` a
  literal to a comparison and a NULL test (``distinct_from``), so that every
  operator follows the same literal rules;
- a calendar field of a column compared with literals (``year(ts) = 2013``,
  ``date_part('month', ts) IN (1, 2)``) is a ``DatePart``;
- anything else the AST cannot represent exactly (other functions, column-to-column
  comparisons, arithmetic) becomes ``Opaque`` with its original SQL text, which
  pruning treats as "unknown" and scans still apply.

Walks over the tree (NNF, rendering, binding, projection) are visitors:
``format.filters.visitor``, which also holds ``conjuncts`` and
``referenced_columns``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=")
FLIPPED_OP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
NEGATED_OP = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


class Expr:
    """Base class of filter expressions."""

    def __and__(self, other: Expr) -> Expr:
        return And(self, other)

    def __or__(self, other: Expr) -> Expr:
        return Or(self, other)

    def __invert__(self) -> Expr:
        return Not(self)


@dataclass(frozen=True)
class Ref(Expr):
    """A reference to a column, or to a field nested in struct columns.

    ``name`` is the top-level column and ``path`` the struct fields below it:
    ``s.b.c`` is ``Ref("s", path=("b", "c"))``. As parsed, a reference has only
    names. ``bind`` (``format.filters.bind``) sets ``field_id`` to the namespace
    field id of the field it names (a nested field's own id): pruning then finds
    the partition fields of a column by their source field id, which survives
    renames, and only rendering to SQL reads the names. A bound and an unbound
    reference to the same column are different nodes.
    """

    name: str
    field_id: int | None = None
    path: tuple[str, ...] = ()

    @property
    def column(self) -> tuple[str, ...]:
        """The whole path: the column's name, then the struct fields."""
        return (self.name, *self.path)

    @property
    def dotted(self) -> str:
        """The path as messages show it: ``s.b.c``."""
        return ".".join(self.column)


def strip_qualifiers(parts: tuple[str, ...], is_column: Callable[[str], bool]) -> tuple[str, ...]:
    """A dotted name's parts without leading table qualifiers: ``t.col`` is column
    ``col`` when ``t`` is no column (``is_column``) and ``col`` is; otherwise the
    parts name a field nested in struct column ``parts[0]``, as in Lance's SQL.
    A top-level name never holds a dot (``schema.check_column_names``)."""
    for i in range(len(parts) - 1):
        if is_column(parts[i]):
            return parts[i:]
    return parts[-1:] if is_column(parts[-1]) else parts


@dataclass(frozen=True)
class Literal(Expr):
    """A constant. ``value`` is a plain Python value: None, bool, int, float,
    str, bytes, decimal.Decimal, datetime.date, datetime.datetime or datetime.time.
    A datetime with tzinfo is an instant; a naive one is a wall-clock value."""

    value: Any


@dataclass(frozen=True)
class Compare(Expr):
    """``ref <op> literal`` with op in COMPARISON_OPS. SQL semantics: NULL never matches."""

    op: str
    ref: Ref
    literal: Literal


@dataclass(frozen=True)
class In(Expr):
    """``ref [NOT] IN (v1, v2, ...)``."""

    ref: Ref
    values: tuple[Literal, ...]
    negated: bool = False


@dataclass(frozen=True)
class IsNull(Expr):
    """``ref IS [NOT] NULL``."""

    ref: Ref
    negated: bool = False


@dataclass(frozen=True)
class Like(Expr):
    """``ref [NOT] LIKE 'pattern'`` with SQL ``%`` and ``_`` wildcards."""

    ref: Ref
    pattern: str
    negated: bool = False


DATE_PART_UNITS = ("year", "month", "day", "hour")


@dataclass(frozen=True)
class DatePart(Expr):
    """A predicate on a calendar field of a column: ``pred`` (a ``Compare`` or ``In``
    on the column) applied to ``date_part('<unit>', column)`` instead of the column.

    ``unit`` is one of DATE_PART_UNITS, with seed 000's and DataFusion's meaning:
    the calendar year (2013, not years since 1970), month 1-12, day of month
    1-31, hour 0-23, of a zoned timestamp in its own zone (as the time
    transforms read it, docs/FORMAT.md §7). ``bind`` turns a bound ``year``
    comparison into the range of the column it means where that is exact.
    """

    unit: str
    pred: Compare | In

    @property
    def ref(self) -> Ref:
        """The column whose calendar field is tested."""
        return self.pred.ref


@dataclass(frozen=True)
class And(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Or(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not(Expr):
    child: Expr


@dataclass(frozen=True)
class Opaque(Expr):
    """A predicate we do not analyse; ``sql`` is valid DataFusion SQL.

    ``columns`` names the columns it reads, when known, so that a caller can
    tell whether it touches partition sources at all.
    """

    sql: str
    columns: tuple[str, ...] = ()


TRUE = Literal(True)


def distinct_from(ref: Ref, value: Any, distinct: bool) -> Expr:
    """``ref IS DISTINCT FROM value`` (``distinct``) or ``IS NOT DISTINCT FROM``, as
    the comparison and NULL test it means, so that the literal follows the rules of
    ``=`` (FORMAT.md §7) and pruning sees plain predicates.

    ``IS NOT DISTINCT FROM v`` is ``ref = v AND ref IS NOT NULL`` and ``IS DISTINCT
    FROM v`` is ``ref != v OR ref IS NULL``: never NULL, as the operator is, so a
    ``NOT`` around either also agrees. Against NULL they are ``IS NULL`` / ``IS NOT
    NULL``.
    """
    if value is None:
        return IsNull(ref, negated=distinct)
    if distinct:
        return Or(Compare("!=", ref, Literal(value)), IsNull(ref))
    return And(Compare("=", ref, Literal(value)), IsNull(ref, negated=True))


def balanced(node: type[And] | type[Or], items: Sequence[Expr]) -> Expr:
    """``items`` joined left to right by ``node`` (``And`` or ``Or``) as a balanced tree.

    Neighbours are paired, then the pairs, and so on: a chain of n operands is
    log2(n) deep, so a filter of 10,000 ORs is 14 levels, and no walk over it nears
    Python's recursion limit. The tree depends only on ``items`` (up to three it is
    the left-deep ``(a op b) op c``), so SQL text rendered from it, a flat chain,
    parses back to the same tree. AND and OR are associative in SQL's three-valued
    logic, so every shape means the same.
    """
    if not items:
        raise ValueError(f"no operands to join with {node.__name__}")
    level = list(items)
    while len(level) > 1:
        paired = [node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def merge_equalities(items: Sequence[Expr]) -> list[Expr]:
    """The operands of an OR chain with the equalities and IN lists on each column
    joined into one IN list, where the first of them stood: ``x = 1 OR y = 2 OR x IN
    (3, 4)`` becomes ``x IN (1, 3, 4) OR y = 2``.

    SQL defines ``x IN (a, b)`` as ``x = a OR x = b`` (NULL included), and OR is
    commutative, so the meaning is the same. A list of ids written as 10,000 ORs is
    one IN list for pruning, and for Lance, which plans an IN list some ten times
    faster than the chain. A column with one equality keeps it as written.
    """
    groups: dict[Ref, list[Expr]] = {}
    order: list[tuple[Ref | None, Expr | None]] = []  # (column, None) stands for its group
    for item in items:
        equality = (isinstance(item, Compare) and item.op == "=") or (
            isinstance(item, In) and not item.negated
        )
        if not equality:
            order.append((None, item))
            continue
        ref = item.ref  # type: ignore[attr-defined]
        if ref not in groups:
            groups[ref] = []
            order.append((ref, None))
        groups[ref].append(item)
    out: list[Expr] = []
    for ref, item in order:
        if ref is None:
            out.append(item)  # type: ignore[arg-type]
            continue
        group = groups[ref]
        values = [v for e in group for v in (e.values if isinstance(e, In) else (e.literal,))]  # type: ignore[attr-defined]
        out.append(group[0] if len(group) == 1 else In(ref, tuple(values)))
    return out


def and_all(exprs: Sequence[Expr]) -> Expr:
    """AND a list of expressions together (TRUE when empty), as a balanced tree."""
    return balanced(And, exprs) if exprs else TRUE
