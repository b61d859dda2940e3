"""Streaming read latency: from a commit to its rows in a micro-batch of
``spark.readStream.format("lance_partitioned")`` (issue 32, docs/STREAMING_SOURCE.md).

    .venv/bin/python benchmarks/streaming_read_bench.py [--commits 20] [--interval 2]
        [--rows 1000] [--keys 4] [--trigger-ms 100] [--workdir /tmp/lpstream]
        [--out benchmarks/results/streaming_read.md]

One namespace (``id int64, k string, seq int64``, spec ``k``). A query streams it
(default start: new commits only) into Spark's memory sink, with a ``processingTime``
trigger of ``--trigger-ms``. Then a thread of the same process appends ``--commits``
commits of ``--rows`` rows over ``--keys`` partitions, ``--interval`` seconds apart,
noting the version and the time each ``ns.append`` returned (after one commit, not
measured, whose batch starts the Python workers).

Measured per commit: **latency** = the end of the first micro-batch whose end offset
covers its version (Spark's progress report: the trigger's start plus its
``triggerExecution``; the batch's rows are in the sink then) minus the time its
``append`` returned (best, median, 90th percentile, worst). The progress reports also
say where a batch's time goes (median ms of ``latestOffset``, ``queryPlanning``,
``addBatch`` (reading the rows into the sink), ``walCommit`` + ``commitOffsets`` (the
checkpoint) and the whole trigger). Answer check: the sink holds every appended row
exactly once (ids compared with the appended ones) and no row of a commit before the
stream started; a wrong answer exits non-zero. Writes
``benchmarks/results/streaming_read.md`` (``--out``) headed by the command, the machine
and the load.
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
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pyarrow as pa  # noqa: E402
from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402

import lance_partitioned as lp  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "streaming_read.md"
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("seq", pa.int64())])
PHASES = (
    "latestOffset",
    "queryPlanning",
    "addBatch",
    "walCommit",
    "commitOffsets",
    "triggerExecution",
)


def commit_rows(seq: int, rows: int, keys: int) -> pa.Table:
    """The rows of commit ``seq``: ids ``seq * rows ..``, spread over ``keys`` partitions
    (commit 0 is made before the stream starts, so it must not arrive; commit 1 warms the
    query up, unmeasured)."""
    ids = pa.array(range(seq * rows, (seq + 1) * rows), pa.int64())
    return pa.table(
        {"id": ids, "k": [f"k{i % keys}" for i in range(rows)], "seq": [seq] * rows},
        schema=SCHEMA,
    )


def append_commits(root: str, args: argparse.Namespace, committed: dict[int, float]) -> None:
    """Append the commits, noting each one's version and the time its append returned."""
    ns = lp.open(root)
    for seq in range(2, args.commits + 2):
        time.sleep(args.interval)
        ns.append(commit_rows(seq, args.rows, args.keys))
        committed[ns.version] = time.time()


def run_stream(spark: Any, root: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Stream ``root`` into the memory sink while a thread appends; commit times, the
    progress reports of non-empty batches and the sink's ids."""
    committed: dict[int, float] = {}
    query = (
        spark.readStream.format("lance_partitioned")
        .load(root)
        .writeStream.format("memory")
        .queryName("streaming_read_bench")
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime=f"{args.trigger_ms} milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()  # started: the initial offset is taken
        # a first batch, not measured: it starts the Python workers that read
        lp.open(root).append(commit_rows(1, args.rows, args.keys))
        query.processAllAvailable()
        writer = threading.Thread(target=append_commits, args=(root, args, committed))
        writer.start()
        writer.join()
        query.processAllAvailable()
        measured = min(committed, default=0)
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        progress = [p for p in progress if batch_end(p)[0] >= measured]
        ids = [r.id for r in spark.table("streaming_read_bench").select("id").collect()]
    finally:
        query.stop()
        spark.catalog.dropTempView("streaming_read_bench")
    return {"committed": committed, "progress": progress, "ids": ids}


def batch_end(progress: dict[str, Any]) -> tuple[int, float]:
    """(end version, end time in seconds since the epoch) of one batch's progress report."""
    started = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00"))
    end = started.timestamp() + progress["durationMs"]["triggerExecution"] / 1e3
    offset = progress["sources"][0]["endOffset"]
    offset = json.loads(offset) if isinstance(offset, str) else offset
    return int(offset["version"]), end


def check(result: dict[str, Any], args: argparse.Namespace) -> tuple[dict[int, float], list[str]]:
    """Latency per commit (by version), and the answer checks that failed."""
    failures = []
    want = list(range(args.rows, (args.commits + 2) * args.rows))
    if sorted(result["ids"]) != want:
        got = result["ids"]
        failures.append(f"{len(got)} rows arrived ({len(set(got))} distinct), {len(want)} appended")
    ends = sorted(batch_end(p) for p in result["progress"])
    latency = {}
    for version, committed in result["committed"].items():
        arrived = [t for v, t in ends if v >= version]
        if not arrived:
            failures.append(f"no batch covered version {version}")
            continue
        latency[version] = arrived[0] - committed
    return latency, failures


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.0f}" if values else "n/a"


def render(
    latency: dict[int, float], result: dict[str, Any], args: argparse.Namespace
) -> list[str]:
    lat = sorted(latency.values()) or [float("nan")]
    p90 = lat[min(len(lat) - 1, int(0.9 * len(lat)))]
    lines = ["## Commit to rows in a micro-batch (ms)", ""]
    lines += [
        "| commits | rows / commit | partitions / commit | trigger | best | median | p90 | worst |",
        "|---:|---:|---:|---|---:|---:|---:|---:|",
        f"| {len(latency)} | {args.rows:,} | {args.keys} | processingTime {args.trigger_ms} ms | "
        f"{lat[0] * 1e3:.0f} | {ms(lat)} | {p90 * 1e3:.0f} | {lat[-1] * 1e3:.0f} |",
        "",
        "## Where a non-empty batch's time goes (Spark progress, median ms)",
        "",
        f"| batches | {' | '.join(PHASES)} |",
        f"|---:|{'---:|' * len(PHASES)}",
    ]
    phases = [[p["durationMs"].get(ph, 0) / 1e3 for p in result["progress"]] for ph in PHASES]
    lines.append(f"| {len(result['progress'])} | {' | '.join(ms(v) for v in phases)} |")
    return lines


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--commits", type=int, default=20, help="commits appended while streaming")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between commits")
    p.add_argument("--rows", type=int, default=1000, help="rows per commit")
    p.add_argument("--keys", type=int, default=4, help="partitions each commit writes")
    p.add_argument("--trigger-ms", type=int, default=100, help="processingTime trigger")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--workdir", default="/tmp/lpstream", help="scratch directory")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="markdown report ('' to print only)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    """Run the benchmark; ``spark``: a session to use (and leave running) instead of a new one."""
    args = parse(argv)
    started, load_start, t_start = utc_now(), loadavg(), time.perf_counter()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    root = str(work / "events")
    lp.create(root, SCHEMA, "k").append(commit_rows(0, args.rows, args.keys))
    from lance_partitioned.spark import local_session, stop_session

    own = spark is None
    if own:
        spark = local_session(args.master, "streaming_read_bench")
    try:
        result = run_stream(spark, root, args, work)
    finally:
        if own:
            stop_session(spark)
        shutil.rmtree(work, ignore_errors=True)
    latency, failures = check(result, args)
    head = header_lines(
        "Streaming read latency",
        command(__file__, argv),
        started,
        load_start,
        time.perf_counter() - t_start,
    )
    lines = [*head, *render(latency, result, args), "", "## Answer checks", ""]
    lines.append("- " + ("all passed" if not failures else "FAILED: " + "; ".join(failures)))
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    write_report(args.out, text)
    if failures:
        print("ANSWER CHECKS FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
