"""Partition pruning: project a bound row filter onto ``__manifest`` partition columns.

Pure: it reads a filter, a schema and specs, and returns predicates. The
projection is *inclusive*: the manifest predicate keeps every partition that
could hold a matching row (it may keep a few more). The full row filter still
runs inside each leaf scan, so results are exact.

The filter arrives bound (``format.filters.bind``: every column reference carries
its namespace field id) and is put in negation normal form. A spec's partition
fields are found by their *source field ids*, never by column name, so a renamed
column keeps pruning. Each transform projects one predicate on its source itself
(``Transform.project``: identity keeps the predicate, year and truncate project
ranges, every transform ``=`` and ``IN``, truncate ``LIKE 'prefix%'``,
expressions by evaluating the literal, seed 000 Appendix D). This module adds
what spans several fields of a spec:

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

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.format.calendar import (
    calendar_bound,
    covered_values,
    is_unit_start,
    lower_wall,
    upper_wall,
)
from lance_partitioned.format.expressions import (
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
    Ref,
    and_all,
)
from lance_partitioned.format.filters.visitor import (
    FilterVisitor,
    conjuncts,
    nesting,
    to_nnf,
    visit,
)
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec
from lance_partitioned.format.time_ranges import (
    hierarchy_chain,
    hierarchy_implies,
    hierarchy_may_imply,
)
from lance_partitioned.format.transform_base import MAX_IN_VALUES, sort_key

# -- projection ---------------------------------------------------------------


@dataclass(frozen=True)
class _ProjectedOr:
    """An OR among the conjuncts of a conjunction, already projected (None: prunes nothing)."""

    projection: Expr | None


class _ConjunctionCollector(FilterVisitor[list]):
    """The conjuncts of each AND run, in order: ORs are projected where they occur
    (each side as a conjunction of its own), every other node is kept for the
    spec's fields to project together (ranges need the calendar hierarchy, multi-
    source fields an equality on each source)."""

    def __init__(self, projector: SpecProjector):
        self.projector = projector

    def visit_and(self, node: And, left: list, right: list) -> list:
        return left + right

    def visit_or(self, node: Or, left: list, right: list) -> list:
        lhs = self.projector.project_conjunction(left)
        rhs = self.projector.project_conjunction(right)
        return [_ProjectedOr(None if lhs is None or rhs is None else Or(lhs, rhs))]

    def visit_not(self, node: Not, child: list) -> list:
        return [node]  # in NNF only a bare column or a non-boolean literal: prunes nothing

    def visit_leaf(self, node: Expr) -> list:
        return [node]


class SpecProjector:
    """Projects bound NNF filters onto the partition columns of one spec version.

    Partition fields are matched to predicates by source field id
    (``Ref.field_id``); an unbound reference matches no field.
    """

    def __init__(self, spec: PartitionSpec, schema: Schema):
        self.spec = spec
        self.schema = schema
        self.by_source = fields_by_source(spec, schema)
        self.multi = [
            f
            for f in spec.fields
            if len(f.source_ids) > 1 and all(schema.has_id(s) for s in f.source_ids)
        ]

    def project(self, expr: Expr) -> Expr | None:
        """A predicate on partition columns implied by ``expr``; None when nothing prunes."""
        return self.project_conjunction(visit(expr, _ConjunctionCollector(self)))

    def project_conjunction(self, parts: list) -> Expr | None:
        """The projection of the AND of ``parts`` (conjuncts, ORs already projected)."""
        out: list[Expr] = []
        for p in parts:
            if isinstance(p, _ProjectedOr):
                if p.projection is not None:
                    out.append(p.projection)
            elif isinstance(p, Literal) and p.value is False:
                out.append(Literal(False))
            else:
                for f in self.by_source.get(_ref_id(p), ()):
                    proj = self._project_leaf(f, p)
                    if proj is not None:
                        out.append(proj)
        preds = [p for p in parts if not isinstance(p, _ProjectedOr)]
        out.extend(self._project_hierarchy(preds))
        out.extend(self._project_cycles(preds))
        out.extend(self._project_multi(preds))
        return and_all(out) if out else None

    def _project_leaf(self, f: PartitionField, p: Expr) -> Expr | None:
        """One predicate through one single-source field: the transform projects it."""
        src_type = self.schema.field_by_id(f.source_ids[0]).type
        return f.function.project(p, f.column, src_type, f.result_type)

    # ranges through year → month → day → hour
    def _project_hierarchy(self, parts: list[Expr]) -> list[Expr]:
        out: list[Expr] = []
        for source_id, fields in self.by_source.items():
            chain = hierarchy_chain(fields)
            if not chain:
                continue
            src_type = self.schema.field_by_id(source_id).type
            for p in parts:
                if not (
                    isinstance(p, Compare)
                    and _ref_id(p) == source_id
                    and p.op in ("<", "<=", ">", ">=")
                ):
                    continue
                if p.literal.value is None:
                    continue
                op, bound, bound_type = calendar_bound(p.op, p.literal.value, src_type)
                values = [_value_of(f, bound, bound_type) for f in chain]
                if _NO_PARTITION_VALUE in values or None in values:
                    continue
                lower = op in (">", ">=")
                finest = chain[-1].function.calendar_unit
                strict = op == "<" and is_unit_start(bound, finest)
                out.append(_lexicographic([Ref(f.column) for f in chain], values, lower, strict))
        return out

    # ranges through month, day or hour alone: the set of values a two-sided range covers
    def _project_cycles(self, parts: list[Expr]) -> list[Expr]:
        out: list[Expr] = []
        for source_id, fields in self.by_source.items():
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
            src_type = self.schema.field_by_id(source_id).type
            lows, highs = [], []
            for p in parts:
                if (
                    isinstance(p, Compare)
                    and _ref_id(p) == source_id
                    and p.literal.value is not None
                ):
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
            choices: list[list[Any]] = []
            for source_id in f.source_ids:
                vals = _equalities(parts, source_id)
                if vals is None:
                    break
                choices.append(vals)
            else:
                combos = list(itertools.islice(itertools.product(*choices), MAX_IN_VALUES + 1))
                if len(combos) > MAX_IN_VALUES:
                    continue
                types = [self.schema.field_by_id(s).type for s in f.source_ids]
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


# a bound that a field's transform cannot map (wrong type, out of range)
_NO_PARTITION_VALUE = object()


def _value_of(f: PartitionField, value: Any, src_type: pa.DataType) -> Any:
    """``f``'s partition value of one source value, or ``_NO_PARTITION_VALUE``."""
    try:
        return f.value_of([value], [src_type])
    except Exception:
        return _NO_PARTITION_VALUE


def _ref_id(p: Expr) -> int | None:
    """The field id of the column predicate ``p`` tests (None: unbound, or not a predicate
    on one column)."""
    return p.ref.field_id if isinstance(p, (Compare, In, IsNull, Like, DatePart)) else None


def _equalities(parts: list[Expr], source_id: int) -> list[Any] | None:
    """The values an ``=`` or ``IN`` among ``parts`` allows for field ``source_id``."""
    for p in parts:
        if (
            isinstance(p, Compare)
            and p.op == "="
            and _ref_id(p) == source_id
            and p.literal.value is not None
        ):
            return [p.literal.value]
        if isinstance(p, In) and not p.negated and _ref_id(p) == source_id:
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


def fields_by_source(spec: PartitionSpec, schema: Schema) -> dict[int, list[PartitionField]]:
    """The spec's single-source fields, by the field id of their source column (fields
    whose source is no longer in ``schema`` are left out)."""
    by_source: dict[int, list[PartitionField]] = {}
    for f in spec.fields:
        if len(f.source_ids) == 1 and schema.has_id(f.source_ids[0]):
            by_source.setdefault(f.source_ids[0], []).append(f)
    return by_source


@dataclass(frozen=True)
class _ImplicationCheck:
    """One conjunct that some partition value of a spec may guarantee."""

    index: int  # position among the filter's conjuncts
    pred: Expr
    answering: tuple[PartitionField, ...]  # fields whose transform may answer alone
    hierarchy: tuple[PartitionField, ...]  # the source's fields, when the calendar may answer
    source_type: pa.DataType

    def implied(self, values: dict[str, Any]) -> bool:
        """True when every row of a partition with these values satisfies ``pred``.

        The first field whose transform can answer alone does (identity: the value
        itself; any field: a non-NULL value means a non-NULL source); otherwise the
        calendar fields answer together."""
        for f in self.answering:
            verdict = f.function.strict_project(self.pred, values[f.field_id], self.source_type)
            if verdict is not None:
                return verdict
        return bool(self.hierarchy) and hierarchy_implies(
            self.pred, list(self.hierarchy), values, self.source_type
        )

    def implied_array(self, columns: Mapping[int, pa.Array]) -> np.ndarray:
        """``implied`` for many partitions at once: ``columns`` maps each spec field id
        to the partitions' values; a numpy bool per partition.

        Column-wise where every answering transform has a vectorised form
        (``Transform.strict_project_array``) and no partition is left to the
        calendar; otherwise value by value, once per distinct combination."""
        verdict: Any = None
        for f in self.answering:
            v = f.function.strict_project_array(self.pred, columns[f.field_id], self.source_type)
            if v is None:
                return self._implied_rows(columns)
            verdict = v if verdict is None else pc.coalesce(verdict, v)
        if verdict is None or (self.hierarchy and verdict.null_count):
            return self._implied_rows(columns)
        return np.asarray(pc.fill_null(verdict, False).to_numpy(zero_copy_only=False), dtype=bool)

    def _implied_rows(self, columns: Mapping[int, pa.Array]) -> np.ndarray:
        ids = list(dict.fromkeys(f.field_id for f in (*self.answering, *self.hierarchy)))
        lists = [columns[i].to_pylist() for i in ids]
        n = len(next(iter(columns.values()))) if columns else 0
        memo: dict[Any, bool] = {}
        out = np.zeros(n, dtype=bool)
        for row, key in enumerate(zip(*lists, strict=True)):
            try:
                verdict = memo[key]
            except KeyError:
                verdict = memo[key] = self.implied(dict(zip(ids, key, strict=True)))
            except TypeError:  # an unhashable value: answer without the memo
                verdict = self.implied(dict(zip(ids, key, strict=True)))
            out[row] = verdict
        return out


class ResidualPlan:
    """Which conjuncts of one bound NNF filter a partition of one spec still has to check.

    Whether a field can guarantee a conjunct at all depends only on the spec and
    the conjunct (a bucket never guarantees a range), so that is decided once
    here; ``kept`` asks each leaf's values only about the conjuncts some field
    may guarantee. When there are none, every leaf of the spec keeps every
    conjunct: ``constant``.
    """

    def __init__(self, parts: Sequence[Expr], spec: PartitionSpec, schema: Schema):
        by_source = fields_by_source(spec, schema)
        self.field_ids = tuple(f.field_id for f in spec.fields)
        checks = []
        for i, p in enumerate(parts):
            source_id = _ref_id(p)
            fields = by_source.get(source_id) if source_id is not None else None
            if not fields:
                continue
            answering = tuple(f for f in fields if f.function.may_strict_project(p))
            hierarchy = tuple(fields) if hierarchy_may_imply(p, fields) else ()
            if answering or hierarchy:
                src_type = schema.field_by_id(source_id).type
                checks.append(_ImplicationCheck(i, p, answering, hierarchy, src_type))
        self._checks = tuple(checks)
        self._count = len(parts)
        # every conjunct, for every leaf of this spec: no field may guarantee any
        self.constant: tuple[int, ...] | None = None if checks else tuple(range(len(parts)))
        # The answer depends only on the values of the fields the checks read: leaves
        # that share them (every bucket of one month) share it.
        read = {f.field_id for c in checks for f in (*c.answering, *c.hierarchy)}
        self._read_positions = tuple(i for i, fid in enumerate(self.field_ids) if fid in read)
        self._answers: dict[tuple[Any, ...], tuple[int, ...]] = {}

    def kept(self, values: Sequence[Any]) -> tuple[int, ...]:
        """Indices of the conjuncts a partition with ``values`` (in spec field order)
        does not guarantee: what its leaf scan still has to check."""
        if self.constant is not None:
            return self.constant
        key = tuple(values[i] for i in self._read_positions)
        try:
            return self._answers[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable value: answer without the memo
            return self._kept(values)
        answer = self._answers[key] = self._kept(values)
        return answer

    def kept_array(
        self, columns: Sequence[pa.Array], count: int
    ) -> tuple[np.ndarray, list[tuple[int, ...]]]:
        """``kept`` for ``count`` partitions at once, from their value ``columns`` (one
        per spec field, in field order). Returns each partition's index into the list
        of distinct answers, and that list."""
        if self.constant is not None:
            return np.zeros(count, dtype=np.int64), [self.constant]
        by_id = dict(zip(self.field_ids, columns, strict=True))
        implied = [c.implied_array(by_id) for c in self._checks]
        if len(implied) <= 62:  # one bit per check in an int64: distinct answers by np.unique
            bits = np.zeros(count, dtype=np.int64)
            for j, mask in enumerate(implied):
                bits |= mask.astype(np.int64) << j
            codes, index = np.unique(bits, return_inverse=True)
            patterns = [[bool((int(code) >> j) & 1) for j in range(len(implied))] for code in codes]
        else:
            rows = list(zip(*(m.tolist() for m in implied), strict=True))
            distinct = list(dict.fromkeys(rows))
            position = {r: i for i, r in enumerate(distinct)}
            index = np.fromiter((position[r] for r in rows), dtype=np.int64, count=count)
            patterns = [list(r) for r in distinct]
        answers = []
        for pattern in patterns:
            dropped = {c.index for c, hit in zip(self._checks, pattern, strict=True) if hit}
            answers.append(tuple(i for i in range(self._count) if i not in dropped))
        return np.asarray(index, dtype=np.int64).reshape(count), answers

    def _kept(self, values: Sequence[Any]) -> tuple[int, ...]:
        by_id = dict(zip(self.field_ids, values, strict=True))
        dropped = {c.index for c in self._checks if c.implied(by_id)}
        return tuple(i for i in range(self._count) if i not in dropped)


def residual_filter(
    expr: Expr, spec: PartitionSpec, schema: Schema, values: dict[str, Any]
) -> Expr | None:
    """``expr`` without the top-level conjuncts a partition's values already guarantee.

    ``expr`` must be bound and in NNF; ``values`` maps each of the spec's field
    ids to the partition's value. None means every row of the partition matches.
    """
    parts = conjuncts(expr)
    kept = ResidualPlan(parts, spec, schema).kept([values[f.field_id] for f in spec.fields])
    return and_all([parts[i] for i in kept]) if kept else None


# -- per-spec partition predicates -------------------------------------------

# The deepest predicate (``visitor.nesting``) one spec contributes to the __manifest
# query, which wraps it in three more levels: well inside Lance's parser's reach.
MAX_PRUNING_NESTING = 16


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
    out = {sid: SpecProjector(specs[sid], schema).project(nnf) for sid in sorted(specs)}
    # a predicate Lance's SQL parser might not read inside the __manifest query
    # (filter_check refuses filters nested deeper than Lance reads) prunes nothing
    return {
        sid: p if p is None or nesting(p) <= MAX_PRUNING_NESTING else None for sid, p in out.items()
    }
