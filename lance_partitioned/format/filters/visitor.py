"""One walk over the filter AST: a visitor base, and the small visitors every layer shares.

The shape is pyiceberg's ``expressions/visitors.py``: :func:`visit` walks the
tree bottom-up and hands each node, with the results of its children, to one
method of a :class:`FilterVisitor`. ``And``, ``Or`` and ``Not`` are dispatched
here and only here; a visitor says what a node means (``visit_and(node, left,
right)``) and never recurses itself. Built on it:

- :class:`Rewriter`: a visitor that rebuilds the tree, for visitors that change
  only some leaves (``bind``);
- :func:`conjuncts`, :func:`referenced_columns`, :func:`predicates`,
  :func:`nesting`;
- :func:`to_nnf`, negation normal form;
- elsewhere: rendering to Lance SQL (``render``), binding (``bind``), inclusive
  projection onto partition columns (``format.pruning.SpecProjector``), the
  filter checks (``operations.read.filter_check``) and the tests' pyarrow renderer.

A visitor whose answer for a node depends on the node's own fields as well as on
its children's answers reads them from ``node``.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from lance_partitioned.format.expressions import (
    NEGATED_OP,
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

T = TypeVar("T")


class FilterVisitor(Generic[T]):
    """What each kind of node means. ``visit`` calls these bottom-up.

    The leaf methods default to :meth:`visit_leaf`, so a visitor that treats all
    predicates alike overrides just that one.
    """

    def visit_and(self, node: And, left: T, right: T) -> T:
        raise NotImplementedError

    def visit_or(self, node: Or, left: T, right: T) -> T:
        raise NotImplementedError

    def visit_not(self, node: Not, child: T) -> T:
        raise NotImplementedError

    def visit_leaf(self, node: Expr) -> T:
        """Any node without sub-expressions that has no method of its own."""
        raise TypeError(f"not a filter expression: {node!r}")

    def visit_compare(self, node: Compare) -> T:
        return self.visit_leaf(node)

    def visit_in(self, node: In) -> T:
        return self.visit_leaf(node)

    def visit_is_null(self, node: IsNull) -> T:
        return self.visit_leaf(node)

    def visit_like(self, node: Like) -> T:
        return self.visit_leaf(node)

    def visit_date_part(self, node: DatePart) -> T:
        return self.visit_leaf(node)

    def visit_opaque(self, node: Opaque) -> T:
        return self.visit_leaf(node)

    def visit_literal(self, node: Literal) -> T:
        return self.visit_leaf(node)

    def visit_ref(self, node: Ref) -> T:
        return self.visit_leaf(node)


# method names, looked up on the visitor so that subclasses' overrides apply
_METHODS: dict[type, str] = {
    And: "visit_and",
    Or: "visit_or",
    Not: "visit_not",
    Compare: "visit_compare",
    In: "visit_in",
    IsNull: "visit_is_null",
    Like: "visit_like",
    DatePart: "visit_date_part",
    Opaque: "visit_opaque",
    Literal: "visit_literal",
    Ref: "visit_ref",
}


def _method(kind: type) -> str:
    """The visitor method for a node class (a subclass of a node gets its base's)."""
    name = _METHODS.get(kind)
    if name is None:
        base = next((b for b in kind.__mro__ if b in _METHODS), None)
        name = _METHODS[kind] = _METHODS[base] if base is not None else "visit_leaf"
    return name


_BRANCHES = frozenset({"visit_and", "visit_or", "visit_not"})


def visit(expr: Expr, visitor: FilterVisitor[T]) -> T:
    """``visitor``'s answer for ``expr``: children first, then the node with their answers.

    Left before right, as a recursive walk would go, but with a stack of its own:
    a tree of any depth (a chain of NOTs, a foreign expression nested 10,000 deep)
    is walked without Python recursion. Raises TypeError for an object that is
    not a filter node (through ``visit_leaf``, unless the visitor overrides it).
    """
    name = _method(type(expr))
    if name not in _BRANCHES:
        return getattr(visitor, name)(expr)
    answers: list = []
    # (node, its method, whether its children's answers are on ``answers`` already)
    todo: list[tuple[Expr, str, bool]] = [(expr, name, False)]
    while todo:
        node, name, ready = todo.pop()
        if name not in _BRANCHES:
            answers.append(getattr(visitor, name)(node))
        elif ready and name == "visit_not":
            answers.append(visitor.visit_not(node, answers.pop()))
        elif ready:
            right = answers.pop()
            answers.append(getattr(visitor, name)(node, answers.pop(), right))
        else:
            todo.append((node, name, True))
            children = (node.child,) if name == "visit_not" else (node.right, node.left)
            todo.extend((c, _method(type(c)), False) for c in children)
    return answers[0]


class Rewriter(FilterVisitor[Expr]):
    """A visitor that returns a new tree: ``And``/``Or``/``Not`` are rebuilt from the
    rewritten children (the very node when nothing below it changed), and every leaf
    is kept unless a subclass rewrites it."""

    def visit_and(self, node: And, left: Expr, right: Expr) -> Expr:
        return node if left is node.left and right is node.right else And(left, right)

    def visit_or(self, node: Or, left: Expr, right: Expr) -> Expr:
        return node if left is node.left and right is node.right else Or(left, right)

    def visit_not(self, node: Not, child: Expr) -> Expr:
        return node if child is node.child else Not(child)

    def visit_leaf(self, node: Expr) -> Expr:
        return node


# -- shared visitors ----------------------------------------------------------


class _Conjuncts(FilterVisitor[list[Expr]]):
    def visit_and(self, node: And, left: list[Expr], right: list[Expr]) -> list[Expr]:
        return left + right

    def visit_or(self, node: Or, left: list[Expr], right: list[Expr]) -> list[Expr]:
        return [node]

    def visit_not(self, node: Not, child: list[Expr]) -> list[Expr]:
        return [node]

    def visit_leaf(self, node: Expr) -> list[Expr]:
        return [node]


def conjuncts(expr: Expr) -> list[Expr]:
    """The operands of the top-level ANDs of ``expr``, left to right (``[expr]`` if none)."""
    return visit(expr, _Conjuncts())


class _Predicates(FilterVisitor[list[Expr]]):
    def visit_and(self, node: And, left: list[Expr], right: list[Expr]) -> list[Expr]:
        return left + right

    visit_or = visit_and

    def visit_not(self, node: Not, child: list[Expr]) -> list[Expr]:
        return child

    def visit_leaf(self, node: Expr) -> list[Expr]:
        return [node]


def predicates(expr: Expr) -> list[Expr]:
    """Every node of ``expr`` below its ANDs, ORs and NOTs, left to right."""
    return visit(expr, _Predicates())


class _Columns(FilterVisitor[set[str]]):
    def visit_and(self, node: And, left: set[str], right: set[str]) -> set[str]:
        return left | right

    visit_or = visit_and

    def visit_not(self, node: Not, child: set[str]) -> set[str]:
        return child

    def visit_compare(self, node: Compare) -> set[str]:
        return {node.ref.name}

    visit_in = visit_is_null = visit_like = visit_date_part = visit_compare

    def visit_opaque(self, node: Opaque) -> set[str]:
        return set(node.columns)

    def visit_ref(self, node: Ref) -> set[str]:
        return {node.name}

    def visit_leaf(self, node: Expr) -> set[str]:
        return set()


def referenced_columns(expr: Expr) -> set[str]:
    """Names of every column an expression reads."""
    return visit(expr, _Columns())


class _Nesting(FilterVisitor[tuple[int, str]]):
    """Each node's nesting and kind: a child of the node's own kind continues its
    chain; any other child nests one level below it."""

    def visit_and(self, node: Expr, left: tuple[int, str], right: tuple[int, str]) -> tuple:
        kind = type(node).__name__
        return max(d if k == kind else d + 1 for d, k in (left, right)), kind

    visit_or = visit_and

    def visit_not(self, node: Not, child: tuple[int, str]) -> tuple[int, str]:
        return child[0] + 1, "Not"

    def visit_leaf(self, node: Expr) -> tuple[int, str]:
        return 0, ""


def nesting(expr: Expr) -> int:
    """How deep AND/OR alternations and NOTs nest in ``expr``: 0 for a predicate, 1 for
    a chain of one operator of any length (``a OR b OR c``), 2 for ``a OR (b AND c)``
    or ``NOT (a OR b)``. Rendered SQL needs about one level of parentheses (or of
    operator precedence) for each, and Lance's SQL parser reads only some 30."""
    return visit(expr, _Nesting())[0]


class _NegationNormalForm(FilterVisitor[tuple[Expr, Expr]]):
    """Each node's NNF and its negation's NNF, so that a NOT swaps the two instead of
    walking its child again. Exact under SQL's three-valued logic: NOT pushes
    through AND/OR by De Morgan, and every predicate has an exact negation
    (``x < 5`` / ``x >= 5`` are both NULL when x is NULL)."""

    def visit_and(self, node: And, left: tuple, right: tuple) -> tuple[Expr, Expr]:
        return And(left[0], right[0]), Or(left[1], right[1])

    def visit_or(self, node: Or, left: tuple, right: tuple) -> tuple[Expr, Expr]:
        return Or(left[0], right[0]), And(left[1], right[1])

    def visit_not(self, node: Not, child: tuple) -> tuple[Expr, Expr]:
        return child[1], child[0]

    def visit_compare(self, node: Compare) -> tuple[Expr, Expr]:
        return node, Compare(NEGATED_OP[node.op], node.ref, node.literal)

    def visit_in(self, node: In) -> tuple[Expr, Expr]:
        return node, In(node.ref, node.values, not node.negated)

    def visit_is_null(self, node: IsNull) -> tuple[Expr, Expr]:
        return node, IsNull(node.ref, not node.negated)

    def visit_like(self, node: Like) -> tuple[Expr, Expr]:
        return node, Like(node.ref, node.pattern, not node.negated)

    def visit_date_part(self, node: DatePart) -> tuple[Expr, Expr]:
        return node, DatePart(node.unit, visit(node.pred, self)[1])  # type: ignore[arg-type]

    def visit_opaque(self, node: Opaque) -> tuple[Expr, Expr]:
        return node, Opaque(f"NOT ({node.sql})", node.columns)

    def visit_literal(self, node: Literal) -> tuple[Expr, Expr]:
        if isinstance(node.value, bool):
            return node, Literal(not node.value)
        return node, Not(node)  # NOT NULL (or a non-boolean) stays as written

    def visit_leaf(self, node: Expr) -> tuple[Expr, Expr]:
        return node, Not(node)


def to_nnf(expr: Expr) -> Expr:
    """Push NOT down to the leaves (exact under SQL's three-valued filter semantics).

    What is left under a NOT is a node with no negation of its own (a bare
    column, a non-boolean literal).
    """
    return visit(expr, _NegationNormalForm())[0]
