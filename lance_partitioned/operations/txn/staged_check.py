"""The check a transaction makes right before publishing: is everything it will publish there?

Maintenance removes unreferenced files and versions older than its cutoff, and
a transaction's are unreferenced until it publishes. Its lease
(``operations.txn.leases``) keeps maintenance away; this check is the second line:
a writer whose staged versions or files were removed anyway (its lease expired,
or maintenance ran that knows no leases) must fail, not publish references to
missing files. It is cheap because staging records, per leaf, the files the
staged version *adds* (``operation_files``): one ``stat`` each, plus the
version's manifest file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import lance
from lance.fragment import DataFile, FragmentMetadata

from lance_partitioned.catalog import storage
from lance_partitioned.catalog.leaf_open import manifest_file_name
from lance_partitioned.errors import StagedFilesMissingError


@dataclass
class StagedLeaf:
    """A leaf version committed by transaction ``txn`` but not (yet) published."""

    uri: str  # the leaf, or its branch directory when ``branch`` is set
    published: int  # the version whose content the staged version builds on
    version: int  # the staged version (== published when the change was a no-op)
    branch: str | None = None  # the Lance branch staged on (None: main)
    # data / deletion files (relative paths) the staged version adds to the published
    # content; None when unknown (then ``check_staged`` works them out from storage)
    added: frozenset[str] | None = None
    # rows of the staged version (Lance counts them from fragment metadata), published
    # with it as ``lp.num_rows`` (docs/FORMAT.md "Row counts"); None when unknown
    num_rows: int | None = None

    @property
    def changed(self) -> bool:
        return self.version != self.published


def version_files(ds: lance.LanceDataset) -> set[str]:
    """Paths (relative to the dataset) of the data and deletion files a version reads.

    Files kept under another base path (``base_id``: shallow clones, branches)
    are left out: they are not below the dataset's own directory.
    """
    return fragment_files([frag.metadata for frag in ds.get_fragments()])


def _data_file_path(f: DataFile) -> str:
    # Lance's ``DataFile.path`` property defines a class on every call (a
    # backwards-compatibility shim), a third of this check's cost per new leaf;
    # the dataclass field behind it holds the same string
    path = getattr(f, "_path", None)
    return path if isinstance(path, str) else str(f.path)


def fragment_files(fragments: Sequence[FragmentMetadata]) -> set[str]:
    """Paths (relative to the dataset) of the data and deletion files of ``fragments``."""
    out = set()
    for md in fragments:
        out.update(
            "data/" + _data_file_path(f) for f in md.files if getattr(f, "base_id", None) is None
        )
        dfile = md.deletion_file
        if dfile is not None and getattr(dfile, "base_id", None) is None:
            out.add(dfile.path(md.id))
    return out


def operation_files(op: Any) -> frozenset[str] | None:
    """The data and deletion files a Lance operation adds (None for kinds we do not know).

    Read from the operation itself, so it costs nothing per existing fragment.
    """
    if isinstance(op, (lance.LanceOperation.Append, lance.LanceOperation.Overwrite)):
        return frozenset(fragment_files(op.fragments))
    if isinstance(op, lance.LanceOperation.Delete):  # only new deletion files; data stays
        return frozenset(f for f in fragment_files(op.updated_fragments) if f.startswith("_"))
    if isinstance(op, lance.LanceOperation.Update):  # new rows, and deletion vectors
        return frozenset(fragment_files([*op.new_fragments, *op.updated_fragments]))
    if isinstance(op, lance.LanceOperation.Rewrite):
        return frozenset(fragment_files([f for g in op.groups for f in g.new_fragments]))
    return None


def _manifest_uris(st: storage.Storage, base: str, version: int) -> list[str]:
    """Where version ``version``'s manifest file is, in Lance's V2 and V1 naming (one exists)."""
    names = [manifest_file_name(version), f"{version}.manifest"]
    return [st.join(base, "_versions", n) for n in names]


def _manifest_exists(st: storage.Storage, base: str, version: int) -> bool:
    """Whether version ``version``'s manifest file exists (Lance's V2 or V1 naming).

    The V2 name (what pylance writes) is asked first and alone: on object stores a
    file that is there costs one HEAD, while asking for a missing name costs a HEAD
    and a listing (``pyarrow.fs`` checks for a directory of that name).
    """
    return any(st.exists(uri) for uri in _manifest_uris(st, base, version))


def check_staged_all(staged: Iterable[StagedLeaf], storage_options: dict[str, str] | None) -> None:
    """``check_staged`` for every leaf, with batched metadata calls (``lacking``): a
    commit creating 10,000 partitions costs one call per store, not 20,000."""
    for leaf in lacking(staged, storage_options):
        check_staged(leaf, storage_options)  # raises, naming what is missing


def lacking(
    staged: Iterable[StagedLeaf], storage_options: dict[str, str] | None
) -> list[StagedLeaf]:
    """The changed leaves that need ``check_staged``: those whose added files are
    unknown, and those found lacking their version's manifest file (V2 name) or an
    added file. The others are checked together, with one batched metadata call per
    store; ``check_staged`` then decides about the few returned (asking Lance when
    the manifest is stored elsewhere) and raises the precise error. Picklable both
    ways, so that Spark tasks can check their shares (``spark.maintenance``)."""
    out: list[StagedLeaf] = []
    by_store: dict[int, tuple[storage.Storage, list[tuple[StagedLeaf, list[str]]]]] = {}
    for leaf in staged:
        if not leaf.changed:
            continue
        if leaf.added is None:
            out.append(leaf)
            continue
        st = storage.resolve(leaf.uri, storage_options)
        # only the V2 name (what pylance writes): a missing name costs a listing on
        # object stores; a leaf without it goes through check_staged, which tries V1
        base = leaf.uri.rstrip("/")  # ``Storage.join``, spelled out: it runs per file
        uris = [f"{base}/_versions/{manifest_file_name(leaf.version)}"]
        uris += [f"{base}/{f}" for f in leaf.added]
        by_store.setdefault(id(st), (st, []))[1].append((leaf, uris))
    for st, leaves in by_store.values():
        gone = set(st.missing(u for _, uris in leaves for u in uris))
        if gone:
            out.extend(leaf for leaf, uris in leaves if any(u in gone for u in uris))
    return out


def check_staged(staged: StagedLeaf, storage_options: dict[str, str] | None) -> None:
    """Raise StagedFilesMissingError unless ``staged``'s version and the files it adds exist.

    Only the files the staged version adds to the published content are
    checked, so the cost does not grow with the leaf's size: on a local file
    system one ``stat`` per file plus the version's manifest file; on object
    stores the version is opened.
    """
    if not staged.changed:
        return
    base = staged.uri
    st = storage.resolve(base, storage_options)
    if staged.added is not None and _manifest_exists(st, base, staged.version):
        exists, added = True, staged.added
    else:  # unknown files, or a manifest stored elsewhere (branches): ask Lance
        try:
            ds = lance.dataset(staged.uri, version=staged.version, storage_options=storage_options)
            exists = True
        except Exception:
            exists = False
        added = frozenset()
        if exists:
            before: set[str] = set()
            if staged.published is not None:
                with contextlib.suppress(Exception):  # gone: then check every file
                    before = version_files(
                        lance.dataset(
                            staged.uri, version=staged.published, storage_options=storage_options
                        )
                    )
            added = frozenset(version_files(ds) - before)
    if not exists:
        raise StagedFilesMissingError(
            f"staged version {staged.version} of leaf {staged.uri!r} was removed before the "
            "transaction published (by a vacuum or cleanup); nothing was published; retry"
        )
    missing = sorted(
        storage.Storage.relative(u, base) for u in st.missing(st.join(base, f) for f in added)
    )
    if missing:
        raise StagedFilesMissingError(
            f"{len(missing)} file(s) of staged version {staged.version} of leaf {staged.uri!r} "
            f"were removed before the transaction published (by a vacuum or cleanup), e.g. "
            f"{missing[0]}; nothing was published; retry"
        )
