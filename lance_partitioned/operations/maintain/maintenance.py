"""Maintenance that is safe while readers and writers run: compact, cleanup, vacuum.

Safety rests on two rules (``docs/TRANSACTIONS.md`` §5):

- **Retention.** A ``__manifest`` version is kept while it was current within
  the retention period (its successor is newer than the cutoff) or is tagged;
  every leaf version such a manifest version references is kept. So a reader
  pinned to a snapshot can finish within the retention period.
- **Grace.** Nothing younger than the cutoff is removed when no manifest
  version references it (default one day for vacuum, seven for cleanup).
- **Leases.** Nothing created after the start of a transaction still in
  flight is removed, whatever the cutoff (``operations.txn.leases``): its files and
  staged versions are unreferenced until it publishes.

Compaction is an ordinary transaction: per-leaf Lance ``Rewrite`` versions
staged on the published content, published by one ``__manifest`` commit, so
readers never see a half-compacted namespace and concurrent writers rebase
over it (or it skips the partitions they changed).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import lance
import pyarrow as pa

from lance_partitioned.catalog import history, manifest_index, storage
from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.layout import join_uri
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.retry import is_commit_conflict
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import (
    CommitConflictError,
    PartitionedNamespaceError,
    RetentionError,
    positive_int,
)
from lance_partitioned.operations.leaf.leaf_changes import CompactFiles
from lance_partitioned.operations.progress import NO_PROGRESS, Progress
from lance_partitioned.operations.txn import leases
from lance_partitioned.operations.txn.driver import (
    LeafTransaction,
    LeafWork,
    StageMany,
    new_txn_id,
)
from lance_partitioned.operations.txn.failpoints import pause_point
from lance_partitioned.operations.txn.staging import (
    StagedLeaf,
    foreign_versions,
    fragment_signature,
    published_version,
    restore_published,
    stage_leaf,
)

log = logging.getLogger(__name__)

# Our leaf directories: <8 hex>_v<N>$...$dataset. Anything else under the root
# (foreign tables, user files) is never touched.
LEAF_DIR = re.compile(r"^[0-9a-f]{8}_v[0-9]+\$.*\$dataset$")
# _indices/: segments of an index build that failed before its commit
SWEPT_PREFIXES = ("data/", "_deletions/", "_transactions/", "_indices/")
# On local disk Lance writes every file to a ``.tmp...`` file in its directory and renames
# it; a process killed in between (a Spark task's worker) leaves that file behind. Lance's
# listing shows it: the prefixes above cover data, deletions, transactions and indices, and
# COMMIT_TEMP_FILE covers ``_versions/``.
COMMIT_TEMP_FILE = re.compile(r"^_versions/\.tmp[^/]*$")
# Manifests go through the object store layer instead, which on local disk stages each file
# it puts as ``<name>#<n>``. Lance's listing skips those, so vacuum lists them itself, in
# every directory it sweeps.
STAGED_UPLOAD = re.compile(
    f"^({'|'.join(map(re.escape, (*SWEPT_PREFIXES, '_versions/')))})(.+/)?[^/]+#[0-9]+$"
)


@dataclass
class MaintenanceReport:
    """What a maintenance call did."""

    manifest_versions_removed: int = 0
    leaf_versions_removed: int = 0
    files_removed: int = 0
    dirs_removed: int = 0
    bytes_removed: int = 0
    leaves_healed: int = 0
    leaves_compacted: int = 0
    fragments_rewritten: int = 0
    manifest_compacted: bool = False
    live_leases: int = 0  # transactions in flight whose files and versions were kept
    version: int | None = None  # __manifest version after the call
    skipped: list[str] = field(default_factory=list)  # partitions left for next time

    def add(self, part: MaintenanceReport) -> None:
        """Count ``part`` (one leaf's sweep) in this report."""
        for name in ("leaf_versions_removed", "files_removed", "bytes_removed", "leaves_healed"):
            setattr(self, name, getattr(self, name) + getattr(part, name))
        self.skipped.extend(part.skipped)


def _now() -> dt.datetime:
    return dt.datetime.now()  # Lance version timestamps are naive local time


def _local(moment: dt.datetime) -> dt.datetime:
    """``moment`` as this process's naive local time, what Lance's version timestamps are
    (a naive ``moment`` is taken to be local already)."""
    return moment.astimezone().replace(tzinfo=None)


def check_retention(older_than: Any, what: str) -> dt.timedelta:
    """``older_than`` if it is a ``datetime.timedelta`` of zero or more, else RetentionError.

    A negative retention puts the cutoff in the future, so it would remove
    versions that are current right now; a number has no unit. Either is a
    mistake, refused before anything is read or removed.
    """
    if not isinstance(older_than, dt.timedelta):
        raise RetentionError(
            f"{what}(older_than=...) needs a datetime.timedelta, got "
            f"{type(older_than).__name__} {older_than!r}; e.g. older_than=timedelta(days=7)"
        )
    if older_than < dt.timedelta(0):
        raise RetentionError(
            f"{what}(older_than={older_than!r}) is negative: the cutoff would lie in the future "
            "and remove versions that are current now; nothing was removed. "
            "Use timedelta(0) to keep only what is current"
        )
    return older_than


def _honour_leases(
    manifest: Manifest, cutoff: dt.datetime, report: MaintenanceReport
) -> tuple[dt.datetime, set[int]]:
    """The cutoff moved back to the start of the oldest live transaction, if that is earlier,
    and the ``__manifest`` versions live leases need kept (a restore's source).

    Files and versions of a transaction in flight are unreferenced until it
    publishes; its lease (``operations.txn.leases``) began before it made any of
    them, so nothing newer than that start may go, whatever ``older_than`` says.
    The cutoff must be computed before the leases are read: a transaction that
    starts after that makes only things newer than the cutoff.
    """
    held = leases.live(manifest)
    since, count = leases.protected_since(manifest, held)
    report.live_leases = count
    keep = leases.kept_versions(held)
    if since is not None and since < cutoff:
        log.info("%d transaction(s) in flight: keeping everything newer than %s", count, since)
        return since, keep
    return cutoff, keep


# -- what retained manifest versions reference ---------------------------------------


def _read_refs(mds: lance.LanceDataset) -> list[tuple[str, int | None, str | None, str | None]]:
    names = mds.schema.names
    cols = [c for c in ("location", "read_version", "read_branch", "read_tag") if c in names]
    data = mds.to_table(columns=cols, filter="object_type = 'table'").to_pydict()
    n = len(data["location"])
    get = lambda c: data.get(c, [None] * n)  # noqa: E731 - columns a foreign writer dropped
    return list(
        zip(get("location"), get("read_version"), get("read_branch"), get("read_tag"), strict=True)
    )


def leaf_references(manifest: Manifest) -> tuple[dict[str, set[int]], dict[str, int | None]]:
    """Leaf versions referenced by any existing ``__manifest`` version, and the current ones.

    Returns ``(location -> versions, location -> current read_version)``; a
    tag-pinned row references its tag's version; a NULL row references the
    leaf's latest version, which nothing ever removes.
    """
    latest = manifest.dataset()
    refs: dict[str, set[int]] = {}
    tags_of: dict[str, dict[str, int]] = {}
    for v in latest.versions():
        mds = latest if v["version"] == latest.version else manifest.dataset(v["version"])
        for location, version, branch, tag in _read_refs(mds):
            if location is None:
                continue
            seen = refs.setdefault(location, set())
            if tag is not None and branch is None:
                if location not in tags_of:
                    uri = join_uri(manifest.root, location)
                    try:
                        tags_of[location] = {
                            n: i["version"]
                            for n, i in lance.dataset(uri, storage_options=manifest.storage_options)
                            .tags.list()
                            .items()
                        }
                    except Exception:
                        tags_of[location] = {}
                if tag in tags_of[location]:
                    seen.add(tags_of[location][tag])
            elif version is not None and branch is None:
                seen.add(version)
    current = {
        loc: ver
        for loc, ver, br, tag in _read_refs(latest)
        if loc is not None and br is None and tag is None
    }
    return refs, current


# -- leaves ----------------------------------------------------------------------


def _heal(uri: str, current: int, cutoff: dt.datetime, opts: dict[str, str] | None) -> bool:
    """If the leaf's latest version is an old unpublished one of ours, restore the published one.

    This makes the unpublished versions non-latest, so they can be removed.
    Young ones may belong to a transaction in flight and are left alone.
    """
    ds = lance.dataset(uri, storage_options=opts)
    if ds.version == current:
        return False
    if ds.versions()[-1]["timestamp"] >= cutoff:
        return False
    pinned = lance.dataset(uri, version=current, storage_options=opts)
    if fragment_signature(pinned) == fragment_signature(ds):
        return False
    if foreign_versions(ds, current):
        log.warning("leaf %s has foreign versions above its published one; not healing", uri)
        return False
    restore_published(ds, current, "vacuum-" + new_txn_id(), opts)
    log.info("leaf %s: restored published version %d over unpublished versions", uri, current)
    return True


def _remove_leaf_versions(
    uri: str,
    keep: set[int],
    cutoff: dt.datetime,
    opts: dict[str, str] | None,
    report: MaintenanceReport,
) -> None:
    ds = lance.dataset(uri, storage_options=opts)
    tagged = {info["version"] for info in ds.tags.list().values()}
    remove = [
        v["version"]
        for v in ds.versions()
        if v["version"] != ds.version
        and v["version"] not in keep
        and v["version"] not in tagged
        and v["timestamp"] < cutoff
    ]
    if not remove:
        return
    stats = ds.cleanup_old_versions(versions=remove, error_if_tagged_old_versions=False)
    report.leaf_versions_removed += stats.old_versions
    report.bytes_removed += stats.bytes_removed
    report.files_removed += stats.data_files_removed + stats.deletion_files_removed


@dataclass
class LeafSweep:
    """One leaf's part of a cleanup or vacuum, picklable so that any process can do it
    (``sweep_leaf``): the versions to keep, the published one, the cutoff."""

    location: str
    uri: str
    keep: set[int]
    current: int | None  # the read_version the latest __manifest version publishes
    # an aware moment: a process in another time zone than the caller's (a Spark executor)
    # reads it in its own before comparing Lance's naive local timestamps with it
    cutoff: dt.datetime
    heal: bool


# Runs ``sweep_leaf`` over the sweeps, returning each one's report: here (the default,
# one after another) or on Spark's executors (``spark.maintenance``).
SweepMany = Callable[[Sequence[LeafSweep], "dict[str, str] | None"], Iterable[MaintenanceReport]]


def sweep_leaf(sweep: LeafSweep, opts: dict[str, str] | None) -> MaintenanceReport:
    """Heal the leaf (vacuum), drop its unreferenced old versions and (vacuum) the files
    no version references; best effort: a leaf that fails is reported skipped and the
    next run retries it."""
    report = MaintenanceReport()
    cutoff = _local(sweep.cutoff)
    try:
        current = sweep.current
        if sweep.heal and current is not None and _heal(sweep.uri, current, cutoff, opts):
            report.leaves_healed += 1
        _remove_leaf_versions(sweep.uri, sweep.keep, cutoff, opts, report)
        if sweep.heal:
            _sweep_orphan_files(sweep.uri, cutoff, opts, report)
    except Exception as exc:
        if not is_commit_conflict(exc):
            log.warning("maintenance skipped leaf %s: %s", sweep.location, exc)
        report.skipped.append(sweep.location)
    return report


def _sweep_leaves(
    manifest: Manifest,
    cutoff: dt.datetime,
    heal: bool,
    report: MaintenanceReport,
    progress: Progress = NO_PROGRESS,
    sweep_many: SweepMany | None = None,
) -> set[str]:
    """Heal (optionally) and drop unreferenced old versions of every referenced leaf,
    each by ``sweep_leaf``: in this process, or where ``sweep_many`` runs them."""
    refs, current = leaf_references(manifest)
    moment = cutoff.astimezone()  # the cutoff is this process's naive local time
    sweeps = [
        LeafSweep(loc, join_uri(manifest.root, loc), keep, current.get(loc), moment, heal)
        for loc, keep in sorted(refs.items())
    ]
    progress.start(len(sweeps))

    def here(
        items: Sequence[LeafSweep], opts: dict[str, str] | None
    ) -> Iterator[MaintenanceReport]:
        for sweep in items:
            progress.advance()
            yield sweep_leaf(sweep, opts)

    for part in (sweep_many or here)(sweeps, manifest.storage_options):
        report.add(part)
    return set(refs)


def _sweep_orphan_files(
    uri: str, cutoff: dt.datetime, opts: dict[str, str] | None, report: MaintenanceReport
) -> None:
    """Delete data, deletion, transaction and index files no version of the dataset
    references, and what a killed writer left in temporary files: Lance's in ``_versions/``
    (``COMMIT_TEMP_FILE``) and, on local disk, staged uploads (``STAGED_UPLOAD``)."""
    st = storage.resolve(uri, opts)
    ds = lance.dataset(uri, storage_options=opts)
    tracked = set(ds.tracked_files().read_all().column("path").to_pylist())
    cutoff_utc = cutoff.astimezone(dt.timezone.utc)
    for f in ds.all_files().read_all().to_pylist():
        path = f["path"]
        if path in tracked or not (path.startswith(SWEPT_PREFIXES) or COMMIT_TEMP_FILE.match(path)):
            continue
        if f["last_modified"] >= cutoff_utc:
            continue
        if not st.delete(st.join(uri, path)):
            continue
        report.files_removed += 1
        report.bytes_removed += f["size_bytes"]
    if st.is_local:  # staged uploads exist there only, and Lance lists none of them
        for entry in st.list(uri, recursive=True):
            if not STAGED_UPLOAD.match(st.relative(entry.uri, uri)):
                continue
            if entry.mtime is None or entry.mtime >= cutoff_utc:
                continue  # a writer may be filling it right now
            if st.delete(entry.uri):
                report.files_removed += 1
                report.bytes_removed += entry.size


def _sweep_orphan_dirs(
    manifest: Manifest, referenced: set[str], cutoff: dt.datetime, report: MaintenanceReport
) -> None:
    """Remove leaf directories (our naming pattern only) that no manifest version references
    and whose newest file is older than the cutoff."""
    st = manifest.storage
    cutoff_utc = cutoff.astimezone(dt.timezone.utc)
    for entry in st.list(manifest.root):
        name = entry.name
        if name in referenced or not LEAF_DIR.match(name) or not entry.is_dir:
            continue
        files = st.list(entry.uri, recursive=True)
        times = [f.mtime for f in files if f.mtime is not None]
        if entry.mtime is not None:
            times.append(entry.mtime)
        if not times or max(times) >= cutoff_utc:
            continue  # a writer may be filling it right now
        _count, size = st.delete_tree(entry.uri)
        report.dirs_removed += 1
        report.bytes_removed += size
        log.info("vacuum removed orphan partition directory %s", name)


# -- public entry points ------------------------------------------------------------


def cleanup(
    manifest: Manifest,
    older_than: dt.timedelta = dt.timedelta(days=7),
    progress: Progress = NO_PROGRESS,
    sweep_many: SweepMany | None = None,
) -> MaintenanceReport:
    """Remove ``__manifest`` versions superseded before ``now - older_than`` (tags are kept),
    then every leaf version that no remaining manifest version references and that is older
    than the cutoff.

    Contract: a snapshot (manifest version) that was current at any time within
    the retention period, or is tagged, or a restore in flight needs, stays fully
    readable. ``sweep_many``: where the leaves are swept (default here, one by one).
    """
    older_than = check_retention(older_than, "cleanup")
    # announced before the leases are read: a restore that begins later waits for it
    with leases.hold(manifest, "cleanup", removes_versions=True):
        return _cleanup(manifest, older_than, progress, sweep_many)


def _cleanup(
    manifest: Manifest,
    older_than: dt.timedelta,
    progress: Progress,
    sweep_many: SweepMany | None = None,
) -> MaintenanceReport:
    report = MaintenanceReport()
    cutoff, restoring = _honour_leases(manifest, _now() - older_than, report)
    ds = manifest.dataset()
    versions = ds.versions()
    kept = {info["version"] for info in ds.tags.list().values()} | restoring
    remove = [
        v["version"]
        for v, nxt in zip(versions, versions[1:], strict=False)
        if nxt["timestamp"] < cutoff and v["version"] not in kept
    ]
    if remove:
        stats = ds.cleanup_old_versions(versions=remove, error_if_tagged_old_versions=False)
        report.manifest_versions_removed = stats.old_versions
        report.bytes_removed += stats.bytes_removed
    _sweep_leaves(manifest, cutoff, False, report, progress, sweep_many)
    # so that reading a removed version can say which cleanup removed it, and why
    history.record_cleanup(manifest, older_than, cutoff, remove, report.leaf_versions_removed)
    report.version = manifest.dataset().version
    return report


def vacuum(
    manifest: Manifest,
    older_than: dt.timedelta = dt.timedelta(days=1),
    progress: Progress = NO_PROGRESS,
    sweep_many: SweepMany | None = None,
) -> MaintenanceReport:
    """Reclaim what crashed or failed writers left behind, if older than ``older_than``.

    - leaf directories that no existing ``__manifest`` version references;
    - leaf versions that no manifest version references (unpublished staged
      versions), after restoring the published content over them;
    - data, deletion and transaction files that no version references, in
      leaves and in ``__manifest``.
    Never removes a manifest version (that is ``cleanup``). ``sweep_many``: where the
    leaves are swept (default here, one by one); the root and ``__manifest`` are swept here.
    """
    older_than = check_retention(older_than, "vacuum")
    report = MaintenanceReport()
    cutoff, _restoring = _honour_leases(manifest, _now() - older_than, report)
    referenced = _sweep_leaves(manifest, cutoff, True, report, progress, sweep_many)
    _sweep_orphan_dirs(manifest, referenced, cutoff, report)
    _sweep_orphan_files(manifest.uri, cutoff, manifest.storage_options, report)
    report.version = manifest.dataset().version
    return report


def compact(
    manifest: Manifest,
    target_rows_per_fragment: int = 1 << 20,
    compact_manifest: bool = True,
    progress: Progress = NO_PROGRESS,
    stage_many: StageMany | None = None,
) -> MaintenanceReport:
    """Rewrite small fragments of every leaf (and of ``__manifest``) in one transaction.

    Partitions a concurrent writer changes meanwhile are skipped (listed in
    ``report.skipped``); the rest are published together. Holds a lease
    (``operations.txn.leases``) while it runs. ``target_rows_per_fragment`` must be
    a positive integer (InvalidArgumentError, before the lease). A conflicting
    ``__manifest`` commit is retried under ``catalog.retry.COMMIT_RETRY``.
    ``stage_many``: where the leaves are rewritten (``LeafTransaction.stage_works``;
    default this process's threads, ``spark.maintenance`` Spark's tasks).
    """
    target_rows_per_fragment = positive_int("target_rows_per_fragment", target_rows_per_fragment)
    with leases.hold(manifest, "compaction") as lease:
        report = MaintenanceReport()
        _compact(manifest, target_rows_per_fragment, lease, report, progress, stage_many)
        if compact_manifest:
            report.manifest_compacted = _compact_manifest(manifest)
        report.version = manifest.dataset().version
    return report


def stage_compaction(work: LeafWork, txn: str, opts: dict[str, str] | None) -> StagedLeaf | None:
    """Compaction's ``StageOne``: rewrite the leaf's small fragments on its published main
    content. Best effort per leaf: a leaf that cannot be staged now (a conflict, foreign
    versions, a branch pin) is left alone, with the reason in ``work.skipped``."""
    try:
        published = published_version(work.uri, work.leaf, opts)
        return stage_leaf(work.uri, published, work.change, txn, opts)
    except PartitionedNamespaceError as exc:
        work.skipped = str(exc)
        log.info("compaction skipped %s: %s", work.key, exc)
        return None


def _compact(
    manifest: Manifest,
    target_rows_per_fragment: int,
    lease: leases.Lease | None,
    report: MaintenanceReport,
    progress: Progress = NO_PROGRESS,
    stage_many: StageMany | None = None,
) -> None:
    snapshot = Snapshot.load(manifest, for_write=True)
    changes: dict[str, CompactFiles] = {}
    planned = {leaf.object_id: leaf for leaf in snapshot.leaves()}
    published = None
    progress.start(len(planned))
    with LeafTransaction(manifest, snapshot, "compaction", lease=lease) as tx:

        def rows(base: Snapshot) -> tuple[pa.Table | None, tuple[()]] | None:
            return tx.republished(base) if tx.versions() else None  # None: all skipped

        def skip_changed(_: Exception) -> Snapshot:
            """A concurrent writer changed some leaves: leave those out and try again."""
            base = Snapshot.load(manifest, for_write=True)
            now = {leaf.object_id: leaf.version_ref() for leaf in base.leaves()}
            moved = [oid for oid in tx.versions() if now.get(oid) != planned[oid].version_ref()]
            report.skipped.extend(moved)
            tx.rollback(moved)
            return base

        def done(work: LeafWork, _staged: StagedLeaf | None) -> None:
            changes[work.key] = work.change  # from a Spark task: a copy, with its counters
            if work.skipped is not None:
                report.skipped.append(work.key)
            progress.advance()

        works = [
            tx.work(oid, leaf, CompactFiles(target_rows_per_fragment))
            for oid, leaf in planned.items()
        ]
        tx.stage_works(works, stage_compaction, done, stage_many)
        pause_point("leaves_staged")
        try:
            published = tx.publish(
                rows,
                on_conflict=skip_changed,
                info=CommitInfo(
                    "compact",
                    {"target_rows_per_fragment": target_rows_per_fragment},
                    rows_added=0,
                    rows_removed=0,
                ),
            )
        except CommitConflictError as exc:  # every attempt lost: publish nothing this time
            log.warning("compaction published nothing this time: %s", exc)
            skip_changed(exc)
        if published is None and tx.versions():
            tx.rollback()
    if published is not None:
        compacted = set(tx.versions())
        report.leaves_compacted = len(compacted)
        report.fragments_rewritten = sum(changes[oid].rewritten for oid in compacted)


def _compact_manifest(manifest: Manifest) -> bool:
    """Rewrite ``__manifest``'s small fragments (each commit adds one) and bring its
    indexes up to date (``catalog.manifest_index.refresh``); a concurrent commit wins."""
    try:
        return manifest_index.refresh(manifest.dataset(), manifest.storage_options)
    except Exception as exc:
        if is_commit_conflict(exc):
            log.info("__manifest compaction lost to a concurrent commit; try again later")
            return False
        raise


__all__ = [
    "LeafSweep",
    "MaintenanceReport",
    "SweepMany",
    "cleanup",
    "compact",
    "leaf_references",
    "stage_compaction",
    "sweep_leaf",
    "vacuum",
]
