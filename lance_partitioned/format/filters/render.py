"""Filter AST -> SQL text that Lance's ``filter=`` (pylance 14) and DataFusion 55 accept.

:func:`to_sql` renders an AST, :func:`render_literal` one literal and
:func:`quote_identifier` one column name; ``parse_filter(to_sql(e)) == e`` for
every AST the parser produces. :func:`escape_like` makes text match itself
literally inside a ``LIKE`` pattern.

How Lance wants things spelled (found by experiment with pylance 14.0.2):

* identifiers in backticks (a backtick inside is doubled); ``"…"`` is a
  *string literal* to Lance, never an identifier. Unquoted names are not
  lower-cased by Lance but are by plain DataFusion, so only simple lower-case
  names are left bare;
* ``'strings'`` with ``''`` (a backslash is an ordinary character);
  ``DATE 'YYYY-MM-DD'``; ``TIMESTAMP 'YYYY-MM-DD HH:MM:SS[.ffffff]'`` for a
  naive value (against a zoned column Lance and DataFusion read it as wall-clock
  time in the column's zone); an instant (an aware datetime) renders as
  ``arrow_cast('YYYY-MM-DDTHH:MM:SS[.ffffff]Z', 'Timestamp(Microsecond,
  Some("UTC"))')``, because both fold the offset of ``TIMESTAMP '…+HH:MM'``
  into a naive value and read that in the column's zone, which names another
  instant; ``X'hex'`` for binary;
* a bare ``1.5`` is a Float64 that Lance refuses to coerce to a decimal or an
  integer column, so a ``Decimal`` renders as ``CAST('1.5' AS DECIMAL(2,1))``
  (from a string, so no float rounding), which works against decimal, float
  and integer columns; a ``float`` renders with an exponent (``1.5e0``);
* ``-9223372036854775808`` would be read as a float, so it renders as
  ``CAST('-9223372036854775808' AS BIGINT)``; timestamps outside 1678-2261
  render as ``CAST('…' AS TIMESTAMP(6))`` (DataFusion's ``TIMESTAMP '…'`` is
  nanoseconds);
* Lance's filter planner has no ``TIME`` type, no ``CASE``, no unary ``+`` and
  no ``LIKE … ESCAPE`` other than backslash; those parse (and render as valid
  DataFusion SQL) but Lance rejects them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any

from lance_partitioned.format.expressions import (
    COMPARISON_OPS,
    And,
    Compare,
    DatePart,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    Ref,
)
from lance_partitioned.format.filters.tokens import QUOTE_WORDS
from lance_partitioned.format.filters.visitor import FilterVisitor, visit

_SIMPLE_IDENT_RE = re.compile(r"[a-z_][a-z0-9_]*")


def quote_identifier(name: str) -> str:
    """Spell a column name for Lance / DataFusion: bare when it is a simple
    lower-case identifier that is not a keyword, otherwise in backticks (a
    backtick inside is doubled). Never double quotes: Lance reads ``"x"`` as a
    string literal."""
    if _SIMPLE_IDENT_RE.fullmatch(name) and name.upper() not in QUOTE_WORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


def ref_sql(ref: Ref) -> str:
    """A column reference for Lance / DataFusion: its name, then each struct field,
    joined by dots and each quoted as needed (``s.a``, ```Order Date`.x``)."""
    return ".".join(quote_identifier(part) for part in ref.column)


_INT64_MIN = -(2**63)
_UINT64_MAX = 2**64 - 1


def _render_decimal(value: decimal.Decimal) -> str:
    if not value.is_finite():
        raise ValueError(f"cannot render non-finite decimal {value}")
    _sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    integer_digits = len(digits) + exponent if exponent >= 0 else 0
    precision = max(len(digits) if exponent < 0 else integer_digits, scale, 1)
    if precision > 38:
        raise ValueError(f"decimal literal {value} needs more than 38 digits of precision")
    return f"CAST('{value:f}' AS DECIMAL({precision},{scale}))"


_ARROW_TIMESTAMP_UTC = "'Timestamp(Microsecond, Some(\"UTC\"))'"


def _render_datetime(value: dt.datetime) -> str:
    if value.utcoffset() is not None:
        # An instant. DataFusion (and so Lance) folds the offset of TIMESTAMP '…+hh:mm'
        # into a naive value that it then reads as wall-clock time in a zoned column's
        # zone, which names another instant; a zoned Arrow value is compared as an
        # instant against every column (measured on DataFusion 55 and pylance 14).
        utc = value.astimezone(dt.timezone.utc)
        text = f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}"
        if utc.microsecond:
            text += f".{utc.microsecond:06d}"
        return f"arrow_cast('{text}Z', {_ARROW_TIMESTAMP_UTC})"
    text = (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )
    if value.microsecond:
        text += f".{value.microsecond:06d}"
    if not 1678 <= value.year <= 2261:
        # DataFusion reads TIMESTAMP '…' as nanoseconds, which overflow outside
        # 1677-09-21 .. 2262-04-11; microsecond precision reaches every year.
        return f"CAST('{text}' AS TIMESTAMP(6))"
    return f"TIMESTAMP '{text}'"


def render_literal(value: Any) -> str:
    """One literal as SQL that Lance and DataFusion accept, such that
    ``parse_filter`` reads it back to an equal value."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        if value == _INT64_MIN:
            # "-9223372036854775808" is read as -(9223372036854775808) -> Float64
            return f"CAST('{value}' AS BIGINT)"
        if _INT64_MIN < value <= _UINT64_MAX:
            return str(value)
        if len(str(abs(value))) <= 38:
            return f"CAST('{value}' AS DECIMAL({len(str(abs(value)))},0))"
        raise ValueError(f"integer literal {value} is out of range")
    if isinstance(value, float):
        if value != value:
            return "CAST('NaN' AS DOUBLE)"
        if value in (float("inf"), float("-inf")):
            return f"CAST('{'-' if value < 0 else ''}inf' AS DOUBLE)"
        text = repr(value)
        return text if ("e" in text or "E" in text) else text + "e0"
    if isinstance(value, decimal.Decimal):
        return _render_decimal(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "X'" + bytes(value).hex().upper() + "'"
    if isinstance(value, dt.datetime):
        return _render_datetime(value)
    if isinstance(value, dt.date):
        return f"DATE '{value.year:04d}-{value.month:02d}-{value.day:02d}'"
    if isinstance(value, dt.time):
        if value.utcoffset() is not None:
            raise ValueError(f"cannot render a time with a timezone: {value!r}")
        text = f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
        if value.microsecond:
            text += f".{value.microsecond:06d}"
        return f"TIME '{text}'"
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return render_literal(item())
    raise ValueError(f"cannot render a literal of type {type(value).__name__}: {value!r}")


def literal_value(value: Any) -> Any:
    """The value ``parse_filter`` reads back from ``render_literal(value)``: the
    form a filter literal holds. An instant becomes a UTC datetime, an integer
    beyond 64 bits a Decimal, a decimal its plain spelling (``1E+2`` -> ``100``),
    bytes-like values bytes; ValueError for what cannot be rendered."""
    render_literal(value)  # the same errors as rendering
    if isinstance(value, bool) or value is None or isinstance(value, (str, float)):
        return value
    if isinstance(value, int):
        return value if _INT64_MIN <= value <= _UINT64_MAX else decimal.Decimal(value)
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(f"{value:f}")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dt.datetime):
        return value if value.utcoffset() is None else value.astimezone(dt.timezone.utc)
    if isinstance(value, (dt.date, dt.time)):
        return value
    return literal_value(value.item())  # a numpy scalar (render_literal accepted it)


# Binding strength of what a node renders to: a child binding more loosely than its
# place needs is parenthesised (OR inside AND, ...). AND and OR are associative, so
# a chain renders flat on both sides (``a OR b OR c OR d``): the parser builds the
# same balanced tree from it (``expressions.balanced``), and Lance reads a flat
# chain of any length, where it refuses some 20 levels of nested parentheses.
_PREC_OR, _PREC_AND, _PREC_NOT, _PREC_ATOM = 1, 2, 3, 4


def _at(rendered: tuple[str, int], prec: int) -> str:
    """A rendered child, in parentheses when it binds more loosely than ``prec``."""
    text, own = rendered
    return f"({text})" if own < prec else text


class _SqlRenderer(FilterVisitor[tuple[str, int]]):
    """Each node as SQL text with its binding strength. ``lance``: spelled for Lance's
    filter (``to_lance_sql``) rather than plain DataFusion."""

    def __init__(self, lance: bool = False):
        self.lance = lance

    def visit_or(self, node: Or, left: tuple, right: tuple) -> tuple[str, int]:
        return f"{_at(left, _PREC_OR)} OR {_at(right, _PREC_OR)}", _PREC_OR

    def visit_and(self, node: And, left: tuple, right: tuple) -> tuple[str, int]:
        return f"{_at(left, _PREC_AND)} AND {_at(right, _PREC_AND)}", _PREC_AND

    def visit_not(self, node: Not, child: tuple) -> tuple[str, int]:
        # an Opaque child already renders in parentheses
        text = child[0] if isinstance(node.child, Opaque) else f"({child[0]})"
        return f"NOT {text}", _PREC_NOT

    def visit_compare(self, node: Compare, column: str | None = None) -> tuple[str, int]:
        """``column`` (default: the node's column) compared with the literal."""
        if node.op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison operator {node.op!r}")
        column = column or ref_sql(node.ref)
        return f"{column} {node.op} {render_literal(node.literal.value)}", _PREC_ATOM

    def visit_in(self, node: In, column: str | None = None) -> tuple[str, int]:
        """``column`` (default: the node's column) [NOT] IN the list."""
        if not node.values:
            return ("TRUE" if node.negated else "FALSE"), _PREC_ATOM
        values = ", ".join(render_literal(v.value) for v in node.values)
        column = column or ref_sql(node.ref)
        if self.lance and node.negated:
            # DataFusion 55 (inside Lance) simplifies `x NOT IN (a) OR x NOT IN (b)`
            # to TRUE, which also keeps rows where x is NULL. This spelling has the
            # same three-valued meaning (NULL when x is NULL) and is left alone.
            return (
                f"(({column} NOT IN ({values}) AND {column} IS NOT NULL)"
                f" OR ({column} IS NULL AND NULL))"
            ), _PREC_ATOM
        return f"{column} {'NOT IN' if node.negated else 'IN'} ({values})", _PREC_ATOM

    def visit_is_null(self, node: IsNull) -> tuple[str, int]:
        column = ref_sql(node.ref)
        return f"{column} IS {'NOT NULL' if node.negated else 'NULL'}", _PREC_ATOM

    def visit_like(self, node: Like) -> tuple[str, int]:
        op = "NOT LIKE" if node.negated else "LIKE"
        return f"{ref_sql(node.ref)} {op} {render_literal(node.pattern)}", _PREC_ATOM

    def visit_date_part(self, node: DatePart) -> tuple[str, int]:
        column = date_part_sql(node.unit, ref_sql(node.ref))
        if isinstance(node.pred, In):
            return self.visit_in(node.pred, column)
        return self.visit_compare(node.pred, column)

    def visit_opaque(self, node: Opaque) -> tuple[str, int]:
        return f"({node.sql})", _PREC_ATOM

    def visit_literal(self, node: Literal) -> tuple[str, int]:
        return render_literal(node.value), _PREC_ATOM

    def visit_ref(self, node: Ref) -> tuple[str, int]:
        return ref_sql(node), _PREC_ATOM


def to_sql(expr: Expr) -> str:
    """Render an AST as SQL for Lance's ``filter=`` / DataFusion.

    ``parse_filter(to_sql(e)) == e`` for every AST the parser produces (NaN
    literals aside). ``In`` with no values renders as FALSE (TRUE if negated).
    """
    return visit(expr, _SqlRenderer())[0]


def to_lance_sql(expr: Expr) -> str:
    """Render an AST as the SQL filter handed to Lance: ``to_sql``'s meaning, spelled
    around DataFusion simplifier bugs (``NOT IN``; see ``docs/FORMAT.md`` §7).

    Example: ``to_lance_sql(In(Ref("x"), (Literal(5),), negated=True))`` is
    ``'((x NOT IN (5) AND x IS NOT NULL) OR (x IS NULL AND NULL))'``.
    """
    return visit(expr, _SqlRenderer(lance=True))[0]


def date_part_sql(unit: str, operand: str) -> str:
    """``date_part('<unit>', <operand>)``: how Lance and DataFusion spell a calendar field
    (Lance has no ``year()`` and the like, and no ``EXTRACT``)."""
    return f"date_part('{unit}', {operand})"


def escape_like(text: str) -> str:
    """``text`` as a ``LIKE`` pattern that matches exactly ``text``: the wildcards
    ``%`` and ``_`` and the escape character itself are backslash-escaped (the
    only ``LIKE`` escape Lance accepts)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
