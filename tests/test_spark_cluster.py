"""Beyond one JVM: a real Spark standalone cluster on loopback writes and reads a namespace.

The test runs this file as a script in a subprocess, because a process holds one
SparkContext and the test session's local one must stay usable. The script starts
a master and two workers (1 core, 1 GiB each) with ``bin/spark-class`` from the
pyspark package, runs a write and reads with executors in their own JVMs, then
stops everything it started by process group. Order relative to other tests does
not matter: nothing is shared but the installed package.
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


def test_standalone_cluster_write_and_read(tmp_path):
    pytest.importorskip("pyspark")
    env = dict(os.environ, LANCE_LOG="error", PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, __file__, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=420,
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
        return int(json.load(r).get("aliveworkers", 0))


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


def run(workdir: str) -> dict:
    from pyspark.sql import SparkSession

    import lance_partitioned as lp
    from lance_partitioned import spark as lps

    # run as a script: conftest (tests/) imports the repository's demo package
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [tests_dir, os.path.dirname(tests_dir)]
    from conftest import make_events

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
    finally:
        if spark is not None:
            lps.stop_session(spark)
        result["pids"] = cluster.stop()
    return result


if __name__ == "__main__":
    os.environ.setdefault("LANCE_LOG", "error")
    # The driver's planning workers (schema, pushdown, write commit) run this interpreter too.
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    out = run(sys.argv[1])
    print("RESULT " + json.dumps(out), flush=True)
