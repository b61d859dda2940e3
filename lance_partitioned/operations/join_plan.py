"""Storage Partitioned Join (SPJ) planning and per-group execution, independent of any engine.

Seed 000 ("Storage Partitioned Join", Appendix F): when both inputs of an
equi-join are partitioned by compatible transforms of the join keys, matching
rows can only sit in matching partitions, so the join runs group by group with
no shuffle. This module decides *which* partitions meet (``plan_join``), explains
the decision (``explain_join``), and runs one group with a local hash join
(``GroupRunner``). ``lance_partitioned.spark.spj`` turns groups into Spark tasks.

**Group key.** A *component* is a function of the join key values that every
compatible spec version can compute from a leaf's partition values alone:

- ``bucket[m]`` of keys K: ``bucket(N) % m`` for any ``N`` that ``m`` divides;
  ``bucket`` and ``multi_bucket`` hash the same bytes for the same key, so they
  mix (``multi_bucket`` needs the keys in the same order on both sides);
- ``year`` / ``month`` / ``day`` / ``hour`` of a key: present as that field.
  Seed 000's time transforms are *calendar fields* (month 1-12, day 1-31), so a
  coarse value is only derivable from finer fields when it is itself among
  them: ``(year, month, day)`` groups into ``(year, month)`` or ``(year)``,
  ``day`` alone never groups into ``month``, nor ``month`` alone into ``year``;
- ``truncate[W]``: width W, or a finer truncation (strings: a longer prefix;
  integers: a width dividing W);
- ``identity`` and identical deterministic ``expression`` fields of the keys.

Matching rows have equal keys, hence equal components, hence equal group keys
(the tuple of all components): joining group by group is exact. Partition
fields not on the join keys only add leaves to a group. Identity vs bucket,
non-dividing bucket counts, or day vs month give no component.

**Contract of a plan.** For every join type the union of (a) the SPJ groups and
(b) the ``fallback`` parts, each a plain join of two leaf subsets, equals the
plain join of the two sides, and every output row is produced exactly once:

- compatible-left x compatible-right pairs are in groups (one per group key);
- inner: ``(incompatible-left x all-right) + (compatible-left x incompatible-right)``;
- left / semi / anti split over the left input only (each left row's output
  depends on all of the right), so they need every right leaf compatible;
  right outer symmetrically; full outer needs both sides fully compatible.
  Otherwise the whole join falls back (``reasons`` says why).

NULL keys never match (SQL): a group whose key has a NULL bucket/time/identity/
truncate component can only hold rows with NULL keys, so its other side is not
read; its rows still appear in outer and anti results.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot, format_partition_value
from lance_partitioned.errors import SchemaError
from lance_partitioned.format import hashing
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec
from lance_partitioned.format.transforms import (
    Bucket,
    Identity,
    MultiBucket,
    TimeTransform,
    Truncate,
)
from lance_partitioned.operations.scan import FilterLike, Scan, parse_any_filter

JOIN_TYPES = ("inner", "left", "right", "full", "semi", "anti")
_HOW_ALIASES = {
    "inner": "inner",
    "left": "left",
    "leftouter": "left",
    "left_outer": "left",
    "right": "right",
    "rightouter": "right",
    "right_outer": "right",
    "full": "full",
    "outer": "full",
    "fullouter": "full",
    "full_outer": "full",
    "semi": "semi",
    "leftsemi": "semi",
    "left_semi": "semi",
    "anti": "anti",
    "leftanti": "anti",
    "left_anti": "anti",
}
# pyarrow's names for the local hash join.
ARROW_JOIN_TYPE = {
    "inner": "inner",
    "left": "left outer",
    "right": "right outer",
    "full": "full outer",
    "semi": "left semi",
    "anti": "left anti",
}
DEFAULT_MAX_GROUP_ROWS = 4_000_000
_MAX_SUB_PARTITIONS = 1024
_OUT_BATCH_ROWS = 1 << 16


def normalize_how(how: str) -> str:
    """The canonical join type (``inner``, ``left``, ``right``, ``full``, ``semi``, ``anti``)."""
    key = str(how).lower().replace(" ", "_")
    if key not in _HOW_ALIASES:
        raise ValueError(f"unknown join type {how!r}; use one of {list(JOIN_TYPES)}")
    return _HOW_ALIASES[key]


def splits_over_left(how: str) -> bool:
    """True when the join distributes over a split of the left input:
    ``(L1 ∪ L2) op R == (L1 op R) ∪ (L2 op R)`` (each left row's output needs only
    that row and all of R)."""
    return how in ("inner", "left", "semi", "anti")


def splits_over_right(how: str) -> bool:
    """The mirror image of ``splits_over_left``."""
    return how in ("inner", "right")


# -- inputs -------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One input of a join: a namespace (root path or open handle), an optional filter
    (SQL text, pyarrow/DataFusion expression) and the columns to output.

    The filter applies to this input *before* the join (like a subquery), so it
    also prunes partitions. ``columns=None`` outputs every column; join keys are
    always read. An open ``PartitionedNamespace`` is read at its pinned version
    unless ``version`` is given.
    """

    source: Any
    filter: FilterLike = None
    columns: Sequence[str] | None = None
    version: int | str | None = None
    storage_options: dict[str, str] | None = field(default=None, hash=False)

    def snapshot(self) -> Snapshot:
        """Pin the ``__manifest`` version this side reads (done once, at planning)."""
        src = self.source
        if hasattr(src, "snapshot") and hasattr(src, "manifest"):  # a PartitionedNamespace
            if self.version is None:
                return src.snapshot
            return Snapshot.load(src.manifest, self.version)
        return Snapshot.load(Manifest(os.fspath(src), self.storage_options), self.version)


SideLike = Any  # Side | str | os.PathLike | PartitionedNamespace | tuple(source, filter[, columns])


def as_side(obj: SideLike) -> Side:
    """Accept a ``Side``, a root, a namespace handle, or ``(source, filter[, columns])``."""
    if isinstance(obj, Side):
        return obj
    if isinstance(obj, tuple):
        if not 1 <= len(obj) <= 3:
            raise ValueError(f"a side tuple is (source, filter[, columns]), got {obj!r}")
        return Side(*obj)
    return Side(obj)


def normalize_on(on: Any) -> tuple[tuple[str, str], ...]:
    """Join keys as (left column, right column) pairs.

    ``"k"``, ``["a", "b"]`` (same names on both sides), ``[("customer_id", "id")]``,
    or a mix.
    """
    if isinstance(on, str):
        return ((on, on),)
    pairs = []
    for item in on:
        if isinstance(item, str):
            pairs.append((item, item))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            pairs.append((str(item[0]), str(item[1])))
        else:
            raise ValueError(
                f"join key must be a column name or a (left, right) pair, got {item!r}"
            )
    if not pairs:
        raise ValueError("a join needs at least one key")
    return tuple(pairs)


# -- key types -----------------------------------------------------------------


def key_family(t: pa.DataType) -> str | None:
    """Types whose equal values have equal partition values on both sides, or None.

    Integers of any width hash and compare alike (the canonical int64 encoding);
    floats are refused: Spark's join treats NaN = NaN and -0.0 = 0.0, which a
    partition-wise hash join would not reproduce.
    """
    if pa.types.is_integer(t) and not pa.types.is_uint64(t):
        return "int"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is None else "timestamptz"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"  # the hash encodes the unscaled value
    return None


def common_key_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both sides' key columns are cast to for the local join (None: no SPJ)."""
    fa, fb = key_family(a), key_family(b)
    if fa is None or fa != fb:
        return None
    if a.equals(b):
        return a
    if fa == "int":
        return pa.int64()
    if fa == "string":
        return pa.large_string()
    if fa == "binary":
        return pa.large_binary()
    if fa == "date":
        return pa.date32()
    if fa.startswith("timestamp"):
        units = ["s", "ms", "us", "ns"]
        unit = max(a.unit, b.unit, key=units.index)
        return pa.timestamp(unit, a.tz)
    return None


# -- components and offers -------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One part of the group key: ``kind`` of the join keys ``keys`` (indices into ``on``)."""

    kind: str  # bucket | year | month | day | hour | truncate | identity | expression
    keys: tuple[int, ...]
    param: Any = None  # bucket modulus, truncate width, expression text

    def describe(self, pairs: Sequence[tuple[str, str]]) -> str:
        names = ", ".join(_pair_name(pairs[k]) for k in self.keys)
        if self.kind == "bucket":
            return f"bucket[{self.param}]({names})"
        if self.kind == "truncate":
            return f"truncate[{self.param}]({names})"
        if self.kind == "expression":
            return f"expression({self.param!r} of {names})"
        return f"{self.kind}({names})"

    @property
    def null_means_null_key(self) -> bool:
        """A NULL component implies a NULL key (never matches); not so for expressions."""
        return self.kind != "expression"


def _pair_name(pair: tuple[str, str]) -> str:
    return pair[0] if pair[0] == pair[1] else f"{pair[0]}={pair[1]}"


@dataclass(frozen=True)
class Offer:
    """A partition field of one spec whose sources are all join keys."""

    index: int  # position of the field in its spec (and in ``Leaf.values``)
    field: PartitionField
    kind: str
    keys: tuple[int, ...]
    param: Any
    source_types: tuple[pa.DataType, ...]


def _offers(spec: PartitionSpec, schema: Schema, key_names: Sequence[str]) -> list[Offer]:
    """The fields of ``spec`` that are functions of the join keys alone."""
    key_by_id: dict[int, int] = {}
    for k, name in enumerate(key_names):
        key_by_id.setdefault(schema.field_id(name), k)
    out = []
    for i, f in enumerate(spec.fields):
        if not f.source_ids or any(s not in key_by_id for s in f.source_ids):
            continue
        keys = tuple(key_by_id[s] for s in f.source_ids)
        types = tuple(schema.field_by_id(s).type for s in f.source_ids)
        t = f.transform
        if isinstance(t, (Bucket, MultiBucket)):
            kind, param = "bucket", t.num_buckets
        elif isinstance(t, TimeTransform):
            kind, param = t.type, None
        elif isinstance(t, Truncate):
            kind, param = "truncate", t.width
        elif isinstance(t, Identity):
            kind, param = "identity", None
        elif f.expression is not None:
            kind, param = "expression", f.expression
        else:  # pragma: no cover - every transform is listed above
            continue
        out.append(Offer(i, f, kind, keys, param, types))
    return out


def _truncate_coarsens(fine: int, coarse: int, family: str | None) -> bool:
    """True when truncate[coarse] is a function of truncate[fine] for this key family."""
    if fine == coarse:
        return True
    if family in ("string", "binary"):
        return coarse < fine  # a shorter prefix of a longer prefix
    if family == "int":
        return coarse % fine == 0  # v - v%c == t - t%c for t = v - v%f when f | c
    return False


def _pair_component(lo: Offer, ro: Offer, families: Sequence[str | None]) -> Component | None:
    """The component a left and a right offer share, if any."""
    if lo.kind != ro.kind or lo.keys != ro.keys:
        return None
    fam = families[lo.keys[0]] if len(lo.keys) == 1 else None
    if lo.kind == "bucket":
        n, m = lo.param, ro.param
        if n % m == 0 or m % n == 0:
            return Component("bucket", lo.keys, min(n, m))
        return None
    if lo.kind == "truncate":
        for coarse in sorted({lo.param, ro.param}, reverse=fam == "int"):
            if _truncate_coarsens(lo.param, coarse, fam) and _truncate_coarsens(
                ro.param, coarse, fam
            ):
                return Component("truncate", lo.keys, coarse)
        return None
    if lo.kind == "expression":
        same = lo.param == ro.param and all(
            a.equals(b) for a, b in zip(lo.source_types, ro.source_types, strict=True)
        )
        return Component("expression", lo.keys, lo.param) if same else None
    return Component(lo.kind, lo.keys, None)  # identity and calendar fields


def _why_not(lo: Offer, ro: Offer) -> str:
    """Why a left and a right offer on the same keys give no component."""
    ld, rd = lo.field.transform or lo.kind, ro.field.transform or ro.kind
    if lo.kind != ro.kind:
        return f"{ld} and {rd} are different transforms"
    if lo.kind == "bucket":
        return f"bucket counts {lo.param} and {ro.param}: neither divides the other"
    if lo.kind == "truncate":
        return f"truncate widths {lo.param} and {ro.param} do not nest"
    return f"{ld} and {rd} differ"


def _shared_components(
    loffers: Sequence[Offer], roffers: Sequence[Offer], families: Sequence[str | None]
) -> tuple[tuple[Component, ...], str]:
    """Every component a left and a right spec share, and (when none) why not."""
    comps: list[Component] = []
    why: list[str] = []
    for lo in loffers:
        for ro in roffers:
            if lo.keys != ro.keys or any(families[k] is None for k in lo.keys):
                continue
            c = _pair_component(lo, ro, families)
            if c is None:
                why.append(_why_not(lo, ro))
            elif c not in comps:
                comps.append(c)
    if comps:
        return tuple(comps), ""
    if why:
        return (), "; ".join(why)
    if not loffers or not roffers:
        side = "either side" if not loffers and not roffers else "left" if not loffers else "right"
        return (), f"no partition field of {side} is a transform of the join keys alone"
    return (), "their partition fields are on different join keys (or key types differ)"


def compatibility(
    left_spec: PartitionSpec,
    left_schema: Schema,
    right_spec: PartitionSpec,
    right_schema: Schema,
    on: Any,
) -> tuple[tuple[Component, ...], str]:
    """The group key two spec versions share on the join keys ``on``.

    Returns the components (empty when the specs are incompatible) and the
    reason when there are none. Pure: no namespace is opened.
    """
    pairs = normalize_on(on)
    families = []
    for a, b in pairs:
        lt, rt = left_schema.field(a).type, right_schema.field(b).type
        families.append(key_family(lt) if common_key_type(lt, rt) is not None else None)
    lo = _offers(left_spec, left_schema, [a for a, _ in pairs])
    ro = _offers(right_spec, right_schema, [b for _, b in pairs])
    return _shared_components(lo, ro, families)


def _derive(offer: Offer, comp: Component, family: str | None) -> Callable[[Any], Any] | None:
    """How ``offer``'s partition value gives ``comp``'s value, or None when it cannot."""
    if offer.kind != comp.kind or offer.keys != comp.keys:
        return None
    if comp.kind == "bucket":
        if offer.param % comp.param:
            return None
        m = comp.param
        return lambda v: None if v is None else v % m
    if comp.kind == "truncate":
        if not _truncate_coarsens(offer.param, comp.param, family):
            return None
        if offer.param == comp.param:
            return _same
        coarse, rtype = Truncate(comp.param), offer.field.result_type
        return lambda v: None if v is None else coarse.apply([pa.array([v], type=rtype)])[0].as_py()
    if comp.kind == "expression" and offer.param != comp.param:
        return None
    return _same


def _same(v: Any) -> Any:
    return v


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
        return f"v{leaf.spec_id}({vals})"


@dataclass(frozen=True)
class Group:
    """Leaves of both sides that can only join each other; one engine task."""

    key: tuple[Any, ...]
    left: tuple[Leaf, ...]
    right: tuple[Leaf, ...]
    left_rows: int | None = None
    right_rows: int | None = None
    parts: int = 1  # >1: the task joins this many hash sub-partitions one at a time

    @property
    def rows(self) -> int | None:
        if self.left_rows is None or self.right_rows is None:
            return None
        return self.left_rows + self.right_rows


@dataclass(frozen=True)
class FallbackPart:
    """A plain (shuffling) join of two leaf subsets; ``None`` means all of that side's leaves."""

    left: tuple[Leaf, ...] | None
    right: tuple[Leaf, ...] | None
    why: str


@dataclass(frozen=True)
class OutputColumn:
    """One output column: ``left``/``right`` column ``source``, or ``coalesce`` of a key pair."""

    name: str
    origin: str  # left | right | coalesce
    left: str | None
    right: str | None
    type: pa.DataType
    nullable: bool


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
                f"v{sid}: {sp.snapshot.specs[sid].describe(sp.snapshot.schema)}"
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
            raise SchemaError(
                f"{name} join key {k!r} is not a column of {snapshot.manifest.root!r}; "
                f"columns are {schema.names}"
            )
    columns = tuple(side.columns) if side.columns is not None else tuple(schema.names)
    for c in columns:
        if not schema.has_field(c):
            raise SchemaError(
                f"{name} column {c!r} is not in {snapshot.manifest.root!r}; columns are {schema.names}"
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
    how: str, left: SidePlan, right: SidePlan, families: Sequence[str | None]
) -> tuple[tuple[Component, ...], dict[int, dict], dict[int, dict], list[str]]:
    """The group key covering the most leaves (preferring one the join type can split).

    Returns the components, per spec id of each side the derivation functions
    (empty when the spec cannot compute the key), and notes on what did not match.
    """
    notes: list[str] = []
    lspecs = sorted({lf.spec_id for lf in left.leaves})
    rspecs = sorted({lf.spec_id for lf in right.leaves})
    loffers = {s: _offers(left.snapshot.specs[s], left.snapshot.schema, left.keys) for s in lspecs}
    roffers = {
        s: _offers(right.snapshot.specs[s], right.snapshot.schema, right.keys) for s in rspecs
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
            comps, why = _shared_components(loffers[ls], roffers[rs], families)
            if comps:
                candidates.append(comps)
                continue
            lname, rname = left.snapshot.specs[ls], right.snapshot.specs[rs]
            notes.append(
                f"left v{ls} ({lname.describe(left.snapshot.schema)}) and right v{rs} "
                f"({rname.describe(right.snapshot.schema)}) are not compatible: {why}"
            )

    def derivations(offers: dict[int, list[Offer]], comps: tuple[Component, ...]) -> dict:
        out: dict[int, list[tuple[int, Callable]] | None] = {}
        for sid, offs in offers.items():
            fns: list[tuple[int, Callable]] | None = []
            for c in comps:
                fam = families[c.keys[0]] if len(c.keys) == 1 else None
                found = next(
                    ((o.index, fn) for o in offs if (fn := _derive(o, c, fam)) is not None), None
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
        key_family(t) if ct is not None else None for t, ct in zip(lt, key_types, strict=True)
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


# -- execution of one group (any worker) -------------------------------------------


class SideReader:
    """Reads leaves of one side at their pinned versions, filtered, in namespace form.

    Picklable: it carries the manifest location, schema, specs and filter, not
    Lance handles; the ``Scan`` it reuses is rebuilt once per process.
    """

    def __init__(
        self,
        manifest: Manifest,
        schema: Schema,
        specs: dict[int, PartitionSpec],
        filter: Expr | None,
        columns: Sequence[str],
    ):
        self.manifest = manifest
        self.schema = schema
        self.specs = specs
        self.filter = filter
        self.columns = tuple(columns)
        self._scan: Scan | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_scan"} | {"_scan": None}

    @property
    def scan(self) -> Scan:
        if self._scan is None:
            # A snapshot without its __manifest handle: reading a leaf needs only the
            # leaf's location and pinned version, which the Leaf carries.
            snap = Snapshot(self.manifest, None, self.schema, self.specs)  # type: ignore[arg-type]
            self._scan = Scan(snap, self.filter, self.columns)
        return self._scan

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.scan.output_schema

    def batches(self, leaves: Iterable[Leaf]) -> Iterator[pa.RecordBatch]:
        for lf in leaves:
            yield from self.scan._leaf_batches(lf)

    def table(self, leaves: Iterable[Leaf]) -> pa.Table:
        return pa.Table.from_batches(list(self.batches(leaves)), schema=self.arrow_schema)


@dataclass(frozen=True)
class GroupRunner:
    """Joins the leaves of one group (or of a fallback part) with a local hash join.

    Keys are cast to a common type; the hash join runs on keys plus row indices
    only (pyarrow cannot carry list/struct payloads through a join), and the
    payload is gathered with ``take``. A group marked with ``parts > 1`` is first
    hash-partitioned on the keys into that many spill files per side, then joined
    one sub-partition at a time: the rows of equal keys always meet, so every
    join type stays exact while memory holds about one sub-partition.
    """

    how: str
    left: SideReader
    right: SideReader
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    key_types: tuple[pa.DataType, ...]
    output: tuple[OutputColumn, ...]
    spill_dir: str | None = None

    @property
    def output_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.output])

    def run(self, group: Group) -> Iterator[pa.RecordBatch]:
        """The joined rows of ``group`` in ``output_schema``."""
        if group.parts <= 1:
            yield from self.join_tables(self.left.table(group.left), self.right.table(group.right))
            return
        tmp = tempfile.mkdtemp(prefix="lp_spj_", dir=self.spill_dir)
        try:
            lfiles = self._spill(self.left, group.left, self.left_keys, group.parts, tmp, "l")
            rfiles = self._spill(self.right, group.right, self.right_keys, group.parts, tmp, "r")
            for lpath, rpath in zip(lfiles, rfiles, strict=True):
                yield from self.join_tables(_read_ipc(lpath), _read_ipc(rpath))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _spill(
        self,
        reader: SideReader,
        leaves: Sequence[Leaf],
        keys: Sequence[str],
        parts: int,
        tmp: str,
        tag: str,
    ) -> list[str]:
        """Hash-partition one side's rows of a group into ``parts`` Arrow IPC files."""
        schema = reader.arrow_schema
        paths = [os.path.join(tmp, f"{tag}{i}.arrow") for i in range(parts)]
        writers = [pa.ipc.new_file(p, schema) for p in paths]
        try:
            for batch in reader.batches(leaves):
                if not batch.num_rows:
                    continue
                ids = sub_partition([batch.column(k) for k in keys], self.key_types, parts)
                order = np.argsort(ids, kind="stable")
                bounds = np.searchsorted(ids[order], np.arange(parts + 1))
                sorted_batch = batch.take(pa.array(order))
                for i in range(parts):
                    lo, hi = int(bounds[i]), int(bounds[i + 1])
                    if hi > lo:
                        writers[i].write_batch(sorted_batch.slice(lo, hi - lo))
        finally:
            for w in writers:
                w.close()
        return paths

    def join_tables(self, left: pa.Table, right: pa.Table) -> Iterator[pa.RecordBatch]:
        """Join two in-memory tables of this runner's sides (SQL semantics: NULL keys never match)."""
        lk = _key_table(left, self.left_keys, self.key_types, "l", "__li")
        rk = _key_table(right, self.right_keys, self.key_types, "r", "__ri")
        n = len(self.key_types)
        joined = lk.join(
            rk,
            keys=[f"l{i}" for i in range(n)],
            right_keys=[f"r{i}" for i in range(n)],
            join_type=ARROW_JOIN_TYPE[self.how],
            coalesce_keys=False,
            use_threads=True,
        )
        # Acero emits matches in hash order, in many small chunks. One index array in
        # the storage order of the larger side makes take() sequential: several times
        # faster than gathering at random, for the cost of sorting the indices.
        li = joined.column("__li").combine_chunks()
        ri = None
        if self.how not in ("semi", "anti"):
            ri = joined.column("__ri").combine_chunks()
            order = pc.sort_indices(ri if right.num_rows >= left.num_rows else li)
            li, ri = li.take(order), ri.take(order)
        lt = left.take(li)
        rt = right.take(ri) if ri is not None else None
        arrays = []
        for c in self.output:
            if c.origin == "left":
                col = lt.column(c.left)
            elif c.origin == "right":
                col = rt.column(c.right)
            else:
                col = pc.coalesce(lt.column(c.left).cast(c.type), rt.column(c.right).cast(c.type))
            arrays.append(col if col.type.equals(c.type) else col.cast(c.type))
        table = pa.Table.from_arrays(arrays, schema=self.output_schema)
        yield from table.to_batches(max_chunksize=_OUT_BATCH_ROWS)


def _key_table(
    t: pa.Table, keys: Sequence[str], types: Sequence[pa.DataType], prefix: str, index: str
) -> pa.Table:
    cols = {}
    for i, (k, typ) in enumerate(zip(keys, types, strict=True)):
        col = t.column(k)
        cols[f"{prefix}{i}"] = col if col.type.equals(typ) else col.cast(typ)
    cols[index] = pa.array(np.arange(t.num_rows, dtype=np.int64))
    return pa.table(cols)


def _read_ipc(path: str) -> pa.Table:
    with pa.memory_map(path) as source:
        return pa.ipc.open_file(source).read_all()


def sub_partition(
    keys: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[pa.DataType], parts: int
) -> np.ndarray:
    """A sub-partition number in ``[0, parts)`` per row, equal for equal keys on both sides.

    Keys are cast to their common type and hashed with the canonical murmur3 (so
    int32 and int64 agree); the hash is then scrambled (splitmix64) because the
    rows of one group share ``bucket % m`` and the raw hash would put them all
    in few sub-partitions. Rows with NULL keys (which never match) go to 0.
    """
    cast = [k if k.type.equals(t) else k.cast(t) for k, t in zip(keys, types, strict=True)]
    h = hashing.murmur3_multi(cast)
    x = h.fill_null(0).to_numpy(zero_copy_only=False).astype(np.uint32).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x % np.uint64(parts)).astype(np.int64)


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


def with_parts(group: Group, parts: int) -> Group:
    """``group`` joined in ``parts`` hash sub-partitions (tests and tuning)."""
    return replace(group, parts=max(1, parts))


__all__ = [
    "JOIN_TYPES",
    "Component",
    "FallbackPart",
    "Group",
    "GroupRunner",
    "JoinPlan",
    "OutputColumn",
    "Side",
    "SidePlan",
    "SideReader",
    "as_side",
    "compatibility",
    "execute_local",
    "explain_join",
    "normalize_how",
    "normalize_on",
    "plan_join",
    "sub_partition",
    "with_parts",
]
