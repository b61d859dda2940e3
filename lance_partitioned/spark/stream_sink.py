"""The ``lance_partitioned`` Structured Streaming sink: one commit per micro-batch, exactly once.

``df.writeStream.format("lance_partitioned").option("checkpointLocation", ck).start(root)``
appends every micro-batch with the batch sink's protocol (``spark.sink``): PySpark
4.3 calls ``streamWriter`` on the driver before each micro-batch, so each batch is
one write job, planned against the latest snapshot with a fresh job secret; its
tasks write Lance files and the driver publishes them with **one** ``__manifest``
commit.

Exactly once. Spark replays a micro-batch whose commit it did not record in the
checkpoint (the driver died between our commit and Spark's ``commits/<batch>``
file, or the query was stopped there). Each commit therefore records which query
and which batch it holds: its ``CommitInfo`` (``ns.history()``) is operation
``streaming append`` with parameters ``query_id`` and ``batch_id``. Before
publishing batch ``b`` of query ``q`` the driver looks for the newest commit of
``q`` (``catalog.history.newest_commit``, walking back from the latest version);
when it holds a batch ``>= b`` the batch landed already and its new files are
removed instead (the abort path, ``LancePartitionedWriter.discard``).

The query's identity is Spark's query id: stable across restarts from one
checkpoint (Spark keeps it in the checkpoint's ``metadata`` file) and new for a
new checkpoint. The Python writer on the driver is not told it, but every task
is: Spark sets the local property ``sql.streaming.queryId`` on the jobs of a
streaming query, and ``TaskContext`` hands local properties to Python workers.
Each task puts it in its commit message.

Output modes: ``append`` only. ``complete`` asks the sink to replace the table
with every batch (``overwrite=True`` here) and is refused with
``UnsupportedFeatureError``; Spark itself refuses ``update`` for this source.
Upserts from a stream: ``foreachBatch`` with ``lps.merge`` (docs/STREAMING.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.history import newest_commit
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.errors import PartitionedNamespaceError, UnsupportedFeatureError
from lance_partitioned.operations.write.partition_writer import WrittenFiles
from lance_partitioned.spark.options import SourceOptions
from lance_partitioned.spark.sink import (
    LanceCommitMessage,
    LancePartitionedWriter,
    merge_messages,
    plan_write,
)

log = logging.getLogger(__name__)

# the ``CommitInfo`` operation of a micro-batch's commit, and its parameters' keys
STREAM_OPERATION = "streaming append"
QUERY_ID = "query_id"
BATCH_ID = "batch_id"
# the local property Spark sets on every job of a streaming query (StreamExecution.QUERY_ID_KEY)
QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass
class StreamCommitMessage(LanceCommitMessage):
    """A task's files and the id of the streaming query that wrote them."""

    query_id: str | None = None


def task_query_id() -> str | None:
    """The id of the streaming query the current Spark task belongs to (None outside one)."""
    context = TaskContext.get()
    return context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None


def received(messages: list[WriterCommitMessage | None]) -> tuple[WrittenFiles | None, str | None]:
    """The files of every task message merged, and the query id they carry.

    (None, None) when no task sent a message (a batch of no input partitions).
    """
    ours = [m for m in messages if isinstance(m, StreamCommitMessage)]
    if not ours:
        return None, None
    ids = {m.query_id for m in ours}
    if len(ids) != 1 or None in ids:
        raise PartitionedNamespaceError(
            f"the tasks of one micro-batch name different streaming queries {sorted(map(str, ids))}"
        )
    return merge_messages(ours[0].written.snapshot_version, ours), ids.pop()


def committed_batch(manifest: Manifest, query_id: str) -> int | None:
    """The newest batch id that query ``query_id`` committed to ``manifest``, or None."""

    def of_query(info: CommitInfo) -> bool:
        return info.operation == STREAM_OPERATION and info.parameters.get(QUERY_ID) == query_id

    found = newest_commit(manifest, of_query)
    if found is None:
        return None
    batch = found[1].parameters.get(BATCH_ID)
    return batch if isinstance(batch, int) else None


class LancePartitionedStreamWriter(DataSourceStreamArrowWriter):
    """One micro-batch's writer: the batch sink's writer, plus the exactly-once check.

    Spark makes one on the driver before each batch (pickled to the tasks) and one
    more for each ``commit`` or ``abort``, which is therefore told the snapshot the
    files were written for by the messages, not by its own planning.
    """

    def __init__(self, files: LancePartitionedWriter):
        self.files = files

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        return StreamCommitMessage(self.files.write(iterator).written, task_query_id())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        written, query_id = received(messages)
        if written is None or query_id is None:
            return
        landed = committed_batch(self.files._manifest(), query_id)
        if landed is not None and landed >= batchId:
            log.warning(
                "lance_partitioned: batch %d of streaming query %s was committed before "
                "(the newest commit holds batch %d); not writing it again",
                batchId,
                query_id,
                landed,
            )
            self.files.discard(written)
            return
        self.files.publish(
            written, CommitInfo(STREAM_OPERATION, {QUERY_ID: query_id, BATCH_ID: batchId})
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        written, _ = received(messages)
        if written is not None:
            self.files.discard(written)


def plan_stream_write(
    opts: SourceOptions, schema: StructType, overwrite: bool
) -> LancePartitionedStreamWriter:
    """Driver-side planning of one micro-batch (``spark.sink.plan_write``, append only)."""
    if overwrite:
        raise UnsupportedFeatureError(
            f"the lance_partitioned streaming sink appends; output mode 'complete' "
            f"(replace {opts.root!r} with every batch) is not supported. Use "
            "outputMode('append'), or foreachBatch with lance_partitioned.spark.merge for upserts"
        )
    return LancePartitionedStreamWriter(plan_write(opts, schema, overwrite=False))
