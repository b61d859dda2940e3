"""The 22 TPC-H queries in Spark SQL: lance_partitioned views against Spark on Parquet.

    .venv/bin/python benchmarks/spark_sql_bench.py [--sf 1] [--reps 1] [--queries 1-22]
        [--variants default,nopush] [--floor] [--profile 5] [--workdir DIR] [--out FILE]

TPC-H at ``--sf`` is generated with tpchgen-cli into ``--workdir`` (kept and
reused), and each table is written once with the core API (``lp.create(root,
schema, spec).append(batches)``, streamed, kept and reused) into a namespace partitioned as a
user would: lineitem by ``year, month(l_shipdate)``, orders by ``year(o_orderdate)``,
customer by ``c_mktsegment``, part and partsupp by ``bucket(8, partkey)``, supplier
by ``bucket(4, s_suppkey)``, nation and region unpartitioned.

For every query and every repetition, fresh temporary views are created (untimed)
over each table it reads: ``USING parquet`` on the generated files, ``USING
lance_partitioned OPTIONS (root ...)`` with default options (``default``: Spark's
filters pushed into Lance) and with ``pushFilters 'false'`` (``nopush``: every filter
left to Spark); ``noreuse`` is ``default`` with equal scans not sharing an exchange
(``spark.lance_partitioned.reuseExchanges=false``); ``rows`` is ``default`` with the
extension's column-batch hand-off off (``spark.lance_partitioned.columnarReads=false``:
PySpark's own reader, which copies every batch into rows), to measure that step; and,
as an experiment, default options with a broadcast hint on the small tables
(``hint``: what reported sizes would buy); then ``spark.sql(query).collect()`` is timed. The
variants of one query run back to back, their order rotating from query to query.
One Spark session (``local[2]``, ``--driver-memory``), loaded with the package's
extension (``lps.local_session``). A warm-up (Q6 and Q3 once per variant) comes first
unless ``--no-warmup``.

``--floor`` adds the variant ``floor``: the same views served by a Python source
that does no Lance work, yielding the rows our reader yields from memory-mapped Arrow
IPC files (``floor_source.py``), the ceiling of any PySpark 4.3 Python source on those
rows; and a micro-benchmark of decimal against float64 and int64 columns in the
hand-off to the JVM (lineitem's Q1 columns, ``--micro-reps`` runs each).

Every answer is checked: each variant's rows equal Spark on Parquet's, compared after
sorting, decimals and integers exactly, floating point values with a relative
tolerance of 1e-9. A mismatch is printed loudly, marked in the report, and the script
exits non-zero.

``--profile N`` then runs the N queries slowest on default views once more per
variant with the scan log and the timing log (``LANCE_PARTITIONED_SPARK_TIMING``, set
by this script before Spark starts) and reports where the time went: planning
(Spark's analysis and optimization, and the Python planning of each scan), read
tasks (Lance against the hand-off to the JVM), Spark's stages (task time, shuffle
bytes), the joins of the final plan, and the columns each scan declares.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("LANCE_LOG", "error")

# the repository root on sys.path: the TPC-H generator lives in the demo (demo.tpch)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import floor_source  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402
from tpch_queries import QUERIES, TABLES, query, tables_of  # noqa: E402

import lance_partitioned as lp  # noqa: E402
from demo import tpch  # noqa: E402
from lance_partitioned import spark as lps  # noqa: E402

FMT = "lance_partitioned"
# How each table is partitioned, as a user would (the layout).
SPECS = {
    "lineitem": "year(l_shipdate), month(l_shipdate)",
    "orders": "year(o_orderdate)",
    "customer": "c_mktsegment",
    "part": "bucket(8, p_partkey)",
    "partsupp": "bucket(8, ps_partkey)",
    "supplier": "bucket(4, s_suppkey)",
    "nation": "",
    "region": "",
}
VARIANTS = {
    "parquet": "Spark on Parquet",
    "default": "ours, default options",
    "nopush": "ours, pushFilters 'false'",
    "rows": "ours, default options, PySpark's row hand-off",
    "noreuse": "ours, default options, no exchange reuse",
    "hint": "ours, default options + broadcast hint",
    "floor": "floor: Python source over Arrow IPC, no Lance",
}
COLUMNAR_CONF = "spark.lance_partitioned.columnarReads"
REUSE_CONF = "spark.lance_partitioned.reuseExchanges"
# The experiment of the "hint" variant: what sizes would buy if our source reported them
# (PySpark 4.3's Python sources report none, so Spark plans every join as a shuffle).
# These tables' Parquet files at SF <= 1 are below Spark's broadcast threshold (10 MiB),
# so Spark on Parquet may broadcast them; the hint names them in every SELECT (a name a
# SELECT does not read is ignored). Aliases of nation in Q7 and Q8 are named too.
BROADCAST = ("nation", "region", "supplier", "part")
BROADCAST_ALIASES = ("n1", "n2")
TIMING_ENV = "LANCE_PARTITIONED_SPARK_TIMING"  # lance_partitioned.spark.timing.TIMING_LOG_ENV
REL_TOL = 1e-9
# the build streams each table (SF 10's lineitem does not fit in memory twice) and
# buffers this much per flush, so a leaf gets a few large fragments, not many small ones
BUILD_BUFFER_BYTES = 4 << 30


# -- data ------------------------------------------------------------------------------


def build(sf: float, work: str) -> tuple[dict[str, str], dict[str, str], dict[str, float]]:
    """(Parquet paths, namespace roots, seconds spent writing each namespace built now).

    Generated and written once; a marker file tells a finished namespace from a
    crashed build, which is removed and written again.
    """
    parquet = tpch.generate(sf, os.path.join(work, f"tpch-sf{sf:g}"), TABLES)
    base = os.path.join(work, f"ns-sf{sf:g}")
    roots, built = {}, {}
    for table in TABLES:
        root = roots[table] = os.path.join(base, table)
        marker = root + ".complete"
        if os.path.exists(marker):
            continue
        shutil.rmtree(root, ignore_errors=True)
        start = time.perf_counter()
        lp.create(root, tpch.table_schema(parquet[table]), SPECS[table]).append(
            tpch.batches(parquet[table]), max_buffer_bytes=BUILD_BUFFER_BYTES
        )
        built[table] = time.perf_counter() - start
        open(marker, "w").close()
        print(f"  wrote {table} ({built[table]:.1f} s)", flush=True)
    return parquet, roots, built


def create_views(
    spark,
    variant: str,
    tables: Sequence[str],
    parquet: dict,
    roots: dict,
    scan_log: str = "",
    floor: dict | None = None,
) -> dict[str, str]:
    """Fresh temporary views of ``tables`` for ``variant``; table name -> view name.

    ``floor``: table name -> its floor directory (``floor_source``), for the "floor" variant.
    """
    # "rows" variants: the extension hands batches over as PySpark does, row by row (the
    # conf is read when the query is planned, right after its views are made)
    spark.conf.set(COLUMNAR_CONF, "false" if variant.endswith("rows") else "auto")
    # "noreuse": equal scans of a query do not share an exchange (as before the extension's
    # scans compared equal), to measure that step
    spark.conf.set(REUSE_CONF, "false" if variant == "noreuse" else "true")
    views = {}
    for table in tables:
        name = views[table] = f"{table}_{variant}"
        if variant == "parquet":
            using = f"parquet OPTIONS (path '{parquet[table]}')"
        else:
            opts = [f"root '{roots[table]}'"]
            if variant == "nopush":
                opts.append("pushFilters 'false'")
            if variant == "floor":
                opts.append(f"{floor_source.FLOOR_OPTION} '{floor[table]}'")
            if scan_log:
                opts.append(f"scanLog '{scan_log}'")
            using = f"{FMT} OPTIONS ({', '.join(opts)})"
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} USING {using}")
    return views


# -- answers ---------------------------------------------------------------------------


def _sort_key(row: tuple) -> tuple:
    return tuple((v is None, 0 if v is None else v) for v in row)


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)
    return a == b


def difference(got: list, want: list) -> str | None:
    """None when ``got`` equals ``want`` (rows compared after sorting), else why not."""
    if len(got) != len(want):
        return f"{len(got)} rows, Parquet {len(want)}"
    got_rows = sorted((tuple(r) for r in got), key=_sort_key)
    want_rows = sorted((tuple(r) for r in want), key=_sort_key)
    for i, (g, w) in enumerate(zip(got_rows, want_rows, strict=True)):
        if len(g) != len(w) or not all(_same_value(x, y) for x, y in zip(g, w, strict=True)):
            return f"row {i} of the sorted rows: {g!r}, Parquet {w!r}"
    return None


# -- timing ----------------------------------------------------------------------------


@dataclass
class Result:
    """One query's runs: seconds per variant, rows, and answer differences."""

    number: int
    seconds: dict[str, list[float]] = field(default_factory=dict)
    rows: int = 0
    wrong: dict[str, str] = field(default_factory=dict)

    def median(self, variant: str) -> float:
        return statistics.median(self.seconds[variant])


def run_query(
    spark,
    number: int,
    variant: str,
    sf: float,
    parquet: dict,
    roots: dict,
    floor: dict | None = None,
) -> tuple[list, float, float]:
    """(rows, seconds of the query, seconds creating its views): fresh views, then collect."""
    start = time.perf_counter()
    views = create_views(spark, variant, tables_of(number), parquet, roots, floor=floor)
    created = time.perf_counter()
    rows = spark.sql(query_text(number, variant, views, sf)).collect()
    return rows, time.perf_counter() - created, created - start


def query_text(number: int, variant: str, views: dict[str, str], sf: float) -> str:
    """Query ``number`` over ``views``; the "hint" variant's with a broadcast hint."""
    text = query(number, views, sf)
    if variant != "hint":
        return text
    names = [views[t] for t in BROADCAST if t in views]
    names += [a for a in BROADCAST_ALIASES if f" {a}" in text and "nation" in views]
    if not names:
        return text
    hint = f"select /*+ BROADCAST({', '.join(names)}) */"
    return re.sub(r"\bselect\b", hint, text, flags=re.IGNORECASE)


def run_all(
    spark, numbers: Sequence[int], variants: Sequence[str], reps: int, ctx: dict
) -> tuple[list[Result], float]:
    """Every query, every variant (Parquet first in the list), ``reps`` times; answers checked."""
    results, view_seconds = [], 0.0
    for i, number in enumerate(numbers):
        res = Result(number, {v: [] for v in variants})
        order = list(variants[i % len(variants) :]) + list(variants[: i % len(variants)])
        answers: dict[str, list] = {}
        for _ in range(reps):
            for variant in order:
                rows, secs, views = run_query(spark, number, variant, **ctx)
                res.seconds[variant].append(secs)
                view_seconds += views
                answers[variant] = rows
        res.rows = len(answers["parquet"])
        for variant in variants:
            if variant != "parquet":
                why = difference(answers[variant], answers["parquet"])
                if why:
                    res.wrong[variant] = why
                    print(f"!!!!! MISMATCH Q{number} {VARIANTS[variant]}: {why}", flush=True)
        line = ", ".join(f"{v} {res.median(v):.2f}s" for v in variants)
        print(f"  Q{number}: {line} ({res.rows} rows)", flush=True)
        results.append(res)
    return results, view_seconds


# -- floor -----------------------------------------------------------------------------

# lineitem's columns in Q1, and the decimal micro-benchmark's queries over them
Q1_COLUMNS = [
    "l_returnflag",
    "l_linestatus",
    "l_quantity",
    "l_extendedprice",
    "l_discount",
    "l_tax",
    "l_shipdate",
]
Q1_NUMBERS = ["l_quantity", "l_extendedprice", "l_discount", "l_tax"]
MICRO_QUERIES = {
    "sum": "SELECT " + ", ".join(f"sum({c})" for c in Q1_NUMBERS) + " FROM {v}",
    # reads only validity: no value crosses into a Java object
    "count not null": "SELECT count(*) FROM {v} WHERE "
    + " AND ".join(f"{c} IS NOT NULL" for c in Q1_NUMBERS),
    # every value read once (a decimal becomes a Java Decimal), then cheap integer work
    "hash": "SELECT sum(hash(" + ", ".join(Q1_NUMBERS) + ")) FROM {v}",
}


def _as_float(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [c.cast(pa.float64()) if pa.types.is_decimal(c.type) else c for c in batch.columns],
        names=batch.schema.names,
    )


def _as_cents(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Decimals (scale 2) as int64 hundredths: the same values, exactly."""
    cols = [
        pc.round(pc.multiply(c.cast(pa.float64()), 100.0)).cast(pa.int64())
        if pa.types.is_decimal(c.type)
        else c
        for c in batch.columns
    ]
    return pa.RecordBatch.from_arrays(cols, names=batch.schema.names)


def prepare_floor(roots: dict, work: str, sf: float) -> dict[str, str]:
    """Write the floor's IPC files (kept and reused) and the micro-benchmark's twins of
    lineitem's Q1 columns; table (or ``lineitem_<kind>``) -> directory."""
    base = os.path.join(work, f"floor-sf{sf:g}")
    dirs = {}
    for table in TABLES:
        dirs[table] = os.path.join(base, table)
        n = floor_source.write_table(roots[table], dirs[table])
        print(f"  floor {table}: {n} IPC file(s)", flush=True)
    files = floor_source.ipc_files(dirs["lineitem"])
    for kind, convert in (("decimal", lambda b: b), ("float64", _as_float), ("int64", _as_cents)):
        dirs[f"lineitem_{kind}"] = os.path.join(base, f"lineitem_q1_{kind}")
        floor_source.write_variant(files, dirs[f"lineitem_{kind}"], Q1_COLUMNS, convert)
    return dirs


def use_floor_source(spark, on: bool) -> None:
    """Serve our source's name by ``FloorSource`` (``on``), or by our own source again."""
    from pyspark import cloudpickle

    # workers cannot import benchmarks/: the source goes to them by value
    cloudpickle.register_pickle_by_value(floor_source)
    spark.dataSource.register(floor_source.FloorSource if on else lps.LancePartitionedDataSource)


def decimal_micro(spark, floor: dict, parquet: dict, reps: int) -> list[dict[str, Any]]:
    """Each micro query over lineitem's Q1 columns: decimal128, float64 and int64 floor
    views, and Spark on Parquet (decimal); median seconds of ``reps`` runs, answers."""
    views = {"Spark on Parquet (decimal)": f"parquet OPTIONS (path '{parquet['lineitem']}')"}
    for kind in ("decimal", "float64", "int64"):
        d = floor[f"lineitem_{kind}"]
        views[f"floor, {kind}"] = f"{FMT} OPTIONS ({floor_source.FLOOR_OPTION} '{d}')"
    out = []
    for qname, text in MICRO_QUERIES.items():
        for label, using in views.items():
            spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW micro_view USING {using}")
            secs, rows = [], []
            for _ in range(reps):
                start = time.perf_counter()
                rows = spark.sql(text.format(v="micro_view")).collect()
                secs.append(time.perf_counter() - start)
            out.append(
                {"query": qname, "view": label, "seconds": statistics.median(secs), "row": rows[0]}
            )
            print(
                f"  micro {qname} {label}: {out[-1]['seconds']:.2f}s {tuple(rows[0])}", flush=True
            )
    return out


def check_micro(micro: list[dict[str, Any]]) -> list[str]:
    """Differences between the micro-benchmark's answers and Parquet's (empty: all agree)."""
    wrong = []
    for m in micro:
        base = next(x for x in micro if x["query"] == m["query"] and x["view"].startswith("Spark"))
        if m["query"] == "hash" and not m["view"].endswith("decimal"):
            continue  # a hash of other types differs: only decimal's is comparable
        scale = 100 if m["view"].endswith("int64") and m["query"] == "sum" else 1
        for got, want in zip(m["row"], base["row"], strict=True):
            if not math.isclose(float(got), float(want) * scale, rel_tol=1e-9):
                wrong.append(f"{m['query']} {m['view']}: {tuple(m['row'])}")
                break
    return wrong


def micro_table(micro: list[dict[str, Any]]) -> list[str]:
    lines = ["| query | view | seconds | × Parquet |", "|---|---|---:|---:|"]
    for m in micro:
        base = next(x for x in micro if x["query"] == m["query"] and x["view"].startswith("Spark"))
        lines.append(
            f"| `{MICRO_QUERIES[m['query']].format(v='v')}` | {m['view']} | "
            f"{m['seconds']:.2f} s | {_ratio(m['seconds'], base['seconds'])} |"
        )
    return lines


# -- profile ---------------------------------------------------------------------------


def _stages(spark) -> list:
    """Every stage Spark's status store holds (``StageData``), through py4j."""
    store = spark.sparkContext._jsc.sc().statusStore()
    quantiles = getattr(store, "stageList$default$4")()
    seq = store.stageList(None, False, False, quantiles, None)
    stages = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters.asJava(seq)
    return [stages.get(i) for i in range(stages.size())]


def _stage_ids(spark) -> set[int]:
    return {int(s.stageId()) for s in _stages(spark)}


def stage_metrics(spark, before: set[int]) -> dict[str, float]:
    """Totals over the stages that ran since ``before`` (Spark's status store)."""
    out = {"stages": 0, "tasks": 0, "task_s": 0.0, "cpu_s": 0.0, "shuffle_mb": 0.0}
    for s in _stages(spark):
        if int(s.stageId()) in before:
            continue
        out["stages"] += 1
        out["tasks"] += int(s.numCompleteTasks())
        out["task_s"] += int(s.executorRunTime()) / 1e3
        out["cpu_s"] += int(s.executorCpuTime()) / 1e9
        out["shuffle_mb"] += int(s.shuffleWriteBytes()) / 2**20
    return out


JOINS = ("BroadcastHashJoin", "SortMergeJoin", "ShuffledHashJoin", "BroadcastNestedLoopJoin")


def final_plan(plan: str) -> str:
    """The final plan of an adaptive plan's text (without its initial plan)."""
    return plan.split("== Initial Plan ==")[0]


def _top_level_fields(struct: str) -> int:
    """Fields of a ``struct<...>`` body: commas outside parentheses and angle brackets, + 1."""
    depth, count = 0, 1
    for ch in struct:
        depth += ch in "(<"
        depth -= ch in ")>"
        count += ch == "," and depth == 0
    return count


def plan_shape(plan: str) -> dict[str, int]:
    """Join operators and exchanges of a final (AQE) physical plan's text."""
    final = final_plan(plan)
    out = {j: len(re.findall(rf"\b{j}\b", final)) for j in JOINS}
    out["shuffles"] = len(
        re.findall(r"Exchange hashpartitioning|Exchange rangepartitioning", final)
    )
    out["broadcasts"] = len(re.findall(r"BroadcastExchange", final))
    out["reused"] = len(re.findall(r"ReusedExchange", final))
    return out


def scanned_columns(spark, df, variant: str) -> list[int]:
    """Columns each scan of ``df`` declares (ours: the optimized plan; Parquet: ReadSchema)."""
    qe = df._jdf.queryExecution()
    if variant == "parquet":
        text = final_plan(qe.executedPlan().toString())
        return [_top_level_fields(s) for s in re.findall(r"ReadSchema: struct<(.*)>", text)]
    text = qe.optimizedPlan().toString()
    cols = re.findall(r"RelationV2\[([^\]]*)\][^\n]*" + FMT, text)
    return [len(c.split(", ")) for c in cols]


def _read_log(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        entries = [json.loads(line) for line in fh if line.strip()]
    os.remove(path)
    return entries


def profile_query(spark, number: int, variant: str, ctx: dict, logs: dict) -> dict[str, Any]:
    """One more run of ``number`` on ``variant``, measured piece by piece."""
    views = create_views(
        spark,
        variant,
        tables_of(number),
        ctx["parquet"],
        ctx["roots"],
        logs["scan"],
        ctx.get("floor"),
    )
    _read_log(logs["scan"])  # creating views plans nothing; drop any stale lines
    _read_log(logs["timing"])
    before = _stage_ids(spark)
    start = time.perf_counter()
    df = spark.sql(query_text(number, variant, views, ctx["sf"]))
    qe = df._jdf.queryExecution()
    qe.optimizedPlan()
    optimized = time.perf_counter()
    qe.executedPlan()
    planned = time.perf_counter()
    df.collect()
    done = time.perf_counter()
    scans = _read_log(logs["scan"])
    tasks = [t for t in _read_log(logs["timing"]) if t.get("phase") == "read_task"]
    return {
        "seconds": done - start,
        "optimize_s": optimized - start,
        "physical_s": planned - optimized,
        "run_s": done - planned,
        "scans": len(scans),
        "py_plan_s": sum(s.get("planning_seconds", 0.0) for s in scans),
        "partitions": (
            sum(s["partitions_scanned"] for s in scans),
            sum(s["partitions_total"] for s in scans),
        ),
        "read_tasks": len(tasks),
        "read_s": sum(t["read_seconds"] for t in tasks),
        "handoff_s": sum(t["handoff_seconds"] for t in tasks),
        "worker_cpu_s": sum(t["cpu_seconds"] for t in tasks),
        "rows_read": sum(t["rows"] for t in tasks),
        "columns": scanned_columns(spark, df, variant),
        "plan": plan_shape(df._jdf.queryExecution().executedPlan().toString()),
        "stages": stage_metrics(spark, before),
    }


def run_profile(
    spark, results: list[Result], count: int, variants: Sequence[str], ctx: dict, work: str
) -> list[tuple[int, dict[str, dict]]]:
    """Profile the ``count`` queries slowest on default views (else the first variant of ours)."""
    ours = "default" if "default" in variants else variants[-1]
    slowest = sorted(results, key=lambda r: -r.median(ours))[:count]
    logs = {
        "scan": os.path.join(work, "profile-scans.jsonl"),
        "timing": os.environ.get(TIMING_ENV) or os.path.join(work, "profile-timing.jsonl"),
    }
    out = []
    # Parquet scans print their ReadSchema cut at this length (default 100 characters)
    spark.conf.set("spark.sql.maxMetadataStringLength", "100000")
    try:
        for res in slowest:
            per = {v: profile_query(spark, res.number, v, ctx, logs) for v in variants}
            print(f"  profiled Q{res.number}", flush=True)
            out.append((res.number, per))
    finally:
        spark.conf.unset("spark.sql.maxMetadataStringLength")
    return out


# -- report ----------------------------------------------------------------------------


def _ratio(ours: float, base: float) -> str:
    return f"{ours / base:.2f}×" if base > 0 else "-"


def results_table(results: list[Result], variants: Sequence[str]) -> list[str]:
    ours = [v for v in variants if v != "parquet"]
    head = ["Query", VARIANTS["parquet"]]
    for v in ours:
        head += [VARIANTS[v], "ratio"]
    head += ["rows", "answer"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    totals = {v: 0.0 for v in variants}
    for r in results:
        base = r.median("parquet")
        cells = [f"Q{r.number}", f"{base:.2f} s"]
        for v in ours:
            cells += [f"{r.median(v):.2f} s", _ratio(r.median(v), base)]
        for v in variants:
            totals[v] += r.median(v)
        verdict = "**WRONG**: " + "; ".join(r.wrong.values()) if r.wrong else "equal"
        lines.append("| " + " | ".join([*cells, str(r.rows), verdict]) + " |")
    cells = ["**total**", f"**{totals['parquet']:.2f} s**"]
    for v in ours:
        cells += [f"**{totals[v]:.2f} s**", f"**{_ratio(totals[v], totals['parquet'])}**"]
    lines.append("| " + " | ".join([*cells, "", ""]) + " |")
    for v in ours:
        worst = max(results, key=lambda r: r.median(v) / max(r.median("parquet"), 1e-9))
        lines.append("")
        lines.append(
            f"- {VARIANTS[v]}: total {_ratio(totals[v], totals['parquet'])} Parquet's; "
            f"worst query Q{worst.number} at {_ratio(worst.median(v), worst.median('parquet'))}; "
            f"geometric mean of the ratios "
            f"{math.exp(statistics.fmean(math.log(r.median(v) / r.median('parquet')) for r in results)):.2f}×."
        )
    return lines


def profile_table(profile: list[tuple[int, dict[str, dict]]]) -> list[str]:
    head = [
        "Query",
        "variant",
        "wall",
        "analyze+optimize",
        "physical planning",
        "execution",
        "scans (Python planning)",
        "read tasks: Lance / hand-off / worker CPU",
        "rows read",
        "Spark task time (CPU)",
        "shuffle written",
        "joins (BHJ / SMJ / SHJ)",
        "exchanges reused",
        "columns per scan",
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 3) + "---|"]
    for number, per in profile:
        for v, p in per.items():
            st, pl = p["stages"], p["plan"]
            ours = v != "parquet"
            scans = f"{p['scans']} ({p['py_plan_s']:.2f} s)" if ours else "-"
            reads = (
                f"{p['read_s']:.2f} / {p['handoff_s']:.2f} / {p['worker_cpu_s']:.2f} s "
                f"({p['read_tasks']} tasks)"
                if ours and p["read_tasks"]
                else "-"
            )
            lines.append(
                "| "
                + " | ".join(
                    [
                        f"Q{number}",
                        VARIANTS[v],
                        f"{p['seconds']:.2f} s",
                        f"{p['optimize_s']:.2f} s",
                        f"{p['physical_s']:.2f} s",
                        f"{p['run_s']:.2f} s",
                        scans,
                        reads,
                        f"{p['rows_read']:,}" if ours and p["read_tasks"] else "-",
                        f"{st['task_s']:.1f} s ({st['cpu_s']:.1f} s)",
                        f"{st['shuffle_mb']:.1f} MiB",
                        f"{pl['BroadcastHashJoin']} / {pl['SortMergeJoin']} / {pl['ShuffledHashJoin']}",
                        str(pl["reused"]),
                        " ".join(str(c) for c in p["columns"]),
                    ]
                )
                + " |"
            )
    return lines


def floor_lines(results: list[Result], micro: list[dict[str, Any]]) -> list[str]:
    """The floor's split of each variant's total, and the decimal micro-benchmark."""
    total = {v: sum(r.median(v) for r in results) for v in results[0].seconds}
    lines = [
        "## The floor",
        "",
        f"`{VARIANTS['floor']}`: the same views (our source's name, so the extension "
        "prunes columns per scan and sizes each scan from the namespace root as for ours), "
        "served by `benchmarks/floor_source.py`: one Arrow IPC file per input partition "
        "of our full-column plan, written before timing from the batches our reader "
        "yields, memory-mapped and yielded batch by batch; no Lance work. It is the "
        "ceiling of a PySpark 4.3 Python source on these rows. It hands Spark every row "
        "of each scan, as views with pushFilters 'false' do; with pushFilters on (the "
        "default) our reader prunes partitions and hands over only the rows that pass "
        "the pushed filters, so it can finish below this floor.",
        "",
        f"- PySpark's Python-source cost (floor − Parquet): "
        f"{total['floor'] - total['parquet']:.2f} s of the total.",
    ]
    for v in [v for v in total if v not in ("parquet", "floor")]:
        lines.append(
            f"- {VARIANTS[v]}: our own cost (ours − floor): {total[v] - total['floor']:.2f} s."
        )
    lines += [
        "",
        "### Decimal micro-benchmark",
        "",
        "lineitem's Q1 columns, one floor view each as decimal128(15,2), as float64 and "
        "as int64 hundredths (the same values); each query on a fresh view, median of "
        "the runs; answers checked against Parquet's.",
        "",
        *micro_table(micro),
        "",
    ]
    return lines


def report(results, profile, args, extra: dict) -> str:
    variants = extra["variants"]
    built = extra["built"]
    lines = [
        *header_lines(
            "TPC-H in Spark SQL: lance_partitioned views vs Spark on Parquet",
            extra["command"],
            extra["started"],
            extra["load"],
            time.perf_counter() - extra["t0"],
        ),
        f"TPC-H SF {args.sf:g}, Spark `{args.master}`, driver memory {extra['driver_memory']}, "
        f"{args.shuffle_partitions} shuffle partitions, AQE on. Each query's time is the "
        f"median of {args.reps} run(s) of `spark.sql(query).collect()` on fresh temporary "
        f"views (created untimed: {extra['view_seconds']:.1f} s in all); the variants of a "
        f"query run back to back, their order rotating; warm-up: "
        f"{'none' if args.no_warmup else 'Q6 and Q3 once per variant'}. Namespaces written "
        "with the core API (`lp.create(root, schema, spec).append(batches)`, streamed "
        f"from the Parquet file, {BUILD_BUFFER_BYTES >> 30} GiB buffered per flush): "
        + ", ".join(f"{t} `{SPECS[t] or 'unpartitioned'}`" for t in TABLES)
        + (
            "; written in this run in " + ", ".join(f"{t} {s:.1f} s" for t, s in built.items())
            if built
            else "; reused from the work directory"
        )
        + ".",
        "",
        f"Answers checked: every variant's rows equal Spark on Parquet's (sorted; decimals "
        f"exactly, floats within {REL_TOL:g} relative): "
        + ("**MISMATCHES, see the table**" if extra["wrong"] else "all equal")
        + ".",
        "",
        "## Per query",
        "",
        *results_table(results, variants),
        "",
    ]
    if extra["micro"]:
        lines += floor_lines(results, extra["micro"])
    if profile:
        lines += [
            "## Profile of the slowest queries on default views",
            "",
            "One more run per variant. Planning: `analyze+optimize` forces the optimized "
            "plan, `physical planning` the executed plan, which asks the Python reader of "
            "each scan for its partitions (`scans`: scans planned and the seconds "
            "`partitions()` took in Python, from the scan log). Read tasks (timing log): "
            "seconds producing batches (Lance read, filter, conform), seconds handing them "
            "to the JVM, CPU seconds of the Python workers, summed over tasks. Spark task "
            "time and shuffle bytes: every stage of the query (status store). Joins: the "
            "final adaptive plan.",
            "",
            *profile_table(profile),
            "",
        ]
    return "\n".join(lines)


# -- main ------------------------------------------------------------------------------


def parse_queries(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip().upper().removeprefix("Q")
        if "-" in part:
            lo, hi = part.split("-")
            out += range(int(lo), int(hi) + 1)
        elif part:
            out.append(int(part))
    unknown = [n for n in out if n not in QUERIES]
    if unknown:
        raise argparse.ArgumentTypeError(f"no TPC-H query {unknown}; choose 1-22")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=1, help="runs per query and variant")
    parser.add_argument("--queries", type=parse_queries, default=list(QUERIES), help="e.g. 1-22")
    parser.add_argument(
        "--variants",
        default="default,nopush",
        help="ours: default, nopush, rows, noreuse, hint (Parquet always runs)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time views served by a Python source over Arrow IPC files (no Lance), "
        "and the decimal micro-benchmark",
    )
    parser.add_argument("--micro-reps", type=int, default=3, help="runs per micro query")
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--profile", type=int, default=0, help="profile the N slowest queries")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="8g")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--workdir", default="./data/bench-spark-sql")
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "spark_sql.md"),
        help="markdown report path ('' to print only)",
    )
    args = parser.parse_args(argv)
    ours = [v.strip() for v in args.variants.split(",") if v.strip()]
    choices = ["default", "nopush", "rows", "noreuse", "hint"]
    if not ours or set(ours) - set(choices):
        parser.error(f"--variants: choose among {', '.join(choices)}")
    args.variant_list = ["parquet", *dict.fromkeys(ours)] + (["floor"] if args.floor else [])
    return args


def start_session(args, work: str):
    """Our own local session with the timing log on (Python workers inherit it)."""
    if args.profile:
        os.environ.setdefault(TIMING_ENV, os.path.join(work, "profile-timing.jsonl"))
    conf = {"spark.driver.memory": args.driver_memory}
    return lps.local_session(
        args.master,
        "lance_partitioned-sql-bench",
        shuffle_partitions=args.shuffle_partitions,
        conf=conf,
    )


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the benchmark; ``spark``: a session to use (and leave running) instead of a new one."""
    args = parse_args(argv)
    work = os.path.abspath(args.workdir)
    os.makedirs(work, exist_ok=True)
    extra: dict[str, Any] = {
        "load": loadavg(),
        "started": utc_now(),
        "t0": time.perf_counter(),
        "command": command(__file__, argv),
        "variants": args.variant_list,
    }
    print(f"TPC-H SF {args.sf:g} ...", flush=True)
    parquet, roots, extra["built"] = build(args.sf, work)
    own = spark is None
    if own:
        spark = start_session(args, work)
    extra["driver_memory"] = spark.conf.get("spark.driver.memory", "1g (default)")
    ctx = {"sf": args.sf, "parquet": parquet, "roots": roots}
    extra["micro"] = []
    if args.floor:
        ctx["floor"] = prepare_floor(roots, work, args.sf)
        use_floor_source(spark, True)
    try:
        if not args.no_warmup:
            for number in (6, 3):
                for variant in args.variant_list:
                    run_query(spark, number, variant, **ctx)
        results, extra["view_seconds"] = run_all(
            spark, args.queries, args.variant_list, args.reps, ctx
        )
        profile = []
        if args.profile:
            print("profile ...", flush=True)
            profile = run_profile(spark, results, args.profile, args.variant_list, ctx, work)
        if args.floor:
            print("decimal micro-benchmark ...", flush=True)
            extra["micro"] = decimal_micro(spark, ctx["floor"], parquet, args.micro_reps)
    finally:
        if args.floor:
            use_floor_source(spark, False)
        if own:
            lps.stop_session(spark)
    extra["wrong"] = [r.number for r in results if r.wrong] + check_micro(extra["micro"])
    text = report(results, profile, args, extra)
    print(text)
    write_report(args.out, text)
    if extra["wrong"]:
        print(f"!!!!! WRONG ANSWERS in {extra['wrong']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
