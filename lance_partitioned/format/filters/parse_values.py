"""SQL filter text -> operands: the value half of the filter parser.

:class:`ValueParser` holds the parser state (tokens, position, the column
references to re-quote) and parses value expressions: literals (typed strings,
``CAST``/``::``/``arrow_cast`` folded when exact), column references,
arithmetic, function calls, ``CASE`` and parenthesized expressions. Each
becomes an :class:`SubExpression`; anything the AST cannot express keeps its source
text, with column names re-spelled by
:func:`~lance_partitioned.format.filters.render.quote_identifier`, for an
``Opaque`` node. The boolean grammar on top of it is :mod:`.parse`.
"""

from __future__ import annotations

import bisect
import decimal
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from lance_partitioned.format.expressions import (
    Compare,
    Expr,
    Literal,
    Opaque,
    Ref,
    balanced,
    strip_qualifiers,
)
from lance_partitioned.format.filters.literal_text import (
    NOT_CASTABLE,
    TYPE_SUFFIX_WORDS,
    fold_arrow_cast,
    fold_cast,
    parse_date,
    parse_time,
    parse_timestamp,
)
from lance_partitioned.format.filters.render import date_part_sql, ref_sql
from lance_partitioned.format.filters.tokens import (
    RESERVED,
    FilterParseError,
    Token,
    tokenize,
    word_set,
)

_INTERVAL_UNITS = word_set(
    "YEAR YEARS MONTH MONTHS WEEK WEEKS DAY DAYS HOUR HOURS MINUTE MINUTES SECOND "
    "SECONDS MILLISECOND MILLISECONDS MICROSECOND MICROSECONDS NANOSECOND NANOSECONDS"
)
CMP_TOKENS = {
    "=": "=",
    "==": "=",
    "!=": "!=",
    "<>": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
}
OPAQUE_CMP_TOKENS = {"~", "~*", "!~", "!~*"}

# The units Lance's ``date_part`` accepts (pylance 14, case-insensitive), by the
# calendar field each spelling of year, month, day and hour means; the other
# units (quarter, minute, dow, ...) are left to Lance, inside an Opaque part.
DATE_PART_SPELLINGS = {
    **dict.fromkeys(("year", "years", "y", "yr", "yrs"), "year"),
    **dict.fromkeys(("month", "months", "mon", "mons"), "month"),
    **dict.fromkeys(("day", "days", "d"), "day"),
    **dict.fromkeys(("hour", "hours", "h", "hr", "hrs"), "hour"),
}
_OTHER_DATE_PARTS = word_set(
    "quarter qtr week weeks w minute minutes m min mins second seconds s sec secs "
    "millisecond milliseconds ms msec msecs microsecond microseconds us usec usecs "
    "nanosecond nanoseconds dow doy epoch isoyear isodow"
)
# year(x), month(x), day(x), hour(x): Spark SQL's and DuckDB's spelling of date_part
_PART_FUNCTIONS = {"YEAR": "year", "MONTH": "month", "DAY": "day", "HOUR": "hour"}
_ADDITIVE_OPS = {"+", "-", "||", "&", "|", "^", "<<", ">>"}
_MULTIPLICATIVE_OPS = {"*", "/", "%"}


@dataclass
class SubExpression:
    """A parsed sub-expression: a column ('ref'), a literal ('lit'), a boolean
    expression already in AST form ('bool'), a calendar field of a column ('part':
    ``ref`` is the column and ``value`` the unit, one of ``DATE_PART_UNITS``) or
    anything else ('value').

    An AND or OR chain keeps its operands as ``chain`` (the node class and the
    list) and builds ``expr`` only when used (``ValueParser.as_bool``): a chain in
    parentheses inside a chain of the same operator, ``(a OR b) OR c``, joins it,
    so nested chains also make one balanced tree."""

    kind: str
    start: int
    end: int
    columns: tuple[str, ...] = ()
    ref: Ref | None = None
    value: Any = None
    expr: Expr | None = None
    chain: tuple[type, list[Expr]] | None = None


def merge_columns(*groups: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for g in groups:
        for c in g:
            if c not in out:
                out.append(c)
    return tuple(out)


class ValueParser:
    def __init__(self, text: str, columns: Collection[str] | None = None):
        self.text = text
        # the namespace's top-level column names, when known: a dotted name whose
        # first part is none of them is read as qualified (``t.col``)
        self.columns = columns
        self.toks = tokenize(text)
        self.i = 0
        # (start, end, replacement) for each column reference, in source order
        self.replacements: list[tuple[int, int, str]] = []

    # -- token helpers -----------------------------------------------------------------
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
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

    def describe(self, tok: Token) -> str:
        return "end of input" if tok.kind == "eof" else repr(self.text[tok.start : tok.end])

    def error(self, message: str, tok: Token | None = None) -> FilterParseError:
        tok = tok or self.peek()
        return FilterParseError(message, self.text, tok.start)

    def expect_op(self, op: str, context: str) -> Token:
        if not self.at_op(op):
            raise self.error(f"expected {op!r} {context}, found {self.describe(self.peek())}")
        return self.advance()

    def expect_kw(self, word: str, context: str) -> Token:
        if not self.at_kw(word):
            raise self.error(f"expected {word} {context}, found {self.describe(self.peek())}")
        return self.advance()

    def or_level(self) -> SubExpression:
        """A full boolean expression (the grammar in :mod:`.parse`)."""
        raise NotImplementedError

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

    def opaque(self, start: int, end: int, columns: tuple[str, ...]) -> SubExpression:
        expr = Opaque(sql=self.sql_of(start, end), columns=columns)
        return SubExpression("bool", start, end, columns, expr=expr)

    def as_bool(self, op: SubExpression) -> Expr:
        if op.chain is not None and op.expr is None:
            op.expr = balanced(*op.chain)
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

    def require_operand(self, after: str) -> None:
        if self.peek().kind == "eof":
            raise self.error(f"expected an expression after {after}, found end of input")

    # -- value expressions -------------------------------------------------------------
    def value_expr(self) -> SubExpression:
        left = self.term()
        while self.at_op(*_ADDITIVE_OPS):
            tok = self.advance()
            self.require_operand(repr(tok.value))
            right = self.term()
            left = SubExpression(
                "value", left.start, right.end, merge_columns(left.columns, right.columns)
            )
        return left

    def term(self) -> SubExpression:
        left = self.unary()
        while self.at_op(*_MULTIPLICATIVE_OPS):
            tok = self.advance()
            self.require_operand(repr(tok.value))
            right = self.unary()
            left = SubExpression(
                "value", left.start, right.end, merge_columns(left.columns, right.columns)
            )
        return left

    def unary(self) -> SubExpression:
        signs: list[Token] = []  # a loop, not recursion: ``- - - … 1`` has no depth limit
        while self.at_op("-", "+"):
            signs.append(self.advance())
            self.require_operand(repr(signs[-1].value))
        operand = self.postfix()
        for tok in reversed(signs):
            if (
                operand.kind == "lit"
                and isinstance(operand.value, (int, float, decimal.Decimal))
                and not isinstance(operand.value, bool)
            ):
                value = -operand.value if tok.value == "-" else operand.value
                operand = SubExpression("lit", tok.start, operand.end, value=value)
            else:
                operand = SubExpression("value", tok.start, operand.end, operand.columns)
        return operand

    def postfix(self) -> SubExpression:
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
        while self.at_kw(*TYPE_SUFFIX_WORDS) or (in_cast and self.peek().kind == "ident"):
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
            while self.at_kw(*TYPE_SUFFIX_WORDS):
                end = self.advance().end
                words.append(self.toks[self.i - 1].upper)
        return words, params, end

    def fold_cast(
        self, operand: SubExpression, words: list[str], params: list[int], start: int, end: int
    ) -> SubExpression:
        if operand.kind == "lit":
            try:
                value = fold_cast(operand.value, words, params)
            except (ValueError, ArithmeticError) as exc:
                raise FilterParseError(
                    f"cannot cast {self.text[operand.start : operand.end]} to {' '.join(words)}: {exc}",
                    self.text,
                    operand.start,
                ) from None
            if value is not NOT_CASTABLE:
                return SubExpression("lit", start, end, value=value)
        return SubExpression("value", start, end, operand.columns)

    def primary(self) -> SubExpression:
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
            return SubExpression("lit", tok.start, tok.end, value=value)
        if tok.kind == "str":
            self.advance()
            return SubExpression("lit", tok.start, tok.end, value=tok.value)
        if tok.kind == "hex":
            self.advance()
            return SubExpression("lit", tok.start, tok.end, value=tok.value)
        if tok.kind == "op" and tok.value == "(":
            return self.parenthesized()
        if tok.kind == "qident":
            return self.column_ref()
        if tok.kind == "ident":
            word = tok.upper
            if word in ("TRUE", "FALSE", "NULL"):
                self.advance()
                value = {"TRUE": True, "FALSE": False, "NULL": None}[word]
                return SubExpression("lit", tok.start, tok.end, value=value)
            nxt = self.peek(1)
            if word in ("DATE", "TIMESTAMP", "DATETIME", "TIME") and nxt.kind == "str":
                return self.typed_literal(word)
            if word == "INTERVAL" and nxt.kind == "str":
                self.advance()
                end = self.advance().end
                if self.at_kw(*_INTERVAL_UNITS):
                    end = self.advance().end
                return SubExpression("value", tok.start, end)
            if word in ("CAST", "TRY_CAST") and nxt.kind == "op" and nxt.value == "(":
                return self.cast_expr(word)
            if word == "CASE":
                return self.case_expr()
            if word == "EXTRACT" and nxt.kind == "op" and nxt.value == "(":
                return self.extract_expr()
            if word in _PART_FUNCTIONS and nxt.kind == "op" and nxt.value == "(":
                return self.part_function()
            if word in RESERVED:
                raise self.error(f"expected an expression, found keyword {word}")
            if nxt.kind == "op" and nxt.value == "(":
                return self.function_call()
            return self.column_ref()
        if tok.kind == "eof":
            raise self.error("expected an expression, found end of input")
        if tok.kind == "op" and tok.value == ")":
            raise self.error("expected an expression, found ')'")
        raise self.error(f"expected an expression, found {self.describe(tok)}")

    def parenthesized(self) -> SubExpression:
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
        return SubExpression(
            inner.kind,
            lp.start,
            rp.end,
            inner.columns,
            ref=inner.ref,
            value=inner.value,
            expr=expr,
            chain=inner.chain,
        )

    def column_ref(self) -> SubExpression:
        """A column, or a field of a struct column: ``s.a``, ``s.b.c``; each part may be
        quoted (``"a.b"`` is one name, with a dot in it). With ``self.columns`` known,
        leading table qualifiers are dropped (``strip_qualifiers``)."""
        first = self.advance()
        parts = [first.value]
        end = first.end
        while self.at_op(".") and self.peek(1).kind in ("ident", "qident"):
            self.advance()
            part = self.advance()
            parts.append(part.value)
            end = part.end
        column = tuple(parts)
        if self.columns is not None:
            column = strip_qualifiers(column, self.columns.__contains__)
        ref = Ref(column[0], path=column[1:])
        self.replacements.append((first.start, end, ref_sql(ref)))
        return SubExpression("ref", first.start, end, (ref.name,), ref=ref)

    def typed_literal(self, word: str) -> SubExpression:
        kw = self.advance()
        s = self.advance()
        try:
            if word == "DATE":
                value: Any = parse_date(s.value)
            elif word == "TIME":
                value = parse_time(s.value)
            else:
                value = parse_timestamp(s.value)
        except ValueError as exc:
            raise FilterParseError(
                f"invalid {word} literal {s.value!r}: {exc}", self.text, s.start
            ) from None
        return SubExpression("lit", kw.start, s.end, value=value)

    def cast_expr(self, word: str) -> SubExpression:
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
            return SubExpression("value", kw.start, rp.end, operand.columns)
        return self.fold_cast(operand, words, params, kw.start, rp.end)

    def case_expr(self) -> SubExpression:
        kw = self.advance()
        parts: list[SubExpression] = []
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
        return SubExpression("value", kw.start, end, merge_columns(*(p.columns for p in parts)))

    def part_function(self) -> SubExpression:
        """``year(x)``, ``month(x)``, ``day(x)``, ``hour(x)``: spelled ``date_part`` for Lance."""
        name = self.advance()
        unit = _PART_FUNCTIONS[name.upper]
        # ``year(`` becomes ``date_part('year', ``: Lance knows no ``year()``
        self.replacements.append((name.start, self.peek().end, date_part_sql(unit, "")[:-1]))
        args, rp = self.call_arguments(name)
        if len(args) != 1:
            raise FilterParseError(
                f"{name.value}() takes one date or timestamp argument, got {len(args)}",
                self.text,
                name.start,
            )
        return self.part_of(unit, args[0], name.start, rp.end)

    def extract_expr(self) -> SubExpression:
        """``EXTRACT(<unit> FROM x)``, as Spark SQL and PostgreSQL write ``date_part``."""
        kw = self.advance()
        self.advance()  # (
        tok = self.peek()
        if tok.kind not in ("ident", "str"):
            raise self.error(f"expected a date part after EXTRACT(, found {self.describe(tok)}")
        unit = self.date_part_unit(tok.value, self.advance().start)
        from_kw = self.expect_kw("FROM", "in EXTRACT(<unit> FROM <column>)")
        # Lance has no EXTRACT: ``EXTRACT(unit FROM`` becomes ``date_part('unit', ``
        self.replacements.append((kw.start, from_kw.end, date_part_sql(unit, "")[:-2]))
        self.require_operand("EXTRACT(… FROM")
        arg = self.or_level()
        rp = self.expect_op(")", "to close EXTRACT")
        return self.part_of(DATE_PART_SPELLINGS.get(unit), arg, kw.start, rp.end)

    def date_part_unit(self, text: str, position: int) -> str:
        """The unit ``text`` of a ``date_part`` or ``EXTRACT`` at ``position``, lower-cased;
        FilterParseError naming it when Lance's ``date_part`` knows no such unit."""
        unit = text.lower()
        if unit not in DATE_PART_SPELLINGS and unit not in _OTHER_DATE_PARTS:
            raise FilterParseError(
                f"unknown date part {text!r}: use year, month, day or hour, or another "
                "unit of Lance's date_part (quarter, week, minute, second, millisecond, "
                "microsecond, nanosecond, dow, doy, epoch, isoyear, isodow)",
                self.text,
                position,
            )
        return unit

    @staticmethod
    def part_of(unit: str | None, arg: SubExpression, start: int, end: int) -> SubExpression:
        """A call on ``arg`` spanning ``start``-``end``: a calendar field ('part') when
        ``unit`` is one we analyse and ``arg`` a column, else a value."""
        if unit is None or arg.kind != "ref":
            return SubExpression("value", start, end, arg.columns)
        return SubExpression("part", start, end, arg.columns, ref=arg.ref, value=unit)

    def call_arguments(self, name: Token) -> tuple[list[SubExpression], Token]:
        """The arguments of a call whose ``name`` was just read, and its closing ``)``."""
        lp = self.advance()
        args: list[SubExpression] = []
        if self.at_op(")"):
            return args, self.advance()
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
        return args, self.advance()

    def function_call(self) -> SubExpression:
        name = self.advance()
        args, rp = self.call_arguments(name)
        fn = name.value.lower()
        literal_args = len(args) == 2 and all(a.kind == "lit" for a in args)
        if fn == "arrow_cast" and literal_args:
            value = fold_arrow_cast(args[0].value, args[1].value)
            if value is not NOT_CASTABLE:
                return SubExpression("lit", name.start, rp.end, value=value)
        unit_arg = args[0] if args and args[0].kind == "lit" else None
        if fn in ("date_part", "datepart") and unit_arg is not None:
            if not isinstance(unit_arg.value, str) or len(args) != 2:
                raise FilterParseError(
                    f"{name.value}() takes a unit ('year', 'month', 'day', 'hour', ...) and a "
                    "date or timestamp",
                    self.text,
                    name.start,
                )
            unit = self.date_part_unit(unit_arg.value, unit_arg.start)
            return self.part_of(DATE_PART_SPELLINGS.get(unit), args[1], name.start, rp.end)
        return SubExpression("value", name.start, rp.end, merge_columns(*(a.columns for a in args)))
