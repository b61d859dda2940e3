"""Storage Partitioned Join (SPJ) planning and per-group execution, independent of any engine.

Seed 000 ("Storage Partitioned Join", Appendix F): when both inputs of an
equi-join are partitioned by compatible transforms of the join keys, matching
rows can only sit in matching partitions, so the join runs group by group with
no shuffle. This module decides *which* partitions meet (``plan_join``), explains
the decision (``explain_join``), and runs one group with a local hash join
(``GroupRunner``). ``lance_partitioned.spark.storage_partitioned_join`` turns groups into Spark tasks.

**Group key.** A *component* (``GroupKeyComponent``) is a function of the join
key values that every compatible spec version can compute from a leaf's
partition values alone:

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

Modules: ``sides`` (inputs, join types), ``compatibility`` (which specs share a
group key), ``planning`` (``plan_join``, ``explain_join``, ``execute_local``) and
``execution`` (``GroupRunner``).
"""

from lance_partitioned.operations.join.compatibility import (
    GroupKeyComponent,
    KeyPartitionField,
    common_key_type,
    compatibility,
)
from lance_partitioned.operations.join.execution import (
    ARROW_JOIN_TYPE,
    Group,
    GroupRunner,
    OutputColumn,
    SideReader,
    sub_partition,
    with_parts,
)
from lance_partitioned.operations.join.planning import (
    DEFAULT_MAX_GROUP_ROWS,
    FallbackPart,
    JoinPlan,
    SidePlan,
    execute_local,
    explain_join,
    plan_join,
)
from lance_partitioned.operations.join.sides import (
    JOIN_TYPES,
    Side,
    SideLike,
    as_side,
    normalize_how,
    normalize_on,
)

__all__ = [
    "ARROW_JOIN_TYPE",
    "DEFAULT_MAX_GROUP_ROWS",
    "JOIN_TYPES",
    "GroupKeyComponent",
    "KeyPartitionField",
    "FallbackPart",
    "Group",
    "GroupRunner",
    "JoinPlan",
    "OutputColumn",
    "SideLike",
    "Side",
    "SidePlan",
    "SideReader",
    "as_side",
    "common_key_type",
    "compatibility",
    "execute_local",
    "explain_join",
    "normalize_how",
    "normalize_on",
    "plan_join",
    "sub_partition",
    "with_parts",
]
