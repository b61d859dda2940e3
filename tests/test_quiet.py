"""Normal use prints nothing the user did not ask for (issue 10 item 18).

Each check runs in a fresh interpreter and reads its stdout and stderr whole, so
output written by Rust (Lance's log), by the JVM or by Python warnings is seen at
the file-descriptor level. ``LANCE_LOG``/``RUST_LOG`` are removed from the child's
environment so Lance logs at its own default level.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_quietly(code: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("LANCE_LOG", "RUST_LOG")}
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


CORE = """
    import sys
    import pyarrow as pa
    import lance_partitioned as lp

    root = sys.argv[1]
    schema = pa.schema([("k", pa.int64()), ("d", pa.date32()), ("v", pa.string())])
    ns = lp.create(root, schema, "k, year(d)")
    t = pa.table({"k": [i % 12 for i in range(60)],
                  "d": pa.array([i * 40 for i in range(60)], pa.date32()),
                  "v": [str(i) for i in range(60)]})
    ns.append(t)                                   # many new partitions
    ns.append(t.slice(0, 10), max_buffer_bytes=1)  # existing ones, several flushes
    ns.overwrite(t.slice(0, 5), dynamic=True)
    assert ns.scan("k = 3").count() > 0
    assert ns.to_arrow().num_rows == ns.count()
    ns.delete("k = 4")
    ns.evolve_spec("k")
    ns.append(t.slice(20, 5))
    ns.describe()
    lp.open(root).scan("d >= '1971-01-01'").to_arrow()
"""


def test_append_and_scan_print_nothing(tmp_path):
    # used to print one Lance "WARN ... No existing dataset at ..., it will be
    # created" line per new partition
    proc = run_quietly(CORE, str(tmp_path / "ns"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == ""


def test_pyspark_does_not_warn_about_our_pandas():
    pytest.importorskip("pyspark")
    # PySpark 4.3 warns (FutureWarning) on every session start with pandas >= 3
    proc = run_quietly(
        """
        import warnings
        warnings.simplefilter("error")
        from pyspark.sql.pandas.utils import require_minimum_pandas_version
        require_minimum_pandas_version()
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""


SPARK = """
    import sys
    from lance_partitioned import spark as lps

    root = sys.argv[1]
    spark = lps.local_session()
    try:
        df = spark.createDataFrame([(i, f"c{i % 3}") for i in range(30)], "id long, c string")
        df.write.format("lance_partitioned").option("spec", "c").mode("append").save(root)
        assert spark.read.format("lance_partitioned").load(root).count() == 30
    finally:
        lps.stop_session(spark)
"""

# Printed by the JVM itself because Spark's launcher adds jdk.incubator.vector;
# no JVM option turns it off.
JVM_OWN = "WARNING: Using incubator modules: jdk.incubator.vector"


def test_spark_session_prints_nothing(tmp_path):
    pytest.importorskip("pyspark")
    proc = run_quietly(SPARK, str(tmp_path / "ns"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert [line for line in proc.stderr.splitlines() if line != JVM_OWN] == []
