"""What a transaction does to one leaf: the ``LeafChange`` operations.

Each change is built against the leaf's *published* content and turned into a
Lance operation by ``staging.stage_leaf``: append written files, replace the
leaf's content, delete rows by predicate, compact fragments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import lance
import numpy as np
from lance.fragment import FragmentMetadata

from lance_partitioned.format.filters.evaluate import filter_batch
from lance_partitioned.operations.leaf.leaf_evolution import (
    aligned_layout,
    evolution_for,
    next_evolution,
    schema_for,
)
from lance_partitioned.operations.leaf.leaf_schema import ReadMapping


class LeafChange:
    """One transaction's operation on one leaf, built against the leaf's published content.

    ``rebaseable`` says whether the same change may be re-staged on a newer
    published version after a concurrent writer changed the leaf (true only for
    blind appends: they read nothing, so any order is a valid serial order).
    """

    rebaseable = False

    def prepare(self, base: lance.LanceDataset) -> Any | None:
        """A Lance operation to commit before ``operation`` (called again on its result
        until it returns None): schema changes the operation needs. None by default."""
        return None

    def operation(self, base: lance.LanceDataset) -> Any | None:
        """The Lance operation to commit on ``base``; None when there is nothing to do."""
        raise NotImplementedError

    def restart(self) -> None:
        """Called before each staging attempt, which starts again from the published
        content: whatever the last attempt committed is not below the next one."""


@dataclass
class AppendFiles(LeafChange):
    """Add already-written fragments.

    With ``namespace`` (the namespace Schema), files may carry namespace columns
    the leaf lacks (added to the namespace after the leaf was created): the
    leaf gains them first, metadata only, under their namespace field ids.
    """

    fragments: list[FragmentMetadata]
    namespace: Any = None  # format.schema.Schema
    label: str = ""
    rebaseable = True

    def prepare(self, base: lance.LanceDataset) -> Any | None:
        if self.namespace is None:
            return None
        return evolution_for(base, self.namespace, self.fragments, self.label)

    def operation(self, base: lance.LanceDataset) -> Any:
        return lance.LanceOperation.Append(self.fragments)


@dataclass
class ReplaceFiles(LeafChange):
    """Replace the leaf's content with already-written fragments (Lance ``Overwrite``).

    ``schema`` None keeps the leaf's own columns and field ids (the files were
    written with them), plus, with ``namespace``, the namespace columns the
    files carry and the leaf lacks. A ``LanceSchema`` keeps its field ids; an
    Arrow schema gets Lance's own numbering.
    """

    schema: Any  # pa.Schema | LanceSchema | None
    fragments: list[FragmentMetadata]
    namespace: Any = None  # format.schema.Schema
    label: str = ""

    def operation(self, base: lance.LanceDataset) -> Any:
        schema = self.schema
        if schema is None:
            schema = schema_for(base, self.namespace, self.fragments, self.label)
        return lance.LanceOperation.Overwrite(schema, self.fragments)


@dataclass
class DeleteRows(LeafChange):
    """Delete the rows matching a SQL predicate (deletion vectors written per fragment).

    The predicate names namespace columns. When ``schema`` is given and the leaf
    does not name every ``columns`` entry as the namespace does (a column was
    renamed or added after the leaf was written), rows are matched in namespace
    form with DataFusion and deleted by row address, never by the leaf's names.
    """

    predicate: str
    schema: Any = None  # format.schema.Schema
    columns: list[str] = field(default_factory=list)
    label: str = ""
    deleted: int = 0

    def operation(self, base: lance.LanceDataset) -> Any | None:
        predicate = self._leaf_predicate(base)
        if predicate is None:
            self.deleted = 0
            return None
        self.deleted = base.count_rows(filter=predicate)
        if self.deleted == 0:
            return None
        updated, removed = [], []
        for frag in base.get_fragments():
            new = frag.delete(predicate)
            if new is None:
                removed.append(frag.fragment_id)
            elif new.deletion_file != frag.metadata.deletion_file:
                updated.append(new)
        return lance.LanceOperation.Delete(updated, removed, self.predicate)

    def _leaf_predicate(self, base: lance.LanceDataset) -> str | None:
        if self.schema is None or not self.columns:
            return self.predicate
        mapping = ReadMapping(self.schema, self.columns, base, self.label)
        if mapping.is_identity:
            return self.predicate
        addresses: list[int] = []
        for batch in base.to_batches(columns=mapping.leaf_columns, with_row_address=True):
            rows = mapping.conform(batch)
            rows = rows.append_column("_lp_addr", batch.column("_rowaddr"))
            matched = filter_batch(rows, self.predicate, ["_lp_addr"])
            addresses.extend(matched.column(0).to_pylist())
        if not addresses:
            return None
        return f"_rowaddr IN ({', '.join(str(a) for a in addresses)})"


@dataclass
class AlignLeaf(LeafChange):
    """Bring a leaf's columns in line with the namespace schema (``aligned_layout``):
    namespace names, no dropped columns, and with ``widen`` the namespace types.

    Renames and drops touch no data (a Lance ``Project``); widening rewrites the
    lagging column, one file per fragment. The rows stay as they are.
    """

    schema: Any  # format.schema.Schema
    widen: bool = True

    def prepare(self, base: lance.LanceDataset) -> Any | None:
        return next_evolution(base, aligned_layout(self.schema, base, self.widen))

    def operation(self, base: lance.LanceDataset) -> Any | None:
        return None


@dataclass
class CompactFiles(LeafChange):
    """Rewrite small fragments (and materialise deletions) into fewer, larger ones."""

    target_rows_per_fragment: int = 1 << 20
    rewritten: int = 0

    def operation(self, base: lance.LanceDataset) -> Any | None:
        import lance.optimize as lo

        options = lo.CompactionOptions(target_rows_per_fragment=self.target_rows_per_fragment)
        plan = lo.Compaction.plan(base, options)
        if plan.num_tasks() == 0:
            return None
        results = [task.execute(base) for task in plan.tasks]
        self.rewritten = sum(len(r.original_fragments) for r in results)
        groups = [
            lance.LanceOperation.RewriteGroup(r.original_fragments, r.new_fragments)
            for r in results
        ]
        return lance.LanceOperation.Rewrite(groups, [])


@dataclass
class ChangeRows(LeafChange):
    """Remove rows by row address and add written fragments, as one Lance ``Update``.

    ``addresses`` are row addresses (fragment id << 32 | offset) in the version the
    change is staged on: the caller stages it on exactly the version it read the
    addresses from (``stage_leaf``'s ``published``), which the transaction publishes
    over only if no one changed the leaf meanwhile. ``fragments`` were written with
    the leaf's columns; with ``namespace``, columns the leaf lacks are added first
    (as ``AppendFiles`` does). ``removed`` counts the rows removed.
    """

    addresses: Any  # a numpy uint64 array
    fragments: list[FragmentMetadata] = field(default_factory=list)
    namespace: Any = None  # format.schema.Schema
    label: str = ""
    removed: int = 0

    def prepare(self, base: lance.LanceDataset) -> Any | None:
        if self.namespace is None or not self.fragments:
            return None
        return evolution_for(base, self.namespace, self.fragments, self.label)

    def operation(self, base: lance.LanceDataset) -> Any | None:
        addresses = np.unique(np.asarray(self.addresses, dtype=np.uint64))
        self.removed = len(addresses)
        updated, removed = [], []
        fragment_ids = addresses >> np.uint64(32)
        bounds = np.flatnonzero(np.diff(fragment_ids)) + 1
        for group in np.split(addresses, bounds) if len(addresses) else []:
            fragment = base.get_fragment(int(group[0] >> np.uint64(32)))
            if fragment is None:
                raise ValueError(f"partition {self.label}: rows to change are gone")
            if len(group) == fragment.count_rows():  # every live row: drop the fragment
                removed.append(fragment.fragment_id)
                continue
            new = fragment.delete(f"_rowaddr IN ({', '.join(map(str, group.tolist()))})")
            if new is None:
                removed.append(fragment.fragment_id)
            else:
                updated.append(new)
        if not updated and not removed and not self.fragments:
            return None
        return lance.LanceOperation.Update(
            removed_fragment_ids=removed, updated_fragments=updated, new_fragments=self.fragments
        )


@dataclass
class MergeRows(LeafChange):
    """Upsert ``rows`` by the key columns ``on`` with Lance's own ``merge_insert``: matched
    rows take every column of theirs, the others are inserted (one Lance ``Update``).

    For a leaf whose columns are the namespace's exactly (names, types, field ids) and
    rows that all belong to its partition. ``delete_keys`` (key columns) are rows that
    moved to another partition: the leaf's rows matching them are deleted first, as
    a version of their own below the upsert's (a ``prepare`` step), or as the whole
    change when there are no ``rows``. ``updated``, ``inserted`` and ``moved_out``
    count what the last staging did.
    """

    rows: Any  # pa.Table with the namespace's columns
    on: list[str]
    update: bool = True
    insert: bool = True
    delete_keys: Any = None  # pa.Table of the key columns
    updated: int = 0
    inserted: int = 0
    moved_out: int = 0
    _deleted_below: int | None = field(default=None, repr=False)

    def restart(self) -> None:
        self._deleted_below = None  # the next attempt's base holds the rows again

    def prepare(self, base: lance.LanceDataset) -> Any | None:
        if self.delete_keys is None or not self.rows.num_rows:
            return None  # nothing to delete, or deleting is the whole change
        if self._deleted_below is not None and base.version > self._deleted_below:
            return None  # this staging attempt committed the deletion already
        self._deleted_below = base.version
        return self._delete(base)

    def operation(self, base: lance.LanceDataset) -> Any | None:
        if not self.rows.num_rows:
            return self._delete(base) if self.delete_keys is not None else None
        builder = base.merge_insert(self.on)
        if self.update:
            builder = builder.when_matched_update_all()
        if self.insert:
            builder = builder.when_not_matched_insert_all()
        transaction, stats = builder.execute_uncommitted(self.rows)
        self.updated = int(stats.get("num_updated_rows", 0))
        self.inserted = int(stats.get("num_inserted_rows", 0))
        if not self.updated and not self.inserted:
            return None
        return transaction.operation

    def _delete(self, base: lance.LanceDataset) -> Any | None:
        builder = base.merge_insert(self.on).when_matched_delete()
        transaction, stats = builder.execute_uncommitted(self.delete_keys)
        self.moved_out = int(stats.get("num_deleted_rows", 0))
        return transaction.operation if self.moved_out else None
