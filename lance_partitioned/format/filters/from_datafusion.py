"""``datafusion.Expr`` -> filter AST.

:func:`from_datafusion` translates a DataFusion logical expression (columns
unqualified); structured predicates map to AST nodes and the rest to ``Opaque``.
"""

from __future__ import annotations

import re
from typing import Any

from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.filters.from_pyarrow import scalar_to_py
from lance_partitioned.format.filters.parse import parse_filter
from lance_partitioned.format.filters.render import quote_identifier, render_literal

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


def _df_sql(e: Any) -> str:
    """SQL text for a datafusion.Expr (column names unqualified)."""
    variant = e.variant_name()
    if variant == "Column":
        return quote_identifier(e.to_variant().name())
    if variant == "Literal":
        return render_literal(scalar_to_py(e.python_value()))
    if variant == "Alias":
        return _df_sql(_df_wrap(e.to_variant().expr()))
    if variant == "BinaryExpr":
        v = e.to_variant()
        return f"({_df_sql(_df_wrap(v.left()))} {v.op()} {_df_sql(_df_wrap(v.right()))})"
    if variant == "Not":
        return f"(NOT {_df_sql(_df_wrap(e.to_variant().expr()))})"
    if variant == "Negative":
        return f"(-{_df_sql(_df_wrap(e.to_variant().expr()))})"
    if variant in _DF_IS_VARIANTS:
        return f"({_df_sql(_df_wrap(e.to_variant().expr()))} {_DF_IS_VARIANTS[variant]})"
    if variant == "Between":
        v = e.to_variant()
        op = "NOT BETWEEN" if v.negated() else "BETWEEN"
        return (
            f"({_df_sql(_df_wrap(v.expr()))} {op} {_df_sql(_df_wrap(v.low()))}"
            f" AND {_df_sql(_df_wrap(v.high()))})"
        )
    if variant == "InList":
        v = e.to_variant()
        items = ", ".join(_df_sql(_df_wrap(x)) for x in v.list())
        op = "NOT IN" if v.negated() else "IN"
        return f"({_df_sql(_df_wrap(v.expr()))} {op} ({items}))"
    if variant in ("Like", "ILike", "SimilarTo", "RLike"):
        v = e.to_variant()
        inner = _df_wrap(v.expr())
        rest = e.canonical_name()[len(inner.canonical_name()) :].lstrip()
        if variant in ("SimilarTo", "RLike") or rest.startswith(("SIMILAR TO", "NOT SIMILAR TO")):
            op = "SIMILAR TO"
        elif variant == "ILike" or rest.startswith(("ILIKE", "NOT ILIKE")):
            op = "ILIKE"
        else:
            op = "LIKE"
        text = (
            f"{_df_sql(inner)} {'NOT ' if v.negated() else ''}{op} {_df_sql(_df_wrap(v.pattern()))}"
        )
        escape = v.escape_char()
        if escape is not None:
            text += f" ESCAPE {render_literal(escape)}"
        return f"({text})"
    if variant in ("Cast", "TryCast"):
        v = e.to_variant()
        canonical = e.canonical_name()
        type_text = canonical.rsplit(" AS ", 1)[1][:-1]
        kw = "CAST" if variant == "Cast" else "TRY_CAST"
        zoned = _DF_ZONED_TIMESTAMP_RE.fullmatch(type_text.strip())
        if zoned and variant == "Cast":
            # SQL's TIMESTAMP has no zone: keep it, in the spelling Lance accepts
            unit = _DF_UNITS.get(zoned[1], zoned[1])
            arrow_type = f'Timestamp({unit}, Some("{zoned[2]}"))'
            return f"arrow_cast({_df_sql(_df_wrap(v.expr()))}, {render_literal(arrow_type)})"
        return f"{kw}({_df_sql(_df_wrap(v.expr()))} AS {_df_type_sql(type_text)})"
    if variant == "ScalarFunction":
        name = e.rex_call_operator()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"cannot translate DataFusion function {name!r}")
        args = ", ".join(_df_sql(a) for a in e.rex_call_operands())
        return f"{name}({args})"
    if variant == "Case":
        v = e.to_variant()
        parts = ["CASE"]
        base = v.expr()
        if base is not None:
            parts.append(_df_sql(_df_wrap(base)))
        for when, then in v.when_then_expr():
            parts.append(f"WHEN {_df_sql(_df_wrap(when))} THEN {_df_sql(_df_wrap(then))}")
        other = v.else_expr()
        if other is not None:
            parts.append(f"ELSE {_df_sql(_df_wrap(other))}")
        parts.append("END")
        return "(" + " ".join(parts) + ")"
    raise ValueError(f"cannot translate DataFusion {variant} expression: {e.canonical_name()}")


def from_datafusion(expr: Any) -> Expr:
    """Translate a ``datafusion.Expr`` (best effort).

    Column, Literal, BinaryExpr (comparisons, AND/OR, arithmetic), Not,
    Negative, IS [NOT] NULL/TRUE/FALSE/UNKNOWN, Between, InList, Like/ILike,
    Cast/TryCast, Case and scalar function calls are rendered to SQL (columns
    unqualified) and parsed with ``parse_filter``, so the structured parts map
    to AST nodes and the rest becomes ``Opaque`` with valid SQL. Other variants
    (subqueries, aggregates, window functions, placeholders, ...) raise
    ValueError.
    """
    from datafusion import Expr as DFExpr

    if not isinstance(expr, DFExpr):
        raise TypeError(f"expected a datafusion.Expr, got {type(expr).__name__}")
    return parse_filter(_df_sql(expr))
