"""`make demo`: a light install, and a closing that says what to try next.

The three commands the demo prints are run here as printed, in a shell, on a
lineitem namespace written with the core API; their answers are checked against
pyarrow on the TPC-H Parquet they came from.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pytest

from demo import pipeline

REPO = Path(__file__).resolve().parents[1]
JVM_OWN = "WARNING: Using incubator modules: jdk.incubator.vector"


def _extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]


def test_the_demo_extras_pin_what_dev_pins():
    extras = _extras()
    dev = set(extras["dev"])
    for name in ("spark", "demo", "demo-s3"):
        assert set(extras[name]) <= dev, name


def test_make_demo_installs_the_demo_extras_not_the_development_stack(tmp_path):
    # `make demo` used to install '.[dev]': pyiceberg, lancedb, scikit-learn, moto, ...
    def planned(*args: str) -> str:
        venv = tmp_path / "venv"  # not there: make plans every step
        done = subprocess.run(
            ["make", "-n", "-C", str(REPO), f"VENV={venv}", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    local = planned("demo")
    assert "pip install -e '.[spark,demo]'" in local
    assert "[dev" not in local and "demo-s3" not in local
    assert "--quiet -e" not in local  # pip shows its progress
    on_s3 = planned("demo", "STORAGE=s3")
    assert "pip install -e '.[spark,demo,demo-s3]'" in on_s3 and "[dev" not in on_s3
    assert "pip install -e '.[dev]'" in planned("test")


def test_each_query_in_the_summary_says_where_its_time_goes(capsys):
    summary = {
        "queries": {
            name: {
                "rows": 1,
                "seconds": 2.0,
                "parquet_seconds": 1.0,
                "matches_parquet": True,
                "scans": [],
            }
            for name in pipeline.QUERIES
        }
    }
    pipeline._print_summary(summary, pipeline.Steps(1))
    out = capsys.readouterr().out.splitlines()
    for name in pipeline.QUERIES:
        at = next(i for i, line in enumerate(out) if line.strip().startswith(f"{name} "))
        why = out[at + 1].strip()
        assert why == pipeline.WHY[name]
        assert "pushFilters" in why or "read_arrow" in why, why
    for source in re.findall(r"benchmarks/results/\S+\.md", pipeline.WHY_SOURCE):
        assert (REPO / source).exists(), source


@pytest.fixture(scope="module")
def lineitem_ns(tpch_dir, tmp_path_factory):
    """The demo's lineitem namespace (its spec), written with the core API."""
    import lance_partitioned as lp
    from demo import tpch

    table = tpch.read(os.path.join(tpch_dir, "lineitem.parquet"))
    base = tmp_path_factory.mktemp("demo")
    lp.create(str(base / "namespaces" / "lineitem"), table.schema, pipeline.LINEITEM_SPEC).append(
        table
    )
    return base, table


def _run(command: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LANCE_LOG", "RUST_LOG")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return subprocess.run(
        command, shell=True, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout
    )


def _commands(base: Path) -> list[str]:
    roots = {t: str(base / "namespaces" / t) for t in ("lineitem", "orders")}
    cwd = os.getcwd()
    os.chdir(base)  # the demo prints them for its own directory
    try:
        return pipeline.next_commands(roots, sys.executable)
    finally:
        os.chdir(cwd)


def test_the_printed_describe_and_python_scan_run_as_printed(lineitem_ns):
    base, table = lineitem_ns
    describe, scan, _ = _commands(base)
    assert "namespaces/lineitem" in describe and not os.path.isabs(describe.split()[-1])

    done = _run(describe, base)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    months = pc.strftime(table["l_shipdate"], "%Y-%m")
    assert f"Partitions: {len(pc.unique(months))}, {table.num_rows:,} rows" in done.stdout

    done = _run(scan, base)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    march = pc.and_(
        pc.greater_equal(table["l_shipdate"], dt.date(1995, 3, 1)),
        pc.less(table["l_shipdate"], dt.date(1995, 4, 1)),
    )
    want = pc.sum(march.cast("int64")).as_py()
    assert done.stdout.splitlines()[-1] == f"{want} rows"
    assert "partitions: 1 of " in done.stdout, done.stdout  # one month read


def test_the_printed_spark_sql_query_runs_as_printed(lineitem_ns):
    pytest.importorskip("pyspark")
    base, table = lineitem_ns
    *_, sql = _commands(base)
    done = _run(sql, base)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if line != JVM_OWN] == []
    late = table.filter(pc.greater_equal(table["l_shipdate"], dt.date(1997, 1, 1)))
    years = pc.year(late["l_shipdate"])
    counts = pc.value_counts(years).to_pylist()
    assert len(counts) == 2  # 1997 and 1998
    for item in counts:
        assert re.search(rf"\|\s*{item['values']}\s*\|\s*{item['counts']}\s*\|", done.stdout), (
            done.stdout
        )
