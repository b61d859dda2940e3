"""Lease renewal against a claim on the S3 server: compare-and-swap, no lost claim.

A writer's lease (``operations/txn/leases.py``) is renewed by the writer and claimed by
maintenance once dead. On S3 both are conditional PUTs (``If-Match`` on the ETag
each side last saw), so whichever reaches the server first wins and the other is
refused. The interleavings are forced through the proxy (``Proxy.before``): the
competing request runs, straight to the server, while the first one is held.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pyarrow as pa
import pytest
from s3_support import Proxy

import lance_partitioned as lp
from lance_partitioned.operations.txn import leases

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int32())])


@pytest.fixture
def setup(s3_server, monkeypatch):
    """A namespace, a proxy, and a writer process that 'died' (its pid is gone)."""
    bucket = s3_server.new_bucket()
    root = f"s3://{bucket}/ns"
    lp.create(root, SCHEMA, "k", storage_options=s3_server.options())
    proxy = Proxy(s3_server)
    # the lease's process is gone: maintenance on this host finds it dead at once
    monkeypatch.setattr(leases, "_process_exists", lambda pid: False)
    monkeypatch.setattr(leases, "RENEW_EVERY", leases.TTL)  # only the test renews
    yield s3_server, root, proxy, bucket
    proxy.stop()


def _on_write_to(lease: leases.Lease, action):  # type: ignore[no-untyped-def]
    """A proxy hook running ``action`` once, before the first request that writes or
    removes the lease (its object, or a copy of it: any key naming the lease id)."""
    fired: list[object] = []

    def hook(method: str, target: str) -> None:
        if method in ("PUT", "POST", "DELETE") and lease.id in target and not fired:
            fired.append(action())

    return hook, fired


def _exists(server, bucket: str, lease: leases.Lease) -> bool:
    keys = {
        o["Key"]
        for o in server.client().list_objects_v2(Bucket=bucket, Prefix="ns/").get("Contents", [])
    }
    return urlsplit(lease.path).path.lstrip("/") in keys


def test_a_renewal_after_a_claim_is_refused_and_never_recreates_the_lease(setup):
    server, root, proxy, bucket = setup
    writer = lp.open(root, storage_options=server.options(aws_endpoint=proxy.endpoint))
    maintenance = lp.open(root, storage_options=server.options())
    lease = leases.acquire(writer.manifest, "append")
    try:
        # the claim runs while the renewal's write is on its way
        proxy.before, fired = _on_write_to(lease, lambda: leases.live(maintenance.manifest))
        renewed = lease.renew()
        proxy.before = None
        assert fired == [[]]  # maintenance found the lease dead and claimed it
        assert renewed is False  # the renewal lost: the writer knows
        assert not _exists(server, bucket, lease)  # and did not bring the lease back
        with pytest.raises(leases.LeaseLostError):
            lease.check()
        assert leases.live(maintenance.manifest) == []
    finally:
        lease.release()


def test_a_claim_after_a_renewal_is_refused_and_the_lease_honoured(setup):
    server, root, proxy, bucket = setup
    writer = lp.open(root, storage_options=server.options())
    maintenance = lp.open(root, storage_options=server.options(aws_endpoint=proxy.endpoint))
    lease = leases.acquire(writer.manifest, "append")
    try:
        # the writer renews while the claim's write is on its way
        proxy.before, fired = _on_write_to(lease, lease.renew)
        held = leases.live(maintenance.manifest)
        proxy.before = None
        assert fired == [True]  # the renewal went through
        assert [x.id for x in held] == [lease.id]  # so the claim did not
        assert _exists(server, bucket, lease)
        assert lease.renew() is True
        lease.check()
    finally:
        lease.release()
    assert not _exists(server, bucket, lease)
