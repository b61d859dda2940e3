"""End-to-end demo: TPC-H → Spark → partitioned namespaces → TPC-H queries in Spark SQL.

    python -m demo.pipeline --scale-factor 0.1      (what `make demo` runs, from the repo root)
    python -m demo.pipeline --storage s3            (`make demo STORAGE=s3`)

With ``--storage s3`` the namespaces live on a local S3 server (moto, started on
127.0.0.1 for the run and stopped at the end, ``demo/s3_server.py``), and Spark
gets the credentials as ``storage.<key>`` options, as on a real cluster.

Steps:
1. generate TPC-H lineitem and orders as Parquet with ``tpchgen-cli`` (reused when present);
2. start local Spark (``local[2]``, filter pushdown on) with the source registered;
3. write lineitem partitioned by ``year(l_shipdate), month(l_shipdate)`` and orders by
   ``bucket(16, o_orderkey)`` through Spark into fresh namespaces;
4. run TPC-H Q1, Q6 and Q12 (a join of orders and lineitem) on temp views of the
   namespaces, report partitions scanned / total for each, and check every answer
   against the same query on the Parquet files;
5. append a second batch: lineitem rows of every tenth order, re-keyed to new order
   keys (so they are new rows, spread over existing partitions), in one atomic
   commit; show the ``__manifest`` versions and read the previous version back;
6. stop Spark and its JVM; print a summary (with where each query's time goes against
   Parquet), where the namespaces are and three commands to try on them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

LINEITEM_SPEC = "year(l_shipdate), month(l_shipdate)"
ORDERS_SPEC = "bucket(16, o_orderkey)"

QUERIES: dict[str, str] = {
    "Q1": """
        SELECT l_returnflag, l_linestatus,
               sum(l_quantity) AS sum_qty,
               sum(l_extendedprice) AS sum_base_price,
               sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
               sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
               avg(l_quantity) AS avg_qty,
               avg(l_extendedprice) AS avg_price,
               avg(l_discount) AS avg_disc,
               count(*) AS count_order
        FROM {lineitem}
        WHERE l_shipdate <= date '1998-12-01' - interval 90 days
        GROUP BY l_returnflag, l_linestatus
        ORDER BY l_returnflag, l_linestatus""",
    "Q6": """
        SELECT sum(l_extendedprice * l_discount) AS revenue
        FROM {lineitem}
        WHERE l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01'
          AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24""",
    "Q12": """
        SELECT l_shipmode,
               sum(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH'
                        THEN 1 ELSE 0 END) AS high_line_count,
               sum(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH'
                        THEN 1 ELSE 0 END) AS low_line_count
        FROM {orders} JOIN {lineitem} ON o_orderkey = l_orderkey
        WHERE l_shipmode IN ('MAIL', 'SHIP')
          AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
          AND l_receiptdate >= date '1994-01-01' AND l_receiptdate < date '1995-01-01'
        GROUP BY l_shipmode
        ORDER BY l_shipmode""",
}

# Where each query's time goes against Spark's Parquet reader, and the option that
# makes it faster, one line each (figures measured at SF 1, WHY_SOURCE).
WHY: dict[str, str] = {
    "Q1": "nearly every row is read, and each crosses from a Python worker to the JVM, "
    "which Parquet's JVM reader does not pay; for whole-table reads "
    "lps.read_arrow(spark, root, columns=[...]) is faster (full scan 4.5 s vs 6.6 s, Parquet 2.5 s)",
    "Q6": "pushFilters (on by default) prunes it to 1994's partitions and runs its "
    "filters in Lance (without it 7.2 s vs 0.9 s); left: planning each scan in a Python worker",
    "Q12": "its dates are on l_receiptdate, not the partition column l_shipdate, so nothing is "
    "pruned; pushFilters (on by default) filters in Lance (3.5 s vs 5.1 s without, Parquet 3.7 s)",
}
WHY_SOURCE = "SF 1 figures: benchmarks/results/spark.md, benchmarks/results/spark_sql.md"


def query(name: str, lineitem: str = "lineitem", orders: str = "orders") -> str:
    """TPC-H query ``name`` over the given table/view names."""
    return QUERIES[name].format(lineitem=lineitem, orders=orders)


def spark_storage_options(storage_options: dict[str, str] | None) -> dict[str, str]:
    """``storage_options`` as options of the Spark source and sink (``storage.<key>``)."""
    return {f"storage.{k}": v for k, v in (storage_options or {}).items()}


def create_views(
    spark: Any,
    roots: dict[str, str],
    scan_log: str | None = None,
    suffix: str = "",
    push_filters: bool = True,
    storage_options: dict[str, str] | None = None,
) -> None:
    """``CREATE OR REPLACE TEMPORARY VIEW <table><suffix> USING lance_partitioned`` per namespace.

    With ``push_filters`` (the source's default) the views prune by each scan's filters
    (in a session with the extension ``local_session`` loads; see
    ``lance_partitioned.spark.extension``); without it they say ``pushFilters 'false'``.
    """
    for table, root in roots.items():
        opts = f"root '{root}'" + ("" if push_filters else ", pushFilters 'false'")
        if scan_log:
            opts += f", scanLog '{scan_log}'"
        for key, value in spark_storage_options(storage_options).items():
            opts += f", `{key}` '{value}'"
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY VIEW {table}{suffix} USING lance_partitioned OPTIONS ({opts})"
        )


def create_parquet_views(spark: Any, paths: dict[str, str], suffix: str = "_parquet") -> None:
    for table, path in paths.items():
        spark.read.parquet(path).createOrReplaceTempView(f"{table}{suffix}")


def write_namespace(
    df: Any,
    root: str,
    spec: str,
    mode: str = "append",
    storage_options: dict[str, str] | None = None,
) -> None:
    """Write a DataFrame through the Spark sink (creating the namespace on first write)."""
    writer = df.write.format("lance_partitioned").options(**spark_storage_options(storage_options))
    writer.option("spec", spec).mode(mode).save(root)


# -- output helpers ---------------------------------------------------------------


class Steps:
    """Numbered progress lines with timings."""

    def __init__(self, total: int):
        self.total = total
        self.n = 0
        self.timings: dict[str, float] = {}

    @contextmanager
    def step(self, title: str) -> Iterator[None]:
        self.n += 1
        print(f"[{self.n}/{self.total}] {title} ...", flush=True)
        start = time.perf_counter()
        yield
        took = time.perf_counter() - start
        self.timings[title] = took
        print(f"      done in {took:.1f}s", flush=True)


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.collect()]


def _scan_entries(path: str, since: int) -> list[dict[str, Any]]:
    from lance_partitioned.spark import read_scan_log

    return read_scan_log(path)[since:]


def _fmt_scans(entries: list[dict[str, Any]], names: dict[str, str]) -> str:
    parts = []
    for e in entries:
        table = names.get(e["root"], e["root"])
        parts.append(f"{table}: {e['partitions_scanned']}/{e['partitions_total']} partitions")
    return ", ".join(parts) or "(no scan recorded)"


def _stop_and_check(spark: Any) -> bool:
    """Stop Spark and its JVM; True when no JVM of ours is left running."""
    from pyspark import SparkContext

    from lance_partitioned.spark import stop_session

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    stop_session(spark)
    return proc is None or proc.poll() is not None


# -- the pipeline -----------------------------------------------------------------


def run(
    scale_factor: float,
    workdir: str,
    master: str = "local[2]",
    ns_base: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run every step; returns the summary (also printed).

    The namespaces go under ``ns_base`` (default ``<workdir>/namespaces``, emptied
    first); pass ``storage_options`` for an object store (``ns_base`` must then be
    fresh: nothing is deleted there).
    """
    os.environ.setdefault("LANCE_LOG", "error")
    import lance_partitioned as lp
    from demo import tpch
    from lance_partitioned.spark import local_session

    steps = Steps(6)
    workdir = os.path.abspath(workdir)
    data_dir = os.path.join(workdir, f"tpch-sf{scale_factor:g}")
    ns_dir = os.path.join(workdir, "namespaces")
    base = (ns_base or ns_dir).rstrip("/")
    scan_log = os.path.join(workdir, "scan-log.jsonl")
    roots = {"lineitem": f"{base}/lineitem", "orders": f"{base}/orders"}
    opts = storage_options
    names = {v: k for k, v in roots.items()}
    summary: dict[str, Any] = {"scale_factor": scale_factor, "queries": {}, "namespaces": roots}

    with steps.step(
        f"Generating TPC-H SF {scale_factor:g} (lineitem, orders) as Parquet in {data_dir}"
    ):
        paths = tpch.generate(scale_factor, data_dir, ("lineitem", "orders"))
        # Fresh namespaces every run, so versions and counts are reproducible.
        if ns_base is None:
            shutil.rmtree(ns_dir, ignore_errors=True)
            os.makedirs(ns_dir)
        if os.path.exists(scan_log):
            os.remove(scan_log)

    spark = None
    try:
        with steps.step(f"Starting Spark ({master}, Python filter pushdown on)"):
            spark = local_session(master, "lance_partitioned-demo", shuffle_partitions=8)
            parallelism = spark.sparkContext.defaultParallelism

        with steps.step("Writing lineitem and orders through Spark into partitioned namespaces"):
            from pyspark.sql import functions as F

            li = spark.read.parquet(paths["lineitem"])
            od = spark.read.parquet(paths["orders"])
            # Hash-partitioning by the partition key makes every (year, month) the
            # job of one task, so each partition gets one file instead of one per task.
            li_in = li.repartition(parallelism * 2, F.year("l_shipdate"), F.month("l_shipdate"))
            _, t_li = _timed(
                lambda: write_namespace(li_in, roots["lineitem"], LINEITEM_SPEC, "append", opts)
            )
            _, t_od = _timed(
                lambda: write_namespace(od, roots["orders"], ORDERS_SPEC, "append", opts)
            )
            ns_li = lp.open(roots["lineitem"], storage_options=opts)
            ns_od = lp.open(roots["orders"], storage_options=opts)
            n_li, n_od = ns_li.count(), ns_od.count()
            p_li, p_od = len(ns_li.plan()), len(ns_od.plan())
            print(
                f"      lineitem: {n_li:,} rows in {p_li} partitions ({LINEITEM_SPEC}) in {t_li:.1f}s"
            )
            print(
                f"      orders:   {n_od:,} rows in {p_od} partitions ({ORDERS_SPEC}) in {t_od:.1f}s"
            )
            summary["written"] = {
                "lineitem": {"rows": n_li, "partitions": p_li, "seconds": round(t_li, 2)},
                "orders": {"rows": n_od, "partitions": p_od, "seconds": round(t_od, 2)},
            }

        with steps.step(
            "Running TPC-H Q1, Q6, Q12 on the namespaces and checking them against Parquet"
        ):
            create_parquet_views(spark, paths)
            # One untimed run first: the first query of a session also pays for
            # starting Spark's Python workers and JIT-compiling, on either side.
            create_views(spark, roots, storage_options=opts)
            _rows(spark.sql(query("Q1")))
            _rows(spark.sql(query("Q1", "lineitem_parquet", "orders_parquet")))
            print("      (warm-up: Q1 once on both sides, untimed)")
            for name in QUERIES:
                # Fresh views per query, as a user running one query would create them.
                create_views(spark, roots, scan_log, storage_options=opts)
                before = len(_scan_entries(scan_log, 0))
                got, t_ns = _timed(lambda n=name: _rows(spark.sql(query(n))))
                want, t_pq = _timed(
                    lambda n=name: _rows(spark.sql(query(n, "lineitem_parquet", "orders_parquet")))
                )
                scans = _scan_entries(scan_log, before)
                ok = got == want
                print(
                    f"      {name}: {len(got)} row(s), {t_ns:.2f}s (Parquet {t_pq:.2f}s), "
                    f"{'matches Parquet' if ok else 'MISMATCH vs Parquet'}; scanned {_fmt_scans(scans, names)}"
                )
                summary["queries"][name] = {
                    "rows": len(got),
                    "seconds": round(t_ns, 2),
                    "parquet_seconds": round(t_pq, 2),
                    "matches_parquet": ok,
                    "scans": [
                        {
                            "table": names.get(e["root"]),
                            "scanned": e["partitions_scanned"],
                            "total": e["partitions_total"],
                        }
                        for e in scans
                    ],
                }
                if name == "Q6" and got:
                    print(f"      Q6 revenue = {got[0][0]}")

        with steps.step(
            "Appending a second batch (lineitem of every 10th order, re-keyed) in one commit"
        ):
            before_version = lp.open(roots["lineitem"], storage_options=opts).version
            max_key = li.agg(F.max("l_orderkey")).collect()[0][0]
            extra = li.where(F.col("l_orderkey") % 10 == 0).withColumn(
                "l_orderkey", F.col("l_orderkey") + max_key
            )
            n_extra = extra.count()
            _, t_app = _timed(
                lambda: write_namespace(extra, roots["lineitem"], LINEITEM_SPEC, "append", opts)
            )
            ns_li = lp.open(roots["lineitem"], storage_options=opts)
            # a view keeps its last plan: re-create it to see the append
            create_views(spark, roots, storage_options=opts)
            n_after = spark.sql("SELECT count(*) FROM lineitem").collect()[0][0]
            n_old = (
                spark.read.format("lance_partitioned")
                .options(**spark_storage_options(opts))
                .option("version", before_version)
                .load(roots["lineitem"])
                .count()
            )
            print(
                f"      appended {n_extra:,} rows in {t_app:.1f}s: {n_li:,} -> {n_after:,} rows (expected {n_li + n_extra:,})"
            )
            print(
                f"      reading __manifest version {before_version} (before the append) still gives {n_old:,} rows"
            )
            print("      lineitem __manifest versions:")
            for v in ns_li.versions():
                n = v["version"]
                what = (
                    "namespace created by the first Spark write"
                    if n < before_version
                    else (
                        "first write (one commit)"
                        if n == before_version
                        else "the append (one commit)"
                    )
                )
                print(f"        version {n:>3}  {v['timestamp']}  {what}")
            summary["append"] = {
                "rows": n_extra,
                "seconds": round(t_app, 2),
                "count_after": n_after,
                "count_ok": n_after == n_li + n_extra,
                "old_version": before_version,
                "old_version_count": n_old,
                "versions": [v["version"] for v in ns_li.versions()],
            }

        with steps.step("Stopping Spark and its JVM"):
            jvm_gone = _stop_and_check(spark)
            spark = None
            summary["jvm_stopped"] = jvm_gone
    finally:
        if spark is not None:
            _stop_and_check(spark)

    _print_summary(summary, steps)
    return summary


def _print_summary(s: dict[str, Any], steps: Steps) -> None:
    print()
    print("Summary")
    print("-------")
    for table, w in s.get("written", {}).items():
        print(
            f"  {table:<9} {w['rows']:>10,} rows  {w['partitions']:>4} partitions  written in {w['seconds']:.1f}s"
        )
    for name, q in s["queries"].items():
        scans = ", ".join(f"{x['table']} {x['scanned']}/{x['total']}" for x in q["scans"])
        check = "OK" if q["matches_parquet"] else "MISMATCH"
        print(
            f"  {name:<4} {q['seconds']:>6.2f}s (Parquet {q['parquet_seconds']:.2f}s)  answer {check:<8}  partitions scanned: {scans}"
        )
        if name in WHY:
            print(f"       {WHY[name]}")
    a = s.get("append")
    if a:
        print(
            f"  append {a['rows']:,} rows in {a['seconds']:.1f}s, count {'OK' if a['count_ok'] else 'WRONG'}; "
            f"versions {a['versions']}; version {a['old_version']} still reads {a['old_version_count']:,} rows"
        )
    print(f"  JVM stopped: {'yes' if s.get('jvm_stopped') else 'NO'}")
    print(f"  total {sum(steps.timings.values()):.1f}s")
    print(f"  ({WHY_SOURCE})")


MONTH_FILTER = "l_shipdate >= '1995-03-01' AND l_shipdate < '1995-04-01'"
SPARK_SQL_EXAMPLE = (
    "SELECT year(l_shipdate) AS year, count(*) AS lines FROM lineitem "
    "WHERE l_shipdate >= '1997-01-01' GROUP BY 1 ORDER BY 1"
)


def _here(path: str) -> str:
    """``path`` relative to the current directory when it lies below it, else as given."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _shell_quoted(code: str) -> str:
    """``code`` as one double-quoted shell word (easier to read than single quotes here)."""
    for ch in '\\"$`':
        code = code.replace(ch, "\\" + ch)
    return f'"{code}"'


def next_commands(roots: dict[str, str], python: str = sys.executable) -> list[str]:
    """Three shell commands to try on the demo's namespaces, run from the current directory.

    The CLI's ``describe`` of lineitem, a Python scan of one month showing its
    pruning, and a Spark SQL query on a view (its filters pushed into Lance by default).
    """
    py = _here(python)
    cli = os.path.join(os.path.dirname(python), "lance-partitioned")
    cli = _here(cli) if os.path.exists(cli) else f"{py} -m lance_partitioned"
    lineitem = _here(roots["lineitem"])
    scan = (
        "import lance_partitioned as lp; "
        f'scan = lp.open({lineitem!r}).scan("{MONTH_FILTER}"); '
        "print(scan.explain()); print(scan.count(), 'rows')"
    )
    sql = (
        "from lance_partitioned import spark as lps; s = lps.local_session(); "
        's.sql("CREATE TEMPORARY VIEW lineitem USING lance_partitioned '
        f"OPTIONS (root '{lineitem}')\"); "
        f's.sql("{SPARK_SQL_EXAMPLE}").show(); lps.stop_session(s)'
    )
    return [
        f"{cli} describe {shlex.quote(lineitem)}",
        f"{py} -c {_shell_quoted(scan)}",
        f"{py} -c {_shell_quoted(sql)}",
    ]


def _print_next_steps(roots: dict[str, str], on_s3: bool) -> None:
    print()
    if on_s3:
        print("The namespaces were on the local S3 server, stopped with the run;")
        print("`make demo` (local files) leaves namespaces to explore.")
        return
    print("Namespaces")
    print("----------")
    for table, root in roots.items():
        print(f"  {table:<9} {_here(root)}")
    print()
    print("Try next, from this directory: describe, a Python scan, a Spark SQL query")
    print("------------------------------------------------------------------------")
    for command in next_commands(roots):
        print(f"  {command}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m demo.pipeline", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--scale-factor", type=float, default=0.1, help="TPC-H scale factor (default 0.1)"
    )
    parser.add_argument("--workdir", default="./data/pipeline", help="where data and namespaces go")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument(
        "--storage",
        choices=("local", "s3"),
        default="local",
        help="local: namespaces under --workdir (default); s3: on a local S3 server (moto) "
        "started for this run and stopped at the end",
    )
    args = parser.parse_args(argv)
    if args.storage == "s3":
        from demo.s3_server import MotoServer

        with MotoServer() as server:
            bucket = server.new_bucket("lp-demo")
            print(f"S3: moto server (pid {server.pid}) at {server.endpoint}, bucket {bucket}")
            summary = run(
                args.scale_factor,
                args.workdir,
                args.master,
                ns_base=f"s3://{bucket}/namespaces",
                storage_options=server.options(),
            )
        print("S3: server stopped")
    else:
        summary = run(args.scale_factor, args.workdir, args.master)
    _print_next_steps(summary["namespaces"], on_s3=args.storage == "s3")
    ok = all(q["matches_parquet"] for q in summary["queries"].values())
    ok = (
        ok
        and summary.get("append", {}).get("count_ok", False)
        and summary.get("jvm_stopped", False)
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
