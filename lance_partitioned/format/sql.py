"""SQL text <-> filter AST (:mod:`lance_partitioned.format.expressions`).

``parse_filter`` reads a SQL ``WHERE``-clause predicate with a real tokenizer and a
recursive-descent parser and returns the AST in the normal form described in
``expressions.py``. ``to_sql`` renders an AST back to SQL that both Lance's
``filter=`` (pylance 14) and DataFusion 55 accept. ``from_pyarrow`` /
``from_datafusion`` translate the expression objects of those libraries (best
effort) and ``to_pyarrow`` builds a ``pyarrow.compute.Expression`` for local
evaluation.

Parsing rules worth knowing:

* Keywords are case-insensitive. Unquoted identifiers are kept **verbatim**
  (no lower-casing, as Lance resolves ``CamelCase`` to the column
  ``CamelCase``). Double-quoted and backtick-quoted identifiers may contain
  anything; a doubled quote character escapes it. A qualified name ``t.col``
  keeps only its last part.
* Integers become ``int``; numerals with a decimal point (``1.5``) become
  ``decimal.Decimal`` (exact; the caller casts to the column type); numerals
  with an exponent (``1.5e3``) become ``float``.
* ``DATE '…'`` -> ``datetime.date``; ``TIMESTAMP '…'`` -> ``datetime.datetime``,
  timezone-aware if the text has an offset or ``Z``, naive otherwise;
  ``TIME '…'`` -> ``datetime.time``; ``X'0102'`` -> ``bytes``.
  ``CAST(<literal> AS <type>)`` and ``<literal>::<type>`` fold to a typed
  literal when the conversion is exact, and so does
  ``arrow_cast('<timestamp with offset>', 'Timestamp(<unit>, Some("<zone>"))')``
  (an aware datetime, the form instants render in).
* Predicates the AST cannot express (function calls, arithmetic,
  column-to-column comparisons, ``IS TRUE``, ``ILIKE``, ``LIKE … ESCAPE``,
  ``IS DISTINCT FROM``, ...) become ``Opaque`` carrying the source text of the
  whole predicate. Column references inside it are re-spelled with
  :func:`quote_identifier`, because Lance reads ``"x"`` as a string literal.

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

import bisect
import contextlib
import ctypes
import datetime as dt
import decimal
import re
from dataclasses import dataclass
from typing import Any

from .arrow_c import CArrowSchema, read_metadata
from .expressions import (
    COMPARISON_OPS,
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
)

__all__ = [
    "FilterParseError",
    "parse_filter",
    "to_sql",
    "render_literal",
    "quote_identifier",
    "from_pyarrow",
    "from_datafusion",
    "to_pyarrow",
]


class FilterParseError(ValueError):
    """A filter could not be parsed. ``text`` is the filter, ``position`` the
    character offset of the problem (or None)."""

    def __init__(self, message: str, text: str | None = None, position: int | None = None):
        self.reason = message
        self.text = text
        self.position = position
        if text is not None and position is not None:
            line_start = text.rfind("\n", 0, position) + 1
            line_end = text.find("\n", position)
            line = text[line_start : line_end if line_end >= 0 else len(text)]
            caret = " " * (position - line_start) + "^"
            full = f"{message} at position {position} in filter {text!r}\n    {line}\n    {caret}"
        elif text is not None:
            full = f"{message} in filter {text!r}"
        else:
            full = message
        super().__init__(full)


# --------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str  # num | str | hex | ident | qident | op | eof
    value: Any  # parsed value: str for ident/qident/op/str, text for num, bytes for hex
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.value.upper() if self.kind == "ident" else ""


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_OPERATORS = sorted(
    _words("= == != <> < <= > >= + - * / % || ( ) , . :: & | ^ << >> ~ ~* !~ !~*"),
    key=len,
    reverse=True,
)
_NUMBER_RE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _is_ident_start(c: str) -> bool:
    return c == "_" or c.isalpha()


def _is_ident_char(c: str) -> bool:
    return c == "_" or c == "$" or c.isalnum()


def _tokenize(text: str) -> list[_Token]:
    toks: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if text.startswith("--", i):  # line comment
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c in "xX" and i + 1 < n and text[i + 1] == "'":
            j = text.find("'", i + 2)
            if j < 0:
                raise FilterParseError("unterminated binary literal", text, i)
            digits = text[i + 2 : j]
            if len(digits) % 2 or not re.fullmatch(r"[0-9a-fA-F]*", digits):
                raise FilterParseError(f"invalid hex digits in binary literal X'{digits}'", text, i)
            toks.append(_Token("hex", bytes.fromhex(digits), i, j + 1))
            i = j + 1
            continue
        if c == "'" or c == '"' or c == "`":
            parts = []
            j = i + 1
            while True:
                k = text.find(c, j)
                if k < 0:
                    what = "string literal" if c == "'" else "quoted identifier"
                    raise FilterParseError(f"unterminated {what}", text, i)
                parts.append(text[j:k])
                if k + 1 < n and text[k + 1] == c:  # doubled quote = escaped quote
                    parts.append(c)
                    j = k + 2
                    continue
                break
            value = "".join(parts)
            if c == "'":
                toks.append(_Token("str", value, i, k + 1))
            else:
                if not value:
                    raise FilterParseError("empty quoted identifier", text, i)
                toks.append(_Token("qident", value, i, k + 1))
            i = k + 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            m = _NUMBER_RE.match(text, i)
            assert m is not None
            end = m.end()
            if end < n and _is_ident_char(text[end]):
                raise FilterParseError(f"invalid number {text[i : end + 1]!r}", text, i)
            toks.append(_Token("num", m.group(0), i, end))
            i = end
            continue
        if _is_ident_start(c):
            j = i + 1
            while j < n and _is_ident_char(text[j]):
                j += 1
            toks.append(_Token("ident", text[i:j], i, j))
            i = j
            continue
        for op in _OPERATORS:
            if text.startswith(op, i):
                toks.append(_Token("op", op, i, i + len(op)))
                i += len(op)
                break
        else:
            raise FilterParseError(f"unexpected character {c!r}", text, i)
    toks.append(_Token("eof", "", n, n))
    return toks


# --------------------------------------------------------------------------------------
# Literals: parsing typed strings, casts
# --------------------------------------------------------------------------------------

_DATE_RE = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*")
_TIME_PART = r"(\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?"
_TIMESTAMP_RE = re.compile(
    r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:(?:[Tt]|\s+)" + _TIME_PART + r")?"
    r"\s*(Z|z|UTC|[+-]\d{1,2}(?::?\d{2})?)?\s*"
)
_TIME_RE = re.compile(r"\s*" + _TIME_PART + r"\s*")


def _fraction_to_us(frac: str | None) -> int:
    if not frac:
        return 0
    ns = int(frac.ljust(9, "0"))
    if ns % 1000:
        raise ValueError("sub-microsecond precision is not supported")
    return ns // 1000


def _parse_date(s: str) -> dt.date:
    m = _DATE_RE.fullmatch(s)
    if not m:
        raise ValueError("expected YYYY-MM-DD")
    return dt.date(int(m[1]), int(m[2]), int(m[3]))


def _parse_offset(s: str) -> dt.tzinfo:
    if s.upper() in ("Z", "UTC"):
        return dt.timezone.utc
    m = re.fullmatch(r"([+-])(\d{1,2})(?::?(\d{2}))?", s)
    if not m:
        raise ValueError(f"invalid UTC offset {s!r}")
    sign = -1 if m[1] == "-" else 1
    hours, minutes = int(m[2]), int(m[3] or 0)
    if hours > 23 or minutes > 59:
        raise ValueError(f"invalid UTC offset {s!r}")
    offset = dt.timedelta(hours=hours, minutes=minutes) * sign
    return dt.timezone.utc if not offset else dt.timezone(offset)


def _parse_timestamp(s: str) -> dt.datetime:
    m = _TIMESTAMP_RE.fullmatch(s)
    if not m:
        raise ValueError("expected YYYY-MM-DD HH:MM:SS[.ffffff][+HH:MM|Z]")
    value = dt.datetime(
        int(m[1]),
        int(m[2]),
        int(m[3]),
        int(m[4] or 0),
        int(m[5] or 0),
        int(m[6] or 0),
        _fraction_to_us(m[7]),
    )
    if m[8]:
        value = value.replace(tzinfo=_parse_offset(m[8]))
    return value


def _parse_time(s: str) -> dt.time:
    m = _TIME_RE.fullmatch(s)
    if not m:
        raise ValueError("expected HH:MM:SS[.ffffff]")
    return dt.time(int(m[1]), int(m[2]), int(m[3] or 0), _fraction_to_us(m[4]))


_INT_TYPES = _words("TINYINT SMALLINT INT INTEGER BIGINT INT2 INT4 INT8 INT16 INT32 INT64")
_FLOAT_TYPES = {"FLOAT", "REAL", "DOUBLE", "FLOAT4", "FLOAT8", "FLOAT32", "FLOAT64"}
_STRING_TYPES = {"STRING", "VARCHAR", "TEXT", "CHAR", "CHARACTER", "UTF8"}
_BINARY_TYPES = {"BINARY", "VARBINARY", "BYTEA", "BLOB", "BYTES"}
_TYPE_SUFFIX_WORDS = _words("UNSIGNED SIGNED PRECISION VARYING WITH WITHOUT TIME ZONE")

_NOT_CASTABLE = object()


def _cast_literal(value: Any, words: list[str], params: list[int]) -> Any:
    """Fold ``CAST(<literal> AS <type>)`` into a typed literal.

    A string literal is parsed as the target type and a ValueError says why it
    cannot be. Other literals are folded when the conversion is exact and
    obvious (2 -> 2.0, DATE -> TIMESTAMP, 1.5 -> DECIMAL(3,2)); anything else,
    and any type this module does not model, returns _NOT_CASTABLE: the cast
    then stays an (opaque) expression for DataFusion to evaluate."""
    base = words[0]
    if (
        base in ("DATE", "TIMESTAMP", "DATETIME", "TIME")
        and len(words) > 1
        and words[1:] not in (["WITH", "TIME", "ZONE"], ["WITHOUT", "TIME", "ZONE"])
    ):
        return _NOT_CASTABLE
    if value is None:
        return None
    number = isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool)
    if isinstance(value, str):
        text = value.strip()
        if base in _INT_TYPES:
            return int(text)
        if base in _FLOAT_TYPES:
            return float(text)
        if base in ("DECIMAL", "NUMERIC", "DEC"):
            return _to_decimal(decimal.Decimal(text), params)
        if base in _STRING_TYPES:
            return value
        if base in ("BOOLEAN", "BOOL"):
            if text.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return text.lower() == "true"
        if base in _BINARY_TYPES:
            return value.encode()
        if base == "DATE":
            return _parse_date(value)
        if base in ("TIMESTAMP", "DATETIME"):
            return _parse_timestamp(value)
        if base == "TIME":
            return _parse_time(value)
        return _NOT_CASTABLE
    if base in _INT_TYPES and number and value == int(value):
        return int(value)
    if base in _FLOAT_TYPES and number:
        return float(value)
    if base in ("DECIMAL", "NUMERIC", "DEC") and number:
        return _to_decimal(
            decimal.Decimal(repr(value) if isinstance(value, float) else value), params
        )
    if base in ("BOOLEAN", "BOOL") and isinstance(value, bool):
        return value
    if base in _BINARY_TYPES and isinstance(value, bytes):
        return value
    if base == "DATE" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if base in ("TIMESTAMP", "DATETIME") and isinstance(value, dt.date):
        if isinstance(value, dt.datetime):
            return value
        return dt.datetime(value.year, value.month, value.day)
    if base == "TIME" and isinstance(value, dt.time):
        return value
    return _NOT_CASTABLE


def _to_decimal(d: decimal.Decimal, params: list[int]) -> decimal.Decimal:
    if not d.is_finite():
        raise ValueError("not a finite number")
    if params:
        precision = params[0]
        scale = params[1] if len(params) > 1 else 0
        context = decimal.Context(prec=precision + abs(scale) + 2)
        d = d.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_HALF_UP, context)
        if d != 0 and d.adjusted() + 1 > precision - scale:
            raise ValueError(f"{d} does not fit DECIMAL({precision},{scale})")
    return d


# --------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------

_RESERVED = _words(
    "AND OR NOT IN IS NULL TRUE FALSE LIKE ILIKE BETWEEN CASE WHEN THEN ELSE END "
    "ESCAPE SIMILAR DISTINCT FROM AS SELECT WHERE UNKNOWN"
)
# words quote_identifier never leaves bare (SQL keywords a dialect may treat specially)
_QUOTE_WORDS = _RESERVED | _words(
    "DATE TIME TIMESTAMP DATETIME INTERVAL CAST TRY_CAST TO FOR ALL ANY SOME EXISTS "
    "ORDER BY GROUP HAVING LIMIT JOIN ON USING UNION EXCEPT INTERSECT WITH ARRAY "
    "STRUCT ROW ROWS OVER PARTITION"
)
_INTERVAL_UNITS = _words(
    "YEAR YEARS MONTH MONTHS WEEK WEEKS DAY DAYS HOUR HOURS MINUTE MINUTES SECOND "
    "SECONDS MILLISECOND MILLISECONDS MICROSECOND MICROSECONDS NANOSECOND NANOSECONDS"
)
_CMP_TOKENS = {
    "=": "=",
    "==": "=",
    "!=": "!=",
    "<>": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
}
_OPAQUE_CMP_TOKENS = {"~", "~*", "!~", "!~*"}
_ADDITIVE_OPS = {"+", "-", "||", "&", "|", "^", "<<", ">>"}
_MULTIPLICATIVE_OPS = {"*", "/", "%"}


@dataclass
class _Operand:
    """A parsed sub-expression: a column ('ref'), a literal ('lit'), a boolean
    expression already in AST form ('bool') or anything else ('value')."""

    kind: str
    start: int
    end: int
    columns: tuple[str, ...] = ()
    ref: Ref | None = None
    value: Any = None
    expr: Expr | None = None


def _merge_columns(*groups: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for g in groups:
        for c in g:
            if c not in out:
                out.append(c)
    return tuple(out)


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        # (start, end, replacement) for each column reference, in source order
        self.replacements: list[tuple[int, int, str]] = []

    # -- token helpers -----------------------------------------------------------------
    def peek(self, k: int = 0) -> _Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> _Token:
        tok = self.toks[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def at_kw(self, *words: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == "ident" and tok.upper in words

    def at_op(self, *ops: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == "op" and tok.value in ops

    def describe(self, tok: _Token) -> str:
        return "end of input" if tok.kind == "eof" else repr(self.text[tok.start : tok.end])

    def error(self, message: str, tok: _Token | None = None) -> FilterParseError:
        tok = tok or self.peek()
        return FilterParseError(message, self.text, tok.start)

    def expect_op(self, op: str, context: str) -> _Token:
        if not self.at_op(op):
            raise self.error(f"expected {op!r} {context}, found {self.describe(self.peek())}")
        return self.advance()

    def expect_kw(self, word: str, context: str) -> _Token:
        if not self.at_kw(word):
            raise self.error(f"expected {word} {context}, found {self.describe(self.peek())}")
        return self.advance()

    # -- results -----------------------------------------------------------------------
    def sql_of(self, start: int, end: int) -> str:
        """Source text of a span with column references re-quoted for Lance."""
        out: list[str] = []
        pos = start
        idx = bisect.bisect_left(self.replacements, (start, -1, ""))
        while idx < len(self.replacements):
            r_start, r_end, repl = self.replacements[idx]
            if r_start >= end:
                break
            out.append(self.text[pos:r_start])
            out.append(repl)
            pos = r_end
            idx += 1
        out.append(self.text[pos:end])
        return "".join(out)

    def opaque(self, start: int, end: int, columns: tuple[str, ...]) -> _Operand:
        expr = Opaque(sql=self.sql_of(start, end), columns=columns)
        return _Operand("bool", start, end, columns, expr=expr)

    def as_bool(self, op: _Operand) -> Expr:
        if op.kind == "bool":
            assert op.expr is not None
            return op.expr
        if op.kind == "ref":
            assert op.ref is not None
            return Compare("=", op.ref, Literal(True))
        if op.kind == "lit":
            if op.value is None or isinstance(op.value, bool):
                return Literal(op.value)
            raise FilterParseError(
                f"expected a boolean expression, found the literal {self.text[op.start : op.end]!r}",
                self.text,
                op.start,
            )
        if op.expr is not None:  # a parenthesized value: its text without the parentheses
            return op.expr
        return Opaque(sql=self.sql_of(op.start, op.end), columns=op.columns)

    # -- grammar -----------------------------------------------------------------------
    def parse(self) -> Expr:
        if self.peek().kind == "eof":
            raise FilterParseError("empty filter", self.text, 0)
        result = self.or_level()
        tok = self.peek()
        if tok.kind != "eof":
            if tok.kind == "op" and tok.value == ")":
                raise self.error("unbalanced parentheses: unexpected ')'", tok)
            raise self.error(f"unexpected {self.describe(tok)} after a complete expression", tok)
        return self.as_bool(result)

    def or_level(self) -> _Operand:
        return self._chain("OR", self.and_level, Or)

    def and_level(self) -> _Operand:
        return self._chain("AND", self.not_level, And)

    def _chain(self, keyword: str, operand: Any, node: Any) -> _Operand:
        """``operand (keyword operand)*``, left-associative, as one boolean operand."""
        left = operand()
        while self.at_kw(keyword):
            self.advance()
            self.require_operand(keyword)
            right = operand()
            left = _Operand(
                "bool",
                left.start,
                right.end,
                _merge_columns(left.columns, right.columns),
                expr=node(self.as_bool(left), self.as_bool(right)),
            )
        return left

    def not_level(self) -> _Operand:
        if self.at_kw("NOT"):
            tok = self.advance()
            self.require_operand("NOT")
            child = self.not_level()
            return _Operand(
                "bool", tok.start, child.end, child.columns, expr=Not(self.as_bool(child))
            )
        return self.predicate()

    def require_operand(self, after: str) -> None:
        if self.peek().kind == "eof":
            raise self.error(f"expected an expression after {after}, found end of input")

    def predicate(self) -> _Operand:
        left = self.value_expr()
        while True:
            tok = self.peek()
            if tok.kind == "op" and (tok.value in _CMP_TOKENS or tok.value in _OPAQUE_CMP_TOKENS):
                self.advance()
                self.require_operand(repr(tok.value))
                right = self.value_expr()
                left = self.build_compare(tok.value, left, right)
            elif self.at_kw("IS"):
                left = self.is_predicate(left)
            elif self.at_kw("IN", "BETWEEN", "LIKE", "ILIKE", "SIMILAR") or (
                self.at_kw("NOT") and self.at_kw("IN", "BETWEEN", "LIKE", "ILIKE", "SIMILAR", k=1)
            ):
                negated = False
                if self.at_kw("NOT"):
                    self.advance()
                    negated = True
                kw = self.advance().upper
                if kw == "IN":
                    left = self.in_predicate(left, negated)
                elif kw == "BETWEEN":
                    left = self.between_predicate(left, negated)
                else:
                    left = self.like_predicate(left, kw, negated)
            else:
                return left

    def build_compare(self, op_text: str, left: _Operand, right: _Operand) -> _Operand:
        columns = _merge_columns(left.columns, right.columns)
        op = _CMP_TOKENS.get(op_text)
        if op is not None:
            if left.kind == "ref" and right.kind == "lit":
                expr: Expr = Compare(op, left.ref, Literal(right.value))  # type: ignore[arg-type]
                return _Operand("bool", left.start, right.end, columns, expr=expr)
            if left.kind == "lit" and right.kind == "ref":
                expr = Compare(FLIPPED_OP[op], right.ref, Literal(left.value))  # type: ignore[arg-type]
                return _Operand("bool", left.start, right.end, columns, expr=expr)
        return self.opaque(left.start, right.end, columns)

    def is_predicate(self, left: _Operand) -> _Operand:
        self.advance()  # IS
        negated = False
        if self.at_kw("NOT"):
            self.advance()
            negated = True
        tok = self.peek()
        if self.at_kw("NULL"):
            self.advance()
            if left.kind == "ref":
                expr = IsNull(left.ref, negated)  # type: ignore[arg-type]
                return _Operand("bool", left.start, tok.end, left.columns, expr=expr)
            return self.opaque(left.start, tok.end, left.columns)
        if self.at_kw("TRUE", "FALSE", "UNKNOWN"):
            self.advance()
            return self.opaque(left.start, tok.end, left.columns)
        if self.at_kw("DISTINCT"):
            self.advance()
            self.expect_kw("FROM", "after IS [NOT] DISTINCT")
            self.require_operand("IS DISTINCT FROM")
            right = self.value_expr()
            return self.opaque(left.start, right.end, _merge_columns(left.columns, right.columns))
        raise self.error(
            f"expected NULL, TRUE, FALSE, UNKNOWN or DISTINCT FROM after IS, found {self.describe(tok)}"
        )

    def in_predicate(self, left: _Operand, negated: bool) -> _Operand:
        lp = self.expect_op("(", "after IN")
        if self.at_kw("SELECT"):
            raise self.error("subqueries are not supported in IN")
        if self.at_op(")"):
            raise self.error("IN list is empty", lp)
        items = [self.list_item(lp)]
        while self.at_op(","):
            self.advance()
            items.append(self.list_item(lp))
        if not self.at_op(")"):
            raise self.error(f"expected ',' or ')' in IN list, found {self.describe(self.peek())}")
        rp = self.advance()
        columns = _merge_columns(left.columns, *(it.columns for it in items))
        if left.kind == "ref" and all(it.kind == "lit" for it in items):
            expr = In(left.ref, tuple(Literal(it.value) for it in items), negated)  # type: ignore[arg-type]
            return _Operand("bool", left.start, rp.end, columns, expr=expr)
        return self.opaque(left.start, rp.end, columns)

    def list_item(self, lp: _Token) -> _Operand:
        if self.peek().kind == "eof":
            raise self.error(
                f"unbalanced parentheses: IN list opened at position {lp.start} is not closed"
            )
        return self.value_expr()

    def between_predicate(self, left: _Operand, negated: bool) -> _Operand:
        self.require_operand("BETWEEN")
        low = self.value_expr()
        self.expect_kw("AND", "in BETWEEN … AND …")
        self.require_operand("BETWEEN … AND")
        high = self.value_expr()
        columns = _merge_columns(left.columns, low.columns, high.columns)
        if left.kind == "ref" and low.kind == "lit" and high.kind == "lit":
            ref = left.ref
            assert ref is not None
            if negated:
                expr: Expr = Or(
                    Compare("<", ref, Literal(low.value)), Compare(">", ref, Literal(high.value))
                )
            else:
                expr = And(
                    Compare(">=", ref, Literal(low.value)), Compare("<=", ref, Literal(high.value))
                )
            return _Operand("bool", left.start, high.end, columns, expr=expr)
        return self.opaque(left.start, high.end, columns)

    def like_predicate(self, left: _Operand, kw: str, negated: bool) -> _Operand:
        if kw == "SIMILAR":
            self.expect_kw("TO", "after SIMILAR")
        self.require_operand(kw)
        pattern = self.value_expr()
        end = pattern.end
        columns = _merge_columns(left.columns, pattern.columns)
        has_escape = False
        if self.at_kw("ESCAPE"):
            self.advance()
            esc = self.peek()
            if esc.kind != "str":
                raise self.error(f"expected a string after ESCAPE, found {self.describe(esc)}")
            self.advance()
            end = esc.end
            has_escape = True
        if (
            kw == "LIKE"
            and not has_escape
            and left.kind == "ref"
            and pattern.kind == "lit"
            and isinstance(pattern.value, str)
        ):
            expr = Like(left.ref, pattern.value, negated)  # type: ignore[arg-type]
            return _Operand("bool", left.start, end, columns, expr=expr)
        return self.opaque(left.start, end, columns)

    # -- value expressions -------------------------------------------------------------
    def value_expr(self) -> _Operand:
        left = self.term()
        while self.at_op(*_ADDITIVE_OPS):
            tok = self.advance()
            self.require_operand(repr(tok.value))
            right = self.term()
            left = _Operand(
                "value", left.start, right.end, _merge_columns(left.columns, right.columns)
            )
        return left

    def term(self) -> _Operand:
        left = self.unary()
        while self.at_op(*_MULTIPLICATIVE_OPS):
            tok = self.advance()
            self.require_operand(repr(tok.value))
            right = self.unary()
            left = _Operand(
                "value", left.start, right.end, _merge_columns(left.columns, right.columns)
            )
        return left

    def unary(self) -> _Operand:
        if self.at_op("-", "+"):
            tok = self.advance()
            self.require_operand(repr(tok.value))
            operand = self.unary()
            if (
                operand.kind == "lit"
                and isinstance(operand.value, (int, float, decimal.Decimal))
                and not isinstance(operand.value, bool)
            ):
                value = -operand.value if tok.value == "-" else operand.value
                return _Operand("lit", tok.start, operand.end, value=value)
            return _Operand("value", tok.start, operand.end, operand.columns)
        return self.postfix()

    def postfix(self) -> _Operand:
        operand = self.primary()
        while self.at_op("::"):
            self.advance()
            words, params, end = self.parse_type(in_cast=False)
            operand = self.fold_cast(operand, words, params, operand.start, end)
        return operand

    def parse_type(self, in_cast: bool) -> tuple[list[str], list[int], int]:
        tok = self.peek()
        if tok.kind != "ident":
            raise self.error(f"expected a type name, found {self.describe(tok)}")
        self.advance()
        words = [tok.upper]
        end = tok.end
        params: list[int] = []
        while self.at_kw(*_TYPE_SUFFIX_WORDS) or (in_cast and self.peek().kind == "ident"):
            end = self.advance().end
            words.append(self.toks[self.i - 1].upper)
        if self.at_op("("):
            self.advance()
            while True:
                num = self.peek()
                if num.kind != "num" or not num.value.isdigit():
                    raise self.error(
                        f"expected an integer type parameter, found {self.describe(num)}"
                    )
                self.advance()
                params.append(int(num.value))
                if self.at_op(","):
                    self.advance()
                    continue
                break
            end = self.expect_op(")", "after type parameters").end
            while self.at_kw(*_TYPE_SUFFIX_WORDS):
                end = self.advance().end
                words.append(self.toks[self.i - 1].upper)
        return words, params, end

    def fold_cast(
        self, operand: _Operand, words: list[str], params: list[int], start: int, end: int
    ) -> _Operand:
        if operand.kind == "lit":
            try:
                value = _cast_literal(operand.value, words, params)
            except (ValueError, ArithmeticError) as exc:
                raise FilterParseError(
                    f"cannot cast {self.text[operand.start : operand.end]} to {' '.join(words)}: {exc}",
                    self.text,
                    operand.start,
                ) from None
            if value is not _NOT_CASTABLE:
                return _Operand("lit", start, end, value=value)
        return _Operand("value", start, end, operand.columns)

    def primary(self) -> _Operand:
        tok = self.peek()
        if tok.kind == "num":
            self.advance()
            text = tok.value
            if "e" in text or "E" in text:
                value: Any = float(text)
            elif "." in text:
                value = decimal.Decimal(text)
            else:
                value = int(text)
            return _Operand("lit", tok.start, tok.end, value=value)
        if tok.kind == "str":
            self.advance()
            return _Operand("lit", tok.start, tok.end, value=tok.value)
        if tok.kind == "hex":
            self.advance()
            return _Operand("lit", tok.start, tok.end, value=tok.value)
        if tok.kind == "op" and tok.value == "(":
            return self.parenthesized()
        if tok.kind == "qident":
            return self.column_ref()
        if tok.kind == "ident":
            word = tok.upper
            if word in ("TRUE", "FALSE", "NULL"):
                self.advance()
                value = {"TRUE": True, "FALSE": False, "NULL": None}[word]
                return _Operand("lit", tok.start, tok.end, value=value)
            nxt = self.peek(1)
            if word in ("DATE", "TIMESTAMP", "DATETIME", "TIME") and nxt.kind == "str":
                return self.typed_literal(word)
            if word == "INTERVAL" and nxt.kind == "str":
                self.advance()
                end = self.advance().end
                if self.at_kw(*_INTERVAL_UNITS):
                    end = self.advance().end
                return _Operand("value", tok.start, end)
            if word in ("CAST", "TRY_CAST") and nxt.kind == "op" and nxt.value == "(":
                return self.cast_expr(word)
            if word == "CASE":
                return self.case_expr()
            if word in _RESERVED:
                raise self.error(f"expected an expression, found keyword {word}")
            if nxt.kind == "op" and nxt.value == "(":
                return self.function_call()
            return self.column_ref()
        if tok.kind == "eof":
            raise self.error("expected an expression, found end of input")
        if tok.kind == "op" and tok.value == ")":
            raise self.error("expected an expression, found ')'")
        raise self.error(f"expected an expression, found {self.describe(tok)}")

    def parenthesized(self) -> _Operand:
        lp = self.advance()
        if self.at_kw("SELECT"):
            raise self.error("subqueries are not supported")
        if self.at_op(")"):
            raise self.error("expected an expression inside parentheses, found ')'")
        inner = self.or_level()
        if not self.at_op(")"):
            nxt = self.peek()
            if nxt.kind == "eof":
                raise self.error(
                    f"unbalanced parentheses: '(' at position {lp.start} is never closed"
                )
            raise self.error(
                f"expected ')' to close '(' at position {lp.start}, found {self.describe(nxt)}"
            )
        rp = self.advance()
        expr = inner.expr
        if inner.kind == "value" and expr is None:
            expr = Opaque(sql=self.sql_of(inner.start, inner.end), columns=inner.columns)
        return _Operand(
            inner.kind,
            lp.start,
            rp.end,
            inner.columns,
            ref=inner.ref,
            value=inner.value,
            expr=expr,
        )

    def column_ref(self) -> _Operand:
        first = self.advance()
        name = first.value
        end = first.end
        while self.at_op(".") and self.peek(1).kind in ("ident", "qident"):
            self.advance()
            part = self.advance()
            name, end = part.value, part.end
        self.replacements.append((first.start, end, quote_identifier(name)))
        return _Operand("ref", first.start, end, (name,), ref=Ref(name))

    def typed_literal(self, word: str) -> _Operand:
        kw = self.advance()
        s = self.advance()
        try:
            if word == "DATE":
                value: Any = _parse_date(s.value)
            elif word == "TIME":
                value = _parse_time(s.value)
            else:
                value = _parse_timestamp(s.value)
        except ValueError as exc:
            raise FilterParseError(
                f"invalid {word} literal {s.value!r}: {exc}", self.text, s.start
            ) from None
        return _Operand("lit", kw.start, s.end, value=value)

    def cast_expr(self, word: str) -> _Operand:
        kw = self.advance()
        lp = self.advance()
        self.require_operand("CAST(")
        operand = self.or_level()
        self.expect_kw("AS", "in CAST(… AS type)")
        words, params, _ = self.parse_type(in_cast=True)
        if not self.at_op(")"):
            raise self.error(
                f"expected ')' to close CAST at position {lp.start}, found {self.describe(self.peek())}"
            )
        rp = self.advance()
        if word == "TRY_CAST":
            return _Operand("value", kw.start, rp.end, operand.columns)
        return self.fold_cast(operand, words, params, kw.start, rp.end)

    def case_expr(self) -> _Operand:
        kw = self.advance()
        parts: list[_Operand] = []
        if not self.at_kw("WHEN"):
            parts.append(self.or_level())
        if not self.at_kw("WHEN"):
            raise self.error(f"expected WHEN in CASE, found {self.describe(self.peek())}")
        while self.at_kw("WHEN"):
            self.advance()
            parts.append(self.or_level())
            self.expect_kw("THEN", "in CASE … WHEN")
            parts.append(self.or_level())
        if self.at_kw("ELSE"):
            self.advance()
            parts.append(self.or_level())
        end = self.expect_kw("END", "to close CASE").end
        return _Operand("value", kw.start, end, _merge_columns(*(p.columns for p in parts)))

    def function_call(self) -> _Operand:
        name = self.advance()
        lp = self.advance()
        args: list[_Operand] = []
        if self.at_op(")"):
            rp = self.advance()
            return _Operand("value", name.start, rp.end)
        if self.at_kw("DISTINCT"):
            self.advance()
        while True:
            if self.at_op("*"):
                self.advance()
            else:
                if self.peek().kind == "eof":
                    raise self.error(
                        f"unbalanced parentheses: '(' at position {lp.start} is never closed"
                    )
                args.append(self.or_level())
            if self.at_op(",") or self.at_kw("FROM", "FOR"):
                self.advance()
                continue
            break
        if not self.at_op(")"):
            nxt = self.peek()
            if nxt.kind == "eof":
                raise self.error(
                    f"unbalanced parentheses: '(' at position {lp.start} is never closed"
                )
            raise self.error(
                f"expected ',' or ')' in the arguments of {name.value}(), found {self.describe(nxt)}"
            )
        rp = self.advance()
        literal_args = len(args) == 2 and all(a.kind == "lit" for a in args)
        if name.value.lower() == "arrow_cast" and literal_args:
            value = _fold_arrow_cast(args[0].value, args[1].value)
            if value is not _NOT_CASTABLE:
                return _Operand("lit", name.start, rp.end, value=value)
        return _Operand("value", name.start, rp.end, _merge_columns(*(a.columns for a in args)))


def parse_filter(text: str) -> Expr:
    """Parse a SQL ``WHERE``-clause predicate into the filter AST.

    Raises FilterParseError (a ValueError) with the position of the problem.
    """
    if not isinstance(text, str):
        raise TypeError(f"filter must be a str, got {type(text).__name__}")
    return _Parser(text).parse()


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------

_SIMPLE_IDENT_RE = re.compile(r"[a-z_][a-z0-9_]*")


def quote_identifier(name: str) -> str:
    """Spell a column name for Lance / DataFusion: bare when it is a simple
    lower-case identifier that is not a keyword, otherwise in backticks (a
    backtick inside is doubled). Never double quotes: Lance reads ``"x"`` as a
    string literal."""
    if _SIMPLE_IDENT_RE.fullmatch(name) and name.upper() not in _QUOTE_WORDS:
        return name
    return "`" + name.replace("`", "``") + "`"


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
_ARROW_CAST_RE = re.compile(
    r"Timestamp\((Second|Millisecond|Microsecond|Nanosecond),\s*"
    r"(?:None|Some\(\"([^\"]+)\"\))\)"
)


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


def _fold_arrow_cast(value: Any, type_text: Any) -> Any:
    """``arrow_cast('<timestamp>', 'Timestamp(<unit>, Some("<zone>"))')`` as a datetime literal.

    Text with a UTC offset is that instant, whatever the zone; naive text is
    wall-clock time in the zone (or a naive timestamp with no zone). Anything
    else (a time the zone shows twice or never, an unknown zone) returns
    _NOT_CASTABLE and stays an expression."""
    if not (isinstance(value, str) and isinstance(type_text, str)):
        return _NOT_CASTABLE
    m = _ARROW_CAST_RE.fullmatch(type_text.strip())
    if not m:
        return _NOT_CASTABLE
    try:
        parsed = _parse_timestamp(value)
    except ValueError:
        return _NOT_CASTABLE
    zone = m[2]
    if zone is None:
        return parsed.replace(tzinfo=None) if parsed.tzinfo is None else _NOT_CASTABLE
    if parsed.tzinfo is None:
        # wall-clock time in ``zone``, as Arrow's cast reads it
        from . import zones

        try:
            return zones.instant(zones.localize(zone, zones.to_us(parsed)))
        except Exception:  # unknown zone, or a time it shows twice or never
            return _NOT_CASTABLE
    return parsed.astimezone(dt.timezone.utc)


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


_PREC_OR, _PREC_AND, _PREC_NOT = 1, 2, 3


def _render(expr: Expr, prec: int) -> str:
    if isinstance(expr, Or):
        text = f"{_render(expr.left, _PREC_OR)} OR {_render(expr.right, _PREC_AND)}"
        return f"({text})" if prec > _PREC_OR else text
    if isinstance(expr, And):
        text = f"{_render(expr.left, _PREC_AND)} AND {_render(expr.right, _PREC_NOT)}"
        return f"({text})" if prec > _PREC_AND else text
    if isinstance(expr, Not):
        child = _render(expr.child, 0)
        if not isinstance(expr.child, Opaque):
            child = f"({child})"
        text = f"NOT {child}"
        return f"({text})" if prec > _PREC_NOT else text
    if isinstance(expr, Compare):
        if expr.op not in COMPARISON_OPS:
            raise ValueError(f"unknown comparison operator {expr.op!r}")
        return f"{quote_identifier(expr.ref.name)} {expr.op} {render_literal(expr.literal.value)}"
    if isinstance(expr, In):
        if not expr.values:
            return "TRUE" if expr.negated else "FALSE"
        values = ", ".join(render_literal(v.value) for v in expr.values)
        return f"{quote_identifier(expr.ref.name)} {'NOT IN' if expr.negated else 'IN'} ({values})"
    if isinstance(expr, IsNull):
        return f"{quote_identifier(expr.ref.name)} IS {'NOT NULL' if expr.negated else 'NULL'}"
    if isinstance(expr, Like):
        op = "NOT LIKE" if expr.negated else "LIKE"
        return f"{quote_identifier(expr.ref.name)} {op} {render_literal(expr.pattern)}"
    if isinstance(expr, Opaque):
        return f"({expr.sql})"
    if isinstance(expr, Literal):
        return render_literal(expr.value)
    if isinstance(expr, Ref):
        return quote_identifier(expr.name)
    raise TypeError(f"not a filter expression: {expr!r}")


def to_sql(expr: Expr) -> str:
    """Render an AST as SQL for Lance's ``filter=`` / DataFusion.

    ``parse_filter(to_sql(e)) == e`` for every AST the parser produces (NaN
    literals aside). ``In`` with no values renders as FALSE (TRUE if negated).
    """
    return _render(expr, 0)


# --------------------------------------------------------------------------------------
# pyarrow
# --------------------------------------------------------------------------------------


def _pa_literal(value: Any, field_type: Any = None) -> Any:
    """A pyarrow scalar for ``value``, converted to ``field_type`` when that is
    lossless (1.5 stays a decimal next to an int32 column, 2 becomes a decimal
    next to a decimal column)."""
    import pyarrow as pa

    errors = (pa.ArrowException, TypeError, ValueError, OverflowError)
    zoned = field_type is not None and pa.types.is_timestamp(field_type) and field_type.tz
    if zoned and isinstance(value, dt.date) and getattr(value, "tzinfo", None) is None:
        # wall-clock time in the column's zone (FORMAT.md §7); refused if ambiguous
        from . import zones

        wall = value if isinstance(value, dt.datetime) else dt.datetime.combine(value, dt.time())
        value = zones.instant(zones.localize(field_type.tz, zones.to_us(wall)))
    if field_type is not None:
        with contextlib.suppress(*errors):
            direct = pa.scalar(value, type=field_type)
            back = direct.as_py()
            # equal after the round trip (datetimes of different awareness never are)
            if isinstance(back, bool) == isinstance(value, bool) and back == value:
                return direct
    scalar = pa.scalar(value)
    if field_type is not None and scalar.type != field_type:
        with contextlib.suppress(*errors):  # a safe cast: lossy ones raise
            scalar = scalar.cast(field_type)
    return scalar


def to_pyarrow(expr: Expr, schema: Any = None) -> Any:
    """Build a ``pyarrow.compute.Expression`` with SQL semantics.

    With a ``schema`` (pyarrow.Schema) literals are cast to their column's type
    where that is lossless (pyarrow cannot compare e.g. decimal128(12,2) with
    an int64 literal, nor a naive literal with a tz-aware column). A naive
    timestamp or date literal against a zoned column is wall-clock time in the
    column's zone, as Lance and the scans read it. ``Opaque`` raises
    NotImplementedError.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    def field_type(name: str) -> Any:
        if schema is None:
            return None
        idx = schema.get_field_index(name)
        return schema.field(idx).type if idx >= 0 else None

    null_bool = pc.scalar(pa.scalar(None, pa.bool_()))

    def build(e: Expr) -> Any:
        if isinstance(e, And):
            return build(e.left) & build(e.right)
        if isinstance(e, Or):
            return build(e.left) | build(e.right)
        if isinstance(e, Not):
            return ~build(e.child)
        if isinstance(e, Compare):
            field = pc.field(e.ref.name)
            lit = pc.scalar(_pa_literal(e.literal.value, field_type(e.ref.name)))
            fn = {
                "=": pc.equal,
                "!=": pc.not_equal,
                "<": pc.less,
                "<=": pc.less_equal,
                ">": pc.greater,
                ">=": pc.greater_equal,
            }[e.op]
            return fn(field, lit)
        if isinstance(e, In):
            field = pc.field(e.ref.name)
            present = [v.value for v in e.values if v.value is not None]
            has_null = len(present) != len(e.values)
            if not present:
                # x IN (NULL) is NULL; x IN () is FALSE
                result = null_bool if has_null else pc.scalar(False)
            else:
                ftype = field_type(e.ref.name)
                scalars = [_pa_literal(v, ftype) for v in present]
                types = {sc.type for sc in scalars}
                if len(types) == 1 and (ftype is None or types == {ftype}):
                    value_set = pa.array(scalars)
                    found = pc.is_in(field, value_set=value_set, skip_nulls=True)
                else:
                    # is_in does not promote types (int32 vs decimal128(1,1) fails);
                    # x IN (a, b) is exactly x = a OR x = b, and equal() promotes
                    found = pc.equal(field, pc.scalar(scalars[0]))
                    for sc in scalars[1:]:
                        found = found | pc.equal(field, pc.scalar(sc))
                if has_null:
                    found = found | null_bool  # no match against a list with NULL -> NULL
                # SQL: NULL IN (...) is NULL, pyarrow's is_in says FALSE
                result = pc.if_else(field.is_valid(), found, null_bool)
            return ~result if e.negated else result
        if isinstance(e, IsNull):
            field = pc.field(e.ref.name)
            return field.is_valid() if e.negated else field.is_null()
        if isinstance(e, Like):
            result = pc.match_like(pc.field(e.ref.name), e.pattern)
            return ~result if e.negated else result
        if isinstance(e, Literal):
            return null_bool if e.value is None else pc.scalar(_pa_literal(e.value))
        if isinstance(e, Ref):
            return pc.field(e.name)
        if isinstance(e, Opaque):
            raise NotImplementedError(f"cannot evaluate an opaque predicate in pyarrow: {e.sql}")
        raise TypeError(f"not a filter expression: {e!r}")

    return build(expr)


def _scalar_to_py(scalar: Any) -> Any:
    """A pyarrow scalar as a Python value render_literal understands."""
    import pyarrow as pa
    import pyarrow.types as pat

    t = scalar.type
    if not scalar.is_valid:
        return None
    if pat.is_dictionary(t):
        return _scalar_to_py(scalar.value)
    if pat.is_timestamp(t) and t.unit == "ns":
        if scalar.value % 1000:
            raise ValueError(f"nanosecond timestamp literal {scalar} cannot be represented")
        scalar = scalar.cast(pa.timestamp("us", t.tz))
    if pat.is_time(t) and t.unit == "ns":
        if scalar.value % 1000:
            raise ValueError(f"nanosecond time literal {scalar} cannot be represented")
        scalar = scalar.cast(pa.time64("us"))
    if pat.is_duration(t) or pat.is_interval(t) or pat.is_nested(t):
        raise ValueError(f"unsupported literal type {t}: {scalar}")
    if pat.is_float16(t):
        return float(scalar.as_py())
    return scalar.as_py()


def _arrow_type_to_sql(t: Any) -> str:
    import pyarrow.types as pat

    simple = [
        (pat.is_int8, "TINYINT"),
        (pat.is_int16, "SMALLINT"),
        (pat.is_int32, "INT"),
        (pat.is_int64, "BIGINT"),
        (pat.is_uint8, "TINYINT UNSIGNED"),
        (pat.is_uint16, "SMALLINT UNSIGNED"),
        (pat.is_uint32, "INT UNSIGNED"),
        (pat.is_uint64, "BIGINT UNSIGNED"),
        (pat.is_float32, "FLOAT"),
        (pat.is_float64, "DOUBLE"),
        (pat.is_boolean, "BOOLEAN"),
        (pat.is_date, "DATE"),
        (pat.is_timestamp, "TIMESTAMP"),
        (pat.is_time, "TIME"),
    ]
    for pred, name in simple:
        if pred(t):
            return name
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t):
        return "STRING"
    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t):
        return "BINARY"
    if pat.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    raise ValueError(f"no SQL spelling for a cast to {t}")


def _ordered_metadata(schema: Any) -> list[tuple[str, str]]:
    """Schema metadata as an ordered list with duplicates (``Schema.metadata``
    is a dict, which loses both), read through the Arrow C data interface."""
    c_schema = CArrowSchema()
    schema._export_to_c(ctypes.addressof(c_schema))
    try:
        return [(k.decode(), v.decode()) for k, v in read_metadata(c_schema.metadata)]
    finally:
        if c_schema.release:
            c_schema.release(ctypes.addressof(c_schema))


@dataclass
class _PaNode:
    kind: str  # literal | field | call
    value: Any = None  # pa.Scalar for literal, name for field, function name for call
    args: list[_PaNode] | None = None
    options: Any = None  # StructScalar


def _pa_tree(expr: Any) -> _PaNode:
    """Decode a pc.Expression from Arrow's own lossless serialization (the
    ``__reduce__`` payload: an IPC file whose schema metadata lists the nodes in
    prefix order and whose columns hold the literals and function options)."""
    import pyarrow as pa

    _fn, (buf,) = expr.__reduce__()
    reader = pa.ipc.open_file(buf)
    columns = reader.get_batch(0).columns if reader.num_record_batches else []
    items = _ordered_metadata(reader.schema)
    pos = 0

    def node() -> _PaNode:
        nonlocal pos
        key, val = items[pos]
        pos += 1
        if key == "literal":
            return _PaNode("literal", columns[int(val)][0])
        if key == "field_ref":
            return _PaNode("field", val)
        if key == "nested_field_ref":
            raise ValueError("nested field references are not supported in filters")
        if key == "call":
            args: list[_PaNode] = []
            options = None
            while items[pos][0] != "end":
                if items[pos][0] == "options":
                    options = columns[int(items[pos][1])][0]
                    pos += 1
                else:
                    args.append(node())
            pos += 1  # end
            return _PaNode("call", val, args, options)
        raise ValueError(f"unexpected entry {key!r} in a serialized pyarrow expression")

    return node()


_PA_COMPARE = {
    "equal": "=",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
}
_PA_ARITH = {
    "add": "+",
    "add_checked": "+",
    "subtract": "-",
    "subtract_checked": "-",
    "multiply": "*",
    "multiply_checked": "*",
    "divide": "/",
    "divide_checked": "/",
}
_PA_FUNCTIONS = {
    "utf8_lower": "lower",
    "ascii_lower": "lower",
    "utf8_upper": "upper",
    "ascii_upper": "upper",
    "utf8_length": "character_length",
    "abs": "abs",
    "abs_checked": "abs",
    "is_nan": "isnan",
}
_PA_LOGICAL = {
    "and_kleene": ("AND", True),
    "or_kleene": ("OR", True),
    "and_not_kleene": ("AND NOT", True),
    "and": ("AND", False),
    "and_": ("AND", False),
    "or": ("OR", False),
    "or_": ("OR", False),
    "and_not": ("AND NOT", False),
}
_BOOL_CALLS = {"invert", "is_null", "is_valid", "is_in"} | set(_PA_COMPARE) | set(_PA_LOGICAL)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _pa_value_sql(n: _PaNode) -> str:
    if n.kind == "field":
        return quote_identifier(n.value)
    if n.kind == "literal":
        return render_literal(_scalar_to_py(n.value))
    name = n.value
    args = n.args or []
    if name in _PA_ARITH and len(args) == 2:
        return f"({_pa_value_sql(args[0])} {_PA_ARITH[name]} {_pa_value_sql(args[1])})"
    if name in ("negate", "negate_checked") and len(args) == 1:
        return f"(-{_pa_value_sql(args[0])})"
    if name in _PA_FUNCTIONS:
        return f"{_PA_FUNCTIONS[name]}({', '.join(_pa_value_sql(a) for a in args)})"
    if name == "cast" and len(args) == 1 and n.options is not None:
        to_type = n.options.type.field("to_type").type
        return f"CAST({_pa_value_sql(args[0])} AS {_arrow_type_to_sql(to_type)})"
    if name in _BOOL_CALLS or name in ("match_like", "starts_with", "ends_with", "match_substring"):
        return f"({_pa_bool_sql(n, positive=False)})"
    raise ValueError(f"cannot translate pyarrow function {name!r} to SQL")


def _pa_bool_sql(n: _PaNode, positive: bool) -> str:
    """SQL for a boolean pyarrow node. In a ``positive`` context (under no NOT)
    NULL and FALSE filter alike, so pyarrow's never-null is_in may become a
    plain SQL IN; under a NOT the exact three-valued translation is used."""
    if n.kind != "call":
        return _pa_value_sql(n)
    name = n.value
    args = n.args or []
    opts = n.options.as_py() if n.options is not None else {}
    if name in _PA_COMPARE:
        return f"{_pa_value_sql(args[0])} {_PA_COMPARE[name]} {_pa_value_sql(args[1])}"
    if name in _PA_LOGICAL:
        op, kleene = _PA_LOGICAL[name]
        if not kleene and not positive:
            # and(NULL, FALSE) is NULL where SQL says FALSE: only equivalent
            # while NULL and FALSE both mean "filtered out"
            raise ValueError(
                f"pyarrow's non-Kleene {name!r} under a negation has no SQL equivalent; use & / |"
            )
        if op == "AND NOT":
            right = f"NOT ({_pa_bool_sql(args[1], not positive)})"
            op = "AND"
        else:
            right = _pa_bool_sql(args[1], positive)
        return f"({_pa_bool_sql(args[0], positive)} {op} {right})"
    if name == "invert":
        return f"NOT ({_pa_bool_sql(args[0], not positive)})"
    if name == "is_null":
        target = _pa_value_sql(args[0])
        if opts.get("nan_is_null"):
            return f"({target} IS NULL OR isnan({target}))"
        return f"{target} IS NULL"
    if name == "is_valid":
        return f"{_pa_value_sql(args[0])} IS NOT NULL"
    if name == "is_in":
        return _pa_is_in_sql(args[0], n.options, positive)
    if name in ("match_like", "starts_with", "ends_with", "match_substring"):
        pattern = opts["pattern"]
        if name == "starts_with":
            pattern = _escape_like(pattern) + "%"
        elif name == "ends_with":
            pattern = "%" + _escape_like(pattern)
        elif name == "match_substring":
            pattern = "%" + _escape_like(pattern) + "%"
        op = "ILIKE" if opts.get("ignore_case") else "LIKE"
        return f"{_pa_value_sql(args[0])} {op} {render_literal(pattern)}"
    return _pa_value_sql(n)


def _pa_is_in_sql(target: _PaNode, options: Any, positive: bool) -> str:
    value_set = options["value_set"].values
    values = [_scalar_to_py(s) for s in value_set]
    present = [v for v in values if v is not None]
    has_null = len(present) != len(values)
    fields = {f.name for f in options.type}
    if "null_matching_behavior" in fields:
        behavior = ["MATCH", "SKIP", "EMIT_NULL", "INCONCLUSIVE"][
            options["null_matching_behavior"].as_py()
        ]
    else:
        behavior = "SKIP" if options["skip_nulls"].as_py() else "MATCH"
    x = _pa_value_sql(target)
    in_list = f"{x} IN ({', '.join(render_literal(v) for v in present)})" if present else "FALSE"
    if behavior == "INCONCLUSIVE":  # SQL semantics
        if has_null:
            return f"{x} IN ({', '.join(render_literal(v) for v in [*present, None])})"
        if present:
            return in_list
        return f"({x} IS NULL AND NULL)"
    if behavior == "MATCH":
        # never NULL: a null x matches iff the set holds a null
        if has_null:
            return f"({x} IS NULL OR {in_list})"
        return in_list if positive else f"({x} IS NOT NULL AND {in_list})"
    if behavior == "SKIP":  # never NULL, a null x never matches
        return in_list if positive else f"({x} IS NOT NULL AND {in_list})"
    # EMIT_NULL: null x -> NULL, nulls in the set ignored
    if present:
        return in_list
    return "FALSE" if positive else f"({x} IS NULL AND NULL)"


def from_pyarrow(expr: Any) -> Expr:
    """Translate a ``pyarrow.compute.Expression`` (best effort).

    Handles field references, scalars (int, float, decimal, string, binary,
    bool, date, timestamp, time, null), comparisons, and/or (Kleene),
    invert, is_null, is_valid, is_in (all null-matching behaviours, exactly),
    match_like / starts_with / ends_with / match_substring, and — as Opaque —
    arithmetic, cast and a few string functions. Anything else raises
    ValueError naming the function.

    Rather than parsing ``str(expr)`` (which loses types: binary prints as a
    string, decimals as floats, zones are dropped), this reads Arrow's own
    serialization of the expression, then goes through SQL text so the result
    is exactly what ``parse_filter`` would produce.
    """
    import pyarrow.compute as pc

    if not isinstance(expr, pc.Expression):
        raise TypeError(f"expected a pyarrow.compute.Expression, got {type(expr).__name__}")
    tree = _pa_tree(expr)
    return parse_filter(_pa_bool_sql(tree, positive=True))


# --------------------------------------------------------------------------------------
# DataFusion
# --------------------------------------------------------------------------------------

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
        return render_literal(_scalar_to_py(e.python_value()))
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
