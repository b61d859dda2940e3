"""Which version of which table a ``__manifest`` row publishes, and opening it: seed 000 Read Behavior.

A table row pins its leaf with ``read_version``, ``read_branch`` and
``read_tag`` (``Leaf.version_ref`` reads the three columns):

- ``read_version`` only: that version of the main branch;
- ``read_branch`` + ``read_version``: that version of that branch;
- ``read_tag`` only: the tag's version, on the branch the tag points into;
- all NULL: the latest version of main (``read_branch`` alone: its latest).

Reads, writes and search all go through this module: ``open_leaf_dataset``
opens the pinned version (``open_pinned`` reuses an opened one while it cannot
move), ``resolve_leaf`` names the directory, version and branch a write builds
on. Lance keeps branch ``b`` of a leaf at ``<leaf>/tree/b`` (``branch_uri``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import lance

from lance_partitioned.catalog import storage
from lance_partitioned.catalog.leaf_table import Leaf
from lance_partitioned.errors import ForeignChangeError
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache

MAIN_BRANCH = "main"


def branch_uri(uri: str, branch: str | None) -> str:
    """Where a leaf's branch lives: Lance keeps branch ``b`` of ``uri`` at ``uri/tree/b``.

    Opening that directory gives the branch's own version history (shared with
    main up to the fork), so every integer-version operation used for main
    (open, Restore, strict commits) works on a branch unchanged.
    """
    if branch is None or branch == MAIN_BRANCH:
        return uri
    return uri.rstrip("/") + "/tree/" + branch


@dataclass(frozen=True)
class LeafPin:
    """The content a ``__manifest`` row publishes, as a place to build on."""

    uri: str  # the leaf, or its branch directory
    published: int | None  # None: the row reads the latest version (of the branch)
    branch: str | None  # None: main


def resolve_leaf(uri: str, leaf: Leaf, storage_options: dict[str, str] | None) -> LeafPin:
    """Where ``leaf`` (at ``uri``) keeps the content its row publishes.

    A write builds on exactly that content, on its branch (``docs/TRANSACTIONS.md``
    §10). Only a tag needs I/O (the leaf's tag list). Raises ForeignChangeError when
    the row names a tag the leaf no longer has: nobody can tell what is published.
    """
    ref = leaf.version_ref()
    if isinstance(ref, str):
        return _tag_pin(uri, leaf, ref, storage_options)
    if isinstance(ref, tuple):
        branch = None if ref[0] == MAIN_BRANCH else ref[0]
        return LeafPin(branch_uri(uri, branch), ref[1], branch)
    return LeafPin(uri, ref, None)


def _tag_pin(uri: str, leaf: Leaf, tag: str, storage_options: dict[str, str] | None) -> LeafPin:
    tags = lance.dataset(uri, storage_options=storage_options).tags.list()
    info = tags.get(tag)
    if info is None:
        raise ForeignChangeError(
            f"partition {leaf.object_id!r} is pinned to tag {tag!r}, which its "
            f"table {uri!r} no longer has (tags: {', '.join(sorted(tags)) or 'none'}); "
            "the published version is unknown, so nothing can be built on it. Point the "
            "row at a version (read_version) or recreate the tag"
        )
    branch = info.get("branch")
    branch = None if branch == MAIN_BRANCH else branch
    return LeafPin(branch_uri(uri, branch), info["version"], branch)


def open_leaf_dataset(
    uri: str,
    leaf: Leaf,
    storage_options: dict[str, str] | None,
    session: lance.Session | None = None,
) -> lance.LanceDataset:
    """The leaf at ``uri`` at the version its row pins (through ``session``: ``read_session``).

    A tag is resolved by Lance (onto its branch) in the same open, so a read
    costs no more requests than a plain versioned open.
    """
    ref = leaf.version_ref()
    if isinstance(ref, tuple):  # (branch, version); (branch, None) is the branch's latest
        ds = lance.dataset(uri, storage_options=storage_options, session=session)
        return ds.checkout_version(ref)
    return lance.dataset(uri, version=ref, storage_options=storage_options, session=session)


def is_pinned(leaf: Leaf) -> bool:
    """Whether ``leaf`` names a version that cannot move (a number, on main or a branch).

    A tag, or a branch head without a version, can move: such a leaf is opened
    afresh every time.
    """
    ref = leaf.version_ref()
    return leaf.read_tag is None and (
        isinstance(ref, int) or (isinstance(ref, tuple) and ref[1] is not None)
    )


def manifest_file_name(version: int) -> str:
    """The file name of version ``version``'s manifest in Lance's V2 naming (what pylance
    writes: ``_versions/<u64::MAX - version, 20 digits>.manifest``)."""
    return f"{(1 << 64) - 1 - version:020d}.manifest"


def missing_pinned(
    leaves: Sequence[tuple[str, Leaf]], storage_options: dict[str, str] | None
) -> list[tuple[str, Leaf]]:
    """Those of ``(uri, leaf)`` whose pinned version no longer exists (cleanup removed it).

    A version of main pinned by number is looked up by its manifest file: one
    batched metadata call per store, no manifest read. The others (a branch, a
    tag, a manifest not under its V2 name) are opened with ``open_leaf_dataset``.
    A row that reads the latest version has one as long as the leaf exists.
    """
    by_store: dict[int, tuple[storage.Storage, list[tuple[str, Leaf, str]]]] = {}
    opened: list[tuple[str, Leaf]] = []
    for uri, leaf in leaves:
        ref = leaf.version_ref()
        if not isinstance(ref, int):
            opened.append((uri, leaf))
            continue
        st = storage.resolve(uri, storage_options)
        file = st.join(uri, "_versions", manifest_file_name(ref))
        by_store.setdefault(id(st), (st, []))[1].append((uri, leaf, file))
    for st, wanted in by_store.values():
        gone = set(st.missing(file for _, _, file in wanted))
        opened.extend((uri, leaf) for uri, leaf, file in wanted if file in gone)
    missing = []
    for uri, leaf in opened:
        try:
            open_leaf_dataset(uri, leaf, storage_options)
        except Exception:  # removed, or the leaf itself is gone: either way not readable
            missing.append((uri, leaf))
    return missing


# Opened leaf datasets by (uri, pinned version, storage options). A pinned
# version never changes, and a LanceDataset keeps its index and metadata caches:
# reopening the leaf for every search would read its index again each time
# (on 10k-row partitions that tripled the latency of a tenant search).
# Only numeric versions are kept (``is_pinned``): a tag or a branch head can move.
_pinned: BoundedCache = caches.register("leaf_open.pinned_datasets", BoundedCache(maxsize=256))


def open_pinned(
    uri: str,
    leaf: Leaf,
    storage_options: dict[str, str] | None,
    opener: Callable[[], lance.LanceDataset] | None = None,
) -> lance.LanceDataset:
    """``leaf`` opened at its pinned version, reused while the process keeps it.

    ``opener`` opens it on a miss (default: ``open_leaf_dataset``; a snapshot
    passes its own, which explains reads of cleaned-up versions).
    """
    if opener is None:
        opener = lambda: open_leaf_dataset(uri, leaf, storage_options)  # noqa: E731
    if not is_pinned(leaf):
        return opener()
    key = (uri, leaf.version_ref(), tuple(sorted((storage_options or {}).items())))
    ds = _pinned.get(key)
    if ds is None:
        ds = opener()
        _pinned.put(key, ds)
    return ds


# Cache capacities of the shared read session: a leaf's manifest and file
# metadata take kilobytes, so this holds those of tens of thousands of leaves.
READ_SESSION_CACHE_BYTES = 256 * 2**20
# The process's read session, by process id. Not a registered cache: it is Lance's
# session, whose caches Lance bounds (``READ_SESSION_CACHE_BYTES``), and it holds
# the store's connections, which a cleared cache should not cost.
_read_session: tuple[int, lance.Session] | None = None
_read_session_lock = threading.Lock()


def read_session() -> lance.Session:
    """The Lance session scans open leaves with, one per process.

    Without one, every ``lance.dataset`` call builds its own session: new caches
    and a new object store (on S3 a new client and connections) for each leaf of
    each query. Sharing it lets the leaves of a scan, and the queries a process
    repeats, reuse both. Reads stay exact: a leaf is opened at the version its
    ``__manifest`` row pins, and Lance checks what it cached against storage (a
    dataset deleted and re-created at the same path is read anew). Rebuilt in a
    forked child, whose parent's Lance threads do not exist.
    """
    global _read_session
    pid = os.getpid()
    with _read_session_lock:
        if _read_session is None or _read_session[0] != pid:
            _read_session = (
                pid,
                lance.Session(
                    index_cache_size_bytes=READ_SESSION_CACHE_BYTES,
                    metadata_cache_size_bytes=READ_SESSION_CACHE_BYTES,
                ),
            )
        return _read_session[1]


__all__ = [
    "MAIN_BRANCH",
    "LeafPin",
    "branch_uri",
    "is_pinned",
    "manifest_file_name",
    "missing_pinned",
    "open_leaf_dataset",
    "open_pinned",
    "read_session",
    "resolve_leaf",
]
