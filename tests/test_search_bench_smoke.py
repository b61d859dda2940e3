"""``benchmarks/search_bench.py`` runs end to end at a tiny scale (no timing asserted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_search_bench_runs_at_tiny_scale(tmp_path):
    pytest.importorskip("lancedb")
    out = tmp_path / "search.md"
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "search_bench.py"),
        *("--rows", "2000", "--tenants", "4", "--dim", "16", "--queries", "4"),
        *("--query-tenants", "2", "--min-rows", "100", "--rows-per-list", "250"),
        *("--workdir", str(tmp_path / "work"), "--out", str(out)),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text()
    assert "recall@10" in text and "tenant search" in text and "index build" in text
    assert not (tmp_path / "work").exists()  # the scratch data is removed
