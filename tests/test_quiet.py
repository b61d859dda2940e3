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


# The refusals docs/SPARK.md names (a NULL in a non-null column, found by a write
# task; a column the namespace lacks, found while planning; a CREATE TABLE ... AS
# SELECT without a spec), each caught and reported in one line, then stop_session.
# Spark's stop is wrapped to list, with `ps`, the Python worker daemons still running
# under the JVM at that moment.
SPARK_REFUSED = """
    import re
    import subprocess
    import sys
    import pyarrow as pa
    from pyspark import SparkContext
    import lance_partitioned as lp
    from lance_partitioned import spark as lps

    root = sys.argv[1]
    lp.create(root, pa.schema([pa.field("id", pa.int64(), nullable=False), ("c", pa.string())]), "c")
    spark = lps.local_session()
    jvm = SparkContext._gateway.proc.pid
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, c string").write.format(
        "lance_partitioned").mode("append").save(root)
    assert spark.read.format("lance_partitioned").load(root).count() == 2
    attempts = [
        lambda: spark.createDataFrame([(None, "a")], "id long, c string").write.format(
            "lance_partitioned").mode("append").save(root),
        lambda: spark.createDataFrame([(3, "a", 1.0)], "id long, c string, z double").write.format(
            "lance_partitioned").mode("append").save(root),
        lambda: spark.sql("CREATE TABLE t USING lance_partitioned AS SELECT 1L AS id, 'x' AS c"),
    ]
    for attempt in attempts:
        try:
            attempt()
        except Exception as exc:
            line = next(x for x in str(exc).splitlines() if re.search(r"(Schema|Spec)Error: ", x))
            print("refused:", re.split(r"(?:Schema|Spec)Error: ", line, maxsplit=1)[1],
                  file=sys.stderr, flush=True)
        else:
            raise AssertionError("not refused")
    assert lp.open(root).count() == 2

    stop = spark.stop
    def checked_stop():
        ps = subprocess.run(["ps", "--ppid", str(jvm), "-o", "args="], capture_output=True, text=True)
        print(sum("pyspark.daemon" in a for a in ps.stdout.splitlines()))
        stop()
    spark.stop = checked_stop
    lps.stop_session(spark)
"""


@pytest.fixture(scope="module")
def refused_writes(tmp_path_factory):
    pytest.importorskip("pyspark")
    return run_quietly(SPARK_REFUSED, str(tmp_path_factory.mktemp("refused") / "ns"))


def test_a_refused_spark_write_prints_one_error_not_a_java_stack(refused_writes):
    # each used to print Spark's own log of the failure: ~175 lines of Java and Python
    # stack for the task's NULL, ~100 for the CTAS
    assert refused_writes.returncode == 0, refused_writes.stderr[-3000:]
    lines = [line for line in refused_writes.stderr.splitlines() if line != JVM_OWN]
    assert lines == [
        "refused: column 'id' is not nullable but the input has 1 NULL value(s)",
        lines[1],
        lines[2],
    ], refused_writes.stderr[-3000:]
    assert lines[1].startswith("refused: input has column(s) ['z']")
    # a CTAS creates a managed table (docs/SPARK.md "SQL statements"): with no spec given,
    # its first write is refused
    assert lines[2].startswith("refused: ") and '.option("spec", "")' in lines[2]


def test_stop_session_ends_the_python_workers_before_spark_stops(refused_writes):
    # Spark's stop closes idle workers' sockets before it signals their daemon: a
    # worker that woke up in between printed a BrokenPipeError traceback
    assert refused_writes.returncode == 0, refused_writes.stderr[-3000:]
    assert refused_writes.stdout == "0\n"


# Search of every kind, index builds (an IVF asked for more lists than a leaf's vectors
# can train: Lance warns) and maintenance, as docs/SEARCH.md and the README show them.
SEARCH = """
    import datetime as dt
    import sys

    if sys.argv[2] == "lance-first":
        import lance  # noqa: F401 (Lance's logger starts at its default level)
    import numpy as np
    import pyarrow as pa
    import lance_partitioned as lp

    rng = np.random.default_rng(0)
    dim, n = 8, 3000
    schema = pa.schema([("id", pa.int64()), ("tenant", pa.string()), ("body", pa.string()),
                        ("embedding", pa.list_(pa.float32(), dim))])
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    words = "invoice refund shipping delay broken screen battery".split()
    table = pa.table({
        "id": np.arange(n), "tenant": [["a", "b", "c"][i % 3] for i in range(n)],
        "body": [" ".join(rng.choice(words, 4)) for _ in range(n)],
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
    }, schema=schema)
    ns = lp.create(sys.argv[1], schema, "tenant")
    ns.append(table)
    lists = 2 if sys.argv[2] == "lance-first" else 4  # 4: more than 1000 vectors train
    ns.create_index("embedding", "IVF_PQ", num_partitions=lists, num_sub_vectors=2, min_rows=500)
    ns.create_index("body", "INVERTED")
    ns.create_index("id", "BTREE")
    q = vectors[7]
    ns.search(q, k=5, filter="tenant = 'b'", columns=["id", "body"], nprobes=2)
    ns.search(vectors[:3], k=2, columns=["id"])
    ns.search(q, k=5)
    ns.search("broken battery", k=5, query_type="fts", columns=["id", "body"])
    ns.search((q, "refund"), k=5, query_type="hybrid", columns=["id"])
    ns.append(table.slice(0, 30))
    ns.optimize_indexes()
    ns.compact()
    ns.cleanup(older_than=dt.timedelta(0))
    ns.vacuum()
    ns.validate()
    ns.search("refund", k=3, query_type="fts", columns=["id"])
"""


def test_search_index_builds_and_maintenance_print_nothing(tmp_path):
    # Lance printed a deprecation WARN per partition on every full-text, hybrid and
    # projected vector search, and IVF training WARNs while indexes were built
    proc = run_quietly(SEARCH, str(tmp_path / "ns"), "default")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == ""


def test_searches_warn_nothing_when_lance_was_imported_first(tmp_path):
    # LANCE_LOG comes too late then (Lance's logger has started at its default level,
    # WARN): our searches must not cause Lance's deprecation warnings themselves
    proc = run_quietly(SEARCH, str(tmp_path / "ns"), "lance-first")
    assert proc.returncode == 0, proc.stderr
    assert "WARN" not in proc.stderr, proc.stderr[-3000:]


def test_a_lance_log_level_the_user_set_is_kept(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env.update(LANCE_LOG="warn", PYTHONPATH=REPO)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SEARCH), str(tmp_path / "ns"), "default"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "WARN  lance::index::vector] Build Vector Index: training 3 of the 4" in done.stderr
