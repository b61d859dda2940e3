"""Executing one group of a storage-partitioned join, on any worker.

``GroupRunner`` joins the leaves of one ``Group`` (or of a fallback part) with a
local pyarrow hash join, hash-splitting groups larger than memory into spill
files (``sub_partition``); ``SideReader`` reads one input's leaves at their
pinned versions. Both are picklable, so an engine (``spark.storage_partitioned_join``) ships them to
its tasks. ``planning.execute_local`` runs a whole plan in this process.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.format import hashing
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionSpec
from lance_partitioned.operations.read.scan import Scan

# pyarrow's names for the local hash join.
ARROW_JOIN_TYPE = {
    "inner": "inner",
    "left": "left outer",
    "right": "right outer",
    "full": "full outer",
    "semi": "left semi",
    "anti": "left anti",
}
_OUT_BATCH_ROWS = 1 << 16


@dataclass(frozen=True)
class Group:
    """Leaves of both sides that can only join each other; one engine task."""

    key: tuple[Any, ...]
    left: tuple[Leaf, ...]
    right: tuple[Leaf, ...]
    left_rows: int | None = None
    right_rows: int | None = None
    parts: int = 1  # >1: the task joins this many hash sub-partitions one at a time

    @property
    def rows(self) -> int | None:
        if self.left_rows is None or self.right_rows is None:
            return None
        return self.left_rows + self.right_rows


@dataclass(frozen=True)
class OutputColumn:
    """One output column: ``left``/``right`` column ``source``, or ``coalesce`` of a key pair."""

    name: str
    origin: str  # left | right | coalesce
    left: str | None
    right: str | None
    type: pa.DataType
    nullable: bool


# -- execution of one group (any worker) -------------------------------------------


class SideReader:
    """Reads leaves of one side at their pinned versions, filtered, in namespace form.

    Picklable: it carries the manifest location, schema, specs and filter, not
    Lance handles; the ``Scan`` it reuses is rebuilt once per process.
    """

    def __init__(
        self,
        manifest: Manifest,
        schema: Schema,
        specs: dict[int, PartitionSpec],
        filter: Expr | None,
        columns: Sequence[str],
    ):
        self.manifest = manifest
        self.schema = schema
        self.specs = specs
        self.filter = filter
        self.columns = tuple(columns)
        self._scan: Scan | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_scan"} | {"_scan": None}

    @property
    def scan(self) -> Scan:
        if self._scan is None:
            # A snapshot without its __manifest handle: reading a leaf needs only the
            # leaf's location and pinned version, which the Leaf carries.
            snap = Snapshot(self.manifest, None, self.schema, self.specs)  # type: ignore[arg-type]
            self._scan = Scan(snap, self.filter, self.columns)
        return self._scan

    @property
    def arrow_schema(self) -> pa.Schema:
        return self.scan.output_schema

    def batches(self, leaves: Iterable[Leaf]) -> Iterator[pa.RecordBatch]:
        for lf in leaves:
            yield from self.scan._leaf_batches(lf)

    def table(self, leaves: Iterable[Leaf]) -> pa.Table:
        return pa.Table.from_batches(list(self.batches(leaves)), schema=self.arrow_schema)


@dataclass(frozen=True)
class GroupRunner:
    """Joins the leaves of one group (or of a fallback part) with a local hash join.

    Keys are cast to a common type; the hash join runs on keys plus row indices
    only (pyarrow cannot carry list/struct payloads through a join), and the
    payload is gathered with ``take``. A group marked with ``parts > 1`` is first
    hash-partitioned on the keys into that many spill files per side, then joined
    one sub-partition at a time: the rows of equal keys always meet, so every
    join type stays exact while memory holds about one sub-partition.
    """

    how: str
    left: SideReader
    right: SideReader
    left_keys: tuple[str, ...]
    right_keys: tuple[str, ...]
    key_types: tuple[pa.DataType, ...]
    output: tuple[OutputColumn, ...]
    spill_dir: str | None = None

    @property
    def output_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.output])

    def run(self, group: Group) -> Iterator[pa.RecordBatch]:
        """The joined rows of ``group`` in ``output_schema``."""
        if group.parts <= 1:
            yield from self.join_tables(self.left.table(group.left), self.right.table(group.right))
            return
        tmp = tempfile.mkdtemp(prefix="lp_spj_", dir=self.spill_dir)
        try:
            lfiles = self._spill(self.left, group.left, self.left_keys, group.parts, tmp, "l")
            rfiles = self._spill(self.right, group.right, self.right_keys, group.parts, tmp, "r")
            for lpath, rpath in zip(lfiles, rfiles, strict=True):
                yield from self.join_tables(_read_ipc(lpath), _read_ipc(rpath))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _spill(
        self,
        reader: SideReader,
        leaves: Sequence[Leaf],
        keys: Sequence[str],
        parts: int,
        tmp: str,
        tag: str,
    ) -> list[str]:
        """Hash-partition one side's rows of a group into ``parts`` Arrow IPC files."""
        schema = reader.arrow_schema
        paths = [os.path.join(tmp, f"{tag}{i}.arrow") for i in range(parts)]
        writers = [pa.ipc.new_file(p, schema) for p in paths]
        try:
            for batch in reader.batches(leaves):
                if not batch.num_rows:
                    continue
                ids = sub_partition([batch.column(k) for k in keys], self.key_types, parts)
                order = np.argsort(ids, kind="stable")
                bounds = np.searchsorted(ids[order], np.arange(parts + 1))
                sorted_batch = batch.take(pa.array(order))
                for i in range(parts):
                    lo, hi = int(bounds[i]), int(bounds[i + 1])
                    if hi > lo:
                        writers[i].write_batch(sorted_batch.slice(lo, hi - lo))
        finally:
            for w in writers:
                w.close()
        return paths

    def join_tables(self, left: pa.Table, right: pa.Table) -> Iterator[pa.RecordBatch]:
        """Join two in-memory tables of this runner's sides (SQL semantics: NULL keys never match)."""
        left_keyed = _key_table(left, self.left_keys, self.key_types, "l", "__li")
        right_keyed = _key_table(right, self.right_keys, self.key_types, "r", "__ri")
        n = len(self.key_types)
        joined = left_keyed.join(
            right_keyed,
            keys=[f"l{i}" for i in range(n)],
            right_keys=[f"r{i}" for i in range(n)],
            join_type=ARROW_JOIN_TYPE[self.how],
            coalesce_keys=False,
            use_threads=True,
        )
        # Acero emits matches in hash order, in many small chunks. One index array in
        # the storage order of the larger side makes take() sequential: several times
        # faster than gathering at random, for the cost of sorting the indices.
        left_rows = joined.column("__li").combine_chunks()
        right_rows = None
        if self.how not in ("semi", "anti"):
            right_rows = joined.column("__ri").combine_chunks()
            larger = right_rows if right.num_rows >= left.num_rows else left_rows
            order = pc.sort_indices(larger)
            left_rows, right_rows = left_rows.take(order), right_rows.take(order)
        left_taken = left.take(left_rows)
        right_taken = right.take(right_rows) if right_rows is not None else None
        arrays = []
        for c in self.output:
            if c.origin == "left":
                col = left_taken.column(c.left)
            elif c.origin == "right":
                col = right_taken.column(c.right)
            else:
                col = pc.coalesce(
                    left_taken.column(c.left).cast(c.type), right_taken.column(c.right).cast(c.type)
                )
            arrays.append(col if col.type.equals(c.type) else col.cast(c.type))
        table = pa.Table.from_arrays(arrays, schema=self.output_schema)
        yield from table.to_batches(max_chunksize=_OUT_BATCH_ROWS)


def _key_table(
    t: pa.Table, keys: Sequence[str], types: Sequence[pa.DataType], prefix: str, index: str
) -> pa.Table:
    cols = {}
    for i, (k, typ) in enumerate(zip(keys, types, strict=True)):
        col = t.column(k)
        cols[f"{prefix}{i}"] = col if col.type.equals(typ) else col.cast(typ)
    cols[index] = pa.array(np.arange(t.num_rows, dtype=np.int64))
    return pa.table(cols)


def _read_ipc(path: str) -> pa.Table:
    with pa.memory_map(path) as source:
        return pa.ipc.open_file(source).read_all()


def sub_partition(
    keys: Sequence[pa.Array | pa.ChunkedArray], types: Sequence[pa.DataType], parts: int
) -> np.ndarray:
    """A sub-partition number in ``[0, parts)`` per row, equal for equal keys on both sides.

    Keys are cast to their common type and hashed with the canonical murmur3 (so
    int32 and int64 agree); the hash is then scrambled (splitmix64) because the
    rows of one group share ``bucket % m`` and the raw hash would put them all
    in few sub-partitions. Rows with NULL keys (which never match) go to 0.
    """
    cast = [k if k.type.equals(t) else k.cast(t) for k, t in zip(keys, types, strict=True)]
    h = hashing.murmur3_multi(cast)
    x = h.fill_null(0).to_numpy(zero_copy_only=False).astype(np.uint32).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x % np.uint64(parts)).astype(np.int64)


def with_parts(group: Group, parts: int) -> Group:
    """``group`` joined in ``parts`` hash sub-partitions (tests and tuning)."""
    return replace(group, parts=max(1, parts))
