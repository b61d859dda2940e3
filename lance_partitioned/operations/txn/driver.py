"""The one transaction driver: how every namespace transaction over leaves commits.

A namespace transaction (``docs/TRANSACTIONS.md``) stages every leaf it
touches (``operations.txn.staging``) and publishes them all with one
compare-and-swap commit on ``__manifest``. ``LeafTransaction`` is the only
code that spells that protocol; writes, deletes, compaction, realignment,
alignment and index builds each supply only what differs (which leaves, the
change per leaf, the rows to publish, how to rebase after a conflict):

1. a **lease** (``operations.txn.leases``) for the whole transaction, so that
   ``vacuum`` keeps what it stages;
2. **staging** of every leaf, in parallel (``stage``/``stage_change``), or in other
   processes that hand the staged versions back (``stage_works`` with a
   ``StageMany``: Spark tasks, ``spark.maintenance``);
3. the **check before publishing**: every staged version and file still
   exists and the lease holds (``StagedSet.before_publish``);
4. the **compare-and-swap commit** on ``__manifest`` (``publish``); on a
   conflict the operation rebases (new rows on the latest version) or fails;
5. on any failure, the **landed check** (``StagedSet.landed``: an error after
   the commit's write succeeded must not undo a published transaction) and
   **rollback** of what was staged and not published.

This module also holds what every kind of transaction shares around that: a
fresh transaction id, the pause points tests stop crashed writers at, and
staging many leaves in parallel.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lance_partitioned.catalog import storage
from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.leaf_open import resolve_leaf
from lance_partitioned.catalog.manifest import Manifest, republish_rows
from lance_partitioned.catalog.retry import COMMIT_RETRY
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import CommitConflictError
from lance_partitioned.operations.leaf.leaf_changes import LeafChange
from lance_partitioned.operations.txn import leases
from lance_partitioned.operations.txn.failpoints import pause_point
from lance_partitioned.operations.txn.parallel import for_each
from lance_partitioned.operations.txn.staged_check import StagedLeaf, check_staged, lacking
from lance_partitioned.operations.txn.staging import stage_leaf, unstage_leaf

log = logging.getLogger(__name__)


def new_txn_id() -> str:
    """A fresh transaction id (32 lowercase hex characters)."""
    return uuid.uuid4().hex


STAGE_THREADS = 8  # leaves staged at once: Lance releases the GIL while it commits


def run_parallel(
    items: Sequence[Any], fn: Callable[[Any], Any], on_done: Callable[[Any, Any], None]
) -> None:
    """Apply ``fn`` to every item on ``STAGE_THREADS`` threads.

    ``on_done(item, result)`` records each success as it happens (one at a
    time), so that a failure elsewhere can still roll back what succeeded.
    After the first failure no further item starts; those already running
    finish, then the first failure is raised (``parallel.for_each``). The
    failpoint ``leaf_staged`` is passed once the first item is recorded (the
    other threads go on until they need to record theirs).
    """
    if not items:
        return
    first = [True]

    def done(item: Any, result: Any) -> None:
        on_done(item, result)
        if first[0]:
            first[0] = False
            pause_point("leaf_staged")

    for_each(items, fn, min(STAGE_THREADS, len(items)), done)


# Finds the staged leaves lacking files, as ``staged_check.lacking`` does, somewhere
# else (Spark tasks, ``spark.maintenance``): given the staged leaves and the storage
# options, those ``check_staged`` must look at.
CheckMany = Callable[[Sequence[StagedLeaf], "dict[str, str] | None"], Sequence[StagedLeaf]]


@dataclass
class StagedSet:
    """Every leaf a transaction staged, by object id; what rollback undoes.

    ``lease`` (``operations.txn.leases``) is the transaction's lease, checked with
    the staged files right before publishing; ``check_many`` finds the staged leaves
    lacking files (``staged_check.lacking``'s contract), where the staging ran (None:
    on this process, ``lacking`` itself).
    """

    txn: str
    storage_options: dict[str, str] | None
    leaves: dict[str, StagedLeaf] = field(default_factory=dict)
    new_dirs: list[str] = field(default_factory=list)
    lease: Any = None
    check_many: CheckMany | None = None

    def num_rows(self, object_ids: Iterable[str]) -> dict[str, int | None]:
        """The row count of each named leaf's staged version (None when unknown)."""
        return {oid: self.leaves[oid].num_rows for oid in object_ids}

    def before_publish(self) -> None:
        """Call right before the ``__manifest`` commit: everything it will publish must exist.

        Checks every staged version and the files it adds (``check_many``, then
        ``check_staged`` of each leaf it found lacking), then renews the lease: the
        renewal comes last, so no maintenance run can claim the lease between this
        check and the commit. Raises StagedFilesMissingError or LeaseLostError (both
        retryable; nothing published).
        """
        find = self.check_many or lacking
        for leaf in find(list(self.leaves.values()), self.storage_options):
            check_staged(leaf, self.storage_options)  # raises, naming what is missing
        if self.lease is not None:
            self.lease.check()

    def landed(self, manifest: Any, planned_version: int) -> bool:
        """Whether the latest ``__manifest`` publishes any staged version (a commit that raised late).

        When in doubt, say yes: keeping unpublished files is harmless (vacuum
        reclaims them), deleting a published leaf is not.
        """
        from lance_partitioned.format.filters.render import render_literal

        try:
            latest = manifest.dataset()
            changed = {oid: s.version for oid, s in self.leaves.items() if s.changed}
            if latest.version == planned_version or not changed:
                return False
            rows = latest.to_table(
                columns=["object_id", "read_version"],
                filter=f"object_id IN ({', '.join(render_literal(o) for o in changed)})",
            ).to_pydict()
            now = dict(zip(rows["object_id"], rows["read_version"], strict=True))
            return any(now.get(oid) == v for oid, v in changed.items())
        except Exception as exc:
            log.warning(
                "cannot tell whether the transaction was published (%s); keeping files", exc
            )
            return True

    def rollback(self) -> None:
        """Undo staging of a transaction that will not publish (best effort, idempotent).

        The leaves are restored on ``STAGE_THREADS`` threads, as they were staged: a
        transaction over a million partitions takes as long to undo as to stage."""
        pause_point("rolling_back")
        for_each(
            list(self.leaves.values()),
            lambda staged: unstage_leaf(staged, self.txn, self.storage_options),
            STAGE_THREADS,
        )
        for uri in self.new_dirs:
            remove_dir(uri, self.storage_options)


def remove_dir(uri: str, storage_options: dict[str, str] | None) -> None:
    """Remove a directory tree, on any store (best effort: vacuum reclaims what is left)."""
    try:
        storage.resolve(uri, storage_options).delete_tree(uri)
    except Exception as exc:
        log.warning("could not remove %s: %s", uri, exc)


def remove_file(uri: str, name: str, storage_options: dict[str, str] | None) -> None:
    """Remove the data file ``name`` of the dataset at ``uri`` (best effort)."""
    try:
        storage.resolve(uri, storage_options).delete(storage.Storage.join(uri, "data", name))
    except Exception as exc:
        log.warning("could not remove %s/data/%s: %s", uri, name, exc)


Rows = tuple["pa.Table | None", Sequence[str]]
Base = Any  # a Snapshot, or the __manifest dataset to commit on


@dataclass
class LeafWork:
    """One leaf's part of a transaction, picklable so that any process can stage it.

    ``uri`` is the leaf's directory (``Snapshot.leaf_uri``), ``change`` what to stage
    on its published content. A ``StageOne`` function stages it and may record why it
    left the leaf alone (``skipped``); the work comes back with the change's counters.
    """

    key: str
    uri: str
    leaf: Leaf
    change: LeafChange
    skipped: str | None = None


# Stages one leaf's work under a transaction id with the storage options; module-level
# (importable by name) so that it travels to Spark executors.
StageOne = Callable[[LeafWork, str, "dict[str, str] | None"], "StagedLeaf | None"]
# Where the stage functions run: given the transaction, the works, the function and
# the callback recording each (returned work, staged leaf), it stages them all or raises,
# and returns where the check before publishing runs (a ``CheckMany``; None: here).
# None: on this process's threads (``LeafTransaction.stage``); Spark: its tasks.
StageMany = Callable[
    ["LeafTransaction", Sequence[LeafWork], StageOne, Callable[[LeafWork, Any], None]],
    "CheckMany | None",
]


def stage_at_published(work: LeafWork, txn: str, opts: dict[str, str] | None) -> StagedLeaf:
    """Stage ``work.change`` on the leaf's published content, on its branch when pinned
    to one (``resolve_leaf``): the ``StageOne`` of a change that may go on any branch."""
    target = resolve_leaf(work.uri, work.leaf, opts)
    return stage_leaf(target.uri, target.published, work.change, txn, opts, branch=target.branch)


class LeafTransaction:
    """One namespace transaction: lease, staged leaves, one ``__manifest`` commit.

    Use it as a context manager. Leaving the block with an exception before
    ``publish`` succeeded rolls back every staged leaf unless the commit is found
    to have landed; the lease taken on entry (none is taken when ``lease`` is
    given) is released either way.

    Example::

        with LeafTransaction(manifest, snapshot, "delete") as tx:
            tx.stage(leaves, lambda leaf: tx.stage_change(leaf, DeleteRows(predicate)))
            version = tx.publish(tx.republished)
    """

    def __init__(
        self,
        manifest: Manifest,
        snapshot: Snapshot,
        what: str,
        lease: leases.Lease | None = None,
        txn: str | None = None,
        on_rollback: Callable[[StagedSet], None] | None = None,
    ):
        self.manifest = manifest
        self.snapshot = snapshot
        self.what = what
        self.staged = StagedSet(txn or new_txn_id(), manifest.storage_options, lease=lease)
        self.published: int | None = None
        # seconds spent publishing, by step: "rows" (building them), "check" (before
        # publishing), "commit" (``Manifest.commit``, with its upkeep); summed over retries
        self.timings: dict[str, float] = {"rows": 0.0, "check": 0.0, "commit": 0.0}
        self._on_rollback = on_rollback
        self._own_lease: leases.Lease | None = None

    def __enter__(self) -> LeafTransaction:
        if self.staged.lease is None:
            self._own_lease = self.staged.lease = leases.acquire(self.manifest, self.what)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            failed = exc_type is not None and self.published is None
            if failed and not self.staged.landed(self.manifest, self.snapshot.version):
                # said before the undo starts: over many leaves it takes a while (info:
                # the error itself reaches the caller; a rollback that goes well is no warning)
                log.info(
                    "%s failed (%s: %s); rolling back %d staged partitions",
                    self.what,
                    exc_type.__name__,
                    exc,
                    len(self.staged.leaves),
                )
                self.rollback()
        finally:
            if self._own_lease is not None:
                self._own_lease.release()

    # -- staging ------------------------------------------------------------
    def stage(
        self,
        items: Sequence[Any],
        fn: Callable[[Any], StagedLeaf | None],
        key: Callable[[Any], str] = lambda leaf: leaf.object_id,
        on_done: Callable[[Any, StagedLeaf | None], None] | None = None,
    ) -> None:
        """Stage ``fn(item)`` for every item in parallel (``run_parallel``), recording
        each staged leaf under ``key(item)`` as it succeeds (None: nothing staged)."""

        def record(item: Any, staged: StagedLeaf | None) -> None:
            if staged is not None:
                self.staged.leaves[key(item)] = staged
            if on_done is not None:
                on_done(item, staged)

        run_parallel(items, fn, record)

    def stage_change(self, leaf: Leaf, change: LeafChange) -> StagedLeaf:
        """Stage ``change`` on ``leaf``'s published content (on its branch, when pinned to one)."""
        work = self.work(leaf.object_id, leaf, change)
        return stage_at_published(work, self.staged.txn, self.manifest.storage_options)

    def work(self, key: str, leaf: Leaf, change: LeafChange) -> LeafWork:
        """``change`` on ``leaf`` of this transaction's snapshot, as a ``LeafWork``."""
        return LeafWork(key, self.snapshot.leaf_uri(leaf.location), leaf, change)

    def stage_works(
        self,
        works: Sequence[LeafWork],
        one: StageOne,
        on_done: Callable[[LeafWork, StagedLeaf | None], None] | None = None,
        stage_many: StageMany | None = None,
    ) -> None:
        """Stage every work with ``one``: on this process's threads (``stage``), or by
        ``stage_many`` in other processes (Spark tasks), which hands back each work
        and what it staged; either way each staged leaf is recorded under the work's key
        (rolled back if the transaction does not publish) and ``on_done`` is told."""

        def record(work: LeafWork, staged: StagedLeaf | None) -> None:
            if staged is not None:
                self.staged.leaves[work.key] = staged
            if on_done is not None:
                on_done(work, staged)

        if stage_many is not None:
            self.staged.check_many = stage_many(self, works, one, record)
            return
        txn, opts = self.staged.txn, self.manifest.storage_options
        run_parallel(works, lambda w: one(w, txn, opts), record)

    def versions(self) -> dict[str, int]:
        """The staged version of every leaf whose staging changed it, by object id."""
        return {oid: s.version for oid, s in self.staged.leaves.items() if s.changed}

    def branches(self, object_ids: Iterable[str]) -> dict[str, str | None]:
        """The branch each named leaf was staged on (None: main)."""
        return {oid: self.staged.leaves[oid].branch for oid in object_ids}

    def republished(self, base: Base, extra: Sequence[dict[str, Any]] = ()) -> Rows:
        """The rows that publish every changed leaf (its staged version, branch and row
        count) on ``base``, plus ``extra`` rows: what a transaction that changes leaves
        and creates none hands ``publish``."""
        versions = self.versions()
        dataset = base.dataset if isinstance(base, Snapshot) else base
        counts = self.staged.num_rows(versions)
        return republish_rows(dataset, versions, extra, self.branches(versions), counts), ()

    # -- publishing ---------------------------------------------------------
    def publish(
        self,
        rows: Callable[[Base], Rows | None],
        base: Base = None,
        on_conflict: Callable[[CommitConflictError], Base] | None = None,
        info: CommitInfo | Callable[[], CommitInfo] | None = None,
    ) -> int | None:
        """Commit ``rows(base)`` (upserts, object ids to delete) on ``base`` (default: the
        transaction's snapshot) after the check before publishing; return the version.
        ``info`` is what the commit records of itself (``ns.history()``), or a function
        returning it, called once the leaves are staged (counts staging found out).

        On a conflict, ``on_conflict`` returns the base to retry on (rebasing) or
        raises; without it, or after the tries of ``COMMIT_RETRY`` (``catalog.retry``),
        the CommitConflictError is raised. ``rows`` returning None means nothing is
        left to publish: None.
        """
        base = self.snapshot if base is None else base
        for attempt in COMMIT_RETRY.tries():
            with self._timed("rows"):
                out = rows(base)
            if out is None:
                return None
            upserts, deletes = out
            with self._timed("check"):
                self.staged.before_publish()
            dataset = base.dataset if isinstance(base, Snapshot) else base
            try:
                record = info() if callable(info) else info
                with self._timed("commit"):
                    committed = self.manifest.commit(dataset, upserts, deletes, record)
                self.published = committed.version
            except CommitConflictError as exc:
                if on_conflict is None or COMMIT_RETRY.is_last(attempt):
                    raise
                base = on_conflict(exc)
                continue
            # Once __manifest is committed the transaction is published: nothing may undo it.
            pause_point("published")
            return self.published
        return None

    @contextlib.contextmanager
    def _timed(self, step: str) -> Iterator[None]:
        """Add the seconds the block takes to ``timings[step]``; say them at DEBUG level
        (a commit over a million partitions takes a minute: where it goes is worth a log)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            self.timings[step] += seconds
            log.debug(
                "%s over %d staged partitions: %s took %.2f s",
                self.what,
                len(self.staged.leaves),
                step,
                seconds,
            )

    def rollback(self, object_ids: Iterable[str] | None = None) -> None:
        """Undo the staging of the named leaves (default: all), which will not be published."""
        if object_ids is None:
            self.staged.rollback()
            if self._on_rollback is not None:
                self._on_rollback(self.staged)
            return
        part = {oid: self.staged.leaves.pop(oid) for oid in list(object_ids)}
        StagedSet(self.staged.txn, self.staged.storage_options, part).rollback()


def replanned(
    manifest: Manifest,
    what: str,
    once: Callable[[Snapshot, leases.Lease | None], Any],
) -> Any:
    """``once(snapshot, lease)`` under one lease, planned again on the latest ``__manifest``
    version after each retryable conflict (``COMMIT_RETRY`` tries); the last conflict
    is raised. For operations that must re-read what they change (delete, align):
    a rebase of their rows alone would not do."""
    last: CommitConflictError | None = None
    with leases.hold(manifest, what) as lease:
        for _attempt in COMMIT_RETRY.tries():
            snapshot = Snapshot.load(manifest, for_write=True)
            try:
                return once(snapshot, lease)
            except CommitConflictError as exc:
                if not getattr(exc, "retryable", True) or isinstance(exc, leases.LeaseLostError):
                    raise
                last = exc
                log.info("%s conflicted with a concurrent commit; re-planning: %s", what, exc)
    assert last is not None
    raise last
