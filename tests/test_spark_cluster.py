"""Beyond one JVM: a real Spark standalone cluster on loopback writes and reads namespaces,
on local disk and on the S3 server (moto) of the test session.

The test runs this file as a script in a subprocess, because a process holds one
SparkContext and the test session's local one must stay usable. The script starts
a master and two workers (1 core, 1 GiB each) with ``bin/spark-class`` from the
pyspark package, runs a write and reads with executors in their own JVMs, a merge and a compaction
(``lps.compact`` against ``ns.compact`` on a copy), then on
S3 (credentials only as ``storage.<key>`` options: the cluster's processes have no
AWS environment) a write, a pruned read and a storage partitioned join; then the
other distributed maintenance calls (``lps.create_index`` + ``lps.optimize_indexes``,
``lps.rewrite_partitions``, ``lps.vacuum`` + ``lps.cleanup``) against the
single-machine calls, and a compaction and a partition rewrite whose task's Python
worker dies mid-way (Spark retries it: every attempt dies) publishing nothing, on local
disk and on S3 (``maintenance_checks``, the checks of ``test_spark_maintenance.py``),
and the TPC-H pipeline of ``make demo``; then it stops everything it started by process
group. Order relative to other tests does not matter: nothing is shared but the
installed package and the S3 server's endpoint.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

AWS_ENV_PREFIXES = ("AWS_",)


def test_standalone_cluster_write_and_read(tmp_path, s3_server):
    pytest.importorskip("pyspark")
    env = {k: v for k, v in os.environ.items() if not k.startswith(AWS_ENV_PREFIXES)}
    env.update(LANCE_LOG="error", PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, __file__, str(tmp_path), s3_server.endpoint],
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"cluster script failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["executors"] == 2
    # tasks ran in executor JVMs started by the workers, not in the driver
    assert result["task_dirs"] and all(
        d.startswith(os.path.join(result["workdir"], "worker")) for d in result["task_dirs"]
    )
    assert result["written"] == result["expected"] == result["read"]
    assert result["filtered"] == result["filtered_expected"] > 0
    assert result["partitions_scanned"] < result["partitions_total"]
    # the executors read column batches (the jar in spark.jars), the same rows
    columnar = result["columnar"]
    assert columnar["plan"] and columnar["rows"] == result["expected"]
    assert columnar["sum"] == pytest.approx(columnar["expected_sum"], rel=1e-9)
    # a merge run by the executors: the rows equal the Python oracle's
    merged = result["merge"]
    assert (merged["updated"], merged["inserted"]) == (50, 30)
    assert merged["rows_equal"] and merged["problems"] == []
    # compaction by the executors equals ns.compact on a copy of the namespace
    compacted = result["compact"]
    assert compacted["compacted"] == compacted["single"] and compacted["compacted"][0] > 0
    assert compacted["fewer_fragments"] and compacted["fragments_equal"]
    assert compacted["rows_equal"] and compacted["problems"] == []
    # the other maintenance calls by the executors equal the single-machine calls, on local
    # disk and on S3 (the comparisons of test_spark_maintenance.py)
    # ... and a compaction or partition rewrite whose task's Python worker dies (every
    # retry too) publishes nothing, and vacuum removes what it left
    checks = ["index", "rewrite_partitions", "cleanup_and_vacuum"]
    ok = dict.fromkeys([*checks, "failed_compaction", "failed_rewrite"], "ok")
    failed = {
        f"{where}/{name}": trace
        for where, checks_run in result["maintenance"].items()
        for name, trace in checks_run.items()
        if trace != "ok"
    }
    assert result["maintenance"] == {"local": ok, "s3": ok}, "\n".join(
        f"{name}:\n{trace}" for name, trace in failed.items()
    )
    # on S3, through the executors, with storage.<key> options only
    s3 = result["s3"]
    assert s3["executor_aws_env"] == []
    assert s3["written"] == s3["expected"] == s3["read"]
    assert s3["filtered"] == s3["filtered_expected"] > 0
    assert s3["partitions_scanned"] < s3["partitions_total"]
    assert s3["join_rows"] == s3["join_expected"] > 0 and not s3["join_exchange"]
    pipe = result["pipeline"]
    assert pipe["queries"] and all(q["matches_parquet"] for q in pipe["queries"].values())
    assert pipe["append"]["count_ok"] and pipe["jvm_stopped"]
    for pid in result["pids"]:
        assert not os.path.exists(f"/proc/{pid}"), f"process {pid} of the cluster is still running"


# -- the script -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


def _alive_workers(ui_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        body = r.read()
    try:
        return int(json.loads(body).get("aliveworkers", 0))
    except ValueError:  # a master still starting answers with an empty or partial page
        return 0


class Cluster:
    """A master and workers started with spark-class; stopped by killing their process groups."""

    def __init__(self, workdir: str, workers: int = 2):
        import pyspark

        self.spark_home = os.path.dirname(pyspark.__file__)
        self.workdir = workdir
        self.n_workers = workers
        self.procs: list[subprocess.Popen] = []
        self.master_port = _free_port()
        self.ui_port = _free_port()
        self.env = dict(
            os.environ,
            SPARK_HOME=self.spark_home,
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=os.path.join(workdir, "logs"),
            PYSPARK_PYTHON=sys.executable,
        )

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _start(self, name: str, args: list[str]) -> None:
        log = open(os.path.join(self.workdir, f"{name}.log"), "wb")  # noqa: SIM115 (lives with the process)
        cmd = [os.path.join(self.spark_home, "bin", "spark-class"), *args]
        # A session of its own: the process group then holds executor JVMs too.
        self.procs.append(
            subprocess.Popen(
                cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )

    def start(self) -> None:
        self._start(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.ui_port),
            ],
        )
        _wait(
            lambda: (
                socket.create_connection(("127.0.0.1", self.master_port), timeout=1).close() is None
            ),
            120,
            "the master",
        )
        for i in range(self.n_workers):
            work = os.path.join(self.workdir, f"worker{i}")
            os.makedirs(work, exist_ok=True)
            self._start(
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host", "127.0.0.1",
                    "--port", str(_free_port()),
                    "--webui-port", str(_free_port()),
                    "--cores", "1",
                    "--memory", "1g",
                    "--work-dir", work,
                    self.url,
                ],
            )  # fmt: skip
        _wait(lambda: _alive_workers(self.ui_port) == self.n_workers, 120, "two workers")

    def stop(self) -> list[int]:
        """Kill every process group this cluster started (workers first); returns their pids."""
        for p in reversed(self.procs):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=20)
                    break
                except subprocess.TimeoutExpired:
                    continue
        # Executor JVMs live in their worker's group: make sure none survived.
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return [p.pid for p in self.procs]


def run_s3(spark, endpoint: str, workdir: str) -> dict:
    """A write, a pruned read and a storage partitioned join on S3, through the executors."""
    import boto3
    import pyarrow as pa
    from conftest import EVENTS_SCHEMA, make_events

    import lance_partitioned as lp
    from demo.s3_server import ACCESS_KEY, REGION, SECRET_KEY, options_for
    from lance_partitioned import spark as lps
    from lance_partitioned.spark.storage_partitioned_join import executed_plan

    opts = options_for(endpoint)
    spark_opts = {f"storage.{k}": v for k, v in opts.items()}
    boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
    ).create_bucket(Bucket="lp-cluster")
    root = "s3://lp-cluster/events"
    data = make_events(400)
    df = spark.createDataFrame(
        data.to_pandas(),
        schema="id long, event_date date, country string, ts timestamp, amount double",
    ).repartition(4)
    df.write.format("lance_partitioned").options(**spark_opts).option(
        "spec", "year(event_date), country"
    ).mode("append").save(root)
    env = (
        spark.sparkContext.parallelize(range(4), 4)
        .map(lambda _: sorted(k for k in os.environ if k.startswith("AWS_")))
        .collect()
    )
    log = os.path.join(workdir, "scans-s3.jsonl")
    reader = spark.read.format("lance_partitioned").options(**spark_opts)
    filtered = (
        reader.option("pushFilters", "true")
        .option("scanLog", log)
        .option("minPartitions", "4")
        .load(root)
        .where("event_date >= date'2026-01-01' AND country = 'US'")
        .count()
    )
    entry = lps.read_scan_log(log)[-1]
    ns = lp.open(root, storage_options=opts)
    # storage partitioned join: the same rows bucketed two ways, joined on id
    left = lp.create("s3://lp-cluster/left", EVENTS_SCHEMA, "bucket(4, id)", opts)
    left.append(data)
    right = lp.create("s3://lp-cluster/right", EVENTS_SCHEMA, "bucket(8, id)", opts)
    right.append(data.filter(pa.compute.less(data["id"], 250)))
    joined = lps.join(spark, left, right, "id", suffixes=("_l", "_r"), require_spj=True)
    return {
        "executor_aws_env": sorted({k for keys in env for k in keys}),
        "expected": data.num_rows,
        "written": ns.count(),
        "read": reader.load(root).count(),
        "filtered": filtered,
        "filtered_expected": ns.count("event_date >= '2026-01-01' AND country = 'US'"),
        "partitions_scanned": entry["partitions_scanned"],
        "partitions_total": entry["partitions_total"],
        "join_rows": joined.count(),
        "join_expected": int(pa.compute.sum(pa.compute.less(data["id"], 250)).as_py()),
        "join_exchange": "Exchange" in executed_plan(joined),
    }


def run_merge(spark, root: str, data) -> dict:
    """``lps.merge`` on the cluster: the first 50 ids get a new amount (a fifth of them a
    new country, so they move partition), 30 new ids are inserted. The expected rows
    come from the source rows changed in plain Python."""
    import lance_partitioned as lp
    from lance_partitioned import spark as lps

    rows = {r["id"]: dict(r) for r in data.to_pylist()}
    changes = []
    for i in range(50):
        row = dict(rows[i], amount=1000.0 + i)
        if i % 5 == 0:
            row["country"] = "NZ"
        changes.append(row)
    for i in range(30):
        changes.append(dict(rows[i], id=10_000 + i, amount=-1.0))
    expected = dict(rows)
    expected.update({c["id"]: c for c in changes})
    source = spark.createDataFrame(
        changes, schema="id long, event_date date, country string, ts timestamp, amount double"
    )
    result = (
        lps.merge(spark, source, root, on="id", tasks=4)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    got = lp.open(root).to_arrow(columns=["id", "country", "amount"]).to_pylist()
    want = [{"id": k, "country": v["country"], "amount": v["amount"]} for k, v in expected.items()]
    return {
        "updated": result.rows_updated,
        "inserted": result.rows_inserted,
        "rows_equal": sorted(map(str, got)) == sorted(map(str, want)),
        "problems": lp.open(root).validate(),
    }


def run_maintenance(spark, base: str, opts: dict[str, str] | None) -> dict:
    """The comparisons of ``test_spark_maintenance.py`` (``maintenance_checks``) with the
    cluster's executors doing the work, under ``base``: per check "ok" or its traceback."""
    import traceback

    import maintenance_checks as checks

    out = {}
    for check in (
        checks.check_index,
        checks.check_rewrite_partitions,
        checks.check_cleanup_and_vacuum,
        checks.check_failed_compaction,
        checks.check_failed_rewrite,
    ):
        name = check.__name__.removeprefix("check_")
        try:
            check(spark, (f"{base}/{name}-a", f"{base}/{name}-b"), opts)
            out[name] = "ok"
        except Exception:
            out[name] = traceback.format_exc()
    return out


def run_compact(spark, root: str, workdir: str) -> dict:
    """``lps.compact`` on the cluster (the merge left small fragments) against
    ``ns.compact`` on a copy of the namespace: the same rows, fragments and report."""
    import shutil

    from maintenance_checks import fragments as of

    import lance_partitioned as lp
    from lance_partitioned import spark as lps

    copy = os.path.join(workdir, "events-copy")
    shutil.copytree(root, copy)

    def fragments(path: str) -> dict:
        return of(lp.open(path))

    def rows(path: str) -> list:
        return lp.open(path).to_arrow().sort_by("id").to_pylist()

    before = fragments(root)
    spark_report = lps.compact(spark, root, tasks=4)
    single = lp.open(copy).compact()
    return {
        "compacted": (spark_report.leaves_compacted, spark_report.fragments_rewritten),
        "single": (single.leaves_compacted, single.fragments_rewritten),
        "fewer_fragments": sum(fragments(root).values()) < sum(before.values()),
        "fragments_equal": fragments(root) == fragments(copy),
        "rows_equal": rows(root) == rows(copy),
        "problems": lp.open(root).validate() + lp.open(copy).validate(),
    }


def run(workdir: str, endpoint: str) -> dict:
    import pyarrow.compute as pc
    from pyspark.sql import SparkSession

    import lance_partitioned as lp
    from lance_partitioned import spark as lps
    from lance_partitioned.spark.extension import extension_jar

    # run as a script: conftest (tests/) imports the repository's demo package
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [tests_dir, os.path.dirname(tests_dir)]
    from conftest import make_events

    from demo.s3_server import options_for

    cluster = Cluster(workdir)
    spark = None
    result: dict = {}
    try:
        cluster.start()
        spark = (
            SparkSession.builder.master(cluster.url)
            .appName("lance_partitioned-cluster-test")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", "512m")
            .config("spark.cores.max", "2")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.executorEnv.LANCE_LOG", "error")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            # the extension pushFilters needs (each scan its own read plan)
            .config(map=lps.extension_conf())
            # ... and on the executors, for its column-batch reader
            .config("spark.jars", str(extension_jar()))
            .getOrCreate()
        )
        lps.register(spark)
        sc = spark.sparkContext
        _wait(lambda: sc._jsc.sc().getExecutorMemoryStatus().size() >= 3, 120, "two executors")
        root = os.path.join(workdir, "events")
        data = make_events(400)
        df = spark.createDataFrame(
            data.to_pandas(),
            schema="id long, event_date date, country string, ts timestamp, amount double",
        ).repartition(4)
        df.write.format("lance_partitioned").option("spec", "year(event_date), country").mode(
            "append"
        ).save(root)
        cond = "event_date >= '2026-01-01' AND country = 'US'"
        log = os.path.join(workdir, "scans.jsonl")
        filtered = (
            spark.read.format("lance_partitioned")
            .option("pushFilters", "true")
            .option("scanLog", log)
            .option("minPartitions", "4")
            .load(root)
            .where("event_date >= date'2026-01-01' AND country = 'US'")
        )
        hosts = (
            spark.read.format("lance_partitioned").option("minPartitions", "4").load(root)
            .rdd.mapPartitions(lambda _: [os.getcwd()])  # an executor runs in <worker dir>/<app>/<id>
            .collect()
        )  # fmt: skip
        entry_count = filtered.count()
        entry = lps.read_scan_log(log)[-1]
        ns = lp.open(root)
        result = {
            "executors": sc._jsc.sc().getExecutorMemoryStatus().size() - 1,
            "task_dirs": sorted(set(hosts)),
            "workdir": workdir,
            "expected": data.num_rows,
            "written": ns.count(),
            "read": spark.read.format("lance_partitioned").load(root).count(),
            "filtered": entry_count,
            "filtered_expected": ns.count(cond),
            "partitions_scanned": entry["partitions_scanned"],
            "partitions_total": entry["partitions_total"],
        }
        whole = spark.read.format("lance_partitioned").load(root)
        totals = whole.selectExpr("sum(amount) AS s", "count(*) AS n")
        got = totals.collect()[0]
        result["columnar"] = {
            "plan": "ColumnarToRow" in totals._jdf.queryExecution().executedPlan().toString(),
            "sum": got["s"],
            "rows": got["n"],
            "expected_sum": pc.sum(data["amount"]).as_py(),
        }
        result["merge"] = run_merge(spark, root, data)
        result["compact"] = run_compact(spark, root, workdir)
        result["s3"] = run_s3(spark, endpoint, workdir)
        result["maintenance"] = {
            "local": run_maintenance(spark, os.path.join(workdir, "maintenance"), None),
            "s3": run_maintenance(spark, "s3://lp-cluster/maintenance", options_for(endpoint)),
        }
        lps.stop_session(spark)
        spark = None
        # the TPC-H pipeline of `make demo STORAGE=s3`, on the cluster
        from demo import pipeline

        result["pipeline"] = pipeline.run(
            0.01,
            os.path.join(workdir, "pipeline"),
            master=cluster.url,
            ns_base="s3://lp-cluster/tpch",
            storage_options=options_for(endpoint),
        )
    finally:
        if spark is not None:
            lps.stop_session(spark)
        result["pids"] = cluster.stop()
    return result


if __name__ == "__main__":
    os.environ.setdefault("LANCE_LOG", "error")
    # The driver's planning workers (schema, pushdown, write commit) run this interpreter too.
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # the pipeline's driver, on loopback too
    out = run(sys.argv[1], sys.argv[2])
    print("RESULT " + json.dumps(out), flush=True)
