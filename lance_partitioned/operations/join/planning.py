"""Planning a storage-partitioned join: which partitions meet, and what falls back.

``plan_join`` pins both inputs, prunes their leaves through ``__manifest``,
chooses the group key covering the most leaves (``compatibility``), groups the
compatible leaves by it, and adds the plain-join ``fallback`` parts that make
the union exact for the join type (the contract is in the package docstring).
``JoinPlan.describe`` / ``explain_join`` say what was decided and why.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_partitioned.catalog.layout import spec_namespace
from lance_partitioned.catalog.mirror import format_partition_value
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import ColumnNotFoundError, SchemaError
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.types import TypeFamily, join_key_family
from lance_partitioned.operations.join.compatibility import (
    Component,
    Offer,
    common_key_type,
    derive,
    shared_components,
    spec_offers,
)
from lance_partitioned.operations.join.execution import (
    Group,
    GroupRunner,
    OutputColumn,
    SideReader,
)
from lance_partitioned.operations.join.sides import (
    Side,
    SideLike,
    as_side,
    normalize_how,
    normalize_on,
    splits_over_left,
    splits_over_right,
)
from lance_partitioned.operations.scan import Scan, parse_any_filter

DEFAULT_MAX_GROUP_ROWS = 4_000_000
_MAX_SUB_PARTITIONS = 1024


# -- the plan ----------------------------------------------------------------------


@dataclass
class SidePlan:
    """One input as planned: pinned snapshot, pruned leaves, columns, per-leaf row estimates."""

    name: str  # "left" / "right"
    side: Side
    snapshot: Snapshot
    filter: Expr | None
    columns: tuple[str, ...]  # output columns of this side
    read_columns: tuple[str, ...]  # output columns plus join keys
    keys: tuple[str, ...]
    leaves: list[Leaf]
    rows: dict[str, int | None] = field(default_factory=dict)  # object_id → rows (unfiltered)
    compatible: dict[str, bool] = field(default_factory=dict)  # object_id → in SPJ groups

    @property
    def root(self) -> str:
        return self.snapshot.manifest.root

    @property
    def arrow_schema(self) -> pa.Schema:
        """The read columns, typed as the namespace schema (no field-id metadata)."""
        by_name = {f.name: f for f in self.snapshot.schema.arrow}
        return pa.schema(
            [pa.field(c, by_name[c].type, by_name[c].nullable) for c in self.read_columns]
        )

    def reader(self) -> SideReader:
        snap = self.snapshot
        return SideReader(snap.manifest, snap.schema, snap.specs, self.filter, self.read_columns)

    def describe_leaf(self, leaf: Leaf) -> str:
        spec = self.snapshot.specs[leaf.spec_id]
        vals = ", ".join(
            f"{f.field_id}={format_partition_value(v) if v is not None else 'NULL'}"
            for f, v in zip(spec.fields, leaf.values, strict=True)
        )
        return f"{spec_namespace(leaf.spec_id)}({vals})"


@dataclass(frozen=True)
class FallbackPart:
    """A plain (shuffling) join of two leaf subsets; ``None`` means all of that side's leaves."""

    left: tuple[Leaf, ...] | None
    right: tuple[Leaf, ...] | None
    why: str


@dataclass
class JoinPlan:
    """Everything needed to run a join partition-wise; see the module docstring for the contract."""

    how: str
    on: tuple[tuple[str, str], ...]
    left: SidePlan
    right: SidePlan
    key_types: tuple[pa.DataType | None, ...]  # common type per key pair (None: incompatible)
    components: tuple[Component, ...]
    groups: list[Group]
    fallback: list[FallbackPart]
    reasons: list[str]
    output: tuple[OutputColumn, ...]
    max_group_rows: int = DEFAULT_MAX_GROUP_ROWS

    @property
    def is_full_fallback(self) -> bool:
        return not self.groups and any(p.left is None and p.right is None for p in self.fallback)

    @property
    def output_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.output])

    def runner(self) -> GroupRunner:
        """The picklable object that executes groups (on any worker)."""
        return GroupRunner(
            how=self.how,
            left=self.left.reader(),
            right=self.right.reader(),
            left_keys=tuple(p[0] for p in self.on),
            right_keys=tuple(p[1] for p in self.on),
            key_types=tuple(
                t if t is not None else self.left.arrow_schema.field(p[0]).type
                for t, p in zip(self.key_types, self.on, strict=True)
            ),
            output=self.output,
        )

    def describe(self) -> str:
        """Human-readable: sides, the group key, every group, and why anything falls back."""
        on = " AND ".join(f"left.{a} = right.{b}" for a, b in self.on)
        lines = [f"{self.how} join on {on}"]
        for sp in (self.left, self.right):
            specs = "; ".join(
                f"{spec_namespace(sid)}: {sp.snapshot.specs[sid].describe(sp.snapshot.schema)}"
                for sid in sorted({lf.spec_id for lf in sp.leaves})
            )
            lines.append(
                f"{sp.name}: {sp.root} @ __manifest v{sp.snapshot.version}, "
                f"filter {_render_filter(sp.filter)}, {len(sp.leaves)} partitions"
                + (f" [{specs}]" if specs else "")
            )
        if self.components:
            comps = ", ".join(c.describe(self.on) for c in self.components)
            lines.append(f"group key: ({comps})")
        lines.append(f"SPJ groups: {len(self.groups)} (one task each, no shuffle)")
        for g in self.groups:
            key = ", ".join("NULL" if v is None else str(format_partition_value(v)) for v in g.key)
            rows = "" if g.rows is None else f", ~{g.rows} rows"
            split = f", joined in {g.parts} hash parts" if g.parts > 1 else ""
            lines.append(
                f"  ({key}): left {_leaf_list(self.left, g.left)} x right "
                f"{_leaf_list(self.right, g.right)}{rows}{split}"
            )
        if self.fallback:
            lines.append(f"fallback (plain Spark join with shuffle): {len(self.fallback)} part(s)")
            for p in self.fallback:
                ln = "all" if p.left is None else str(len(p.left))
                rn = "all" if p.right is None else str(len(p.right))
                lines.append(f"  left {ln} x right {rn} partitions: {p.why}")
        else:
            lines.append("fallback: none")
        if self.reasons:
            lines.append("notes:")
            lines.extend(f"  - {r}" for r in self.reasons)
        return "\n".join(lines)


def _render_filter(expr: Expr | None) -> str:
    if expr is None:
        return "(none)"
    from lance_partitioned.format.filters.render import to_sql

    return to_sql(expr)


def _leaf_list(sp: SidePlan, leaves: Sequence[Leaf]) -> str:
    if not leaves:
        return "[]"
    shown = [sp.describe_leaf(lf) for lf in leaves[:4]]
    more = f", +{len(leaves) - 4} more" if len(leaves) > 4 else ""
    return "[" + ", ".join(shown) + more + "]"


# -- planning ----------------------------------------------------------------------


def _side_plan(name: str, side: Side, keys: Sequence[str]) -> SidePlan:
    snapshot = side.snapshot()
    schema = snapshot.schema
    for k in keys:
        if not schema.has_field(k):
            raise ColumnNotFoundError(
                f"{name} join key {k!r} is not a column of {snapshot.manifest.root!r}; "
                f"columns are {schema.names}",
                (k,),
            )
    columns = tuple(side.columns) if side.columns is not None else tuple(schema.names)
    for c in columns:
        if not schema.has_field(c):
            raise ColumnNotFoundError(
                f"{name} column {c!r} is not in {snapshot.manifest.root!r}; columns are {schema.names}",
                (c,),
            )
    read = tuple(dict.fromkeys([*columns, *keys]))
    expr = parse_any_filter(side.filter)
    leaves = Scan(snapshot, expr, read).leaves  # pruned through __manifest
    return SidePlan(name, side, snapshot, expr, columns, read, tuple(keys), leaves)


def _count_rows(sp: SidePlan) -> None:
    """Rows per leaf from Lance metadata (before the filter): an upper bound for sizing."""
    if not sp.leaves:
        return
    threads = max(2, min(16, (os.cpu_count() or 2) * 2))
    with ThreadPoolExecutor(threads) as pool:
        counts = list(pool.map(lambda lf: sp.snapshot.open_leaf(lf).count_rows(), sp.leaves))
    sp.rows = {lf.object_id: n for lf, n in zip(sp.leaves, counts, strict=True)}


def _output_columns(
    how: str,
    on: Sequence[tuple[str, str]],
    left: SidePlan,
    right: SidePlan,
    key_types: Sequence[pa.DataType | None],
    suffixes: tuple[str, str] | None,
) -> tuple[OutputColumn, ...]:
    """Spark's ``df.join`` layout: same-named keys once and first (USING), then the left
    columns, then the right ones (none for semi/anti)."""
    lf = {f.name: f for f in left.arrow_schema}
    rf = {f.name: f for f in right.arrow_schema}
    left_null = how in ("right", "full")
    right_null = how in ("left", "full")
    using = [(a, b, t) for (a, b), t in zip(on, key_types, strict=True) if a == b]
    using_names = {a for a, _, _ in using}
    out: list[OutputColumn] = []
    for a, _, t in using:
        if how == "right":
            out.append(OutputColumn(a, "right", None, a, rf[a].type, rf[a].nullable))
        elif how == "full":
            typ = t if t is not None else lf[a].type
            out.append(OutputColumn(a, "coalesce", a, a, typ, lf[a].nullable or rf[a].nullable))
        else:
            out.append(OutputColumn(a, "left", a, None, lf[a].type, lf[a].nullable))
    lcols = [c for c in left.columns if c not in using_names]
    rcols = [] if how in ("semi", "anti") else [c for c in right.columns if c not in using_names]
    clash = set(lcols) & set(rcols) | (set(rcols) & using_names)
    if clash and not suffixes:
        raise SchemaError(
            f"columns {sorted(clash)} exist on both sides; project them away with "
            "Side(columns=...) or pass suffixes=('_l', '_r')"
        )
    ls, rs = suffixes or ("", "")
    for c in lcols:
        name = c + ls if c in clash else c
        out.append(OutputColumn(name, "left", c, None, lf[c].type, lf[c].nullable or left_null))
    for c in rcols:
        name = c + rs if c in clash else c
        out.append(OutputColumn(name, "right", None, c, rf[c].type, rf[c].nullable or right_null))
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SchemaError(f"output columns {dup} would appear twice; choose other suffixes")
    return tuple(out)


def _choose_components(
    how: str, left: SidePlan, right: SidePlan, families: Sequence[TypeFamily | None]
) -> tuple[tuple[Component, ...], dict[int, dict], dict[int, dict], list[str]]:
    """The group key covering the most leaves (preferring one the join type can split).

    Returns the components, per spec id of each side the derivation functions
    (empty when the spec cannot compute the key), and notes on what did not match.
    """
    notes: list[str] = []
    lspecs = sorted({lf.spec_id for lf in left.leaves})
    rspecs = sorted({lf.spec_id for lf in right.leaves})
    loffers = {
        s: spec_offers(left.snapshot.specs[s], left.snapshot.schema, left.keys) for s in lspecs
    }
    roffers = {
        s: spec_offers(right.snapshot.specs[s], right.snapshot.schema, right.keys) for s in rspecs
    }
    for k, fam in enumerate(families):
        if fam is None:
            lt = left.arrow_schema.field(left.keys[k]).type
            rt = right.arrow_schema.field(right.keys[k]).type
            notes.append(
                f"key {left.keys[k]} ({lt}) = {right.keys[k]} ({rt}): types not usable for SPJ "
                "(they must be the same kind: integers, strings, binary, dates, timestamps, "
                "booleans or equal decimals; floats never)"
            )
    candidates: list[tuple[Component, ...]] = []
    for ls in lspecs:
        for rs in rspecs:
            comps, why = shared_components(loffers[ls], roffers[rs], families)
            if comps:
                candidates.append(comps)
                continue
            lname, rname = left.snapshot.specs[ls], right.snapshot.specs[rs]
            notes.append(
                f"left v{ls} ({lname.describe(left.snapshot.schema)}) and right v{rs} "
                f"({rname.describe(right.snapshot.schema)}) are not compatible: {why}"
            )

    def derivations(by_spec: dict[int, list[Offer]], comps: tuple[Component, ...]) -> dict:
        out: dict[int, list[tuple[int, Callable]] | None] = {}
        for sid, offs in by_spec.items():
            fns: list[tuple[int, Callable]] | None = []
            for c in comps:
                fam = families[c.keys[0]] if len(c.keys) == 1 else None
                found = next(
                    ((o.index, fn) for o in offs if (fn := derive(o, c, fam)) is not None), None
                )
                if found is None:
                    fns = None
                    break
                fns.append(found)
            out[sid] = fns
        return out

    best: tuple[tuple, tuple[Component, ...], dict, dict] | None = None
    for i, comps in enumerate(dict.fromkeys(candidates)):
        ld, rd = derivations(loffers, comps), derivations(roffers, comps)
        l_in = sum(1 for lf in left.leaves if ld[lf.spec_id] is not None)
        r_in = sum(1 for lf in right.leaves if rd[lf.spec_id] is not None)
        li, ri = len(left.leaves) - l_in, len(right.leaves) - r_in
        splittable = _fallback_parts(how, li > 0, ri > 0) is not None
        score = (splittable, l_in + r_in, len(comps), -i)
        if best is None or score > best[0]:
            best = (score, comps, ld, rd)
    if best is None:
        return (), {}, {}, notes
    return best[1], best[2], best[3], notes


def _fallback_parts(how: str, left_incompatible: bool, right_incompatible: bool) -> list | None:
    """Which (left subset, right subset) plain joins complete the SPJ groups; None: impossible.

    Subsets are named ``"incompatible"``, ``"compatible"`` or ``"all"``.
    """
    if not left_incompatible and not right_incompatible:
        return []
    if left_incompatible and right_incompatible:
        if how != "inner":
            return None
        return [("incompatible", "all"), ("compatible", "incompatible")]
    if left_incompatible:
        return [("incompatible", "all")] if splits_over_left(how) else None
    return [("all", "incompatible")] if splits_over_right(how) else None


def _sort_key(key: tuple[Any, ...]) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in key)


def plan_join(
    left: SideLike,
    right: SideLike,
    on: Any,
    how: str = "inner",
    *,
    suffixes: tuple[str, str] | None = None,
    max_group_rows: int = DEFAULT_MAX_GROUP_ROWS,
    estimate_rows: bool = True,
) -> JoinPlan:
    """Plan a storage partitioned join of two namespaces (no engine needed).

    Pins both snapshots, prunes each side with its filter, finds the group key
    (see the module docstring), builds one ``Group`` per group key and the
    ``FallbackPart``s for leaves of incompatible spec versions. Groups whose
    estimated rows exceed ``max_group_rows`` are marked to be joined in hash
    sub-partitions, so a task's memory stays bounded.
    """
    how = normalize_how(how)
    pairs = normalize_on(on)
    lp = _side_plan("left", as_side(left), [a for a, _ in pairs])
    rp = _side_plan("right", as_side(right), [b for _, b in pairs])
    lt = [lp.arrow_schema.field(a).type for a, _ in pairs]
    rt = [rp.arrow_schema.field(b).type for _, b in pairs]
    key_types = tuple(common_key_type(a, b) for a, b in zip(lt, rt, strict=True))
    families = [
        join_key_family(t) if ct is not None else None for t, ct in zip(lt, key_types, strict=True)
    ]
    output = _output_columns(how, pairs, lp, rp, key_types, suffixes)
    if estimate_rows:
        _count_rows(lp)
        _count_rows(rp)
    plan = JoinPlan(how, pairs, lp, rp, key_types, (), [], [], [], output, max_group_rows)

    if not lp.leaves or not rp.leaves:
        _plan_one_side_empty(plan)
        return plan
    comps, lderiv, rderiv, notes = _choose_components(how, lp, rp, families)
    plan.reasons.extend(notes)
    plan.components = comps
    if not comps:
        plan.fallback.append(FallbackPart(None, None, "no compatible partitioning on the keys"))
        return plan
    for sp, deriv in ((lp, lderiv), (rp, rderiv)):
        sp.compatible = {lf.object_id: deriv[lf.spec_id] is not None for lf in sp.leaves}
        for sid in sorted({lf.spec_id for lf in sp.leaves if deriv[lf.spec_id] is None}):
            n = sum(1 for lf in sp.leaves if lf.spec_id == sid)
            spec = sp.snapshot.specs[sid].describe(sp.snapshot.schema)
            plan.reasons.append(
                f"{sp.name} v{sid} ({spec}, {n} partitions) cannot compute the group key"
            )
    if _plan_fallback(plan):
        _plan_groups(plan, lderiv, rderiv)
    return plan


def _plan_one_side_empty(plan: JoinPlan) -> None:
    """Nothing can match: each leaf of a preserved side is a group of its own."""
    lp, rp, how = plan.left, plan.right, plan.how
    plan.reasons.append(f"{'left' if not lp.leaves else 'right'} side selects no partitions")
    if how in ("left", "full", "anti"):
        plan.groups.extend(_group(plan, (lf.object_id,), [lf], []) for lf in lp.leaves)
    if how in ("right", "full"):
        plan.groups.extend(_group(plan, (lf.object_id,), [], [lf]) for lf in rp.leaves)


def _plan_fallback(plan: JoinPlan) -> bool:
    """Add the fallback parts for incompatible leaves; False when the whole join falls back."""
    lp, rp, how = plan.left, plan.right, plan.how
    l_inc = tuple(lf for lf in lp.leaves if not lp.compatible[lf.object_id])
    r_inc = tuple(lf for lf in rp.leaves if not rp.compatible[lf.object_id])
    parts = _fallback_parts(how, bool(l_inc), bool(r_inc))
    if parts is None:
        who = (
            "both sides have" if l_inc and r_inc else f"the {'left' if l_inc else 'right'} side has"
        )
        plan.fallback.append(
            FallbackPart(
                None,
                None,
                f"a {how} join cannot be split when {who} partitions outside the group key "
                "(each output row depends on the whole other side): the whole join falls back",
            )
        )
        return False
    subsets: dict[str, dict[str, tuple[Leaf, ...] | None]] = {
        "left": {
            "all": None,
            "incompatible": l_inc,
            "compatible": tuple(lf for lf in lp.leaves if lp.compatible[lf.object_id]),
        },
        "right": {"all": None, "incompatible": r_inc},
    }
    for ls, rs in parts:
        why = f"{ls} left x {rs} right partitions (spec versions outside the group key)"
        plan.fallback.append(FallbackPart(subsets["left"][ls], subsets["right"][rs], why))
    return True


def _plan_groups(plan: JoinPlan, lderiv: dict, rderiv: dict) -> None:
    """One group per group key of the compatible leaves, kept when the join type needs it."""
    how = plan.how
    grouped: dict[tuple, tuple[list[Leaf], list[Leaf]]] = {}
    for idx, (sp, deriv) in enumerate(((plan.left, lderiv), (plan.right, rderiv))):
        for lf in sp.leaves:
            fns = deriv[lf.spec_id]
            if fns is not None:
                key = tuple(fn(lf.values[i]) for i, fn in fns)
                grouped.setdefault(key, ([], []))[idx].append(lf)
    for key in sorted(grouped, key=_sort_key):
        gl, gr = grouped[key]
        nulls = zip(plan.components, key, strict=True)
        if any(v is None and c.null_means_null_key for c, v in nulls):
            # Only rows with NULL keys are here: they match nothing, so only a side
            # whose unmatched rows are output is read.
            gl = gl if how in ("left", "anti", "full") else []
            gr = gr if how in ("right", "full") else []
        wanted = {
            "inner": gl and gr,
            "semi": gl and gr,
            "left": gl,
            "anti": gl,
            "right": gr,
            "full": gl or gr,
        }[how]
        if wanted:
            plan.groups.append(_group(plan, key, gl, gr))


def _group(plan: JoinPlan, key: tuple, left: Sequence[Leaf], right: Sequence[Leaf]) -> Group:
    lr = _sum_rows(plan.left, left)
    rr = _sum_rows(plan.right, right)
    parts = 1
    if lr is not None and rr is not None and lr + rr > plan.max_group_rows:
        parts = min(_MAX_SUB_PARTITIONS, math.ceil((lr + rr) / plan.max_group_rows))
    return Group(key, tuple(left), tuple(right), lr, rr, parts)


def _sum_rows(sp: SidePlan, leaves: Iterable[Leaf]) -> int | None:
    total = 0
    for lf in leaves:
        n = sp.rows.get(lf.object_id)
        if n is None:
            return None
        total += n
    return total


def explain_join(
    left: SideLike, right: SideLike, on: Any, how: str = "inner", **options: Any
) -> str:
    """The matched partition groups and the reason for any fallback, as text (no Spark)."""
    return plan_join(left, right, on, how, **options).describe()
