"""Temporary views see the writes made through them.

PySpark 4.3 keeps a Python source's planned read (its partitions and read
function) on the relation's ``PythonDataSourceV2`` and reuses it for every later
query that has no pushable filter. A temporary view holds one relation, so after
``INSERT INTO v ...`` a ``SELECT count(*) FROM v`` read the snapshot planned
before the insert (200 rows where storage held 400). No Python code runs for a
reused plan, so the reader cannot notice. Spark's own file sources refresh the
relation they write to; this module does the same for ours:

- ``install(spark)`` (called by ``register``) starts a small hook in the driver
  process: a thread serving a loopback socket, announced with a secret token in a
  file only this user can read, under the temp directory;
- the sink's ``commit``, which runs in a Python worker on the driver host, calls
  every live hook once the write is published, and waits for the answer
  (``notify_drivers``), so the write returns only after the hook ran;
- the hook drops the cached read plan of every ``lance_partitioned`` relation
  held by a temporary view (local or global) of its registered sessions, over
  py4j, so the next query over them plans again against the latest version.

``refresh(spark)`` does the same on demand, for writes made outside Spark. A
DataFrame from ``spark.read...load()`` is not a view and keeps its snapshot.
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import hmac
import json
import logging
import os
import secrets
import socket
import socketserver
import tempfile
import threading
import weakref
from pathlib import Path

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SOURCE_NAME = "lance_partitioned"
_PYTHON_TABLE = "org.apache.spark.sql.execution.datasources.v2.python.PythonTable"


def hook_dir() -> Path:
    """Where driver hooks announce themselves: private to this user."""
    return Path(tempfile.gettempdir()) / f"lance_partitioned-{getpass.getuser()}" / "spark-hooks"


def _scala_seq(seq) -> list:
    return [seq.apply(i) for i in range(seq.size())]


def _views(spark: SparkSession) -> list:
    """The plans of every temporary view of ``spark`` (local and global)."""
    catalog = spark._jsparkSession.sessionState().catalog()
    plans = []
    for name in _scala_seq(catalog.getTempViewNames()):
        view = catalog.getTempView(name)
        if view.isDefined():
            plans.append(view.get())
    glob = catalog.globalTempViewManager()
    for name in _scala_seq(glob.listViewNames("*")):
        view = catalog.getGlobalTempView(name)
        if view.isDefined():
            plans.append(view.get())
    return plans


def _python_table_class(table):
    """PySpark's ``PythonTable`` class when ``table`` is one (or, as the extension's
    tables are, a subclass of it), else None."""
    cls = table.getClass()
    while cls is not None:
        if cls.getName() == _PYTHON_TABLE:
            return cls
        cls = cls.getSuperclass()
    return None


def refresh(spark: SparkSession) -> int:
    """Drop the cached read plans of this session's ``lance_partitioned`` views.

    The next query over each view plans again against the latest ``__manifest``
    version. Writes through Spark do this by themselves; call it after writing
    with the core API or from another process. Returns how many relations were
    reset (views sharing one relation count once).
    """
    seen: set[int] = set()
    for plan in _views(spark):
        for leaf in _scala_seq(plan.collectLeaves()):
            if not leaf.getClass().getName().endswith("DataSourceV2Relation"):
                continue
            table = leaf.table()
            python_table = _python_table_class(table)
            if python_table is None or table.name() != SOURCE_NAME:
                continue
            field = python_table.getDeclaredField("ds")
            field.setAccessible(True)
            provider = field.get(table)
            provider.setReadInfo(None)  # getOrCreateReadInfo plans again when null
            seen.add(spark._jvm.java.lang.System.identityHashCode(provider))
    return len(seen)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        hook: _DriverHook = self.server.hook  # type: ignore[attr-defined]
        try:
            request = json.loads(self.rfile.readline(4096) or b"{}")
            if not hmac.compare_digest(str(request.get("token", "")), hook.token):
                self.wfile.write(b"denied\n")
                return
            count = hook.refresh_all()
            self.wfile.write(f"ok {count}\n".encode())
        except Exception as exc:  # never let a bad request kill the hook thread
            log.debug("lance_partitioned: refresh hook failed: %s", exc)
            with contextlib.suppress(OSError):
                self.wfile.write(b"error\n")


class _DriverHook:
    """One per driver process: serves refresh requests for the registered sessions."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(16)
        self.sessions: weakref.WeakSet[SparkSession] = weakref.WeakSet()
        self.lock = threading.Lock()
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.hook = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="lance_partitioned-refresh", daemon=True
        )
        self.thread.start()
        self.path = hook_dir() / f"{os.getpid()}.json"
        self._announce()
        atexit.register(self.close)

    def _announce(self) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(directory.parent, 0o700)
        os.chmod(directory, 0o700)
        tmp = directory / f".{self.path.name}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"port": self.server.server_address[1], "token": self.token}, fh)
        os.replace(tmp, self.path)

    def refresh_all(self) -> int:
        with self.lock:
            sessions = list(self.sessions)
        count = 0
        for session in sessions:
            try:
                count += refresh(session)
            except Exception as exc:  # a stopped session or JVM: nothing to refresh
                log.debug("lance_partitioned: cannot refresh a session: %s", exc)
        return count

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(Exception):
            self.server.shutdown()
            self.server.server_close()


_hook: _DriverHook | None = None
_hook_lock = threading.Lock()


def install(spark: SparkSession) -> None:
    """Refresh ``spark``'s views whenever a Spark write to a namespace commits."""
    global _hook
    with _hook_lock:
        if _hook is None:
            _hook = _DriverHook()
        with _hook.lock:
            _hook.sessions.add(spark)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def notify_drivers(timeout: float = 30.0) -> int:
    """Ask every driver hook on this host to refresh its views; returns how many answered.

    Runs in the sink's commit after the write is published, so it never raises.
    """
    answered = 0
    try:
        entries = list(hook_dir().glob("*.json"))
    except OSError:
        return 0
    for entry in entries:
        try:
            pid = int(entry.stem)
            if not _alive(pid):
                with contextlib.suppress(OSError):
                    entry.unlink()
                continue
            info = json.loads(entry.read_text())
            with socket.create_connection(("127.0.0.1", int(info["port"])), timeout=timeout) as s:
                s.sendall((json.dumps({"token": info["token"]}) + "\n").encode())
                s.settimeout(timeout)
                reply = s.makefile("rb").readline()
            if reply.startswith(b"ok"):
                answered += 1
        except Exception as exc:  # a hook that went away: its views are gone too
            log.debug("lance_partitioned: could not notify %s: %s", entry, exc)
    return answered
