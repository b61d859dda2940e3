"""Many partitions in one write: new partitions per second, beside Lance's own floor.

    .venv/bin/python benchmarks/many_partitions_bench.py [--partitions 10000,100000]
        [--rows 3] [--reps 3] [--compare-upto 10000] [--commit-partitions 1000]
        [--workdir /tmp/lpmany] [--out benchmarks/results/many_partitions.md]

1. One append creating N partitions of ``--rows`` rows each (issue 15, goal 2),
   beside the fastest ways plain pylance creates N tiny datasets, in the same
   threads: ``lance.write_dataset`` per dataset, and ``write_fragments`` + an
   ``Overwrite`` commit per dataset. Also the namespace's own two-phase path
   (files, then one staging commit per new leaf), which writers sharing a job
   (Spark tasks) use. Variants alternate within each repetition so load hits
   them alike; the extra variants run only up to ``--compare-upto`` partitions.
2. The commit creating ``--commit-partitions`` new partitions from files
   already written (``commit_write``: one staging commit per new leaf + one
   ``__manifest`` commit), beside Lance committing as many new datasets from
   already-written fragments on the same 8 threads (issue 15, goal 4).

Every namespace's row and partition counts are checked (exit non-zero
otherwise). Prints a markdown report headed by the command, the machine and
the load average, and writes it to ``--out``.
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
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import lance  # noqa: E402
import pyarrow as pa  # noqa: E402
from bench_env import (  # noqa: E402
    command,
    file_system,
    header_lines,
    loadavg,
    utc_now,
    write_report,
)
from lance.dataset import Transaction  # noqa: E402
from lance.fragment import write_fragments  # noqa: E402

import lance_partitioned as lp  # noqa: E402
from lance_partitioned.catalog.snapshot import Snapshot  # noqa: E402
from lance_partitioned.operations.txn.driver import STAGE_THREADS  # noqa: E402
from lance_partitioned.operations.write.job import WriteJob  # noqa: E402
from lance_partitioned.operations.write.partition_writer import (  # noqa: E402
    FINISH_THREADS,
    PartitionWriter,
    new_job_secret,
)
from lance_partitioned.operations.write.publish import WriteMode, commit_write  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "many_partitions.md"
SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), False), pa.field("part", pa.int32()), pa.field("tag", pa.string())]
)
BIG = 10_000  # from this many partitions, one repetition (the machine's lock allows < 10 min)


def data(partitions: int, rows: int) -> pa.Table:
    n = partitions * rows
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "part": pa.array([i // rows for i in range(n)], pa.int32()),
            "tag": pa.array([f"t{i % 7}" for i in range(n)]),
        },
        schema=SCHEMA,
    )


def slices(table: pa.Table, partitions: int, rows: int) -> list[pa.Table]:
    """The rows of each partition (what a dataset per partition holds)."""
    return [table.slice(p * rows, rows) for p in range(partitions)]


class Timer:
    """Wall and CPU (all threads of this process) seconds of a block."""

    def __enter__(self) -> Timer:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


def discard(path: Path) -> None:
    """Move ``path`` into ``<workdir>/trash`` (instant); ``empty_trash`` deletes it.

    Deleting 100,000 leaf directories takes minutes here, which would count
    against the benchmark lock; the caller empties the trash after the run.
    """
    if path.exists():
        trash = path.parent / "trash"
        trash.mkdir(exist_ok=True)
        path.rename(trash / f"{path.name}-{time.monotonic_ns()}")


def empty_trash(work: Path) -> None:
    shutil.rmtree(work / "trash", ignore_errors=True)


def fresh(path: Path) -> str:
    discard(path)
    path.mkdir(parents=True)
    return str(path)


def check_namespace(root: str, partitions: int, rows: int) -> None:
    ns = lp.open(root)
    got = (ns.count(), len(ns.plan()))
    if got != (partitions * rows, partitions):
        raise AssertionError(
            f"{root}: {got[0]:,} rows in {got[1]:,} partitions, "
            f"expected {partitions * rows:,} in {partitions:,}"
        )


def check_datasets(base: str, partitions: int, rows: int) -> None:
    names = os.listdir(base)
    sample = lance.dataset(os.path.join(base, names[0])).count_rows()
    if len(names) != partitions or sample != rows:
        raise AssertionError(f"{base}: {len(names)} datasets ({sample} rows in one)")


# -- section 1: one append creating many partitions ----------------------------------


def run_ours(work: Path, table: pa.Table, shared: bool) -> dict[str, float]:
    """One append through ``WriteJob`` (what ``ns.append`` runs), timed by phase.

    ``shared``: write as one of several writers of a job would (Spark tasks):
    files only, every new leaf staged at commit time.
    """
    discard(work / "ns")
    root = str(work / "ns")
    ns = lp.create(root, SCHEMA, "part")
    phases: dict[str, float] = {}
    with Timer() as whole, WriteJob.begin(ns.manifest, WriteMode.APPEND) as job:
        t0 = time.perf_counter()

        def fill(writer: PartitionWriter) -> None:
            writer.write_all(iter(table.to_batches()))
            phases["split"] = time.perf_counter() - t0

        written = job.write(fill, shared=shared)
        phases["leaves"] = time.perf_counter() - t0 - phases["split"]
        t1 = time.perf_counter()
        job.commit(written)
        phases["publish"] = time.perf_counter() - t1
    return {"wall": whole.wall, "cpu": whole.cpu, **phases, "root": root}  # type: ignore[dict-item]


def run_floor(
    work: Path, parts: list[pa.Table], fn: Callable[[str, pa.Table], object]
) -> dict[str, float]:
    base = fresh(work / "floor")
    with Timer() as t, ThreadPoolExecutor(FINISH_THREADS) as pool:
        list(pool.map(lambda i: fn(os.path.join(base, f"d{i}"), parts[i]), range(len(parts))))
    return {"wall": t.wall, "cpu": t.cpu, "root": base}  # type: ignore[dict-item]


def lance_write_dataset(uri: str, part: pa.Table) -> None:
    lance.write_dataset(part, uri)


def lance_fragments_commit(uri: str, part: pa.Table) -> None:
    frags = write_fragments(part, uri, schema=part.schema)
    op = lance.LanceOperation.Overwrite(part.schema, frags)
    lance.LanceDataset.commit(uri, Transaction(0, op), max_retries=0)


def lance_commit_new(uri: str, frags: list) -> None:
    op = lance.LanceOperation.Overwrite(SCHEMA, frags)
    lance.LanceDataset.commit(uri, Transaction(0, op), max_retries=0)


VARIANTS = {
    "ours": "`ns.append` (its writer creates each new leaf: one `write_dataset` each)",
    "ours-shared": "the two-phase path of writers sharing a job (Spark tasks): files, then one staging commit per leaf",
    "lance-write_dataset": "plain pylance: `lance.write_dataset` per dataset",
    "lance-fragments+commit": "plain pylance: `write_fragments` + `Overwrite` commit per dataset",
}


def bench_many(
    work: Path,
    sizes: list[int],
    rows: int,
    reps: int,
    compare_upto: int,
    only: list[str] | None = None,
) -> tuple[list[str], dict[int, dict[str, list[dict[str, float]]]]]:
    results: dict[int, dict[str, list[dict[str, float]]]] = {}
    for n in sizes:
        table = data(n, rows)
        parts = slices(table, n, rows)
        names = list(VARIANTS) if n <= compare_upto else ["ours", "lance-write_dataset"]
        names = [name for name in names if only is None or name in only]
        got: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for rep in range(reps if n < BIG else 1):
            # each repetition starts with the next variant, so none always runs first
            # (on ext4, the first files created after many deletions cost more)
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                if name.startswith("ours"):
                    r = run_ours(work, table, shared=name == "ours-shared")
                    check_namespace(str(r.pop("root")), n, rows)
                else:
                    fn = (
                        lance_write_dataset
                        if name == "lance-write_dataset"
                        else lance_fragments_commit
                    )
                    r = run_floor(work, parts, fn)
                    check_datasets(str(r.pop("root")), n, rows)
                got[name].append(r)
                print(
                    f"N={n:,} rep {rep + 1}: {name}: {r['wall']:.2f} s "
                    f"({n / r['wall']:,.0f}/s, CPU {1000 * r['cpu'] / n:.2f} ms/partition) "
                    f"load {loadavg()}",
                    flush=True,
                )
                discard(work / ("ns" if name.startswith("ours") else "floor"))
        results[n] = got
    med = statistics.median
    lines = [
        f"## 1. One append creating N partitions of {rows} rows each",
        "",
        f"Median of {reps} repetitions, each starting with the next variant",
        f"(1 from {BIG:,} partitions). *CPU* =",
        "CPU time (user + system, all threads) per partition. Plain-pylance floors run",
        f"on the writer's {FINISH_THREADS} threads.",
        "*vs floor* = time / `lance.write_dataset` floor's time (≤ 1 is faster).",
        "",
        "| N | variant | wall | partitions/s | CPU per partition | vs floor |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for n, got in results.items():
        floors = got.get("lance-write_dataset")
        floor = med(r["wall"] for r in floors) if floors else None
        for name, runs in got.items():
            wall = med(r["wall"] for r in runs)
            cpu = med(r["cpu"] for r in runs)
            vs = f"{wall / floor:.2f}×" if floor else "—"
            lines.append(
                f"| {n:,} | {name} | {wall:.2f} s | {n / wall:,.0f} | "
                f"{1000 * cpu / n:.2f} ms | {vs} |"
            )
    lines += ["", "Phases of `ns.append` (median, seconds):", ""]
    lines += ["| N | variant | split + buffer | leaves | publish |", "|---:|---|---:|---:|---:|"]
    for n, got in results.items():
        for name in ("ours", "ours-shared"):
            if name in got:
                p = {k: med(r[k] for r in got[name]) for k in ("split", "leaves", "publish")}
                lines.append(
                    f"| {n:,} | {name} | {p['split']:.2f} | {p['leaves']:.2f} | {p['publish']:.2f} |"
                )
    lines += ["", "Variants:", ""] + [f"- *{k}*: {v}" for k, v in VARIANTS.items()]
    return lines, results


# -- section 2: the commit creating C new partitions ------------------------------------


def bench_commit(work: Path, n: int, rows: int, reps: int) -> tuple[list[str], float]:
    table = data(n, rows)
    parts = slices(table, n, rows)
    ours, floor = [], []
    for rep in range(reps):
        discard(work / "commit-ns")
        root = str(work / "commit-ns")
        ns = lp.create(root, SCHEMA, "part")
        snap = Snapshot.load(ns.manifest, for_write=True)
        writer = PartitionWriter(snap, new_job_secret())  # files only: nothing staged yet
        writer.write_all(iter(table.to_batches()))
        written = writer.finish()
        with Timer() as t:
            commit_write(ns.manifest, snap, written)
        ours.append(t.wall)
        check_namespace(root, n, rows)
        discard(Path(root))

        base = fresh(work / "commit-floor")
        uris = [os.path.join(base, f"d{i}") for i in range(n)]
        frags = [write_fragments(p, u, schema=p.schema) for p, u in zip(parts, uris, strict=True)]

        with Timer() as t, ThreadPoolExecutor(STAGE_THREADS) as pool:
            list(pool.map(lance_commit_new, uris, frags))
        floor.append(t.wall)
        check_datasets(base, n, rows)
        discard(Path(base))
        print(
            f"commit of {n:,} new partitions, rep {rep + 1}: ours {ours[-1]:.2f} s, "
            f"Lance {floor[-1]:.2f} s, load {loadavg()}",
            flush=True,
        )
    o, f = statistics.median(ours), statistics.median(floor)
    lines = [
        f"## 2. The commit creating {n:,} new partitions",
        "",
        f"Files already written ({rows} rows per partition). *ours* = `commit_write`: one",
        "staging commit per new leaf (`Overwrite`, version 1) + the `__manifest` commit;",
        f"*Lance floor* = `LanceDataset.commit(Overwrite)` of {n:,} new datasets from",
        f"already-written fragments. Both on {STAGE_THREADS} threads; median of {reps}, alternating.",
        "",
        "| ours | Lance floor | ratio |",
        "|---:|---:|---:|",
        f"| {o:.2f} s | {f:.2f} s | {o / f:.2f}× |",
    ]
    return lines, o / f


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=_ints, default=[10_000, 100_000])
    ap.add_argument("--rows", type=int, default=3, help="rows per partition")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (below 100,000 partitions)")
    ap.add_argument(
        "--compare-upto",
        type=int,
        default=10_000,
        help="run the two-phase path and the write_fragments floor up to this many partitions",
    )
    ap.add_argument(
        "--variants",
        default="",
        help=f"comma-separated subset of {', '.join(VARIANTS)} (default: all that apply)",
    )
    ap.add_argument(
        "--keep-trash",
        action="store_true",
        help="leave <workdir>/trash for the caller to delete after the run (outside any lock)",
    )
    ap.add_argument("--commit-partitions", type=int, default=1000)
    ap.add_argument("--workdir", default="/tmp/lpmany")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="report path ('' to print only)")
    args = ap.parse_args(argv)
    started, load_start, t0 = utc_now(), loadavg(), time.perf_counter()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    lines = [f"Work directory: `{work}`, on {file_system(work)}.", ""]
    only = [v.strip() for v in args.variants.split(",") if v.strip()] or None
    section, _ = bench_many(work, args.partitions, args.rows, args.reps, args.compare_upto, only)
    lines += section + [""]
    print("\n".join(section), flush=True)
    if args.commit_partitions:
        section, _ = bench_commit(work, args.commit_partitions, args.rows, args.reps)
        lines += section + [""]
        print("\n".join(section), flush=True)
    head = header_lines(
        "Many partitions in one write",
        command(__file__, argv),
        started,
        load_start,
        time.perf_counter() - t0,
    )
    write_report(args.out, "\n".join(head + lines))
    if not args.keep_trash:
        empty_trash(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
