"""Shared fixtures: small real-ish data, TPC-H from tpchgen-cli, one Spark session per run,
and the storage the core suites run on: local disk and a real S3-compatible server."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
from collections.abc import Iterator

import pyarrow as pa
import pytest
from s3_support import Store

from demo import tpch
from demo.s3_server import MotoServer

# the comparisons test_spark_maintenance.py and the cluster test share: their asserts
# explain themselves when they fail
pytest.register_assert_rewrite("maintenance_checks")

TPCH_SF = float(os.environ.get("LP_TEST_TPCH_SF", "0.01"))


def tree_digest(root: str | os.PathLike) -> dict[str, str]:
    """Every file under ``root`` (path relative to it) with the sha256 of its bytes:
    equal digests mean the tree is unchanged byte for byte."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            path = os.path.join(d, n)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="session")
def tpch_dir(tmp_path_factory) -> str:
    """TPC-H lineitem and orders at a small scale factor, generated once per run."""
    out = str(tmp_path_factory.mktemp("tpch"))
    tpch.generate(TPCH_SF, out, ("lineitem", "orders"))
    return out


@pytest.fixture(scope="session")
def lineitem(tpch_dir) -> pa.Table:
    return tpch.read(os.path.join(tpch_dir, "lineitem.parquet"))


@pytest.fixture(scope="session")
def orders(tpch_dir) -> pa.Table:
    return tpch.read(os.path.join(tpch_dir, "orders.parquet"))


EVENTS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("event_date", pa.date32()),
        pa.field("country", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.float64()),
    ]
)


def make_events(n: int = 200, start_id: int = 0) -> pa.Table:
    """Deterministic events across 2024-2026, four countries and a NULL country."""
    countries = ["US", "FR", "CN", None, "Zürich$/=x"]
    base = dt.date(2024, 11, 20)
    rows = {
        "id": list(range(start_id, start_id + n)),
        "event_date": [base + dt.timedelta(days=(i * 37) % 800) for i in range(n)],
        "country": [countries[i % len(countries)] for i in range(n)],
        "ts": [
            dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=(i * 53) % 9000)
            for i in range(n)
        ],
        "amount": [float(i % 17) * 1.5 for i in range(n)],
    }
    return pa.table(rows, schema=EVENTS_SCHEMA)


@pytest.fixture
def events() -> pa.Table:
    return make_events()


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for the whole run; stops Spark *and* its JVM at the end."""
    pytest.importorskip("pyspark")
    from lance_partitioned.spark import local_session, stop_session

    session = local_session("local[2]", "lance_partitioned-tests", shuffle_partitions=4)
    yield session
    stop_session(session)


@pytest.fixture(scope="session")
def s3_server():
    """moto's standalone S3 server on a free 127.0.0.1 port, for the whole run; stopped
    (by its pid) at the end."""
    pytest.importorskip("moto.server")
    server = MotoServer()
    yield server
    server.stop()


@contextlib.contextmanager
def _store(request, kind: str, local_base: str) -> Iterator[Store]:
    """A ``Store`` of ``kind``; on S3 a fresh bucket, with the standard AWS environment
    variables set for as long as it is used (worker processes inherit them)."""
    if kind == "local":
        yield Store("local", local_base)
        return
    server = request.getfixturevalue("s3_server")
    with pytest.MonkeyPatch.context() as env:  # its own: a test's monkeypatch.undo() keeps it
        for key, value in server.env().items():
            env.setenv(key, value)
        yield Store("s3", f"s3://{server.new_bucket()}", server)


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path):
    """Where a test's namespaces live: ``local`` (tmp_path) or ``s3`` (a fresh bucket on the
    moto server). On S3 the credentials and endpoint come from the standard AWS environment
    variables, so ``lp.open(root)`` and worker processes need no storage_options."""
    with _store(request, request.param, str(tmp_path)) as found:
        yield found


@pytest.fixture(scope="module", params=["local", "s3"])
def module_store(request, tmp_path_factory):
    """``store`` for module-scoped fixtures (e.g. crash runs that start every worker at once
    and share them across the module's tests): the same two stores, one per module run."""
    with _store(request, request.param, str(tmp_path_factory.mktemp("store"))) as found:
        yield found


# The S3 set proves the storage path, not the logic above it: a test of storage-independent
# logic (argument checks, pruning, types, evolution rules) runs on local disk only.
local_only = pytest.mark.parametrize("store", ["local"], indirect=True)


@pytest.fixture(scope="session")
def azurite():
    """Azurite's blob service on a free 127.0.0.1 port for the whole run (installed from npm
    into .cache/azurite on first use); skipped when node/npm or the package are unavailable."""
    from azure_support import Azurite, Unavailable

    try:
        server = Azurite()
    except Unavailable as exc:
        pytest.skip(f"Azure Blob emulator unavailable: {exc}")
    yield server
    server.stop()
