"""Phase 1 of a write: split rows by partition and write Lance data files, commit nothing.

``PartitionWriter`` (any number, in any process: Spark tasks or the caller)
computes partition keys vectorised, splits batches, buffers rows per
partition within a memory budget and writes Lance data files *without
committing anything*. It returns ``WrittenFiles``: per leaf, the fragments it
wrote, mergeable across writers. ``operations.write.publish`` makes them visible;
``abort_write`` reclaims them when the write will not be published.

New partitions get their namespace names and table directory from a keyed
hash of ``(job secret, spec, key)``: random to an observer, yet identical in
every task of one job, so tasks that meet the same new partition agree on its
location without talking to each other.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import lance
import pyarrow as pa
from lance.fragment import FragmentMetadata, write_fragments

from lance_partitioned.catalog import layout
from lance_partitioned.catalog.layout import derived_hex, derived_namespace_name
from lance_partitioned.catalog.leaf_open import branch_uri, resolve_leaf
from lance_partitioned.catalog.snapshot import Leaf, Snapshot, spec_problem
from lance_partitioned.errors import PartitionedNamespaceError, SpecError
from lance_partitioned.format.spec import PartitionSpec, partition_key
from lance_partitioned.operations.leaf.leaf_schema import WriteMapping, namespace_layout
from lance_partitioned.operations.txn.driver import new_txn_id
from lance_partitioned.operations.txn.parallel import for_each
from lance_partitioned.operations.txn.staged_check import fragment_files
from lance_partitioned.operations.txn.staging import create_leaf
from lance_partitioned.operations.write import resident
from lance_partitioned.operations.write.input import InputConformer, coalesce_batches
from lance_partitioned.operations.write.split import (
    chunk_memory_pool,
    partition_ranges,
    write_memory_pool,
)
from lance_partitioned.operations.write.write_buffers import (
    Key,
    PartitionBuffers,
    Piece,
    chunks_for_lance,
)

log = logging.getLogger(__name__)

# Leaves written at once when buffers are flushed. Lance encodes on its CPU pool
# (cores - 2 threads, at least one; ``LANCE_CPU_THREADS``), shared by all of them.
FINISH_THREADS = 4
# Rows handed to Lance per batch when a partition's buffer is written; a chunk is
# also at most 1/16 of the buffer budget (between 1 and 8 MiB).
WRITE_CHUNK_ROWS = 1 << 16
# Buffered pieces of at least this many rows go to Lance as they are; runs of smaller
# ones are concatenated into chunks first. Lance's cost per batch is paid on its one
# encoding thread (its CPU pool is cores - 2, at least 1), while our copy runs on
# the flush threads beside it: on TPC-H SF1 by month (1,350-row pieces) passing
# pieces of 1,024+ rows through cost 0.7 CPU-s and 0.2 s more than concatenating.
PASS_THROUGH_ROWS = WRITE_CHUNK_ROWS
# The resident-memory rule (``PartitionWriter._over_budget``) flushes only while at
# least 1/RESIDENT_MIN_SHARE of the budget is buffered: memory the writer cannot
# free (someone else's) must not shrink its files to a trickle.
RESIDENT_MIN_SHARE = 4

# a split input batch: reordered by partition, each partition's (key, start, length),
# and the bytes the reordered batch holds
SplitBatch = tuple[pa.RecordBatch, list[tuple[Key, int, int]], int]

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
    # directory and the staged version to its history (``leaf_open.resolve_leaf``).
    branch: str | None = None
    # The published version this write builds on, as opened to map its columns
    # (``PartitionWriter._leaf_mapping``): staging commits on it instead of opening
    # the leaf again (each open is a listing plus a read on object stores). Never
    # pickled (Spark ships LeafWrites between processes) and never merged.
    opened: lance.LanceDataset | None = field(default=None, repr=False, compare=False)
    # The ``__manifest`` row of an existing leaf, as the writer found it in the
    # snapshot the write is planned against (``WrittenFiles.snapshot_version``):
    # the commit uses it instead of looking the row up again (at a million
    # partitions, 1,000 such lookups cost ~150 ms).
    published: Leaf | None = field(default=None, repr=False, compare=False)
    # An existing leaf's ``fragments`` as written, by JSON: its commit skips decoding
    # them (~30 us a leaf). Not a new leaf's (a million: ~0.7 GB). Never pickled.
    decoded: dict[str, FragmentMetadata] = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "opened": None, "decoded": {}}

    # Set when the writer created the new leaf's dataset itself
    # (``staging.create_leaf``): this version is staged already, tagged with
    # ``WrittenFiles.txn``, and publishing only records it.
    created_version: int | None = None
    # That version's data files, for the check before publishing: all a created leaf
    # keeps (no ``fragments``, whose JSON cost a tenth of the time per tiny leaf).
    created_files: frozenset[str] = frozenset()

    def add_fragments(self, fragments: Iterable[FragmentMetadata]) -> None:
        """Record written fragments (as JSON; an existing leaf's also as objects)."""
        for frag in fragments:
            self.fragments.append(text := json.dumps(frag.to_json()))
            if not self.is_new:
                self.decoded[text] = frag

    def fragment_metadata(self) -> list[FragmentMetadata]:
        """The written fragments, decoded (read-only: the objects are shared, not copies)."""
        return [self.decoded.get(f) or FragmentMetadata.from_json(f) for f in self.fragments]

    def files_uri(self, snapshot: Snapshot) -> str:
        """Where this write's data files go: the leaf, or its branch's directory."""
        return branch_uri(snapshot.leaf_uri(self.location), self.branch)


@dataclass
class WrittenFiles:
    """Everything one job wrote, keyed by (spec_id, partition key). Mergeable across tasks."""

    snapshot_version: int
    leaves: dict[tuple[int, tuple[Any, ...]], LeafWrite] = field(default_factory=dict)
    # The transaction id the leaves a writer created carry (``LeafWrite.created_version``);
    # the publishing transaction takes it. None when no writer creates leaves.
    txn: str | None = None

    def merge(self, other: WrittenFiles) -> WrittenFiles:
        if other.snapshot_version != self.snapshot_version:
            raise PartitionedNamespaceError(
                f"cannot merge writes planned against manifest versions {self.snapshot_version} "
                f"and {other.snapshot_version}"
            )
        self.txn = self.txn or other.txn
        for (sid, key), leaf_write in other.leaves.items():
            # keys arrive pickled from other processes: a NaN there is another object
            k = (sid, partition_key(key))
            leaf_write.key = k[1]
            mine = self.leaves.get(k)
            if mine is None:
                self.leaves[k] = leaf_write
            elif mine.created_version is not None or leaf_write.created_version is not None:
                # a created leaf's version holds its writer's rows only
                raise PartitionedNamespaceError(
                    f"partition {leaf_write.object_id!r} was created by one writer and written "
                    "by another: writers sharing a job must not create leaves"
                )
            else:
                mine.fragments.extend(leaf_write.fragments)
                mine.decoded.update(leaf_write.decoded)
                mine.rows += leaf_write.rows
        return self

    @property
    def rows(self) -> int:
        return sum(leaf_write.rows for leaf_write in self.leaves.values())


# -- phase 1: writing files ---------------------------------------------------


class PartitionResolver:
    """Maps partition keys of the current spec to existing leaves or new locations.

    Keys are looked up in ``__manifest`` as writes meet them, a batch at a time
    (``prefetch``; an indexed query, ``Snapshot.rows_for_keys``), so a write
    touching a few partitions costs a few lookups however big the namespace
    is. Past ``KEY_LOOKUP_LIMIT`` keys, or for keys an index cannot look up,
    every row of the spec is read once instead.
    """

    KEY_LOOKUP_LIMIT = 2_000

    def __init__(self, snapshot: Snapshot, secret: bytes, replacing: Collection[str] = ()):
        self.snapshot = snapshot
        self.spec: PartitionSpec = snapshot.current_spec
        self.secret = secret
        # leaves this write replaces get a new leaf, never an append
        self._replacing = set(replacing)
        self._leaves: dict[tuple[Any, ...], Leaf] = {}
        self._namespaces: dict[tuple[Any, ...], str] = {}
        self._looked_up: set[tuple[Any, ...]] = set()
        self._complete = False  # every row of the spec is loaded

    def prefetch(self, keys: Iterable[tuple[Any, ...]]) -> None:
        """Look up the rows of the keys not looked up yet, in one query."""
        if self._complete:
            return
        todo = [k for k in dict.fromkeys(keys) if k not in self._looked_up]
        if not todo:
            return
        sid = self.spec.spec_id
        found = None
        if len(self._looked_up) + len(todo) <= self.KEY_LOOKUP_LIMIT:
            found = self.snapshot.rows_for_keys(sid, todo)
        if found is None:
            found = (self.snapshot.leaves_of_spec(sid), self.snapshot.namespace_rows(sid))
            self._complete = True
        self._looked_up.update(todo)
        leaves, ns_table = found
        for leaf in leaves:
            if leaf.object_id not in self._replacing:
                self._leaves[partition_key(leaf.values)] = leaf
        ns_rows = ns_table.to_pydict()
        cols = [f.column for f in self.spec.fields]
        for i, oid in enumerate(ns_rows["object_id"]):
            depth = len(layout.split_id(oid)) - 1
            if depth < 1:
                continue
            prefix = partition_key(ns_rows[c][i] if c in ns_rows else None for c in cols[:depth])
            self._namespaces[prefix] = oid

    def resolve(self, key: tuple[Any, ...]) -> LeafWrite:
        """The leaf ``key`` writes into: an existing one, or a new location."""
        self.prefetch([key])
        spec = self.spec
        existing: Leaf | None = self._leaves.get(key)
        if existing is not None:
            target = resolve_leaf(
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
                published=existing,
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
    input touches and however long the input is (``_over_budget``; the rule is
    docs/TRANSACTIONS.md "Memory of a write"), and each flush round hands the
    memory it freed back to the OS (``release_freed_memory``).

    With ``create_leaves`` (only for the one writer of a job: writers that
    share new partition directories must not), a new partition whose rows are
    all written by ``finish`` gets its dataset created right there, in one
    Lance call (``staging.create_leaf``) instead of files now and a staging
    commit at publish time; the created version stays unpublished until the
    job's ``__manifest`` commit, like any staged version. Used only when
    Lance's own field numbering gives the namespace's ids (else the two-step
    ``stage_new_leaf`` is needed).
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
        create_leaves: bool = False,
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
        self.buffers = PartitionBuffers(write_memory_pool())
        self._chunk_bytes = max(1 << 20, min(8 << 20, max_buffer_bytes // 16))
        # Rows buffered may use the budget less the chunks a flush round hands Lance
        # (one per leaf being written): the written rows' batches are freed only at
        # the end of a round (``PartitionBuffers.compact``), so those copies come on top.
        self._row_budget = max_buffer_bytes - FINISH_THREADS * self._chunk_bytes
        # resident memory when the write began: its growth is the write's (``_over_budget``)
        self._resident_base = resident.resident_bytes()
        self._new_layout = namespace_layout(snapshot.schema)
        self._mappings: dict[str, tuple[WriteMapping, str | None, lance.LanceDataset]] = {}
        self._create = create_leaves and self._new_layout.is_natural
        if self._create:
            self.result.txn = new_txn_id()

    def write(self, batch: pa.RecordBatch) -> None:
        """Accept one batch (any column order; cast to the namespace schema)."""
        self._accept(batch.num_rows, self._split(batch))

    def write_all(self, batches: Iterable[pa.RecordBatch], threads: int = 2) -> None:
        """Accept a stream of batches, splitting up to ``threads`` of them at once.

        Small batches are first coalesced (``coalesce_batches``, up to a chunk of the
        budget, see ``_chunk_bytes``). Splitting is
        CPU-bound Arrow work that releases the GIL; buffering stays in order on
        this thread, and at most ``threads`` batches are in flight.
        """
        with ThreadPoolExecutor(threads) as pool:
            pending: list[tuple[int, Any]] = []
            for batch in coalesce_batches(
                batches, max_bytes=self._chunk_bytes, memory_pool=write_memory_pool()
            ):
                pending.append((batch.num_rows, pool.submit(self._split, batch)))
                if len(pending) >= threads:
                    rows, fut = pending.pop(0)
                    self._accept(rows, fut.result())
            for rows, fut in pending:
                self._accept(rows, fut.result())

    def _split(self, batch: pa.RecordBatch) -> SplitBatch:
        """``batch`` reordered by partition, its ranges and the bytes it holds (split threads)."""
        batch = self.conform(batch)
        keys = [f.values(batch, self.snapshot.schema) for f in self.spec.fields]
        ordered, ranges = partition_ranges(batch, keys)
        # A reordered batch is our own compact allocation: its buffers' size is exact
        # and free to read (nbytes walks every string's offsets). A batch of one
        # partition is the input itself, maybe a slice of far larger buffers: the
        # bytes it spans.
        held = ordered.nbytes if ordered is batch else ordered.get_total_buffer_size()
        return ordered, ranges, held

    def _accept(self, num_rows: int, split: SplitBatch) -> None:
        ordered, ranges, held = split
        self.resolver.prefetch(key for key, _, _ in ranges)  # one __manifest lookup per batch
        for key, _, _ in ranges:
            if (self.spec.spec_id, key) not in self.result.leaves:
                self.result.leaves[(self.spec.spec_id, key)] = self.resolver.resolve(key)
        self.buffers.add(ordered, ranges, held)
        full = [key for key, _, _ in ranges if self.buffers.rows(key) >= self.max_rows_per_file]
        if full:
            self._flush_many(full)
        if self.progress:
            self.progress(num_rows)
        if self._over_budget():
            # Over the row budget: the largest buffers, down to half the budget, in one
            # go (fewer rounds of small writes; leaves written in parallel). Over the
            # resident budget: all of them, since pieces left behind keep allocator
            # pages resident (SF3: the same peak as halving, in fewer, larger rounds).
            keys, left = [], self.buffers.total_bytes
            over_rows = self.buffers.total_bytes > self._row_budget
            target = self._row_budget // 2 if over_rows else 0
            for key, size in self.buffers.largest_first():
                if left <= target:
                    break
                keys.append(key)
                left -= size
            self._flush_many(keys)
            # the rows left share batches with the rows just written: copy them out
            # so that memory is freed (``PartitionBuffers.compact``)
            self.buffers.compact()
            release_freed_memory()

    def _over_budget(self) -> bool:
        """Whether to flush now: the buffered rows exceed the budget (less the chunks a
        flush hands Lance, ``_row_budget``), or (Linux) the
        process's resident memory grew by more than the budget since the writer was
        made while at least 1/RESIDENT_MIN_SHARE of it is buffered.

        The resident rule covers what the Arrow count misses and what grew with the
        input: allocator overhead of the many small split pieces, the reader's
        buffers, the heap of Lance's threads. With the Arrow count alone a 1 GiB
        write of TPC-H SF3 peaked at 1.9 GiB resident (``results/memory.md``).
        """
        if self.buffers.total_bytes > self._row_budget:
            return True
        if (
            self._resident_base is None
            or self.buffers.total_bytes < self.max_buffer_bytes // RESIDENT_MIN_SHARE
        ):
            return False
        now = resident.resident_bytes()
        return now is not None and now - self._resident_base > self.max_buffer_bytes

    def _flush_many(self, keys: list[tuple[Any, ...]], last: bool = False) -> None:
        """Write the buffers of ``keys``, up to ``FINISH_THREADS`` leaves at once.

        Each buffer stays counted in ``buffers.total_bytes`` until its rows are
        written, so the budget always covers what is really held.
        """
        if len(keys) > 1:
            for_each(keys, lambda key: self._flush(key, last), min(FINISH_THREADS, len(keys)))
        else:
            for key in keys:
                self._flush(key, last)

    def _flush(self, key: tuple[Any, ...], last: bool = False) -> None:
        """Write one partition's buffer and only then release it from the budget."""
        pieces = self.buffers.pop(key)
        try:
            self._write_files(key, list(pieces), last)
        finally:
            self.buffers.release(pieces)

    def _write_files(self, key: tuple[Any, ...], pieces: list[Piece], last: bool = False) -> None:
        """Write one partition's buffered rows as Lance data files (thread-safe per key).

        ``pieces`` is consumed: rows are handed to Lance in chunks of at most
        ``WRITE_CHUNK_ROWS`` rows and ``_chunk_bytes`` (``chunks_for_lance``), so a
        flush copies one chunk at a time rather than the whole partition.
        ``last``: no more rows will come for ``key`` (``finish``), so a new leaf
        with no files yet may be created at once (``create_leaves``).
        """
        if not pieces:
            return
        leaf_write = self.result.leaves[(self.spec.spec_id, key)]
        rows = sum(p.length for p in pieces)
        if leaf_write.is_new:
            layout, storage_version, mode = self._new_layout, None, "create"
            target: Any = leaf_write.files_uri(self.snapshot)

            def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
                return _relabel(batch, layout.arrow)
        else:
            mapping, storage_version, target = self._leaf_mapping(leaf_write)
            layout, mode = mapping.layout, "overwrite"

            def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
                return mapping.conform(pa.Table.from_batches([batch])).to_batches()[0]

        failed: list[BaseException] = []

        def conformed() -> Iterator[pa.RecordBatch]:
            try:
                for chunk in chunks_for_lance(
                    pieces,
                    WRITE_CHUNK_ROWS,
                    self._chunk_bytes,
                    PASS_THROUGH_ROWS,
                    chunk_memory_pool(),
                ):
                    yield conform(chunk)
            except BaseException as exc:  # Lance would re-raise it as an OSError
                failed.append(exc)
                raise

        chunks: Iterable[pa.RecordBatch] = conformed()
        if not leaf_write.is_new:
            # conformed before Lance starts: a refused value (an older leaf's narrower
            # type) must fail before any file is written into the existing leaf
            chunks = list(chunks)
        reader = pa.RecordBatchReader.from_batches(layout.arrow, chunks)
        try:
            self._write_reader(
                leaf_write, reader, rows, layout, storage_version, mode, target, last
            )
        except Exception:
            if failed:  # our own error (e.g. a refused cast), not Lance's wrapping of it
                raise failed[0] from None
            raise

    def _write_reader(
        self,
        leaf_write: LeafWrite,
        reader: pa.RecordBatchReader,
        rows: int,
        layout: Any,
        storage_version: str | None,
        mode: str,
        target: Any,
        last: bool,
    ) -> None:
        """Hand ``reader``'s rows to Lance: a new leaf's dataset, or data files."""
        if last and self._create and leaf_write.is_new and not leaf_write.fragments:
            self._create_leaf(leaf_write, reader, rows)
            return
        # Files get Lance's own numbering of these columns (not checked against
        # the leaf's latest version, which may hold someone's unpublished
        # change), then the fragment metadata maps them to the leaf's ids.
        frags = write_fragments(
            reader,
            target,  # an existing leaf as opened: spares Lance opening it again
            schema=layout.arrow,
            mode=mode,
            max_rows_per_file=self.max_rows_per_file,
            data_storage_version=storage_version,
            storage_options=self.snapshot.manifest.storage_options,
        )
        leaf_write.add_fragments(layout.remap(frags))
        leaf_write.rows += rows

    def _create_leaf(self, leaf_write: LeafWrite, reader: pa.RecordBatchReader, rows: int) -> None:
        """Create the new leaf's dataset with ``reader``'s ``rows`` rows as its staged version 1."""
        assert self.result.txn is not None
        # A leaf of one chunk is handed over as a table: Lance then never calls back
        # into Python (and waits for the GIL) from its own threads to pull the rows
        source: pa.RecordBatchReader | pa.Table = (
            reader.read_all() if rows <= WRITE_CHUNK_ROWS else reader
        )
        ds = create_leaf(
            leaf_write.files_uri(self.snapshot),
            source,
            self._new_layout,
            self.result.txn,
            self.snapshot.manifest.storage_options,
            self.max_rows_per_file,
        )
        frags = [f.metadata for f in ds.get_fragments()]
        leaf_write.created_files = frozenset(fragment_files(frags))
        leaf_write.rows += rows
        leaf_write.created_version = ds.version

    def _leaf_mapping(
        self, leaf_write: LeafWrite
    ) -> tuple[WriteMapping, str | None, lance.LanceDataset]:
        """An existing leaf keeps its columns and ids, plus the namespace columns it lacks."""
        hit = self._mappings.get(leaf_write.object_id)
        if hit is None:
            leaf = lance.dataset(
                leaf_write.files_uri(self.snapshot),
                version=leaf_write.base_version,
                storage_options=self.snapshot.manifest.storage_options,
            )
            hit = (
                WriteMapping(self.snapshot.schema, leaf, leaf_write.object_id),
                leaf.data_storage_version,
                leaf,
            )
            self._mappings[leaf_write.object_id] = hit
            if leaf_write.base_version is not None:
                leaf_write.opened = leaf
        return hit

    def finish(self) -> WrittenFiles:
        """Flush every buffer (partitions in parallel) and return what was written."""
        self._flush_many(self.buffers.keys(), last=True)
        release_freed_memory()
        return self.result


def release_freed_memory() -> None:
    """Hand the memory a flush freed back to the OS.

    Arrow's allocator (mimalloc or jemalloc) and glibc's heap (Lance's Rust
    allocations, ``resident.trim_heap``) otherwise keep freed pages for reuse,
    and with the next round's batches landing elsewhere the process's resident
    memory ratchets up flush after flush (``benchmarks/memory_bench.py``).
    """
    pa.default_memory_pool().release_unused()
    write_memory_pool().release_unused()
    # also returns what the chunk pool (glibc's malloc, ``chunk_memory_pool``) freed:
    # its own ``release_unused`` would be the same ``malloc_trim`` a second time
    resident.trim_heap()


def _relabel(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` under ``schema`` (names, nullability, field metadata), without copying.

    A new leaf's layout differs from the namespace schema only in field metadata;
    ``RecordBatch.cast`` would still run a cast kernel per column and batch.
    """
    if batch.schema.equals(schema, check_metadata=True):
        return batch
    same_types = [f.type for f in batch.schema] == [f.type for f in schema]
    if same_types and all(
        f.nullable or not c.null_count for f, c in zip(schema, batch.columns, strict=True)
    ):
        return pa.RecordBatch.from_arrays(batch.columns, schema=schema)
    return batch.cast(schema)


def new_job_secret() -> bytes:
    return secrets.token_bytes(32)
