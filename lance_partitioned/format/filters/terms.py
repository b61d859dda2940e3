"""Building the filter AST from another library's expression tree, node by node.

:mod:`.from_pyarrow` and :mod:`.from_datafusion` translate each node of a
foreign expression into a :class:`Term`: a column, a literal, a boolean
expression already in AST form, or any other value. A term keeps the SQL text
of its node, because whatever the AST cannot express becomes an ``Opaque``
predicate carrying that text (column names spelled by ``quote_identifier``,
literals by ``render_literal``). The combinators here classify exactly as
:mod:`.parse` classifies the same SQL, so a foreign expression and its SQL
spelling give the same AST.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Any

from lance_partitioned.format.expressions import (
    FLIPPED_OP,
    And,
    Compare,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    Ref,
    distinct_from,
)
from lance_partitioned.format.filters.literal_text import NOT_CASTABLE, fold_cast
from lance_partitioned.format.filters.render import literal_value, quote_identifier, render_literal


@dataclass(frozen=True)
class Term:
    """One translated node: ``kind`` is ``ref`` (a column), ``lit`` (a literal,
    ``value``), ``bool`` (``expr`` is its AST) or ``value`` (anything else;
    ``expr`` is its ``Opaque`` form when it was parenthesized). ``sql`` is its
    text and ``columns`` the columns it reads, in order of appearance."""

    kind: str
    sql: str
    columns: tuple[str, ...] = ()
    ref: Ref | None = None
    value: Any = None
    expr: Expr | None = None


def merge_columns(*terms: Term) -> tuple[str, ...]:
    """The columns of ``terms``, each once, in order of appearance."""
    out: list[str] = []
    for t in terms:
        for c in t.columns:
            if c not in out:
                out.append(c)
    return tuple(out)


def column(name: str) -> Term:
    """A column reference."""
    if not name:
        raise ValueError("empty column name")
    return Term("ref", quote_identifier(name), (name,), ref=Ref(name))


def literal(value: Any) -> Term:
    """A literal, held as the value its SQL spelling reads back as."""
    return Term("lit", render_literal(value), value=literal_value(value))


def boolean(expr: Expr, sql: str, columns: tuple[str, ...]) -> Term:
    return Term("bool", sql, columns, expr=expr)


def other(sql: str, *parts: Term) -> Term:
    """A value the AST cannot express (arithmetic, a function call, ...)."""
    return Term("value", sql, merge_columns(*parts))


def opaque(sql: str, *parts: Term) -> Term:
    """A predicate the AST cannot express."""
    columns = merge_columns(*parts)
    return Term("bool", sql, columns, expr=Opaque(sql=sql, columns=columns))


def paren(t: Term) -> Term:
    """``(t)``: the same term; a value remembers its text as ``Opaque``."""
    expr = t.expr
    if t.kind == "value" and expr is None:
        expr = Opaque(sql=t.sql, columns=t.columns)
    return Term(t.kind, f"({t.sql})", t.columns, t.ref, t.value, expr)


def as_bool(t: Term) -> Expr:
    """``t`` used as a predicate: a column means ``col = TRUE``; a literal must be
    boolean or NULL."""
    if t.kind == "bool":
        assert t.expr is not None
        return t.expr
    if t.kind == "ref":
        assert t.ref is not None
        return Compare("=", t.ref, Literal(True))
    if t.kind == "lit":
        if t.value is None or isinstance(t.value, bool):
            return Literal(t.value)
        raise ValueError(f"expected a boolean expression, found the literal {t.sql}")
    if t.expr is not None:
        return t.expr
    return Opaque(sql=t.sql, columns=t.columns)


def logical(op: str, left: Term, right: Term) -> Term:
    """``left AND right`` / ``left OR right`` (the caller adds parentheses)."""
    node = And if op == "AND" else Or
    sql = f"{left.sql} {op} {right.sql}"
    return boolean(node(as_bool(left), as_bool(right)), sql, merge_columns(left, right))


def negation(child: Term, parenthesize: bool) -> Term:
    """``NOT (child)`` (``NOT child`` when the child brings its own parentheses)."""
    sql = f"NOT ({child.sql})" if parenthesize else f"NOT {child.sql}"
    return boolean(Not(as_bool(child)), sql, child.columns)


def compare(op: str, left: Term, right: Term) -> Term:
    """``left op right`` for a comparison operator (``=``, ``!=``, ``<``, ...)."""
    sql = f"{left.sql} {op} {right.sql}"
    columns = merge_columns(left, right)
    if left.kind == "ref" and right.kind == "lit":
        return boolean(Compare(op, left.ref, Literal(right.value)), sql, columns)  # type: ignore[arg-type]
    if left.kind == "lit" and right.kind == "ref":
        expr = Compare(FLIPPED_OP[op], right.ref, Literal(left.value))  # type: ignore[arg-type]
        return boolean(expr, sql, columns)
    return opaque(sql, left, right)


def distinct(left: Term, right: Term, negated: bool) -> Term:
    """``left IS [NOT] DISTINCT FROM right`` (``negated``: ``IS NOT``); a column against
    a literal is desugared as the parser does (``distinct_from``)."""
    sql = f"{left.sql} IS {'NOT ' if negated else ''}DISTINCT FROM {right.sql}"
    kinds = (left.kind, right.kind)
    if kinds in (("ref", "lit"), ("lit", "ref")):
        ref, lit = (left, right) if kinds == ("ref", "lit") else (right, left)
        expr = distinct_from(ref.ref, lit.value, not negated)  # type: ignore[arg-type]
        return boolean(expr, sql, merge_columns(left, right))
    return opaque(sql, left, right)


def is_null(target: Term, negated: bool) -> Term:
    """``target IS [NOT] NULL``."""
    sql = f"{target.sql} IS {'NOT NULL' if negated else 'NULL'}"
    if target.kind == "ref":
        return boolean(IsNull(target.ref, negated), sql, target.columns)  # type: ignore[arg-type]
    return opaque(sql, target)


def in_list(target: Term, items: list[Term], negated: bool) -> Term:
    """``target [NOT] IN (items)``; items must not be empty."""
    if not items:
        raise ValueError("IN list is empty")
    sql = f"{target.sql} {'NOT IN' if negated else 'IN'} ({', '.join(i.sql for i in items)})"
    if target.kind == "ref" and all(i.kind == "lit" for i in items):
        values = tuple(Literal(i.value) for i in items)
        return boolean(In(target.ref, values, negated), sql, target.columns)  # type: ignore[arg-type]
    return opaque(sql, target, *items)


def between(target: Term, low: Term, high: Term, negated: bool) -> Term:
    """``target [NOT] BETWEEN low AND high`` (as two comparisons when it can be)."""
    op = "NOT BETWEEN" if negated else "BETWEEN"
    sql = f"{target.sql} {op} {low.sql} AND {high.sql}"
    ref = target.ref
    if target.kind == "ref" and low.kind == "lit" and high.kind == "lit" and ref is not None:
        lo, hi = Literal(low.value), Literal(high.value)
        if negated:
            expr: Expr = Or(Compare("<", ref, lo), Compare(">", ref, hi))
        else:
            expr = And(Compare(">=", ref, lo), Compare("<=", ref, hi))
        return boolean(expr, sql, merge_columns(target, low, high))
    return opaque(sql, target, low, high)


def like(target: Term, op: str, pattern: Term, negated: bool, escape: str | None = None) -> Term:
    """``target [NOT] LIKE|ILIKE|SIMILAR TO pattern [ESCAPE 'e']``; only a plain
    ``LIKE`` of a column against a string literal is a ``Like`` node."""
    sql = f"{target.sql} {'NOT ' if negated else ''}{op} {pattern.sql}"
    if escape is not None:
        sql += f" ESCAPE {render_literal(escape)}"
    plain = op == "LIKE" and escape is None and target.kind == "ref"
    if plain and pattern.kind == "lit" and isinstance(pattern.value, str):
        return boolean(Like(target.ref, pattern.value, negated), sql, target.columns)  # type: ignore[arg-type]
    return opaque(sql, target, pattern)


def negative(operand: Term) -> Term:
    """``(-operand)``: a numeric literal stays a literal."""
    inner = operand.sql
    # "--" would start a comment
    sql = f"(- {inner})" if inner.startswith("-") else f"(-{inner})"
    v = operand.value
    numeric = isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)
    if operand.kind == "lit" and numeric:
        return Term("lit", sql, value=-v)
    return paren(other(sql[1:-1], operand))


def cast(operand: Term, type_sql: str, keyword: str = "CAST") -> Term:
    """``CAST(operand AS type_sql)``, folded to a literal when ``operand`` is one
    and the conversion is exact; ``TRY_CAST`` is never folded."""
    sql = f"{keyword}({operand.sql} AS {type_sql})"
    name, _, rest = type_sql.partition("(")
    words = name.split()
    params_text = rest.rstrip(")").split(",") if rest else []
    params = [int(p) for p in params_text]
    if any(p < 0 for p in params):
        raise ValueError(f"no SQL spelling for a cast to {type_sql}")
    if keyword == "CAST" and operand.kind == "lit":
        try:
            value = fold_cast(operand.value, words, params)
        except (ValueError, ArithmeticError) as exc:
            raise ValueError(f"cannot cast {operand.sql} to {' '.join(words)}: {exc}") from None
        if value is not NOT_CASTABLE:
            return Term("lit", sql, value=value)
    return other(sql, operand)
