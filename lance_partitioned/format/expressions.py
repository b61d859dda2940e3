"""Row-filter expressions: the small predicate AST that pruning and scans share.

A filter arrives as SQL text (or a pyarrow / DataFusion expression) and is parsed
into these nodes. Pruning projects them through partition transforms; scans
render whatever cannot be decided by the partition values back to SQL for
Lance's own filter. Nodes are immutable and hashable.

Normal form produced by the parser:
- a comparison always has the column on the left (``5 < x`` becomes ``x > 5``);
- ``BETWEEN`` is desugared to ``>=`` AND ``<=``;
- anything the AST cannot represent exactly (functions, column-to-column
  comparisons, arithmetic) becomes ``Opaque`` with its original SQL text, which
  pruning treats as "unknown" and scans still apply.
"""

from __future__ import annotations

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
    """A reference to a top-level column by name."""

    name: str


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


def conjuncts(expr: Expr) -> list[Expr]:
    """Flatten nested ANDs into a list."""
    if isinstance(expr, And):
        return conjuncts(expr.left) + conjuncts(expr.right)
    return [expr]


def and_all(exprs: list[Expr]) -> Expr:
    """AND a list of expressions together (TRUE when empty)."""
    if not exprs:
        return TRUE
    out = exprs[0]
    for e in exprs[1:]:
        out = And(out, e)
    return out


def referenced_columns(expr: Expr) -> set[str]:
    """Names of every column an expression reads."""
    if isinstance(expr, Ref):
        return {expr.name}
    if isinstance(expr, (Compare, In, IsNull, Like)):
        return {expr.ref.name}
    if isinstance(expr, (And, Or)):
        return referenced_columns(expr.left) | referenced_columns(expr.right)
    if isinstance(expr, Not):
        return referenced_columns(expr.child)
    if isinstance(expr, Opaque):
        return set(expr.columns)
    return set()
