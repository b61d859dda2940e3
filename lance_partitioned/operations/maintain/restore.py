"""Restoring a namespace to an earlier ``__manifest`` version: ``ns.restore(version_or_tag)``.

A restore commits one new ``__manifest`` version whose content is the old
version's, byte for byte: Lance's own ``Restore`` operation copies that
version's manifest (rows, so every partition at its old ``read_version`` /
``read_branch`` / ``read_tag``, and no row for partitions created since; the
``__manifest`` schema; table metadata, so the namespace schema and the partition
specs). No leaf is touched, and the versions in between stay as they were
(``docs/TRANSACTIONS.md`` §8, "Restore").

Before committing, every leaf version the old version reads must still exist
(``catalog.leaf_open.missing_pinned``), else ``RestoreError`` and nothing
changes. The restore holds a lease naming the old version
(``operations.txn.leases``: ``keeps``), so a cleanup that begins meanwhile keeps
it and every leaf version it reads; a cleanup already running is waited for
(retried under ``catalog.retry.COMMIT_RETRY``).

The one thing not taken back is the field-id high-water mark: ids are never
reused (seed 000), so when columns were added since the old version, a second
metadata commit keeps the mark where it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import lance

from lance_partitioned.catalog import history, leaf_open, repair
from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.retry import COMMIT_RETRY
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import CommitConflictError, LeaseLostError, RestoreError
from lance_partitioned.format.schema import LAST_FIELD_ID_KEY, recorded_last_field_id
from lance_partitioned.operations.txn import leases
from lance_partitioned.operations.txn.driver import new_txn_id
from lance_partitioned.operations.txn.staging import TXN_PROPERTY

# A Lance transaction property of the restore's commit beside its record
# (``catalog.commit_info``): the version it restored, as releases before the
# record wrote it
RESTORED_FROM_PROPERTY = "lp.restored_from"


@dataclass(frozen=True)
class RestoreResult:
    """What ``ns.restore`` did.

    ``version``: the ``__manifest`` version now current (the restore's commit;
    the current version itself when it already was the one asked for).
    ``restored_from``: the version whose content it holds. ``partitions_changed``:
    partitions that now publish something else than before the restore (moved
    back to their old version, unpublished because created since, or published
    again because removed since); 0 for a restore that committed nothing.
    """

    version: int
    restored_from: int
    partitions_changed: int


def restore(manifest: Manifest, target: int | str) -> RestoreResult:
    """Make the content of ``__manifest`` version or tag ``target`` current again.

    Raises VersionNotFoundError (no such version or tag, or cleaned up),
    RestoreError (a leaf version it reads is gone, or it is damaged),
    CorruptNamespaceError (its files or the latest version's are damaged),
    CommitConflictError (a cleanup kept running; retryable); nothing changes then.
    """
    target = history.check_version_arg(target)
    if target is None:
        raise TypeError("restore needs a __manifest version number or a tag name, got None")
    source = manifest.open_checked(target).version  # VersionNotFoundError, naming what exists
    with leases.hold(manifest, "restore", keeps=(source,)) as lease:
        for attempt in COMMIT_RETRY.tries():
            try:
                return _restore_once(manifest, source, lease)
            except LeaseLostError:
                raise
            except CommitConflictError:
                if COMMIT_RETRY.is_last(attempt):
                    raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _restore_once(manifest: Manifest, source: int, lease: leases.Lease | None) -> RestoreResult:
    latest = Snapshot.load(manifest, for_write=True)
    if latest.version == source:  # already current: no new version (as Iceberg's rollback)
        return RestoreResult(latest.version, source, 0)
    running = leases.cleanup_running(manifest, lease)
    if running is not None:
        raise CommitConflictError(
            f"a cleanup of {manifest.root!r} is running (pid {running.pid} on {running.host}); "
            f"it may remove __manifest version {source} or what it reads, so nothing was "
            "restored; retry when it has finished"
        )
    old = _load_source(manifest, source)
    _check_leaves(manifest, old)
    changed = _changed_partitions(latest, old)
    if lease is not None:
        lease.check()  # renewed last: no maintenance claims it before the commit
    committed = manifest.commit_operation(
        latest.dataset,
        lance.LanceOperation.Restore(source),
        {TXN_PROPERTY: new_txn_id(), RESTORED_FROM_PROPERTY: str(source)},
        what="the restore",
        info=CommitInfo("restore", {"version": source}, partitions=changed),
    )
    return RestoreResult(_keep_field_id_mark(manifest, latest, old, committed), source, changed)


def _load_source(manifest: Manifest, source: int) -> Snapshot:
    """Version ``source``, checked as a base to commit: its files intact, its feature flags
    known, and none of our columns dropped by a foreign writer (that would be restored too)."""
    ds = manifest.open_checked(source, for_write=True)
    old = Snapshot.load(manifest, source)
    if old.damage:
        raise RestoreError(
            f"cannot restore {manifest.root!r} to __manifest version {source}: "
            f"{repair.describe_damage(ds, old.damage)}, which restoring it would publish "
            "again; nothing was changed"
        )
    return old


def _check_leaves(manifest: Manifest, old: Snapshot) -> None:
    """RestoreError unless every leaf version ``old`` reads still exists."""
    pairs = [(old.leaf_uri(leaf.location), leaf) for leaf in old.leaves()]
    missing = leaf_open.missing_pinned(pairs, manifest.storage_options)
    if not missing:
        return
    _uri, leaf = missing[0]
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    raise RestoreError(
        f"cannot restore {manifest.root!r} to __manifest version {old.version}: "
        f"{len(missing)} partition table version(s) it reads no longer exist, e.g. "
        f"{leaf.location!r} version {leaf.version_ref()!r}{more} "
        f"{history.cleanup_note(manifest)}; nothing was changed. "
        "Restore a newer version, or a tagged one (cleanup keeps tags whole)"
    )


def _changed_partitions(latest: Snapshot, old: Snapshot) -> int:
    """How many partitions publish something else in ``old`` than in ``latest``."""
    before = {leaf.object_id: (leaf.location, leaf.version_ref()) for leaf in latest.leaves()}
    after = {leaf.object_id: (leaf.location, leaf.version_ref()) for leaf in old.leaves()}
    return sum(before.get(oid) != after.get(oid) for oid in before.keys() | after.keys())


def _keep_field_id_mark(
    manifest: Manifest, latest: Snapshot, old: Snapshot, committed: lance.LanceDataset
) -> int:
    """The version after the restore, once the field-id high-water mark is where it was.

    Field ids are never reused (seed 000), so a column added since ``old`` keeps
    its id retired. The restore is ordered after every commit before it, also one
    that slipped in after ``latest`` was read (Lance's ``Restore`` applies over
    it), so that one's mark counts too.
    """
    mark = latest.schema.last_field_id
    if committed.version != latest.version + 1:
        try:
            before = recorded_last_field_id(manifest.dataset(committed.version - 1).metadata)
        except Exception:  # cleaned up meanwhile: ``latest``'s mark is what is known
            before = None
        mark = max(mark, -1 if before is None else before)
    if old.schema.last_field_id >= mark:
        return committed.version
    manifest.set_metadata(
        {LAST_FIELD_ID_KEY: str(mark)}, CommitInfo("restore", {"version": old.version}, 0, 0, 0)
    )
    return manifest.dataset().version
