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

import json
import logging
import secrets
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import lance
import pyarrow as pa
from lance.fragment import FragmentMetadata, write_fragments

from lance_partitioned.catalog import layout
from lance_partitioned.catalog.layout import derived_hex, derived_namespace_name
from lance_partitioned.catalog.manifest import Manifest, lock_rows, with_read_mirror
from lance_partitioned.catalog.mirror import mirror_metadata
from lance_partitioned.catalog.snapshot import Leaf, Snapshot, spec_problem
from lance_partitioned.errors import CommitConflictError, PartitionedNamespaceError, SpecError
from lance_partitioned.format.spec import PartitionSpec
from lance_partitioned.operations import leases
from lance_partitioned.operations.branches import branch_uri, leaf_target
from lance_partitioned.operations.field_ids import IdLayout
from lance_partitioned.operations.input import InputConformer, coalesce_batches
from lance_partitioned.operations.leaf_schema import (
    WriteMapping,
    namespace_layout,
)
from lance_partitioned.operations.leases import Lease
from lance_partitioned.operations.split import split_by_keys
from lance_partitioned.operations.transaction import (
    AppendFiles,
    LeafChange,
    ReplaceFiles,
    StagedLeaf,
    StagedSet,
    new_txn_id,
    pause_point,
    remove_dir,
    remove_file,
    run_parallel,
    stage_leaf,
    stage_new_leaf,
    txn_versions,
)

log = logging.getLogger(__name__)

APPEND, OVERWRITE, DYNAMIC = "append", "overwrite", "dynamic"

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
    # The Lance branch the leaf is published on (None: main): files go to its
    # directory and the staged version to its history (``branches.leaf_target``).
    branch: str | None = None

    def files_uri(self, snapshot: Snapshot) -> str:
        """Where this write's data files go: the leaf, or its branch's directory."""
        return branch_uri(snapshot.leaf_uri(self.location), self.branch)


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

    def __init__(self, snapshot: Snapshot, secret: bytes, replacing: Collection[str] = ()):
        self.snapshot = snapshot
        self.spec: PartitionSpec = snapshot.current_spec
        self.secret = secret
        # leaves this write replaces get a new leaf, never an append
        self._leaves = {
            tuple(leaf.values): leaf
            for leaf in snapshot.leaves_of_spec(self.spec.spec_id)
            if leaf.object_id not in replacing
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
            target = leaf_target(
                self.snapshot.leaf_uri(existing.location),
                existing,
                self.snapshot.manifest.storage_options,
            )
            return LeafWrite(
                spec.spec_id,
                key,
                existing.object_id,
                existing.location,
                is_new=False,
                base_version=target.published,
                new_namespaces=[],
                branch=target.branch,
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
        replacing: Collection[str] = (),
    ):
        problem = spec_problem(snapshot)
        if problem is not None:  # e.g. a source id not in the schema: every key would be NULL
            raise SpecError(f"refusing to write to {snapshot.manifest.root!r}: {problem}")
        self.snapshot = snapshot
        self.spec = snapshot.current_spec
        self.conform = InputConformer(snapshot.schema)
        self.resolver = PartitionResolver(snapshot, secret, replacing)
        self.max_buffer_bytes = max_buffer_bytes
        self.max_rows_per_file = max_rows_per_file
        self.progress = progress
        self.result = WrittenFiles(snapshot.version)
        self._buffers: dict[tuple[Any, ...], list[pa.RecordBatch]] = {}
        self._buffer_bytes: dict[tuple[Any, ...], int] = {}
        self._buffer_rows: dict[tuple[Any, ...], int] = {}
        self._total_bytes = 0
        self._new_layout = namespace_layout(snapshot.schema)
        self._mappings: dict[str, tuple[WriteMapping, str | None]] = {}

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
        if lw.is_new:
            layout, storage_version, mode = self._new_layout, None, "create"
            table = table.cast(layout.arrow)
        else:
            mapping, storage_version = self._leaf_mapping(lw)
            layout, mode = mapping.layout, "overwrite"
            table = mapping.conform(table)
        # Files get Lance's own numbering of these columns (not checked against
        # the leaf's latest version, which may hold someone's unpublished
        # change), then the fragment metadata maps them to the leaf's ids.
        frags = write_fragments(
            table,
            lw.files_uri(self.snapshot),
            schema=layout.arrow,
            mode=mode,
            max_rows_per_file=self.max_rows_per_file,
            data_storage_version=storage_version,
            storage_options=self.snapshot.manifest.storage_options,
        )
        lw.fragments.extend(json.dumps(f.to_json()) for f in layout.remap(frags))
        lw.rows += table.num_rows

    def _leaf_mapping(self, lw: LeafWrite) -> tuple[WriteMapping, str | None]:
        """An existing leaf keeps its columns and ids, plus the namespace columns it lacks."""
        hit = self._mappings.get(lw.object_id)
        if hit is None:
            leaf = lance.dataset(
                lw.files_uri(self.snapshot),
                version=lw.base_version,
                storage_options=self.snapshot.manifest.storage_options,
            )
            hit = (
                WriteMapping(self.snapshot.schema, leaf, lw.object_id),
                leaf.data_storage_version,
            )
            self._mappings[lw.object_id] = hit
        return hit

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


def _leaf_change(lw: LeafWrite, mode: str, snapshot: Snapshot) -> LeafChange:
    frags = _fragments(lw)
    # existing leaves keep their own columns and ids, which the files were
    # written with, and gain the namespace columns they lack (metadata only)
    if mode == APPEND:
        return AppendFiles(frags, snapshot.schema, lw.object_id)
    return ReplaceFiles(None, frags, snapshot.schema, lw.object_id)


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
        layout: IdLayout = namespace_layout(snapshot.schema)
        return stage_new_leaf(uri, layout, _fragments(lw), staged.txn, opts)
    assert published is not None
    return _stage_existing(uri, lw, published, mode, staged, opts, snapshot)


def _stage_existing(
    uri: str,
    lw: LeafWrite,
    published: Leaf,
    mode: str,
    staged: StagedSet,
    opts: dict[str, str] | None,
    snapshot: Snapshot,
) -> StagedLeaf:
    """Stage ``lw`` on the published content of an existing leaf (on its branch, if any)."""
    target = leaf_target(uri, published, opts)
    if target.branch != lw.branch:
        # the files were written into the other branch's directory
        raise CommitConflictError(
            f"partition {lw.object_id!r} moved from branch {lw.branch or 'main'!r} to "
            f"{target.branch or 'main'!r} while it was being written; retry the write"
        )
    return stage_leaf(
        target.uri,
        target.published,
        _leaf_change(lw, mode, snapshot),
        staged.txn,
        opts,
        branch=target.branch,
    )


def _manifest_rows(
    snapshot: Snapshot,
    written: WrittenFiles,
    versions: dict[str, int],
    branches: dict[str, str | None] | None = None,
) -> pa.Table:
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
        # a branch-pinned leaf stays on its branch (seed 000: read_branch + read_version)
        branch = (branches or {}).get(lw.object_id)
        row = {
            "object_id": lw.object_id,
            "object_type": "table",
            "location": lw.location,
            "metadata": with_read_mirror(
                mirror_metadata({f.field_id: v for f, v in zip(spec.fields, lw.key, strict=True)}),
                version,
                branch,
            ),
            "read_version": version,
            "read_branch": branch,
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
    branches = {oid: s.branch for oid, s in staged.leaves.items()}
    upserts = _manifest_rows(base, written, versions, branches)
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
    lease: Lease | None = None,
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

    ``lease`` is the lease the caller took before writing the files
    (``operations.leases``); without one, a lease is taken here, which protects
    the staged versions but not files written before the call. Right before
    publishing, every staged version and file must still exist and the lease
    must hold, else nothing is published (StagedFilesMissingError, LeaseLostError).
    """
    if mode not in (APPEND, OVERWRITE, DYNAMIC):
        raise ValueError(f"unknown write mode {mode!r}; use append, overwrite or dynamic")
    if written.snapshot_version != snapshot.version:
        raise PartitionedNamespaceError("files were written against a different snapshot")
    staged = StagedSet(new_txn_id(), manifest.storage_options, lease=lease)
    existing = [lw for lw in written.leaves.values() if not lw.is_new]
    planned: dict[str, Leaf] = {}
    if existing:
        by_id = {leaf.object_id: leaf for leaf in snapshot.leaves()}
        planned = {lw.object_id: by_id[lw.object_id] for lw in existing}
    pause_point("files_written")
    published: int | None = None
    own = leases.acquire(manifest, f"{mode} commit") if lease is None else None
    staged.lease = lease or own
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
            staged.before_publish()
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
            _discard_unstaged(snapshot, written, staged)
        raise
    finally:
        if own is not None:
            own.release()
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
        staged.leaves[lw.object_id] = _stage_existing(
            uri, lw, now, mode, staged, manifest.storage_options, latest
        )
        published[lw.object_id] = now
    log.info("rebased write onto __manifest version %d", latest.version)
    return latest


def abort_write(snapshot: Snapshot, written: WrittenFiles, only: set[str] | None = None) -> None:
    """Reclaim the files of a write that will not be committed, for leaves nothing was staged on.

    ``only`` limits it to those leaves (object ids); None means every leaf.
    """
    for lw in written.leaves.values():
        if only is not None and lw.object_id not in only:
            continue
        if lw.is_new:
            remove_dir(snapshot.leaf_uri(lw.location))
        else:
            for frag in _fragments(lw):
                for f in frag.files:
                    remove_file(lw.files_uri(snapshot), f.path)


def _discard_unstaged(snapshot: Snapshot, written: WrittenFiles, staged: StagedSet) -> None:
    """After a failed commit: delete the files of leaves staging never reached.

    Staging stops at the first failure, so some leaves may still hold only our
    written files (a new leaf directory, or files under an existing leaf's
    ``data/``). A failed write leaves nothing behind. Files a version of this
    transaction references (a staging attempt that landed and was retried) are
    kept: deleting them would leave that version dangling; ``vacuum`` removes both.
    """
    opts = snapshot.manifest.storage_options
    only: set[str] = set()
    for lw in written.leaves.values():
        if lw.object_id in staged.leaves:
            continue
        if not lw.is_new:
            uri = lw.files_uri(snapshot)
            try:
                if txn_versions(uri, lw.base_version or 0, staged.txn, opts):
                    continue
            except Exception as exc:  # cannot tell: keeping files is the safe side
                log.warning("keeping the written files of %s: %s", lw.object_id, exc)
                continue
        only.add(lw.object_id)
    abort_write(snapshot, written, only=only)


def new_job_secret() -> bytes:
    return secrets.token_bytes(32)
