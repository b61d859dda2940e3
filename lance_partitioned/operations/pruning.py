"""Partition pruning: project a row filter onto ``__manifest`` partition columns.

The projection is *inclusive*: the manifest predicate keeps every partition that
could hold a matching row (it may keep a few more). The full row filter still
runs inside each leaf scan, so results are exact.

For each spec version the filter is bound to the schema, put in negation normal
form, and projected field by field:

- identity: the predicate itself, on the partition column;
- year: ``=``, ``IN`` and ranges (the year is monotonic);
- month/day/hour: ``=`` and ``IN``; ranges through the calendar hierarchy
  ``year → month → day → hour`` as a lexicographic tuple comparison, since a
  month number on its own wraps around every year; without the hierarchy, a
  range bounded on both sides by the set of values it covers when that is
  less than a cycle;
- time transforms of a zoned timestamp are its zone's calendar fields, so
  ranges are first moved onto the column's wall clock (``time_ranges``);
- bucket: ``=`` and ``IN``;
- truncate: ``=``, ``IN``, ranges (truncation is monotonic), ``LIKE 'prefix%'``;
- multi_bucket and multi-source expressions: ``=`` on every source;
- expressions: ``=`` and ``IN``, by evaluating the expression on the literal
  (seed 000 Appendix D).

``IS NULL`` maps to ``IS NULL`` everywhere: NULL in gives NULL out.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.errors import FilterError
from lance_partitioned.format import zones
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
from lance_partitioned.format.filters.render import escape_like, render_literal, to_sql
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec
from lance_partitioned.format.transforms import TIME_UNITS, Identity, TimeTransform, Truncate
from lance_partitioned.format.types import is_text
from lance_partitioned.operations.filter_check import check_filter
from lance_partitioned.operations.literals import cast_literal
from lance_partitioned.operations.time_ranges import (
    calendar_bound,
    covered_values,
    lower_wall,
    resolution_us,
    unit_instants,
    upper_wall,
)

MAX_IN_VALUES = 4096


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
            if (len(f.source_ids) > 1 or (f.transform is None and len(f.source_ids) >= 1))
            and all(schema.has_id(s) for s in f.source_ids)
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

    # single predicate through one field
    def _project_leaf(self, f: PartitionField, p: Expr) -> Expr | None:
        col = Ref(f.column)
        if isinstance(p, IsNull):
            return IsNull(col, p.negated)
        t = f.transform
        src_type = self.schema.field_by_id(f.source_ids[0]).type
        if isinstance(t, Identity) and f.result_type.equals(src_type):
            if isinstance(p, Compare) and p.literal.value is not None:
                return Compare(p.op, col, p.literal)
            if isinstance(p, In) and all(v.value is not None for v in p.values):
                return In(col, p.values, p.negated)
            if isinstance(p, Like):
                return Like(col, p.pattern, p.negated)
            return None
        if isinstance(p, Compare) and p.literal.value is not None:
            if p.op == "=":
                value = self._apply(f, p.literal.value, src_type)
                return None if value is _FAIL else Compare("=", col, Literal(value))
            if p.op in ("<", "<=", ">", ">=") and t is not None and t.preserves_order:
                op, bound, bound_type = p.op, p.literal.value, src_type
                if isinstance(t, TimeTransform):  # on the wall clock of a zoned column
                    op, bound, bound_type = calendar_bound(p.op, bound, src_type)
                value = self._apply(f, bound, bound_type)
                if value is _FAIL or value is None:
                    return None
                if op in (">", ">="):
                    return Compare(">=", col, Literal(value))
                strict = (
                    op == "<" and isinstance(t, TimeTransform) and _is_unit_start(bound, "year")
                )
                return Compare("<" if strict else "<=", col, Literal(value))
            return None
        if isinstance(p, In) and not p.negated and len(p.values) <= MAX_IN_VALUES:
            vals = self._apply_all(f, [v.value for v in p.values if v.value is not None], src_type)
            if vals is None:
                return None
            return In(col, tuple(Literal(v) for v in sorted(set(vals), key=_sort_key)))
        if isinstance(p, Like) and not p.negated and isinstance(t, Truncate):
            prefix = _like_prefix(p.pattern)
            if prefix is None or not is_text(src_type):
                return None
            if len(prefix) >= t.width:
                return Compare("=", col, Literal(prefix[: t.width]))
            return Like(col, escape_like(prefix) + "%")
        return None

    def _apply(self, f: PartitionField, value: Any, src_type: pa.DataType) -> Any:
        try:
            return f.value_of([value], [src_type])
        except Exception:
            return _FAIL

    def _apply_all(
        self, f: PartitionField, values: list[Any], src_type: pa.DataType
    ) -> list | None:
        """Partition values of many literals in one transform call (None if any fails)."""
        if f.transform is None or not values:
            out = [self._apply(f, v, src_type) for v in values]
            return None if _FAIL in out else out
        try:
            arr = f.transform.apply([pa.array(values, type=src_type)])
            return arr.cast(f.result_type).to_pylist()
        except Exception:
            return None

    # ranges through year → month → day → hour
    def _project_hierarchy(self, parts: list[Expr]) -> list[Expr]:
        out: list[Expr] = []
        for name, fields in self.by_source.items():
            chain = self._hierarchy_chain(fields)
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
                values = [self._apply(f, bound, bound_type) for f in chain]
                if _FAIL in values or None in values:
                    continue
                lower = op in (">", ">=")
                finest = chain[-1].transform.type
                strict = op == "<" and _is_unit_start(bound, finest)
                out.append(_lexicographic([Ref(f.column) for f in chain], values, lower, strict))
        return out

    def _hierarchy_chain(self, fields: list[PartitionField]) -> list[PartitionField]:
        """The fields of ``year → month → day → hour``, from year down, without a gap."""
        units = {f.transform.type: f for f in fields if isinstance(f.transform, TimeTransform)}
        chain: list[PartitionField] = []
        for u in TIME_UNITS:
            if u not in units:
                break
            chain.append(units[u])
        return chain if len(chain) >= 2 else []

    # ranges through month, day or hour alone: the set of values a two-sided range covers
    def _project_cycles(self, parts: list[Expr]) -> list[Expr]:
        out: list[Expr] = []
        for name, fields in self.by_source.items():
            in_chain = {f.field_id for f in self._hierarchy_chain(fields)}
            cyclic = [
                f
                for f in fields
                if isinstance(f.transform, TimeTransform)
                and f.transform.type != "year"
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
                values = covered_values(f.transform.type, max(lows), min(highs))
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
                    lits = tuple(Literal(v) for v in sorted(results, key=_sort_key))
                    out.append(
                        Compare("=", Ref(f.column), lits[0])
                        if len(lits) == 1
                        else In(Ref(f.column), lits)
                    )
        return out


_FAIL = object()


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


def _is_unit_start(value: Any, unit: str) -> bool:
    """Whether a date or naive (wall-clock) timestamp is the first instant of its year/month/day/hour.

    Zoned bounds reach here as wall-clock times (``calendar_bound``); an aware
    value is read in UTC."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        checks = {
            "hour": value.minute == 0 and value.second == 0 and value.microsecond == 0,
        }
        at_midnight = checks["hour"] and value.hour == 0
        checks["day"] = at_midnight
        checks["month"] = at_midnight and value.day == 1
        checks["year"] = checks["month"] and value.month == 1
        return checks[unit]
    if isinstance(value, dt.date):
        return {
            "hour": True,
            "day": True,
            "month": value.day == 1,
            "year": value.day == 1 and value.month == 1,
        }[unit]
    return False


def _like_prefix(pattern: str) -> str | None:
    """The literal prefix of ``'abc%'``; None if the pattern is anything else."""
    if not pattern.endswith("%"):
        return None
    prefix = pattern[:-1]
    if any(ch in prefix for ch in "%_\\"):
        return None
    return prefix


def _sort_key(v: Any) -> tuple[int, Any]:
    return (0, "") if v is None else (1, v)


# -- per-leaf residual filters ------------------------------------------------


def _unit_interval(
    values: dict[str, Any], chain: list[str]
) -> tuple[dt.datetime, dt.datetime] | None:
    """[start, end) wall-clock times of the calendar unit named by year/month/day/hour values."""
    y = values.get("year")
    if y is None:
        return None
    m = values.get("month") if "month" in chain else None
    d = values.get("day") if "day" in chain and m is not None else None
    h = values.get("hour") if "hour" in chain and d is not None else None
    try:
        if m is None:
            return dt.datetime(y, 1, 1), dt.datetime(y + 1, 1, 1)
        start = dt.datetime(y, m, d or 1, h or 0)
    except ValueError:
        return None
    if d is None:
        end = dt.datetime(y + (m == 12), m % 12 + 1, 1)
    elif h is None:
        end = start + dt.timedelta(days=1)
    else:
        end = start + dt.timedelta(hours=1)
    return start, end


def _implied(
    p: Expr, fields: list[PartitionField], values: dict[str, Any], src_type: pa.DataType
) -> bool:
    """True when every row of a partition with these values satisfies ``p``."""
    if isinstance(p, IsNull) and p.negated:
        return any(values[f.field_id] is not None for f in fields if len(f.source_ids) == 1)
    if not isinstance(p, Compare) or p.literal.value is None:
        return False
    for f in fields:
        v = values[f.field_id]
        if isinstance(f.transform, Identity) and v is not None:
            try:
                return {
                    "=": v == p.literal.value,
                    "!=": v != p.literal.value,
                    "<": v < p.literal.value,
                    "<=": v <= p.literal.value,
                    ">": v > p.literal.value,
                    ">=": v >= p.literal.value,
                }[p.op]
            except TypeError:
                return False
    units = {
        f.transform.type: values[f.field_id]
        for f in fields
        if isinstance(f.transform, TimeTransform)
    }
    chain = [u for u in TIME_UNITS if u in units]
    interval = _unit_interval(units, chain) if None not in units.values() else None
    lit = p.literal.value
    if interval is None or p.op in ("=", "!="):
        return False
    start, end = interval
    if pa.types.is_date(src_type):
        if not isinstance(lit, dt.date) or isinstance(lit, dt.datetime):
            return False
        first, last = start.date(), end.date() - dt.timedelta(days=1)
        return {">=": first >= lit, ">": first > lit, "<": last < lit, "<=": last <= lit}[p.op]
    if not isinstance(lit, dt.datetime) or (lit.tzinfo is None) != (src_type.tz is None):
        return False
    # The unit is a range of wall-clock times; in a zoned column, of local ones.
    span = unit_instants(start, end, src_type)
    if span is None:
        return False
    first, stop = span
    lit_us = zones.to_us(lit)
    # the largest storable value below ``stop`` is stop - resolution (any ns below it for ns)
    step = resolution_us(src_type)
    last_ok = stop <= lit_us if step == 0 else stop - step <= lit_us
    return {">=": first >= lit_us, ">": first > lit_us, "<": stop <= lit_us, "<=": last_ok}[p.op]


def residual_filter(
    expr: Expr, spec: PartitionSpec, schema: Schema, values: dict[str, Any]
) -> Expr | None:
    """``expr`` without the top-level conjuncts a partition's values already guarantee.

    ``expr`` must be bound and in NNF. None means every row of the partition matches.
    """
    by_source: dict[str, list[PartitionField]] = {}
    for f in spec.fields:
        if f.transform is not None and len(f.source_ids) == 1 and schema.has_id(f.source_ids[0]):
            by_source.setdefault(schema.field_by_id(f.source_ids[0]).name, []).append(f)
    kept = []
    for p in conjuncts(expr):
        name = _ref_name(p)
        fields = by_source.get(name) if name is not None else None
        if fields and _implied(p, fields, values, schema.field(name).type):
            continue
        kept.append(p)
    return and_all(kept) if kept else None


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
