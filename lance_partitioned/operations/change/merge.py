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
from dataclasses import dataclass
from typing import Any

import lance
import numpy as np
import pyarrow as pa

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import ColumnNotFoundError, InvalidArgumentError
from lance_partitioned.operations.change.apply import Applied, RowChanges, changed
from lance_partitioned.operations.change.matching import (
    LeafMatches,
    candidate_leaves,
    match_leaves,
)
from lance_partitioned.operations.change.source import ChangeSource, read_source
from lance_partitioned.operations.change.sql import PairedRows, quoted
from lance_partitioned.operations.leaf.leaf_schema import ReadMapping
from lance_partitioned.operations.write.input import DataLike


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
        unknown = [c for c in set if not self._schema_of().has_field(c)]
        if unknown:
            raise ColumnNotFoundError(f"set names column(s) {unknown} the namespace does not have")
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

    def execute(self, **options: Any) -> MergeResult:
        """Plan and publish the merge in one ``__manifest`` commit; return a ``MergeResult``.

        ``options`` are a write's (``max_buffer_bytes``, ``max_rows_per_file``).
        The source is read once; a concurrent commit makes the merge match again
        on the latest version (it never publishes over rows it did not see), up
        to the retry policy's tries, then CommitConflictError (retryable).
        Nothing is written when the source or the clauses are refused.
        """
        if not self._clauses:
            raise InvalidArgumentError(
                "a merge needs at least one clause, e.g. when_matched_update_all()"
            )
        source = read_source(self._data, self._schema_of(), self._on)
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


def _result(applied: Applied, counts: tuple[int, int, int]) -> MergeResult:
    inserted, updated, deleted = counts if applied.partitions else (0, 0, 0)
    return MergeResult(applied.version, inserted, updated, deleted, applied.partitions)


def plan_merge(
    snapshot: Snapshot, source: ChangeSource, clauses: Sequence[_Clause]
) -> tuple[RowChanges, tuple[int, int, int]]:
    """The rows a merge removes and writes on ``snapshot``, and (inserted, updated, deleted)."""
    by_source = [c for c in clauses if c.kind == "delete_by_source"]
    leaves = candidate_leaves(snapshot, source, prune=not by_source)
    matches = match_leaves(snapshot, source, leaves, unmatched=bool(by_source))
    changes = RowChanges()
    updated, deleted = _matched(snapshot, source, matches, clauses, changes)
    inserted = _inserted(source, matches, clauses, changes)
    deleted += _deleted_by_source(snapshot, matches, by_source, changes)
    return changes, (inserted, updated, deleted)


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
    updated = deleted = 0
    for i, clause in enumerate(matched):
        taken = action == i
        if not taken.any():
            continue
        for j, m in enumerate(pairs):
            changes.remove(m.leaf.object_id, addresses[taken & (leaf_of == j)])
        if clause.kind == "delete":
            deleted += int(taken.sum())
            continue
        updated += int(taken.sum())
        exprs = _assignments(clause, source, schema)
        idx = pa.array(np.flatnonzero(taken))
        subset = PairedRows(source_side.take(idx), None if target is None else target.take(idx))
        changes.write(subset.assigned(exprs, schema, "the update"))
    return updated, deleted


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
