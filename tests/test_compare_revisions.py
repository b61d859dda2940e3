"""``benchmarks/compare_revisions.py``: reading reports back, and one tiny real comparison.

Expected figures are written by hand into small markdown reports; the end-to-end
run checks that each side imports its own extracted package and that the table
names every figure of the script's report. No timing is asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import compare_revisions as cr  # noqa: E402

REPORT = """# Title

- load: 1.0

## plan() latency

| filter | 1 version (ms) | 3 versions (ms) | ratio |
|---|---|---|---|
| `k = 5` | 10.0 | 12.5 | 1.25x |
| `(no filter)` | 1,132.5 | 151.3 | 0.13x |

| Benchmark | Implementation | Time: best (median, n) | Answer |
|---|---|---|---|
| write SF1 | ours | 4.69 s (median 4.81 s, n=2) | answer correct |
| write SF1 | theirs | 250 us (median 300 us) | 0.33M rows/s |
"""


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("10.0", (10.0, "")),
        ("1,132.5", (1132.5, "")),
        ("4.69 s (median 4.81 s, n=2)", (4690.0, "ms")),
        ("250 us (median 300 us)", (0.25, "ms")),
        ("0.33M rows/s", (0.33, "M")),
        ("1.25x", (1.25, "x")),
        ("**0.5** ms", (0.5, "ms")),
        ("answer correct", None),
        ("`k = 5`", None),
        ("", None),
        ("1 of 2000 partitions: new DataFrame + read", None),
        ("12.7 M values/s", (12.7, "M")),
    ],
)
def test_leading_figure(cell, expected):
    assert cr.leading_figure(cell) == expected


def test_figures_are_keyed_by_position_and_labelled_by_text():
    got = cr.figures(REPORT, None, None)
    assert got[(0, 0, 1)] == ("plan() latency: `k = 5` — 1 version (ms)", 10.0, "")
    assert got[(0, 1, 2)] == ("plan() latency: `(no filter)` — 3 versions (ms)", 151.3, "")
    assert got[(1, 0, 2)] == (
        "plan() latency: write SF1 · ours · answer correct — Time: best (median, n)",
        4690.0,
        "ms",
    )
    assert (1, 0, 3) not in got  # "answer correct" is not a figure
    assert got[(1, 1, 3)][1:] == (0.33, "M")
    only = cr.figures(REPORT, r"^Time", r"ours")
    assert list(only) == [(1, 0, 2)]


def test_a_measurement_shown_beside_several_peers_counts_once():
    report = (
        "| Measurement | ours | Compared with | theirs |\n|---|---|---|---|\n"
        "| write | 3.1 s | Parquet | 5.2 s |\n"
        "| write | 3.1 s | counting sink | 1.5 s |\n"
        "| 1 of 2000 partitions: read | 0.23 s | discovery | 8.5 s |\n"
    )
    got = {label: value for label, value, _ in cr.figures(report, None, None).values()}
    assert got == {
        "write · Parquet — ours": 3100.0,
        "write · Parquet — theirs": 5200.0,
        "write · counting sink — theirs": 1500.0,
        "1 of 2000 partitions: read · discovery — ours": 230.0,
        "1 of 2000 partitions: read · discovery — theirs": 8500.0,
    }


def _side(name, reports):
    side = cr.Side(name, name, name, Path("/nonexistent"))
    side.runs = reports
    return side


def test_comparison_medians_ratio_and_noise_verdict():
    def report(ms: float, other: float) -> str:
        return f"| f | a (ms) | b (ms) |\n|---|---|---|\n| x | {ms} | {other} |\n"

    old = _side("old", [report(10, 5), report(12, 6), report(11, 7)])
    new = _side("new", [report(5, 6), report(6, 5), report(7, 8)])
    lines = cr.comparison(old, new, None, None)
    assert lines[2] == "| x — a (ms) |  | 11.0 | 6 | 0.55 | 10.0–12.0 | 5–7 | beyond noise |"
    assert lines[3] == "| x — b (ms) |  | 6 | 6 | 1.00 | 5–7 | 5–8 | within noise |"


def _compare(tmp_path, rounds: int):
    out = tmp_path / "cmp.md"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "compare_revisions.py"),
            "--old",
            "HEAD",
            "--new",
            "WORKTREE",
            "--rounds",
            str(rounds),
            "--workspace",
            str(tmp_path / "ws"),
            "--lock",
            str(tmp_path / "lock"),
            "--lock-scope",
            "round",
            "--columns",
            "version",
            "--out",
            str(out),
            "benchmarks/evolution_bench.py",
            "--",
            "--partitions",
            "20",
            "--rows",
            "2000",
            "--reps",
            "1",
            "--out",
            "{out}",
            "--workdir",
            "{workdir}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out.read_text(encoding="utf-8")


def test_a_real_comparison_at_a_tiny_scale_and_its_resumption(tmp_path):
    """HEAD against the working tree, evolution_bench at 20 partitions: one round, then
    a second one resumed in the same workspace (the first round is not run again)."""
    text = _compare(tmp_path, 1)
    assert "load average (1, 5, 15 min) at start: " in text
    assert "failed" not in text
    for flt in ("`k = 19`", "`k IN (5, 10, 10)`", "`k >= 10`", "`(no filter)`"):
        for col in ("1 version (ms)", "3 versions (ms)"):
            assert f"{flt} — {col}" in text, (flt, col)
    reports = tmp_path / "ws" / "reports"
    first = {p.name: p.stat().st_mtime_ns for p in reports.glob("*-1.md")}
    assert sorted(first) == ["new-1.md", "old-1.md"]
    text = _compare(tmp_path, 2)
    assert {p.name: p.stat().st_mtime_ns for p in reports.glob("*-1.md")} == first
    assert sorted(p.name for p in reports.glob("*.md")) == [
        "new-1.md",
        "new-2.md",
        "old-1.md",
        "old-2.md",
    ]
    assert "- 2 rounds, interleaved" in text
