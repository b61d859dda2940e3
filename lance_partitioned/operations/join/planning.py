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
from lance_partitioned.errors import ColumnNotFoundError
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.types import TypeFamily, join_key_family
from lance_partitioned.operations.join.compatibility import (
    GroupKeyComponent,
    KeyPartitionField,
    common_key_type,
    component_derivation,
    key_partition_fields,
    shared_group_key,
)
from lance_partitioned.operations.join.execution import (
    Group,
    GroupRunner,
    OutputColumn,
    SideReader,
)
from lance_partitioned.operations.join.output import output_columns
from lance_partitioned.operations.join.sides import (
    Side,
    SideLike,
    as_side,
    normalize_how,
    normalize_on,
    splits_over_left,
    splits_over_right,
)
from lance_partitioned.operations.read.scan import Scan
from lance_partitioned.operations.read.scan_filter import parse_any_filter

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
    components: tuple[GroupKeyComponent, ...]
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
        for side_plan in (self.left, self.right):
            specs = "; ".join(
                f"{spec_namespace(sid)}: {side_plan.snapshot.specs[sid].describe(side_plan.snapshot.schema)}"
                for sid in sorted({lf.spec_id for lf in side_plan.leaves})
            )
            lines.append(
                f"{side_plan.name}: {side_plan.root} @ __manifest v{side_plan.snapshot.version}, "
                f"filter {_render_filter(side_plan.filter)}, {len(side_plan.leaves)} partitions"
                + (f" [{specs}]" if specs else "")
            )
        if self.components:
            components = ", ".join(c.describe(self.on) for c in self.components)
            lines.append(f"group key: ({components})")
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
                left_count = "all" if p.left is None else str(len(p.left))
                right_count = "all" if p.right is None else str(len(p.right))
                lines.append(f"  left {left_count} x right {right_count} partitions: {p.why}")
        else:
            lines.append("fallback: none")
        if self.reasons:
            lines.append("notes:")
            lines.extend(f"  - {r}" for r in self.reasons)
        return "\n".join(lines)


def execute_local(plan: JoinPlan) -> pa.Table:
    """Run a whole plan in this process (groups and fallback parts alike): a reference
    implementation of the plan's contract, and a join for small data without an engine."""
    runner = plan.runner()
    batches: list[pa.RecordBatch] = []
    for g in plan.groups:
        batches.extend(runner.run(g))
    for p in plan.fallback:
        g = Group(
            ("fallback",),
            tuple(plan.left.leaves if p.left is None else p.left),
            tuple(plan.right.leaves if p.right is None else p.right),
        )
        batches.extend(runner.run(g))
    return pa.Table.from_batches(batches, schema=runner.output_schema)


def _render_filter(expr: Expr | None) -> str:
    if expr is None:
        return "(none)"
    from lance_partitioned.format.filters.render import to_sql

    return to_sql(expr)


def _leaf_list(side_plan: SidePlan, leaves: Sequence[Leaf]) -> str:
    if not leaves:
        return "[]"
    shown = [side_plan.describe_leaf(lf) for lf in leaves[:4]]
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
    expr = parse_any_filter(side.filter, schema.names)
    leaves = Scan(snapshot, expr, read).leaves  # pruned through __manifest
    return SidePlan(name, side, snapshot, expr, columns, read, tuple(keys), leaves)


def _count_rows(side_plan: SidePlan) -> None:
    """Rows per leaf from Lance metadata (before the filter): an upper bound for sizing."""
    if not side_plan.leaves:
        return
    threads = max(2, min(16, (os.cpu_count() or 2) * 2))
    with ThreadPoolExecutor(threads) as pool:
        counts = list(
            pool.map(lambda lf: side_plan.snapshot.open_leaf(lf).count_rows(), side_plan.leaves)
        )
    side_plan.rows = {lf.object_id: n for lf, n in zip(side_plan.leaves, counts, strict=True)}


# A spec version's way to compute each group key component: per component, the
# position of the partition field in ``Leaf.values`` and the function of its value
# (None: the spec version cannot compute the group key).
Derivations = list[tuple[int, Callable[[Any], Any]]] | None


def _key_fields_by_spec(side_plan: SidePlan) -> dict[int, list[KeyPartitionField]]:
    """Per spec id of the side's selected leaves, its partition fields on the join keys."""
    snapshot = side_plan.snapshot
    spec_ids = sorted({lf.spec_id for lf in side_plan.leaves})
    return {
        s: key_partition_fields(snapshot.specs[s], snapshot.schema, side_plan.keys)
        for s in spec_ids
    }


def _unusable_key_notes(
    left: SidePlan, right: SidePlan, families: Sequence[TypeFamily | None]
) -> list[str]:
    notes = []
    for k, family in enumerate(families):
        if family is None:
            left_type = left.arrow_schema.field(left.keys[k]).type
            right_type = right.arrow_schema.field(right.keys[k]).type
            notes.append(
                f"key {left.keys[k]} ({left_type}) = {right.keys[k]} ({right_type}): "
                "types not usable for SPJ "
                "(they must be the same kind: integers, strings, binary, dates, timestamps, "
                "booleans or equal decimals; floats never)"
            )
    return notes


def _derivations(
    by_spec: dict[int, list[KeyPartitionField]],
    components: tuple[GroupKeyComponent, ...],
    families: Sequence[TypeFamily | None],
) -> dict[int, Derivations]:
    """Per spec id, how its partition values give every component (None: they cannot)."""
    out: dict[int, Derivations] = {}
    for sid, fields in by_spec.items():
        fns: Derivations = []
        for component in components:
            keys = component.keys
            family = families[keys[0]] if len(keys) == 1 else None
            found = next(
                (
                    (f.index, fn)
                    for f in fields
                    if (fn := component_derivation(f, component, family)) is not None
                ),
                None,
            )
            if found is None:
                fns = None
                break
            fns.append(found)
        out[sid] = fns
    return out


def _choose_components(
    how: str, left: SidePlan, right: SidePlan, families: Sequence[TypeFamily | None]
) -> tuple[
    tuple[GroupKeyComponent, ...], dict[int, Derivations], dict[int, Derivations], list[str]
]:
    """The group key covering the most leaves (preferring one the join type can split).

    Returns the components, per spec id of each side the derivation functions
    (None when the spec cannot compute the key), and notes on what did not match.
    """
    notes = _unusable_key_notes(left, right, families)
    left_fields, right_fields = _key_fields_by_spec(left), _key_fields_by_spec(right)
    candidates: list[tuple[GroupKeyComponent, ...]] = []
    for left_id, left_key_fields in left_fields.items():
        for right_id, right_key_fields in right_fields.items():
            components, why = shared_group_key(left_key_fields, right_key_fields, families)
            if components:
                candidates.append(components)
                continue
            left_spec, right_spec = left.snapshot.specs[left_id], right.snapshot.specs[right_id]
            notes.append(
                f"left v{left_id} ({left_spec.describe(left.snapshot.schema)}) and right "
                f"v{right_id} ({right_spec.describe(right.snapshot.schema)}) are not "
                f"compatible: {why}"
            )
    best: tuple[tuple, tuple[GroupKeyComponent, ...], dict, dict] | None = None
    for i, components in enumerate(dict.fromkeys(candidates)):
        left_by_spec = _derivations(left_fields, components, families)
        right_by_spec = _derivations(right_fields, components, families)
        left_in = sum(1 for lf in left.leaves if left_by_spec[lf.spec_id] is not None)
        right_in = sum(1 for lf in right.leaves if right_by_spec[lf.spec_id] is not None)
        left_out, right_out = len(left.leaves) - left_in, len(right.leaves) - right_in
        splittable = _fallback_parts(how, left_out > 0, right_out > 0) is not None
        score = (splittable, left_in + right_in, len(components), -i)
        if best is None or score > best[0]:
            best = (score, components, left_by_spec, right_by_spec)
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
    left_plan = _side_plan("left", as_side(left), [a for a, _ in pairs])
    right_plan = _side_plan("right", as_side(right), [b for _, b in pairs])
    left_types = [left_plan.arrow_schema.field(a).type for a, _ in pairs]
    right_types = [right_plan.arrow_schema.field(b).type for _, b in pairs]
    key_types = tuple(common_key_type(a, b) for a, b in zip(left_types, right_types, strict=True))
    families = [
        join_key_family(t) if common is not None else None
        for t, common in zip(left_types, key_types, strict=True)
    ]
    output = output_columns(
        how,
        pairs,
        (left_plan.arrow_schema, left_plan.columns),
        (right_plan.arrow_schema, right_plan.columns),
        key_types,
        suffixes,
    )
    if estimate_rows:
        _count_rows(left_plan)
        _count_rows(right_plan)
    plan = JoinPlan(
        how, pairs, left_plan, right_plan, key_types, (), [], [], [], output, max_group_rows
    )

    if not left_plan.leaves or not right_plan.leaves:
        _plan_one_side_empty(plan)
        return plan
    components, left_derivations, right_derivations, notes = _choose_components(
        how, left_plan, right_plan, families
    )
    plan.reasons.extend(notes)
    plan.components = components
    if not components:
        plan.fallback.append(FallbackPart(None, None, "no compatible partitioning on the keys"))
        return plan
    for side_plan, deriv in ((left_plan, left_derivations), (right_plan, right_derivations)):
        side_plan.compatible = {
            lf.object_id: deriv[lf.spec_id] is not None for lf in side_plan.leaves
        }
        for sid in sorted({lf.spec_id for lf in side_plan.leaves if deriv[lf.spec_id] is None}):
            n = sum(1 for lf in side_plan.leaves if lf.spec_id == sid)
            spec = side_plan.snapshot.specs[sid].describe(side_plan.snapshot.schema)
            plan.reasons.append(
                f"{side_plan.name} v{sid} ({spec}, {n} partitions) cannot compute the group key"
            )
    if _plan_fallback(plan):
        _plan_groups(plan, left_derivations, right_derivations)
    return plan


def _plan_one_side_empty(plan: JoinPlan) -> None:
    """Nothing can match: each leaf of a preserved side is a group of its own."""
    left_plan, right_plan, how = plan.left, plan.right, plan.how
    plan.reasons.append(f"{'left' if not left_plan.leaves else 'right'} side selects no partitions")
    if how in ("left", "full", "anti"):
        plan.groups.extend(_group(plan, (lf.object_id,), [lf], []) for lf in left_plan.leaves)
    if how in ("right", "full"):
        plan.groups.extend(_group(plan, (lf.object_id,), [], [lf]) for lf in right_plan.leaves)


def _plan_fallback(plan: JoinPlan) -> bool:
    """Add the fallback parts for incompatible leaves; False when the whole join falls back."""
    left_plan, right_plan, how = plan.left, plan.right, plan.how
    left_incompatible = tuple(
        lf for lf in left_plan.leaves if not left_plan.compatible[lf.object_id]
    )
    right_incompatible = tuple(
        lf for lf in right_plan.leaves if not right_plan.compatible[lf.object_id]
    )
    parts = _fallback_parts(how, bool(left_incompatible), bool(right_incompatible))
    if parts is None:
        who = (
            "both sides have"
            if left_incompatible and right_incompatible
            else f"the {'left' if left_incompatible else 'right'} side has"
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
            "incompatible": left_incompatible,
            "compatible": tuple(
                lf for lf in left_plan.leaves if left_plan.compatible[lf.object_id]
            ),
        },
        "right": {"all": None, "incompatible": right_incompatible},
    }
    for left_subset, right_subset in parts:
        why = f"{left_subset} left x {right_subset} right partitions (spec versions outside the group key)"
        plan.fallback.append(
            FallbackPart(subsets["left"][left_subset], subsets["right"][right_subset], why)
        )
    return True


def _plan_groups(plan: JoinPlan, left_derivations: dict, right_derivations: dict) -> None:
    """One group per group key of the compatible leaves, kept when the join type needs it."""
    how = plan.how
    grouped: dict[tuple, tuple[list[Leaf], list[Leaf]]] = {}
    for idx, (side_plan, deriv) in enumerate(
        ((plan.left, left_derivations), (plan.right, right_derivations))
    ):
        for lf in side_plan.leaves:
            fns = deriv[lf.spec_id]
            if fns is not None:
                key = tuple(fn(lf.values[i]) for i, fn in fns)
                grouped.setdefault(key, ([], []))[idx].append(lf)
    for key in sorted(grouped, key=_sort_key):
        group_left, group_right = grouped[key]
        nulls = zip(plan.components, key, strict=True)
        if any(v is None and c.null_means_null_key for c, v in nulls):
            # Only rows with NULL keys are here: they match nothing, so only a side
            # whose unmatched rows are output is read.
            group_left = group_left if how in ("left", "anti", "full") else []
            group_right = group_right if how in ("right", "full") else []
        wanted = {
            "inner": group_left and group_right,
            "semi": group_left and group_right,
            "left": group_left,
            "anti": group_left,
            "right": group_right,
            "full": group_left or group_right,
        }[how]
        if wanted:
            plan.groups.append(_group(plan, key, group_left, group_right))


def _group(plan: JoinPlan, key: tuple, left: Sequence[Leaf], right: Sequence[Leaf]) -> Group:
    left_rows = _sum_rows(plan.left, left)
    right_rows = _sum_rows(plan.right, right)
    parts = 1
    if left_rows is not None and right_rows is not None:
        rows = left_rows + right_rows
        if rows > plan.max_group_rows:
            parts = min(_MAX_SUB_PARTITIONS, math.ceil(rows / plan.max_group_rows))
    return Group(key, tuple(left), tuple(right), left_rows, right_rows, parts)


def _sum_rows(side_plan: SidePlan, leaves: Iterable[Leaf]) -> int | None:
    total = 0
    for lf in leaves:
        n = side_plan.rows.get(lf.object_id)
        if n is None:
            return None
        total += n
    return total


def explain_join(
    left: SideLike, right: SideLike, on: Any, how: str = "inner", **options: Any
) -> str:
    """The matched partition groups and the reason for any fallback, as text (no Spark)."""
    return plan_join(left, right, on, how, **options).describe()
