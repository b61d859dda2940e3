"""MERGE: update, delete and insert rows by key, in one transaction.

``MergeBuilder`` is named after LanceDB's ``merge_insert`` and deltalake's
``TableMerger``: clauses are added in order, then ``execute`` plans and
publishes the merge. The semantics are SQL MERGE's:

- a source row *matches* a namespace row when every key column is equal (a
  NULL key matches nothing); the source may give each key once;
- a matched pair takes the first ``when_matched_*`` clause whose condition is
  true (update or delete); a pair no clause takes is left as it is;
- a source row with no match is inserted by ``when_not_matched_insert_all``
  (when its condition is true);
- a namespace row no source row matched is deleted by
  ``when_not_matched_by_source_delete`` (when its condition is true); that
  clause makes the merge search every partition.

An updated row is removed from its leaf and written again through the write
job, so a row whose partition columns changed moves to its new partition (a
new one is created as needed), in the same commit. Conditions and ``set``
expressions are SQL over ``source.<column>`` and ``target.<column>``
(``operations.change.sql``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lance
import numpy as np
import pyarrow as pa

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import (
    CommitConflictError,
    InvalidArgumentError,
    SchemaError,
)
from lance_partitioned.format.spec import partition_key
from lance_partitioned.operations.change.apply import Applied, RowChanges, changed
from lance_partitioned.operations.change.matching import (
    LeafMatches,
    candidate_leaves,
    match_leaves,
)
from lance_partitioned.operations.change.source import ChangeSource, read_source
from lance_partitioned.operations.change.sql import PairedRows, quoted, require_columns
from lance_partitioned.operations.leaf.leaf_changes import MergeRows
from lance_partitioned.operations.leaf.leaf_schema import ReadMapping, leaf_fields_by_id
from lance_partitioned.operations.write.input import DataLike
from lance_partitioned.operations.write.split import partition_ranges


@dataclass(frozen=True)
class MergeResult:
    """What a merge did: the new ``__manifest`` version (the old one when nothing
    changed), rows inserted, updated and deleted, and partitions changed or created."""

    version: int
    rows_inserted: int
    rows_updated: int
    rows_deleted: int
    partitions_touched: int


@dataclass(frozen=True)
class _Clause:
    kind: str  # "update", "delete", "insert", "delete_by_source"
    condition: str | None = None
    set: Mapping[str, str] | None = None  # update: None means every source column


class MergeBuilder:
    """A merge of ``source`` into a namespace, keyed by ``on``; add clauses, then ``execute``.

    Example::

        result = (
            ns.merge(changes, on=["o_orderkey"])
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        result.rows_updated, result.rows_inserted
    """

    def __init__(
        self,
        manifest: Manifest,
        schema_of: Callable[[], Any],
        source: DataLike,
        on: str | Sequence[str],
        on_done: Callable[[MergeResult], None] | None = None,
    ):
        self._manifest = manifest
        self._schema_of = schema_of
        self._data = source
        self._on = on
        self._on_done = on_done
        self._clauses: list[_Clause] = []

    def when_matched_update_all(self, condition: str | None = None) -> MergeBuilder:
        """Matched rows take every column the source has (others keep their values)."""
        return self._add(_Clause("update", condition))

    def when_matched_update(
        self, set: Mapping[str, str], condition: str | None = None
    ) -> MergeBuilder:
        """Matched rows take ``set``: column -> SQL over ``source.`` and ``target.`` columns."""
        if not set:
            raise InvalidArgumentError("when_matched_update needs at least one column in set")
        require_columns(set, self._schema_of())
        return self._add(_Clause("update", condition, dict(set)))

    def when_matched_delete(self, condition: str | None = None) -> MergeBuilder:
        """Matched rows are deleted (when ``condition`` is true)."""
        return self._add(_Clause("delete", condition))

    def when_not_matched_insert_all(self, condition: str | None = None) -> MergeBuilder:
        """Source rows without a match are inserted (when ``condition`` is true)."""
        return self._add(_Clause("insert", condition))

    def when_not_matched_by_source_delete(self, condition: str | None = None) -> MergeBuilder:
        """Namespace rows no source row matches are deleted (when ``condition``, SQL
        over ``target.`` columns, is true). Every partition is searched."""
        return self._add(_Clause("delete_by_source", condition))

    def _add(self, clause: _Clause) -> MergeBuilder:
        if clause.condition is not None and not str(clause.condition).strip():
            raise InvalidArgumentError(f"the {clause.kind} clause's condition is blank")
        if clause.kind in ("insert", "delete_by_source") and any(
            c.kind == clause.kind for c in self._clauses
        ):
            raise InvalidArgumentError(
                f"a merge takes one {clause.kind.replace('_', ' ')} clause; "
                "combine the conditions with OR"
            )
        self._clauses.append(clause)
        return self

    def _check_clauses(self) -> None:
        if not self._clauses:
            raise InvalidArgumentError(
                "a merge needs at least one clause, e.g. when_matched_update_all()"
            )

    def execute(self, **options: Any) -> MergeResult:
        """Plan and publish the merge in one ``__manifest`` commit; return a ``MergeResult``.

        ``options`` are a write's (``max_buffer_bytes``, ``max_rows_per_file``).
        The source is read once; a concurrent commit makes the merge match again
        on the latest version (it never publishes over rows it did not see), up
        to the retry policy's tries, then CommitConflictError (retryable); after a
        concurrent schema change the source's columns are taken by the new schema.
        Nothing is written when the source or the clauses are refused.
        """
        self._check_clauses()
        schema = self._schema_of()
        source = read_source(self._data, schema, self._on)
        if any(c.kind == "insert" for c in self._clauses):
            missing = [
                f.name for f in schema.arrow if not f.nullable and f.name not in source.columns
            ]
            if missing:
                raise SchemaError(
                    f"the source lacks the non-nullable column(s) {missing} that inserted rows "
                    "need; nothing was written"
                )
        result = changed(
            self._manifest,
            "merge",
            lambda snapshot: plan_merge(snapshot, source, self._clauses),
            lambda applied, counts: _result(applied, counts),
            **options,
        )
        if self._on_done is not None:
            self._on_done(result)
        return result


@dataclass
class MergeCounts:
    """Rows a planned merge inserts, updates and deletes; the leaves Lance's
    ``merge_insert`` changes count theirs when they are staged."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    merges: list[MergeRows] = field(default_factory=list)

    def totals(self) -> tuple[int, int, int]:
        # a row that moved partition was deleted from one leaf and inserted into another
        moved = sum(m.moved_out for m in self.merges)
        return (
            self.inserted + sum(m.inserted for m in self.merges) - moved,
            self.updated + sum(m.updated for m in self.merges) + moved,
            self.deleted,
        )


def _result(applied: Applied, counts: MergeCounts) -> MergeResult:
    inserted, updated, deleted = counts.totals() if applied.partitions else (0, 0, 0)
    return MergeResult(applied.version, inserted, updated, deleted, applied.partitions)


def plan_merge(
    snapshot: Snapshot, source: ChangeSource, clauses: Sequence[_Clause], fast: bool = True
) -> tuple[RowChanges, MergeCounts]:
    """The rows a merge removes and writes on ``snapshot``, and what it counts.

    The source and the clauses' ``set`` columns are taken by ``snapshot``'s schema, which
    a concurrent commit may have changed since they were checked (a re-planned merge is
    the merge after that commit).

    ``fast``: a plain upsert whose keys determine the partitions goes to Lance's
    ``merge_insert`` leaf by leaf (``_upsert_by_partition``) when it can; the leaves
    then receive the source rows themselves (a Spark task, which must not hand rows
    to the driver, says False).
    """
    source = source.on_schema(snapshot.schema)
    for clause in clauses:
        require_columns(clause.set or (), snapshot.schema)
    if fast:
        planned = _upsert_by_partition(snapshot, source, clauses)
        if planned is not None:
            return planned
    by_source = [c for c in clauses if c.kind == "delete_by_source"]
    leaves = candidate_leaves(snapshot, source, prune=not by_source)
    matches = match_leaves(snapshot, source, leaves, unmatched=bool(by_source))
    changes = RowChanges()
    updated, deleted = _matched(snapshot, source, matches, clauses, changes)
    inserted = _inserted(source, matches, clauses, changes)
    deleted += _deleted_by_source(snapshot, matches, by_source, changes)
    return changes, MergeCounts(inserted, updated, deleted)


MAX_UPSERT_LEAVES = 256  # beyond: every leaf would get a copy of the source's keys


def _upsert_by_partition(
    snapshot: Snapshot, source: ChangeSource, clauses: Sequence[_Clause]
) -> tuple[RowChanges, MergeCounts] | None:
    """A plain upsert done by Lance's ``merge_insert`` in each leaf, or None (the general
    plan applies).

    It applies to clauses without conditions (update all and/or insert all), a source
    with exactly the namespace's columns, and leaves that all belong to the current
    spec and hold the namespace's columns exactly. Each source row is routed to the
    partition its values give; each existing leaf gets Lance's ``merge_insert`` of its
    rows, and rows of new partitions are written. When the keys determine the
    partitions no row can move; otherwise (a full upsert only, and at most
    ``MAX_UPSERT_LEAVES`` leaves) each leaf first deletes its rows whose keys the
    source routes elsewhere: the row moves to its new partition.
    """
    kinds = {c.kind for c in clauses}
    schema, spec = snapshot.schema, snapshot.current_spec
    if not all(c.condition is None and c.set is None for c in clauses) or source.extra:
        return None
    if not kinds <= {"update", "insert"} or source.columns != schema.names or not spec.fields:
        return None
    if any(snapshot.leaves_of_spec(sid) for sid in snapshot.specs if sid != spec.spec_id):
        return None
    sources = {i for f in spec.fields for i in f.source_ids}
    determined = all(schema.has_id(i) and schema.field_by_id(i).name in source.on for i in sources)
    if not determined and kinds != {"update", "insert"}:
        return None
    table = source.table.combine_chunks()
    values = [f.values(table, schema) for f in spec.fields]
    ordered, ranges = (
        partition_ranges(table.to_batches()[0], values) if table.num_rows else (None, [])
    )
    if determined:
        found = (
            snapshot.rows_for_keys(spec.spec_id, [k for k, _, _ in ranges])
            if ranges
            else ([], None)
        )
        leaves = found[0] if found is not None else snapshot.leaves_of_spec(spec.spec_id)
    else:
        leaves = snapshot.leaves_of_spec(spec.spec_id)
        if len(leaves) > MAX_UPSERT_LEAVES:
            return None
    if not all(_holds_namespace_columns(snapshot, leaf) for leaf in leaves):
        return None
    by_key = {partition_key(leaf.values): leaf for leaf in leaves}
    where = {partition_key(k): (start, length) for k, start, length in ranges}
    changes, counts = RowChanges(), MergeCounts()
    for key, start, length in ranges:
        if partition_key(key) not in by_key:  # a new partition: its rows are all inserts
            changes.write(pa.Table.from_batches([ordered.slice(start, length)]))
            counts.inserted += length
    keys = (
        None
        if determined or ordered is None
        else pa.Table.from_batches([ordered]).select(source.on)
    )
    for pkey, leaf in by_key.items():
        start, length = where.get(pkey, (0, 0))
        rows = (
            pa.Table.from_batches([ordered.slice(start, length)])
            if length
            else schema.arrow.empty_table()
        )
        moved = (
            None
            if keys is None
            else pa.concat_tables([keys.slice(0, start), keys.slice(start + length)])
        )
        if not length and (moved is None or not moved.num_rows):
            continue
        merge = MergeRows(rows, source.on, "update" in kinds, "insert" in kinds, moved)
        changes.leaf_changes[leaf.object_id] = merge
        counts.merges.append(merge)
    return changes, counts


def _holds_namespace_columns(snapshot: Snapshot, leaf: Any) -> bool:
    """Whether the leaf's columns are the namespace's: same names, types and field ids."""
    ds = snapshot.open_leaf(leaf)
    by_id = leaf_fields_by_id(ds)
    if len(by_id) != len(snapshot.schema.names):
        return False
    return all(
        (f := by_id.get(snapshot.schema.field_id(n))) is not None
        and f.name == n
        and f.type.equals(snapshot.schema.field(n).type)
        for n in snapshot.schema.names
    )


def _matched(
    snapshot: Snapshot,
    source: ChangeSource,
    matches: list[LeafMatches],
    clauses: Sequence[_Clause],
    changes: RowChanges,
) -> tuple[int, int]:
    """Apply the matched clauses; return (rows updated, rows deleted)."""
    matched = [c for c in clauses if c.kind in ("update", "delete")]
    pairs = [m for m in matches if len(m.addresses)]
    if not matched or not pairs:
        return 0, 0
    src_rows = np.concatenate([m.source_rows for m in pairs])
    leaf_of = np.concatenate([np.full(len(m.addresses), i) for i, m in enumerate(pairs)])
    addresses = np.concatenate([m.addresses for m in pairs])
    schema = snapshot.schema
    source_side = source.table.take(pa.array(src_rows))
    target = _target_rows(snapshot, pairs) if _needs_target(source, matched, schema) else None
    rows = PairedRows(source_side, target)
    action = np.full(len(addresses), -1)
    for i, clause in enumerate(matched):
        open_ = action == -1
        action[open_ & rows.truth(clause.condition, f"the {clause.kind} condition")] = i
    _remove_taken(changes, pairs, leaf_of, addresses, action >= 0)
    updated = deleted = 0
    for i, clause in enumerate(matched):
        taken = action == i
        if not taken.any():
            continue
        if clause.kind == "delete":
            deleted += int(taken.sum())
            continue
        updated += int(taken.sum())
        idx = pa.array(np.flatnonzero(taken))
        exprs = _assignments(clause, source, schema)
        if all(e == f"source.{quoted(n)}" for n, e in exprs.items()):
            # every column straight from the source: no SQL to run
            changes.write(source_side.take(idx).select(list(exprs)))
            continue
        subset = PairedRows(source_side.take(idx), None if target is None else target.take(idx))
        changes.write(subset.assigned(exprs, schema, "the update"))
    return updated, deleted


def _remove_taken(
    changes: RowChanges,
    pairs: list[LeafMatches],
    leaf_of: np.ndarray,
    addresses: np.ndarray,
    taken: np.ndarray,
) -> None:
    """Remove the target rows of the ``taken`` pairs, leaf by leaf (one sort, not a pass
    per leaf)."""
    leaves, found = leaf_of[taken], addresses[taken]
    order = np.argsort(leaves, kind="stable")
    leaves, found = leaves[order], found[order]
    bounds = np.flatnonzero(np.diff(leaves)) + 1
    for group, part in zip(np.split(leaves, bounds), np.split(found, bounds), strict=True):
        if len(group):
            changes.remove(pairs[int(group[0])].leaf.object_id, part)


def _needs_target(source: ChangeSource, clauses: Sequence[_Clause], schema: Any) -> bool:
    """Whether any matched clause may read the namespace rows (else only their keys)."""
    for clause in clauses:
        if clause.condition is not None:
            return True
        if clause.kind == "update" and (
            clause.set is not None or len(source.columns) < len(schema.names)
        ):
            return True
    return False


def _assignments(clause: _Clause, source: ChangeSource, schema: Any) -> dict[str, str]:
    """Every namespace column's new value as SQL: assigned, else from the source (update
    all) or kept from the target row."""
    out = {}
    for name in schema.names:
        if clause.set is not None and name in clause.set:
            out[name] = clause.set[name]
        elif clause.set is None and name in source.columns:
            out[name] = f"source.{quoted(name)}"
        else:
            out[name] = f"target.{quoted(name)}"
    return out


def _target_rows(snapshot: Snapshot, pairs: list[LeafMatches]) -> pa.Table:
    """The namespace rows of every pair, in pair order, in namespace form."""
    return pa.concat_tables(
        [_rows_at(snapshot, m, m.addresses) for m in pairs], promote_options="none"
    )


def _rows_at(snapshot: Snapshot, m: LeafMatches, addresses: np.ndarray) -> pa.Table:
    ds: lance.LanceDataset = snapshot.open_leaf(m.leaf)
    mapping = ReadMapping(snapshot.schema, snapshot.schema.names, ds, m.leaf.object_id)
    rows = ds._take_rows(addresses.tolist(), columns=mapping.leaf_columns)
    if rows.num_rows != len(addresses):  # Lance skips addresses it cannot find
        raise CommitConflictError(
            f"partition {m.leaf.object_id!r} changed while the merge read it; retry"
        )
    return mapping.conform_table(rows)


def _inserted(
    source: ChangeSource,
    matches: list[LeafMatches],
    clauses: Sequence[_Clause],
    changes: RowChanges,
) -> int:
    insert = next((c for c in clauses if c.kind == "insert"), None)
    if insert is None:
        return 0
    matched = np.zeros(source.num_rows, dtype=bool)
    for m in matches:
        matched[m.source_rows] = True
    rows = source.table.take(pa.array(np.flatnonzero(~matched)))
    if insert.condition is not None and rows.num_rows:
        keep = PairedRows(rows, None).truth(insert.condition, "the insert condition")
        rows = rows.filter(pa.array(keep))
    changes.write(rows.select(source.columns))
    return rows.num_rows


def _deleted_by_source(
    snapshot: Snapshot,
    matches: list[LeafMatches],
    clauses: Sequence[_Clause],
    changes: RowChanges,
) -> int:
    if not clauses:
        return 0
    condition = clauses[0].condition
    deleted = 0
    for m in matches:
        rest = m.unmatched if m.unmatched is not None else np.empty(0, np.uint64)
        if len(rest) and condition is not None:
            rows = PairedRows(None, _rows_at(snapshot, m, rest))
            rest = rest[rows.truth(condition, "the not-matched-by-source condition")]
        changes.remove(m.leaf.object_id, rest)
        deleted += len(rest)
    return deleted
