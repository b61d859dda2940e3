"""Phase 2 of a write: stage every touched leaf and publish them with one commit.

The protocol (``docs/TRANSACTIONS.md``): stage every touched leaf as a private
Lance version built on the leaf's *published* content (never on another
writer's unpublished version; ``operations.txn.staging``), then publish them all
with one compare-and-swap commit on ``__manifest`` that sets ``read_version``
of every touched leaf. That commit is the only decision point: before it
readers see nothing of the write, after it everything. A conflicting commit
is rebased over where that is safe (``_rebase``); a failure rolls back what
was staged and deletes the files of leaves staging never reached.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.catalog import layout
from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.leaf_open import resolve_leaf
from lance_partitioned.catalog.manifest import (
    Manifest,
    lock_rows,
    republish_rows,
    with_read_mirror,
)
from lance_partitioned.catalog.manifest_query import object_ids_in
from lance_partitioned.catalog.mirror import mirror_metadata, mirror_values
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import CommitConflictError, PartitionedNamespaceError
from lance_partitioned.format.spec import partition_key
from lance_partitioned.operations.leaf.field_ids import IdLayout
from lance_partitioned.operations.leaf.leaf_changes import (
    AppendFiles,
    ChangeRows,
    LeafChange,
    ReplaceFiles,
)
from lance_partitioned.operations.leaf.leaf_schema import namespace_layout
from lance_partitioned.operations.txn.driver import LeafTransaction, StagedSet
from lance_partitioned.operations.txn.failpoints import pause_point
from lance_partitioned.operations.txn.leases import Lease
from lance_partitioned.operations.txn.staging import (
    StagedLeaf,
    stage_leaf,
    stage_new_leaf,
    txn_versions,
)
from lance_partitioned.operations.write.abandon import abort_write
from lance_partitioned.operations.write.partition_writer import LeafWrite, WrittenFiles

log = logging.getLogger(__name__)

# what a row-level change does to leaves it writes no files into: object id -> the row
# addresses it removes (in the leaf's published version), or a ready LeafChange
Removals = Mapping[str, Any]


class WriteMode(enum.Enum):
    """What a published write does with the partitions it did not write.

    ``APPEND`` keeps them and adds rows; ``OVERWRITE`` removes them (the whole
    namespace becomes exactly this write); ``DYNAMIC`` keeps them and replaces
    only the partitions the write touched. The value names the mode in leases
    and logs.
    """

    APPEND = "append"
    OVERWRITE = "overwrite"
    DYNAMIC = "dynamic"


def _leaf_change(
    leaf_write: LeafWrite, mode: WriteMode, snapshot: Snapshot, removals: Removals
) -> LeafChange:
    frags = leaf_write.fragment_metadata()
    # existing leaves keep their own columns and ids, which the files were
    # written with, and gain the namespace columns they lack (metadata only)
    if leaf_write.object_id in removals:
        addresses = removals[leaf_write.object_id]
        assert not isinstance(addresses, LeafChange), "files written into a leaf it merges into"
        return ChangeRows(addresses, frags, snapshot.schema, leaf_write.object_id)
    if mode is WriteMode.APPEND:
        return AppendFiles(frags, snapshot.schema, leaf_write.object_id)
    return ReplaceFiles(None, frags, snapshot.schema, leaf_write.object_id)


def _stage(
    snapshot: Snapshot,
    leaf_write: LeafWrite,
    published: Leaf | None,
    mode: WriteMode,
    staged: StagedSet,
    new_layout: IdLayout | None,
    removals: Removals,
) -> StagedLeaf:
    """Stage one leaf of a write: a new dataset for a new partition, else a new version.

    ``new_layout`` is ``namespace_layout(snapshot.schema)``, computed once per
    commit by the caller (it is needed for every new leaf).
    """
    uri = snapshot.leaf_uri(leaf_write.location)
    opts = snapshot.manifest.storage_options
    if leaf_write.is_new:
        assert new_layout is not None
        staged.new_dirs.append(uri)
        return stage_new_leaf(uri, new_layout, leaf_write.fragment_metadata(), staged.txn, opts)
    assert published is not None
    return _stage_existing(uri, leaf_write, published, mode, staged, opts, snapshot, removals)


def _stage_existing(
    uri: str,
    leaf_write: LeafWrite,
    published: Leaf,
    mode: WriteMode,
    staged: StagedSet,
    opts: dict[str, str] | None,
    snapshot: Snapshot,
    removals: Removals,
) -> StagedLeaf:
    """Stage ``leaf_write`` on the published content of an existing leaf (on its branch, if any)."""
    target = resolve_leaf(uri, published, opts)
    if target.branch != leaf_write.branch:
        # the files were written into the other branch's directory
        raise CommitConflictError(
            f"partition {leaf_write.object_id!r} moved from branch {leaf_write.branch or 'main'!r} to "
            f"{target.branch or 'main'!r} while it was being written; retry the write"
        )
    return stage_leaf(
        target.uri,
        target.published,
        _leaf_change(leaf_write, mode, snapshot, removals),
        staged.txn,
        opts,
        branch=target.branch,
        # the writer's open of the published version, when it is the same one
        opened=leaf_write.opened if target.published == leaf_write.base_version else None,
    )


def _manifest_rows(
    snapshot: Snapshot,
    written: WrittenFiles,
    versions: dict[str, int],
    branches: dict[str, str | None] | None = None,
    counts: dict[str, int | None] | None = None,
) -> pa.Table:
    spec_cols: dict[int, list[str]] = {
        sid: [f.column for f in s.fields] for sid, s in snapshot.specs.items()
    }
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for leaf_write in written.leaves.values():
        spec = snapshot.specs[leaf_write.spec_id]
        cols = spec_cols[leaf_write.spec_id]
        for oid, level in leaf_write.new_namespaces:
            if oid in seen:
                continue
            seen.add(oid)
            row = {"object_id": oid, "object_type": "namespace"}
            row.update({c: v for c, v in zip(cols[:level], leaf_write.key[:level], strict=True)})
            f = spec.fields[level - 1]
            row["metadata"] = mirror_metadata({f.field_id: leaf_write.key[level - 1]})
            rows.append(row)
        version = versions[leaf_write.object_id]
        # a branch-pinned leaf stays on its branch (seed 000: read_branch + read_version)
        branch = (branches or {}).get(leaf_write.object_id)
        row = {
            "object_id": leaf_write.object_id,
            "object_type": "table",
            "location": leaf_write.location,
            "metadata": with_read_mirror(
                mirror_values(
                    {f.field_id: v for f, v in zip(spec.fields, leaf_write.key, strict=True)}
                ),
                version,
                branch,
                None,
                (counts or {}).get(leaf_write.object_id),
            ),
            "read_version": version,
            "read_branch": branch,
        }
        row.update(dict(zip(cols, leaf_write.key, strict=True)))
        rows.append(row)
    # Rows inserted concurrently under the same spec would not conflict in Lance
    # (inserts rebase), so every inserting commit also rewrites its spec's
    # version-namespace row: two such commits then conflict on that row.
    rows.extend(
        lock_rows(
            {leaf_write.spec_id for leaf_write in written.leaves.values() if leaf_write.is_new}
        )
    )
    schema = snapshot.dataset.schema
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


def _deletes_for_overwrite(snapshot: Snapshot, keep: set[str]) -> list[str]:
    rows = snapshot.dataset.to_table(columns=["object_id", "object_type"]).to_pydict()
    tables = [
        o for o, t in zip(rows["object_id"], rows["object_type"], strict=True) if t == "table"
    ]
    remaining = [o for o in tables if o in keep]
    ancestors = {
        layout.join_id(*layout.split_id(o)[:i])
        for o in remaining
        for i in range(1, len(layout.split_id(o)))
    }
    out = [o for o in tables if o not in keep]
    for o, t in zip(rows["object_id"], rows["object_type"], strict=True):
        if (
            t == "namespace"
            and len(layout.split_id(o)) > 1
            and o not in ancestors
            and o not in keep
        ):
            out.append(o)
    return out


def _publish_rows(
    base: Snapshot,
    written: WrittenFiles,
    staged: StagedSet,
    mode: WriteMode,
    replaces: Sequence[str] = (),
) -> tuple[pa.Table, list[str]]:
    """The ``__manifest`` upserts and deletes that publish ``staged`` on top of ``base``."""
    versions = {oid: s.version for oid, s in staged.leaves.items()}
    branches = {oid: s.branch for oid, s in staged.leaves.items()}
    counts = {oid: s.num_rows for oid, s in staged.leaves.items()}
    upserts = _manifest_rows(base, written, versions, branches, counts)
    deletes: list[str] = []
    if mode is WriteMode.OVERWRITE or replaces:
        keep = {leaf_write.object_id for leaf_write in written.leaves.values()}
        keep |= {
            oid for leaf_write in written.leaves.values() for oid, _ in leaf_write.new_namespaces
        }
        if mode is not WriteMode.OVERWRITE:
            keep |= {leaf.object_id for leaf in base.leaves()} - set(replaces)
        deletes = _deletes_for_overwrite(base, keep)
        if deletes:
            lock = pa.Table.from_pylist(
                lock_rows({layout.spec_id_of(d) for d in deletes}), schema=base.dataset.schema
            )
            upserts = _dedupe(pa.concat_tables([upserts, lock]))
    return upserts, deletes


def commit_write(
    manifest: Manifest,
    snapshot: Snapshot,
    written: WrittenFiles,
    mode: WriteMode = WriteMode.APPEND,
    replaces: Sequence[str] = (),
    lease: Lease | None = None,
    removals: Removals | None = None,
    info: CommitInfo | Callable[[], CommitInfo] | None = None,
) -> Snapshot:
    """Publish ``written`` in one ``__manifest`` commit. Returns the new snapshot.

    ``mode`` (``WriteMode``): ``APPEND``; ``OVERWRITE`` (the whole namespace
    becomes exactly this write); ``DYNAMIC`` (only the partitions in this write
    are replaced).
    ``replaces`` lists leaves (object ids) removed in the same commit: moving
    partitions from an older spec into the current one is all-or-nothing.

    Contract: when this returns, the write is visible to every reader of the
    returned version and later ones, all at once; when it raises, no reader of
    any version ever sees any of it (staged leaf versions stay unpublished and
    the next writer or ``vacuum`` reclaims them). A concurrent commit to other
    partitions is rebased over; a concurrent append to the same partition is
    rebased over by an append; anything else raises a retryable
    CommitConflictError.

    ``lease`` is the lease the caller took before writing the files
    (``operations.txn.leases``); without one, a lease is taken here, which protects
    the staged versions but not files written before the call. Right before
    publishing, every staged version and file must still exist and the lease
    must hold, else nothing is published (StagedFilesMissingError, LeaseLostError).

    ``removals`` (a row-level change: merge, update, overwrite by predicate) maps
    leaves of ``snapshot`` to the row addresses the same commit removes from
    them. Such a commit read what it changes, so it is never rebased: it rewrites
    every spec's lock row and any conflict raises CommitConflictError, for the
    caller to plan again on the latest version (``driver.replanned``).

    ``info`` is the commit's record (``ns.history()``). A write of rows (no
    ``removals``) gets its counts here (``write_info``): ``info`` then gives only
    the operation and its parameters (default: the mode's).
    """
    mode = WriteMode(mode)  # a WriteMode, or its value ("append", ...); else ValueError
    if removals is None:
        info = write_info(
            snapshot, written, mode, replaces, info if isinstance(info, CommitInfo) else None
        )
    if written.snapshot_version != snapshot.version:
        raise PartitionedNamespaceError("files were written against a different snapshot")
    existing = [leaf_write for leaf_write in written.leaves.values() if not leaf_write.is_new]
    # the rows the writer found (same snapshot version, checked above); any other
    # is looked up, indexed, for the touched rows only: O(touched), not O(namespace)
    planned: dict[str, Leaf] = {
        lw.object_id: lw.published for lw in existing if lw.published is not None
    }
    unknown = [lw.object_id for lw in existing if lw.published is None]
    if unknown:
        by_id = snapshot.leaves_by_id(unknown)
        planned.update((oid, by_id[oid]) for oid in unknown)
    pause_point("files_written")
    new_layout = (
        namespace_layout(snapshot.schema)
        if any(leaf_write.is_new for leaf_write in written.leaves.values())
        else None
    )
    with LeafTransaction(
        manifest,
        snapshot,
        f"{mode.value} commit",
        lease=lease,
        txn=written.txn,
        on_rollback=lambda staged: _discard_unstaged(snapshot, written, staged),
    ) as tx:
        staged = tx.staged
        # leaves the writer created are staged already: record them (no Lance call)
        to_stage = []
        for leaf_write in written.leaves.values():
            if leaf_write.created_version is None:
                to_stage.append(leaf_write)
                continue
            uri = snapshot.leaf_uri(leaf_write.location)
            staged.new_dirs.append(uri)
            staged.leaves[leaf_write.object_id] = StagedLeaf(
                uri,
                None,
                leaf_write.created_version,
                added=leaf_write.created_files,
                # version 1 of a leaf its writer created holds that writer's rows only
                num_rows=leaf_write.rows,
            )
        if staged.leaves:
            pause_point("leaf_staged")
        tx.stage(
            to_stage,
            lambda lw: _stage(
                snapshot, lw, planned.get(lw.object_id), mode, staged, new_layout, removals or {}
            ),
            key=lambda lw: lw.object_id,
        )
        if removals is not None:
            _stage_removals(tx, snapshot, written, removals)
        pause_point("leaves_staged")
        if removals is not None:
            published = tx.publish(
                lambda base: _publish_with_removals(base, tx, written, removals, mode), info=info
            )
            assert published is not None
            return Snapshot.load(manifest, published)

        def rebase(_: CommitConflictError) -> Snapshot:
            base = _rebase(manifest, snapshot, written, mode, planned, staged)
            _check_replaced_unchanged(snapshot, base, replaces)
            return base

        published = tx.publish(
            lambda base: _publish_rows(base, written, staged, mode, replaces),
            on_conflict=rebase,
            info=info,
        )
    assert published is not None
    return Snapshot.load(manifest, published)


def write_info(
    snapshot: Snapshot,
    written: WrittenFiles,
    mode: WriteMode,
    replaces: Sequence[str],
    info: CommitInfo | None = None,
) -> CommitInfo:
    """The record of a write's commit: ``info``'s operation and parameters (default
    ``append``, or ``overwrite`` with its ``mode``), the rows written, and the rows of
    the partitions it replaces (every partition for a full overwrite)."""
    if info is None:
        info = (
            CommitInfo("append")
            if mode is WriteMode.APPEND
            else CommitInfo(
                "overwrite", {"mode": "static" if mode is WriteMode.OVERWRITE else "dynamic"}
            )
        )
    if mode is WriteMode.OVERWRITE:
        removed = rows_in(snapshot, None)
    else:
        replaced = set(replaces)
        if mode is WriteMode.DYNAMIC:
            replaced |= {lw.object_id for lw in written.leaves.values() if not lw.is_new}
        removed = rows_in(snapshot, sorted(replaced))
    return info.with_counts(rows_added=written.rows, rows_removed=removed)


def rows_in(snapshot: Snapshot, object_ids: Sequence[str] | None) -> int:
    """The rows of the named leaves of ``snapshot`` (None: every leaf): the counts
    ``__manifest`` keeps, and the leaves without one counted by opening them."""
    if object_ids is not None and not object_ids:
        return 0
    known, rest = snapshot.row_counts(None if object_ids is None else object_ids_in(object_ids))
    return known + sum(snapshot.open_leaf(leaf).count_rows() for leaf in rest)


def _removed_only(written: WrittenFiles, removals: Removals) -> list[str]:
    """The leaves a row-level change removes rows from and writes nothing into."""
    ids = {leaf_write.object_id for leaf_write in written.leaves.values()}
    return [oid for oid in removals if oid not in ids]


def _stage_removals(
    tx: LeafTransaction, snapshot: Snapshot, written: WrittenFiles, removals: Removals
) -> None:
    """Stage the removal of rows from leaves the change writes nothing into, on the
    published versions the addresses were read from."""
    only = _removed_only(written, removals)
    if not only:
        return
    by_id = snapshot.leaves_by_id(only)

    def change(oid: str) -> LeafChange:
        value = removals[oid]
        return value if isinstance(value, LeafChange) else ChangeRows(value, label=oid)

    tx.stage(
        [by_id[oid] for oid in only],
        lambda leaf: tx.stage_change(leaf, change(leaf.object_id)),
    )


def _publish_with_removals(
    base: Snapshot, tx: LeafTransaction, written: WrittenFiles, removals: Removals, mode: WriteMode
) -> tuple[pa.Table, list[str]]:
    """The rows publishing a row-level change: the written leaves, the leaves it only
    removed rows from, and every spec's lock row (it must not be rebased)."""
    upserts, deletes = _publish_rows(base, written, tx.staged, mode)
    only = [oid for oid in _removed_only(written, removals) if tx.staged.leaves[oid].changed]
    versions = {oid: tx.staged.leaves[oid].version for oid in only}
    extra = republish_rows(
        base.dataset,
        versions,
        lock_rows(base.specs),
        tx.branches(versions),
        tx.staged.num_rows(versions),
    )
    return _dedupe(pa.concat_tables([upserts, extra])), deletes


def _check_replaced_unchanged(planned: Snapshot, latest: Snapshot, replaces: Sequence[str]) -> None:
    """Leaves being replaced must still be exactly what the write read."""
    if not replaces:
        return
    before = planned.leaves_by_id(replaces)
    now = latest.leaves_by_id(replaces)
    for oid in replaces:
        if now.get(oid) != before.get(oid):
            raise CommitConflictError(
                f"partition {oid!r} changed while it was being rewritten; retry"
            )


def _dedupe(table: pa.Table) -> pa.Table:
    seen: set[str] = set()
    keep = []
    for i, oid in enumerate(table.column("object_id").to_pylist()):
        if oid not in seen:
            seen.add(oid)
            keep.append(i)
    return table.take(keep)


def _rebase(
    manifest: Manifest,
    planned: Snapshot,
    written: WrittenFiles,
    mode: WriteMode,
    published: dict[str, Leaf],
    staged: StagedSet,
) -> Snapshot:
    """Reload the manifest after a conflict and make the write apply on top of it.

    - the schema or spec changed, or a partition this write creates was created
      meanwhile: fail;
    - full overwrite: fail if any partition changed (it would silently erase a
      concurrent write);
    - a touched partition was republished: appends re-stage on the new
      published version (blind appends commute); overwrites fail.
    """
    latest = Snapshot.load(manifest, for_write=True)
    if latest.specs != planned.specs or latest.schema != planned.schema:
        raise CommitConflictError("the namespace schema or partition spec changed during the write")
    if mode is WriteMode.OVERWRITE:
        by_id = {leaf.object_id: leaf for leaf in latest.leaves()}
        before = {leaf.object_id: leaf.version_ref() for leaf in planned.leaves()}
        if before != {oid: leaf.version_ref() for oid, leaf in by_id.items()}:
            raise CommitConflictError(
                "partitions changed concurrently during an overwrite of the whole namespace"
            )
    else:  # only the rows this write touches: O(touched)
        by_id = latest.leaves_by_id(
            [
                leaf_write.object_id
                for leaf_write in written.leaves.values()
                if not leaf_write.is_new
            ]
        )
    by_key = _existing_keys(latest, [k for k, lw in written.leaves.items() if lw.is_new])
    for (sid, key), leaf_write in written.leaves.items():
        if leaf_write.is_new:
            if (sid, key) in by_key:
                raise CommitConflictError(
                    f"partition {key} of spec v{sid} was created concurrently by another writer"
                )
            continue
        now = by_id.get(leaf_write.object_id)
        if now is not None and now.version_ref() == published[leaf_write.object_id].version_ref():
            continue
        if now is None or mode is not WriteMode.APPEND:
            raise CommitConflictError(
                f"partition {leaf_write.object_id!r} was changed or removed concurrently by another writer"
            )
        uri = latest.leaf_uri(leaf_write.location)
        staged.leaves[leaf_write.object_id] = _stage_existing(
            uri, leaf_write, now, mode, staged, manifest.storage_options, latest, {}
        )
        published[leaf_write.object_id] = now
    log.info("rebased write onto __manifest version %d", latest.version)
    return latest


def _existing_keys(
    latest: Snapshot, keys: list[tuple[int, tuple[Any, ...]]]
) -> set[tuple[int, tuple[Any, ...]]]:
    """Which of ``keys`` (spec id, partition key) name a partition in ``latest``."""
    by_spec: dict[int, list[tuple[Any, ...]]] = {}
    for sid, key in keys:
        by_spec.setdefault(sid, []).append(key)
    out: set[tuple[int, tuple[Any, ...]]] = set()
    for sid, spec_keys in by_spec.items():
        found = latest.rows_for_keys(sid, spec_keys) if len(spec_keys) <= 2_000 else None
        leaves = found[0] if found is not None else latest.leaves_of_spec(sid)
        out |= {(sid, partition_key(leaf.values)) for leaf in leaves}
    return out


def _discard_unstaged(snapshot: Snapshot, written: WrittenFiles, staged: StagedSet) -> None:
    """After a failed commit: delete the files of leaves staging never reached.

    Staging stops at the first failure, so some leaves may still hold only our
    written files (a new leaf directory, or files under an existing leaf's
    ``data/``). A failed write leaves nothing behind. Files a version of this
    transaction references (a staging attempt that landed and was retried) are
    kept: deleting them would leave that version dangling; ``vacuum`` removes both.
    """
    opts = snapshot.manifest.storage_options
    only: set[str] = set()
    for leaf_write in written.leaves.values():
        if leaf_write.object_id in staged.leaves:
            continue
        if not leaf_write.is_new:
            uri = leaf_write.files_uri(snapshot)
            try:
                if txn_versions(uri, leaf_write.base_version or 0, staged.txn, opts):
                    continue
            except Exception as exc:  # cannot tell: keeping files is the safe side
                log.warning("keeping the written files of %s: %s", leaf_write.object_id, exc)
                continue
        only.add(leaf_write.object_id)
    abort_write(snapshot, written, only=only)
