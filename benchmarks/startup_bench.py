"""Start-up: ``import lance_partitioned`` against ``import lance``, and ``--help``.

    .venv/bin/python benchmarks/startup_bench.py [--reps 15] [--out benchmarks/results/startup.md]

Each case is a fresh interpreter (``python -c ...``), the cases interleaved in a
shuffled order every repetition so that background load hits them alike:

- ``python -c pass``: the interpreter alone (the floor);
- ``import lance``: what any Lance program pays;
- ``import lance_partitioned``: ours (goal: within 1.3x of ``import lance``); it loads
  the library on first use, so also
- ``import lance_partitioned; lp.open``: the library loaded, what a program that
  opens a namespace pays before its first Lance call (held to the same goal);
- ``lance-partitioned --help`` (``python -m lance_partitioned --help``; goal: < 0.5 s
  on an idle machine).

The subprocesses import this checkout's package (``PYTHONPATH``), from bytecode as an
installed package does: ``PYTHONDONTWRITEBYTECODE`` is dropped and the bytecode of
every module goes to a scratch ``PYTHONPYCACHEPREFIX``, written by the warm-up round
(without it, a checkout run with ``PYTHONDONTWRITEBYTECODE=1`` compiles the whole
package on every start, while Lance, pyarrow and pandas load compiled). Wall time and the
child's CPU time (user + sys) are reported, median and best; on a busy machine
compare the ratio, measured in the same run, not absolute times.

Answers checked (exit non-zero otherwise): ``--help`` exits 0 and prints the
usage line, and ``import lance_partitioned`` imports none of the optional
engines (pyspark, datafusion, rich, lance_namespace, duckdb, polars).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_env import REPO, command, header_lines, loadavg, utc_now, write_report

# modules ``import lance_partitioned`` must not import (tests/test_startup.py checks the
# same rule): each is needed by one engine or command only
LAZY = ("pyspark", "datafusion", "rich", "lance_namespace", "duckdb", "polars", "sklearn")

CASES = {
    "python -c pass": ["-c", "pass"],
    "import lance": ["-c", "import lance"],
    "import lance_partitioned": ["-c", "import lance_partitioned"],
    "import lance_partitioned; lp.open": ["-c", "import lance_partitioned as lp; lp.open"],
    "lance-partitioned --help": ["-m", "lance_partitioned", "--help"],
}


_PYCACHE = tempfile.mkdtemp(prefix="lp-startup-pycache-")


def _env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + path if path else "")
    env["PYTHONPYCACHEPREFIX"] = _PYCACHE
    return env


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_once(args: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall and CPU seconds of one fresh interpreter running ``args``."""
    c0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args], env=_env(), cwd=REPO, capture_output=True, text=True
    )
    return time.perf_counter() - t0, _children_cpu() - c0, done


def measure(reps: int) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU times of every case, interleaved (one warm-up round, untimed)."""
    out: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in CASES}
    for i in range(reps + 1):
        order = list(CASES)
        random.Random(i).shuffle(order)
        for name in order:
            wall, cpu, done = run_once(CASES[name])
            if done.returncode != 0:
                raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
            if i > 0:
                out[name][0].append(wall)
                out[name][1].append(cpu)
    return out


def check_answers() -> list[str]:
    """The checks above; each failure a line."""
    problems = []
    _, _, help_run = run_once(CASES["lance-partitioned --help"])
    if help_run.returncode != 0 or "Usage: lance-partitioned" not in help_run.stdout:
        problems.append(f"--help: exit {help_run.returncode}, {help_run.stdout[:200]!r}")
    probe = f"import sys, json, lance_partitioned; print(json.dumps(sorted(set({LAZY!r}) & {{m.split('.')[0] for m in sys.modules}})))"
    _, _, imported = run_once(["-c", probe])
    loaded = json.loads(imported.stdout or "null")
    if imported.returncode != 0 or loaded:
        problems.append(f"import lance_partitioned imported {loaded} ({imported.stderr[-500:]})")
    return problems


def ms(s: float) -> str:
    return f"{s * 1e3:.0f} ms"


def report(times: dict[str, tuple[list[float], list[float]]], reps: int) -> list[str]:
    med = {k: statistics.median(w) for k, (w, _) in times.items()}
    cpu = {k: statistics.median(c) for k, (_, c) in times.items()}
    lines = [
        "| case | wall, median | wall, best | CPU, median | median / `import lance` |",
        "|---|---|---|---|---|",
    ]
    for name, (wall, _) in times.items():
        ratio = med[name] / med["import lance"]
        lines.append(
            f"| `{name}` | {ms(med[name])} | {ms(min(wall))} | {ms(cpu[name])} | {ratio:.2f}x |"
        )
    ratios = [
        f"- `{name}` / `import lance`: {med[name] / med['import lance']:.2f}x wall, "
        f"{cpu[name] / cpu['import lance']:.2f}x CPU (goal: <= 1.3x)"
        for name in ("import lance_partitioned", "import lance_partitioned; lp.open")
    ]
    return [
        f"{reps} repetitions of each case, interleaved.",
        "",
        *lines,
        "",
        *ratios,
        f"- `lance-partitioned --help`: {ms(med['lance-partitioned --help'])} (goal: < 500 ms "
        "on an idle machine)",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=15, help="repetitions of each case")
    parser.add_argument("--workdir", default=None, help="unused (every benchmark takes it)")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/startup.md"))
    args = parser.parse_args(argv)
    started, load_start, t0 = utc_now(), loadavg(), time.perf_counter()
    try:
        times = measure(args.reps)
        problems = check_answers()
    finally:
        shutil.rmtree(_PYCACHE, ignore_errors=True)
    head = header_lines(
        "Start-up time", command(__file__, argv), started, load_start, time.perf_counter() - t0
    )
    checks = ["", "Answers checked: " + ("all passed" if not problems else "; ".join(problems))]
    text = "\n".join([*head, *report(times, args.reps), *checks]) + "\n"
    print(text)
    write_report(args.out, text)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
