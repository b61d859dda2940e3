"""Writing data into a namespace: split by partition, write leaf files, publish atomically.

A write has two phases that can run in different processes (Spark tasks and
the driver):

1. ``PartitionWriter`` (any number, anywhere): computes partition keys
   vectorised, splits batches, buffers rows per partition within a memory
   budget and writes Lance data files *without committing anything*. It
   returns ``WrittenFiles``: per leaf, the fragments it wrote.
2. ``commit_write`` (once): commits each touched leaf, then makes the whole
   write visible with **one** compare-and-swap commit on ``__manifest`` that
   sets ``read_version`` of every touched leaf. Until that commit, readers of
   the namespace see nothing of the write; if it fails, leaf commits are rolled
   back and new leaf directories removed.

New partitions get their namespace names and table directory from a keyed
hash of ``(job secret, spec, key)``: random to an observer, yet identical in
every task of one job, so tasks that meet the same new partition agree on its
location without talking to each other.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import lance
import pyarrow as pa
from lance.fragment import FragmentMetadata, write_fragments

from lance_partitioned.catalog import layout
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot, mirror_metadata
from lance_partitioned.errors import CommitConflictError, PartitionedNamespaceError
from lance_partitioned.format.spec import PartitionSpec
from lance_partitioned.operations.input import InputConformer
from lance_partitioned.operations.leaf_schema import WriteMapping, leaf_arrow_schema, leaf_fields_by_id
from lance_partitioned.operations.split import split_by_keys

log = logging.getLogger(__name__)

APPEND, OVERWRITE, DYNAMIC = "append", "overwrite", "dynamic"
_BASE36 = "abcdefghijklmnopqrstuvwxyz0123456789"


# -- deterministic-per-job naming ---------------------------------------------


def _derived_stream(secret: bytes, label: str) -> Iterable[int]:
    counter = 0
    while True:
        block = hmac.new(secret, f"{label}#{counter}".encode(), hashlib.sha256).digest()
        yield from block
        counter += 1


def derived_namespace_name(secret: bytes, label: str) -> str:
    """16 base36 characters from HMAC-SHA256 bytes, by rejection sampling (unbiased)."""
    out = []
    for b in _derived_stream(secret, label):
        if b < 252:  # 252 = 7 * 36: keep the distribution uniform
            out.append(_BASE36[b % 36])
            if len(out) == 16:
                return "".join(out)
    raise AssertionError("unreachable")


def derived_hex(secret: bytes, label: str) -> str:
    return hmac.new(secret, f"dir:{label}".encode(), hashlib.sha256).hexdigest()[:8]


# -- what writers produce -----------------------------------------------------


@dataclass
class LeafWrite:
    """Files written for one leaf by one or more writers; nothing committed yet."""

    spec_id: int
    key: tuple[Any, ...]
    object_id: str
    location: str
    is_new: bool
    base_version: int | None
    new_namespaces: list[tuple[str, int]]  # (object_id, level) of namespaces to create
    fragments: list[str] = field(default_factory=list)  # FragmentMetadata JSON
    rows: int = 0


@dataclass
class WrittenFiles:
    """Everything one job wrote, keyed by (spec_id, partition key). Mergeable across tasks."""

    snapshot_version: int
    leaves: dict[tuple[int, tuple[Any, ...]], LeafWrite] = field(default_factory=dict)

    def merge(self, other: WrittenFiles) -> WrittenFiles:
        if other.snapshot_version != self.snapshot_version:
            raise PartitionedNamespaceError(
                f"cannot merge writes planned against manifest versions {self.snapshot_version} "
                f"and {other.snapshot_version}"
            )
        for k, lw in other.leaves.items():
            mine = self.leaves.get(k)
            if mine is None:
                self.leaves[k] = lw
            else:
                mine.fragments.extend(lw.fragments)
                mine.rows += lw.rows
        return self

    @property
    def rows(self) -> int:
        return sum(lw.rows for lw in self.leaves.values())


# -- phase 1: writing files ---------------------------------------------------


class PartitionResolver:
    """Maps partition keys of the current spec to existing leaves or new locations."""

    def __init__(self, snapshot: Snapshot, secret: bytes):
        self.snapshot = snapshot
        self.spec: PartitionSpec = snapshot.current_spec
        self.secret = secret
        self._leaves = {
            tuple(leaf.values): leaf for leaf in snapshot.leaves_of_spec(self.spec.spec_id)
        }
        self._namespaces: dict[tuple[Any, ...], str] = {}
        ns_rows = snapshot.namespace_rows(self.spec.spec_id).to_pydict()
        cols = [f.column for f in self.spec.fields]
        for i, oid in enumerate(ns_rows["object_id"]):
            depth = len(layout.split_id(oid)) - 1
            if depth < 1:
                continue
            prefix = tuple(ns_rows[c][i] if c in ns_rows else None for c in cols[:depth])
            self._namespaces[prefix] = oid

    def resolve(self, key: tuple[Any, ...]) -> LeafWrite:
        spec = self.spec
        existing: Leaf | None = self._leaves.get(key)
        if existing is not None:
            return LeafWrite(
                spec.spec_id,
                key,
                existing.object_id,
                existing.location,
                is_new=False,
                base_version=existing.read_version,
                new_namespaces=[],
            )
        parent = layout.spec_namespace(spec.spec_id)
        new_ns: list[tuple[str, int]] = []
        for level in range(1, len(spec.fields) + 1):
            prefix = key[:level]
            oid = self._namespaces.get(prefix)
            if oid is None:
                label = f"{spec.spec_id}:{level}:{prefix!r}"
                oid = layout.join_id(parent, derived_namespace_name(self.secret, label))
                new_ns.append((oid, level))
            parent = oid
        table_id = layout.join_id(parent, layout.TABLE_NAME)
        location = f"{derived_hex(self.secret, repr((spec.spec_id, key)))}_{table_id}"
        return LeafWrite(spec.spec_id, key, table_id, location, True, None, new_ns)


class PartitionWriter:
    """Buffers rows per partition and writes Lance data files; commits nothing.

    Memory stays bounded by ``max_buffer_bytes`` however many partitions the
    input touches: when the budget is exceeded the largest buffers are flushed.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        secret: bytes,
        *,
        max_buffer_bytes: int = 512 << 20,
        max_rows_per_file: int = 1 << 20,
        progress: Callable[[int], None] | None = None,
    ):
        self.snapshot = snapshot
        self.spec = snapshot.current_spec
        self.conform = InputConformer(snapshot.schema)
        self.resolver = PartitionResolver(snapshot, secret)
        self.max_buffer_bytes = max_buffer_bytes
        self.max_rows_per_file = max_rows_per_file
        self.progress = progress
        self.result = WrittenFiles(snapshot.version)
        self._buffers: dict[tuple[Any, ...], list[pa.RecordBatch]] = {}
        self._buffer_bytes: dict[tuple[Any, ...], int] = {}
        self._buffer_rows: dict[tuple[Any, ...], int] = {}
        self._total_bytes = 0
        self._new_leaf_schema = leaf_arrow_schema(snapshot.schema)
        self._mappings: dict[str, WriteMapping] = {}

    def write(self, batch: pa.RecordBatch) -> None:
        """Accept one batch (any column order; cast to the namespace schema)."""
        batch = self.conform(batch)
        keys = [f.values(batch, self.snapshot.schema) for f in self.spec.fields]
        for key, rows in split_by_keys(batch, keys):
            self._buffer(key, rows)
        if self.progress:
            self.progress(batch.num_rows)
        while self._total_bytes > self.max_buffer_bytes:
            self._flush(max(self._buffer_bytes, key=self._buffer_bytes.__getitem__))

    def _buffer(self, key: tuple[Any, ...], rows: pa.RecordBatch) -> None:
        if (self.spec.spec_id, key) not in self.result.leaves:
            self.result.leaves[(self.spec.spec_id, key)] = self.resolver.resolve(key)
        self._buffers.setdefault(key, []).append(rows)
        size = rows.nbytes
        self._buffer_bytes[key] = self._buffer_bytes.get(key, 0) + size
        self._buffer_rows[key] = self._buffer_rows.get(key, 0) + rows.num_rows
        self._total_bytes += size
        if self._buffer_rows[key] >= self.max_rows_per_file:
            self._flush(key)

    def _take(self, key: tuple[Any, ...]) -> list[pa.RecordBatch]:
        self._total_bytes -= self._buffer_bytes.pop(key, 0)
        self._buffer_rows.pop(key, None)
        return self._buffers.pop(key, [])

    def _flush(self, key: tuple[Any, ...]) -> None:
        self._write_files(key, self._take(key))

    def _write_files(self, key: tuple[Any, ...], batches: list[pa.RecordBatch]) -> None:
        """Write one partition's buffered rows as Lance data files (thread-safe per key)."""
        if not batches:
            return
        lw = self.result.leaves[(self.spec.spec_id, key)]
        table = pa.Table.from_batches(batches, schema=self.snapshot.schema.arrow)
        target = self._leaf_target(lw)
        table = target.conform(table) if isinstance(target, WriteMapping) else table.cast(target)
        frags = write_fragments(
            table,
            self.snapshot.leaf_uri(lw.location),
            schema=table.schema,
            max_rows_per_file=self.max_rows_per_file,
            storage_options=self.snapshot.manifest.storage_options,
        )
        lw.fragments.extend(json.dumps(f.to_json()) for f in frags)
        lw.rows += table.num_rows

    def _leaf_target(self, lw: LeafWrite) -> pa.Schema | WriteMapping:
        """New leaves get the namespace schema; existing ones keep theirs (seed 003 §4 writes)."""
        if lw.is_new:
            return self._new_leaf_schema
        mapping = self._mappings.get(lw.object_id)
        if mapping is None:
            leaf = lance.dataset(
                self.snapshot.leaf_uri(lw.location),
                version=lw.base_version,
                storage_options=self.snapshot.manifest.storage_options,
            )
            mapping = WriteMapping(self.snapshot.schema, leaf.schema, leaf_fields_by_id(leaf), lw.object_id)
            self._mappings[lw.object_id] = mapping
        return mapping

    def finish(self) -> WrittenFiles:
        """Flush every buffer (partitions in parallel) and return what was written."""
        pending = [(key, self._take(key)) for key in list(self._buffers)]
        if len(pending) > 1:
            with ThreadPoolExecutor(min(4, len(pending))) as pool:
                list(pool.map(lambda item: self._write_files(*item), pending))
        else:
            for key, batches in pending:
                self._write_files(key, batches)
        return self.result


# -- phase 2: publishing ------------------------------------------------------


def _fragments(lw: LeafWrite) -> list[FragmentMetadata]:
    return [FragmentMetadata.from_json(f) for f in lw.fragments]


def _fragment_signature(ds: lance.LanceDataset) -> list[tuple[Any, ...]]:
    sig = []
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


def _commit_leaf(snapshot: Snapshot, lw: LeafWrite, mode: str) -> int:
    """Commit one leaf's files; returns the leaf's new version."""
    uri = snapshot.leaf_uri(lw.location)
    opts = snapshot.manifest.storage_options
    frags = _fragments(lw)
    if lw.is_new:
        schema = leaf_arrow_schema(snapshot.schema)
        ds = lance.LanceDataset.commit(
            uri, lance.LanceOperation.Overwrite(schema, frags), storage_options=opts
        )
        if ds.version != 1:
            raise CommitConflictError(f"new partition directory {lw.location!r} already had data")
        return ds.version
    latest = lance.dataset(uri, storage_options=opts)
    if latest.version != lw.base_version:
        # Versions beyond the published one come from a writer that has not published
        # (or died). Building on them could publish its data: refuse unless they hold
        # exactly the published content.
        pinned = lance.dataset(uri, version=lw.base_version, storage_options=opts)
        if _fragment_signature(pinned) != _fragment_signature(latest):
            raise CommitConflictError(
                f"partition {lw.object_id!r} has unpublished versions "
                f"(published {lw.base_version}, latest {latest.version}): another writer is "
                "in flight or died; retry later, or run recover() to roll it back"
            )
    op = (
        lance.LanceOperation.Append(frags)
        if mode == APPEND
        # existing leaves keep their own schema, which the files were written with
        else lance.LanceOperation.Overwrite(latest.schema, frags)
    )
    ds = lance.LanceDataset.commit(
        uri, op, read_version=latest.version, storage_options=opts, max_retries=0
    )
    return ds.version


def _commit_leaves(
    snapshot: Snapshot, leaves: list[LeafWrite], mode: str, committed: dict[str, int]
) -> None:
    """Commit leaves in parallel, recording each success in ``committed``; re-raise the first failure."""
    if not leaves:
        return
    errors: list[BaseException] = []
    with ThreadPoolExecutor(max(1, min(8, len(leaves)))) as pool:
        futures = {pool.submit(_commit_leaf, snapshot, lw, mode): lw for lw in leaves}
        for fut in as_completed(futures):
            try:
                committed[futures[fut].object_id] = fut.result()
            except BaseException as exc:  # collected; every leaf finishes before we decide
                errors.append(exc)
    if errors:
        raise errors[0]


def _rollback_leaf(snapshot: Snapshot, lw: LeafWrite, committed_version: int | None) -> None:
    uri = snapshot.leaf_uri(lw.location)
    try:
        if lw.is_new:
            _remove_dir(uri)
        elif committed_version is not None and lw.base_version is not None:
            lance.dataset(
                uri, version=lw.base_version, storage_options=snapshot.manifest.storage_options
            ).restore()
    except Exception as exc:  # best effort; vacuum/recover finish the job
        log.warning("could not roll back partition %s: %s", lw.object_id, exc)


def _remove_dir(uri: str) -> None:
    if "://" in uri and not uri.startswith("file://"):
        return  # object stores: left to vacuum
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    shutil.rmtree(path, ignore_errors=True)


def abort_write(snapshot: Snapshot, written: WrittenFiles) -> None:
    """Reclaim the files of a write that will not be committed."""
    for lw in written.leaves.values():
        uri = snapshot.leaf_uri(lw.location)
        if lw.is_new:
            _remove_dir(uri)
        else:
            for frag in _fragments(lw):
                for f in frag.files:
                    _remove_file(uri, f.path)


def _remove_file(uri: str, name: str) -> None:
    if "://" in uri and not uri.startswith("file://"):
        return
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(path, "data", name))


def _manifest_rows(snapshot: Snapshot, written: WrittenFiles, versions: dict[str, int]) -> pa.Table:
    spec_cols: dict[int, list[str]] = {
        sid: [f.column for f in s.fields] for sid, s in snapshot.specs.items()
    }
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for lw in written.leaves.values():
        spec = snapshot.specs[lw.spec_id]
        cols = spec_cols[lw.spec_id]
        for oid, level in lw.new_namespaces:
            if oid in seen:
                continue
            seen.add(oid)
            row = {"object_id": oid, "object_type": "namespace"}
            row.update({c: v for c, v in zip(cols[:level], lw.key[:level], strict=True)})
            f = spec.fields[level - 1]
            row["metadata"] = mirror_metadata({f.field_id: lw.key[level - 1]})
            rows.append(row)
        row = {
            "object_id": lw.object_id,
            "object_type": "table",
            "location": lw.location,
            "metadata": mirror_metadata(
                {f.field_id: v for f, v in zip(spec.fields, lw.key, strict=True)}
            ),
            "read_version": versions[lw.object_id],
        }
        row.update(dict(zip(cols, lw.key, strict=True)))
        rows.append(row)
    # Rows inserted concurrently under the same spec would not conflict in Lance
    # (inserts rebase), so every inserting commit also rewrites its spec's
    # version-namespace row: two such commits then conflict on that row.
    for sid in sorted({lw.spec_id for lw in written.leaves.values() if lw.is_new}):
        rows.append(
            {"object_id": layout.spec_namespace(sid), "object_type": "namespace", "metadata": "{}"}
        )
    schema = snapshot.dataset.schema
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


def _deletes_for_overwrite(snapshot: Snapshot, keep: set[str]) -> list[str]:
    rows = snapshot.dataset.to_table(columns=["object_id", "object_type"]).to_pydict()
    tables = [
        o for o, t in zip(rows["object_id"], rows["object_type"], strict=True) if t == "table"
    ]
    remaining = [o for o in tables if o in keep]
    ancestors = {
        layout.join_id(*layout.split_id(o)[:i])
        for o in remaining
        for i in range(1, len(layout.split_id(o)))
    }
    out = [o for o in tables if o not in keep]
    for o, t in zip(rows["object_id"], rows["object_type"], strict=True):
        if (
            t == "namespace"
            and len(layout.split_id(o)) > 1
            and o not in ancestors
            and o not in keep
        ):
            out.append(o)
    return out


def commit_write(
    manifest: Manifest,
    snapshot: Snapshot,
    written: WrittenFiles,
    mode: str = APPEND,
    max_rebase: int = 5,
) -> Snapshot:
    """Publish ``written`` in one ``__manifest`` commit. Returns the new snapshot.

    Modes: ``append``; ``overwrite`` (the whole namespace becomes exactly this
    write); ``dynamic`` (only the partitions in this write are replaced).
    On a conflict that rebasing cannot resolve, leaf commits are rolled back and
    CommitConflictError is raised; the namespace is unchanged.
    """
    if mode not in (APPEND, OVERWRITE, DYNAMIC):
        raise ValueError(f"unknown write mode {mode!r}; use append, overwrite or dynamic")
    if written.snapshot_version != snapshot.version:
        raise PartitionedNamespaceError("files were written against a different snapshot")
    committed: dict[str, int] = {}
    try:
        _commit_leaves(snapshot, list(written.leaves.values()), mode, committed)
        base = snapshot
        for attempt in range(max_rebase + 1):
            upserts = _manifest_rows(base, written, committed)
            deletes: list[str] = []
            if mode == OVERWRITE:
                keep = {lw.object_id for lw in written.leaves.values()}
                keep |= {oid for lw in written.leaves.values() for oid, _ in lw.new_namespaces}
                deletes = _deletes_for_overwrite(base, keep)
                if deletes:
                    specs = {layout.spec_id_of(d) for d in deletes}
                    lock = pa.Table.from_pylist(
                        [
                            {
                                "object_id": layout.spec_namespace(s),
                                "object_type": "namespace",
                                "metadata": "{}",
                            }
                            for s in specs
                        ],
                        schema=base.dataset.schema,
                    )
                    upserts = _dedupe(pa.concat_tables([upserts, lock]))
            try:
                published = manifest.commit(base.dataset, upserts, deletes).version
                break
            except CommitConflictError:
                if attempt == max_rebase:
                    raise
                base = _rebase(manifest, snapshot, written)
        else:
            raise AssertionError("unreachable")
    except BaseException:
        for lw in written.leaves.values():
            if lw.object_id in committed or lw.is_new:
                _rollback_leaf(snapshot, lw, committed.get(lw.object_id))
        raise
    # Outside the try: once __manifest is committed the write is published, and
    # nothing may roll its leaves back (a failure here must not delete its data).
    return Snapshot.load(manifest, published)


def _dedupe(table: pa.Table) -> pa.Table:
    seen: set[str] = set()
    keep = []
    for i, oid in enumerate(table.column("object_id").to_pylist()):
        if oid not in seen:
            seen.add(oid)
            keep.append(i)
    return table.take(keep)


def _rebase(manifest: Manifest, planned: Snapshot, written: WrittenFiles) -> Snapshot:
    """Reload the manifest and check our write still applies on top of it."""
    latest = Snapshot.load(manifest, for_write=True)
    if latest.specs != planned.specs or latest.schema != planned.schema:
        raise CommitConflictError("the namespace schema or partition spec changed during the write")
    by_id = {leaf.object_id: leaf for leaf in latest.leaves()}
    by_key = {(leaf.spec_id, tuple(leaf.values)) for leaf in by_id.values()}
    for (sid, key), lw in written.leaves.items():
        if lw.is_new:
            if (sid, key) in by_key:
                raise CommitConflictError(
                    f"partition {key} of spec v{sid} was created concurrently by another writer"
                )
        else:
            now = by_id.get(lw.object_id)
            if now is None or now.read_version != lw.base_version:
                raise CommitConflictError(
                    f"partition {lw.object_id!r} was changed or removed concurrently by another writer"
                )
    log.info("rebased write onto __manifest version %d", latest.version)
    return latest


def new_job_secret() -> bytes:
    return secrets.token_bytes(32)
