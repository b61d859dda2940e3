"""Structured Streaming ingest: the lance_partitioned sink against Spark's Parquet file sink.

    .venv/bin/python benchmarks/streaming_bench.py [--files 30] [--rows-per-file 200000]
        [--trigger 10] [--partitions 10000] [--workdir /tmp/lp_streaming_bench]
        [--master local[2]] [--out benchmarks/results/streaming.md]
    .venv/bin/python benchmarks/streaming_bench.py --tiny      # a minute, for a smoke run

1. **Ingest.** One source for both sinks: a directory of Parquet files (``id``,
   ``ts`` over ``--months`` months, three payload columns), read
   ``--files-per-trigger`` files per micro-batch with ``--trigger``-second
   processing-time triggers. Contenders, in the same run and the same session:
   ``df.writeStream.format("lance_partitioned")`` into a namespace partitioned by
   ``year(ts), month(ts)``, and ``df.writeStream.format("parquet")`` with
   ``partitionBy("year", "month")`` (the two columns computed in Spark). Reported
   per sink, over the batches after the first: rows per second of the batches'
   own time (Spark's ``triggerExecution``: the rate a stream sustains when data
   waits at every trigger) and of Spark's ``addBatch`` time (the time spent writing).
2. **Commit per batch at N partitions** (no Spark): a year/month namespace of
   ``--partitions`` partitions, then ``--commit-batches`` micro-batches each
   touching two months, through the streaming writer's driver side exactly as
   Spark calls it (``plan_stream_write`` before the batch and again for the
   commit, ``write`` as a task, ``commit(messages, batch_id)``, which includes the
   exactly-once lookup). Reported: the median seconds of planning and of the commit;
   the commit's notice to the host's Spark drivers (``spark.refresh``) apart.

Answers are checked: each sink's rows (count, sum and distinct count of ``id``),
and the namespace after the commit batches, against pyarrow over the source; the
script exits non-zero on a difference. The report is headed by the command, the
machine and the load average.
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCE_LOG", "error")

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.dataset as pads  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402

import lance_partitioned as lp  # noqa: E402

SPEC = "year(ts), month(ts)"
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("device", pa.string()),
        ("reading", pa.float64()),
        ("status", pa.int32()),
    ]
)
SPARK_SCHEMA = "id long, ts timestamp, device string, reading double, status int"
START = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
TINY = {
    "files": 4,
    "rows_per_file": 2000,
    "files_per_trigger": 1,
    "trigger": 1.0,
    "partitions": "30",
    "commit_batches": 3,
}


def month_start(months_after: int) -> dt.datetime:
    """The first instant of the month ``months_after`` months after (or before) ``START``."""
    y, m = divmod(START.month - 1 + months_after, 12)
    return START.replace(year=START.year + y, month=m + 1)


def rows(first_id: int, n: int, months: int, month_offset: int = 0) -> pa.Table:
    """``n`` deterministic rows, ids from ``first_id``, spread over ``months`` months."""
    ids = pa.array(range(first_id, first_id + n), pa.int64())
    k = ids.to_numpy()
    starts = [month_start(month_offset + int(i) % months) for i in k]
    ts = [s + dt.timedelta(seconds=int(i) % 86_400) for s, i in zip(starts, k, strict=True)]
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(ts, SCHEMA.field("ts").type),
            "device": pa.array([f"device-{int(i) % 500}" for i in k]),
            "reading": pa.array((k % 1000) / 10.0),
            "status": pa.array((k % 7).astype("int32")),
        },
        schema=SCHEMA,
    )


def make_source(src: Path, files: int, rows_per_file: int, months: int) -> pa.Table:
    """Write the source files (once per shape) and return the ids they hold."""
    if not (src / "_done").exists():
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        for i in range(files):
            pq.write_table(
                rows(i * rows_per_file, rows_per_file, months), src / f"part-{i:05d}.parquet"
            )
        (src / "_done").touch()
    return pq.read_table(src, columns=["id"])


def id_summary(ids: pa.Array | pa.ChunkedArray) -> tuple[int, int, int]:
    """(count, sum, distinct count) of ``ids``: what both sinks must hold."""
    return len(ids), pc.sum(ids).as_py() or 0, pc.count_distinct(ids).as_py()


def ingest(spark, sink: str, src: Path, out: Path, args) -> dict:
    """Stream every source file into ``sink`` (``lance_partitioned`` or ``parquet``)."""
    from pyspark.sql import functions as F

    checkpoint = Path(f"{out}_checkpoint")
    for old in (out, checkpoint):  # a fresh query: a kept checkpoint would find nothing new
        shutil.rmtree(old, ignore_errors=True)
    df = (
        spark.readStream.schema(SPARK_SCHEMA)
        .option("maxFilesPerTrigger", args.files_per_trigger)
        .parquet(str(src))
    )
    if sink == "parquet":
        df = df.withColumn("year", F.year("ts")).withColumn("month", F.month("ts"))
        writer = df.writeStream.format("parquet").partitionBy("year", "month")
    else:
        writer = df.writeStream.format("lance_partitioned").option("spec", SPEC)
    query = (
        writer.option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=f"{args.trigger:g} seconds")
        .start(str(out))
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    # the first batch also starts the query's Python workers and plans the query
    rates = _rates(batches[1:] or batches)
    rates["first_batch_s"] = batches[0]["durationMs"]["triggerExecution"] / 1000
    rates["rows"] = sum(p["numInputRows"] for p in batches)
    rates["batches"] = len(batches)
    return rates


def _rates(batches: list[dict]) -> dict:
    """Rows per second of the batches' own time: the rate a saturated stream sustains
    (a batch that ends within its trigger waits for the next one, for both sinks)."""
    total = sum(p["numInputRows"] for p in batches)
    busy = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    add = sum(p["durationMs"].get("addBatch", 0) for p in batches) / 1000
    return {
        "batches": len(batches),
        "rows": total,
        "batch_rows_s": total / max(busy, 1e-9),
        "add_rows_s": total / max(add, 1e-9),
        "add_median_s": statistics.median(
            p["durationMs"].get("addBatch", 0) / 1000 for p in batches
        ),
    }


def check_ingest(sink: str, out: Path, want: tuple[int, int, int]) -> None:
    if sink == "parquet":
        ids = pads.dataset(out, format="parquet", partitioning="hive").to_table(columns=["id"])
    else:
        ids = lp.open(str(out)).to_arrow(columns=["id"])
    got = id_summary(ids.column("id"))
    if got != want:
        raise AssertionError(f"{sink} sink holds (count, sum, distinct) {got}, source {want}")


def commit_times(root: str, partitions: int, batches: int, rows_per_batch: int) -> dict:
    """Seconds of the driver's planning and commit per micro-batch at ``partitions``."""
    from pyspark.sql.types import (
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from lance_partitioned.spark.options import SourceOptions
    from lance_partitioned.spark.stream_sink import plan_stream_write
    from lance_partitioned.spark.timing import TIMING_LOG_ENV

    shutil.rmtree(root, ignore_errors=True)
    # one row per month: months 0 .. partitions-1 before START
    ns = lp.create(root, SCHEMA, SPEC)
    ns.append(rows(-partitions, partitions, partitions, month_offset=-partitions), progress=False)
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("ts", TimestampType()),
            StructField("device", StringType()),
            StructField("reading", DoubleType()),
            StructField("status", IntegerType()),
        ]
    )
    opts = SourceOptions.parse({"path": root, "spec": SPEC})
    plan, commit, notify = [], [], []
    timing = Path(f"{root}_timing.jsonl")
    timing.unlink(missing_ok=True)
    os.environ[TIMING_LOG_ENV] = str(timing)  # the commit's own split: publish, notify
    for b in range(batches):
        t0 = time.perf_counter()
        writer = plan_stream_write(opts, schema, overwrite=False)  # before the batch's tasks
        plan.append(time.perf_counter() - t0)
        # a batch of the newest two months, as a stream of recent events writes
        data = rows(b * rows_per_batch, rows_per_batch, 2, month_offset=-2)
        message = writer.write(iter(data.to_batches()))
        message.query_id = "streaming-bench"
        t0 = time.perf_counter()
        plan_stream_write(opts, schema, overwrite=False).commit([message], b)  # the commit worker
        seconds = time.perf_counter() - t0
        entry = json.loads(timing.read_text().splitlines()[-1])
        # telling this host's other Spark drivers to refresh their views is not the commit
        notify.append(entry["notify_seconds"])
        commit.append(seconds - entry["notify_seconds"])
    del os.environ[TIMING_LOG_ENV]
    ns = lp.open(root)
    want = partitions + batches * rows_per_batch
    got = (ns.count(), ns.partitions(with_counts=False).num_rows)
    if got != (want, partitions):
        raise AssertionError(f"{root}: (rows, partitions) {got}, expected {(want, partitions)}")
    return {
        "plan_s": statistics.median(plan),
        "commit_s": statistics.median(commit),
        "commit_min_s": min(commit),
        "notify_s": statistics.median(notify),
    }


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the benchmark; ``spark``: a session to use (and leave running) instead of a new one."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=30)
    ap.add_argument("--rows-per-file", type=int, default=200_000)
    ap.add_argument("--files-per-trigger", type=int, default=1)
    ap.add_argument("--months", type=int, default=24, help="distinct year/month values")
    ap.add_argument("--trigger", type=float, default=10.0, help="seconds between triggers")
    ap.add_argument("--partitions", default="10000", help="comma-separated, for the commit part")
    ap.add_argument("--commit-batches", type=int, default=5)
    ap.add_argument("--tiny", action="store_true", help="a small scale, for smoke runs")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", default="/tmp/lp_streaming_bench")
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "results", "streaming.md")
    )
    args = ap.parse_args(argv)
    if args.tiny:
        for key, value in TINY.items():
            setattr(args, key, value)
    started, load_start, t0 = utc_now(), loadavg(), time.perf_counter()
    work = Path(args.workdir)
    src = work / f"src_{args.files}x{args.rows_per_file}_m{args.months}"
    want = id_summary(make_source(src, args.files, args.rows_per_file, args.months).column("id"))

    from lance_partitioned.spark import local_session, stop_session

    own = spark is None
    if own:
        spark = local_session(args.master, "streaming_bench")
    try:
        ingest_results = {}
        for sink in ("lance_partitioned", "parquet"):
            out = work / f"out_{sink}"
            ingest_results[sink] = ingest(spark, sink, src, out, args)
            check_ingest(sink, out, want)
            print(sink, ingest_results[sink], flush=True)
    finally:
        if own:
            stop_session(spark)
    commits = {
        int(n): commit_times(str(work / f"commit_{n}"), int(n), args.commit_batches, 1000)
        for n in str(args.partitions).split(",")
    }
    head = header_lines(
        "Structured Streaming ingest: lance_partitioned sink vs Spark's Parquet sink",
        command(__file__, argv),
        started,
        load_start,
        time.perf_counter() - t0,
    )
    report = "\n".join(head) + render(args, ingest_results, commits)
    write_report(args.out, report)
    print(report)
    return 0


def render(args, ingest_results: dict, commits: dict) -> str:
    lines = [
        f"Source: {args.files} Parquet files of {args.rows_per_file:,} rows "
        f"({args.months} months), {args.files_per_trigger} file(s) per micro-batch, "
        f"{args.trigger:g}-second processing-time triggers, master {args.master}. "
        "Both sinks' rows checked against the source (count, sum and distinct ids).",
        "",
        "Rates are over the batches after the first (which also starts the query's "
        "Python workers; its seconds are shown apart): rows per second of the batches' "
        "own time (Spark's `triggerExecution`: what a stream sustains when every trigger "
        "has data waiting; a batch that ends sooner waits for its next trigger) and of "
        "the time spent writing (`addBatch`).",
        "",
        "| sink | batches | rows | rows/s (batch time) | rows/s (addBatch) | addBatch median s "
        "| first batch s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = {
        "lance_partitioned": f"lance_partitioned, spec `{SPEC}`",
        "parquet": "Spark Parquet file sink, `partitionBy(year, month)`",
    }
    for sink, r in ingest_results.items():
        lines.append(
            f"| {names[sink]} | {r['batches']} | {r['rows']:,} | {r['batch_rows_s']:,.0f} "
            f"| {r['add_rows_s']:,.0f} | {r['add_median_s']:.2f} | {r['first_batch_s']:.1f} |"
        )
    lines += [
        "",
        "Commit per micro-batch (driver side, no Spark; a batch of 1,000 rows into the "
        f"two newest months; median of {args.commit_batches}): planning runs before the "
        "batch's tasks and again in the commit worker; the commit includes the "
        "exactly-once lookup, not the notice to every Spark driver on this host that "
        "refreshes their views (`spark.refresh`), shown apart: it depends on what else runs.",
        "",
        "| partitions | planning s | commit s | fastest commit s | notifying drivers s |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n, r in commits.items():
        lines.append(
            f"| {n:,} | {r['plan_s']:.3f} | {r['commit_s']:.3f} | {r['commit_min_s']:.3f} "
            f"| {r['notify_s']:.3f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
