"""Run one benchmark script against two revisions of the library, interleaved, and compare.

    .venv/bin/python benchmarks/compare_revisions.py --old ef89f13 --new HEAD \\
        [--rounds 3] [--lock /work/wt/bench.lock] [--columns REGEX] [--rows REGEX] \\
        [--out benchmarks/results/compare.md] \\
        -- benchmarks/evolution_bench.py --partitions 10000 --out {out} --workdir {workdir}

Each revision's ``lance_partitioned`` package is extracted with ``git archive``
(``WORKTREE``: the checkout's own files, uncommitted edits included) into a
temporary directory. The *current* benchmark scripts (``benchmarks/`` and the
``demo/`` they import) are copied next to neither package, so the same script
runs against each library version, chosen by ``PYTHONPATH`` alone (checked:
the tool asks each side which ``lance_partitioned`` it imports). Runs alternate
old, new, new, old, ... for ``--rounds`` rounds, so load drift hits both sides
alike; with ``--lock``, each single run holds that ``flock`` file and releases
it afterwards, so other heavy jobs interleave instead of waiting for the whole
comparison.

The script's arguments may contain ``{out}`` (a fresh markdown path per run:
the report the script writes) and ``{workdir}`` (a scratch directory kept
across runs, e.g. for cached TPC-H data). Every markdown table of each report
is read; a cell's *leading figure* is compared (core_bench's "best" time, a
plain number elsewhere), times normalised to ms. Rows are matched by their
position in the report, so both sides must print the same tables (the same
script does). The output table has, per figure: the median over rounds for
old and new, new/old, each side's range over rounds, and a verdict: *beyond
noise* when the ranges do not overlap, else *within noise*.

``--lock-scope round`` holds the lock for a whole round instead (old and new
back to back: fewer waits in a busy queue, still one short job each).
``--workspace DIR`` keeps the extractions, scripts and reports in DIR; running
again with the same DIR resumes: the extracted revisions are reused as they
are, finished runs count without running again, and the report (rewritten
after every round) covers all of them.

``--shim-old FILE``: when the current script uses an API the old revision
lacks, FILE is installed as ``sitecustomize.py`` on the old side only (Python
imports it at start-up) to add a minimal compatibility layer; the report says so.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench_env import header_lines, loadavg, utc_now, write_report

REPO = Path(__file__).resolve().parent.parent
WORKTREE = "WORKTREE"

# A cell's leading figure: "1,234.5 ms (median ...)", "0.33M", "1.18x", "12%".
_FIGURE = re.compile(r"^\s*\**\s*([-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)\**\s*([A-Za-zµ/%×]*)")
_TIME_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "min": 6e4}


def leading_figure(cell: str) -> tuple[float, str] | None:
    """The first number of a table cell and its unit; times in ms (unit ``ms``).

    None when the cell is not a figure: it does not start with a number, or digits
    follow outside parentheses (``1 of 2000 partitions: ...`` is a label, while
    ``4.69 s (median 4.81 s, n=2)`` and ``12.7 M values/s`` are figures).
    """
    m = _FIGURE.match(cell)
    if m is None:
        return None
    rest = re.sub(r"\([^)]*\)", "", cell[m.end() :])
    if re.search(r"\d", rest):
        return None
    value, unit = float(m.group(1).replace(",", "")), m.group(2)
    if unit in _TIME_MS:
        return value * _TIME_MS[unit], "ms"
    return value, unit


@dataclass
class Table:
    """One markdown table of a report: the heading above it, its header and rows."""

    heading: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def markdown_tables(text: str) -> list[Table]:
    """The tables of a markdown document, in order (a separator row ``|---|`` is skipped)."""
    tables: list[Table] = []
    heading, current = "", None
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        if not line.lstrip().startswith("|"):
            current = None
            continue
        cells = _cells(line)
        if current is None:
            current = Table(heading, cells)
            tables.append(current)
        elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
            current.rows.append(cells)
    return tables


def figures(
    text: str, columns: str | None, rows: str | None
) -> dict[tuple, tuple[str, float, str]]:
    """Every comparable figure of a report: key (table, row, column) -> (label, value, unit).

    The label names the row by its text cells and the column by its header; a
    cell repeated in the same column of rows that share their leading text (one
    measurement beside several peers) counts once. ``columns``/``rows``: regular expressions a column header / a row label
    must match (None: all).
    """
    out: dict[tuple, tuple[str, float, str]] = {}
    for t, table in enumerate(markdown_tables(text)):
        seen: set[tuple[str, str, str]] = set()
        for r, row in enumerate(table.rows):
            kinds = [leading_figure(cell) for cell in row]
            # the row is named by all its text cells ("write · compared with Spark")
            text_cells = [c for c, k in zip(row, kinds, strict=True) if k is None and c]
            row_label = " · ".join(text_cells) or f"row {r + 1}"
            if rows and not re.search(rows, row_label):
                continue
            lead = " · ".join(c for c in row[: next((i for i, k in enumerate(kinds) if k), 0)])
            for c, (cell, fig) in enumerate(zip(row, kinds, strict=True)):
                head = table.header[c] if c < len(table.header) else f"column {c + 1}"
                if fig is None or (columns and not re.search(columns, head)):
                    continue
                if (lead, head, cell) in seen:  # one measurement shown beside several peers
                    continue
                seen.add((lead, head, cell))
                prefix = f"{table.heading}: " if table.heading else ""
                out[(t, r, c)] = (f"{prefix}{row_label} — {head}", *fig)
    return out


def extract(rev: str, dest: Path) -> str:
    """Put revision ``rev``'s ``lance_partitioned`` under ``dest``; return its commit.

    A ``dest`` that already holds an extraction (a resumed ``--workspace``) is
    reused as it is, whatever ``rev`` names now.
    """
    stamp = dest / "COMMIT"
    if stamp.exists():
        return stamp.read_text(encoding="utf-8").strip()
    commit = _extract(rev, dest)
    stamp.write_text(commit + "\n", encoding="utf-8")
    return commit


def _extract(rev: str, dest: Path) -> str:
    dest.mkdir(parents=True)
    if rev == WORKTREE:
        shutil.copytree(
            REPO / "lance_partitioned",
            dest / "lance_partitioned",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        head = _git("rev-parse", "--short", "HEAD")
        dirty = _git("status", "--porcelain", "--", "lance_partitioned")
        return f"{head} working tree" + (" (with uncommitted changes)" if dirty else "")
    commit = _git("rev-parse", "--short", rev)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "lance_partitioned"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return commit


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@dataclass
class Side:
    """One library version: where it is extracted and what its runs measured."""

    name: str
    rev: str
    commit: str
    lib: Path
    runs: list[str] = field(default_factory=list)  # the reports, one per successful run
    failures: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)  # load average as each run started

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.lib)}


def check_import(side: Side, cwd: Path) -> None:
    """Fail unless ``side``'s environment imports its own extracted package."""
    got = subprocess.run(
        [sys.executable, "-c", "import lance_partitioned as m; print(m.__file__)"],
        env=side.env(),
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not Path(got).resolve().is_relative_to(side.lib.resolve()):
        raise SystemExit(f"{side.name}: imports {got}, not the extracted {side.lib}")


@contextlib.contextmanager
def held(lock: str | None):
    """Hold ``lock`` (an ``flock`` file, as ``flock(1)`` takes it) for the block; None: no lock."""
    if lock is None:
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_once(side: Side, script: Path, args: list[str], tmp: Path, rnd: int, lock: str | None):
    """One run of the script against ``side`` (holding ``lock``); its report is kept."""
    out = tmp / "reports" / f"{side.name}-{rnd}.md"
    out.parent.mkdir(exist_ok=True)
    meta = out.with_suffix(".run")  # "<seconds> <load>" of a finished run
    if out.exists():  # done before this comparison was resumed
        seconds, _, load = (meta.read_text() if meta.exists() else "nan ?").partition(" ")
        side.seconds.append(float(seconds))
        side.loads.append(load.strip())
        side.runs.append(out.read_text(encoding="utf-8"))
        return
    workdir = tmp / "work"
    argv = [a.replace("{out}", str(out)).replace("{workdir}", str(workdir)) for a in args]
    cmd = [sys.executable, str(script), *argv]
    with held(lock):  # timed and load read once the lock is ours, not while queueing
        side.loads.append(loadavg())
        print(f"[{utc_now()}] round {rnd} {side.name} ({side.commit}), load {side.loads[-1]}")
        t0 = time.perf_counter()
        proc = subprocess.run(
            cmd, env=side.env(), cwd=script.parent, capture_output=True, text=True
        )
        side.seconds.append(time.perf_counter() - t0)
    sys.stdout.flush()
    if out.exists():
        meta.write_text(f"{side.seconds[-1]:.1f} {side.loads[-1]}", encoding="utf-8")
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        side.failures.append(f"round {rnd}: exit {proc.returncode}: {' / '.join(tail)}")
        print(f"  failed: {side.failures[-1]}", flush=True)
        return
    side.runs.append(out.read_text(encoding="utf-8"))


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"


def comparison(old: Side, new: Side, columns: str | None, rows: str | None) -> list[str]:
    """The markdown table of every figure both sides measured in every round."""
    per_side = [[figures(text, columns, rows) for text in s.runs] for s in (old, new)]
    if not all(per_side):
        return ["No comparison: a side has no successful run."]
    keys = [k for k in per_side[0][0] if all(k in run for runs in per_side for run in runs)]
    lines = [
        "| figure | unit | old (median) | new (median) | new/old | old range | new range | verdict |",
        "|---|---|---:|---:|---:|---|---|---|",
    ]
    for k in keys:
        label, _, unit = per_side[0][0][k]
        vals = [[run[k][1] for run in runs] for runs in per_side]
        (o, n) = (statistics.median(v) for v in vals)
        ratio = f"{n / o:.2f}" if o else "—"
        apart = min(vals[0]) > max(vals[1]) or min(vals[1]) > max(vals[0])
        verdict = "beyond noise" if apart and len(vals[0]) > 1 else "within noise"
        lines.append(
            f"| {label} | {unit} | {_fmt(o)} | {_fmt(n)} | {ratio} | "
            f"{_fmt(min(vals[0]))}–{_fmt(max(vals[0]))} | "
            f"{_fmt(min(vals[1]))}–{_fmt(max(vals[1]))} | {verdict} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", required=True, help="git revision (or WORKTREE)")
    parser.add_argument("--new", default=WORKTREE, help="git revision (default: WORKTREE)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--lock", default=None, help="flock file held by each run (or round)")
    parser.add_argument(
        "--lock-scope",
        choices=("run", "round"),
        default="run",
        help="hold --lock for each run (default) or for each round (old and new back to back)",
    )
    parser.add_argument(
        "--workspace",
        default=None,
        help="directory for the extractions, scripts and reports (default: a temporary one, "
        "deleted unless --keep); an existing one resumes: its extractions and finished runs "
        "are reused",
    )
    parser.add_argument("--columns", default=None, help="regex: column headers to compare")
    parser.add_argument("--rows", default=None, help="regex: row labels to compare")
    parser.add_argument("--shim-old", default=None, help="sitecustomize.py for the old side")
    parser.add_argument("--title", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--out", default="", help="markdown report path ('' to print only)")
    parser.add_argument("script", help="benchmark script (from benchmarks/)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments ({out}, {workdir})")
    args = parser.parse_args(argv)
    if args.args[:1] == ["--"]:
        args.args = args.args[1:]
    bench_args = args.args
    started, load_start, t_start = utc_now(), loadavg(), time.perf_counter()

    if args.workspace:
        tmp, args.keep = Path(args.workspace), True
        tmp.mkdir(parents=True, exist_ok=True)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="lp-compare-"))
    try:
        scripts = tmp / "scripts"  # the current scripts, beside neither library copy
        shutil.copytree(
            REPO / "benchmarks", scripts / "benchmarks", ignore=_no_results, dirs_exist_ok=True
        )
        if (REPO / "demo").is_dir():
            shutil.copytree(REPO / "demo", scripts / "demo", ignore=_no_results, dirs_exist_ok=True)
        script = scripts / "benchmarks" / Path(args.script).name
        old = Side("old", args.old, extract(args.old, tmp / "old"), tmp / "old")
        new = Side("new", args.new, extract(args.new, tmp / "new"), tmp / "new")
        if args.shim_old:
            shutil.copy(args.shim_old, old.lib / "sitecustomize.py")
        for side in (old, new):
            check_import(side, script.parent)
        for rnd in range(args.rounds):
            order = (old, new) if rnd % 2 == 0 else (new, old)
            done = all((tmp / "reports" / f"{s.name}-{rnd + 1}.md").exists() for s in order)
            per_round = args.lock if args.lock_scope == "round" and not done else None
            per_run = args.lock if args.lock_scope == "run" else None
            with held(per_round):
                for side in order:
                    run_once(side, script, bench_args, tmp, rnd + 1, per_run)
            # rewritten after every round, so an interrupted comparison leaves its figures
            text = report(args, argv, old, new, rnd + 1, (started, load_start, t_start))
            write_report(args.out, text)
        print(text)
    finally:
        if args.keep:
            print(f"kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def report(
    args: argparse.Namespace, argv: list[str] | None, old: Side, new: Side, done: int, start: tuple
) -> str:
    """The markdown comparison after ``done`` of ``args.rounds`` rounds."""
    started, load_start, t_start = start
    shown = shlex.join([Path(args.script).name, *args.args])
    title = args.title or f"{Path(args.script).stem}: {old.commit} vs {new.commit}"
    cmd = shlex.join([sys.executable, *(sys.argv if argv is None else [__file__, *argv])])
    lines = header_lines(title, cmd, started, load_start, time.perf_counter() - t_start)
    rounds = f"{done} rounds" if done == args.rounds else f"{done} of {args.rounds} rounds so far"
    lines += [
        f"- old: `{old.rev}` = {old.commit}; new: `{new.rev}` = {new.commit}",
        f"- benchmark (the current script, for both): `{shown}`",
        f"- {rounds}, interleaved old/new (order alternating each round)",
    ]
    for side in (old, new):
        runs = ", ".join(
            f"{s:.0f} s (load {ld})" for s, ld in zip(side.seconds, side.loads, strict=True)
        )
        lines.append(f"- {side.name} runs: {runs}")
    if args.shim_old:
        lines.append(f"- compatibility shim on the old side: `{args.shim_old}`")
    for side in (old, new):
        lines += [f"- {side.name} failed: {f}" for f in side.failures]
    lines += ["", *comparison(old, new, args.columns, args.rows), ""]
    return "\n".join(lines) + "\n"


def _no_results(directory: str, names: list[str]) -> set[str]:
    return {n for n in names if n in ("results", "__pycache__")}


if __name__ == "__main__":
    sys.exit(main())
