"""The Structured Streaming sink appends each micro-batch once (issue 32, item 3).

The source is a directory of Parquet files read one file per micro-batch
(``maxFilesPerTrigger=1``), so every batch holds known rows. The oracle is those
files read with pyarrow: after any stop, restart, replay or killed driver the
namespace holds each source row exactly once.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lance_partitioned as lp

pytest.importorskip("pyspark")
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType  # noqa: E402

from lance_partitioned import spark as lps  # noqa: E402
from lance_partitioned.errors import UnsupportedFeatureError  # noqa: E402
from lance_partitioned.spark.options import SourceOptions  # noqa: E402
from lance_partitioned.spark.stream_sink import (  # noqa: E402
    STREAM_OPERATION,
    plan_stream_write,
)

REPO = Path(__file__).resolve().parent.parent
ROWS_PER_FILE = 40
SPEC = "year(ts), month(ts)"
SPARK_SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("ts", TimestampType()),
        StructField("v", StringType()),
    ]
)
ARROW_SCHEMA = pa.schema(
    [("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.string())]
)


def source_file(src: Path, i: int) -> None:
    """File ``i`` of the source: ids ``i*ROWS_PER_FILE ...``, timestamps over 14 months."""
    src.mkdir(parents=True, exist_ok=True)
    ids = list(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE))
    start = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)
    ts = [start + dt.timedelta(days=31 * (k % 14), hours=k) for k in ids]
    table = pa.table({"id": ids, "ts": ts, "v": [f"row {k}" for k in ids]}, schema=ARROW_SCHEMA)
    pq.write_table(table, src / f"part-{i:03d}.parquet")


def stream(spark, src: Path, root: str, checkpoint: Path, fmt: str = "lance_partitioned"):
    """The writer of the source stream into ``root`` (one file per micro-batch)."""
    df = spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(src))
    return (
        df.writeStream.format(fmt)
        .option("spec", SPEC)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
    )


def run_to_end(spark, src: Path, root: str, checkpoint: Path):
    """Run the stream over every file there is now, and return the finished query."""
    query = stream(spark, src, root, checkpoint).trigger(availableNow=True).start(root)
    query.awaitTermination(600)
    assert query.exception() is None
    return query


def assert_exactly_once(root: str, src: Path) -> None:
    """The namespace holds every row of the source files once (oracle: pyarrow on the files)."""
    want = pq.read_table(src).sort_by("id")
    got = lp.open(root).to_arrow(columns=["id", "ts", "v"]).sort_by("id")
    assert got.num_rows == want.num_rows
    for name in ("id", "ts", "v"):
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name


def stream_commits(root: str) -> list[dict]:
    """The parameters of every ``streaming append`` commit, oldest first."""
    import json

    history = lp.open(root).history().to_pylist()[::-1]
    return [json.loads(h["parameters"]) for h in history if h["operation"] == STREAM_OPERATION]


def test_stream_creates_the_namespace_and_records_query_and_batch(spark, tmp_path):
    src, root, ck = tmp_path / "src", str(tmp_path / "ns"), tmp_path / "ck"
    for i in range(3):
        source_file(src, i)
    query = run_to_end(spark, src, root, ck)
    assert_exactly_once(root, src)
    ns = lp.open(root)
    assert ns.spec.describe(ns.schema) == "year(ts) AS ts_year, month(ts) AS ts_month"
    # one commit per micro-batch, each naming the query and its batch
    commits = stream_commits(root)
    assert commits == [{"query_id": query.id, "batch_id": b} for b in range(3)]
    rows = [h["rows_added"] for h in ns.history().to_pylist() if h["operation"] == STREAM_OPERATION]
    assert rows == [ROWS_PER_FILE] * 3


def test_stop_mid_stream_then_restart_from_the_checkpoint(spark, tmp_path):
    src, root, ck = tmp_path / "src", str(tmp_path / "ns"), tmp_path / "ck"
    for i in range(4):
        source_file(src, i)
    query = stream(spark, src, root, ck).trigger(processingTime="1 second").start(root)
    try:
        deadline = time.monotonic() + 300
        while not (os.path.exists(root) and stream_commits(root)):
            assert time.monotonic() < deadline and query.isActive, query.exception()
            time.sleep(0.5)
    finally:
        query.stop()  # mid-stream: batches after the first may be running or not started
    source_file(src, 4)
    run_to_end(spark, src, root, ck)
    assert_exactly_once(root, src)
    batches = [c["batch_id"] for c in stream_commits(root)]
    assert batches == sorted(set(batches)), batches


def test_a_batch_whose_commit_landed_is_not_written_again(spark, tmp_path):
    """The commit landed but Spark's record of it did not (its ``commits/1`` file is
    gone): the restarted query replays batch 1, and the sink recognises it."""
    src, root, ck = tmp_path / "src", str(tmp_path / "ns"), tmp_path / "ck"
    for i in range(2):
        source_file(src, i)
    first = run_to_end(spark, src, root, ck)
    for name in ("1", ".1.crc"):
        (ck / "commits" / name).unlink(missing_ok=True)
    source_file(src, 2)
    second = run_to_end(spark, src, root, ck)
    assert second.id == first.id  # the identity the sink matches on survives the restart
    assert_exactly_once(root, src)
    assert [c["batch_id"] for c in stream_commits(root)] == [0, 1, 2]


def _files(root: str) -> set[str]:
    """Every Lance data file under ``root`` outside ``__manifest``."""
    return {
        str(p) for p in Path(root).rglob("*.lance") if "__manifest" not in p.parts and p.is_file()
    }


def test_committing_one_batch_twice_publishes_it_once(tmp_path):
    """The driver's ``commit`` for a batch id already committed by the same query
    publishes nothing and removes the replay's files (no Spark needed)."""
    root = str(tmp_path / "ns")
    rows = pa.table(
        {
            "id": [1, 2, 3],
            "ts": [dt.datetime(2024, m, 1, tzinfo=dt.timezone.utc) for m in (1, 2, 2)],
            "v": ["a", "b", "c"],
        },
        schema=ARROW_SCHEMA,
    )

    def one_attempt(batch_id: int, query_id: str = "q-1") -> None:
        opts = SourceOptions.parse({"path": root, "spec": SPEC})
        writer = plan_stream_write(opts, SPARK_SCHEMA, overwrite=False)
        message = writer.write(iter(rows.to_batches()))
        message.query_id = query_id  # a Spark task takes it from its TaskContext
        writer.commit([message], batch_id)

    one_attempt(0)
    kept = _files(root)
    version = lp.open(root).version
    one_attempt(0)  # the replay of batch 0
    assert lp.open(root).version == version
    assert _files(root) == kept
    assert lp.open(root).count() == 3
    one_attempt(1)  # the next batch is written
    one_attempt(0, query_id="q-2")  # another query's batch 0 is its own
    assert lp.open(root).count() == 9
    assert [(c["query_id"], c["batch_id"]) for c in stream_commits(root)] == [
        ("q-1", 0),
        ("q-1", 1),
        ("q-2", 0),
    ]


def test_complete_output_mode_is_refused_and_writes_nothing(spark, tmp_path):
    src, root = tmp_path / "src", str(tmp_path / "ns")
    source_file(src, 0)
    counts = (
        spark.readStream.schema(SPARK_SCHEMA).parquet(str(src)).groupBy("v").count()
    )  # an aggregate: complete mode is allowed by Spark
    query = (
        counts.writeStream.format("lance_partitioned")
        .outputMode("complete")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start(root)
    )
    with pytest.raises(Exception, match="output mode 'complete'"):
        query.awaitTermination(300)
    assert not os.path.exists(root)
    with pytest.raises(UnsupportedFeatureError, match="outputMode\\('append'\\)"):
        plan_stream_write(SourceOptions.parse({"path": root}), SPARK_SCHEMA, overwrite=True)
    assert not os.path.exists(root)


KILLED_DRIVER = """
import os, sys, time
from lance_partitioned.spark import local_session
from lance_partitioned.spark.datasource import LancePartitionedDataSource
from lance_partitioned.spark.stream_sink import LancePartitionedStreamWriter
from pyspark.sql.types import StructType

src, root, ck, marker = sys.argv[1:5]


class StallingWriter(LancePartitionedStreamWriter):
    def commit(self, messages, batchId):
        super().commit(messages, batchId)  # our commit lands ...
        with open(marker + ".tmp", "w") as fh:
            fh.write(f"{batchId} {os.getpid()}")
        os.replace(marker + ".tmp", marker)
        time.sleep(600)  # ... and the driver dies before Spark records it


class StallAfterCommit(LancePartitionedDataSource):
    @classmethod
    def name(cls):
        return "lp_stall_after_commit"

    def streamWriter(self, schema, overwrite):
        return StallingWriter(super().streamWriter(schema, overwrite).files)


spark = local_session(master="local[1]", app_name="killed-driver")
spark.dataSource.register(StallAfterCommit)
schema = StructType.fromJson(__import__("json").loads(sys.argv[5]))
df = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
query = (
    df.writeStream.format("lp_stall_after_commit")
    .option("spec", "year(ts), month(ts)")
    .option("checkpointLocation", ck)
    .start(root)
)
query.awaitTermination()
"""


def test_a_killed_driver_restarts_from_the_checkpoint_exactly_once(spark, tmp_path):
    """A driver process killed (SIGKILL, the whole process group: its JVM and Python
    workers too) right after batch 0's commit landed and before Spark recorded it:
    the restart replays batch 0, which is not written again, then goes on."""
    import json

    src, root, ck = tmp_path / "src", str(tmp_path / "ns"), tmp_path / "ck"
    marker = tmp_path / "committed"
    for i in range(3):
        source_file(src, i)
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(KILLED_DRIVER))
    env = {**os.environ, "PYTHONPATH": str(REPO), "LANCE_LOG": "error"}
    args = [str(src), root, str(ck), str(marker), json.dumps(SPARK_SCHEMA.jsonValue())]
    driver = subprocess.Popen(
        [sys.executable, str(script), *args],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 400
        while not marker.exists():
            assert driver.poll() is None, driver.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the first commit never landed"
            time.sleep(0.5)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(60)
        driver.stderr.close()
    batch, commit_worker = marker.read_text().split()
    _wait_gone(driver.pid, commit_worker=int(commit_worker))
    assert batch == "0"
    assert [c["batch_id"] for c in stream_commits(root)] == [0]
    assert not (ck / "commits" / "0").exists()  # Spark never recorded batch 0
    run_to_end(spark, src, root, ck)
    assert_exactly_once(root, src)
    assert [c["batch_id"] for c in stream_commits(root)] == [0, 1, 2]


def _wait_gone(pgid: int, commit_worker: int, timeout: float = 60.0) -> None:
    """Wait until the killed driver's process group and its commit worker (a PySpark
    daemon's child, in a process group of its own) are gone; a commit worker that
    outlived its driver could still publish after the restart."""
    deadline = time.monotonic() + timeout
    for alive in (lambda: os.killpg(pgid, 0), lambda: os.kill(commit_worker, 0)):
        while True:
            try:
                alive()
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                os.kill(commit_worker, signal.SIGKILL)  # ours: do not leave it sleeping
                raise AssertionError("a process of the killed driver outlived it")
            time.sleep(0.2)


def test_foreach_batch_merge_replayed_gives_the_same_table(spark, tmp_path):
    """The upsert of docs/STREAMING.md: re-running a micro-batch's merge (a replay)
    leaves the table as one run did. Oracle: the rows, last value per key."""
    root = str(tmp_path / "ns")
    base = pa.table(
        {
            "id": list(range(10)),
            "ts": [dt.datetime(2024, 1 + k % 3, 1, tzinfo=dt.timezone.utc) for k in range(10)],
            "v": [f"old {k}" for k in range(10)],
        },
        schema=ARROW_SCHEMA,
    )
    lp.create(root, ARROW_SCHEMA, SPEC).append(base)
    change = pa.table(
        {
            "id": [3, 4, 20, 21],
            "ts": [dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)] * 4,
            "v": ["new 3", "new 4", "new 20", "new 21"],
        },
        schema=ARROW_SCHEMA,
    )
    batch_df = spark.createDataFrame(change.to_pandas(), SPARK_SCHEMA)

    def upsert(df, batch_id: int) -> None:
        lps.merge(
            spark, df, root, on="id"
        ).when_matched_update_all().when_not_matched_insert_all().execute()

    upsert(batch_df, 7)
    once = lp.open(root).to_arrow(columns=["id", "ts", "v"]).sort_by("id")
    upsert(batch_df, 7)  # replayed after a failure
    twice = lp.open(root).to_arrow(columns=["id", "ts", "v"]).sort_by("id")
    want = {r["id"]: r for r in base.to_pylist()}
    want.update({r["id"]: r for r in change.to_pylist()})
    assert once.to_pylist() == [want[k] for k in sorted(want)]
    assert twice.equals(once)
