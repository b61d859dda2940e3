"""The transaction around staged leaves: ids, test pause points, parallel staging, rollback.

A namespace transaction (``docs/TRANSACTIONS.md``) stages every leaf it
touches (``operations.staging``) and publishes them all with one
compare-and-swap commit on ``__manifest`` (``operations.publish`` for writes).
This module holds what every kind of transaction shares around that: a fresh
transaction id, the pause points tests stop crashed writers at, staging many
leaves in parallel, and ``StagedSet``: what was staged, the last check before
publishing, and the rollback when nothing is published.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lance_partitioned.catalog import storage
from lance_partitioned.operations.parallel import for_each
from lance_partitioned.operations.staged_check import check_staged_all
from lance_partitioned.operations.staging import StagedLeaf, unstage_leaf

log = logging.getLogger(__name__)

PAUSE_ENV = "LP_TEST_PAUSE_AT"
PAUSE_DIR_ENV = "LP_TEST_PAUSE_DIR"

_paused: set[str] = set()


def new_txn_id() -> str:
    """A fresh transaction id (32 lowercase hex characters)."""
    return uuid.uuid4().hex


def pause_point(name: str) -> None:
    """Test hook: when ``LP_TEST_PAUSE_AT`` lists ``name``, stop here once.

    Writes ``<LP_TEST_PAUSE_DIR>/<name>.paused`` and waits until the test
    creates ``<name>.go`` (or kills the process). Costs one environment lookup
    otherwise.
    """
    points = os.environ.get(PAUSE_ENV)
    if not points or name not in points.split(",") or name in _paused:
        return
    _paused.add(name)
    folder = os.environ.get(PAUSE_DIR_ENV, ".")
    with open(os.path.join(folder, f"{name}.paused"), "w") as fh:
        fh.write(str(os.getpid()))
    go = os.path.join(folder, f"{name}.go")
    while not os.path.exists(go):
        time.sleep(0.01)


def pausing() -> bool:
    """Whether a test hook is active (staging then runs leaf by leaf, deterministically)."""
    return bool(os.environ.get(PAUSE_ENV))


STAGE_THREADS = 8  # leaves staged at once: Lance releases the GIL while it commits


def run_parallel(
    items: Sequence[Any], fn: Callable[[Any], Any], on_done: Callable[[Any, Any], None]
) -> None:
    """Apply ``fn`` to every item (on ``STAGE_THREADS`` threads unless a test pause is active).

    ``on_done(item, result)`` records each success as it happens (one at a
    time), so that a failure elsewhere can still roll back what succeeded.
    After the first failure no further item starts; those already running
    finish, then the first failure is raised (``parallel.for_each``).
    """
    if not items:
        return
    if pausing() or len(items) == 1:
        for i, item in enumerate(items):
            on_done(item, fn(item))
            if i == 0:
                pause_point("leaf_staged")
        return
    for_each(items, fn, min(STAGE_THREADS, len(items)), on_done)


@dataclass
class StagedSet:
    """Every leaf a transaction staged, by object id; what rollback undoes.

    ``lease`` (``operations.leases``) is the transaction's lease, checked with
    the staged files right before publishing.
    """

    txn: str
    storage_options: dict[str, str] | None
    leaves: dict[str, StagedLeaf] = field(default_factory=dict)
    new_dirs: list[str] = field(default_factory=list)
    lease: Any = None

    def num_rows(self, object_ids: Iterable[str]) -> dict[str, int | None]:
        """The row count of each named leaf's staged version (None when unknown)."""
        return {oid: self.leaves[oid].num_rows for oid in object_ids}

    def before_publish(self) -> None:
        """Call right before the ``__manifest`` commit: everything it will publish must exist.

        Checks every staged version and the files it adds, then renews the
        lease: the renewal comes last, so no maintenance run can claim the
        lease between this check and the commit. Raises StagedFilesMissingError
        or LeaseLostError (both retryable; nothing published).
        """
        check_staged_all(self.leaves.values(), self.storage_options)
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
        """Undo staging of a transaction that will not publish (best effort, idempotent)."""
        pause_point("rolling_back")
        for staged in self.leaves.values():
            unstage_leaf(staged, self.txn, self.storage_options)
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
