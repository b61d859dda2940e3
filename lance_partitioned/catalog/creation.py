"""Creating a namespace in one commit, and what an interrupted create left behind.

``create`` is all-or-nothing. Lance cannot put table metadata into a dataset's
first commit (``write_dataset`` and the Python ``Overwrite`` operation carry a
schema and fragments only), so the first ``__manifest`` version is built where
nobody sees it, a ``memory://`` dataset (the rows, then the schema and spec as
table metadata), and deep-cloned to the root: Lance copies its data file, then
commits the clone's manifest with one put-if-not-exists. The namespace's first
version keeps the source's number, 2, as when ``create`` committed twice on
disk. A kill before that commit leaves at most files under ``__manifest`` and no
table version; after it, the whole namespace.

Releases before made the two commits on disk (rows, then metadata); a kill
between them left a ``__manifest`` table with no schema or spec and only its
``v1`` row. Neither leftover holds data, and both are recognised
(``interrupted_create``):

- ``open`` raises ``UnfinishedNamespaceError`` saying what it is and what to do;
- ``create`` writes beside leftover files, and finishes an unfinished table that
  has the partition columns and row it would write itself, with one
  compare-and-swap metadata commit (other columns: it refuses and names
  ``repair``);
- ``remove_interrupted`` (``lp.repair(root)``, CLI ``repair``) removes either.
"""

from __future__ import annotations

from dataclasses import dataclass

import lance
import pyarrow as pa

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.layout import join_uri, spec_id_of_namespace
from lance_partitioned.catalog.manifest import (
    MANIFEST_DIR,
    READ_COLUMNS,
    SCHEMA_KEY,
    Manifest,
    is_partitioned,
)
from lance_partitioned.catalog.storage import Storage
from lance_partitioned.errors import (
    CommitConflictError,
    NamespaceExistsError,
    StorageError,
    UnfinishedNamespaceError,
)

# What an interrupted create left: files but no table version / a table whose
# metadata has no schema or spec and whose rows are only spec version namespaces.
FILES = "files"
TABLE = "table"
# An unfinished table holds the ``v1`` row and was committed once; anything with
# more rows or versions was written by something else and is left alone.
_MAX_ROWS = 16
_MAX_VERSIONS = 4
_CREATE_DIRS = ("data", "_transactions", "_versions")


@dataclass
class Leftover:
    """What an interrupted create left in ``__manifest``: ``kind`` FILES or TABLE (then
    ``dataset`` is its latest version). Neither holds data."""

    kind: str
    dataset: lance.LanceDataset | None = None


def interrupted_create(manifest: Manifest) -> Leftover | None:
    """What an interrupted create left at ``manifest.root``, or None (nothing there, a
    namespace, or something else). Reads only."""
    if not manifest.storage.is_dir(manifest.uri):  # nothing there, or a file by that name
        return None
    try:
        ds = manifest.dataset()
    except Exception:  # no table version: leftover files, or something else
        return Leftover(FILES) if _only_create_files(manifest) else None
    return Leftover(TABLE, ds) if _unfinished_table(manifest, ds) else None


def _only_create_files(manifest: Manifest) -> bool:
    """Whether ``__manifest`` holds only what Lance writes before a dataset's first
    commit lands (data and transaction files, no ``.manifest`` version file)."""
    for entry in manifest.storage.list(manifest.uri, recursive=True):
        rel = Storage.relative(entry.uri, manifest.uri)
        if rel.split("/")[0] not in _CREATE_DIRS:
            return False
        if rel.startswith("_versions/") and rel.endswith(".manifest"):
            return False
    return True


def _unfinished_table(manifest: Manifest, ds: lance.LanceDataset) -> bool:
    meta = ds.metadata
    if SCHEMA_KEY in meta or is_partitioned(ds):
        return False
    if not set(READ_COLUMNS) <= set(ds.schema.names):  # a DirectoryNamespace root: not ours
        return False
    versions = [v["version"] for v in ds.versions()]
    if len(versions) > _MAX_VERSIONS or ds.count_rows() > _MAX_ROWS:
        return False
    try:
        rows = ds.to_table(columns=["object_id", "object_type"]).to_pylist()
        earlier = [manifest.dataset(v) for v in versions if v != ds.version]
    except Exception:  # unreadable: not recognisably ours, so not ours to remove
        return False
    if any(is_partitioned(old) or SCHEMA_KEY in old.metadata for old in earlier):
        return False
    return all(
        r["object_type"] == "namespace" and spec_id_of_namespace(r["object_id"]) is not None
        for r in rows
    )


def describe(manifest: Manifest, left: Leftover) -> str:
    """What ``left`` is and the ways out, in words (the message of UnfinishedNamespaceError)."""
    root = manifest.root
    fixes = f"lp.repair({root!r}) (command line: lance-partitioned repair {root}) removes"
    if left.kind == FILES:
        return (
            f"{root!r} holds no namespace, only files a create killed before its commit left "
            f"in {MANIFEST_DIR} (no table version, no data). lp.create(root, schema, spec) "
            f"creates the namespace here; {fixes} them"
        )
    return (
        f"{root!r} holds an unfinished namespace: a create was interrupted after its first "
        f"{MANIFEST_DIR} commit, before it recorded the schema and partition spec. It holds "
        f"no data. lp.create(root, schema, spec) with the same spec finishes it; {fixes} it"
    )


def raise_if_interrupted(manifest: Manifest, cause: BaseException) -> None:
    """After ``open`` found no namespace: raise UnfinishedNamespaceError when the root holds
    what an interrupted create left (``cause`` chained); else return."""
    left = interrupted_create(manifest)
    if left is not None:
        raise UnfinishedNamespaceError(describe(manifest, left)) from cause


def check_create_target(manifest: Manifest) -> Leftover | None:
    """Raise unless ``manifest.root`` can take a new namespace; reads only.

    Refused: a missing bucket, a root that is a file, a root that already holds
    a ``__manifest`` (``NamespaceExistsError``) or something else by that name,
    a root that is itself a Lance dataset, and a store whose commits are not
    atomic (``UnsafeStoreError``). Accepted, and returned: what an interrupted
    create left (``create_first_version`` finishes or writes beside it).
    """
    st = manifest.storage
    st.check_container(manifest.root)
    left = interrupted_create(manifest)
    if left is None and manifest.present():
        raise NamespaceExistsError(f"{manifest.root!r} already contains a {MANIFEST_DIR} table")
    if left is None and st.exists(manifest.uri):
        raise StorageError(
            f"{manifest.root!r} holds a {MANIFEST_DIR} that is not a Lance table; "
            "choose an empty root"
        )
    if st.is_dir(join_uri(manifest.root, "_versions")):
        raise StorageError(
            f"{manifest.root!r} is a Lance dataset, not a namespace root; choose an empty root"
        )
    manifest.check_writable()
    return left


def create_first_version(
    manifest: Manifest, rows: pa.Table, metadata: dict[str, str], left: Leftover | None
) -> lance.LanceDataset:
    """Commit ``__manifest``'s first version, holding ``rows`` and table ``metadata``, in
    one commit (or finish the unfinished table ``left``). Raises NamespaceExistsError
    when another create got there first."""
    if left is not None and left.kind == TABLE:
        assert left.dataset is not None
        return _finish(manifest, left.dataset, rows, metadata)
    try:
        return manifest.create(rows, metadata)
    except Exception as exc:
        if manifest.present() and interrupted_create(manifest) is None:
            raise NamespaceExistsError(
                f"{manifest.root!r}: another create made a namespace here meanwhile"
            ) from exc
        raise


def _finish(
    manifest: Manifest, ds: lance.LanceDataset, rows: pa.Table, metadata: dict[str, str]
) -> lance.LanceDataset:
    """Record ``metadata`` on the unfinished table ``ds``: one compare-and-swap commit,
    when ``ds`` holds the columns and rows ``create`` would write."""
    ids = sorted(ds.to_table(columns=["object_id"]).column(0).to_pylist())
    if _columns(ds.schema) != _columns(rows.schema) or ids != sorted(
        rows.column("object_id").to_pylist()
    ):
        raise NamespaceExistsError(
            f"{manifest.root!r} holds an unfinished namespace (a create was interrupted "
            f"before it recorded the schema and spec) whose __manifest has the partition "
            f"columns {_partition_columns(ds.schema)}, not the {_partition_columns(rows.schema)} "
            f"of this spec. It holds no data: lp.repair(root) (command line: "
            f"lance-partitioned repair ROOT) removes it; then create the namespace again"
        )
    op = lance.LanceOperation.UpdateConfig(
        table_metadata_updates=lance.LanceOperation.UpdateMap(metadata, replace=False)
    )
    try:
        return manifest.commit_operation(
            ds, op, what="finishing the namespace", info=CommitInfo("create", {}, 0, 0, 0)
        )
    except CommitConflictError as exc:
        raise NamespaceExistsError(
            f"{manifest.root!r}: another create finished this namespace meanwhile"
        ) from exc.__cause__


def _columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    return [(f.name, f.type) for f in schema]


def _partition_columns(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if f.name.startswith("partition_field_")]


def remove_interrupted(manifest: Manifest) -> list[str]:
    """Remove ``__manifest`` when it holds only what an interrupted create left (no
    data); returns what was done, in words (empty: nothing of the kind, nothing removed).

    Version files go first: a removal cut short leaves files without a table
    version, which is still recognised (and removed by the next call).
    """
    left = interrupted_create(manifest)
    if left is None:
        return []
    st = manifest.storage
    entries = st.list(manifest.uri, recursive=True)
    versions = [
        e for e in entries if Storage.relative(e.uri, manifest.uri).startswith("_versions/")
    ]
    for entry in sorted(versions, key=lambda e: not e.uri.endswith(".manifest")):
        st.delete(entry.uri)
    files, _ = st.delete_tree(manifest.uri)
    what = "an unfinished namespace (no schema, spec or data)" if left.kind == TABLE else "files"
    return [
        f"removed {MANIFEST_DIR} of {manifest.root!r}: {what} an interrupted create left "
        f"({len(versions) + files} file(s)); lp.create(root, schema, spec) can create the "
        "namespace now"
    ]
