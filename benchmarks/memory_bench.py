"""Peak memory of a streaming write: TPC-H lineitem from a RecordBatchReader over Parquet.

    .venv/bin/python benchmarks/memory_bench.py --sf 1,3,10 --workdir /tmp/lpmem \\
        --out benchmarks/results/memory.md

Goal (issue 15): a streaming write's peak RSS is at most ``max_buffer_bytes`` +
512 MiB, whatever the input size. Each measurement runs in a fresh child
process (this script with ``--child``) that opens the generated Parquet file
as a ``pyarrow.RecordBatchReader`` and passes it to ``ns.append`` partitioned by
``year(l_shipdate), month(l_shipdate)``; the child reports its peak RSS
(``VmHWM`` from ``/proc/self/status``, the kernel's high-water mark) and the
peak of Arrow's allocators (every pool a write uses, ``split.write_memory_pools``,
sampled every 2 ms).
The same reader read to the end without writing is the floor: the interpreter,
the libraries and the reader itself.

The reader is ``pyarrow.parquet.ParquetFile(path, pre_buffer=False)``: with
pyarrow's default ``pre_buffer=True``, ``iter_batches`` over the whole file
fetches every row group's bytes ahead, so the *reader* holds memory growing
with the file (``--pre-buffer`` measures that too). Every write's row count and
``sum(l_quantity)`` are checked against the Parquet file (pyarrow), and the
script exits non-zero when one is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402

SPEC = "year(l_shipdate), month(l_shipdate)"
MIB = 1 << 20


def _status_mib(key: str) -> float:
    """A ``/proc/self/status`` memory line in MiB (``VmHWM``: the peak; ``VmRSS``: now)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _vmhwm_mib() -> float:
    return _status_mib("VmHWM")


def _reset_peak() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (Linux >= 4.0); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def tenths(samples: list[float]) -> list[float]:
    """The largest sample in each tenth of ``samples`` (RSS over the run: does it plateau?)."""
    n = len(samples)
    return [max(samples[i * n // 10 : (i + 1) * n // 10] or [float("nan")]) for i in range(10)]


def child(args: argparse.Namespace) -> int:
    """One measurement in this (fresh) process; prints one JSON line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import lance_partitioned as lp
    from demo import tpch
    from lance_partitioned.operations.write.split import write_memory_pools

    peak = [0]
    rss: list[float] = []  # VmRSS every 50 ms
    done = threading.Event()
    pools = write_memory_pools()  # the default pool, the writer's buffers, its chunks

    def arrow_now() -> int:
        return sum(pool.bytes_allocated() for pool in pools)

    def sample() -> None:
        i = 0
        while not done.is_set():
            peak[0] = max(peak[0], arrow_now())
            if i % 25 == 0:
                rss.append(_status_mib("VmRSS"))
            i += 1
            time.sleep(0.002)

    threading.Thread(target=sample, daemon=True).start()
    start_rss = _vmhwm_mib()
    pf = pq.ParquetFile(args.child, pre_buffer=args.pre_buffer)
    reader = pa.RecordBatchReader.from_batches(
        pf.schema_arrow, pf.iter_batches(batch_size=args.batch_rows)
    )
    t0, c0 = time.perf_counter(), time.process_time()
    out: dict[str, object] = {}
    if args.mode == "read":
        rows = sum(b.num_rows for b in reader)
    else:
        shutil.rmtree(args.root, ignore_errors=True)
        ns = lp.create(args.root, tpch.normalize_schema(pf.schema_arrow), SPEC)
        result = ns.append(reader, max_buffer_bytes=args.buffer_mib * MIB, progress=False)
        rows = result.rows
        out["partitions"] = result.partitions
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    done.set()
    out.update(
        rows=rows,
        secs=secs,
        cpu=cpu,
        start_rss_mib=start_rss,
        peak_rss_mib=_vmhwm_mib(),
        peak_arrow_mib=peak[0] / MIB,
        rss_tenths=tenths(rss),
    )
    if args.mode == "write":  # read back, outside the measured part
        back = lp.open(args.root).scan(columns=["l_quantity"]).to_arrow()
        out["rows_back"] = back.num_rows
        out["qty_back"] = str(pc.sum(back["l_quantity"]).as_py())
    print(json.dumps(out))
    return 0


# -- through the Spark sink: each task's peak RSS -----------------------------------


def _probe_source() -> type:
    """Our Spark source under another name, its writer recording each task's peak RSS.

    Built on demand (pyspark is imported only for ``--spark``) and sent to the Python
    workers by value. Each task resets its worker's ``VmHWM`` (workers are reused
    across tasks), runs our sink's ``write`` and writes one JSON line (rows, RSS at
    the start, peak RSS) into the ``probe_dir`` option's directory; the commit
    message is our sink's own.
    """
    from pyspark.sql.datasource import DataSourceArrowWriter

    from lance_partitioned.spark.datasource import LancePartitionedDataSource

    class ProbeWriter(DataSourceArrowWriter):
        def __init__(self, inner: DataSourceArrowWriter, side: str):
            self.inner, self.side = inner, side

        def write(self, iterator):  # type: ignore[no-untyped-def]
            import uuid

            reset = _reset_peak()
            start = _status_mib("VmRSS")
            rows = [0]

            def counted():  # type: ignore[no-untyped-def]
                for batch in iterator:
                    rows[0] += batch.num_rows
                    yield batch

            t0 = time.perf_counter()
            message = self.inner.write(counted())
            record = dict(
                pid=os.getpid(),
                rows=rows[0],
                start_rss_mib=start,
                peak_rss_mib=_vmhwm_mib(),
                peak_reset=reset,
                secs=time.perf_counter() - t0,
            )
            with open(os.path.join(self.side, f"{uuid.uuid4().hex}.json"), "w") as f:
                json.dump(record, f)
            return message

        def commit(self, messages):  # type: ignore[no-untyped-def]
            return self.inner.commit(messages)

        def abort(self, messages):  # type: ignore[no-untyped-def]
            return self.inner.abort(messages)

    class ProbeSource(LancePartitionedDataSource):
        @classmethod
        def name(cls) -> str:
            return "lp_memory_probe"

        def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
            return ProbeWriter(super().writer(schema, overwrite), self.options["probe_dir"])

    return ProbeSource


def spark_task_peaks(spark, path: str, root: Path, buffer_mib: int) -> dict:
    """Write the Parquet file through the sink (``maxBufferBytes``); each task's peak RSS.

    Spark reads the file and splits it into tasks as it always does; every task's
    Python worker writes what it gets into the namespace at ``root``. Returns the
    task records, the write time, and the rows and ``sum(l_quantity)`` read back.
    """
    import pyarrow.compute as pc

    import lance_partitioned as lp

    spark.dataSource.register(_probe_source())
    shutil.rmtree(root, ignore_errors=True)
    side = root.parent / f"{root.name}_tasks"
    shutil.rmtree(side, ignore_errors=True)
    side.mkdir(parents=True)
    df = spark.read.parquet(path)
    t0 = time.perf_counter()
    (
        df.write.format("lp_memory_probe")
        .option("spec", SPEC)
        .option("maxBufferBytes", str(buffer_mib * MIB))
        .option("probe_dir", str(side))
        .mode("append")
        .save(str(root))
    )
    secs = time.perf_counter() - t0
    tasks = [json.loads(p.read_text()) for p in sorted(side.glob("*.json"))]
    shutil.rmtree(side, ignore_errors=True)
    back = lp.open(str(root)).scan(columns=["l_quantity"]).to_arrow()
    return dict(
        tasks=tasks,
        secs=secs,
        rows_back=back.num_rows,
        qty_back=str(pc.sum(back["l_quantity"]).as_py()),
    )


def spark_child(args: argparse.Namespace) -> int:
    """``--spark`` in a fresh process: one local Spark session, stopped with its JVM."""
    from lance_partitioned.spark import session as lps

    spark = lps.local_session("local[2]", "lance_partitioned-memory")
    try:
        out = spark_task_peaks(spark, args.child, Path(args.root), args.spark_buffer_mib)
    finally:
        lps.stop_session(spark)
    shutil.rmtree(args.root, ignore_errors=True)
    print(json.dumps(out))
    return 0


def run_child(path: str, mode: str, args: argparse.Namespace, root: Path) -> dict:
    cmd = [sys.executable, __file__, "--child", path, "--mode", mode, "--root", str(root)]
    cmd += ["--buffer-mib", str(args.buffer_mib), "--batch-rows", str(args.batch_rows)]
    cmd += ["--spark-buffer-mib", str(args.spark_buffer_mib)]
    if args.pre_buffer:
        cmd.append("--pre-buffer")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"child failed: {' '.join(cmd)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sf", default="1,3,10", help="comma-separated TPC-H scale factors")
    p.add_argument("--buffer-mib", type=int, default=1024, help="max_buffer_bytes in MiB")
    p.add_argument("--batch-rows", type=int, default=1 << 17, help="reader batch size")
    p.add_argument("--pre-buffer", action="store_true", help="ParquetFile(pre_buffer=True)")
    p.add_argument("--no-floor", action="store_true", help="skip the read-only floor")
    p.add_argument(
        "--spark", action="store_true", help="also write each input through the Spark sink"
    )
    p.add_argument(
        "--spark-buffer-mib", type=int, default=128, help="the sink's maxBufferBytes in MiB"
    )
    p.add_argument("--workdir", default="/tmp/lpmem", help="scratch directory (Parquet, output)")
    p.add_argument("--out", default=None, help="write the report here")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--mode", default="write", help=argparse.SUPPRESS)
    p.add_argument("--root", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return spark_child(args) if args.mode == "spark" else child(args)

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from demo import tpch

    started, load_start, t_start = utc_now(), loadavg(), time.perf_counter()
    work = Path(args.workdir)
    rows_md: list[str] = []
    tenths_md: list[str] = []
    spark_md: list[str] = []
    problems: list[str] = []
    bound = args.buffer_mib + 512
    for sf_text in [s.strip() for s in args.sf.split(",") if s.strip()]:
        sf = float(sf_text)
        path = tpch.generate(sf, str(work / f"tpch_sf{sf:g}"), tables=("lineitem",))["lineitem"]
        meta = pq.ParquetFile(path).metadata
        want_qty = str(pc.sum(pq.read_table(path, columns=["l_quantity"])["l_quantity"]).as_py())
        size = os.path.getsize(path) / MIB
        load = loadavg()
        floor = None if args.no_floor else run_child(path, "read", args, work / "unused")
        res = run_child(path, "write", args, work / f"lp_sf{sf:g}")
        shutil.rmtree(work / f"lp_sf{sf:g}", ignore_errors=True)
        if res["rows"] != meta.num_rows or res["rows_back"] != meta.num_rows:
            problems.append(f"SF{sf:g}: wrote {res['rows']:,}, read back {res['rows_back']:,}")
        if res["qty_back"] != want_qty:
            problems.append(f"SF{sf:g}: sum(l_quantity) {res['qty_back']} != {want_qty}")
        met = res["peak_rss_mib"] <= bound
        floor_text = "" if floor is None else f"{floor['peak_rss_mib']:,.0f} MiB"
        rows_md.append(
            f"| SF{sf:g} | {meta.num_rows:,} ({size:,.0f} MiB Parquet) | {args.buffer_mib:,} MiB "
            f"| **{res['peak_rss_mib']:,.0f} MiB** | {res['peak_arrow_mib']:,.0f} MiB "
            f"| {floor_text} | {res['secs']:.1f} s (cpu {res['cpu']:.1f} s) | {load} "
            f"| ≤ {bound:,} MiB: {'met' if met else '**NOT met**'} |"
        )
        print(rows_md[-1], flush=True)
        tenths_md.append(
            f"| SF{sf:g} | " + " | ".join(f"{v:,.0f}" for v in res["rss_tenths"]) + " |"
        )
        if args.spark:
            sp = run_child(path, "spark", args, work / f"lp_spark_sf{sf:g}")
            spark_rows = sum(t["rows"] for t in sp["tasks"])
            if spark_rows != meta.num_rows or sp["rows_back"] != meta.num_rows:
                problems.append(
                    f"Spark SF{sf:g}: tasks wrote {spark_rows:,}, read back {sp['rows_back']:,}"
                )
            if sp["qty_back"] != want_qty:
                problems.append(f"Spark SF{sf:g}: sum(l_quantity) {sp['qty_back']} != {want_qty}")
            spark_bound = args.spark_buffer_mib + 512
            worst = max(t["peak_rss_mib"] for t in sp["tasks"])
            per_task = ", ".join(
                f"{t['peak_rss_mib']:,.0f} ({t['rows'] / 1e6:.1f}M rows)" for t in sp["tasks"]
            )
            reset = "" if all(t["peak_reset"] for t in sp["tasks"]) else " (VmHWM not reset)"
            spark_md.append(
                f"| SF{sf:g} | {args.spark_buffer_mib:,} MiB | {len(sp['tasks'])} "
                f"| **{worst:,.0f} MiB** | {per_task}{reset} | {sp['secs']:.1f} s | {load} "
                f"| ≤ {spark_bound:,} MiB: {'met' if worst <= spark_bound else '**NOT met**'} |"
            )
            print(spark_md[-1], flush=True)
    reader = f"ParquetFile(pre_buffer={args.pre_buffer}).iter_batches(batch_size={args.batch_rows})"
    lines = header_lines(
        "Memory of a streaming write",
        command(__file__, argv if argv is not None else sys.argv[1:]),
        started,
        load_start,
        time.perf_counter() - t_start,
    )
    lines += [
        f"`ns.append(RecordBatchReader over {reader}, max_buffer_bytes=...)`, partitioned by "
        f"`{SPEC}`, each in a fresh process. Peak RSS is the process's `VmHWM`; peak Arrow is "
        "the bytes allocated in every Arrow pool a write uses (default, buffers, chunks for "
        "Lance), sampled every 2 ms; the floor is the same reader "
        "read to the end without writing (interpreter, libraries, reader).",
        "",
        "| input | rows | max_buffer_bytes | peak RSS | peak Arrow | floor (read only) "
        "| write time | load at start | goal |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows_md,
        "",
        "Resident memory over the write (MiB): the largest `VmRSS` sample (every 50 ms) in "
        "each tenth of the write's time. Flat means it does not grow with the input.",
        "",
        "| input | 1st | 2nd | 3rd | 4th | 5th | 6th | 7th | 8th | 9th | 10th |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *tenths_md,
        "",
    ]
    if spark_md:
        lines += [
            'Through the Spark sink (`df.write.format("lance_partitioned")` with '
            "`maxBufferBytes`; `spark.read.parquet` of the same file, Spark's default split into "
            "tasks, `local[2]`, one fresh session): each task's peak RSS is its Python worker's "
            "`VmHWM`, reset when the task starts (workers are reused), read when our writer returns.",
            "",
            "| input | maxBufferBytes | tasks | worst task's peak RSS | each task: peak RSS, MiB "
            "(rows) | write time | load at start | goal (per task) |",
            "|---|---|---|---|---|---|---|---|",
            *spark_md,
            "",
        ]
    lines += [
        "Answers checked: rows written and read back, and `sum(l_quantity)` read back, equal "
        "the Parquet file's (pyarrow): " + ("all equal" if not problems else "; ".join(problems)),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    write_report(args.out, text)
    if problems:
        print("WRONG ANSWERS: " + "; ".join(problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
