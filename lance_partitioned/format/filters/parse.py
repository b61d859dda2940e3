"""SQL filter text -> filter AST (:mod:`lance_partitioned.format.expressions`).

:func:`parse_filter` reads a SQL ``WHERE``-clause predicate with a real
tokenizer (:mod:`.tokens`) and a recursive-descent parser and returns the AST in
the normal form described in ``expressions.py``; :mod:`.render` writes it back.

Parsing rules worth knowing:

* Keywords are case-insensitive. Unquoted identifiers are kept **verbatim**
  (no lower-casing, as Lance resolves ``CamelCase`` to the column
  ``CamelCase``). Double-quoted and backtick-quoted identifiers may contain
  anything; a doubled quote character escapes it. A dotted name ``s.a`` (or
  ``s.b.c``) is a field of struct column ``s`` (``Ref.path``), as in Lance's SQL;
  a quoted ``"a.b"`` is one name. With the namespace's ``columns`` given, a
  dotted name whose first part is no column is read as qualified: ``t.col`` is
  column ``col`` (``expressions.strip_qualifiers``).
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
* ``year(x)``, ``month(x)``, ``day(x)``, ``hour(x)``, ``date_part('<unit>', x)``
  (``datepart``) and ``EXTRACT(<unit> FROM x)`` of a column compared with
  literals (``=``, ``<``, ..., ``IN``, ``BETWEEN``) become ``DatePart``; the
  unit may be any spelling Lance's ``date_part`` accepts (``'years'``,
  ``'hr'``, ...), and an unknown unit is a FilterParseError naming it. Inside
  an ``Opaque`` part these calls are re-spelled ``date_part('<unit>', x)``,
  which is what Lance evaluates.
* Predicates the AST cannot express (other function calls, arithmetic,
  column-to-column comparisons, ``IS TRUE``, ``ILIKE``, ``LIKE … ESCAPE``,
  ``IS DISTINCT FROM`` between two columns, ...) become ``Opaque`` carrying the
  source text of the whole predicate. Column references inside it are re-spelled
  with backticks.
* ``x IS [NOT] DISTINCT FROM <literal>`` becomes the comparison and NULL test it
  means (``expressions.distinct_from``), so its literal follows the rules of ``=``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from lance_partitioned.format.expressions import (
    FLIPPED_OP,
    And,
    Compare,
    DatePart,
    Expr,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    distinct_from,
    merge_equalities,
)
from lance_partitioned.format.filters.depth import FRAMES_PER_LEVEL, MAX_NESTING, recursion_room
from lance_partitioned.format.filters.parse_values import (
    CMP_TOKENS,
    OPAQUE_CMP_TOKENS,
    SubExpression,
    ValueParser,
    merge_columns,
)
from lance_partitioned.format.filters.tokens import FilterParseError, Token


class _Parser(ValueParser):
    """The boolean grammar: OR, AND, NOT and predicates over value operands."""

    depth = -1  # parentheses (and calls, CAST, CASE) around the expression being read

    def max_paren_depth(self) -> int:
        """The deepest nesting of parentheses in the text (its tokens)."""
        depth = deepest = 0
        for tok in self.toks:
            if tok.kind == "op" and tok.value in ("(", ")"):
                depth += 1 if tok.value == "(" else -1
                deepest = max(deepest, depth)
        return deepest

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

    def or_level(self) -> SubExpression:
        # every nested expression (parentheses, function arguments, CAST, CASE) comes here
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise self.error(
                    f"the filter nests expressions more than {MAX_NESTING} levels deep "
                    "(parentheses, function calls, CAST and CASE each add a level)"
                )
            return self._chain("OR", self.and_level, Or)
        finally:
            self.depth -= 1

    def and_level(self) -> SubExpression:
        return self._chain("AND", self.not_level, And)

    def _chain(self, keyword: str, operand: Any, node: Any) -> SubExpression:
        """``operand (keyword operand)*`` as one boolean operand.

        A loop, so a chain of any length needs no recursion. The operands, with
        those of a parenthesized chain of the same operator (``(a OR b) OR c``),
        are kept flat as ``chain``, to be joined into one balanced tree."""
        first = operand()
        if not self.at_kw(keyword):
            return first
        operands = [first]
        while self.at_kw(keyword):
            self.advance()
            self.require_operand(keyword)
            operands.append(operand())
        items: list[Expr] = []
        for op in operands:
            if op.chain is not None and op.chain[0] is node:
                items.extend(op.chain[1])
            else:
                items.append(self.as_bool(op))
        if node is Or:
            items = merge_equalities(items)
        columns = merge_columns(*(op.columns for op in operands))
        return SubExpression("bool", first.start, operands[-1].end, columns, chain=(node, items))

    def not_level(self) -> SubExpression:
        nots: list[Token] = []  # a loop: ``NOT NOT … x`` needs no recursion
        while self.at_kw("NOT"):
            nots.append(self.advance())
            self.require_operand("NOT")
        out = self.predicate()
        for tok in reversed(nots):
            out = SubExpression(
                "bool", tok.start, out.end, out.columns, expr=Not(self.as_bool(out))
            )
        return out

    def predicate(self) -> SubExpression:
        left = self.value_expr()
        while True:
            tok = self.peek()
            if tok.kind == "op" and (tok.value in CMP_TOKENS or tok.value in OPAQUE_CMP_TOKENS):
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

    def build_compare(
        self, op_text: str, left: SubExpression, right: SubExpression
    ) -> SubExpression:
        columns = merge_columns(left.columns, right.columns)
        op = CMP_TOKENS.get(op_text)
        if op is not None and "part" in (left.kind, right.kind):
            part, lit, flip = (left, right, False) if left.kind == "part" else (right, left, True)
            if lit.kind == "lit":
                cmp = Compare(FLIPPED_OP[op] if flip else op, part.ref, Literal(lit.value))  # type: ignore[arg-type]
                return SubExpression(
                    "bool", left.start, right.end, columns, expr=DatePart(part.value, cmp)
                )
        if op is not None:
            if left.kind == "ref" and right.kind == "lit":
                expr: Expr = Compare(op, left.ref, Literal(right.value))  # type: ignore[arg-type]
                return SubExpression("bool", left.start, right.end, columns, expr=expr)
            if left.kind == "lit" and right.kind == "ref":
                expr = Compare(FLIPPED_OP[op], right.ref, Literal(left.value))  # type: ignore[arg-type]
                return SubExpression("bool", left.start, right.end, columns, expr=expr)
        return self.opaque(left.start, right.end, columns)

    def is_predicate(self, left: SubExpression) -> SubExpression:
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
                return SubExpression("bool", left.start, tok.end, left.columns, expr=expr)
            return self.opaque(left.start, tok.end, left.columns)
        if self.at_kw("TRUE", "FALSE", "UNKNOWN"):
            self.advance()
            return self.opaque(left.start, tok.end, left.columns)
        if self.at_kw("DISTINCT"):
            self.advance()
            self.expect_kw("FROM", "after IS [NOT] DISTINCT")
            self.require_operand("IS DISTINCT FROM")
            right = self.value_expr()
            return self.distinct_predicate(left, right, not negated)
        raise self.error(
            f"expected NULL, TRUE, FALSE, UNKNOWN or DISTINCT FROM after IS, found {self.describe(tok)}"
        )

    def distinct_predicate(
        self, left: SubExpression, right: SubExpression, distinct: bool
    ) -> SubExpression:
        """``left IS [NOT] DISTINCT FROM right``: a column against a literal is desugared
        (``distinct_from``); anything else stays Opaque."""
        columns = merge_columns(left.columns, right.columns)
        kinds = (left.kind, right.kind)
        if kinds in (("ref", "lit"), ("lit", "ref")):
            ref, lit = (left, right) if kinds == ("ref", "lit") else (right, left)
            expr = distinct_from(ref.ref, lit.value, distinct)  # type: ignore[arg-type]
            return SubExpression("bool", left.start, right.end, columns, expr=expr)
        return self.opaque(left.start, right.end, columns)

    def in_predicate(self, left: SubExpression, negated: bool) -> SubExpression:
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
        columns = merge_columns(left.columns, *(it.columns for it in items))
        if left.kind in ("ref", "part") and all(it.kind == "lit" for it in items):
            expr: Expr = In(left.ref, tuple(Literal(it.value) for it in items), negated)  # type: ignore[arg-type]
            if left.kind == "part":
                expr = DatePart(left.value, expr)  # type: ignore[arg-type]
            return SubExpression("bool", left.start, rp.end, columns, expr=expr)
        return self.opaque(left.start, rp.end, columns)

    def list_item(self, lp: Token) -> SubExpression:
        if self.peek().kind == "eof":
            raise self.error(
                f"unbalanced parentheses: IN list opened at position {lp.start} is not closed"
            )
        return self.value_expr()

    def between_predicate(self, left: SubExpression, negated: bool) -> SubExpression:
        self.require_operand("BETWEEN")
        low = self.value_expr()
        self.expect_kw("AND", "in BETWEEN … AND …")
        self.require_operand("BETWEEN … AND")
        high = self.value_expr()
        columns = merge_columns(left.columns, low.columns, high.columns)
        if left.kind in ("ref", "part") and low.kind == "lit" and high.kind == "lit":
            ref = left.ref
            assert ref is not None
            ops = ("<", ">") if negated else (">=", "<=")
            lo: Expr = Compare(ops[0], ref, Literal(low.value))
            hi: Expr = Compare(ops[1], ref, Literal(high.value))
            if left.kind == "part":
                lo, hi = DatePart(left.value, lo), DatePart(left.value, hi)  # type: ignore[arg-type]
            expr = Or(lo, hi) if negated else And(lo, hi)
            return SubExpression("bool", left.start, high.end, columns, expr=expr)
        return self.opaque(left.start, high.end, columns)

    def like_predicate(self, left: SubExpression, kw: str, negated: bool) -> SubExpression:
        if kw == "SIMILAR":
            self.expect_kw("TO", "after SIMILAR")
        self.require_operand(kw)
        pattern = self.value_expr()
        end = pattern.end
        columns = merge_columns(left.columns, pattern.columns)
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
            return SubExpression("bool", left.start, end, columns, expr=expr)
        return self.opaque(left.start, end, columns)


def parse_filter(text: str, columns: Collection[str] | None = None) -> Expr:
    """Parse a SQL ``WHERE``-clause predicate into the filter AST.

    Chains of AND or OR of any length are read in a loop and built as balanced
    trees; expressions may nest up to ``MAX_NESTING`` levels. Raises
    FilterParseError (a ValueError) with the position of the problem, also for a
    filter nested deeper than that. ``columns``: the top-level column names, to tell
    a table qualifier (``t.col``) from a struct column (``s.a``); without them every
    dotted name is a path into a struct.
    """
    if not isinstance(text, str):
        raise TypeError(f"filter must be a str, got {type(text).__name__}")
    parser = _Parser(text, columns)
    # each level is a recursive descent through the grammar: room for as many as the text has
    with recursion_room(FRAMES_PER_LEVEL * min(parser.max_paren_depth(), MAX_NESTING)):
        return parser.parse()
