"""Issue 15 goal 1: a million partitions. Plans, commits and counts must not grow with them.

    .venv/bin/python benchmarks/scale_bench.py [--sizes 10000,100000,1000000]
        [--workdir /tmp/lp-scale] [--budget 480] [--reps 5]
        [--out benchmarks/results/scale.md] [--plot PNG (default: --out with .png)]

For each size N, a namespace of N one-row partitions (``k int64, v int64``,
spec ``k``) is built once with the bulk path of ``scale_build.py`` (leaves
written from a template our writer produced, rows registered in one
``__manifest`` commit: building is not what is measured) and kept in
``--workdir``. Building a million leaves takes longer than one run should, so
a run builds for at most ``--budget`` seconds and exits with status 3 when a
size is unfinished; run the same command again to resume. Each size is
measured once it exists; figures accumulate in ``<workdir>/results.json``, and
every run rewrites the report and the plot from all of them.

Measured at each size (median of ``--reps`` unless said):

1. ``plan("k = <one key>")`` on an open handle (goal < 50 ms), and open + plan;
2. ``plan()`` of every partition (goal < 2 s; median of 3): a columnar
   ``ScanPlan``; and ``list(plan())``, which builds every ``ScanTask`` (once);
3. a one-row append into one existing partition (goal < 100 ms; median and max);
4. one append of one row into each of 1,000 existing partitions: the whole
   append, and its commit alone (staging 1,000 leaf versions and the one
   ``__manifest`` commit; goal < 1 s; median of 2), beside Lance's floor: 1,000
   plain ``LanceDataset.commit`` calls on 1,000 open one-row datasets, in 8
   threads as our staging runs them, and in one;
5. ``count()`` with no filter, ``count("k < 1000")`` and ``count("k >= 0")``
   (goal < 2 s, from the row counts ``__manifest`` keeps, without opening the
   leaves; the last keeps every partition, one repetition).

Answers are checked (exit status 1 otherwise): plans return the partitions
plain Lance finds in ``__manifest``, a sample of leaves read with plain Lance
holds its own row, and every count equals the rows the script knows it wrote
(N, plus the rows its appends added, recorded with the results).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LANCE_LOG", "error")

import lance  # noqa: E402
import pyarrow as pa  # noqa: E402
import scale_build  # noqa: E402
from bench_env import clocked, command, header_lines, loadavg, utc_now, write_report  # noqa: E402

import lance_partitioned as lp  # noqa: E402
from lance_partitioned.operations.txn import driver  # noqa: E402
from lance_partitioned.operations.write.job import WriteJob  # noqa: E402
from lance_partitioned.operations.write.publish import WriteMode  # noqa: E402

SCHEMA = scale_build.SCHEMA
GOALS = {  # figure -> goal in seconds (issue 15)
    "plan_one": 0.05,
    "plan_all": 2.0,
    "append_one": 0.1,
    "commit_1000": 1.0,
    "count_all": 2.0,
    "count_partition_filter": 2.0,
    "count_partition_filter_all": 2.0,
}
LABELS = {
    "plan_one": "plan one partition",
    "open_plan_one": "open + plan one partition",
    "plan_all": "plan all partitions",
    "plan_all_tasks": "  and build every ScanTask of it (list(plan()))",
    "append_one": "append 1 row into 1 partition",
    "append_one_max": "(slowest of those appends)",
    "append_1000": "append 1 row into each of 1,000 partitions (all of them below 1,000)",
    "commit_1000": "  of which the commit (1,000 leaves staged + 1 __manifest commit)",
    "commit_1000_staging": "    staging 1,000 leaf versions (a Lance commit each)",
    "commit_1000_ours": "    the rest: lookups, rows, checks, the __manifest commit",
    "lance_floor_1000": "Lance floor: 1,000 Append commits on 1,000 open datasets, 8 threads",
    "lance_floor_1000_seq": "  the same, one thread",
    "count_all": "count(), no filter",
    "count_partition_filter": "count('k < 1000')",
    "count_partition_filter_all": "count('k >= 0'), every partition",
}


def timed(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"WRONG ANSWER: {what}", file=sys.stderr)
        sys.exit(1)


def manifest_table_rows(root: Path) -> int:
    return lance.dataset(str(root / "__manifest")).count_rows("object_type = 'table'")


def lance_floor(work: Path, n: int, threads: int = 8) -> dict[str, float]:
    """Plain Lance staging 1,000 leaf versions: one ``LanceDataset.commit`` of an
    ``Append`` each, on ``n`` one-row datasets already open (as our staging commits
    on the writer's open handle), with the data files written beforehand (not
    timed). ``threads`` as our staging uses (``driver.run_parallel``: 8),
    median of 2; and in one thread, once."""
    from concurrent.futures import ThreadPoolExecutor

    from lance.fragment import write_fragments

    one = pa.table({"k": [1], "v": [1]}, schema=SCHEMA)
    if work.exists():
        shutil.rmtree(work)  # fresh datasets each time: one version, one fragment
    uris = [str(work / f"d{i}") for i in range(n)]
    for u in uris:
        lance.write_dataset(one, u)

    def run(pool_size: int) -> float:
        items = [(lance.dataset(u), write_fragments(one, u)) for u in uris]

        def commit(item) -> None:
            ds, frags = item
            op = lance.LanceOperation.Append(frags)
            lance.LanceDataset.commit(ds, op, read_version=ds.version, max_retries=0)

        t0 = time.perf_counter()
        if pool_size == 1:
            for item in items:
                commit(item)
        else:
            with ThreadPoolExecutor(pool_size) as pool:
                list(pool.map(commit, items))
        return time.perf_counter() - t0

    threaded = statistics.median([run(threads), run(threads)])
    return {"threads": threaded, "sequential": run(1)}


def measure(root: Path, n: int, reps: int, extra: list[int], rng: random.Random) -> dict:
    """The five figures at one size. ``extra`` lists the keys of rows earlier runs appended
    (updated in place with this run's)."""
    out: dict = {"n": n, "measured": utc_now(), "load_start": loadavg()}
    man = lance.dataset(str(root / "__manifest"))
    out["manifest_bytes"] = sum(
        f.stat().st_size for f in (root / "__manifest").rglob("*") if f.is_file()
    )
    out["manifest_fragments"] = len(man.get_fragments())
    out["manifest_indexes"] = sorted(i.name for i in man.describe_indices())
    ns = lp.open(str(root))

    # 1. plan one partition
    keys = [rng.randrange(n) for _ in range(reps)]
    it = iter(keys)

    def plan_one() -> None:
        k = next(it)
        lp.clear_caches()  # as a first query: nothing kept from an earlier run
        tasks = ns.plan(f"k = {k}")
        check(len(tasks) == 1 and tasks[0].partition_values == {"k": k}, f"plan(k = {k}): {tasks}")

    out["plan_one"] = statistics.median(timed(plan_one, reps))
    it = iter(keys)

    def open_plan_one() -> None:
        k = next(it)
        lp.clear_caches()
        lp.open(str(root)).plan(f"k = {k}")

    out["open_plan_one"] = statistics.median(timed(open_plan_one, reps))

    # 2. plan every partition
    tables = manifest_table_rows(root)
    plans: list = []
    out["plan_all"] = statistics.median(
        timed(lambda: lp.clear_caches() or plans.append(len(ns.plan())), 3)
    )
    check(
        all(p == tables for p in plans), f"plan() gave {plans[0]} leaves, __manifest has {tables}"
    )

    # the plan is columnar: a consumer that wants every task object pays for them
    out["plan_all_tasks"] = statistics.median(timed(lambda: len(list(ns.plan())), 1))

    # 3. one-row appends into existing partitions
    def append_one() -> None:
        k = rng.randrange(n)
        ns.append(pa.table({"k": [k], "v": [-1]}, schema=SCHEMA))
        extra.append(k)

    times = timed(append_one, reps)
    out["append_one"], out["append_one_max"] = statistics.median(times), max(times)

    # 4. one commit touching 1,000 existing partitions
    whole, commits, stagings = [], [], []
    staged_in: list[float] = []
    real = driver.run_parallel
    # LeafTransaction.stage stages every leaf through it
    driver.run_parallel = clocked(real, staged_in)
    for _ in range(2):
        ks = rng.sample(range(n), min(1000, n))
        data = pa.table({"k": ks, "v": [-1] * len(ks)}, schema=SCHEMA)
        t0 = time.perf_counter()
        with WriteJob.begin(ns.manifest, WriteMode.APPEND) as job:
            written = job.write(lambda w, data=data: w.write_all(data.to_batches()))
            t1 = time.perf_counter()
            job.commit(written)
        t2 = time.perf_counter()
        whole.append(t2 - t0)
        commits.append(t2 - t1)
        stagings.append(sum(staged_in))
        staged_in.clear()
        check(
            len(written.leaves) == len(ks), f"{len(written.leaves)} leaves written, not {len(ks)}"
        )
        check(not any(lw.is_new for lw in written.leaves.values()), "a partition was created")
        extra.extend(ks)
    driver.run_parallel = real
    # what Lance alone needs for 1,000 leaf versions, measured beside it (same load)
    floor = lance_floor(root.parent / "floor", min(1000, n))
    out["lance_floor_1000"], out["lance_floor_1000_seq"] = floor["threads"], floor["sequential"]
    out["append_1000"], out["commit_1000"] = statistics.median(whole), statistics.median(commits)
    out["commit_1000_staging"] = statistics.median(stagings)
    out["commit_1000_ours"] = statistics.median(
        [c - st for c, st in zip(commits, stagings, strict=True)]
    )

    # 5. counts from __manifest (each as a first query: ``lp.clear_caches``)
    fresh = lp.open(str(root))
    counts: list[int] = []
    out["count_all"] = statistics.median(
        timed(lambda: lp.clear_caches() or counts.append(fresh.count()), 3)
    )
    check(set(counts) == {n + len(extra)}, f"count() = {counts}, wrote {n + len(extra)}")
    small = []
    out["count_partition_filter"] = statistics.median(
        timed(lambda: lp.clear_caches() or small.append(fresh.count("k < 1000")), 3)
    )
    want = min(n, 1000) + sum(1 for k in extra if k < 1000)
    check(set(small) == {want}, f"count('k < 1000') = {small}, wrote {want}")
    # a partition-only filter that keeps every partition: each leaf's residual is decided
    everything: list[int] = []
    out["count_partition_filter_all"] = statistics.median(
        timed(lambda: everything.append(fresh.count("k >= 0")), 1)
    )
    check(everything == [n + len(extra)], f"count('k >= 0') = {everything}")
    out["load_end"] = loadavg()
    return out


def report(
    results: dict, cmd: str, started: str, load_start: str, elapsed: float, plot: str
) -> str:
    sizes = sorted(results, key=int)
    lines = header_lines(
        "Scale: plans, commits and counts up to a million partitions",
        cmd,
        started,
        load_start,
        elapsed,
    )
    lines += [
        "Namespaces of N one-row partitions (`k int64, v int64`, spec `k`), built by the bulk",
        "path of `benchmarks/scale_build.py` (not measured). Times in ms; the goal column is",
        "issue 15's. Each size was measured in its own run (date and load below).",
        "Answers checked (all passed): plans against plain Lance's `__manifest` rows, a",
        "sample of leaves read back with plain Lance, counts against the rows written.",
        "",
        "| figure | goal | " + " | ".join(f"{int(s):,}" for s in sizes) + " |",
        "|---|---|" + "---|" * len(sizes),
    ]
    for key, label in LABELS.items():
        goal = GOALS.get(key)
        cells = []
        for s in sizes:
            v = results[s].get(key)
            mark = "" if goal is None or v is None else (" ✓" if v < goal else " ✗")
            cells.append("–" if v is None else f"{v * 1000:,.0f}{mark}")
        lines.append(
            f"| {label} | {'' if goal is None else f'< {goal * 1000:,.0f}'} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "| size | measured (UTC) | load at start / end | __manifest on disk | fragments | indexes | leaves on disk |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in sizes:
        r = results[s]
        disk = r.get("leaf_bytes_per_partition")
        lines.append(
            f"| {int(s):,} | {r['measured']} | {r['load_start']} / {r['load_end']} | "
            f"{r['manifest_bytes'] / 2**20:,.1f} MiB | {r['manifest_fragments']} | "
            f"{', '.join(r['manifest_indexes']) or 'none'} | "
            f"{'' if disk is None else f'{disk / 1024:,.1f} KiB per partition'} |"
        )
    lines += ["", f"![time against partition count]({os.path.basename(plot)})", ""]
    return "\n".join(lines)


def draw(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results, key=int)
    xs = [int(s) for s in sizes]
    fig, ax = plt.subplots(figsize=(8, 5))
    curves = {
        "plan_one": "plan one partition",
        "plan_all": "plan all partitions",
        "plan_all_tasks": "  and build every ScanTask of it (list(plan()))",
        "append_one": "append 1 row into 1 partition",
        "commit_1000": "commit touching 1,000 partitions",
        "commit_1000_ours": "  its __manifest side (without leaf staging)",
        "lance_floor_1000": "Lance floor: 1,000 commits, 8 threads",
        "count_all": "count(), no filter",
        "count_partition_filter": "count('k < 1000')",
        "count_partition_filter_all": "count('k >= 0')",
    }
    for key, label in curves.items():
        ys = [results[s].get(key) for s in sizes]
        if all(y is not None for y in ys):
            ax.plot(xs, [y * 1000 for y in ys], marker="o", label=label)
    for goal in sorted(set(GOALS.values())):  # the goals, as dotted lines
        ax.axhline(goal * 1000, color="grey", linestyle=":", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partitions")
    ax.set_ylabel("time (ms)")
    ax.set_title("lance-partitioned: time against partition count")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--workdir", default="/tmp/lp-scale")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds of building per run")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/scale.md")
    ap.add_argument("--plot", default=None, help="the PNG (default: --out with .png)")
    ap.add_argument("--remeasure", action="store_true", help="measure sizes measured before again")
    ap.add_argument("--clean", action="store_true", help="delete the built namespaces at the end")
    args = ap.parse_args()
    args.plot = args.plot or str(Path(args.out).with_suffix(".png"))
    started, load_start, t0 = utc_now(), loadavg(), time.perf_counter()
    cmd = command(__file__, sys.argv[1:])
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / "results.json"
    state = (
        json.loads(state_path.read_text()) if state_path.exists() else {"results": {}, "extra": {}}
    )
    unfinished = False
    for n in (int(s) for s in args.sizes.split(",")):
        root = work / f"n{n}"
        if str(n) in state["results"] and not args.remeasure:
            continue
        left = args.budget - (time.perf_counter() - t0)
        print(f"== {n:,} partitions: building (budget {max(left, 0):.0f} s)", flush=True)
        if not scale_build.build(root, n, work / "scratch", budget=left):
            print(f"   {n:,} not finished; run the same command again to resume", flush=True)
            unfinished = True
            break
        scale_build.verify(root)
        leaf_bytes = None
        if n <= 100_000 or args.clean:  # walking a million leaves takes minutes
            leaf_bytes = (
                scale_build.disk_usage(root) - scale_build.disk_usage(root / "__manifest")
            ) / n
        print(f"== {n:,} partitions: measuring", flush=True)
        extra = state["extra"].setdefault(str(n), [])
        result = measure(root, n, args.reps, extra, random.Random(n))
        result["leaf_bytes_per_partition"] = leaf_bytes or state["results"].get(str(n), {}).get(
            "leaf_bytes_per_partition"
        )
        state["results"][str(n)] = result
        state_path.write_text(json.dumps(state))
        print(
            json.dumps({k: v for k, v in result.items() if isinstance(v, float)}, indent=1),
            flush=True,
        )
        if args.clean:
            shutil.rmtree(root)
    if state["results"]:
        draw(state["results"], args.plot)
        text = report(
            state["results"], cmd, started, load_start, time.perf_counter() - t0, args.plot
        )
        write_report(args.out, text)
        print(text)
    return 3 if unfinished else 0


if __name__ == "__main__":
    sys.exit(main())
