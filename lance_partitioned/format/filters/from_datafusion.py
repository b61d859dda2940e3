"""``datafusion.Expr`` -> filter AST.

:func:`from_datafusion` translates a DataFusion logical expression (columns
unqualified); structured predicates map to AST nodes and the rest to ``Opaque``.
"""

from __future__ import annotations

import re
from typing import Any

from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.filters import terms
from lance_partitioned.format.filters.depth import translation_room
from lance_partitioned.format.filters.from_pyarrow import scalar_to_py
from lance_partitioned.format.filters.literal_text import NOT_CASTABLE, fold_arrow_cast
from lance_partitioned.format.filters.terms import Term
from lance_partitioned.format.filters.tokens import RESERVED

_DF_SIMPLE_TYPES = {
    "Int8": "TINYINT",
    "Int16": "SMALLINT",
    "Int32": "INT",
    "Int64": "BIGINT",
    "UInt8": "TINYINT UNSIGNED",
    "UInt16": "SMALLINT UNSIGNED",
    "UInt32": "INT UNSIGNED",
    "UInt64": "BIGINT UNSIGNED",
    "Float32": "FLOAT",
    "Float64": "DOUBLE",
    "Boolean": "BOOLEAN",
    "Utf8": "STRING",
    "LargeUtf8": "STRING",
    "Utf8View": "STRING",
    "Binary": "BINARY",
    "LargeBinary": "BINARY",
    "BinaryView": "BINARY",
    "Date32": "DATE",
    "Date64": "DATE",
}


_DF_ZONED_TIMESTAMP_RE = re.compile(r'Timestamp\((\w+|µs),\s*"([^"]+)"\)')
_DF_UNITS = {"s": "Second", "ms": "Millisecond", "µs": "Microsecond", "us": "Microsecond"}
_DF_UNITS["ns"] = "Nanosecond"


def _df_type_sql(arrow_type_text: str) -> str:
    t = arrow_type_text.strip()
    if t in _DF_SIMPLE_TYPES:
        return _DF_SIMPLE_TYPES[t]
    if t.startswith("Timestamp("):
        return "TIMESTAMP"
    if t.startswith(("Time64(", "Time32(")):
        return "TIME"
    m = re.fullmatch(r"Decimal(?:32|64|128|256)\((\d+),\s*(-?\d+)\)", t)
    if m:
        return f"DECIMAL({m[1]},{m[2]})"
    raise ValueError(f"no SQL spelling for a cast to DataFusion type {t}")


def _df_wrap(raw: Any) -> Any:
    from datafusion import Expr as DFExpr

    return raw if isinstance(raw, DFExpr) or raw is None else DFExpr(raw)


_DF_IS_VARIANTS = {
    "IsNull": "IS NULL",
    "IsNotNull": "IS NOT NULL",
    "IsTrue": "IS TRUE",
    "IsFalse": "IS FALSE",
    "IsUnknown": "IS UNKNOWN",
    "IsNotTrue": "IS NOT TRUE",
    "IsNotFalse": "IS NOT FALSE",
    "IsNotUnknown": "IS NOT UNKNOWN",
}


_COMPARISONS = {"=", "!=", "<", "<=", ">", ">="}
_REGEX_MATCHES = {"~", "~*", "!~", "!~*"}
_ARITHMETIC = {"+", "-", "*", "/", "%", "||", "&", "|", "^", "<<", ">>"}


def _binary(left: Term, op: str, right: Term) -> Term:
    """``(left op right)``."""
    if op in _COMPARISONS:
        inner = terms.compare(op, left, right)
    elif op in ("IS DISTINCT FROM", "IS NOT DISTINCT FROM"):
        inner = terms.distinct(left, right, negated=op == "IS NOT DISTINCT FROM")
    elif op in _REGEX_MATCHES:
        inner = terms.opaque(f"{left.sql} {op} {right.sql}", left, right)
    elif op in ("AND", "OR"):
        inner = terms.logical(op, left, right)
    elif op in _ARITHMETIC:
        inner = terms.other(f"{left.sql} {op} {right.sql}", left, right)
    else:
        raise ValueError(f"cannot translate the DataFusion operator {op!r}")
    return terms.paren(inner)


def _like(e: Any, variant: str) -> Term:
    v = e.to_variant()
    inner = _df_wrap(v.expr())
    rest = e.canonical_name()[len(inner.canonical_name()) :].lstrip()
    if variant in ("SimilarTo", "RLike") or rest.startswith(("SIMILAR TO", "NOT SIMILAR TO")):
        op = "SIMILAR TO"
    elif variant == "ILike" or rest.startswith(("ILIKE", "NOT ILIKE")):
        op = "ILIKE"
    else:
        op = "LIKE"
    target, pattern = _term(inner), _term(_df_wrap(v.pattern()))
    return terms.paren(terms.like(target, op, pattern, v.negated(), v.escape_char()))


def _cast(e: Any, variant: str) -> Term:
    operand = _term(_df_wrap(e.to_variant().expr()))
    type_text = e.canonical_name().rsplit(" AS ", 1)[1][:-1]
    zoned = _DF_ZONED_TIMESTAMP_RE.fullmatch(type_text.strip())
    if zoned and variant == "Cast":
        # SQL's TIMESTAMP has no zone: keep it, in the spelling Lance accepts
        unit = _DF_UNITS.get(zoned[1], zoned[1])
        return _call(
            "arrow_cast", [operand, terms.literal(f'Timestamp({unit}, Some("{zoned[2]}"))')]
        )
    keyword = "CAST" if variant == "Cast" else "TRY_CAST"
    return terms.cast(operand, _df_type_sql(type_text), keyword)


def _call(name: str, args: list[Term]) -> Term:
    """``name(args)``; ``arrow_cast`` of two literals folds to a literal when it can."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name.upper() in RESERVED:
        raise ValueError(f"cannot translate DataFusion function {name!r}")
    sql = f"{name}({', '.join(a.sql for a in args)})"
    if name.lower() == "arrow_cast" and len(args) == 2 and all(a.kind == "lit" for a in args):
        value = fold_arrow_cast(args[0].value, args[1].value)
        if value is not NOT_CASTABLE:
            return Term("lit", sql, value=value)
    return terms.other(sql, *args)


def _case(e: Any) -> Term:
    v = e.to_variant()
    parts: list[Term] = []
    words = ["CASE"]
    base = v.expr()
    if base is not None:
        parts.append(_term(_df_wrap(base)))
        words.append(parts[-1].sql)
    for when, then in v.when_then_expr():
        w, t = _term(_df_wrap(when)), _term(_df_wrap(then))
        parts += [w, t]
        words.append(f"WHEN {w.sql} THEN {t.sql}")
    other = v.else_expr()
    if other is not None:
        parts.append(_term(_df_wrap(other)))
        words.append(f"ELSE {parts[-1].sql}")
    words.append("END")
    return terms.paren(terms.other(" ".join(words), *parts))


def _term(e: Any) -> Term:
    """One datafusion.Expr node (column names unqualified)."""
    variant = e.variant_name()
    if variant == "Column":
        return terms.column(e.to_variant().name())
    if variant == "Literal":
        return terms.literal(scalar_to_py(e.python_value()))
    if variant == "Alias":
        return _term(_df_wrap(e.to_variant().expr()))
    if variant == "BinaryExpr":
        v = e.to_variant()
        return _binary(_term(_df_wrap(v.left())), v.op(), _term(_df_wrap(v.right())))
    if variant == "Not":
        child = _term(_df_wrap(e.to_variant().expr()))
        return terms.paren(terms.negation(child, parenthesize=False))
    if variant == "Negative":
        return terms.negative(_term(_df_wrap(e.to_variant().expr())))
    if variant in ("IsNull", "IsNotNull"):
        return terms.paren(
            terms.is_null(_term(_df_wrap(e.to_variant().expr())), variant == "IsNotNull")
        )
    if variant in _DF_IS_VARIANTS:
        target = _term(_df_wrap(e.to_variant().expr()))
        return terms.paren(terms.opaque(f"{target.sql} {_DF_IS_VARIANTS[variant]}", target))
    if variant == "Between":
        v = e.to_variant()
        target, low, high = (_term(_df_wrap(x)) for x in (v.expr(), v.low(), v.high()))
        return terms.paren(terms.between(target, low, high, v.negated()))
    if variant == "InList":
        v = e.to_variant()
        items = [_term(_df_wrap(x)) for x in v.list()]
        return terms.paren(terms.in_list(_term(_df_wrap(v.expr())), items, v.negated()))
    if variant in ("Like", "ILike", "SimilarTo", "RLike"):
        return _like(e, variant)
    if variant in ("Cast", "TryCast"):
        return _cast(e, variant)
    if variant == "ScalarFunction":
        return _call(e.rex_call_operator(), [_term(a) for a in e.rex_call_operands()])
    if variant == "Case":
        return _case(e)
    raise ValueError(f"cannot translate DataFusion {variant} expression: {e.canonical_name()}")


def from_datafusion(expr: Any) -> Expr:
    """Translate a ``datafusion.Expr`` into the filter AST, node by node.

    Column, Literal, BinaryExpr (comparisons, AND/OR, arithmetic), Not,
    Negative, IS [NOT] NULL/TRUE/FALSE/UNKNOWN, Between, InList, Like/ILike,
    Cast/TryCast, Case and scalar function calls are translated (columns
    unqualified): the structured parts map to AST nodes, giving the AST
    ``parse_filter`` gives for the same SQL, and the rest becomes ``Opaque``
    with valid SQL. Other variants (subqueries, aggregates, window functions,
    placeholders, ...) raise ValueError.
    """
    from datafusion import Expr as DFExpr

    if not isinstance(expr, DFExpr):
        raise TypeError(f"expected a datafusion.Expr, got {type(expr).__name__}")
    with translation_room("DataFusion"):
        return terms.as_bool(_term(expr))
