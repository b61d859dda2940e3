"""Finding partitions whose rows do not have the partition's values.

Before 0.2 this library computed year/month/day/hour of a timestamp with a time
zone in UTC; seed 000 (``date_part``, evaluated by DataFusion) computes them in
the column's zone. Partitions written under the old rule hold rows whose values
under the spec's rule differ from the partition's own, so pruning, which trusts
the partition values, would skip them. ``ns.validate()`` reports such
partitions and ``ns.rewrite_partitions()`` moves their rows where they belong.

Only time fields on a zoned column whose zone is not UTC can be affected, so
only those leaves are read, and only their source columns.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.format import zones
from lance_partitioned.format.spec import PartitionField, PartitionSpec


def zoned_time_fields(spec: PartitionSpec, snapshot: Snapshot) -> list[PartitionField]:
    """The spec's time fields whose source column has a time zone other than UTC."""
    schema = snapshot.schema
    out = []
    for f in spec.fields:
        if f.function.calendar_unit is None or not schema.has_id(f.source_ids[0]):
            continue
        t = schema.field_by_id(f.source_ids[0]).type
        if pa.types.is_timestamp(t) and t.tz is not None and not zones.is_utc(t.tz):
            out.append(f)
    return out


def misplaced_leaves(snapshot: Snapshot, leaves: Iterable[Leaf] | None = None) -> dict[str, str]:
    """``{object_id: problem}`` for leaves holding rows whose time-field values differ
    from the leaf's partition values (written under the pre-0.2 UTC rule)."""
    from lance_partitioned.operations.read.scan import Scan

    out: dict[str, str] = {}
    for leaf in snapshot.leaves() if leaves is None else leaves:
        spec = snapshot.specs[leaf.spec_id]
        fields = zoned_time_fields(spec, snapshot)
        if not fields:
            continue
        expected = dict(zip((f.field_id for f in spec.fields), leaf.values, strict=True))
        names = sorted({snapshot.schema.field_by_id(f.source_ids[0]).name for f in fields})
        scan = Scan(snapshot, columns=names)
        problem = None
        for batch in scan._leaf_batches(leaf):
            for f in fields:
                name = snapshot.schema.field_by_id(f.source_ids[0]).name
                found = pc.unique(f.function.apply([batch.column(name)])).to_pylist()
                wrong = sorted(v for v in found if v != expected[f.field_id] and v is not None)
                if wrong:
                    t = snapshot.schema.field(name).type
                    problem = (
                        f"partition {leaf.object_id}: rows have {f.function.calendar_unit}({name}) = "
                        f"{wrong} in the column's time zone ({t.tz}), but the partition's "
                        f"{f.field_id!r} is {expected[f.field_id]}; it was written when time "
                        "transforms were computed in UTC (lance-partitioned 0.1). Run "
                        "ns.rewrite_partitions() to move its rows to their partitions"
                    )
                    break
            if problem:
                break
        if problem:
            out[leaf.object_id] = problem
    return out
