"""The change feed between consecutive versions when one partition changed, at 1,000 and
100,000 partitions: ``ns.changes`` beside deltalake's ``load_cdf`` (issue 32).

    .venv/bin/python benchmarks/changes_bench.py [--partitions 1000,100000] [--reps 5]
        [--workdir /tmp/lpchanges] [--out benchmarks/results/changes.md]

For each size N, one namespace of N one-row partitions (``k int64, v int64``, spec
``k``; built by ``scale_build.py``'s bulk path, not measured) and one Delta table of the
same rows partitioned by ``k`` with ``delta.enableChangeDataFeed`` (``write_deltalake``,
not measured). Then, on both, the same two commits, each changing one partition:

1. append one row ``(k = N // 2, v = -1)``;
2. delete the row ``k = N // 3``;
3. update the row ``k = N // 4`` (``v = v + 1``): both feeds report it as an
   ``update_preimage`` and ``update_postimage`` pair.

Measured (wall clock, best and median of ``--reps`` after one warm-up): reading the
changes of exactly that commit, as an Arrow table, with a handle or table already
open, as a pipeline that polls would:

- ``ns.changes(v - 1, v).to_arrow()``;
- ``DeltaTable.load_cdf(starting_version=v, ending_version=v).read_all()``.

The built tables are synced to disk (``os.sync``) before anything is timed. Each
answer is checked against what the commit did (one insert of the appended row,
one delete of the deleted row, their values); a wrong answer is printed loudly and
the script exits non-zero. The issue's goals (< 50 ms, at most 1.5x from the smallest
to the largest size, at most 0.5x deltalake's time) are printed and never fail the run.
Writes ``benchmarks/results/changes.md`` (``--out``) headed by the command, the
machine and the load.
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCE_LOG", "error")

import argparse  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pyarrow as pa  # noqa: E402
from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402
from scale_build import build  # noqa: E402

import lance_partitioned as lp  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "changes.md"
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])
GOAL_MS = 50.0
GOAL_FLAT = 1.5
GOAL_VS_DELTA = 0.5


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], Any]:
    """Seconds of ``reps`` runs of ``fn`` after one warm-up, and the last result."""
    out = fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def build_delta(path: Path, n: int) -> DeltaTable:
    """A Delta table of the rows ``k = v = 0..n-1``, partitioned by ``k``, with CDF on."""
    if path.exists():
        shutil.rmtree(path)
    rows = pa.table({"k": pa.array(range(n), pa.int64()), "v": pa.array(range(n), pa.int64())})
    write_deltalake(
        str(path),
        rows,
        partition_by=["k"],
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    return DeltaTable(str(path))


def rows_of(table: pa.Table, kind_column: str) -> list[tuple]:
    """(change type, k, v) of every change row, sorted."""
    cols = [table.column(kind_column).to_pylist(), table["k"].to_pylist(), table["v"].to_pylist()]
    return sorted(zip(*cols, strict=True))


def measure(
    ns: Any, delta: DeltaTable, reps: int
) -> tuple[list[float], pa.Table, list[float], pa.Table]:
    """Time reading the latest commit's changes with both feeds; their answers too."""
    v, dv = ns.version, delta.version()
    t_ours, got = timed(lambda: ns.changes(v - 1, v).to_arrow(), reps)
    t_delta, cdf = timed(
        lambda: delta.load_cdf(starting_version=dv, ending_version=dv).read_all(), reps
    )
    return t_ours, got, t_delta, cdf if isinstance(cdf, pa.Table) else pa.table(cdf)


def one_size(n: int, work: Path, reps: int, failures: list[str]) -> list[dict[str, Any]]:
    """Build both tables at ``n`` partitions, make the two commits, time both feeds."""
    root = work / f"ns_{n}"
    t0 = time.perf_counter()
    while not build(root, n, work / "scratch"):
        pass
    built_ns = time.perf_counter() - t0
    t0 = time.perf_counter()
    delta = build_delta(work / f"delta_{n}", n)
    built_delta = time.perf_counter() - t0
    print(f"{n:,} partitions: namespace built in {built_ns:.0f} s, Delta in {built_delta:.0f} s")
    # the build leaves gigabytes of dirty pages at 100,000 partitions: write them back now,
    # not during the timed reads of either feed
    os.sync()
    ns = lp.open(str(root))
    out = []
    commits = [
        ("append one row", lambda: ns.append(pa.table({"k": [n // 2], "v": [-1]}), progress=False),
         lambda: write_deltalake(delta, pa.table({"k": [n // 2], "v": [-1]}), mode="append"),
         [("insert", n // 2, -1)]),
        ("delete one row", lambda: ns.delete(f"k = {n // 3}"),
         lambda: delta.delete(f"k = {n // 3}"),
         [("delete", n // 3, n // 3)]),
        ("update one row", lambda: ns.update({"v": "v + 1"}, where=f"k = {n // 4}"),
         lambda: delta.update(updates={"v": "v + 1"}, predicate=f"k = {n // 4}"),
         [("update_postimage", n // 4, n // 4 + 1), ("update_preimage", n // 4, n // 4)]),
    ]  # fmt: skip
    for label, ours, theirs, expected in commits:
        ours()
        ns = lp.open(str(root))
        theirs()
        delta = DeltaTable(str(work / f"delta_{n}"))
        t_ours, got, t_delta, cdf = measure(ns, delta, reps)
        for who, table, column in (
            ("ns.changes", got, "_change_type"),
            ("load_cdf", cdf, "_change_type"),
        ):
            if rows_of(table, column) != expected:
                failures.append(f"{n} {label} {who}: {rows_of(table, column)} != {expected}")
        out.append({"n": n, "commit": label, "ours": t_ours, "delta": t_delta})
    return out


def ms(times: list[float]) -> str:
    return f"{min(times) * 1e3:.1f} / {statistics.median(times) * 1e3:.1f}"


def render(results: list[dict[str, Any]], head: list[str], failures: list[str]) -> str:
    lines = [*head, "## Reading one commit's changes (best / median ms)", ""]
    lines += [
        "| partitions | commit | `ns.changes(v-1, v).to_arrow()` | deltalake `load_cdf(v, v)` | ours / deltalake |",
        "|---:|---|---:|---:|---:|",
    ]
    for r in results:
        ratio = statistics.median(r["ours"]) / statistics.median(r["delta"])
        lines.append(
            f"| {r['n']:,} | {r['commit']} | {ms(r['ours'])} | {ms(r['delta'])} | {ratio:.2f}x |"
        )
    lines += ["", "## Goals (issue 32; reported, never failing the run)", ""]
    sizes = sorted({r["n"] for r in results})
    for commit in sorted({r["commit"] for r in results}):
        rows = {r["n"]: r for r in results if r["commit"] == commit}
        worst = max(statistics.median(r["ours"]) for r in rows.values()) * 1e3
        flat = statistics.median(rows[sizes[-1]]["ours"]) / statistics.median(
            rows[sizes[0]]["ours"]
        )
        vs = max(
            statistics.median(r["ours"]) / statistics.median(r["delta"]) for r in rows.values()
        )
        lines += [
            f"- {commit}: slowest median {worst:.1f} ms (goal < {GOAL_MS:.0f} ms: "
            f"{'met' if worst < GOAL_MS else 'NOT met'}); {sizes[-1]:,} vs {sizes[0]:,} "
            f"partitions {flat:.2f}x (goal <= {GOAL_FLAT}x: {'met' if flat <= GOAL_FLAT else 'NOT met'}); "
            f"worst ratio to deltalake {vs:.2f}x (goal <= {GOAL_VS_DELTA}x: "
            f"{'met' if vs <= GOAL_VS_DELTA else 'NOT met'})"
        ]
    lines += ["", "## Answer checks", ""]
    lines.append("- " + ("all passed" if not failures else "FAILED: " + "; ".join(failures)))
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--partitions", default="1000,100000", help="comma-separated sizes")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions after one warm-up")
    p.add_argument("--workdir", default="/tmp/lpchanges", help="scratch directory")
    p.add_argument("--keep", action="store_true", help="keep the built tables")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="markdown report ('' to print only)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    started, load_start, t_start = utc_now(), loadavg(), time.perf_counter()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    results: list[dict[str, Any]] = []
    try:
        for n in (int(x) for x in args.partitions.split(",")):
            results += one_size(n, work, args.reps, failures)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    head = header_lines(
        "Change feed: one commit's changes",
        command(__file__, argv),
        started,
        load_start,
        time.perf_counter() - t_start,
    )
    text = render(results, head, failures)
    print("\n" + text)
    write_report(args.out, text)
    if failures:
        print("ANSWER CHECKS FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
