"""MERGE (upsert) and UPDATE of TPC-H ``orders``: lance-partitioned beside plain Lance,
deltalake and pyiceberg, all in one run (issue 30).

    .venv/bin/python benchmarks/merge_bench.py [--sf 1] [--batch 100000] [--reps 3]
        [--workdir /tmp/lpmerge] [--skip-iceberg] [--spark] [--contenders KEY,...]
        [--out benchmarks/results/merge.md]

The change batch (``--batch`` rows, seeded numpy, the same for every contender): half
updates of existing ``o_orderkey`` values with a new ``o_totalprice`` and
``o_orderstatus``, a ``--move-fraction`` of them also with an ``o_orderdate`` 400
days away, so that the row MOVES to another year partition; half new keys above
the largest one. Contenders, each on a fresh copy of the table for every
repetition (the copy is not timed; opening the table is):

1. floor: ``lance.dataset(uri).merge_insert("o_orderkey").when_matched_update_all()
   .when_not_matched_insert_all().execute(batch)`` on one unpartitioned dataset;
2. lance-partitioned, ``year(o_orderdate)`` (keys do not determine partitions):
   ``ns.merge(batch, on=["o_orderkey"]).when_matched_update_all()
   .when_not_matched_insert_all().execute()``;
3. lance-partitioned, ``bucket(16, o_orderkey)`` (keys determine partitions);
4. deltalake ``dt.merge(...)`` on a Delta table partitioned by an added ``o_year``;
5. pyiceberg ``tbl.upsert(batch, join_cols=["o_orderkey"])`` on a table partitioned
   by ``year(o_orderdate)`` (SqlCatalog on sqlite). It is slow: above SF 0.1 it runs
   once (``--iceberg-reps``), and ``--skip-iceberg`` leaves it out.

With ``--spark`` (one ``local[2]`` session, stopped with its JVM at the end), the
same batch, written to Parquet and read back by Spark as a DataFrame (made before
timing; each run reads the file), also goes to:

6. ``lps.merge(spark, df, root, on=["o_orderkey"])...execute()`` into copies of
   the year and the bucket namespaces (Spark tasks match and write, the driver
   commits once); each run's timing log (``LANCE_PARTITIONED_SPARK_TIMING``) says
   what the tasks spent waiting for rows, in ``plan_merge`` and in the write, and
   the driver in the Spark job and the commit: the report's "where the time goes";
7. what a Spark user does without a format that merges: read the whole table
   (Parquet by year), full outer join it with the batch, write all of it again
   (Parquet by year).

With ``--spark`` every contender's cpu figure is the process tree's (the JVM and
its Python workers too), and the Spark runs give the JVM's peak RSS beside this
process's.

UPDATE ``o_totalprice = o_totalprice * 1.1`` of 1% of the rows spread over every
partition (``o_orderkey % 100 = 0``) and of one year's rows (1995) is measured with
Lance's ``ds.update``, ``ns.update`` and deltalake's ``dt.update`` (pyiceberg has no
UPDATE).

Every contender's final table is checked: row count, distinct keys, the sum of
``o_totalprice`` and the rows dated 1995 (read through the tool's own filter, so a
row left in its old partition is missed) must equal the answer computed with
numpy/pyarrow from the source rows with the batch applied; a mismatch is printed
loudly and the script exits non-zero. ``o_totalprice`` is read as float64: engines
round a decimal times 1.1 differently (through a double, or exactly), so only a
double gives every engine, and the oracle, the same product. The goals of the
issue are printed beside the ratios and never fail the run.

lance-partitioned's ``merge``/``update`` rows say "not available" when the package
has no such method. Writes ``benchmarks/results/merge.md`` (``--out``) headed by the
command, the machine and the load.
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCE_LOG", "error")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import lance  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.dataset as pads  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

# the repository root on sys.path: the TPC-H generator lives in the demo (demo.tpch)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402
from bench_measure import (  # noqa: E402
    Timing,
    measure,
    measure_interleaved,
    reset_peak_rss,
    rmtree,
    rss_mib,
    secs,
    tree_cpu_seconds,
)

import lance_partitioned as lp  # noqa: E402
from demo import tpch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "merge.md"
KEY = "o_orderkey"
SET = {"o_totalprice": "o_totalprice * 1.1"}
YEAR = 1995  # the partition the one-partition update and the moved-rows check look at
IN_YEAR = f"o_orderdate >= DATE '{YEAR}-01-01' AND o_orderdate < DATE '{YEAR + 1}-01-01'"
UPDATES = {  # label -> (SQL predicate, numpy mask over the source rows)
    "update 1% of rows, spread (`o_orderkey % 100 = 0`)": (
        "o_orderkey % 100 = 0",
        lambda t: t[KEY].to_numpy() % 100 == 0,
    ),
    f"update one year's rows (`o_orderdate` in {YEAR})": (IN_YEAR, lambda t: years(t) == YEAR),
}
MOVE_DAYS = 400  # more than a year: a moved row always lands in another year
RTOL = 1e-9  # sums of doubles added in another order


# -- data and the independent answers ---------------------------------------------------


def years(t: pa.Table) -> np.ndarray:
    return pc.year(t["o_orderdate"]).to_numpy()


def replace(t: pa.Table, name: str, values: pa.Array) -> pa.Table:
    """``t`` with column ``name`` replaced by ``values`` (its field's type follows them)."""
    i = t.schema.get_field_index(name)
    return t.set_column(i, t.schema.field(i).with_type(values.type), values)


def load_orders(sf: float, workdir: Path) -> pa.Table:
    """TPC-H ``orders`` (cached in ``<workdir>/tpch_sf<N>``), ``o_totalprice`` as double."""
    path = tpch.generate(sf, str(workdir / f"tpch_sf{sf:g}"), tables=("orders",))["orders"]
    t = tpch.read(path)
    return replace(t, "o_totalprice", t["o_totalprice"].cast(pa.float64()).combine_chunks())


def make_batch(source: pa.Table, n: int, move_fraction: float, seed: int) -> pa.Table:
    """``n`` rows: ``n // 2`` updates of distinct existing keys (new price and status, a
    ``move_fraction`` of them also dated ``MOVE_DAYS`` away, into another year), the
    rest new keys above the largest, copied from random rows; shuffled."""
    rng = np.random.default_rng(seed)
    n_upd = min(n // 2, source.num_rows)
    updated = source.take(rng.choice(source.num_rows, n_upd, replace=False))
    s = updated["o_orderstatus"]
    status = pc.if_else(pc.equal(s, "O"), "F", pc.if_else(pc.equal(s, "F"), "P", "O"))
    updated = replace(updated, "o_orderstatus", status.cast(s.type))
    days = updated["o_orderdate"].cast(pa.int32()).to_numpy().copy()
    moving = rng.random(n_upd) < move_fraction
    late = years(updated) >= 1995  # move back in time from 1995 on: dates stay in 1992-1998
    days[moving] += np.where(late, -MOVE_DAYS, MOVE_DAYS)[moving]
    updated = replace(updated, "o_orderdate", pa.array(days, pa.int32()).cast(pa.date32()))
    fresh = source.take(rng.integers(0, source.num_rows, n - n_upd))
    top = pc.max(source[KEY]).as_py()
    fresh = replace(fresh, KEY, pa.array(np.arange(top + 1, top + 1 + fresh.num_rows)))
    batch = pa.concat_tables([updated, fresh])
    prices = np.round(rng.uniform(900.0, 550_000.0, batch.num_rows), 2)
    batch = replace(batch, "o_totalprice", pa.array(prices))
    return batch.take(rng.permutation(batch.num_rows)).cast(source.schema).combine_chunks()


def moved_rows(source: pa.Table, batch: pa.Table) -> int:
    """Rows of ``batch`` that update a key of ``source`` with a date in another year."""
    at = pc.index_in(batch[KEY], value_set=source[KEY])
    hit = pc.is_valid(at)
    before = years(source.take(at.filter(hit)))
    return int((before != years(batch.filter(hit))).sum())


@dataclass(frozen=True)
class State:
    """What the correctness check compares: rows, distinct keys, sum of prices, rows in YEAR."""

    rows: int
    keys: int
    total: float
    in_year: int

    @classmethod
    def of(cls, t: pa.Table, in_year: int) -> State:
        return cls(t.num_rows, pc.count_distinct(t[KEY]).as_py(), sum_price(t), in_year)

    def differs(self, other: State) -> list[str]:
        out = [
            f"{k} {getattr(self, k)} != {getattr(other, k)}"
            for k in ("rows", "keys")
            if getattr(self, k) != getattr(other, k)
        ]
        if abs(self.total - other.total) > RTOL * max(abs(other.total), 1.0):
            out.append(f"sum(o_totalprice) {self.total!r} != {other.total!r}")
        if self.in_year != other.in_year:
            out.append(f"rows dated {YEAR} {self.in_year} != {other.in_year}")
        return out


def sum_price(t: pa.Table) -> float:
    return float(pc.sum(t["o_totalprice"]).as_py() or 0.0)


def after_merge(source: pa.Table, batch: pa.Table) -> tuple[State, dict[str, int]]:
    """The table after the upsert, from the source rows and the batch alone (pyarrow)."""
    matched = pc.is_in(source[KEY], value_set=batch[KEY])
    kept = source.filter(pc.invert(matched))
    both = pa.concat_tables(
        [
            kept.select([KEY, "o_totalprice", "o_orderdate"]),
            batch.select([KEY, "o_totalprice", "o_orderdate"]),
        ]
    )
    updated = int(pc.sum(matched.cast(pa.int64())).as_py() or 0)
    state = State.of(both, int((years(both) == YEAR).sum()))
    return state, {"inserted": batch.num_rows - updated, "updated": updated}


def after_update(source: pa.Table, mask: np.ndarray) -> tuple[State, dict[str, int]]:
    """The table after ``o_totalprice * 1.1`` where ``mask`` (numpy)."""
    price = source["o_totalprice"].to_numpy()
    total = float(np.where(mask, price * 1.1, price).sum())
    keys = pc.count_distinct(source[KEY]).as_py()
    state = State(source.num_rows, keys, total, int((years(source) == YEAR).sum()))
    return state, {"updated": int(mask.sum())}


# -- contenders -----------------------------------------------------------------------------


def field_of(result: Any, *names: str) -> Any:
    """The first of ``names`` a tool's result has, as a key or an attribute."""
    for name in names:
        if isinstance(result, dict) and name in result:
            return result[name]
        if hasattr(result, name):
            return getattr(result, name)
    return None


def counts(result: Any, **names: tuple[str, ...]) -> dict[str, Any]:
    """``{label: value}`` from a tool's result, each label looked up under its names."""
    return {label: field_of(result, *keys) for label, keys in names.items()}


@dataclass
class Contender:
    """One table format. ``template`` is written once; ``fresh`` copies it to a new
    directory before every timed run (a new path each time: no cache keyed by path
    can serve the last repetition's files)."""

    key: str
    label: str
    work: Path
    runs: int = 0
    live: Path | None = None
    template_key: str = ""  # another contender's key whose template this one copies

    @property
    def template(self) -> Path:
        return self.work / f"{self.template_key or self.key}_template"

    def fresh(self) -> None:
        if self.live is not None:
            rmtree(self.live)
        self.runs += 1
        self.live = self.work / f"{self.key}_{self.runs}"
        rmtree(self.live)
        self.fill(self.live)

    def fill(self, live: Path) -> None:
        """Put a table like the template at ``live`` (a copy of its files)."""
        shutil.copytree(self.template, live)

    def missing(self, op: str) -> str | None:
        """Why ``op`` ('merge' or 'update') cannot run here, or None."""
        return None

    def merge_input(self, batch: pa.Table) -> Any:
        """What ``merge`` takes: the batch in this tool's shape (made before timing)."""
        return batch

    def peak_note(self) -> str:
        """More peak memory to report beside this process's (a JVM's), or ''."""
        return ""


class LanceFloor(Contender):
    def build(self, table: pa.Table) -> None:
        lance.write_dataset(table, str(self.template), mode="create")

    def merge(self, batch: pa.Table) -> dict[str, Any]:
        builder = lance.dataset(str(self.live)).merge_insert(KEY)
        r = builder.when_matched_update_all().when_not_matched_insert_all().execute(batch)
        return counts(
            r,
            inserted=("num_inserted_rows",),
            updated=("num_updated_rows",),
            deleted=("num_deleted_rows",),
        )

    def update(self, where: str) -> dict[str, Any]:
        r = lance.dataset(str(self.live)).update(SET, where=where)
        return counts(r, updated=("num_rows_updated", "num_updated_rows"))

    def state(self) -> State:
        ds = lance.dataset(str(self.live))
        return State.of(ds.to_table(columns=[KEY, "o_totalprice"]), ds.count_rows(filter=IN_YEAR))


def merge_counts(result: Any) -> dict[str, Any]:
    """A lance-partitioned ``MergeResult``'s counts."""
    return counts(
        result,
        inserted=("rows_inserted",),
        updated=("rows_updated",),
        deleted=("rows_deleted",),
        partitions=("partitions_touched",),
    )


@dataclass
class Partitioned(Contender):
    spec: str = ""

    def build(self, table: pa.Table) -> None:
        lp.create(str(self.template), table.schema, self.spec).append(table)

    def missing(self, op: str) -> str | None:
        if hasattr(lp.PartitionedNamespace, op):
            return None
        return f"not available: this lance_partitioned has no `ns.{op}`"

    def merge(self, batch: pa.Table) -> dict[str, Any]:
        ns = lp.open(str(self.live))
        r = ns.merge(batch, on=[KEY]).when_matched_update_all().when_not_matched_insert_all()
        return merge_counts(r.execute())

    def update(self, where: str) -> dict[str, Any]:
        u = lp.open(str(self.live)).update(set=SET, where=where)
        return counts(u, updated=("rows_updated",), partitions=("partitions_touched",))

    def state(self) -> State:
        ns = lp.open(str(self.live))
        return State.of(ns.to_arrow(columns=[KEY, "o_totalprice"]), ns.count(IN_YEAR))


def with_year(t: pa.Table) -> pa.Table:
    """``t`` plus Delta's partition column ``o_year`` (Delta has no partition transforms)."""
    return t.append_column(
        pa.field("o_year", pa.int32(), False), pc.year(t["o_orderdate"]).cast("i4")
    )


class Delta(Contender):
    def build(self, table: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(str(self.template), with_year(table), partition_by=["o_year"])

    def merge_input(self, batch: pa.Table) -> pa.Table:
        return with_year(batch)  # Delta's partition column

    def merge(self, batch: pa.Table) -> dict[str, Any]:
        from deltalake import DeltaTable

        merger = DeltaTable(str(self.live)).merge(
            source=batch, predicate=f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t"
        )
        r = merger.when_matched_update_all().when_not_matched_insert_all().execute()
        return counts(
            r,
            inserted=("num_target_rows_inserted",),
            updated=("num_target_rows_updated",),
            deleted=("num_target_rows_deleted",),
        )

    def update(self, where: str) -> dict[str, Any]:
        from deltalake import DeltaTable

        r = DeltaTable(str(self.live)).update(updates=SET, predicate=where)
        return counts(r, updated=("num_updated_rows",))

    def state(self) -> State:
        from deltalake import DeltaTable

        dt = DeltaTable(str(self.live))
        in_year = dt.to_pyarrow_table(columns=[KEY], partitions=[("o_year", "=", str(YEAR))])
        return State.of(dt.to_pyarrow_table(columns=[KEY, "o_totalprice"]), in_year.num_rows)


@dataclass
class Iceberg(Contender):
    """pyiceberg's metadata holds absolute paths: each fresh table is written anew."""

    table: pa.Table | None = None

    def build(self, table: pa.Table) -> None:
        self.table = table

    def fill(self, live: Path) -> None:
        from core_bench import iceberg_catalog
        from pyiceberg.transforms import YearTransform

        cat = iceberg_catalog(live)
        cat.create_namespace("bench")
        tbl = cat.create_table("bench.orders", schema=self.table.schema)
        with tbl.update_spec() as spec:
            spec.add_field("o_orderdate", YearTransform(), "o_orderdate_year")
        tbl.append(self.table)

    def load(self) -> Any:
        from core_bench import iceberg_catalog

        return iceberg_catalog(self.live).load_table("bench.orders")

    def missing(self, op: str) -> str | None:
        return None if op == "merge" else "pyiceberg 0.12 has no UPDATE"

    def merge(self, batch: pa.Table) -> dict[str, Any]:
        r = self.load().upsert(batch, join_cols=[KEY])
        return counts(r, inserted=("rows_inserted",), updated=("rows_updated",))

    def state(self) -> State:
        tbl = self.load()
        lo, hi = f"{YEAR}-01-01", f"{YEAR + 1}-01-01"
        in_year = tbl.scan(
            row_filter=f"o_orderdate >= '{lo}' and o_orderdate < '{hi}'", selected_fields=(KEY,)
        ).to_arrow()
        return State.of(
            tbl.scan(selected_fields=(KEY, "o_totalprice")).to_arrow(), in_year.num_rows
        )


# -- Spark (--spark) ------------------------------------------------------------------------

SPARK_MASTER = "local[2]"


@dataclass
class SparkSide:
    """The Spark session the Spark contenders share, and the change batch as they read
    it: written to Parquet once and read back by Spark (``spark.read.parquet``), the
    way a batch of changes usually arrives. The DataFrame is made before any timing;
    it is lazy, so every merge reads the file (that is timed)."""

    spark: Any
    work: Path  # the batch's Parquet file and the timing logs; removed at the end
    frame: Any = None

    def batch(self, batch: pa.Table) -> Any:
        if self.frame is None:
            self.work.mkdir(parents=True, exist_ok=True)
            path = self.work / "batch.parquet"
            pq.write_table(batch, path)
            self.frame = self.spark.read.parquet(str(path))
        return self.frame

    @property
    def jvm_pid(self) -> int | None:
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)
        return None if proc is None else proc.pid

    def jvm_peak(self) -> float | None:
        """The JVM's peak RSS (MiB) since the last ``reset_jvm_peak``."""
        pid = self.jvm_pid
        return None if pid is None else rss_mib(pid=pid)

    def reset_jvm_peak(self) -> None:
        if self.jvm_pid is not None:
            reset_peak_rss(self.jvm_pid)


@dataclass
class SparkContender(Contender):
    """A contender run by Spark on ``SPARK_MASTER``: the batch is ``SparkSide``'s
    DataFrame; the JVM's peak RSS is read right after each run (a /proc read)."""

    side: SparkSide | None = None
    jvm_peaks: list[float] = field(default_factory=list)

    def fresh(self) -> None:
        super().fresh()
        self.side.reset_jvm_peak()

    def merge_input(self, batch: pa.Table) -> Any:
        return self.side.batch(batch)

    def missing(self, op: str) -> str | None:
        return None if op == "merge" else "no UPDATE from Spark (`lps` has merge only)"

    def ran(self) -> None:
        peak = self.side.jvm_peak()
        if peak is not None:
            self.jvm_peaks.append(peak)

    def peak_note(self) -> str:
        return f"; JVM {max(self.jvm_peaks):,.0f} MiB" if self.jvm_peaks else ""


@dataclass
class SparkMerge(SparkContender, Partitioned):
    """``lps.merge(spark, df, root, on=[KEY])`` into a copy of a lance-partitioned
    namespace. Every run has its own timing log (``LANCE_PARTITIONED_SPARK_TIMING``,
    set before the run): what each task spent waiting for its rows, in ``plan_merge``
    and in the write, and the driver's Spark job and commit."""

    logs: list[Path] = field(default_factory=list)

    def fresh(self) -> None:
        from lance_partitioned.spark.timing import TIMING_LOG_ENV

        super().fresh()
        self.logs.append(self.side.work / f"{self.key}_{self.runs}_timing.jsonl")
        self.logs[-1].unlink(missing_ok=True)
        os.environ[TIMING_LOG_ENV] = str(self.logs[-1])

    def merge(self, frame: Any) -> dict[str, Any]:
        from lance_partitioned import spark as lps

        builder = lps.merge(self.side.spark, frame, str(self.live), on=[KEY])
        r = builder.when_matched_update_all().when_not_matched_insert_all().execute()
        self.ran()
        return merge_counts(r)


@dataclass
class SparkRewrite(SparkContender):
    """What a Spark user does without a format that merges: read the whole table
    (Parquet partitioned by ``o_year``), full outer join it with the batch, and write
    every row again, partitioned by year, into a new directory."""

    def build(self, table: pa.Table) -> None:
        pads.write_dataset(
            with_year(table),
            self.template,
            format="parquet",
            partitioning=["o_year"],
            partitioning_flavor="hive",
        )

    def fill(self, live: Path) -> None:
        pass  # the template is read; the output is written to ``live``

    def merge(self, frame: Any) -> dict[str, Any]:
        from pyspark.sql import functions as F

        target = self.side.spark.read.parquet(str(self.template)).drop("o_year")
        source = frame.withColumn("_hit", F.lit(True))
        joined = target.alias("t").join(source.alias("s"), on=KEY, how="full_outer")
        cols = [F.col(KEY)] + [
            F.when(F.col("s._hit"), F.col(f"s.{n}")).otherwise(F.col(f"t.{n}")).alias(n)
            for n in frame.columns
            if n != KEY
        ]
        out = joined.select(*cols).withColumn("o_year", F.year("o_orderdate"))
        out.write.partitionBy("o_year").parquet(str(self.live))
        self.ran()
        return {}

    def state(self) -> State:
        d = pads.dataset(str(self.live), format="parquet", partitioning="hive")
        in_year = d.count_rows(filter=pads.field("o_year") == YEAR)
        return State.of(d.to_table(columns=[KEY, "o_totalprice"]), in_year)


def spark_contenders(work: Path, buckets: int, side: SparkSide) -> list[Contender]:
    at = f"Spark {SPARK_MASTER}"
    return [
        SparkMerge(
            "spark_year",
            f"{at}: `lps.merge` into `year(o_orderdate)`",
            work,
            template_key="lp_year",
            spec="year(o_orderdate)",
            side=side,
        ),
        SparkMerge(
            "spark_bucket",
            f"{at}: `lps.merge` into `bucket({buckets}, o_orderkey)`",
            work,
            template_key="lp_bucket",
            spec=f"bucket({buckets}, o_orderkey)",
            side=side,
        ),
        SparkRewrite(
            "spark_rewrite",
            f"{at} without a merge: read all, full outer join, rewrite Parquet by year",
            work,
            side=side,
        ),
    ]


def read_timing_log(path: Path) -> tuple[list[dict], dict | None]:
    """A Spark merge run's task lines and its (last) driver line."""
    entries = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    tasks = [e for e in entries if e.get("phase") == "merge_task"]
    driver = [e for e in entries if e.get("phase") == "merge_driver"]
    return tasks, driver[-1] if driver else None


def median_run_log(line: Line) -> tuple[float, list[dict], dict | None] | None:
    """A Spark merge's median run: (its seconds, its task lines, its driver line)."""
    c = line.contender
    if not isinstance(c, SparkMerge) or line.timing is None:
        return None
    times = line.timing.times
    i = sorted(range(len(times)), key=times.__getitem__)[(len(times) - 1) // 2]
    return (times[i], *read_timing_log(c.logs[len(c.logs) - len(times) + i]))


def with_cpu(entry: dict, name: str) -> str:
    return f"{secs(entry[f'{name}_seconds'])} (cpu {secs(entry[f'{name}_cpu_seconds'])})"


def spark_rows(rep: Report) -> tuple[list[list[str]], list[list[str]]]:
    """Cells of the two tables of ``spark_lines``: one row per Spark merge, one per task."""
    runs, tasks_out = [], []
    for line in rep.lines:
        got = median_run_log(line)
        if got is None:
            continue
        total, tasks, driver = got
        label = line.contender.label
        if driver is None:
            runs.append([label, secs(total), "no timing log", "", "", "", ""])
            continue
        job = driver["job_seconds"]
        longest = max((t["seconds"] for t in tasks), default=0.0)
        lance = max((t["plan_seconds"] + t["write_seconds"] for t in tasks), default=0.0)
        runs.append(
            [
                label,
                secs(total),
                secs(job),
                secs(job - longest),
                with_cpu(driver, "commit"),
                secs(total - job - driver["commit_seconds"]),
                f"{(lance + driver['commit_seconds']) / total:.0%}",
            ]
        )
        for t in sorted(tasks, key=lambda t: -t["rows"]):
            tasks_out.append(
                [
                    label,
                    f"{t['rows']:,}",
                    secs(t["input_wait_seconds"]),
                    with_cpu(t, "plan"),
                    with_cpu(t, "write"),
                    secs(t["seconds"]),
                ]
            )
    return runs, tasks_out


def spark_lines(rep: Report) -> list[str]:
    runs, tasks = spark_rows(rep)
    if not runs:
        return []
    return [
        "",
        "## Spark merge: where the time goes (the median run)",
        "",
        "From the timing log (`LANCE_PARTITIONED_SPARK_TIMING`). The driver logs the Spark "
        "job (reading the batch, the shuffle by key, the tasks) and the commit; "
        "\"outside the tasks\" is the job's time beyond its longest task's (reading the "
        "batch, the shuffle's map side, scheduling, starting the Python tasks). The tasks "
        'run at once on the cores; "in Lance" is the longest task\'s `plan_merge` + write '
        "plus the commit, over the total.",
        "",
        "| Contender | Total | Spark job | Outside the tasks | Commit | Driver, other | In Lance |",
        "|---|---|---|---|---|---|---|",
        *("| " + " | ".join(r) + " |" for r in runs),
        "",
        "Each task: the seconds waiting for its rows (Spark's shuffle read and Arrow "
        "conversion), in `plan_merge` (the snapshot, reading the key columns and the "
        "matched rows from Lance) and in the write (splitting by partition, Lance file "
        "writes); cpu is its Python worker's, every thread (Lance's too).",
        "",
        "| Contender | Task's rows | Waiting for rows | plan_merge | Write | Task total |",
        "|---|---|---|---|---|---|",
        *("| " + " | ".join(r) + " |" for r in tasks),
    ]


def contenders(
    work: Path, buckets: int, iceberg: bool, side: SparkSide | None = None
) -> list[Contender]:
    out: list[Contender] = [
        LanceFloor("floor", "floor: plain Lance `merge_insert` / `update`, one dataset", work),
        Partitioned(
            "lp_year", "lance-partitioned, `year(o_orderdate)`", work, spec="year(o_orderdate)"
        ),
        Partitioned(
            "lp_bucket",
            f"lance-partitioned, `bucket({buckets}, o_orderkey)`",
            work,
            spec=f"bucket({buckets}, o_orderkey)",
        ),
        Delta("delta", "deltalake `merge` / `update`, partitioned by year (`o_year`)", work),
    ]
    if iceberg:
        out.append(Iceberg("iceberg", "pyiceberg `upsert`, `year(o_orderdate)`", work))
    if side is not None:
        out += spark_contenders(work, buckets, side)
    return out


# -- measuring and checking ---------------------------------------------------------------


@dataclass
class Failed:
    """A contender's run raised: the row says so and the script exits non-zero."""

    error: str


def guarded(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        try:
            return fn()
        except Exception as exc:
            return Failed(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")

    return run


@dataclass
class Line:
    op: str
    contender: Contender
    timing: Timing | None
    reported: Any
    verdict: str
    peak: float | None = None  # this process's peak RSS (MiB) over the runs


@dataclass
class Report:
    lines: list[Line] = field(default_factory=list)
    goals: list[tuple[str, str, str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.failures.append(what)
        print(f"\n!!! CORRECTNESS MISMATCH: {what}\n", file=sys.stderr, flush=True)


def run_op(
    rep: Report,
    op: str,
    cs: list[Contender],
    call: Callable[[Contender], Any],
    reps: dict[str, int],
    expect: State,
    cpu: Callable[[], float] | None = None,
) -> None:
    """Time ``call`` on every contender that can run ``op`` (interleaved; those with their
    own repetition count alone), then check each one's final table against ``expect``.
    ``cpu``: the CPU clock of the interleaved runs (``measure_interleaved``)."""
    kind = "merge" if op.startswith("merge") else "update"
    able = [c for c in cs if c.missing(kind) is None]
    print(f"\n== {op}", flush=True)
    cases = {c.key: (guarded(lambda c=c: call(c)), c.fresh) for c in able}
    together = {k: v for k, v in cases.items() if reps.get(k) is None}
    got = {}
    if together:
        got = measure_interleaved(
            together, reps["default"], reps["warmup"], release_memory=True, cpu=cpu
        )
    for k in cases.keys() - together.keys():
        timing, result = measure(cases[k][0], reps[k], setup=cases[k][1])
        got[k] = (timing, result, None)
    for c in cs:  # in the contenders' order, the floor first
        if c.key not in got:
            rep.lines.append(Line(op, c, None, None, c.missing(kind) or ""))
            continue
        timing, result, peak = got[c.key]
        rep.lines.append(check(rep, op, c, timing, result, expect))
        rep.lines[-1].peak = peak
        print(f"  {c.label}: {timing.fmt()} {rep.lines[-1].verdict}", flush=True)


def check(
    rep: Report,
    op: str,
    c: Contender,
    timing: Timing,
    result: Any,
    expect: State,
) -> Line:
    if isinstance(result, Failed):
        rep.fail(f"{op}, {c.label}: raised {result.error}")
        return Line(op, c, None, None, f"**FAILED**: {result.error}")
    try:
        wrong = c.state().differs(expect)
    except Exception as exc:  # reading the result back failed: as wrong as a bad answer
        wrong = [f"reading the table back raised {type(exc).__name__}: {exc}"]
    if wrong:
        rep.fail(f"{op}, {c.label}: " + "; ".join(wrong))
    return Line(op, c, timing, result, "correct" if not wrong else "**WRONG**: " + "; ".join(wrong))


# -- the report ---------------------------------------------------------------------------


def reported(line: Line, expected: dict[str, int]) -> str:
    if not line.reported:
        return ""
    parts = [
        f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
        for k, v in line.reported.items()
        if v is not None
    ]
    off = [k for k, v in expected.items() if line.reported.get(k) not in (None, v)]
    return ", ".join(parts) + (
        f" (expected {', '.join(f'{k} {expected[k]:,}' for k in off)})" if off else ""
    )


def ratio(a: Timing | None, b: Timing | None) -> float | None:
    return None if a is None or b is None else a.median / b.median


def table_lines(rep: Report, expected: dict[str, dict[str, int]]) -> list[str]:
    out = [
        "| Operation | Contender | Time: best (median, n) | Median / floor's | Peak RSS | Reported by the tool | Final table |",
        "|---|---|---|---|---|---|---|",
    ]
    floors = {ln.op: ln.timing for ln in rep.lines if ln.contender.key == "floor"}
    for ln in rep.lines:
        r = ratio(ln.timing, floors.get(ln.op))
        cells = [
            ln.op,
            ln.contender.label,
            ln.timing.fmt() if ln.timing else "—",
            "" if r is None else f"{r:.2f}×",
            "" if ln.peak is None else f"{ln.peak:,.0f} MiB{ln.contender.peak_note()}",
            reported(ln, expected[ln.op]),
            ln.verdict,
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


PEERS = {"floor": "the floor", "delta": "deltalake", "iceberg": "pyiceberg"}
GOALS = (  # (contender, peer, most our median may be of the peer's)
    ("lp_bucket", "floor", 1.5),
    ("lp_year", "floor", 2.0),
    ("lp_year", "delta", 0.2),
    ("lp_bucket", "delta", 0.2),
    ("lp_year", "iceberg", 0.02),
    ("lp_bucket", "iceberg", 0.02),
)


def judge_goals(rep: Report, op: str) -> None:
    """The issue's goals for the merge, on medians: printed, never failing the run."""
    by = {ln.contender.key: ln for ln in rep.lines if ln.op == op}
    for ours, peer, most in GOALS:
        if ours not in by or peer not in by:
            continue
        goal = f"{by[ours].contender.label}: time ≤ {most:g}× {PEERS[peer]}'s"
        r = ratio(by[ours].timing, by[peer].timing)
        if r is None:
            rep.goals.append((goal, "not measured", "n/a"))
            continue
        best = by[ours].timing.best / by[peer].timing.best
        rep.goals.append(
            (goal, f"{r:.3f}× (best {best:.3f}×)", "met" if r <= most else "**NOT met**")
        )


def render(rep: Report, head: list[str], facts: list[str], expected: dict) -> str:
    lines = [*head, *facts, "", "## Results", "", *table_lines(rep, expected)]
    if rep.goals:  # none when --contenders leaves out every pair a goal compares
        lines += [
            "",
            "## Goals (issue 30, on medians; not enforced)",
            "",
            "| Goal | Measured | Verdict |",
            "|---|---|---|",
            *(f"| {g} | {m} | {v} |" for g, m, v in rep.goals),
        ]
    lines += [
        "",
        f"Correctness checks (row count, distinct {KEY}, sum(o_totalprice) within {RTOL:g} "
        f"relative, rows dated {YEAR} read through each tool's filter; expected from "
        "pyarrow/numpy on the source rows with the batch applied): "
        + ("all passed" if not rep.failures else "**FAILED**: " + "; ".join(rep.failures)),
    ]
    lines += spark_lines(rep)
    if rep.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in rep.notes)]
    return "\n".join(lines) + "\n"


# -- main -----------------------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (SF1: 1.5M orders)")
    p.add_argument("--batch", type=int, default=100_000, help="rows in the change batch")
    p.add_argument(
        "--move-fraction",
        type=float,
        default=0.2,
        help="of the updated rows, the share moved to another year (default 0.2)",
    )
    p.add_argument("--reps", type=int, default=3, help="repetitions of each operation")
    p.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed runs of each operation first (not for pyiceberg; default 1)",
    )
    p.add_argument(
        "--iceberg-reps",
        type=int,
        default=None,
        help="repetitions of pyiceberg's upsert (default: --reps up to SF 0.1, else 1)",
    )
    p.add_argument("--skip-iceberg", action="store_true", help="leave pyiceberg out")
    p.add_argument(
        "--spark",
        action="store_true",
        help=f"add the Spark contenders (one {SPARK_MASTER} session): lps.merge into both "
        "namespaces, and a full rewrite of Parquet",
    )
    p.add_argument("--spark-driver-memory", default="4g", help="spark.driver.memory with --spark")
    p.add_argument(
        "--contenders",
        default="",
        help="comma-separated keys to run (default: all): floor, lp_year, lp_bucket, delta, "
        "iceberg, spark_year, spark_bucket, spark_rewrite",
    )
    p.add_argument("--buckets", type=int, default=16, help="buckets of the bucket namespace")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", default="merge,update", help="comma-separated: merge, update")
    p.add_argument("--workdir", default="/tmp/lpmerge", help="scratch directory (TPC-H cached)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="markdown report ('' to print only)")
    return p.parse_args(argv)


def run_all_ops(
    rep: Report, args: argparse.Namespace, source: pa.Table, batch: pa.Table, cs: list[Contender]
) -> dict[str, dict[str, int]]:
    """Every operation asked for (``--only``); returns each one's expected counts."""
    only = {s.strip() for s in args.only.split(",")}
    ice_reps = args.iceberg_reps or (args.reps if args.sf <= 0.1 else 1)
    reps = {"default": args.reps, "warmup": args.warmup, "iceberg": ice_reps}
    expected: dict[str, dict[str, int]] = {}
    if "merge" in only:
        op = f"merge (upsert) of {batch.num_rows:,} rows"
        state, expected[op] = after_merge(source, batch)
        inputs = {c.key: c.merge_input(batch) for c in cs}  # outside the timing
        cpu = tree_cpu_seconds if args.spark else None
        run_op(rep, op, cs, lambda c: c.merge(inputs[c.key]), reps, state, cpu)
        judge_goals(rep, op)
    if "update" in only:
        for op, (where, mask) in UPDATES.items():
            state, expected[op] = after_update(source, mask(source))
            run_op(rep, op, cs, lambda c, where=where: c.update(where), reps, state)
    return expected


def main(argv: list[str] | None = None, spark: Any = None) -> int:
    """Run the benchmark. ``spark``: with ``--spark``, a session to use (and leave
    running) instead of starting one (stopped with its JVM at the end)."""
    args = parse(argv)
    own = args.spark and spark is None
    if own:
        from lance_partitioned.spark import local_session

        conf = {"spark.driver.memory": args.spark_driver_memory}
        spark = local_session(SPARK_MASTER, "lance_partitioned-merge-bench", conf=conf)
    try:
        return bench(args, argv, spark if args.spark else None)
    finally:
        if own:
            from lance_partitioned.spark import stop_session

            stop_session(spark)


def chosen(cs: list[Contender], keys: str) -> list[Contender]:
    """The contenders ``--contenders`` names (all when empty), in their order."""
    wanted = {k.strip() for k in keys.split(",") if k.strip()}
    unknown = wanted - {c.key for c in cs}
    if unknown:
        raise SystemExit(f"--contenders: unknown {sorted(unknown)}; known: {[c.key for c in cs]}")
    return [c for c in cs if not wanted or c.key in wanted]


def build_templates(cs: list[Contender], source: pa.Table) -> None:
    """Each template once (Spark's merges copy the in-process namespaces' templates)."""
    built: set[Path] = set()
    for c in cs:
        if c.template not in built:
            built.add(c.template)
            rmtree(c.template)
            c.build(source)


def bench(args: argparse.Namespace, argv: list[str] | None, spark: Any) -> int:
    started, load_start, t_start = utc_now(), loadavg(), time.perf_counter()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    source = load_orders(args.sf, work)
    batch = make_batch(source, args.batch, args.move_fraction, args.seed)
    side = None if spark is None else SparkSide(spark, work / "spark_runs")
    cs = chosen(contenders(work, args.buckets, not args.skip_iceberg, side), args.contenders)
    build_templates(cs, source)
    rep = Report()
    held = rss_mib("VmRSS")
    timing_env = saved_timing_env() if side is not None else (lambda: None)
    try:
        expected = run_all_ops(rep, args, source, batch, cs)
    finally:
        timing_env()
        for c in cs:
            for path in (c.live, c.template):
                if path is not None:
                    rmtree(path)
    facts = run_facts(args, source, batch, held, side)
    head = header_lines(
        "MERGE and UPDATE benchmarks",
        command(__file__, argv),
        started,
        load_start,
        time.perf_counter() - t_start,
    )
    text = render(rep, head, facts, expected)
    if side is not None:
        rmtree(side.work)  # the timing logs are in the report
    print("\n" + text)
    write_report(args.out, text)
    if rep.failures:
        print("CORRECTNESS CHECKS FAILED:\n  " + "\n  ".join(rep.failures), file=sys.stderr)
        return 1
    return 0


def saved_timing_env() -> Callable[[], None]:
    """A function putting the Spark timing log variable back as it is now (the Spark
    merges set it for each run)."""
    from lance_partitioned.spark.timing import TIMING_LOG_ENV as name

    before = os.environ.get(name)

    def restore() -> None:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before

    return restore


def run_facts(
    args: argparse.Namespace,
    source: pa.Table,
    batch: pa.Table,
    held: float | None,
    side: SparkSide | None,
) -> list[str]:
    ice = (
        "skipped (--skip-iceberg)"
        if args.skip_iceberg
        else str(args.iceberg_reps or (args.reps if args.sf <= 0.1 else 1))
    )
    n_upd = min(args.batch // 2, source.num_rows)
    facts = [
        f"- data: TPC-H orders SF{args.sf:g}, {source.num_rows:,} rows (o_totalprice as double)",
        f"- batch: {batch.num_rows:,} rows (seed {args.seed}): {n_upd:,} updates of existing "
        f"keys, {moved_rows(source, batch):,} of them moving to another year; "
        f"{batch.num_rows - n_upd:,} new keys",
        f"- the one-year update's predicate: `{IN_YEAR}` (year(o_orderdate) = {YEAR})",
        f"- repetitions: {args.reps} after {args.warmup} warm-up, pyiceberg {ice} (no warm-up); "
        "each run on a fresh copy of the table (the copy is not timed; opening the table "
        "is); times are wall clock",
        "- peak RSS: this process's high-water mark during the run, reset before it; the "
        "process holds the source table and the batch throughout"
        + ("" if held is None else f" ({held:,.0f} MiB before the first run)"),
    ]
    if side is not None:
        conf = side.spark.sparkContext.getConf()
        facts += [
            f"- Spark: {conf.get('spark.master')}, driver memory "
            f"{conf.get('spark.driver.memory', '1g')}, default parallelism "
            f"{side.spark.sparkContext.defaultParallelism} (the merge's tasks); the batch is "
            "a DataFrame over a Parquet file of it, made before timing (each run reads "
            "the file); cpu is the whole process tree's (this process, the JVM, its "
            "Python workers); the JVM's peak RSS is reset before each Spark run",
        ]
    return facts


if __name__ == "__main__":
    sys.exit(main())
