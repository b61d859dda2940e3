"""``convert``: rewrite a seed-003 namespace in seed 000's layout, atomically.

The source is only read. The destination is built in a hidden sibling
directory (``.<name>.lp-convert-<random>``) through the ordinary write path:
``PartitionedNamespace.create`` with the mapped spec
(``catalog.seed003.seed000_spec_json``), then **one** ``WriteJob`` that streams
every source row (read by name, seed 003 §4) and publishes with one
``__manifest`` commit. Rows are placed by seed 000's transforms computed from
the data, never by the seed-003 table names. Only when the staged namespace
validates and holds exactly the source's row count is it renamed to ``dst``:
one ``rename(2)``, atomic on a local file system. Before that step ``dst`` does
not exist; after it, it is complete. A crash at any point leaves the source
untouched and ``dst`` absent; the staging directory it may leave behind is
garbage that nothing reads (delete it; ``docs/FORMAT.md`` section 11).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import lance

from lance_partitioned.catalog import storage
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.storage import Storage
from lance_partitioned.errors import (
    NamespaceDamagedError,
    NamespaceExistsError,
    UnsupportedFeatureError,
    lance_boundary,
)
from lance_partitioned.namespace import PartitionedNamespace
from lance_partitioned.operations.progress import ProgressLike, reporter
from lance_partitioned.operations.write.job import WriteJob, check_write_sizes
from lance_partitioned.operations.write.publish import WriteMode
from lance_partitioned.seed003 import layout as seed003
from lance_partitioned.seed003.read import Seed003Scan, Seed003Snapshot

STAGING_MARK = ".lp-convert-"


@dataclass(frozen=True)
class ConvertResult:
    """What ``convert`` did: rows and partitions written, and the versions involved."""

    destination: str
    rows: int
    source_tables: int
    partitions: int
    source_version: int
    version: int


def _destination_dir(dst: str) -> tuple[Storage, str]:
    """The store and local path ``dst`` names; refuses object stores and existing paths."""
    store = storage.resolve(dst)
    if not store.rename_is_atomic:
        raise UnsupportedFeatureError(
            f"convert writes to a local destination only (its last step is an atomic "
            f"rename, which object stores lack); got {dst!r}. Convert to a local path, "
            "then copy the directory"
        )
    path = store.path(dst)
    if store.info(path) is not None:
        raise NamespaceExistsError(
            f"destination {dst!r} already exists; convert never writes into an existing path"
        )
    if not store.is_dir(path.rsplit("/", 1)[0] or "/"):
        raise FileNotFoundError(f"the parent directory of the destination {dst!r} does not exist")
    return store, path


def _refuse_destination_inside(src: str, target: str) -> None:
    """``src`` is only read: a destination inside it (or containing it) is refused."""
    source = storage.resolve(src)
    if not source.is_local:  # an object-store source: a local target cannot be in it
        return
    if source.nested(src, target):
        raise UnsupportedFeatureError(
            f"the destination {target!r} lies inside the source {src!r} (or holds it); "
            "convert only reads the source, so write the new namespace elsewhere"
        )


@lance_boundary
def convert(
    src: str,
    dst: str,
    *,
    storage_options: dict[str, str] | None = None,
    progress: ProgressLike = None,
    max_buffer_bytes: int = 1 << 30,
    max_rows_per_file: int = 1 << 20,
) -> ConvertResult:
    """Rewrite the seed-003 namespace ``src`` as a new seed-000 namespace at ``dst``.

    ``src`` is read only (each table at its latest version when the conversion
    starts); ``storage_options`` are for reading it. ``dst`` must be a local path
    that does not exist; it appears in one atomic rename once the conversion
    is complete and validated (see the module doc). ``progress`` reports rows
    written (task ``"convert"``); ``max_buffer_bytes`` and ``max_rows_per_file``
    are the write options of ``append``. Raises NotAPartitionedNamespaceError if
    ``src`` is no seed-003 root, NamespaceExistsError if ``dst`` exists,
    UnsupportedFeatureError for an object-store ``dst``; bad input changes
    nothing. Returns a ``ConvertResult``.

    Example::

        lp.convert("/data/legacy", "/data/events")
        lp.open("/data/events").validate()  # []
    """
    src, dst = str(src), str(dst)
    check_write_sizes(max_buffer_bytes=max_buffer_bytes, max_rows_per_file=max_rows_per_file)
    layout = seed003.load(src, storage_options)
    store, target = _destination_dir(dst)
    _refuse_destination_inside(src, target)
    spec = seed003.seed000_spec_json(layout)
    snapshot = Seed003Snapshot.of(layout, storage_options)  # pins every source table
    scan = Seed003Scan(snapshot)
    total = sum(
        lance.dataset(
            snapshot.leaf_uri(leaf.location),
            version=leaf.read_version,
            storage_options=storage_options,
        ).count_rows()
        for leaf in scan.leaves
    )
    parent, name = target.rsplit("/", 1)
    staging = store.join(parent or "/", f".{name}{STAGING_MARK}{uuid.uuid4().hex[:12]}")
    try:
        PartitionedNamespace.create(staging, layout.schema, spec)
        manifest = Manifest(staging)
        with (
            reporter(progress, "convert", "rows") as rows,
            WriteJob.begin(manifest, WriteMode.APPEND, "convert") as job,
        ):
            rows.start(total)
            written = job.write(
                lambda writer: writer.write_all(scan.to_batches()),
                max_buffer_bytes=max_buffer_bytes,
                max_rows_per_file=max_rows_per_file,
                progress=rows.advance if rows.active else None,
            )
            job.commit(written)
        staged = PartitionedNamespace.open(staging)
        problems = staged.validate()
        if problems or staged.count() != total:
            raise NamespaceDamagedError(
                f"converting {src!r}: the staged namespace failed its check "
                f"({staged.count()} of {total} rows; {problems}); {dst!r} was not created"
            )
        if not store.rename(staging, target):  # the one step that makes dst exist
            raise NamespaceDamagedError(f"converting {src!r}: the staged namespace vanished")
    except BaseException:
        store.delete_tree(staging)
        raise
    converted = PartitionedNamespace.open(dst)
    return ConvertResult(
        dst,
        written.rows,
        len(layout.leaves),
        len(written.leaves),
        layout.manifest_version,
        converted.version,
    )
