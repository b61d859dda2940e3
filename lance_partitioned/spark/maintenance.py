"""Maintenance on Spark's executors: ``lps.compact``, ``lps.create_index``,
``lps.optimize_indexes``.

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
   rollback of the single-machine call (``LeafTransaction.stage_works``).

A task that fails rolls back what it staged itself; the job then fails and the
driver publishes nothing (``DistributedTaskError``). Versions staged by tasks that
had finished, or by a task whose process died, stay unpublished: readers never see
them, the next write to the leaf restores over them, and ``vacuum`` removes them.

The Spark UI names each job (``setJobDescription``): the operation, the number of
partitions and tasks, and the transaction id that ``history()`` and the leaves'
``lp.txn`` carry.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from pyspark.sql import SparkSession

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.errors import DistributedTaskError, lance_boundary, lance_message
from lance_partitioned.operations.maintain import maintenance
from lance_partitioned.operations.maintain.maintenance import MaintenanceReport
from lance_partitioned.operations.txn.driver import (
    LeafTransaction,
    LeafWork,
    StagedSet,
    StageMany,
    StageOne,
    run_parallel,
)
from lance_partitioned.operations.txn.staged_check import StagedLeaf

SLICES_PER_CORE = 4  # tasks per default-parallelism slot: a slow leaf delays less


def stager(spark: SparkSession, what: str, tasks: int | None = None) -> StageMany:
    """A ``StageMany`` that stages the works in Spark tasks of ``spark`` (``tasks`` of
    them; default ``SLICES_PER_CORE`` per default-parallelism slot, at most one per leaf),
    as one job described as ``what`` in the Spark UI."""

    def stage_many(
        tx: LeafTransaction,
        works: Sequence[LeafWork],
        one: StageOne,
        record: Callable[[LeafWork, Any], None],
    ) -> None:
        if not works:
            return
        sc = spark.sparkContext
        n = min(len(works), tasks or sc.defaultParallelism * SLICES_PER_CORE)
        txn, opts = tx.staged.txn, tx.manifest.storage_options
        sc.setJobDescription(
            f"lance_partitioned {what}: {len(works)} partitions of {tx.manifest.root} "
            f"in {n} tasks (transaction {txn})"
        )
        try:
            out = sc.parallelize(list(works), n).mapPartitions(
                partial(_stage_task, one=one, txn=txn, opts=opts)
            )
            results = out.collect()
        except Exception as exc:
            raise _task_failed(what, txn, exc) from exc
        finally:
            sc.setJobDescription(None)  # type: ignore[arg-type]  # clears it
        for work, staged in results:
            record(work, staged)

    return stage_many


def _stage_task(
    works: Iterable[LeafWork], one: StageOne, txn: str, opts: dict[str, str] | None
) -> Iterator[tuple[LeafWork, StagedLeaf | None]]:
    """One Spark task: stage its works with ``one`` on the driver module's threads
    (``run_parallel``); on a failure roll back what it staged, then raise."""
    done: list[tuple[LeafWork, StagedLeaf | None]] = []
    try:
        run_parallel(list(works), lambda w: one(w, txn, opts), lambda w, s: done.append((w, s)))
    except BaseException:
        StagedSet(txn, opts, {w.key: s for w, s in done if s is not None}).rollback()
        raise
    return iter(done)


# the last "SomeError: message" line of a Python traceback that Spark relays
_ERROR_LINE = re.compile(r"^\s*([\w.]+(?:Error|Exception)): (.+)$", re.M)


def _task_failed(what: str, txn: str, exc: BaseException) -> DistributedTaskError:
    """The error of a failed staging job: what failed, in one line (no JVM stack)."""
    found = _ERROR_LINE.findall(str(exc))
    reason = f"{found[-1][0]}: {found[-1][1]}" if found else type(exc).__name__
    return DistributedTaskError(
        f"{what}: a Spark task failed, so nothing was published (transaction {txn}): "
        f"{lance_message(Exception(reason))}. Leaf versions the tasks staged are "
        "unpublished; vacuum removes them"
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
) -> MaintenanceReport:
    """``ns.compact`` with the leaves rewritten by Spark tasks (``tasks``: how many),
    published by one ``__manifest`` commit from the driver; see the module doc.

    Example::

        lps.compact(spark, root, target_rows_per_fragment=1 << 20).leaves_compacted
    """
    manifest = Manifest(str(root), storage_options)
    return maintenance.compact(
        manifest,
        target_rows_per_fragment,
        compact_manifest,
        stage_many=stager(spark, "compact", tasks),
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
    **params: Any,
) -> Any:
    """``ns.create_index`` with each partition's index built by a Spark task, published by
    one ``__manifest`` commit; the same checks, definition and ``IndexReport``.

    Example::

        lps.create_index(spark, root, "embedding", "IVF_PQ", num_partitions=16, metric="l2")
    """
    from lance_partitioned.search import build

    manifest = Manifest(str(root), storage_options)
    return build.create_index(
        manifest,
        column,
        index_type,
        name,
        filter,
        stage_many=stager(spark, f"create_index {column} {index_type}", tasks),
        **params,
    )


@lance_boundary
def optimize_indexes(
    spark: SparkSession,
    root: str,
    *,
    storage_options: dict[str, str] | None = None,
    tasks: int | None = None,
) -> Any:
    """``ns.optimize_indexes`` with the partitions' indexes built by Spark tasks, published
    by one ``__manifest`` commit.

    Example::

        lps.optimize_indexes(spark, root).partitions
    """
    from lance_partitioned.search import build

    manifest = Manifest(str(root), storage_options)
    return build.optimize_indexes(manifest, stage_many=stager(spark, "optimize_indexes", tasks))
