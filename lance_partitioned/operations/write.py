"""Writing data into a namespace: split by partition, write leaf files, publish atomically.

A write has two phases that can run in different processes (Spark tasks and
the driver):

1. ``PartitionWriter`` (any number, anywhere): computes partition keys
   vectorised, splits batches, buffers rows per partition within a memory
   budget and writes Lance data files *without committing anything*. It
   returns ``WrittenFiles``: per leaf, the fragments it wrote.
2. ``commit_write`` (once): stages each touched leaf as an unpublished Lance
   version built on the leaf's published content (``operations.transaction``),
   then makes the whole write visible with **one** compare-and-swap commit on
   ``__manifest`` that sets ``read_version`` of every touched leaf. Until that
   commit, readers of the namespace see nothing of the write; if it fails, no
   reader ever will (``docs/TRANSACTIONS.md``).

New partitions get their namespace names and table directory from a keyed
hash of ``(job secret, spec, key)``: random to an observer, yet identical in
every task of one job, so tasks that meet the same new partition agree on its
location without talking to each other.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import lance
import pyarrow as pa
from lance.fragment import FragmentMetadata, write_fragments

from lance_partitioned.catalog import layout
from lance_partitioned.catalog.manifest import Manifest, lock_rows, with_read_mirror
from lance_partitioned.catalog.snapshot import Leaf, Snapshot, mirror_metadata
from lance_partitioned.errors import CommitConflictError, PartitionedNamespaceError
from lance_partitioned.format.spec import PartitionSpec
from lance_partitioned.operations.input import InputConformer, coalesce_batches
from lance_partitioned.operations.leaf_schema import (
    WriteMapping,
    leaf_arrow_schema,
    leaf_fields_by_id,
)
from lance_partitioned.operations.split import split_by_keys
from lance_partitioned.operations.transaction import (
    AppendFiles,
    LeafChange,
    ReplaceFiles,
    StagedLeaf,
    StagedSet,
    new_txn_id,
    pause_point,
    published_version,
    remove_dir,
    remove_file,
    run_parallel,
    stage_leaf,
    stage_new_leaf,
)

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
        max_buffer_bytes: int = 1 << 30,
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
        self._accept(batch.num_rows, self._split(batch))

    def write_all(self, batches: Iterable[pa.RecordBatch], threads: int = 2) -> None:
        """Accept a stream of batches, splitting up to ``threads`` of them at once.

        Small batches are first coalesced (``coalesce_batches``). Splitting is
        CPU-bound Arrow work that releases the GIL; buffering stays in order on
        this thread, and at most ``threads`` batches are in flight.
        """
        with ThreadPoolExecutor(threads) as pool:
            pending: list[tuple[int, Any]] = []
            for batch in coalesce_batches(batches):
                pending.append((batch.num_rows, pool.submit(self._split, batch)))
                if len(pending) >= threads:
                    rows, fut = pending.pop(0)
                    self._accept(rows, fut.result())
            for rows, fut in pending:
                self._accept(rows, fut.result())

    def _split(self, batch: pa.RecordBatch) -> list[tuple[tuple[Any, ...], pa.RecordBatch]]:
        batch = self.conform(batch)
        keys = [f.values(batch, self.snapshot.schema) for f in self.spec.fields]
        return list(split_by_keys(batch, keys))

    def _accept(self, num_rows: int, groups: list[tuple[tuple[Any, ...], pa.RecordBatch]]) -> None:
        for key, rows in groups:
            self._buffer(key, rows)
        if self.progress:
            self.progress(num_rows)
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
        table = pa.Table.from_batches(batches, schema=self.snapshot.schema.arrow).combine_chunks()
        target = self._leaf_target(lw)
        table = target.conform(table) if isinstance(target, WriteMapping) else table.cast(target)
        frags = write_fragments(
            table,
            self.snapshot.leaf_uri(lw.location),
            schema=table.schema,
            # "append" into a leaf that does not exist yet makes Lance log a WARN line
            # per new partition; "create" writes the same files and field ids quietly
            mode="create" if lw.is_new else "append",
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
            mapping = WriteMapping(
                self.snapshot.schema, leaf.schema, leaf_fields_by_id(leaf), lw.object_id
            )
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
#
# The protocol (docs/TRANSACTIONS.md): stage every touched leaf as a private
# Lance version built on the leaf's *published* content (never on another
# writer's unpublished version), then publish them all with one
# compare-and-swap commit on __manifest. That commit is the only decision
# point: before it readers see nothing of the write, after it everything.


def _fragments(lw: LeafWrite) -> list[FragmentMetadata]:
    return [FragmentMetadata.from_json(f) for f in lw.fragments]


def _leaf_change(lw: LeafWrite, mode: str) -> LeafChange:
    frags = _fragments(lw)
    # existing leaves keep their own schema, which the files were written with
    return AppendFiles(frags) if mode == APPEND else ReplaceFiles(None, frags)


def _stage(
    snapshot: Snapshot,
    lw: LeafWrite,
    published: Leaf | None,
    mode: str,
    staged: StagedSet,
) -> StagedLeaf:
    """Stage one leaf of a write: a new dataset for a new partition, else a new version."""
    uri = snapshot.leaf_uri(lw.location)
    opts = snapshot.manifest.storage_options
    if lw.is_new:
        staged.new_dirs.append(uri)
        return stage_new_leaf(
            uri, leaf_arrow_schema(snapshot.schema), _fragments(lw), staged.txn, opts
        )
    assert published is not None
    return stage_leaf(
        uri, published_version(uri, published, opts), _leaf_change(lw, mode), staged.txn, opts
    )


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
        version = versions[lw.object_id]
        row = {
            "object_id": lw.object_id,
            "object_type": "table",
            "location": lw.location,
            "metadata": with_read_mirror(
                mirror_metadata({f.field_id: v for f, v in zip(spec.fields, lw.key, strict=True)}),
                version,
            ),
            "read_version": version,
        }
        row.update(dict(zip(cols, lw.key, strict=True)))
        rows.append(row)
    # Rows inserted concurrently under the same spec would not conflict in Lance
    # (inserts rebase), so every inserting commit also rewrites its spec's
    # version-namespace row: two such commits then conflict on that row.
    rows.extend(lock_rows({lw.spec_id for lw in written.leaves.values() if lw.is_new}))
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


def _publish_rows(
    base: Snapshot,
    written: WrittenFiles,
    staged: StagedSet,
    mode: str,
    replaces: Sequence[str] = (),
) -> tuple[pa.Table, list[str]]:
    """The ``__manifest`` upserts and deletes that publish ``staged`` on top of ``base``."""
    versions = {oid: s.version for oid, s in staged.leaves.items()}
    upserts = _manifest_rows(base, written, versions)
    deletes: list[str] = []
    if mode == OVERWRITE or replaces:
        keep = {lw.object_id for lw in written.leaves.values()}
        keep |= {oid for lw in written.leaves.values() for oid, _ in lw.new_namespaces}
        if mode != OVERWRITE:
            keep |= {leaf.object_id for leaf in base.leaves()} - set(replaces)
        deletes = _deletes_for_overwrite(base, keep)
        if deletes:
            lock = pa.Table.from_pylist(
                lock_rows({layout.spec_id_of(d) for d in deletes}), schema=base.dataset.schema
            )
            upserts = _dedupe(pa.concat_tables([upserts, lock]))
    return upserts, deletes


def commit_write(
    manifest: Manifest,
    snapshot: Snapshot,
    written: WrittenFiles,
    mode: str = APPEND,
    max_rebase: int = 5,
    replaces: Sequence[str] = (),
) -> Snapshot:
    """Publish ``written`` in one ``__manifest`` commit. Returns the new snapshot.

    Modes: ``append``; ``overwrite`` (the whole namespace becomes exactly this
    write); ``dynamic`` (only the partitions in this write are replaced).
    ``replaces`` lists leaves (object ids) removed in the same commit: moving
    partitions from an older spec into the current one is all-or-nothing.

    Contract: when this returns, the write is visible to every reader of the
    returned version and later ones, all at once; when it raises, no reader of
    any version ever sees any of it (staged leaf versions stay unpublished and
    the next writer or ``vacuum`` reclaims them). A concurrent commit to other
    partitions is rebased over; a concurrent append to the same partition is
    rebased over by an append; anything else raises a retryable
    CommitConflictError.
    """
    if mode not in (APPEND, OVERWRITE, DYNAMIC):
        raise ValueError(f"unknown write mode {mode!r}; use append, overwrite or dynamic")
    if written.snapshot_version != snapshot.version:
        raise PartitionedNamespaceError("files were written against a different snapshot")
    staged = StagedSet(new_txn_id(), manifest.storage_options)
    existing = [lw for lw in written.leaves.values() if not lw.is_new]
    planned: dict[str, Leaf] = {}
    if existing:
        by_id = {leaf.object_id: leaf for leaf in snapshot.leaves()}
        planned = {lw.object_id: by_id[lw.object_id] for lw in existing}
    pause_point("files_written")
    published: int | None = None
    try:
        run_parallel(
            list(written.leaves.values()),
            lambda lw: _stage(snapshot, lw, planned.get(lw.object_id), mode, staged),
            lambda lw, s: staged.leaves.__setitem__(lw.object_id, s),
        )
        pause_point("leaves_staged")
        base = snapshot
        for attempt in range(max_rebase + 1):
            upserts, deletes = _publish_rows(base, written, staged, mode, replaces)
            try:
                published = manifest.commit(base.dataset, upserts, deletes).version
                break
            except CommitConflictError:
                if attempt == max_rebase:
                    raise
                base = _rebase(manifest, snapshot, written, mode, planned, staged)
                _check_replaced_unchanged(snapshot, base, replaces)
    except BaseException:
        if published is None and not staged.landed(manifest, snapshot.version):
            staged.rollback()
        raise
    # Once __manifest is committed the write is published: nothing below may undo it.
    pause_point("published")
    return Snapshot.load(manifest, published)


def _check_replaced_unchanged(planned: Snapshot, latest: Snapshot, replaces: Sequence[str]) -> None:
    """Leaves being replaced must still be exactly what the write read."""
    if not replaces:
        return
    before = {leaf.object_id: leaf for leaf in planned.leaves()}
    now = {leaf.object_id: leaf for leaf in latest.leaves()}
    for oid in replaces:
        if now.get(oid) != before.get(oid):
            raise CommitConflictError(
                f"partition {oid!r} changed while it was being rewritten; retry"
            )


def _dedupe(table: pa.Table) -> pa.Table:
    seen: set[str] = set()
    keep = []
    for i, oid in enumerate(table.column("object_id").to_pylist()):
        if oid not in seen:
            seen.add(oid)
            keep.append(i)
    return table.take(keep)


def _rebase(
    manifest: Manifest,
    planned: Snapshot,
    written: WrittenFiles,
    mode: str,
    published: dict[str, Leaf],
    staged: StagedSet,
) -> Snapshot:
    """Reload the manifest after a conflict and make the write apply on top of it.

    - the schema or spec changed, or a partition this write creates was created
      meanwhile: fail;
    - full overwrite: fail if any partition changed (it would silently erase a
      concurrent write);
    - a touched partition was republished: appends re-stage on the new
      published version (blind appends commute); overwrites fail.
    """
    latest = Snapshot.load(manifest, for_write=True)
    if latest.specs != planned.specs or latest.schema != planned.schema:
        raise CommitConflictError("the namespace schema or partition spec changed during the write")
    by_id = {leaf.object_id: leaf for leaf in latest.leaves()}
    if mode == OVERWRITE:
        before = {leaf.object_id: leaf.version_ref() for leaf in planned.leaves()}
        if before != {oid: leaf.version_ref() for oid, leaf in by_id.items()}:
            raise CommitConflictError(
                "partitions changed concurrently during an overwrite of the whole namespace"
            )
    by_key = {(leaf.spec_id, tuple(leaf.values)) for leaf in by_id.values()}
    for (sid, key), lw in written.leaves.items():
        if lw.is_new:
            if (sid, key) in by_key:
                raise CommitConflictError(
                    f"partition {key} of spec v{sid} was created concurrently by another writer"
                )
            continue
        now = by_id.get(lw.object_id)
        if now is not None and now.version_ref() == published[lw.object_id].version_ref():
            continue
        if now is None or mode != APPEND:
            raise CommitConflictError(
                f"partition {lw.object_id!r} was changed or removed concurrently by another writer"
            )
        uri = latest.leaf_uri(lw.location)
        opts = manifest.storage_options
        staged.leaves[lw.object_id] = stage_leaf(
            uri, published_version(uri, now, opts), _leaf_change(lw, mode), staged.txn, opts
        )
        published[lw.object_id] = now
    log.info("rebased write onto __manifest version %d", latest.version)
    return latest


def abort_write(snapshot: Snapshot, written: WrittenFiles) -> None:
    """Reclaim the files of a write that will not be committed (nothing was staged)."""
    for lw in written.leaves.values():
        uri = snapshot.leaf_uri(lw.location)
        if lw.is_new:
            remove_dir(uri)
        else:
            for frag in _fragments(lw):
                for f in frag.files:
                    remove_file(uri, f.path)


def new_job_secret() -> bytes:
    return secrets.token_bytes(32)
