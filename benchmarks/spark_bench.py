"""Spark source/sink against Spark's own Parquet, side by side in one run (local[2]).

    .venv/bin/python benchmarks/spark_bench.py [--sf 1] [--partitions 10000] [--workdir DIR]

Measures (TPC-H lineitem at ``--sf``):
1. partitioned write by year/month(l_shipdate): ours vs ``df.write.partitionBy(y, m).parquet``,
   a Python sink that only counts rows (the ceiling of Python sinks), one that writes
   each task's rows as unsplit Lance files with no commit (the floor of a Lance sink),
   and plain pylance writing one file per partition per task and one dataset per
   partition (the floor of a *partitioned* Lance sink: Lance's cost per file and per
   dataset). Writes report wall time and the CPU seconds of the whole Spark process
   tree (JVM and Python workers), which a shared machine disturbs far less;
2. full scan (noop sink, every column): ours; ``read_arrow`` (mapInArrow); a Python
   source yielding the same batches from memory with no I/O (the ceiling of Python
   sources); Spark's Parquet scan;
3. TPC-H Q6: ours with pruning (``pushFilters``) vs Parquet partitioned by year/month
   with the equivalent partition filter (and unpartitioned Parquet);
4. one partition out of ``--partitions``: planning + reading it from a new DataFrame,
   vs Spark discovering a Parquet directory with that many partitions (default
   settings, and with ``spark.sql.sources.parallelPartitionDiscovery.threshold`` raised).

Every answer is checked (the script exits non-zero otherwise): the rows written,
Q6's revenue from every engine against pyarrow's on the source Parquet (exact
decimals), the row found among many partitions. Prints a table and writes
``benchmarks/results/spark.md`` (``--out``), headed by the command, the machine
and the load average.
"""

from __future__ import annotations

import argparse
import decimal
import json
import os
import pickle
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LANCE_LOG", "error")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType  # noqa: E402

# the repository root on sys.path: the TPC-H generator lives in the demo (demo.tpch)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402
from bench_measure import tree_cpu_seconds  # noqa: E402
from core_bench import q6_mask, q6_revenue  # noqa: E402

import lance_partitioned as lp  # noqa: E402
from demo import pipeline, tpch  # noqa: E402
from lance_partitioned import spark as lps  # noqa: E402
from lance_partitioned.spark.types import BatchConformer, spark_arrow_schema  # noqa: E402

FMT = "lance_partitioned"
Q6_WHERE = (
    "l_shipdate >= date '1994-01-01' AND l_shipdate < date '1995-01-01' "
    "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24"
)
Q6 = f"SELECT sum(l_extendedprice * l_discount) AS revenue FROM {{t}} WHERE {{extra}}{Q6_WHERE}"
# The columns Q6 reads: the Python source API cannot prune columns, the `columns` option can.
Q6_COLUMNS = "l_shipdate,l_discount,l_quantity,l_extendedprice"


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[Any, float]:
    """(result of the last run, median seconds)."""
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def interleaved(variants: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Median seconds per variant, run round-robin so that load drift hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, fn in variants.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def interleaved_with_cpu(
    variants: dict[Any, Callable[[], Any]], repeat: int
) -> dict[Any, tuple[float, float]]:
    """Like ``interleaved``, with the median CPU seconds of the process tree per variant."""
    times: dict[Any, list[float]] = {name: [] for name in variants}
    cpus: dict[Any, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, fn in variants.items():
            cpu = tree_cpu_seconds()
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
            cpus[name].append(tree_cpu_seconds() - cpu)
    return {
        name: (statistics.median(times[name]), statistics.median(cpus[name])) for name in variants
    }


def noop(df) -> None:
    df.write.format("noop").mode("overwrite").save()


# -- the ceiling: a Python source that yields batches from memory ----------------------


class MemoryPartition(InputPartition):
    def __init__(self, index: int, batch: pa.RecordBatch, repeat: int, last_rows: int):
        super().__init__(index)
        self.batch, self.repeat, self.last_rows = batch, repeat, last_rows


class MemoryReader(DataSourceReader):
    def __init__(self, options):
        self.options = options

    def partitions(self):
        batch, total, tasks = pickle.loads(bytes.fromhex(self.options["payload"]))
        per_task = -(-total // tasks)
        out = []
        for i in range(tasks):
            rows = max(0, min(per_task, total - i * per_task))
            full, last = divmod(rows, batch.num_rows)
            out.append(MemoryPartition(i, batch, full, last))
        return out

    def read(self, partition):
        for _ in range(partition.repeat):
            yield partition.batch
        if partition.last_rows:
            yield partition.batch.slice(0, partition.last_rows)


class MemorySource(DataSource):
    """Yields one pre-built batch over and over: no I/O, no decoding (the ceiling)."""

    @classmethod
    def name(cls):
        return "lp_bench_memory"

    def schema(self):
        return StructType.fromJson(json.loads(self.options["schema"]))

    def reader(self, schema):
        return MemoryReader(self.options)


class CountingWriter(DataSourceArrowWriter):
    def write(self, iterator):
        rows = sum(batch.num_rows for batch in iterator)
        return CountMessage(rows)

    def commit(self, messages):
        pass


class CountMessage(WriterCommitMessage):
    def __init__(self, rows: int):
        self.rows = rows


class CountingSink(DataSource):
    """A Python Arrow sink that only counts what it receives (the write path's ceiling)."""

    @classmethod
    def name(cls):
        return "lp_bench_count"

    def writer(self, schema, overwrite):
        return CountingWriter()


class LanceFilesWriter(DataSourceArrowWriter):
    def __init__(self, target: str):
        self.target = target

    def write(self, iterator):
        import uuid

        from lance.fragment import write_fragments

        # Spark's 10,000-row batches arrive with buffers Lance refuses as unaligned;
        # concatenating runs of them into ~131k-row batches copies them aligned (our
        # sink coalesces the same way before it splits).
        first = next(iterator, None)
        if first is None:
            return CountMessage(0)
        rows = [first.num_rows]

        def batches():
            pending = [first]
            for batch in iterator:
                rows.append(batch.num_rows)
                pending.append(batch)
                if sum(b.num_rows for b in pending) >= 1 << 17:
                    yield pa.concat_batches(pending)
                    pending = []
            if len(pending) > 1:
                yield pa.concat_batches(pending)
            elif pending:  # one batch: concatenation would not copy it
                yield pending[0].take(pa.array(range(pending[0].num_rows)))

        reader = pa.RecordBatchReader.from_batches(first.schema, batches())
        write_fragments(reader, os.path.join(self.target, uuid.uuid4().hex), schema=first.schema)
        return CountMessage(sum(rows))

    def commit(self, messages):
        pass


class LanceFilesSink(DataSource):
    """A Python Arrow sink writing each task's rows as Lance data files, unsplit and
    uncommitted: what a partitioned sink cannot avoid (Spark to Arrow, the transfer,
    Lance's encoding), without the split by partition and the commit (the floor)."""

    @classmethod
    def name(cls):
        return "lp_bench_lance_files"

    def writer(self, schema, overwrite):
        return LanceFilesWriter(self.options["path"])


class PartitionFilesMessage(WriterCommitMessage):
    def __init__(self, fragments: dict[str, list[str]], schema: pa.Schema | None = None):
        self.fragments = fragments  # partition directory -> FragmentMetadata JSON
        self.schema = schema  # of the files written


class PlainLancePartitionedWriter(DataSourceArrowWriter):
    """Plain pylance, partitioned by year/month of ``column``: each task holds all its
    rows (no memory bound), sorts them by partition with one ``take`` and writes one
    Lance file per partition (``write_fragments``); the driver creates one dataset per
    partition from every task's files (8 at once). No namespace, no ``__manifest``."""

    def __init__(self, target: str, column: str):
        self.target, self.column = target, column

    def write(self, iterator):
        import numpy as np
        import pyarrow.compute as pc
        from lance.fragment import write_fragments

        batches = list(iterator)
        if not batches:
            return PartitionFilesMessage({})
        rows = pa.concat_batches(batches)  # also copies Spark's unaligned buffers aligned
        del batches
        day = rows[self.column]
        key = pc.add(pc.multiply(pc.year(day), 100), pc.month(day)).to_numpy(zero_copy_only=False)
        order = np.argsort(key, kind="stable")
        rows = pc.take(rows, pa.array(order))
        key = key[order]
        bounds = np.flatnonzero(np.diff(key)) + 1
        starts, ends = np.r_[0, bounds], np.r_[bounds, len(key)]
        out: dict[str, list[str]] = {}
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            part = os.path.join(self.target, f"ym={int(key[s])}")
            frags = write_fragments(rows.slice(s, e - s), part, schema=rows.schema)
            out[part] = [json.dumps(f.to_json()) for f in frags]
        return PartitionFilesMessage(out, rows.schema)

    def commit(self, messages):
        from concurrent.futures import ThreadPoolExecutor

        import lance
        from lance.fragment import FragmentMetadata

        merged: dict[str, list] = {}
        schema = None
        for m in messages:
            schema = schema or m.schema
            for part, frags in m.fragments.items():
                merged.setdefault(part, []).extend(FragmentMetadata.from_json(f) for f in frags)

        def create(item):
            part, frags = item
            op = lance.LanceOperation.Overwrite(schema, frags)
            lance.LanceDataset.commit(part, op)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, merged.items()))


class PlainLancePartitionedSink(DataSource):
    """Plain pylance writing one dataset per year/month partition (``PlainLancePartitionedWriter``):
    the floor of a partitioned Lance sink, which our sink is measured against."""

    @classmethod
    def name(cls):
        return "lp_bench_plain_partitioned"

    def writer(self, schema, overwrite):
        return PlainLancePartitionedWriter(self.options["path"], self.options["column"])


# -- measurements -------------------------------------------------------------------


WRITE_SHAPES = ("as read", "repartitioned")
STEPS = ("write", "scan", "q6", "many")


def bench_write(
    spark,
    li,
    n_rows: int,
    work: str,
    rows: list,
    repeat: int,
    shapes: tuple[str, ...] = WRITE_SHAPES,
    warmup: bool = True,
) -> str:
    """Our sink, Spark's partitioned Parquet write and the counting sink, on two input shapes.

    "as read": the DataFrame straight from the Parquet file (each task writes every
    partition it meets). "repartitioned": ``repartition(8, year, month)`` first, the
    usual way to get one file per partition. A small warm-up write of each sink comes
    first (JVM and Python worker start-up; ``warmup``), then the variants run
    round-robin. ``shapes`` picks the input shapes (the smoke test runs one).
    """
    parallel = spark.sparkContext.defaultParallelism * 4
    y, m = F.year("l_shipdate"), F.month("l_shipdate")
    shaped = {"as read": li, "repartitioned": li.repartition(parallel, y, m)}
    inputs = {shape: shaped[shape] for shape in shapes}
    runs = iter(range(1_000_000))
    root = os.path.join(work, "ns_lineitem")

    def ours(df) -> Callable[[], None]:
        def run():
            target = os.path.join(work, f"write-{next(runs)}")
            pipeline.write_namespace(df, target, pipeline.LINEITEM_SPEC)

        return run

    def parquet(df) -> Callable[[], None]:
        def run():
            target = os.path.join(work, f"write-{next(runs)}")
            df.withColumn("y", y).withColumn("m", m).write.partitionBy("y", "m").parquet(target)

        return run

    def counting(df) -> Callable[[], None]:
        return lambda: df.write.format("lp_bench_count").mode("append").save()

    def lance_files(df) -> Callable[[], None]:
        def run():
            target = os.path.join(work, f"write-{next(runs)}")
            df.write.format("lp_bench_lance_files").mode("append").save(target)

        return run

    plain_targets: list[str] = []

    def plain_partitioned(df) -> Callable[[], None]:
        def run():
            target = os.path.join(work, f"write-{next(runs)}")
            writer = df.write.format("lp_bench_plain_partitioned").option("column", "l_shipdate")
            writer.mode("append").save(target)
            plain_targets.append(target)

        return run

    makers = {
        "ours": ours,
        "parquet": parquet,
        "count": counting,
        "lance": lance_files,
        "plain": plain_partitioned,
    }
    if warmup:
        sample = li.limit(100_000)
        for make in makers.values():
            make(sample)()
    variants = {
        (name, shape): make(df) for shape, df in inputs.items() for name, make in makers.items()
    }
    t = interleaved_with_cpu(variants, repeat)
    compared = (
        ("parquet", "df.write.partitionBy(y, m).parquet"),
        ("count", "Python sink that only counts rows (ceiling)"),
        ("lance", "Python sink writing unsplit Lance files, no commit (floor)"),
        (
            "plain",
            "plain pylance: one file per partition per task, one dataset per partition "
            "(floor of a partitioned Lance sink)",
        ),
    )
    for shape in inputs:
        label = f"Write lineitem by year/month ({shape})"
        ours_t, ours_cpu = t[("ours", shape)]
        for name, other in compared:
            rows.append((label, ours_t, other, t[(name, shape)][0], n_rows))
        for name, other in compared[1:]:
            rows.append(
                (
                    f"{label}, CPU seconds",
                    ours_cpu,
                    f"{other}, CPU seconds",
                    t[(name, shape)][1],
                    None,
                )
            )
    import lance

    last = plain_targets[-1]
    plain_rows = sum(lance.dataset(os.path.join(last, d)).count_rows() for d in os.listdir(last))
    if plain_rows != n_rows:
        raise AssertionError(f"the plain partitioned floor wrote {plain_rows:,} rows of {n_rows:,}")
    for entry in os.listdir(work):
        if entry.startswith("write-"):
            shutil.rmtree(os.path.join(work, entry), ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    pipeline.write_namespace(shaped["repartitioned"], root, pipeline.LINEITEM_SPEC)
    written = lp.open(root).count()
    if written != n_rows:
        raise AssertionError(f"the namespace holds {written:,} rows, the input {n_rows:,}")
    return root


def bench_scan(spark, root: str, li_path: str, n_rows: int, rows: list, repeat: int) -> None:
    ns_df = lambda: spark.read.format(FMT).load(root)  # noqa: E731 (fresh relation per run)
    # The ceiling: the same schema and batch size, the same number of tasks, no I/O.
    schema = ns_df().schema
    sample = lp.open(root).scan().to_batches()
    first = pa.Table.from_batches([next(sample)]).combine_chunks().to_batches()[0]
    batch = BatchConformer(spark_arrow_schema(schema))(first)
    tasks = lps.plan_info(spark, root)["tasks"]
    payload = pickle.dumps((batch, n_rows, tasks)).hex()

    def mem():
        reader = spark.read.format("lp_bench_memory").option("schema", schema.json())
        return reader.option("payload", payload).load()

    noop(ns_df())  # warm the Python workers before timing anything
    t = interleaved(
        {
            "ours": lambda: noop(ns_df()),
            "arrow": lambda: noop(lps.read_arrow(spark, root)),
            "pq": lambda: noop(spark.read.parquet(li_path)),
            "mem": lambda: noop(mem()),
        },
        repeat,
    )
    t_ours, t_arrow, t_pq, t_mem = t["ours"], t["arrow"], t["pq"], t["mem"]
    rows.append(("Full scan (Python source)", t_ours, "Spark Parquet scan", t_pq, n_rows))
    rows.append(
        ("Full scan (read_arrow / mapInArrow)", t_arrow, "Spark Parquet scan", t_pq, n_rows)
    )
    rows.append(
        ("Full scan (Python source)", t_ours, "in-memory Python source (ceiling)", t_mem, n_rows)
    )


def q6_reference(li_path: str) -> decimal.Decimal:
    """Q6's revenue computed by pyarrow on the source Parquet (exact decimals): the oracle."""
    t = pq.read_table(
        li_path, columns=["l_shipdate", "l_discount", "l_quantity", "l_extendedprice"]
    )
    return q6_revenue(t.filter(q6_mask(t)))


def partitioned_parquet(spark, li_path: str, work: str) -> str:
    """Lineitem as Parquet partitioned by y/m (built once, untimed, reused from ``work``)."""
    pq_dir = os.path.join(work, "pq_lineitem")
    done = os.path.join(pq_dir, "_SUCCESS")
    if not os.path.exists(done):
        shutil.rmtree(pq_dir, ignore_errors=True)
        y, m = F.year("l_shipdate"), F.month("l_shipdate")
        li = spark.read.parquet(li_path)
        li.withColumn("y", y).withColumn("m", m).write.partitionBy("y", "m").parquet(pq_dir)
    return pq_dir


def bench_q6(spark, root: str, li_path: str, work: str, rows: list, repeat: int) -> None:
    pq_dir = partitioned_parquet(spark, li_path, work)
    spark.read.parquet(li_path).createOrReplaceTempView("li_flat")

    def ours():
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY VIEW li_lp USING {FMT} OPTIONS (root '{root}', pushFilters 'true')"
        )
        return spark.sql(Q6.format(t="li_lp", extra="")).collect()[0][0]

    def ours_columns():
        spark.sql(
            f"CREATE OR REPLACE TEMPORARY VIEW li_lp_cols USING {FMT} "
            f"OPTIONS (root '{root}', pushFilters 'true', columns '{Q6_COLUMNS}')"
        )
        return spark.sql(Q6.format(t="li_lp_cols", extra="")).collect()[0][0]

    def pq_part():
        spark.read.parquet(pq_dir).createOrReplaceTempView("li_part")
        return spark.sql(Q6.format(t="li_part", extra="y = 1994 AND ")).collect()[0][0]

    flat = lambda: spark.sql(Q6.format(t="li_flat", extra="")).collect()[0][0]  # noqa: E731
    answers = {
        "lance_partitioned": ours(),
        "lance_partitioned (columns)": ours_columns(),
        "Parquet partitioned y/m": pq_part(),
        "Parquet": flat(),
    }
    reference = q6_reference(li_path)
    wrong = {k: v for k, v in answers.items() if v != reference}
    if wrong:
        raise AssertionError(f"Q6 revenue differs from pyarrow's {reference}: {wrong}")
    print(f"  Q6 revenue {reference} from every engine (= pyarrow on the source)", flush=True)
    t = interleaved(
        {"ours": ours, "ours_columns": ours_columns, "part": pq_part, "flat": flat}, repeat
    )
    t_ours, t_part, t_flat = t["ours"], t["part"], t["flat"]
    info = lps.plan_info(spark, root, "l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01'")
    label = f"Q6 with pruning ({info['partitions_scanned']}/{info['partitions_total']} partitions)"
    rows.append((label, t_ours, "Parquet partitioned y/m, filter y = 1994", t_part, None))
    rows.append((label, t_ours, "Parquet, unpartitioned", t_flat, None))
    rows.append(
        (
            f"{label}, `columns` option (4 columns)",
            t["ours_columns"],
            "Parquet partitioned y/m, filter y = 1994",
            t_part,
            None,
        )
    )


def bench_many_partitions(spark, work: str, n: int, rows: list, repeat: int) -> None:
    root = os.path.join(work, f"ns_{n}")
    pq_dir = os.path.join(work, f"pq_{n}")
    schema = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64())])
    data = pa.table({"k": pa.array(range(n), pa.int32()), "v": pa.array(range(n), pa.int64())})
    # built once and reused from --workdir; a marker tells a finished build from a crashed one
    marker = os.path.join(work, f"ns_{n}.complete")
    if not os.path.exists(marker):
        shutil.rmtree(root, ignore_errors=True)
        print(f"  creating a namespace with {n} partitions ...", flush=True)
        _, t = timed(lambda: lp.create(root, schema, "k").append(data))
        print(f"    {t:.1f}s", flush=True)
        open(marker, "w").close()
    if not os.path.exists(os.path.join(pq_dir, "_SUCCESS")):
        shutil.rmtree(pq_dir, ignore_errors=True)
        print(f"  creating a Parquet directory with {n} partitions ...", flush=True)
        df = spark.createDataFrame(data.to_pandas()).repartition(8, "k")
        _, t = timed(lambda: df.write.partitionBy("k").parquet(pq_dir))
        print(f"    {t:.1f}s", flush=True)
    key = min(n // 2 + 7, n - 1)

    def ours():
        got = (
            spark.read.format(FMT)
            .option("pushFilters", "true")
            .load(root)
            .where(f"k = {key}")
            .collect()
        )
        assert [r.v for r in got] == [key]

    def parquet(threshold: str | None):
        conf = "spark.sql.sources.parallelPartitionDiscovery.threshold"
        if threshold:
            spark.conf.set(conf, threshold)
        try:
            got = spark.read.parquet(pq_dir).where(f"k = {key}").collect()
            assert [r.v for r in got] == [key]
        finally:
            spark.conf.unset(conf)

    t = interleaved(
        {
            "plan": lambda: lps.plan_info(spark, root, f"k = {key}"),
            "ours": ours,
            "default": lambda: parquet(None),
            "serial": lambda: parquet(str(10 * n)),
        },
        repeat,
    )
    t_plan, t_ours, t_default, t_serial = t["plan"], t["ours"], t["default"], t["serial"]
    rows.append(
        (
            f"1 of {n} partitions: new DataFrame + read",
            t_ours,
            "Parquet discovery (default)",
            t_default,
            None,
        )
    )
    rows.append(
        (
            f"1 of {n} partitions: new DataFrame + read",
            t_ours,
            "Parquet discovery (threshold raised)",
            t_serial,
            None,
        )
    )
    rows.append(
        (
            f"1 of {n} partitions: planning only (plan_info)",
            t_plan,
            "Parquet discovery (default)",
            t_default,
            None,
        )
    )


# -- report -------------------------------------------------------------------------


def report(rows: list, args, extra: dict[str, Any]) -> str:
    lines = [
        *header_lines(
            "Spark source/sink vs Spark Parquet",
            extra["command"],
            extra["started"],
            extra["load"],
            time.perf_counter() - extra["t0"],
        ),
        f"TPC-H SF {args.sf:g}, Spark local[2]; reads: median of {args.repeat} "
        f"rounds, writes: median of {args.write_repeat} rounds after a warm-up write of each sink; "
        "variants interleaved round-robin; the setup of the many-partition tables and of the "
        "partitioned Parquet copy read by Q6 runs once, untimed. Answers checked: rows written, "
        "Q6's revenue from every engine equal to pyarrow's on the source Parquet, the row found "
        "among many partitions.",
        "",
        "| Measurement | lance_partitioned | Compared with | Spark | Ratio (ours / Spark) | Rows/s (ours) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for label, ours, other_label, other, n in rows:
        rate = f"{n / ours / 1e6:.2f}M" if n else ""
        lines.append(
            f"| {label} | {ours:.2f}s | {other_label} | {other:.2f}s | {ours / other:.2f} | {rate} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the benchmark; ``spark``: a session to use (and leave running) instead of a new one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sf", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-repeat", type=int, default=2, help="rounds of the write variants")
    parser.add_argument(
        "--write-shapes",
        default=",".join(WRITE_SHAPES),
        help="input shapes of the write comparison (comma-separated; default: both)",
    )
    parser.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the warm-up write of each sink (for a smoke run; timings then include start-up)",
    )
    parser.add_argument(
        "--steps",
        default=",".join(STEPS),
        help="which measurements to run (comma-separated; scan and q6 need write)",
    )
    parser.add_argument("--workdir", default="./data/bench-spark")
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "spark.md"),
        help="markdown report path ('' to print only)",
    )
    args = parser.parse_args(argv)
    work = os.path.abspath(args.workdir)
    os.makedirs(work, exist_ok=True)
    extra = {
        "load": loadavg(),
        "started": utc_now(),
        "t0": time.perf_counter(),
        "command": command(__file__, argv),
    }
    print(f"TPC-H SF {args.sf:g} ...", flush=True)
    li_path = tpch.generate(args.sf, os.path.join(work, f"tpch-sf{args.sf:g}"), ("lineitem",))[
        "lineitem"
    ]
    steps = {s.strip() for s in args.steps.split(",") if s.strip()}
    if steps - set(STEPS) or not steps or ({"scan", "q6"} & steps and "write" not in steps):
        parser.error(f"--steps: choose among {', '.join(STEPS)} (scan and q6 need write)")
    shapes = tuple(s.strip() for s in args.write_shapes.split(",") if s.strip())
    unknown = set(shapes) - set(WRITE_SHAPES)
    if unknown or not shapes:
        parser.error(f"--write-shapes: choose among {', '.join(WRITE_SHAPES)}")
    own = spark is None
    if own:
        spark = lps.local_session("local[2]", "lance_partitioned-bench", shuffle_partitions=8)
    spark.dataSource.register(MemorySource)
    spark.dataSource.register(CountingSink)
    spark.dataSource.register(LanceFilesSink)
    spark.dataSource.register(PlainLancePartitionedSink)
    rows: list = []
    try:
        li = spark.read.parquet(li_path)
        n_rows = li.count()
        if "write" in steps:
            print("write ...", flush=True)
            root = bench_write(
                spark, li, n_rows, work, rows, args.write_repeat, shapes, not args.no_warmup
            )
        if "scan" in steps:
            print("scan ...", flush=True)
            bench_scan(spark, root, li_path, n_rows, rows, args.repeat)
        if "q6" in steps:
            print("Q6 ...", flush=True)
            bench_q6(spark, root, li_path, work, rows, args.repeat)
        if "many" in steps:
            print(f"{args.partitions} partitions ...", flush=True)
            bench_many_partitions(spark, work, args.partitions, rows, args.repeat)
    finally:
        if own:
            lps.stop_session(spark)
    text = report(rows, args, extra)
    print(text)
    write_report(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
