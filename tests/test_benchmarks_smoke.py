"""Benchmarks that cannot rot: every script in ``benchmarks/`` runs, at a tiny scale.

Each script checks its own answers against an independent oracle (pyarrow on the
source Parquet, numpy, row counts from Parquet footers) and exits non-zero when
one is wrong, so "it ran" means "it ran and got its answers right". Timings are
never asserted. The scale and arguments are ``benchmarks/run_all.py``'s
``--smoke`` ones, so ``run_all.py --smoke`` runs exactly what this test runs.

Scripts without Spark run as subprocesses, exactly as the README runs them. The
two Spark scripts run in this test session's Spark (the ``spark`` fixture) so
that no extra JVM starts; a ``--help`` subprocess checks that each still imports
as a script.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402

PLAIN = [name for name in run_all.SCRIPTS if name not in run_all.SPARK_SCRIPTS]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    # one scratch directory for the module: core_bench and fix_experiments share
    # their TPC-H data (run_all.WORKDIR_OF)
    return tmp_path_factory.mktemp("bench")


def _report(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    # every results file records the command, the machine and the load
    assert "- command: `" in text
    assert "CPU: " in text and "nproc: " in text
    assert "load average (1, 5, 15 min) at start: " in text
    return text


@pytest.mark.parametrize("name", PLAIN)
def test_benchmark_script_runs_and_its_answers_are_right(name, workdir):
    out = workdir / "results"
    args = run_all.arguments(name, smoke=True, workdir=workdir, out_dir=out)
    # this checkout's package, whichever one the virtualenv has installed
    env = {**os.environ, "LANCE_LOG": "error", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    text = _report(out / f"{name}.md")
    if name == "core_bench":
        assert "Answer checks (hashes vs pyiceberg-core, rows written, Q6 vs the Parquet" in text
        assert "all passed" in text
        # the peer actually ran (the bench extra is installed): its Q6 was checked too
        assert "pyiceberg = ref" in text
    if name == "evolution_bench":
        assert "Answers checked" in text
    if name == "scale_bench":
        # plans, appends, a commit and counts ran at 50 partitions with their answers checked
        assert "Answers checked (all passed)" in text and "| count(), no filter |" in text
        assert (out / f"{name}.png").stat().st_size > 0  # the plot
    if name == "merge_bench":
        _check_merge_report(text)
    if name == "changes_bench":
        # both feeds returned exactly the row each commit changed, at both sizes
        assert "## Answer checks\n\n- all passed" in text
        assert (
            text.count("| 50 | ") == 3 and "deltalake `load_cdf(v, v)`" in text
        )  # append, delete, update
    if name == "startup_bench":
        # the ratios are reported, not asserted; the script fails when --help breaks or
        # import lance_partitioned loads an optional engine
        assert "| `import lance_partitioned` |" in text and "/ `import lance`: " in text
        assert "Answers checked: all passed" in text
    if name == "s3_bench":
        assert "Answers checked (all passed)" in text
        # the verdicts are reported, not asserted (a measurement, like a time): how many
        # ranged GETs Lance spends on one small __manifest file varies with its caching;
        # that planning opens no leaf is checked by tests/test_s3*.py
        assert "| open + plan: request count independent of the number of partitions |" in text
        assert "| commit: O(touched) requests |" in text


def _check_merge_report(text: str) -> None:
    """merge_bench: every final table matched the oracle, and every contender ran."""
    assert "Correctness checks (row count, distinct o_orderkey, sum(o_totalprice)" in text
    assert ": all passed" in text
    rows = [line for line in text.splitlines() if line.startswith("| merge (upsert)")]
    for peer in ("floor: plain Lance", "deltalake `merge`", "pyiceberg `upsert`"):
        assert any(peer in r and "| correct |" in r for r in rows), (peer, rows)
    import lance_partitioned as lp

    # ns.merge / ns.update: "not available" only while the package has no such method
    for op, prefix in (("merge", "| merge (upsert)"), ("update", "| update ")):
        ours = [r for r in text.splitlines() if r.startswith(prefix) and "lance-partitioned" in r]
        assert len(ours) == (2 if op == "merge" else 4), ours
        want = "| correct |" if hasattr(lp.PartitionedNamespace, op) else "not available"
        assert all(want in r for r in ours), (op, ours)


@pytest.mark.parametrize("name", run_all.SPARK_SCRIPTS)
def test_spark_benchmark_script_imports_as_a_script(name):
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--help"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--workdir" in done.stdout


@pytest.mark.parametrize("name", run_all.SPARK_SCRIPTS)
def test_spark_benchmark_runs_and_its_answers_are_right(name, workdir, spark):
    out = workdir / "results"
    from pyspark import cloudpickle

    module = importlib.import_module(name)
    # the script's data sources (MemorySource, CountingSink) go to the Python workers by
    # value, as they do when the script runs as __main__: workers cannot import benchmarks/
    cloudpickle.register_pickle_by_value(module)
    args = run_all.arguments(name, smoke=True, workdir=workdir, out_dir=out)
    # raises (AssertionError) when an answer is wrong; leaves the session running
    assert module.main(args, spark=spark) == 0
    text = _report(out / f"{name}.md")
    if name == "spark_bench":
        assert "Q6 with pruning" in text and "1 of 20 partitions" in text
        assert "unsplit Lance files, no commit (floor)" in text
        assert "(floor of a partitioned Lance sink)" in text
    if name == "spj_bench":
        assert "checked against lineitem's row count" in text
    if name == "streaming_read_bench":
        # every appended row arrived once, and each commit's latency was measured
        assert "## Answer checks\n\n- all passed" in text
        assert "| 2 | 50 | 4 | processingTime 100 ms |" in text
    if name == "spark_maintenance_bench":
        # both calls ran and got the oracle's rows, fragments and index coverage
        assert "| `lps.compact(spark, root)` on " in text and "| `lps.create_index` on " in text
        assert "**Projection**" in text and "(all passed)" in text
        # the driver section: its phases split apart at 500 bulk-built partitions
        assert "## The driver at 500 partitions" in text and "| plan (lease" in text
        assert "`leaves_compacted` = 500" in text
    if name == "streaming_bench":
        # both sinks ran, their rows checked, and the commit part measured
        assert "| lance_partitioned, spec" in text and "| Spark Parquet file sink" in text
        assert "| 30 |" in text
    if name == "spark_sql_bench":
        # every query's answer on both kinds of views equalled Spark on Parquet's
        assert "all equal" in text and "**WRONG**" not in text
        assert all(f"| Q{n} |" in text for n in (3, 6, 15, 22))
        # the column batches measured against PySpark's row reader, answers equal too
        assert "ours, default options, PySpark's row hand-off" in text
        assert "## Profile of the slowest queries" in text
        # the floor variant ran (answers equal too) and so did the decimal micro-benchmark
        assert "## The floor" in text and "| floor, float64 |" in text


def test_spark_sql_bench_answer_check_catches_differences():
    """The TPC-H benchmark's answer check (no Spark): order-insensitive, decimals exact,
    floats within a relative tolerance, and any other difference reported."""
    from decimal import Decimal

    from spark_sql_bench import difference

    want = [("a", Decimal("1.10"), 2.0), ("b", None, 1e6)]
    assert difference(list(reversed(want)), want) is None
    assert difference([("a", Decimal("1.10"), 2.0 + 1e-12), ("b", None, 1e6)], want) is None
    assert difference(want[:1], want) == "1 rows, Parquet 2"
    assert "row 0" in difference([("a", Decimal("1.11"), 2.0), want[1]], want)
    assert "row 1" in difference([want[0], ("b", None, 1.001e6)], want)
    assert "row 1" in difference([want[0], ("b", Decimal(0), 1e6)], want)


def test_memory_bench_spark_probe_runs_and_its_answers_are_right(tmp_path, spark):
    """``memory_bench.py --spark``'s measurement, in this session's Spark: every task
    reports its peak RSS, and the rows written equal the Parquet file's (pyarrow)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyspark import cloudpickle

    from demo import tpch

    module = importlib.import_module("memory_bench")
    cloudpickle.register_pickle_by_value(module)  # the probe goes to the workers by value
    path = tpch.generate(0.01, str(tmp_path / "tpch"), tables=("lineitem",))["lineitem"]
    got = module.spark_task_peaks(spark, path, tmp_path / "ns", buffer_mib=4)
    table = pq.read_table(path, columns=["l_quantity"])
    assert sum(t["rows"] for t in got["tasks"]) == table.num_rows == got["rows_back"]
    assert got["qty_back"] == str(pc.sum(table["l_quantity"]).as_py())
    assert all(t["peak_rss_mib"] > 0 for t in got["tasks"])


def test_merge_bench_spark_contenders_run_and_their_answers_are_right(workdir, spark):
    """``merge_bench.py --spark`` in this session's Spark: ``lps.merge`` into both
    namespaces and the full Parquet rewrite get the oracle's table, and every Spark
    merge's timing log says where its time went."""
    module = importlib.import_module("merge_bench")
    out = workdir / "results" / "merge_spark.md"
    args = run_all.arguments("merge_bench", smoke=True, workdir=workdir, out_dir=None)
    args += ["--warmup", "0", "--only", "merge", "--spark", "--out", str(out)]
    args += ["--contenders", "spark_year,spark_bucket,spark_rewrite"]
    # raises or returns 1 when an answer is wrong; leaves the session running
    assert module.main(args, spark=spark) == 0
    text = _report(out)
    assert "Correctness checks (row count, distinct o_orderkey" in text and ": all passed" in text
    rows = [line for line in text.splitlines() if line.startswith("| merge (upsert)")]
    assert len(rows) == 3 and all("| correct |" in r for r in rows), rows
    where = text[text.index("## Spark merge: where the time goes") :].splitlines()
    spent = [line for line in where if line.startswith("| Spark local[2]: `lps.merge`")]
    # a row per merge and one per task that had rows, each from its timing log
    assert len(spent) >= 4 and not any("no timing log" in line for line in spent), spent
    assert "| Contender | Task's rows |" in text


def test_scale_build_leaves_of_two_fragments(tmp_path):
    """``scale_build.build(fragments=2)``: every leaf two one-row fragments (k = v = i,
    then k = i, v = -1), a valid namespace; a one-fragment build of the same size
    beside it keeps its own scratch files (neither resumes the other)."""
    import lance
    import pyarrow as pa
    import pyarrow.compute as pc
    import scale_build

    import lance_partitioned as lp

    n = 40
    for fragments in (1, 2):
        root = tmp_path / f"root_f{fragments}"
        assert scale_build.build(root, n, tmp_path / "scratch", fragments=fragments)
        ns = lp.open(str(root))
        assert ns.validate() == []
        assert ns.count() == n * fragments
        leaves = [d for d in root.iterdir() if d.name != "__manifest"]
        assert len(leaves) == n
        for leaf in leaves:
            ds = lance.dataset(str(leaf))
            assert len(ds.get_fragments()) == fragments and ds.version == fragments
        # oracle: pyarrow over every leaf's own rows
        rows = pa.concat_tables([lance.dataset(str(leaf)).to_table() for leaf in leaves])
        k, v = rows["k"], rows["v"]
        assert sorted(pc.filter(k, pc.equal(k, v)).to_pylist()) == list(range(n))
        assert pc.sum(pc.less(v, 0)).as_py() == n * (fragments - 1)
        if fragments == 2:
            assert pc.all(pc.equal(pc.filter(v, pc.less(v, 0)), -1)).as_py()
        scale_build.verify(root)
    names = sorted(p.name for p in (tmp_path / "scratch").glob("state_*"))
    assert names == [f"state_{n}.json", f"state_{n}_f2.json"]


def test_spark_maintenance_bench_driver_section_on_threads(tmp_path):
    """The driver section without Spark (``--driver-stager threads``): it builds, times
    the phases, checks every leaf compacted and writes its table."""
    module = importlib.import_module("spark_maintenance_bench")
    out = tmp_path / "driver.md"
    args = ["--only", "driver", "--driver-partitions", "60", "--driver-stager", "threads"]
    assert module.main([*args, "--workdir", str(tmp_path / "w"), "--out", str(out)]) == 0
    text = _report(out)
    assert "## The driver at 60 partitions" in text and "## Compaction" not in text
    for phase in ("| plan (lease", "| the job (", "| commit (", "| `__manifest`'s own", "| total"):
        assert phase in text
    assert "`leaves_compacted` = 60" in text and "(all passed)" in text
