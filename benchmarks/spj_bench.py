"""Storage partitioned join vs Spark's shuffle joins: TPC-H orders ⨝ lineitem on orderkey.

    .venv/bin/python benchmarks/spj_bench.py [--sf 1] [--workdir /tmp/lp_spj_bench]
        [--buckets 16 16] [--repeat 3] [--master local[2]] [--out benchmarks/results/spj.md]

Variants, all producing the same rows (every column of both tables) and timed
with a ``noop`` write, which materialises every output row without collecting:

1. ``spj``: ``lance_partitioned.spark.join`` on the two namespaces;
2. ``spark_ds``: Spark's own join of the same namespaces read through the
   ``lance_partitioned`` data source (``spark.read.format(...).load``);
3. ``spark_parquet``: Spark's own join of the same data as Parquet files.

Shuffle bytes are Spark's own metric (``AppStatusStore`` stage data, summed over
the stages of each run). The namespaces are written once with the core API
(``ns.append``) and reused by later runs from ``--workdir``. Row counts of all
variants are checked equal to lineitem's row count read from its Parquet footer
(every line item has its order); the script exits non-zero otherwise. Goal:
``spj`` ≤ 0.7 × ``spark_ds`` and 0 shuffle bytes. The report is headed by the
command, the machine and the load average.
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCE_LOG", "error")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

# the repository root on sys.path: the TPC-H generator lives in the demo (demo.tpch)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402

import lance_partitioned as lp  # noqa: E402
from demo import tpch  # noqa: E402

ON = [("o_orderkey", "l_orderkey")]


def write_namespace(root: str, parquet: str, spec: str) -> lp.PartitionedNamespace:
    """Create ``root`` from a Parquet file once (streamed through ``ns.append``)."""
    marker = os.path.join(root, ".complete")
    if os.path.exists(marker):
        return lp.open(root)
    if os.path.exists(root):
        import shutil

        shutil.rmtree(root)
    schema = tpch.normalize_schema(pq.read_schema(parquet))
    ns = lp.create(root, schema, spec)
    start = time.perf_counter()
    ns.append(pa.RecordBatchReader.from_batches(schema, tpch.batches(parquet)))
    print(f"wrote {root} ({spec}) in {time.perf_counter() - start:.1f}s", flush=True)
    open(marker, "w").close()
    return ns


def run_once(spark, make_df: Callable) -> tuple[float, int]:
    """Build the DataFrame and noop-write it: (seconds, shuffle bytes written)."""
    from lance_partitioned.spark.storage_partitioned_join import shuffle_write_bytes

    before = shuffle_write_bytes(spark)
    start = time.perf_counter()
    make_df().write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - start
    return elapsed, shuffle_write_bytes(spark) - before


def measure(spark, variants: dict[str, Callable], repeat: int) -> dict[str, dict]:
    """One warm-up run per variant, then ``repeat`` rounds with the variants interleaved,
    so that load from other processes affects every variant alike."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    shuffles: dict[str, list[int]] = {k: [] for k in variants}
    for round_ in range(repeat + 1):
        for name, make in variants.items():
            elapsed, shuffled = run_once(spark, make)
            print(
                f"  round {round_} {name}: {elapsed:.2f}s, shuffle {shuffled:,} bytes", flush=True
            )
            if round_:  # round 0 warms Python workers and the JVM
                times[name].append(elapsed)
                shuffles[name].append(shuffled)
    return {
        name: {
            "best": min(times[name]),
            "median": statistics.median(times[name]),
            "shuffle": max(shuffles[name]),
            "runs": times[name],
            "rows": variants[name]().count(),
        }
        for name in variants
    }


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the benchmark; ``spark``: a session to use (and leave running) instead of a new one."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--workdir", default="/tmp/lp_spj_bench")
    ap.add_argument("--buckets", type=int, nargs=2, default=[16, 16], metavar=("ORDERS", "LINES"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "spj.md"))
    args = ap.parse_args(argv)
    started, load_start, t0 = utc_now(), loadavg(), time.perf_counter()

    from lance_partitioned.spark import NAME, local_session, stop_session
    from lance_partitioned.spark.storage_partitioned_join import executed_plan, join, join_explain

    data = os.path.join(args.workdir, f"sf{args.sf:g}")
    paths = tpch.generate(args.sf, data, ("orders", "lineitem"))
    ob, lb = args.buckets
    o_root = os.path.join(data, f"orders_b{ob}")
    l_root = os.path.join(data, f"lineitem_b{lb}")
    write_namespace(o_root, paths["orders"], f"bucket(o_orderkey, {ob})")
    write_namespace(l_root, paths["lineitem"], f"bucket(l_orderkey, {lb})")
    explain = join_explain(o_root, l_root, ON)
    print(explain.splitlines()[3], flush=True)

    own = spark is None
    if own:
        spark = local_session(args.master, "spj_bench", conf={"spark.driver.memory": "6g"})
    try:
        variants: dict[str, Callable] = {
            "spj": lambda: join(spark, o_root, l_root, ON),
            "spark_ds": lambda: (
                spark.read.format(NAME)
                .load(o_root)
                .join(
                    spark.read.format(NAME).load(l_root),
                    on=[spark_col("o_orderkey") == spark_col("l_orderkey")],
                )
            ),
            "spark_parquet": lambda: spark.read.parquet(paths["orders"]).join(
                spark.read.parquet(paths["lineitem"]),
                on=[spark_col("o_orderkey") == spark_col("l_orderkey")],
            ),
        }
        plans = {k: _strategy(executed_plan(f())) for k, f in variants.items()}
        print(plans, flush=True)
        results = measure(spark, variants, args.repeat)
    finally:
        if own:
            stop_session(spark)

    expected = pq.ParquetFile(paths["lineitem"]).metadata.num_rows
    wrong = {k: r["rows"] for k, r in results.items() if r["rows"] != expected}
    if wrong:
        raise AssertionError(f"join row counts differ from lineitem's {expected:,} rows: {wrong}")
    head = header_lines(
        "Storage partitioned join: TPC-H orders ⨝ lineitem",
        command(__file__, argv),
        started,
        load_start,
        time.perf_counter() - t0,
    )
    report = "\n".join(head) + render(args, results, plans, explain)
    write_report(args.out, report)
    print(report)
    return 0


def spark_col(name: str):
    from pyspark.sql import functions as F

    return F.col(name)


def _strategy(plan: str) -> str:
    kinds = [k for k in ("SortMergeJoin", "BroadcastHashJoin", "ShuffledHashJoin") if k in plan]
    exchanges = plan.count("Exchange")
    return f"{', '.join(kinds) or 'MapInArrow (SPJ)'}; {exchanges} Exchange node(s)"


def render(args, results: dict, plans: dict, explain: str) -> str:
    base = results["spark_ds"]["median"]
    lines = [
        f"Spark master `{args.master}`. Scale factor {args.sf:g}: orders by `bucket(o_orderkey, {args.buckets[0]})`, lineitem "
        f"by `bucket(l_orderkey, {args.buckets[1]})`; inner join on `o_orderkey = l_orderkey`, "
        f"all columns of both, {results['spj']['rows']:,} output rows (every variant, checked "
        "against lineitem's row count); after one warm-up run "
        f"each, the variants ran {args.repeat} interleaved rounds, each a "
        "`df.write.format('noop')` (materialises every row, collects nothing).",
        "",
        "| variant | Spark plan | median s | best s | runs s | vs spark_ds (median) "
        "| shuffle write bytes |",
        "|---|---|---:|---:|---|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {plans[name]} | {r['median']:.2f} | {r['best']:.2f} | "
            f"{', '.join(f'{t:.1f}' for t in r['runs'])} | {r['median'] / base:.2f}x | "
            f"{r['shuffle']:,} |"
        )
    spj = results["spj"]
    ok_time = spj["median"] <= 0.7 * base
    lines += [
        "",
        f"Goal `spj` ≤ 0.7 × `spark_ds`: **{'met' if ok_time else 'not met'}** "
        f"({spj['median'] / base:.2f}x; vs Parquet: "
        f"{spj['median'] / results['spark_parquet']['median']:.2f}x). Goal 0 shuffle bytes: "
        f"**{'met' if spj['shuffle'] == 0 else 'not met'}** ({spj['shuffle']:,}).",
        "",
        "SPJ plan (`join_explain`), first lines:",
        "",
        "```",
        *explain.splitlines()[:8],
        "```",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
