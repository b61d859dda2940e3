"""Run every benchmark script, one after the other, each in its own process.

    .venv/bin/python benchmarks/run_all.py [--workdir /tmp/lpbench-all] [--only core,spark]
    .venv/bin/python benchmarks/run_all.py --smoke [--workdir DIR] [--out-dir DIR]

Without ``--smoke`` each script runs at the scale of its README command and writes
its report into ``benchmarks/results/`` (``make bench``). With ``--smoke`` each
runs at a tiny scale (TPC-H SF 0.01, tens of partitions, one repetition) and
writes its report into ``--out-dir``: a check that every script still runs and
still gets its answers right, not a measurement (``tests/test_benchmarks_smoke.py``
uses the same arguments). Every script checks its own answers and exits non-zero
when one is wrong; this runner exits non-zero when any script did.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# script -> (arguments at full scale, arguments of the smoke run). Every script also
# gets --workdir <dir>/<name> and, in a smoke run, --out <out-dir>/<name>.md.
SCRIPTS: dict[str, tuple[list[str], list[str]]] = {
    "core_bench": (
        ["--sf", "1"],
        [
            "--sf",
            "0.01",
            "--partitions",
            "30",
            "--bucket-ints",
            "20000",
            "--bucket-strings",
            "20000",
            "--reps",
            "1",
            "--write-reps",
            "1",
        ],
    ),
    "evolution_bench": (
        ["--partitions", "10000", "--rows", "2000000"],
        ["--partitions", "30", "--rows", "2000", "--reps", "1"],
    ),
    "txn_bench": (
        ["--commits", "1000"],
        ["--commits", "6", "--latency-partitions", "1,5", "--writers", "1,2", "--txns", "2"],
    ),
    "many_partitions_bench": (
        [],
        [
            "--partitions",
            "20,40",
            "--compare-upto",
            "20",
            "--reps",
            "1",
            "--commit-partitions",
            "10",
        ],
    ),
    "fix_experiments": (["--sf", "1"], ["--sf", "0.01", "--reps", "1"]),
    "spark_bench": (
        ["--sf", "1", "--partitions", "10000"],
        [
            "--sf",
            "0.01",
            "--partitions",
            "20",
            "--repeat",
            "1",
            "--write-repeat",
            "1",
            "--write-shapes",
            "repartitioned",
            "--no-warmup",
        ],
    ),
    "memory_bench": (["--sf", "1,3,10", "--spark"], ["--sf", "0.01", "--buffer-mib", "4"]),
    "spj_bench": (["--sf", "1"], ["--sf", "0.01", "--buckets", "4", "4", "--repeat", "1"]),
    "spark_sql_bench": (
        ["--sf", "1", "--variants", "default,nopush,noreuse,rows", "--profile", "5"],
        # a scan planned per subquery (Q22), a CTE named twice (Q15), joins (Q3), Q6
        [
            *("--sf", "0.01", "--queries", "3,6,15,22", "--no-warmup", "--profile", "1"),
            *("--variants", "default,nopush,noreuse,rows"),
            *("--floor", "--micro-reps", "1"),
        ],
    ),
    "search_bench": (
        [],
        [
            *("--rows", "2000", "--tenants", "4", "--dim", "16", "--queries", "4"),
            *("--query-tenants", "2", "--min-rows", "100", "--rows-per-list", "250"),
        ],
    ),
    "s3_bench": (
        ["--sf", "0.1"],
        [
            *("--sf", "0.01", "--partitions", "1,12", "--touched", "1,4"),
            *("--reps", "1", "--write-reps", "1"),
        ],
    ),
    "merge_bench": (
        ["--sf", "1"],
        ["--sf", "0.01", "--batch", "1000", "--reps", "1"],
    ),
    "changes_bench": (
        ["--partitions", "1000,100000"],
        ["--partitions", "20,50", "--reps", "1"],
    ),
    "scale_bench": (
        # one run builds everything (a million leaves take a while: see scale_build.py)
        ["--sizes", "10000,100000,1000000", "--budget", "86400"],
        ["--sizes", "50", "--reps", "1", "--clean"],
    ),
    "startup_bench": (["--reps", "15"], ["--reps", "1"]),
    "streaming_read_bench": (
        ["--commits", "20"],
        ["--commits", "2", "--interval", "0.2", "--rows", "50"],
    ),
    "spark_maintenance_bench": (
        ["--partitions", "10000", "--fragments", "10", "--tenants", "1000", "--vectors", "10000"],
        [
            *("--partitions", "20", "--fragments", "3", "--tenants", "3", "--vectors", "300"),
            *("--dim", "8", "--index-type", "IVF_FLAT", "--ivf-partitions", "2"),
            *("--min-rows", "100", "--driver-partitions", "500"),
        ],
    ),
    "streaming_bench": (["--partitions", "10000"], ["--tiny"]),
}
# scripts that start Spark (a JVM): the smoke test runs them in its own Spark session
SPARK_SCRIPTS = (
    "spark_bench",
    "spj_bench",
    "spark_sql_bench",
    "streaming_read_bench",
    "spark_maintenance_bench",
    "streaming_bench",
)
# fix_experiments reuses core_bench's TPC-H data (both cache it as <workdir>/tpch_sf<N>)
WORKDIR_OF = {"fix_experiments": "core_bench"}


def arguments(name: str, smoke: bool, workdir: Path, out_dir: Path | None) -> list[str]:
    """The command-line arguments ``name`` runs with (see ``SCRIPTS``)."""
    full, tiny = SCRIPTS[name]
    args = [*(tiny if smoke else full), "--workdir", str(workdir / WORKDIR_OF.get(name, name))]
    if out_dir is not None:
        args += ["--out", str(out_dir / f"{name}.md")]
    return args


def run(name: str, args: list[str]) -> int:
    """Run ``benchmarks/<name>.py args`` from the repository root; its exit code."""
    cmd = [sys.executable, str(HERE / f"{name}.py"), *args]
    print(f"\n=== {name}: {' '.join(cmd)}", flush=True)
    start = time.perf_counter()
    code = subprocess.run(cmd, cwd=REPO).returncode
    print(f"=== {name}: exit {code} after {time.perf_counter() - start:.0f} s", flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--smoke", action="store_true", help="tiny scale: does everything still run?")
    p.add_argument("--workdir", default=None, help="scratch directory (default: a temporary one)")
    p.add_argument(
        "--out-dir",
        default=None,
        help="where reports go (default: benchmarks/results/, or a temporary one with --smoke)",
    )
    p.add_argument("--only", default=",".join(SCRIPTS), help="comma-separated scripts to run")
    args = p.parse_args(argv)
    names = [n.strip().removesuffix(".py") for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        p.error(f"unknown scripts {unknown}; choose among {', '.join(SCRIPTS)}")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="lpbench-all-"))
    out_dir = Path(args.out_dir) if args.out_dir else None
    if args.smoke and out_dir is None:
        out_dir = workdir / "results"
    os.environ.setdefault("LANCE_LOG", "error")
    failed = [n for n in names if run(n, arguments(n, args.smoke, workdir, out_dir)) != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
