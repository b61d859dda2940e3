"""Leaf staging: the per-partition half of a multi-partition transaction.

A namespace transaction (``docs/TRANSACTIONS.md``) never changes what readers
see until one compare-and-swap commit on ``__manifest`` sets ``read_version``
of every partition it touched. Before that commit it *stages* each touched leaf:
it commits a new Lance version of the leaf that nobody reads yet. Staging keeps
one invariant, which is what makes crashed and concurrent writers harmless:

    A staged version's parent holds exactly the leaf's *published* content
    (the version ``__manifest`` points readers to), and the staged version is
    the transaction's operation applied to that parent and nothing else.

Lance histories are linear, so a leaf's latest version may hold *unpublished*
versions of other transactions (a writer that crashed, lost its manifest
commit, or is still in flight, ours or another implementation's, or a plain
Lance append to the partition table). Staging never builds on them: when the latest
version's content differs from the published one, it first commits a
``Restore`` of the published version, then its own operation, and accepts the
result only if Lance put it directly on top (version = parent + 1). Anything
else means another commit slipped in between; the attempt is discarded and
retried. Every commit we make carries ``lp.txn=<transaction id>`` in its Lance
transaction properties, so versions written by anyone else are recognised
and the restore over them is logged as a warning. A leaf pinned to a branch
(``read_branch``, or a tag on a branch) is staged on that branch, in its
directory ``<leaf>/tree/<branch>`` (``resolve_leaf``).
"""

from __future__ import annotations

import logging
from typing import Any

import lance
from lance.dataset import Transaction
from lance.fragment import FragmentMetadata

from lance_partitioned.catalog.leaf_open import resolve_leaf
from lance_partitioned.catalog.retry import COMMIT_RETRY, is_commit_conflict
from lance_partitioned.catalog.snapshot import Leaf
from lance_partitioned.errors import CommitConflictError, PartitionedNamespaceError
from lance_partitioned.operations.leaf.field_ids import IdLayout
from lance_partitioned.operations.leaf.leaf_changes import LeafChange
from lance_partitioned.operations.txn.staged_check import (
    StagedLeaf,
    fragment_files,
    operation_files,
)

log = logging.getLogger(__name__)

TXN_PROPERTY = "lp.txn"


def fragment_signature(ds: lance.LanceDataset) -> list[tuple[Any, ...]]:
    """What a version holds: fragment ids, data files and deletion files, plus the schema
    and the index segments (an index build's unpublished version differs from the
    published one in these alone: built on, it would publish an index the namespace
    never decided on)."""
    segments = sorted((d.name, str(s.uuid)) for d in ds.describe_indices() for s in d.segments)
    sig: list[tuple[Any, ...]] = [
        ("schema", ds.schema.to_string(show_schema_metadata=False)),
        ("indices", tuple(segments)),
    ]
    for frag in ds.get_fragments():
        md = frag.metadata
        dfile = md.deletion_file
        sig.append(
            (
                md.id,
                tuple(f.path for f in md.files),
                None if dfile is None else (dfile.read_version, dfile.id, dfile.num_deleted_rows),
            )
        )
    return sig


def published_version(uri: str, leaf: Leaf, storage_options: dict[str, str] | None) -> int | None:
    """The main-branch version whose content readers see for ``leaf`` (None: latest main).

    For callers that work on main only (compaction): a leaf published on a branch
    (``read_branch``, or a tag on a branch) raises; writes use ``resolve_leaf``.
    """
    target = resolve_leaf(uri, leaf, storage_options)
    if target.branch is not None:
        raise PartitionedNamespaceError(
            f"partition {leaf.object_id!r} is published on branch {target.branch!r}; "
            "this operation works on main only"
        )
    return target.published


def _commit(
    base: lance.LanceDataset,
    op: Any,
    read_version: int,
    txn: str,
    storage_options: dict[str, str] | None,
) -> lance.LanceDataset:
    """A strict commit of ``op`` on ``base`` tagged with our transaction id.

    Passing the open dataset (not its URI) spares Lance re-reading the manifest,
    which halves the cost of staging many leaves.
    """
    return lance.LanceDataset.commit(
        base,
        Transaction(read_version, op, transaction_properties={TXN_PROPERTY: txn}),
        read_version=read_version,
        storage_options=storage_options,
        max_retries=0,
    )


def foreign_versions(latest: lance.LanceDataset, after: int) -> list[int]:
    """Versions in ``(after, latest]`` not written by a namespace transaction."""
    out = []
    for v in range(after + 1, latest.version + 1):
        try:
            t = latest.read_transaction(v)
        except Exception:  # cleaned up: only unpublished versions of ours are ever removed
            continue
        if t is None or TXN_PROPERTY not in (t.transaction_properties or {}):
            out.append(v)
    return out


def txn_versions(
    uri: str, after: int, txn: str, storage_options: dict[str, str] | None
) -> list[int]:
    """Versions above ``after`` that transaction ``txn`` committed to the leaf at ``uri``."""
    latest = lance.dataset(uri, storage_options=storage_options)
    out = []
    for v in range(after + 1, latest.version + 1):
        try:
            t = latest.read_transaction(v)
        except Exception:  # cleaned up
            continue
        if t is not None and (t.transaction_properties or {}).get(TXN_PROPERTY) == txn:
            out.append(v)
    return out


def _clean_base(
    uri: str, published: int, txn: str, storage_options: dict[str, str] | None
) -> lance.LanceDataset:
    """The latest version if it holds exactly the published content, else a fresh Restore of it."""
    latest = lance.dataset(uri, storage_options=storage_options)
    if latest.version == published:
        return latest
    try:
        pinned = lance.dataset(uri, version=published, storage_options=storage_options)
    except Exception as exc:
        # Only a version nobody publishes any more is ever cleaned up: the partition
        # was republished since this transaction planned.
        raise CommitConflictError(
            f"leaf {uri!r}: version {published} this transaction planned on was cleaned up "
            "(the partition changed since); retry the write"
        ) from exc
    if fragment_signature(pinned) == fragment_signature(latest):
        return latest
    # Unpublished versions -- of our crashed, failed or in-flight transactions, or
    # written by another implementation or plain Lance -- are never built on: the
    # namespace never decided on them, so they must not become visible.
    foreign = foreign_versions(latest, published)
    if foreign:
        log.warning(
            "leaf %s: versions %s above its published version %d were not written by a "
            "namespace transaction (another writer's unpublished or abandoned versions); "
            "building on the published version, so they stay invisible",
            uri,
            foreign,
            published,
        )
    else:
        log.info(
            "leaf %s: restoring published version %d over unpublished versions", uri, published
        )
    return restore_published(latest, published, txn, storage_options)


def restore_published(
    latest: lance.LanceDataset, published: int, txn: str, storage_options: dict[str, str] | None
) -> lance.LanceDataset:
    """Commit ``Restore(published)`` directly on ``latest`` (the leaf's latest version),
    tagged with ``txn``: the unpublished versions above ``published`` stop being latest.
    Raises Lance's conflict error (``catalog.retry.is_commit_conflict``) when another
    commit landed on the leaf since ``latest``."""
    return _commit(
        latest, lance.LanceOperation.Restore(published), latest.version, txn, storage_options
    )


def _prepare(
    base: lance.LanceDataset,
    change: LeafChange,
    txn: str,
    storage_options: dict[str, str] | None,
    max_steps: int = 4,
) -> lance.LanceDataset | None:
    """Commit ``change``'s preparatory operations on ``base``, each directly on top of the last.

    Returns the prepared version, or None when a commit did not land on top
    (the attempt is then unusable and retried from the published version).
    """
    for _ in range(max_steps):
        op = change.prepare(base)
        if op is None:
            return base
        nxt = _commit(base, op, base.version, txn, storage_options)
        if nxt.version != base.version + 1:
            return None
        base = nxt
    raise PartitionedNamespaceError(f"leaf {base.uri!r}: schema preparation did not converge")


def stage_leaf(
    uri: str,
    published: int | None,
    change: LeafChange,
    txn: str,
    storage_options: dict[str, str] | None = None,
    branch: str | None = None,
    opened: lance.LanceDataset | None = None,
) -> StagedLeaf:
    """Commit ``change`` as a new leaf version on top of the published content.

    Contract: the returned version's parent holds exactly the content of
    ``published`` (None: the latest version at the time of the call) and the
    version adds ``change`` and nothing else; unpublished versions above
    ``published`` (whoever wrote them) are restored over, never built on.
    (A change whose ``prepare`` asks for schema changes first is staged as a
    short chain of versions, each directly on top of the last; only the final
    one is published.) ``uri`` is the leaf or its branch directory
    (``resolve_leaf``); ``branch`` is recorded in the result. Raises
    CommitConflictError when concurrent commits to the leaf keep slipping in.

    ``opened``: version ``published`` of ``uri``, already open (the writer opened it
    to map its columns). The first attempt commits straight on it, without opening
    the leaf's latest version (a listing and a read on object stores): when the
    published version is the latest, as it is unless some writer left unpublished
    versions, Lance puts the commit directly on top and it is accepted; otherwise
    Lance lands it elsewhere or reports a conflict, and the next attempt starts
    from the latest version as usual.
    """
    if opened is not None and (published is None or opened.version != published):
        opened = None
    last: BaseException | None = None
    for attempt in COMMIT_RETRY.tries():  # waits between tries desynchronise writers
        change.restart()
        pub = published
        if pub is None:
            pub = lance.dataset(uri, storage_options=storage_options).version
        try:
            if attempt == 0 and opened is not None:
                clean = opened
            else:
                clean = _clean_base(uri, pub, txn, storage_options)
            base = _prepare(clean, change, txn, storage_options)
            if base is None:
                last = None
                continue  # another commit slipped in between our preparatory ones
            op = change.operation(base)
            if op is None:
                version = pub if base is clean else base.version
                return StagedLeaf(uri, pub, version, branch, num_rows=base.count_rows())
            result = _commit(base, op, base.version, txn, storage_options)
        except PartitionedNamespaceError:
            raise  # ours: foreign versions, a cleaned-up base; retrying here cannot help
        except Exception as exc:
            if not is_commit_conflict(exc):
                raise
            last = exc
            continue
        if result.version == base.version + 1:
            return StagedLeaf(
                uri,
                pub,
                result.version,
                branch,
                added=operation_files(op),
                num_rows=result.count_rows(),
            )
        # Another commit landed between base and ours: ours may include it. Unusable.
        last = None
        log.info(
            "leaf %s: staged version %d not on top of %d; retrying",
            *(uri, result.version, base.version),
        )
    raise _staging_conflict(uri, last)


def _staging_conflict(uri: str, last: BaseException | None) -> CommitConflictError:
    """The error when every attempt to stage on ``uri`` met a concurrent commit."""
    return CommitConflictError(
        f"could not stage a change on leaf {uri!r}: concurrent commits to it kept interleaving"
        + (f" ({last})" if last else "")
        + "; the write was not published and can be retried"
    )


def stage_new_leaf(
    uri: str,
    schema: Any,
    fragments: list[FragmentMetadata],
    txn: str,
    storage_options: dict[str, str] | None = None,
) -> StagedLeaf:
    """Create a new leaf dataset from already-written fragments.

    ``schema`` is an Arrow schema (Lance numbers its fields) or an
    ``IdLayout`` whose field ids the leaf must carry. Lance renumbers any
    schema a dataset is *created* with, but keeps a ``LanceSchema``'s ids when
    an existing dataset is overwritten: ids Lance would not pick itself take
    an empty version 1, then the files in version 2.
    """
    layout = schema if isinstance(schema, IdLayout) else None
    first = schema if layout is None else layout.arrow
    two_step = layout is not None and not layout.is_natural
    try:
        ds = lance.LanceDataset.commit(
            uri,
            Transaction(
                0,
                lance.LanceOperation.Overwrite(first, [] if two_step else fragments),
                transaction_properties={TXN_PROPERTY: txn},
            ),
            storage_options=storage_options,
            max_retries=0,
        )
    except OSError as exc:
        raise CommitConflictError(
            f"new partition directory {uri!r} already holds a dataset: {exc}"
        ) from exc
    if ds.version != 1:
        raise CommitConflictError(f"new partition directory {uri!r} already had data")
    if two_step:
        assert layout is not None
        op = lance.LanceOperation.Overwrite(layout.lance_schema, fragments)
        ds = _commit(ds, op, 1, txn, storage_options)
        if ds.version != 2:
            raise CommitConflictError(f"new partition directory {uri!r} was written concurrently")
    return StagedLeaf(
        uri,
        None,
        ds.version,
        added=frozenset(fragment_files(fragments)),
        num_rows=ds.count_rows(),
    )


def create_leaf(
    uri: str,
    table: Any,
    layout: IdLayout,
    txn: str,
    storage_options: dict[str, str] | None = None,
    max_rows_per_file: int = 1 << 20,
) -> lance.LanceDataset:
    """Create a new leaf holding ``table`` in one Lance call: version 1, staged, unpublished.

    The one-writer form of writing a new partition's files and then
    ``stage_new_leaf``: the same version 1 (the rows, ``layout``'s columns,
    ``lp.txn`` = ``txn``), with one Lance call instead of two (about 15% less
    Lance CPU per tiny leaf: ``benchmarks/many_partitions_bench.py``). Only
    for a layout Lance's own numbering already gives (``IdLayout.is_natural``):
    a created dataset's ids cannot be chosen. Raises CommitConflictError when ``uri`` already
    holds a dataset.
    """
    if not layout.is_natural:
        raise PartitionedNamespaceError(
            f"leaf {uri!r}: field ids {layout.ids} need the two-step stage_new_leaf"
        )
    try:
        return lance.write_dataset(
            table,
            uri,
            schema=layout.arrow,
            mode="create",
            max_rows_per_file=max_rows_per_file,
            transaction_properties={TXN_PROPERTY: txn},
            storage_options=storage_options,
        )
    except OSError as exc:
        raise CommitConflictError(
            f"new partition directory {uri!r} already holds a dataset: {exc}"
        ) from exc


def unstage_leaf(staged: StagedLeaf, txn: str, storage_options: dict[str, str] | None) -> None:
    """Best effort: if ``staged`` is still the leaf's latest version, restore the published one.

    Not needed for correctness (the next writer restores over unpublished
    versions anyway); it keeps plain-Lance readers of the latest version tidy.
    A new leaf (nothing published) has nothing to restore: ``StagedSet.rollback``
    removes its directory instead.
    """
    if not staged.changed or staged.published is None:
        return
    try:
        latest = lance.dataset(staged.uri, storage_options=storage_options)
        if latest.version == staged.version:
            _commit(
                latest,
                lance.LanceOperation.Restore(staged.published),
                latest.version,
                txn,
                storage_options,
            )
    except Exception as exc:  # vacuum finishes the job
        log.warning("could not roll back leaf %s: %s", staged.uri, exc)
