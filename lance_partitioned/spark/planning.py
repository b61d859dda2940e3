"""Planning and executing distributed reads: pruned leaves → fragment groups → Arrow batches.

``plan_read`` runs once, on the driver. It pins one ``__manifest`` snapshot, prunes
partitions with the filter, and packs the fragments of the selected leaves into
``ReadTask``s of roughly equal row counts. Every piece names its leaf at the
``read_version`` (or branch/tag) that snapshot published, so all tasks of one
query read one consistent state even while writers commit meanwhile.

``read_task`` runs on executors. It needs no manifest access: each piece carries
the leaf URI and version and the leaf's residual filter (``Scan.leaf_filter``, the
very text a core read of that leaf runs); the options carry the target Arrow schema.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa

from lance_partitioned.catalog import history
from lance_partitioned.catalog.leaf_open import open_leaf_dataset
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.format.expressions import Expr
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.read.scan import Scan, read_leaf
from lance_partitioned.operations.write.input import coalesce_batches
from lance_partitioned.spark.timing import timed_read, timing_enabled
from lance_partitioned.spark.types import BatchConformer

log = logging.getLogger(__name__)

DEFAULT_ROWS_PER_TASK = 1 << 20
DEFAULT_MIN_TASKS = 8
# Below this many rows a task is not worth its scheduling and Python-worker cost:
# on SF1 Q6 (12 leaves, 0.9M rows before the filter) 12 tasks took 1.1 s and 2 took
# 0.6 s on local[2]; Lance filters a 75k-row leaf in about 15 ms.
MIN_ROWS_PER_TASK = 1 << 19
# Above this many selected leaves, planning does not open each leaf to split it
# by fragments (that costs one dataset open per leaf on the driver); whole leaves
# are packed into tasks instead.
MAX_LEAVES_TO_SPLIT = 2000
_LEAVES_PER_TASK_UNSPLIT = 64
# A filtered read yields Lance's scan batches after the filter: at Q6's selectivity
# about 150 of each 8,192 rows. Spark pays a fixed cost per batch a Python source
# hands it (Arrow IPC framing, JVM column vectors), so runs of batches below
# SMALL_BATCH_ROWS rows are concatenated, up to COALESCED_ROWS rows or
# COALESCED_BYTES bytes; bigger batches (unfiltered scans) pass uncopied.
SMALL_BATCH_ROWS = 4096
COALESCED_ROWS = 1 << 16
COALESCED_BYTES = 16 << 20


@dataclass(frozen=True)
class LeafPiece:
    """Part of one leaf to read: some fragments (None: all of them) at a pinned version.

    ``filter_sql`` is the leaf's residual filter in Lance SQL (None: every row matches).
    """

    uri: str
    leaf: Leaf
    fragment_ids: tuple[int, ...] | None
    rows: int | None  # before filtering; None when not known at planning time
    filter_sql: str | None


@dataclass(frozen=True)
class ReadTask:
    """One Spark input partition: leaf pieces read one after another."""

    index: int
    pieces: tuple[LeafPiece, ...]

    @property
    def rows(self) -> int | None:
        counts = [p.rows for p in self.pieces]
        return None if any(c is None for c in counts) else sum(counts)  # type: ignore[misc]


@dataclass(frozen=True)
class ReadOptions:
    """What every task reads: output columns and the Arrow schema Spark expects.

    The filter is per leaf, on each ``LeafPiece``; ``filter_columns`` are the
    columns of the whole scan filter (a superset of every residual's).
    """

    columns: tuple[str, ...]
    target: pa.Schema
    batch_size: int | None = None
    storage_options: dict[str, str] | None = None
    schema: Schema | None = None  # the namespace schema: leaves are mapped to it by field id
    filter_columns: tuple[str, ...] = ()


@dataclass
class ReadPlan:
    """The outcome of planning: tasks plus the pruning numbers a user wants to see."""

    root: str
    manifest_version: int
    partitions_total: int
    partitions_scanned: int
    manifest_filter: str | None
    filter_sql: str | None
    tasks: list[ReadTask] = field(default_factory=list)
    planning_seconds: float = 0.0

    @property
    def partitions_pruned(self) -> int:
        return self.partitions_total - self.partitions_scanned

    def summary(self) -> str:
        return (
            f"lance_partitioned: scanning {self.partitions_scanned} of {self.partitions_total} "
            f"partitions in {len(self.tasks)} task(s) at __manifest version {self.manifest_version} "
            f"(filter: {self.filter_sql or 'none'})"
        )

    def as_dict(self) -> dict[str, object]:
        """Plain-data form (for logs and ``plan_info``)."""
        return {
            "root": self.root,
            "manifest_version": self.manifest_version,
            "partitions_total": self.partitions_total,
            "partitions_scanned": self.partitions_scanned,
            "partitions_pruned": self.partitions_pruned,
            "tasks": len(self.tasks),
            "manifest_filter": self.manifest_filter,
            "filter": self.filter_sql,
            "planning_seconds": round(self.planning_seconds, 4),
        }


def load_snapshot(
    root: str,
    version: int | str | None,
    storage_options: dict[str, str] | None,
    asof: str | None = None,
) -> Snapshot:
    """The snapshot to read: ``version`` (number or tag), the newest committed at or
    before ``asof`` (ISO 8601), or the latest."""
    manifest = Manifest(root, storage_options)
    if asof is not None:
        version = history.version_asof(manifest, asof)
    return Snapshot.load(manifest, version)


def parse_version(text: str | None) -> int | str | None:
    """The ``version`` option: a number, a tag name, or empty for the latest."""
    if text is None or not str(text).strip():
        return None
    text = str(text).strip()
    return int(text) if text.isdigit() else text


def _leaf_pieces(scan: Scan, leaf: Leaf) -> list[LeafPiece]:
    snapshot = scan.snapshot
    uri = snapshot.leaf_uri(leaf.location)
    ds = open_leaf_dataset(uri, leaf, snapshot.manifest.storage_options)
    residual = scan.leaf_filter(leaf)
    out = []
    for frag in ds.get_fragments():
        out.append(LeafPiece(uri, leaf, (frag.fragment_id,), frag.metadata.num_rows, residual))
    return out


def _pack(pieces: list[LeafPiece], target_rows: int) -> list[ReadTask]:
    """Greedy, order-preserving packing of pieces into tasks of about ``target_rows``."""
    tasks: list[ReadTask] = []
    current: list[LeafPiece] = []
    rows = 0
    for p in pieces:
        n = p.rows or 0
        if current and rows + n > target_rows:
            tasks.append(ReadTask(len(tasks), tuple(current)))
            current, rows = [], 0
        current.append(p)
        rows += n
    if current:
        tasks.append(ReadTask(len(tasks), tuple(current)))
    return tasks


def _merge_fragments(task: ReadTask) -> ReadTask:
    """One piece per leaf within a task (fewer dataset opens when reading)."""
    merged: dict[str, LeafPiece] = {}
    for p in task.pieces:
        prev = merged.get(p.uri)
        if prev is None:
            merged[p.uri] = p
        else:
            ids = (prev.fragment_ids or ()) + (p.fragment_ids or ())
            rows = (prev.rows or 0) + (p.rows or 0)
            merged[p.uri] = LeafPiece(p.uri, p.leaf, ids, rows, p.filter_sql)
    return ReadTask(task.index, tuple(merged.values()))


def plan_read(
    snapshot: Snapshot,
    expr: Expr | str | None,
    columns: Sequence[str] | None = None,
    *,
    rows_per_task: int = DEFAULT_ROWS_PER_TASK,
    min_tasks: int = DEFAULT_MIN_TASKS,
    min_rows_per_task: int = MIN_ROWS_PER_TASK,
) -> tuple[ReadPlan, Scan]:
    """Prune with ``expr`` and split the selected leaves into tasks.

    Leaves are opened (in parallel) to learn their fragments, so that a large leaf
    spreads over several tasks and small leaves share one: about ``min_tasks``
    tasks, but none planned below ``min_rows_per_task`` rows; beyond
    ``MAX_LEAVES_TO_SPLIT`` selected leaves whole leaves are packed instead.
    """
    start = time.perf_counter()
    scan = Scan(snapshot, expr, columns)
    leaves = scan.leaves
    total = len(snapshot.leaf_table()) if scan.manifest_sql else len(leaves)
    if len(leaves) <= MAX_LEAVES_TO_SPLIT:
        threads = max(2, min(16, (os.cpu_count() or 2) * 2))
        with ThreadPoolExecutor(threads) as pool:
            per_leaf = list(pool.map(lambda lf: _leaf_pieces(scan, lf), leaves))
        pieces = [p for ps in per_leaf for p in ps]
        total_rows = sum(p.rows or 0 for p in pieces)
        spread = math.ceil(total_rows / max(1, min_tasks))
        target = max(1, min(rows_per_task, max(min_rows_per_task, spread)))
        tasks = [_merge_fragments(t) for t in _pack(pieces, target)]
    else:
        whole = [
            LeafPiece(snapshot.leaf_uri(lf.location), lf, None, None, scan.leaf_filter(lf))
            for lf in leaves
        ]
        per_task = max(1, min(_LEAVES_PER_TASK_UNSPLIT, math.ceil(len(whole) / max(1, min_tasks))))
        tasks = [
            ReadTask(i, tuple(whole[s : s + per_task]))
            for i, s in enumerate(range(0, len(whole), per_task))
        ]
    plan = ReadPlan(
        root=snapshot.manifest.root,
        manifest_version=snapshot.version,
        partitions_total=total,
        partitions_scanned=len(leaves),
        manifest_filter=scan.manifest_sql,
        filter_sql=scan.sql,
        tasks=tasks,
        planning_seconds=time.perf_counter() - start,
    )
    return plan, scan


def coalesce_small_batches(
    batches: Iterator[pa.RecordBatch],
    small_rows: int = SMALL_BATCH_ROWS,
    max_rows: int = COALESCED_ROWS,
    max_bytes: int = COALESCED_BYTES,
) -> Iterator[pa.RecordBatch]:
    """``batches`` in order, runs of ones below ``small_rows`` rows concatenated.

    A run is handed on once it reaches ``max_rows`` rows or ``max_bytes`` bytes, when
    a batch of ``small_rows`` or more arrives (which then passes as it is), and at the
    end. Empty batches are dropped. (``operations.write.input.coalesce_batches`` with
    Spark's thresholds.)
    """
    return coalesce_batches(batches, max_rows, max_bytes, pass_rows=small_rows)


def read_task(task: ReadTask, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    """Stream the rows of one task as batches of exactly ``options.target``.

    Small batches (a selective filter leaves few rows of each of Lance's scan
    batches) are concatenated first (``coalesce_small_batches``): Spark handles each
    batch it receives from Python with a fixed cost. With a timing log set
    (``spark.timing``), the task appends one line: its time reading against its
    time handing batches to Spark.
    """
    batches = coalesce_small_batches(_read_task_batches(task, options))
    if not timing_enabled():
        return batches
    entry = {
        "phase": "read_task",
        "task": task.index,
        "pieces": len(task.pieces),
        "columns": len(options.columns),
    }
    return timed_read(batches, entry)


def _read_task_batches(task: ReadTask, options: ReadOptions) -> Iterator[pa.RecordBatch]:
    conform = BatchConformer(options.target)
    for piece in task.pieces:
        ds = open_leaf_dataset(piece.uri, piece.leaf, options.storage_options)
        fragments = None
        if piece.fragment_ids is not None:
            fragments = [ds.get_fragment(i) for i in piece.fragment_ids]
        # Columns are matched by field id: renamed ones keep their data, added ones read NULL.
        for batch in read_leaf(
            ds,
            options.schema,
            list(options.columns),
            piece.filter_sql,
            options.filter_columns,
            piece.leaf.object_id,
            batch_size=options.batch_size,
            fragments=fragments,
        ):
            if batch.num_rows:
                yield conform(batch)
