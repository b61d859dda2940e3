"""The change feed: the rows each commit inserted and deleted (``ns.changes``).

``changes(start, end)`` walks the ``__manifest`` versions ``start + 1 .. end``
one by one; each version's changes carry it as ``_commit_version`` (and its
time as ``_commit_timestamp``). The cost follows the change, not the table
(docs/CHANGES.md "Reading what changed"):

1. **Which partitions changed.** The ``__manifest`` rows a commit replaced or
   removed, and the ones it wrote, are found by comparing the two versions'
   fragments (``fragment_diff``): only the fragments a commit added and the rows
   it newly deleted are read. A partition whose ``read_version`` did not change
   is never opened. ``filter`` keeps only the partitions its ``__manifest``
   predicate selects, as a scan prunes.
2. **Which rows changed in a partition.** A leaf whose published version moved
   is compared the same way between its old and new version: rows of fragments
   the new version added are inserts; rows the new version no longer has (a
   removed fragment, or newly deleted by a deletion file) are deletes, read from
   the old version by row address. A partition that appeared is all inserts, one
   removed (an overwrite) all deletes.
3. **Rows moved, not changed.** Commits whose record says they move no row
   (compaction, ``rewrite_partitions``, alignment, indexes, evolution:
   ``ROW_KEEPING``), and leaf versions whose Lance operations only move rows
   (``Rewrite``) or add columns, produce nothing and are not read. When a leaf's
   versions mix such an operation with a real change, an identical deleted and
   inserted row cancel out (compared on every column).

4. **Updated rows.** A commit that knows its rows by key (``merge`` with an
   update clause, ``update``: ``change_images``) reports each updated row as an
   ``update_preimage`` and ``update_postimage`` pair; every other update shows as
   the old row deleted and the new one inserted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog import history, layout
from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.leaf_open import open_leaf_dataset, read_session
from lance_partitioned.catalog.manifest import Manifest, conform
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import (
    InvalidArgumentError,
    VersionNotFoundError,
    lance_boundaries,
    raise_for_user,
)
from lance_partitioned.format.filters.evaluate import filter_batch
from lance_partitioned.format.filters.render import to_lance_sql
from lance_partitioned.operations.leaf.leaf_schema import ReadMapping
from lance_partitioned.operations.read.change_images import (
    UPDATE_POSTIMAGE,
    UPDATE_PREIMAGE,
    image_key,
    pair_images,
)
from lance_partitioned.operations.read.fragment_diff import fragment_diff
from lance_partitioned.operations.read.scan import Scan, read_leaf
from lance_partitioned.operations.read.scan_filter import FilterLike

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
INSERT = "insert"
DELETE = "delete"
CHANGE_FIELDS = [
    pa.field(CHANGE_TYPE, pa.string(), nullable=False),
    pa.field(COMMIT_VERSION, pa.int64(), nullable=False),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), nullable=False),
]

# Operations (``catalog.commit_info`` records) that move rows without changing
# any: their commits are not read at all.
ROW_KEEPING = frozenset(
    {
        "compact", "rewrite_partitions", "align_leaves", "realign_field_ids",
        "create_index", "optimize_indexes", "drop_index", "set_index_definitions",
        "evolve_spec", "add_column", "rename_column", "drop_column", "widen_column",
        "repair", history.MAINTENANCE,
    }
)  # fmt: skip
# Lance operations of a leaf version (or a ``__manifest`` version) that keep its rows:
# compaction moves them, ``Project``/``Merge`` add or drop columns.
LANCE_ROW_KEEPING = frozenset({"Rewrite", "Project", "Merge", "CreateIndex", "UpdateConfig"})
# Lance operations whose versions change rows only by adding fragments and deletion
# files: an identical row deleted and inserted by them was really rewritten.
LANCE_PLAIN = frozenset({"Append", "Delete", "Update", "Overwrite"})

# The ``__manifest`` columns a change needs besides the partition columns.
_ROW_COLUMNS = ["object_id", "object_type", "location", "read_version", "read_branch", "read_tag"]


def _rows_at(
    ds: lance.LanceDataset, fragments: list[int], addresses: np.ndarray, schema: pa.Schema
) -> pa.Table:
    """The rows of whole ``fragments`` and at row ``addresses`` of ``ds``, in ``schema``
    (the columns ``ds`` has of it: a change needs few of ``__manifest``'s)."""
    has = set(ds.schema.names)
    columns = [n for n in schema.names if n in has]
    parts = []
    if fragments:
        frags = [ds.get_fragment(i) for i in fragments]
        parts.append(ds.scanner(columns=columns, fragments=frags).to_table())
    if len(addresses):
        parts.append(ds._take_rows(addresses.tolist(), columns=columns))
    return conform(pa.concat_tables(parts), schema) if parts else schema.empty_table()


class LeafChange(NamedTuple):
    """One partition changed by a commit: its ``Leaf`` before (None: it is new) and after
    (None: it was removed)."""

    before: Leaf | None
    after: Leaf | None


class PlannedChange(NamedTuple):
    """The partitions of one commit that a parallel reader of the feed reads as one piece
    (``ChangeFeed.planned``, ``ChangeFeed.read_planned``), with the commit's version and
    time. Plain data (no Lance handles), so it can be shipped to another process."""

    version: int
    timestamp: Any
    # one changed partition; every one of the commit when ``key`` pairs its update images
    leaves: tuple[LeafChange, ...]
    # the columns that pair update images (``change_images.image_key``), or None
    key: tuple[str, ...] | None = None


@lance_boundaries
class ChangeFeed:
    """Rows inserted and deleted by the commits after ``start`` up to ``end`` (a Scan-like
    object: ``to_arrow``, ``to_batches``, ``to_reader``, ``to_pandas``, ``count``).

    Built by ``ns.changes``; nothing is read until asked. Columns: the namespace's
    (``columns``: those only), then ``_change_type`` (``insert``/``delete``, or
    ``update_preimage``/``update_postimage`` for a row a merge or update changed),
    ``_commit_version`` and ``_commit_timestamp`` (UTC). Rows come in commit order;
    within a commit, partition by partition, deletes before inserts (a merge or update:
    deletes, then each updated row's pre and post image, then inserts).
    """

    def __init__(
        self,
        manifest: Manifest,
        start: int,
        end: Snapshot,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
        start_dataset: lance.LanceDataset | None = None,
    ):
        self.manifest = manifest
        self.start = start
        self.end = end
        # versions already open (``start``'s, checked by ``changes``, and ``end``'s)
        self._opened = {end.version: end.dataset}
        if start_dataset is not None:
            self._opened[start_dataset.version] = start_dataset
        self.scan = Scan(end, filter, columns)
        self.output_schema = pa.schema([*self.scan.output_schema, *CHANGE_FIELDS])

    # -- which partitions each commit changed -------------------------------------------
    def _versions(self) -> list[lance.LanceDataset]:
        """``__manifest`` versions ``start .. end``, opened; a removed one raises the error
        naming the cleanup that removed it."""
        out = []
        for v in range(self.start, self.end.version + 1):
            try:
                known = self._opened.get(v)
                out.append(known if known is not None else self.manifest.dataset(v))
            except Exception as exc:
                gone = history.removed_version_error(self.manifest, v)
                if gone is not None:
                    raise gone from exc
                raise VersionNotFoundError(
                    f"__manifest version {v} of {self.manifest.root!r} cannot be opened, so "
                    f"the changes from {self.start} to {self.end.version} cannot be read: {exc}"
                ) from exc
        return out

    def _changed_leaves(
        self, old: lance.LanceDataset, new: lance.LanceDataset, kind: str | None
    ) -> list[LeafChange]:
        """The partitions whose published version commit ``new`` changed, that the filter
        may select: from the ``__manifest`` rows the commit replaced, removed or wrote."""
        if kind in LANCE_ROW_KEEPING:
            return []
        diff = fragment_diff(old, new, self.manifest.storage_options)
        if diff.empty:
            return []
        schema = self._row_schema()
        before = self._table_rows(_rows_at(old, diff.removed, diff.deleted, schema))
        after = self._table_rows(_rows_at(new, diff.added, diff.revived, schema))
        out = []
        for oid in sorted(before.keys() | after.keys()):
            b, a = before.get(oid), after.get(oid)
            same = b is not None and a is not None and b.location == a.location
            if same and b.version_ref() == a.version_ref():  # type: ignore[union-attr]
                continue
            out.append(LeafChange(b, a))
        return out

    def _row_schema(self) -> pa.Schema:
        """The ``__manifest`` columns a changed partition's row is read with: where it is
        and which version it publishes, and the partition columns the filter prunes by."""
        wanted = set(_ROW_COLUMNS)
        wanted.update(f.column for spec in self.end.specs.values() for f in spec.fields)
        full = self.end.dataset.schema
        return pa.schema([f for f in full if f.name in wanted])

    def _table_rows(self, rows: pa.Table) -> dict[str, Leaf]:
        """The table rows of ``rows`` (``__manifest`` rows) the filter's predicate may
        select, as ``Leaf``s by object id (partition values in their spec's order).

        A row of a spec the end version does not have (a ``restore`` took it back)
        is kept unpruned, without partition values: its rows get the whole filter.
        """
        rows = rows.filter(pc.equal(rows.column("object_type"), "table"))
        out: dict[str, Leaf] = {}
        for row in rows.to_pylist():
            try:
                spec_id = layout.spec_id_of(row["object_id"])
            except ValueError:  # another tool's table: not a partition
                continue
            spec = self.end.specs.get(spec_id)
            values = () if spec is None else tuple(row.get(f.column) for f in spec.fields)
            out[row["object_id"]] = Leaf(
                row["object_id"], row["location"], spec_id, values,
                row["read_version"], row["read_branch"], row["read_tag"],
            )  # fmt: skip
        if self.scan.manifest_sql and rows.num_rows:
            batch = rows.combine_chunks().to_batches()[0]
            kept = set(filter_batch(batch, self.scan.manifest_sql).column("object_id").to_pylist())
            out = {o: lf for o, lf in out.items() if o in kept or lf.spec_id not in self.end.specs}
        return out

    def _residual(self, leaf: Leaf) -> str | None:
        """The filter a partition's rows still need (the whole filter for a spec the end
        version does not know)."""
        if leaf.spec_id in self.end.specs:
            return self.scan.leaf_filter(leaf)
        return None if self.scan.expr is None else to_lance_sql(self.scan.expr)

    # -- which rows each changed partition inserted and deleted ---------------------------
    def _open(self, leaf: Leaf) -> lance.LanceDataset:
        uri = self.end.leaf_uri(leaf.location)
        try:
            return open_leaf_dataset(uri, leaf, self.manifest.storage_options, read_session())
        except (OSError, ValueError) as exc:
            gone = history.explain_failed_read(
                self.manifest, self.start, leaf.location, leaf.read_version,
                self.manifest.storage_options,
            )  # fmt: skip
            if gone is not None:
                raise gone from exc
            raise_for_user(exc, f"reading partition {leaf.object_id} ({leaf.location})")

    def _leaf_rows(self, change: LeafChange, wide: bool = False) -> tuple[pa.Table, pa.Table]:
        """(deleted, inserted) rows of one changed partition, in the output columns
        (``wide``: every column of the end version, to pair update images by)."""
        before, after = change
        out = self.end.schema.names if wide else self._columns
        same = before is not None and after is not None and before.location == after.location
        old = self._open(before) if before is not None else None
        new = self._open(after) if after is not None else None
        if not same:
            return self._whole(old, before, out), self._whole(new, after, out)
        assert old is not None and new is not None and before is not None and after is not None
        kinds = _operations_between(new, before, after)
        if kinds is not None and kinds <= LANCE_ROW_KEEPING:
            return self._empty(out), self._empty(out)
        diff = fragment_diff(old, new, self.manifest.storage_options)
        cancel = kinds is None or not kinds <= LANCE_PLAIN
        columns = self.end.schema.names if cancel else out
        deleted = self._read(old, before, diff.removed, diff.deleted, columns)
        inserted = self._read(new, after, diff.added, diff.revived, columns)
        if cancel:
            deleted, inserted = _cancel(deleted, inserted)
        return deleted.select(out), inserted.select(out)

    @property
    def _columns(self) -> list[str]:
        return [f.name for f in self.scan.output_schema]

    def _empty(self, columns: list[str]) -> pa.Table:
        return pa.schema([self.end.schema.arrow.field(c) for c in columns]).empty_table()

    def _whole(
        self, ds: lance.LanceDataset | None, leaf: Leaf | None, columns: list[str]
    ) -> pa.Table:
        """Every row of a partition that appeared or was removed (the filter's rows)."""
        if ds is None or leaf is None:
            return self._empty(columns)
        return self._read(ds, leaf, [f.fragment_id for f in ds.get_fragments()], None, columns)

    def _read(
        self,
        ds: lance.LanceDataset,
        leaf: Leaf,
        fragments: list[int],
        addresses: np.ndarray | None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """Rows of ``fragments`` and at ``addresses`` of one leaf version that match the
        filter (its residual for this partition), as namespace ``columns``."""
        columns = self._columns if columns is None else columns
        sql, label = self._residual(leaf), leaf.object_id
        schema = pa.schema([self.end.schema.arrow.field(c) for c in columns])
        parts = []
        if fragments:
            frags = [ds.get_fragment(i) for i in fragments]
            batches = read_leaf(
                ds, self.end.schema, columns, sql, self.scan.filter_columns, label,
                fragments=frags,
            )  # fmt: skip
            parts.append(pa.Table.from_batches(list(batches), schema=schema))
        if addresses is not None and len(addresses):
            parts.append(self._take(ds, label, addresses, columns, sql, schema))
        return pa.concat_tables(parts).cast(schema) if parts else schema.empty_table()

    def _take(
        self,
        ds: lance.LanceDataset,
        label: str,
        addresses: np.ndarray,
        columns: list[str],
        sql: str | None,
        schema: pa.Schema,
    ) -> pa.Table:
        """The rows at ``addresses`` of ``ds`` (live there) matching ``sql``, as ``columns``."""
        wide = list(dict.fromkeys([*columns, *self.scan.filter_columns]))
        mapping = ReadMapping(self.end.schema, wide, ds, label)
        read = mapping.leaf_columns or ds.schema.names[:1]  # a row count needs a column
        taken = ds._take_rows(addresses.tolist(), columns=read)
        rows = pa.Table.from_batches(
            [mapping.conform(b) for b in taken.to_batches()], schema=pa.schema(mapping.targets)
        )
        if sql is not None and rows.num_rows:
            rows = pa.Table.from_batches([filter_batch(rows.combine_chunks().to_batches()[0], sql)])
        return rows.select(columns).cast(schema)

    # -- output ---------------------------------------------------------------------------
    def _commits(self) -> Iterator[tuple[int, Any, CommitInfo, list[LeafChange]]]:
        """Per version after ``start``: its number, timestamp, record and changed
        partitions."""
        opened = self._versions()
        latest = opened[-1]
        for old, new in zip(opened, opened[1:], strict=False):
            # ``first``: ``start``, never a version read here (only the first is a create)
            try:
                txn = latest.read_transaction(new.version)
            except Exception:  # no transaction file: compare the versions whole
                txn = None
            record = history.record_of(txn, new.version, first=self.start)
            when = history.utc(new.get_version()["timestamp"])
            if record.operation in ROW_KEEPING:
                continue
            kind = type(txn.operation).__name__ if txn is not None else None
            yield new.version, when, record, self._changed_leaves(old, new, kind)

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Stream the change rows, commit by commit (up to 8 partitions read at once)."""
        for version, when, record, leaves in self._commits():
            if not leaves:
                continue
            key = image_key(record, self.end.schema.names)
            if key is not None:
                yield from self._paired(leaves, key, version, when)
                continue
            for rows in self._each_leaf(leaves):
                yield from self._labelled_pair(rows, version, when)

    def planned(self) -> Iterator[PlannedChange]:
        """The pieces of the feed in commit order, without reading their rows (only
        ``__manifest`` versions are compared): what ``to_batches`` reads, split so that
        other processes can read the pieces (``read_planned``). A piece is one changed
        partition, or the whole commit when it pairs update images (a pair may span
        two partitions)."""
        for version, when, record, leaves in self._commits():
            if not leaves:
                continue
            key = image_key(record, self.end.schema.names)
            if key is not None:
                yield PlannedChange(version, when, tuple(leaves), tuple(key))
                continue
            for change in leaves:
                yield PlannedChange(version, when, (change,))

    def read_planned(self, planned: PlannedChange) -> Iterator[pa.RecordBatch]:
        """The change rows of one piece of ``planned()``, as ``to_batches`` yields them.
        The piece may come from another ``ChangeFeed`` over the same range (another
        process): only the end snapshot, filter and columns shape the rows."""
        if planned.key is not None:
            return self._paired(
                list(planned.leaves), list(planned.key), planned.version, planned.timestamp
            )
        (change,) = planned.leaves
        return self._labelled_pair(self._leaf_rows(change), planned.version, planned.timestamp)

    def _labelled_pair(
        self, rows: tuple[pa.Table, pa.Table], version: int, when: Any
    ) -> Iterator[pa.RecordBatch]:
        for table, kind in zip(rows, (DELETE, INSERT), strict=True):
            if table.num_rows:
                yield from self._labelled(table, kind, version, when).to_batches()

    def _each_leaf(
        self, leaves: list[LeafChange], wide: bool = False
    ) -> Iterator[tuple[pa.Table, pa.Table]]:
        """(deleted, inserted) of each changed partition, in order; one partition, the
        usual commit, is read here: starting threads would cost more than it reads."""
        if len(leaves) == 1:
            yield self._leaf_rows(leaves[0], wide)
            return
        with ThreadPoolExecutor(min(8, len(leaves))) as pool:
            yield from pool.map(lambda change: self._leaf_rows(change, wide), leaves)

    def _paired(
        self, leaves: list[LeafChange], key: list[str], version: int, when: Any
    ) -> Iterator[pa.RecordBatch]:
        """One commit that updated rows it knows by ``key`` (``change_images``): its rows
        read whole, then deletes, the pre and post image of each updated row, inserts.
        The commit's changed rows are held at once: a pair may span two partitions."""
        read = list(self._each_leaf(leaves, wide=True))
        deleted = pa.concat_tables([d for d, _ in read])
        inserted = pa.concat_tables([i for _, i in read])
        pre, post = pair_images(deleted, inserted, key)
        images = pa.concat_tables([deleted.take(_positions(pre)), inserted.take(_positions(post))])
        n = len(pre)
        interleaved = [j for i in range(n) for j in (i, n + i)]
        pre_set, post_set = set(pre), set(post)
        parts = [
            (_take_except(deleted, pre_set), DELETE),
            (images.take(_positions(interleaved)), [UPDATE_PREIMAGE, UPDATE_POSTIMAGE] * n),
            (_take_except(inserted, post_set), INSERT),
        ]
        for rows, kind in parts:
            if rows.num_rows:
                rows = rows.select(self._columns)
                yield from self._labelled(rows, kind, version, when).to_batches()

    def _labelled(self, rows: pa.Table, kind: str | list[str], version: int, when: Any) -> pa.Table:
        n = rows.num_rows
        extra = [
            pa.array([kind] * n if isinstance(kind, str) else kind, pa.string()),
            pa.array([version] * n, pa.int64()),
            pa.array([when] * n, pa.timestamp("us", tz="UTC")),
        ]
        return pa.Table.from_arrays([*rows.columns, *extra], schema=self.output_schema)

    def to_arrow(self) -> pa.Table:
        """Every change row as one Arrow table."""
        return pa.Table.from_batches(list(self.to_batches()), schema=self.output_schema)

    def to_reader(self) -> pa.RecordBatchReader:
        """A ``pyarrow.RecordBatchReader`` streaming the change rows commit by commit."""
        return pa.RecordBatchReader.from_batches(self.output_schema, self.to_batches())

    def to_pandas(self, **kwargs: Any) -> Any:
        """``to_arrow().to_pandas(**kwargs)``."""
        return self.to_arrow().to_pandas(**kwargs)

    def count(self) -> int:
        """The number of change rows (inserts and deletes)."""
        return sum(b.num_rows for b in self.to_batches())


def _operations_between(new: lance.LanceDataset, before: Leaf, after: Leaf) -> set[str] | None:
    """The Lance operations of the leaf's versions after ``before``'s up to ``after``'s
    (both on main, by number); None when they cannot be listed (a branch or tag, a
    transaction file that is gone, or ``after`` older than ``before``: a restore)."""
    if before.read_branch or before.read_tag or after.read_branch or after.read_tag:
        return None
    if not isinstance(before.read_version, int) or not isinstance(after.read_version, int):
        return None
    if after.read_version <= before.read_version:  # a restore went back
        return None
    kinds = set()
    for v in range(before.read_version + 1, after.read_version + 1):
        try:
            txn = new.read_transaction(v)
        except Exception:
            return None
        if txn is None:
            return None
        kinds.add(type(txn.operation).__name__)
    return kinds


def _positions(rows: list[int]) -> pa.Array:
    return pa.array(rows, pa.int64())


def _take_except(rows: pa.Table, skip: set[int]) -> pa.Table:
    """``rows`` without the rows at positions ``skip``."""
    return rows.take(_positions([i for i in range(rows.num_rows) if i not in skip]))


def _cancel(deleted: pa.Table, inserted: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Drop rows deleted and inserted alike (a multiset difference both ways): rows a
    rewrite moved between fragments, not changes."""
    if not deleted.num_rows or not inserted.num_rows:
        return deleted, inserted
    keys_d = [repr(tuple(r.values())) for r in deleted.to_pylist()]
    keys_i = [repr(tuple(r.values())) for r in inserted.to_pylist()]
    common = Counter(keys_d) & Counter(keys_i)

    def keep(keys: list[str]) -> list[int]:
        left, out = Counter(common), []
        for i, k in enumerate(keys):
            if left[k]:
                left[k] -= 1
            else:
                out.append(i)
        return out

    return (
        deleted.take(pa.array(keep(keys_d), pa.int64())),
        inserted.take(pa.array(keep(keys_i), pa.int64())),
    )


def changes(
    manifest: Manifest,
    start_version: int,
    end: Snapshot,
    filter: FilterLike = None,
    columns: Sequence[str] | None = None,
) -> ChangeFeed:
    """The change feed from ``start_version`` (exclusive) to snapshot ``end`` (inclusive).

    Raises InvalidArgumentError when ``start_version`` is not a version number at or
    below ``end``'s, VersionNotFoundError when it is not a version ``lp.open`` reads
    (naming the cleanup that removed it, if one did).
    """
    if isinstance(start_version, bool) or not isinstance(start_version, int):
        raise InvalidArgumentError(
            f"start_version must be a __manifest version number, got {start_version!r}"
        )
    if start_version > end.version:
        raise InvalidArgumentError(
            f"start_version {start_version} is after end_version {end.version}; "
            "changes are read forward, from an older version to a newer one"
        )
    # VersionNotFoundError naming what exists; the feed reads this version too
    opened = manifest.open_checked(start_version)
    return ChangeFeed(manifest, start_version, end, filter, columns, opened)
