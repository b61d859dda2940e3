"""Maintenance on Spark's executors: ``lps.compact``, ``lps.create_index``,
``lps.optimize_indexes``, ``lps.cleanup``, ``lps.vacuum``, ``lps.rewrite_partitions``.

Each call is the single-machine operation (``operations.maintain.maintenance``,
``search.build``) with its per-leaf staging moved into Spark tasks; everything
else stays on the driver and is the same code:

1. the driver takes the lease, pins one ``__manifest`` snapshot and plans the
   work per leaf (``LeafWork``: the leaf, its directory, the change);
2. one Spark job stages the leaves: each task runs the operation's own
   ``StageOne`` function (``stage_compaction``, ``stage_at_published``) on its
   share, on a few threads, under the transaction's id, and returns the staged
   versions (leaf, version, files added), never rows;
3. the driver records them in the ``LeafTransaction`` and publishes **one**
   ``__manifest`` commit, with the check before publishing, conflict handling and
   rollback of the single-machine call (``LeafTransaction.stage_works``). From
   ``CHECK_ON_TASKS_MIN`` staged leaves the check's file lookups run in a second job
   (``checker``): on object stores they are two requests per leaf.

``lps.cleanup`` and ``lps.vacuum`` are the single-machine calls with each leaf
swept (``maintenance.sweep_leaf``: heal, drop unreferenced old versions, delete
unreferenced files) by a task; the driver reads which leaf versions every retained
``__manifest`` version references, removes ``__manifest`` versions (cleanup) and
orphan partition directories (vacuum), and sums the tasks' reports.

``lps.rewrite_partitions`` is ``ns.rewrite_partitions``'s write job with the rows
copied by tasks, each a shared writer of the job (as ``lps.merge``'s tasks are);
the driver merges the files they wrote and commits once, replacing the old leaves.

A task that fails rolls back what it staged itself (a writer discards its files); the job then fails and the
driver publishes nothing (``DistributedTaskError``). Versions staged by tasks that
had finished, or by a task whose process died, stay unpublished: readers never see
them, the next write to the leaf restores over them, and ``vacuum`` removes them.

The Spark UI names each job (its job group's description): the operation, the number
of partitions and tasks, and the transaction id that ``history()`` and the leaves'
``lp.txn`` carry. ``progress=`` (as the single-machine calls take it) follows the job:
a thread polls Spark's status tracker for the job group's finished tasks and reports
the partitions they held (``_TaskWatch``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from pyspark.sql import SparkSession

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import DistributedTaskError, lance_boundary, lance_message
from lance_partitioned.facade.base import WriteResult
from lance_partitioned.operations.evolve import rewrite
from lance_partitioned.operations.evolve.rewrite import WriteMany
from lance_partitioned.operations.leaf.leaf_changes import LeafChange
from lance_partitioned.operations.maintain import maintenance
from lance_partitioned.operations.maintain.maintenance import (
    LeafSweep,
    MaintenanceReport,
    SweepMany,
)
from lance_partitioned.operations.progress import NO_PROGRESS, Progress, ProgressLike, reporter
from lance_partitioned.operations.txn import staged_check
from lance_partitioned.operations.txn.driver import (
    CheckMany,
    LeafTransaction,
    LeafWork,
    StagedSet,
    StageMany,
    StageOne,
    run_parallel,
)
from lance_partitioned.operations.txn.staged_check import StagedLeaf
from lance_partitioned.operations.write.job import WriteJob
from lance_partitioned.operations.write.partition_writer import WrittenFiles
from lance_partitioned.operations.write.publish import WriteMode

SLICES_PER_CORE = 4  # tasks per default-parallelism slot: a slow leaf delays less
POLL_SECONDS = 0.5  # how often progress= asks Spark's status tracker
# Staged leaves from which the check before publishing looks for their files in Spark
# tasks (``checker``): a job costs about a second, the driver's lookups about 10 µs a
# leaf on local disk and two requests a leaf on object stores.
CHECK_ON_TASKS_MIN = 50_000
_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


class _TaskWatch:
    """Reports a running job's progress: every ``POLL_SECONDS`` it counts the finished
    tasks of the job group ``group`` (Spark's status tracker) and advances ``progress``
    to the items they held. ``parallelize`` gives each of the ``slices`` tasks an even
    share, so ``finished × items / slices`` is what is done, to within one share."""

    def __init__(self, sc: Any, group: str, items: int, slices: int, progress: Progress):
        self.sc, self.group, self.items, self.slices = sc, group, items, slices
        self.progress = progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="lps-progress", daemon=True)

    def __enter__(self) -> _TaskWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self._report()

    def _report(self) -> None:
        tracker = self.sc.statusTracker()
        finished = 0
        for job in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                stage_info = tracker.getStageInfo(stage)
                finished += stage_info.numCompletedTasks if stage_info is not None else 0
        reached = min(self.items, finished * self.items // self.slices)
        if reached > self.progress.done:
            self.progress.advance(reached - self.progress.done)


def _run_job(
    spark: SparkSession,
    what: str,
    description: str,
    items: Sequence[Any],
    tasks: int | None,
    task: Callable[[Iterable[Any]], Iterable[Any]],
    progress: Progress = NO_PROGRESS,
) -> list[Any]:
    """Run ``task`` on the items in Spark tasks (``tasks`` of them; default
    ``SLICES_PER_CORE`` per default-parallelism slot, at most one per item) as one job
    named ``description`` in the Spark UI, reporting the items done to ``progress``
    (``_TaskWatch``); every task's results, or DistributedTaskError."""
    progress.start(len(items))
    if not items:
        return []
    sc = spark.sparkContext
    n = min(len(items), tasks or sc.defaultParallelism * SLICES_PER_CORE)
    saved = {key: sc.getLocalProperty(key) for key in _GROUP_PROPERTIES}
    group = f"lance_partitioned-{uuid.uuid4().hex}"
    sc.setJobGroup(group, f"lance_partitioned {what}: {description} in {n} tasks")
    try:
        watch = _TaskWatch(sc, group, len(items), n, progress) if progress.active else None
        with watch or contextlib.nullcontext():
            results = sc.parallelize(list(items), n).mapPartitions(task).collect()
        progress.advance(len(items) - progress.done)
        return results
    except Exception as exc:
        raise _task_failed(what, exc) from exc
    finally:
        for key, value in saved.items():  # the caller's own job group, if it set one
            sc.setLocalProperty(key, value)  # type: ignore[arg-type]  # None clears it


def stager(
    spark: SparkSession, what: str, tasks: int | None = None, progress: Progress = NO_PROGRESS
) -> StageMany:
    """A ``StageMany`` that stages the works in Spark tasks (``_run_job``)."""

    def stage_many(
        tx: LeafTransaction,
        works: Sequence[LeafWork],
        one: StageOne,
        record: Callable[[LeafWork, Any], None],
    ) -> CheckMany | None:
        txn, opts = tx.staged.txn, tx.manifest.storage_options
        description = f"{len(works)} partitions of {tx.manifest.root} (transaction {txn})"
        task = partial(_stage_task, one=one, txn=txn, opts=opts)
        by_key = {work.key: work for work in works}
        for key, change, skipped, staged in _run_job(
            spark, what, description, works, tasks, task, progress
        ):
            work = by_key[key]  # as staging on this process's threads leaves it
            work.change, work.skipped = change, skipped
            record(work, staged)
        if len(tx.staged.leaves) < CHECK_ON_TASKS_MIN:
            return None
        return checker(spark, what, f"{tx.manifest.root} (transaction {txn})", tasks)

    return stage_many


def checker(spark: SparkSession, what: str, of: str, tasks: int | None = None) -> CheckMany:
    """A ``CheckMany`` whose Spark tasks each look for the files of a share of the staged
    leaves (``staged_check.lacking``) and send back the leaves lacking any; the driver
    then decides about those (``StagedSet.before_publish``)."""

    def check_many(staged: Sequence[StagedLeaf], opts: dict[str, str] | None) -> list[StagedLeaf]:
        changed = [leaf for leaf in staged if leaf.changed]
        description = f"check before publishing {len(changed)} staged partitions of {of}"
        # plain tuples, not StagedLeaf objects: a million frozensets of file names cost
        # the driver 3.4 s to pickle and the tasks 5.8 s to unpickle, tuples 1.4 s and 0.6 s
        items = [
            (i, leaf.uri, leaf.published, leaf.version, leaf.branch, _tuple(leaf.added))
            for i, leaf in enumerate(changed)
        ]
        task = partial(_lacking_task, opts=opts)
        return [changed[i] for i in _run_job(spark, what, description, items, tasks, task)]

    return check_many


def _tuple(files: frozenset[str] | None) -> tuple[str, ...] | None:
    return None if files is None else tuple(files)


def _lacking_task(items: Iterable[tuple[Any, ...]], opts: dict[str, str] | None) -> list[int]:
    """One Spark task: the positions (the items' first field) of the staged leaves of its
    share that lack a file (``staged_check.lacking``)."""
    mine = list(items)
    leaves = [
        StagedLeaf(uri, published, version, branch, None if added is None else frozenset(added))
        for _, uri, published, version, branch, added in mine
    ]
    found = {id(leaf) for leaf in staged_check.lacking(leaves, opts)}
    return [item[0] for item, leaf in zip(mine, leaves, strict=True) if id(leaf) in found]


def sweeper(
    spark: SparkSession,
    what: str,
    root: str,
    tasks: int | None = None,
    progress: Progress = NO_PROGRESS,
) -> SweepMany:
    """A ``SweepMany`` that sweeps the leaves in Spark tasks (``_run_job``)."""

    def sweep_many(
        sweeps: Sequence[LeafSweep], opts: dict[str, str] | None
    ) -> list[MaintenanceReport]:
        task = partial(_sweep_task, opts=opts)
        description = f"{len(sweeps)} partitions of {root}"
        return _run_job(spark, what, description, sweeps, tasks, task, progress)

    return sweep_many


def _sweep_task(
    sweeps: Iterable[LeafSweep], opts: dict[str, str] | None
) -> Iterator[MaintenanceReport]:
    """One Spark task: ``sweep_leaf`` on each of its leaves, one after another."""
    for sweep in sweeps:
        yield maintenance.sweep_leaf(sweep, opts)


def _stage_task(
    works: Iterable[LeafWork], one: StageOne, txn: str, opts: dict[str, str] | None
) -> Iterator[tuple[str, LeafChange, str | None, StagedLeaf | None]]:
    """One Spark task: stage its works with ``one`` on the driver module's threads
    (``run_parallel``); on a failure roll back what it staged, then raise.

    Sends back what staging found out, per work: its key, its change (with the counters
    staging set), why it was skipped, and the staged leaf; not the leaf and directory
    the driver already holds, a third of the bytes (a million partitions sent back
    612 MiB with them, 420 MiB without)."""
    done: list[tuple[LeafWork, StagedLeaf | None]] = []
    try:
        run_parallel(list(works), lambda w: one(w, txn, opts), lambda w, s: done.append((w, s)))
    except BaseException:
        StagedSet(txn, opts, {w.key: s for w, s in done if s is not None}).rollback()
        raise
    return ((w.key, w.change, w.skipped, s) for w, s in done)


def row_copier(
    spark: SparkSession, tasks: int | None = None, progress: Progress = NO_PROGRESS
) -> WriteMany:
    """A ``WriteMany`` whose Spark tasks each copy a share of the leaves as a shared
    writer of the job (files only: the driver's commit creates new partitions)."""

    def write_many(job: WriteJob, leaves: Sequence[Leaf]) -> WrittenFiles:
        snapshot = job.snapshot
        manifest = job.manifest
        task = partial(
            _copy_task,
            root=manifest.root,
            opts=manifest.storage_options,
            version=snapshot.version,
            secret=job.secret,
            replaces=list(job.replaces),
        )
        description = f"{len(leaves)} partitions of {manifest.root}"
        written = WrittenFiles(snapshot.version)
        parts = _run_job(spark, "rewrite_partitions", description, leaves, tasks, task, progress)
        for part in parts:
            written.merge(part)
        return written

    return write_many


def _copy_task(
    leaves: Iterable[Leaf],
    root: str,
    opts: dict[str, str] | None,
    version: int,
    secret: bytes,
    replaces: list[str],
) -> Iterator[WrittenFiles]:
    """One Spark task: copy its leaves' rows (``rewrite.copy_rows``) into files of the job
    (a shared writer, which discards its own files if it fails)."""
    mine = list(leaves)
    if not mine:
        return
    manifest = Manifest(root, opts)
    snapshot = Snapshot.load(manifest, version, for_write=True)
    job = WriteJob(manifest, snapshot, WriteMode.APPEND, secret=secret, replaces=replaces)
    yield job.write(rewrite.copy_rows(snapshot, mine), shared=True)


# the last "SomeError: message" line of a Python traceback that Spark relays
_ERROR_LINE = re.compile(r"^\s*([\w.]+(?:Error|Exception)): (.+)$", re.M)


def _task_failed(what: str, exc: BaseException) -> DistributedTaskError:
    """The error of a failed job: what failed, in one line (no JVM stack)."""
    found = _ERROR_LINE.findall(str(exc))
    reason = f"{found[-1][0]}: {found[-1][1]}" if found else type(exc).__name__
    return DistributedTaskError(
        f"{what}: a Spark task failed ({lance_message(Exception(reason))}), so nothing was "
        "published; leaf versions and files tasks wrote are unpublished, and vacuum "
        "removes them"
    )


@lance_boundary
def compact(
    spark: SparkSession,
    root: str,
    target_rows_per_fragment: int = 1 << 20,
    *,
    compact_manifest: bool = True,
    storage_options: dict[str, str] | None = None,
    tasks: int | None = None,
    progress: ProgressLike = None,
) -> MaintenanceReport:
    """``ns.compact`` with the leaves rewritten by Spark tasks (``tasks``: how many),
    published by one ``__manifest`` commit from the driver; see the module doc.
    ``progress``: the partitions the job's finished tasks held, as ``ns.compact`` takes it.

    Example::

        lps.compact(spark, root, target_rows_per_fragment=1 << 20).leaves_compacted
    """
    manifest = Manifest(str(root), storage_options)
    with reporter(progress, "compact", "partitions") as bar:
        return maintenance.compact(
            manifest,
            target_rows_per_fragment,
            compact_manifest,
            stage_many=stager(spark, "compact", tasks, bar),
        )


@lance_boundary
def create_index(
    spark: SparkSession,
    root: str,
    column: str,
    index_type: str,
    *,
    name: str | None = None,
    filter: Any = None,
    storage_options: dict[str, str] | None = None,
    tasks: int | None = None,
    progress: ProgressLike = None,
    **params: Any,
) -> Any:
    """``ns.create_index`` with each partition's index built by a Spark task, published by
    one ``__manifest`` commit; the same checks, definition and ``IndexReport``.
    ``progress``: the partitions the job's finished tasks held.

    Example::

        lps.create_index(spark, root, "embedding", "IVF_PQ", num_partitions=16, metric="l2")
    """
    from lance_partitioned.search import build

    manifest = Manifest(str(root), storage_options)
    with reporter(progress, "create_index", "partitions") as bar:
        return build.create_index(
            manifest,
            column,
            index_type,
            name,
            filter,
            stage_many=stager(spark, f"create_index {column} {index_type}", tasks, bar),
            **params,
        )


@lance_boundary
def optimize_indexes(
    spark: SparkSession,
    root: str,
    *,
    storage_options: dict[str, str] | None = None,
    tasks: int | None = None,
    progress: ProgressLike = None,
) -> Any:
    """``ns.optimize_indexes`` with the partitions' indexes built by Spark tasks, published
    by one ``__manifest`` commit. ``progress``: the partitions the job's finished tasks held.

    Example::

        lps.optimize_indexes(spark, root).partitions
    """
    from lance_partitioned.search import build

    manifest = Manifest(str(root), storage_options)
    with reporter(progress, "optimize_indexes", "partitions") as bar:
        stage_many = stager(spark, "optimize_indexes", tasks, bar)
        return build.optimize_indexes(manifest, stage_many=stage_many)


def _swept(
    call: Callable[..., MaintenanceReport],
    spark: SparkSession,
    root: str,
    older_than: dt.timedelta,
    storage_options: dict[str, str] | None,
    tasks: int | None,
    progress: ProgressLike,
) -> MaintenanceReport:
    """``call`` (``maintenance.cleanup`` or ``vacuum``) with the leaves swept by Spark."""
    manifest = Manifest(str(root), storage_options)
    Snapshot.load(manifest, for_write=True)  # refuses a damaged namespace, as ns.cleanup does
    what = call.__name__
    with reporter(progress, what, "partitions") as bar:
        sweep_many = sweeper(spark, what, manifest.root, tasks, bar)
        return call(manifest, older_than, sweep_many=sweep_many)


@lance_boundary
def cleanup(
    spark: SparkSession,
    root: str,
    older_than: dt.timedelta = dt.timedelta(days=7),
    *,
    storage_options: dict[str, str] | None = None,
    tasks: int | None = None,
    progress: ProgressLike = None,
) -> MaintenanceReport:
    """``ns.cleanup``: the driver removes old ``__manifest`` versions, Spark tasks the leaf
    versions only they read (``sweep_leaf`` per leaf); the same rules and report.

    Example::

        lps.cleanup(spark, root, older_than=timedelta(days=7))
    """
    return _swept(maintenance.cleanup, spark, root, older_than, storage_options, tasks, progress)


@lance_boundary
def vacuum(
    spark: SparkSession,
    root: str,
    older_than: dt.timedelta = dt.timedelta(days=1),
    *,
    storage_options: dict[str, str] | None = None,
    tasks: int | None = None,
    progress: ProgressLike = None,
) -> MaintenanceReport:
    """``ns.vacuum``: Spark tasks heal each leaf and delete its unreferenced versions and
    files; the driver removes orphan partition directories and ``__manifest``'s orphan
    files. The same rules and report.

    Example::

        lps.vacuum(spark, root, older_than=timedelta(days=1))
    """
    return _swept(maintenance.vacuum, spark, root, older_than, storage_options, tasks, progress)


@lance_boundary
def rewrite_partitions(
    spark: SparkSession,
    root: str,
    filter: Any = None,
    *,
    storage_options: dict[str, str] | None = None,
    tasks: int | None = None,
    progress: ProgressLike = None,
) -> WriteResult:
    """``ns.rewrite_partitions``: Spark tasks copy the rows of the partitions to move
    into the current spec, the driver replaces them in one ``__manifest`` commit.
    Returns the same ``WriteResult`` (version, rows and partitions written).

    Example::

        lps.rewrite_partitions(spark, root, "event_date < '2025-01-01'")
    """
    manifest = Manifest(str(root), storage_options)
    with reporter(progress, "rewrite_partitions", "partitions") as bar:
        copier = row_copier(spark, tasks, bar)
        snapshot, written = rewrite.rewrite_partitions(manifest, filter, write_many=copier)
    if written is None:
        return WriteResult(snapshot.version, 0, 0, 0)
    return WriteResult.of(snapshot.version, written)
