"""Starting a local Spark session set up for this source, and stopping it *including the JVM*.

``spark.stop()`` stops the SparkContext but keeps the JVM (PySpark keeps its
gateway for reuse), so scripts and test runs would leave a ``SparkSubmit``
process behind. ``stop_session`` also shuts the gateway down and closes the
JVM's stdin: PySpark's gateway server exits when its stdin reaches EOF.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from lance_partitioned.errors import UnsupportedFeatureError
from lance_partitioned.spark.extension import CLASSPATH_CONF, EXTENSIONS_CONF, extension_conf

log = logging.getLogger(__name__)

_LOG4J2 = Path(__file__).with_name("log4j2.properties")

DEFAULT_CONF: dict[str, str] = {
    # Without it Spark never calls pushFilters (PySpark 4.3).
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Reusing Python workers made scans about 3x faster (DESIGN §4).
    "spark.python.worker.reuse": "true",
    "spark.sql.adaptive.enabled": "true",
}


def local_session(
    master: str = "local[2]",
    app_name: str = "lance_partitioned",
    *,
    shuffle_partitions: int = 8,
    conf: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
) -> SparkSession:
    """A Spark session with filter pushdown on, workers on this interpreter, the source registered.

    It loads the extension that gives every scan its own read plan
    (``spark.extension``; built with the JDK's ``javac`` on first use), which
    ``pushFilters`` needs. It starts quietly: the driver JVM gets ``log4j2.properties`` beside this module
    (errors only) unless ``conf`` sets ``spark.driver.extraJavaOptions``. The JVM's
    own "Using incubator modules" line, caused by Spark's launcher, remains.
    """
    from lance_partitioned.spark.registration import register

    # Workers must run this interpreter: it is the one with lance_partitioned installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        # everything runs in this JVM: bind to loopback rather than warn that the
        # host name resolves to it
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = dict(DEFAULT_CONF)
    settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    settings.update(conf or {})
    settings.update(_with_extension(settings))
    if "spark.driver.extraJavaOptions" not in settings:
        # read by the launcher before the driver JVM starts (client mode), so the
        # start-up banner and WARN lines are never printed
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={_LOG4J2.as_uri()}"
    for key, value in settings.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # PySpark launches the JVM with Popen(preexec_fn=...), which runs fork
        # hooks: lance's "not fork-safe" warning is moot for a child that execs.
        warnings.filterwarnings("ignore", message="lance is not fork-safe")
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register(spark)
    return spark


def _with_extension(settings: Mapping[str, str]) -> dict[str, str]:
    """The extension's settings merged with ``settings``' own (empty when it cannot be built)."""
    try:
        ext = extension_conf(settings.get(CLASSPATH_CONF))
    except UnsupportedFeatureError as exc:
        log.warning("%s", exc)
        return {}
    listed = [c.strip() for c in settings.get(EXTENSIONS_CONF, "").split(",") if c.strip()]
    if ext[EXTENSIONS_CONF] not in listed:
        listed.append(ext[EXTENSIONS_CONF])
    return {CLASSPATH_CONF: ext[CLASSPATH_CONF], EXTENSIONS_CONF: ",".join(listed)}


def stop_session(spark: SparkSession | None, timeout: float = 30.0) -> None:
    """Stop Spark and make the driver JVM exit, printing nothing; safe to call twice.

    The Python worker daemons go first: Spark's own stop closes the sockets of idle
    workers before it signals their daemon, and a worker that wakes up in between
    reports the closed socket as a ``BrokenPipeError`` traceback on stderr.
    """
    gateway = SparkContext._gateway
    proc: subprocess.Popen | None = getattr(gateway, "proc", None) if gateway else None
    if proc is not None:
        _stop_python_daemons(proc.pid, timeout)
    if spark is not None:
        try:
            spark.stop()
        except Exception:
            pass
    if gateway is None:
        return
    try:
        gateway.shutdown()
    except Exception:
        pass
    if proc is not None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: the gateway server calls System.exit
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
        except Exception:
            pass
    SparkContext._gateway = None
    SparkContext._jvm = None


def _stop_python_daemons(jvm_pid: int, timeout: float) -> None:
    """SIGTERM each ``pyspark.daemon`` the JVM started and wait (at most ``timeout``) until gone.

    On SIGTERM a daemon sends SIGHUP to its process group, which ends its idle
    workers at once, without a word (``pyspark/daemon.py``). Where ``/proc`` is
    missing (not Linux) nothing is done.
    """
    daemons = _python_daemons(jvm_pid)
    for pid in daemons:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while daemons and time.monotonic() < deadline:
        daemons = [pid for pid in daemons if _running(pid)]
        time.sleep(0.02)


def _python_daemons(parent: int) -> list[int]:
    """Pids of the running ``python -m pyspark.daemon`` processes whose parent is ``parent``."""
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []
    found = []
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[1]) != parent or not _running(int(name)):
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
        if b"pyspark.daemon" in argv:
            found.append(int(name))
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (a zombie waiting to be reaped has)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False
