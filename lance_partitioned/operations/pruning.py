"""Partition pruning: project a row filter onto ``__manifest`` partition columns.

The projection is *inclusive*: the manifest predicate keeps every partition that
could hold a matching row (it may keep a few more). The full row filter still
runs inside each leaf scan, so results are exact.

For each spec version the filter is bound to the schema, put in negation normal
form, and projected field by field. Each transform projects one predicate on its
source itself (``Transform.project``: identity keeps the predicate, year and
truncate project ranges, every transform ``=`` and ``IN``, truncate
``LIKE 'prefix%'``, expressions by evaluating the literal, seed 000 Appendix D).
This module adds what spans several fields of a spec:

- month/day/hour: ranges through the calendar hierarchy ``year → month → day →
  hour`` as a lexicographic tuple comparison, since a month number on its own
  wraps around every year; without the hierarchy, a range bounded on both sides
  by the set of values it covers when that is less than a cycle;
- time transforms of a zoned timestamp are its zone's calendar fields, so
  ranges are first moved onto the column's wall clock (``format.calendar``);
- multi_bucket and multi-source expressions: ``=`` on every source.

``IS NULL`` maps to ``IS NULL`` through every well-known transform (NULL in
gives NULL out), but not through an expression, which may map NULL to a value.
"""

from __future__ import annotations

import decimal
import itertools
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.errors import FilterError
from lance_partitioned.format.calendar import (
    calendar_bound,
    covered_values,
    is_unit_start,
    lower_wall,
    upper_wall,
)
from lance_partitioned.format.expressions import (
    NEGATED_OP,
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
    and_all,
    conjuncts,
    referenced_columns,
)
from lance_partitioned.format.filters.render import render_literal, to_sql
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec
from lance_partitioned.format.transform_base import MAX_IN_VALUES, sort_key
from lance_partitioned.operations.filter_check import check_filter
from lance_partitioned.operations.literals import cast_literal
from lance_partitioned.operations.time_ranges import hierarchy_chain, hierarchy_implies

# -- binding ------------------------------------------------------------------


def _exact_for(lit: Literal, target: pa.DataType) -> Literal:
    """A literal for Lance to compare with a ``target`` column it cannot be cast to.

    Lance refuses a number an integer or decimal column's type cannot hold
    (``j < 3000000000`` on int32, ``i < 2.5e0``, ``amount > 4.995e0`` on
    decimal(12,2): "could not convert to literal of type ..."), but compares a
    decimal literal with such columns exactly. The column's values are multiples
    of a unit (1, or 10^-scale) within a bound (2^64, or 10^(precision-scale)), so
    a number beyond the bound compares like the bound and one between two
    multiples like the midpoint: the literal is handed over as that short decimal,
    with the same answer for every row. Other literals are left to Lance.
    """
    v = lit.value
    if pa.types.is_integer(target):
        unit, bound = decimal.Decimal(1), decimal.Decimal(2**64)
    elif pa.types.is_decimal(target):
        unit = decimal.Decimal(1).scaleb(-target.scale)
        bound = decimal.Decimal(1).scaleb(target.precision - target.scale)
    else:
        return lit
    if isinstance(v, bool):
        return lit
    if isinstance(v, float):
        if not math.isfinite(v):
            return lit
        v = decimal.Decimal(v)  # the float's exact value
    elif isinstance(v, int):
        v = decimal.Decimal(v)
    elif not (isinstance(v, decimal.Decimal) and v.is_finite()):
        return lit
    v = max(-bound, min(bound, v))
    with decimal.localcontext() as ctx:
        ctx.prec = 80  # exact for every value left after clamping
        whole = (v / unit).to_integral_value(rounding=decimal.ROUND_FLOOR) * unit
        exact = whole if whole == v else whole + unit / 2
    try:
        render_literal(exact)
    except ValueError:  # beyond 38 digits (a decimal(38, 0) column): Lance's own error stands
        return lit
    return Literal(exact)


def bind(expr: Expr, schema: Schema) -> Expr:
    """Check column names and convert literals to their column types where exact.

    A predicate whose literal cannot be converted exactly becomes Opaque: it
    does not prune, and the scan still applies it with Lance's own coercion.
    A literal that cannot be compared with its column raises FilterError
    (``literals.cast_literal`` states the rules, time zones included), and so
    does a filter that is not a condition or that Lance cannot plan
    (``filter_check``).
    """
    for name in referenced_columns(expr):
        if not schema.has_field(name):
            raise FilterError(
                f"filter references unknown column {name!r}; columns are {schema.names}"
            )

    def go(e: Expr) -> Expr:
        if isinstance(e, Compare):
            t = schema.field(e.ref.name).type
            ok, v = cast_literal(e.literal.value, t, e.ref.name)
            if ok:
                return Compare(e.op, e.ref, Literal(v))
            return Opaque(to_sql(Compare(e.op, e.ref, _exact_for(Literal(v), t))), (e.ref.name,))
        if isinstance(e, In):
            t = schema.field(e.ref.name).type
            vals = [cast_literal(lit.value, t, e.ref.name) for lit in e.values]
            if all(ok for ok, _ in vals):
                return In(e.ref, tuple(Literal(v) for _, v in vals), e.negated)
            exact = In(
                e.ref,
                tuple(Literal(v) if ok else _exact_for(Literal(v), t) for ok, v in vals),
                e.negated,
            )
            return Opaque(to_sql(exact), (e.ref.name,))
        if isinstance(e, And):
            return And(go(e.left), go(e.right))
        if isinstance(e, Or):
            return Or(go(e.left), go(e.right))
        if isinstance(e, Not):
            return Not(go(e.child))
        return e

    bound = go(expr)
    check_filter(bound, schema)  # what Lance would refuse is refused here, before any read
    return bound


def to_nnf(expr: Expr) -> Expr:
    """Push NOT down to the leaves (exact under SQL's three-valued filter semantics)."""
    if isinstance(expr, Not):
        c = expr.child
        if isinstance(c, Not):
            return to_nnf(c.child)
        if isinstance(c, And):
            return Or(to_nnf(Not(c.left)), to_nnf(Not(c.right)))
        if isinstance(c, Or):
            return And(to_nnf(Not(c.left)), to_nnf(Not(c.right)))
        if isinstance(c, Compare):
            return Compare(NEGATED_OP[c.op], c.ref, c.literal)
        if isinstance(c, In):
            return In(c.ref, c.values, not c.negated)
        if isinstance(c, IsNull):
            return IsNull(c.ref, not c.negated)
        if isinstance(c, Like):
            return Like(c.ref, c.pattern, not c.negated)
        if isinstance(c, Opaque):
            return Opaque(f"NOT ({c.sql})", c.columns)
        if isinstance(c, Literal) and isinstance(c.value, bool):
            return Literal(not c.value)
        return expr
    if isinstance(expr, And):
        return And(to_nnf(expr.left), to_nnf(expr.right))
    if isinstance(expr, Or):
        return Or(to_nnf(expr.left), to_nnf(expr.right))
    return expr


# -- projection ---------------------------------------------------------------


class SpecProjector:
    """Projects bound NNF filters onto the partition columns of one spec version."""

    def __init__(self, spec: PartitionSpec, schema: Schema):
        self.spec = spec
        self.schema = schema
        self.by_source: dict[str, list[PartitionField]] = {}
        for f in spec.fields:
            if len(f.source_ids) == 1 and schema.has_id(f.source_ids[0]):
                name = schema.field_by_id(f.source_ids[0]).name
                self.by_source.setdefault(name, []).append(f)
        self.multi = [
            f
            for f in spec.fields
            if len(f.source_ids) > 1 and all(schema.has_id(s) for s in f.source_ids)
        ]

    def project(self, expr: Expr) -> Expr | None:
        """A predicate on partition columns implied by ``expr``; None when nothing prunes."""
        if isinstance(expr, Or):
            left, right = self.project(expr.left), self.project(expr.right)
            return None if left is None or right is None else Or(left, right)
        if isinstance(expr, And):
            return self._project_conjunction(conjuncts(expr))
        return self._project_conjunction([expr])

    def _project_conjunction(self, parts: list[Expr]) -> Expr | None:
        out: list[Expr] = []
        for p in parts:
            if isinstance(p, (And, Or)):
                sub = self.project(p)
                if sub is not None:
                    out.append(sub)
            elif isinstance(p, Literal) and p.value is False:
                out.append(Literal(False))
            else:
                for f in self.by_source.get(_ref_name(p), []):
                    proj = self._project_leaf(f, p)
                    if proj is not None:
                        out.append(proj)
        out.extend(self._project_hierarchy(parts))
        out.extend(self._project_cycles(parts))
        out.extend(self._project_multi(parts))
        return and_all(out) if out else None

    def _project_leaf(self, f: PartitionField, p: Expr) -> Expr | None:
        """One predicate through one single-source field: the transform projects it."""
        src_type = self.schema.field_by_id(f.source_ids[0]).type
        return f.function.project(p, f.column, src_type, f.result_type)

    # ranges through year → month → day → hour
    def _project_hierarchy(self, parts: list[Expr]) -> list[Expr]:
        out: list[Expr] = []
        for name, fields in self.by_source.items():
            chain = hierarchy_chain(fields)
            if not chain:
                continue
            src_type = self.schema.field(name).type
            for p in parts:
                if not (
                    isinstance(p, Compare)
                    and _ref_name(p) == name
                    and p.op in ("<", "<=", ">", ">=")
                ):
                    continue
                if p.literal.value is None:
                    continue
                op, bound, bound_type = calendar_bound(p.op, p.literal.value, src_type)
                values = [_value_of(f, bound, bound_type) for f in chain]
                if _FAILED in values or None in values:
                    continue
                lower = op in (">", ">=")
                finest = chain[-1].function.calendar_unit
                strict = op == "<" and is_unit_start(bound, finest)
                out.append(_lexicographic([Ref(f.column) for f in chain], values, lower, strict))
        return out

    # ranges through month, day or hour alone: the set of values a two-sided range covers
    def _project_cycles(self, parts: list[Expr]) -> list[Expr]:
        out: list[Expr] = []
        for name, fields in self.by_source.items():
            in_chain = {f.field_id for f in hierarchy_chain(fields)}
            cyclic = [
                f
                for f in fields
                if f.function.calendar_unit is not None
                and not f.function.preserves_order
                and f.field_id not in in_chain
            ]
            if not cyclic:
                continue
            src_type = self.schema.field(name).type
            lows, highs = [], []
            for p in parts:
                if isinstance(p, Compare) and _ref_name(p) == name and p.literal.value is not None:
                    if p.op in (">", ">="):
                        lows.append(lower_wall(p.op, p.literal.value, src_type))
                    elif p.op in ("<", "<="):
                        highs.append(upper_wall(p.op, p.literal.value, src_type))
            lows = [w for w in lows if w is not None]
            highs = [w for w in highs if w is not None]
            if not lows or not highs:
                continue
            for f in cyclic:
                values = covered_values(f.function.calendar_unit, max(lows), min(highs))
                if values is not None:
                    lits = tuple(Literal(v) for v in values)
                    out.append(
                        Compare("=", Ref(f.column), lits[0])
                        if len(lits) == 1
                        else In(Ref(f.column), lits)
                    )
        return out

    # equality on every source of a multi-source field (multi_bucket, expressions)
    def _project_multi(self, parts: list[Expr]) -> list[Expr]:
        out: list[Expr] = []
        for f in self.multi:
            names = [self.schema.field_by_id(s).name for s in f.source_ids]
            choices: list[list[Any]] = []
            for n in names:
                vals = _equalities(parts, n)
                if vals is None:
                    break
                choices.append(vals)
            else:
                combos = list(itertools.islice(itertools.product(*choices), MAX_IN_VALUES + 1))
                if len(combos) > MAX_IN_VALUES:
                    continue
                types = [self.schema.field(n).type for n in names]
                results = set()
                for combo in combos:
                    try:
                        results.add(f.value_of(list(combo), types))
                    except Exception:
                        results = None
                        break
                if results:
                    lits = tuple(Literal(v) for v in sorted(results, key=sort_key))
                    out.append(
                        Compare("=", Ref(f.column), lits[0])
                        if len(lits) == 1
                        else In(Ref(f.column), lits)
                    )
        return out


_FAILED = object()


def _value_of(f: PartitionField, value: Any, src_type: pa.DataType) -> Any:
    """``f``'s partition value of one source value, or ``_FAILED``."""
    try:
        return f.value_of([value], [src_type])
    except Exception:
        return _FAILED


def _ref_name(p: Expr) -> str | None:
    return p.ref.name if isinstance(p, (Compare, In, IsNull, Like)) else None


def _equalities(parts: list[Expr], name: str) -> list[Any] | None:
    for p in parts:
        if (
            isinstance(p, Compare)
            and p.op == "="
            and _ref_name(p) == name
            and p.literal.value is not None
        ):
            return [p.literal.value]
        if isinstance(p, In) and not p.negated and _ref_name(p) == name:
            vals = [v.value for v in p.values if v.value is not None]
            if vals:
                return vals
    return None


def _lexicographic(cols: Sequence[Ref], values: Sequence[Any], lower: bool, strict: bool) -> Expr:
    """(c1..ck) >= (v1..vk) when lower, else <= (or < when strict), expanded to AND/OR."""
    last_op = ">=" if lower else ("<" if strict else "<=")
    head_op = ">" if lower else "<"
    expr: Expr = Compare(last_op, cols[-1], Literal(values[-1]))
    for c, v in zip(reversed(cols[:-1]), reversed(values[:-1]), strict=True):
        expr = Or(Compare(head_op, c, Literal(v)), And(Compare("=", c, Literal(v)), expr))
    return expr


# -- per-leaf residual filters ------------------------------------------------


def _implied(
    p: Expr, fields: list[PartitionField], values: dict[str, Any], src_type: pa.DataType
) -> bool:
    """True when every row of a partition with these values satisfies ``p``.

    The first field whose transform can answer alone does (identity: the value
    itself; any field: a non-NULL value means a non-NULL source); otherwise the
    calendar fields answer together."""
    for f in fields:
        verdict = f.function.strict_project(p, values[f.field_id], src_type)
        if verdict is not None:
            return verdict
    return hierarchy_implies(p, fields, values, src_type)


def residual_filter(
    expr: Expr, spec: PartitionSpec, schema: Schema, values: dict[str, Any]
) -> Expr | None:
    """``expr`` without the top-level conjuncts a partition's values already guarantee.

    ``expr`` must be bound and in NNF. None means every row of the partition matches.
    """
    parts = conjuncts(expr)
    kept = residual_conjuncts(parts, fields_by_source(spec, schema), schema, values)
    return and_all([parts[i] for i in kept]) if kept else None


def fields_by_source(spec: PartitionSpec, schema: Schema) -> dict[str, list[PartitionField]]:
    """The spec's single-source fields, by the name of their (present) source column."""
    by_source: dict[str, list[PartitionField]] = {}
    for f in spec.fields:
        if len(f.source_ids) == 1 and schema.has_id(f.source_ids[0]):
            by_source.setdefault(schema.field_by_id(f.source_ids[0]).name, []).append(f)
    return by_source


def residual_conjuncts(
    parts: Sequence[Expr],
    by_source: dict[str, list[PartitionField]],
    schema: Schema,
    values: dict[str, Any],
) -> tuple[int, ...]:
    """Indices of the conjuncts ``parts`` (of a bound NNF filter) that a partition with
    ``values`` does not guarantee: what its leaf scan still has to check.

    Split from ``residual_filter`` so that a scan over many leaves can build
    ``by_source`` once per spec and render each distinct residual once.
    """
    kept = []
    for i, p in enumerate(parts):
        name = _ref_name(p)
        fields = by_source.get(name) if name is not None else None
        if fields and _implied(p, fields, values, schema.field(name).type):
            continue
        kept.append(i)
    return tuple(kept)


# -- per-spec partition predicates -------------------------------------------


def partition_predicates(
    expr: Expr | None, specs: dict[int, PartitionSpec], schema: Schema
) -> dict[int, Expr | None]:
    """For each spec version, a predicate on its partition columns that a *bound* ``expr`` implies.

    A partition whose values fail its spec's predicate holds no matching row. None
    for a spec means it prunes nothing. ``catalog.manifest_query`` turns these
    into the ``__manifest`` query.
    """
    if expr is None:
        return dict.fromkeys(specs)
    nnf = to_nnf(expr)
    return {sid: SpecProjector(specs[sid], schema).project(nnf) for sid in sorted(specs)}
