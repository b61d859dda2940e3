"""Republishing leaves under a new version of each: one transaction that changes no rows.

Some operations change the *form* of many leaves and nothing a reader of the
namespace sees: give leaf columns the namespace's names, types and field ids,
remove columns the namespace dropped. ``restage`` runs such a change as one
``LeafTransaction`` (``operations.txn.driver``, the one commit protocol) over
every leaf, publishing the leaves it changed with one ``__manifest`` commit. A
conflict re-plans from the latest ``__manifest`` version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.operations.leaf.leaf_changes import LeafChange
from lance_partitioned.operations.txn import leases
from lance_partitioned.operations.txn.driver import LeafTransaction, replanned
from lance_partitioned.operations.txn.failpoints import pause_point
from lance_partitioned.operations.txn.staged_check import StagedLeaf

log = logging.getLogger(__name__)


@dataclass
class Restaged:
    """What ``restage`` published: the ``__manifest`` version (the snapshot's own when
    no leaf changed) and, per changed leaf, the change that was staged on it."""

    version: int
    changes: dict[str, LeafChange] = field(default_factory=dict)


def restage(
    manifest: Manifest,
    what: str,
    change_for: Callable[[Snapshot, Leaf], LeafChange],
    leaves_of: Callable[[Snapshot], Sequence[Leaf]] = lambda s: s.leaves(),
) -> Restaged:
    """Stage ``change_for(snapshot, leaf)`` on each of ``leaves_of(snapshot)`` and publish
    the leaves it changed in one ``__manifest`` commit.

    ``what`` names the operation in the lease and in the commit's record
    (``history()``: it moves no row). A change whose ``operation`` and
    ``prepare`` find nothing to do leaves its leaf unpublished. Raises a
    retryable CommitConflictError when every try of ``catalog.retry.COMMIT_RETRY`` conflicted.

    Example::

        restage(manifest, "align_leaves", lambda snap, leaf: AlignLeaf(snap.schema, leaf.object_id))
    """
    return replanned(
        manifest,
        what,
        lambda snap, lease: _restage_once(
            manifest, snap, change_for, leaves_of(snap), lease, CommitInfo(what, {}, 0, 0)
        ),
    )


def _restage_once(
    manifest: Manifest,
    snapshot: Snapshot,
    change_for: Callable[[Snapshot, Leaf], LeafChange],
    leaves: Sequence[Leaf],
    lease: leases.Lease | None,
    info: CommitInfo,
) -> Restaged:
    changes: dict[str, LeafChange] = {}
    with LeafTransaction(manifest, snapshot, "restage", lease=lease) as tx:

        def stage(leaf: Leaf) -> StagedLeaf:
            return tx.stage_change(
                leaf, changes.setdefault(leaf.object_id, change_for(snapshot, leaf))
            )

        tx.stage(leaves, stage)
        versions = tx.versions()
        if not versions:
            return Restaged(snapshot.version)
        pause_point("leaves_staged")
        published = tx.publish(tx.republished, info=info)
    assert published is not None
    return Restaged(published, {oid: changes[oid] for oid in versions})
