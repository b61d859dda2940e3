"""The library on a real S3-compatible server (moto, 127.0.0.1), configured through
``storage_options`` only; secrets never shown; bad storage input refused with nothing changed.

The parametrised ``store`` fixture runs the core suites on S3 through the standard AWS
environment variables; here the environment is cleared so that only ``storage_options``
can reach the server.
"""

from __future__ import annotations

import datetime as dt
import logging

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS_SCHEMA, make_events
from s3_support import SECRET_KEY, Proxy, free_port, s3_tree

import lance_partitioned as lp
from lance_partitioned.catalog import commit_safety

AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ALLOW_HTTP",
)


@pytest.fixture
def no_aws_env(monkeypatch):
    for key in AWS_ENV:
        monkeypatch.delenv(key, raising=False)


def _sorted(t: pa.Table) -> list[dict]:
    return t.sort_by("id").select(sorted(t.column_names)).to_pylist()


def test_every_operation_through_storage_options(s3_server, no_aws_env, caplog, capsys):
    opts = s3_server.options()
    root = f"s3://{s3_server.new_bucket()}/events"
    events = make_events(120)
    with caplog.at_level(logging.DEBUG):
        ns = lp.create(root, EVENTS_SCHEMA, "country", storage_options=opts)
        v1 = ns.append(events).version
        assert _sorted(ns.to_arrow()) == _sorted(events)
        # scan / plan / explain with a filter, against pyarrow.compute on the input
        want = events.filter(pc.equal(events["country"], "US"))
        assert _sorted(ns.to_arrow("country = 'US'")) == _sorted(want)
        assert 0 < len(ns.plan("country = 'US'")) < len(ns.plan())
        explained = ns.scan("country = 'US'").explain()
        # dynamic overwrite of the US partitions, then delete, then time travel
        us = make_events(10, start_id=10_000).filter(
            pc.equal(make_events(10, start_id=10_000)["country"], "US")
        )
        ns.overwrite(us, dynamic=True)
        assert _sorted(ns.to_arrow("country = 'US'")) == _sorted(us)
        ns.delete("amount > 20")
        rest = events.filter(pc.fill_null(pc.not_equal(events["country"], "US"), True))
        left = pa.concat_tables([rest, us])
        left = left.filter(pc.invert(pc.greater(left["amount"], 20)))
        assert _sorted(ns.to_arrow()) == _sorted(left)
        old = lp.open(root, version=v1, storage_options=opts)
        assert _sorted(old.to_arrow()) == _sorted(events)
        ns.tag("first", v1)
        assert lp.open(root, version="first", storage_options=opts).count() == events.num_rows
        # evolution: a column and a new spec, then rewrite into it
        ns.add_column("note", pa.string())
        ns.evolve_spec("country, year(event_date)")
        ns.rewrite_partitions()
        assert _sorted(ns.to_arrow().drop(["note"])) == _sorted(left)
        assert ns.validate() == []
        # maintenance, then a static overwrite
        ns.compact()
        ns.cleanup(older_than=dt.timedelta(0))
        ns.vacuum(older_than=dt.timedelta(0))
        assert ns.repair() == []
        assert _sorted(ns.to_arrow().drop(["note"])) == _sorted(left)
        assert lp.open(root, version="first", storage_options=opts).count() == events.num_rows
        ns.overwrite(
            make_events(5, start_id=50_000).append_column("note", pa.nulls(5, pa.string()))
        )
        assert ns.count() == 5
        described = ns.describe()
    # the secret appears nowhere a user looks
    shown = [explained, described, repr(ns), repr(ns.manifest), caplog.text]
    shown += list(capsys.readouterr())
    for text in shown:
        assert SECRET_KEY not in text


def test_writer_processes_get_credentials_from_the_environment(s3_server, tmp_path, monkeypatch):
    """The standard AWS environment variables alone reach the server (as Spark executors do)."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    root = f"s3://{s3_server.new_bucket()}/ns"
    ns = lp.create(root, EVENTS_SCHEMA, "country")
    ns.append(make_events(20))
    assert lp.open(root).count() == 20


# -- bad storage input: a clear error, nothing changed ----------------------------------


def test_missing_bucket_is_named(s3_server, no_aws_env):
    opts = s3_server.options()
    root = "s3://no-such-bucket-lp/ns"
    with pytest.raises(lp.StorageError, match="bucket 'no-such-bucket-lp' does not exist"):
        lp.create(root, EVENTS_SCHEMA, "country", storage_options=opts)
    with pytest.raises(lp.StorageError, match="does not exist"):
        lp.open(root, storage_options=opts)
    assert "no-such-bucket-lp" not in {
        b["Name"] for b in s3_server.client().list_buckets()["Buckets"]
    }


def test_unreachable_endpoint_fails_fast_with_the_secret_hidden(no_aws_env):
    opts = {
        "aws_access_key_id": "k",
        "aws_secret_access_key": SECRET_KEY,
        "aws_endpoint": f"http://127.0.0.1:{free_port()}",  # nothing listens there
        "aws_region": "us-east-1",
        "allow_http": "true",
    }
    for call in (
        lambda: lp.create("s3://b/ns", EVENTS_SCHEMA, "country", storage_options=opts),
        lambda: lp.open("s3://b/ns", storage_options=opts),
    ):
        with pytest.raises(lp.StorageError) as info:
            call()
        assert "cannot be reached" in str(info.value)
        assert SECRET_KEY not in str(info.value)


def test_a_root_holding_something_else_is_refused(s3_server, no_aws_env):
    opts = s3_server.options()
    bucket = s3_server.new_bucket()
    client = s3_server.client()
    client.put_object(Bucket=bucket, Key="plain/_versions/1.manifest", Body=b"not ours")
    client.put_object(Bucket=bucket, Key="odd/__manifest", Body=b"a file named __manifest")
    before = s3_tree(client, f"s3://{bucket}")
    with pytest.raises(lp.StorageError, match="is a Lance dataset"):
        lp.create(f"s3://{bucket}/plain", EVENTS_SCHEMA, "country", storage_options=opts)
    with pytest.raises(lp.StorageError, match="not a Lance table"):
        lp.create(f"s3://{bucket}/odd", EVENTS_SCHEMA, "country", storage_options=opts)
    with pytest.raises(lp.NotAPartitionedNamespaceError):
        lp.open(f"s3://{bucket}/plain", storage_options=opts)
    assert s3_tree(client, f"s3://{bucket}") == before


def test_store_that_ignores_conditional_writes_is_refused(s3_server, no_aws_env):
    """A server that ignores If-None-Match would let two Lance commits of one version both
    succeed: writers refuse it, naming the problem and the fix; reads still work."""
    bucket = s3_server.new_bucket()
    client = s3_server.client()
    good = s3_server.options()
    ns = lp.create(f"s3://{bucket}/ns", EVENTS_SCHEMA, "country", storage_options=good)
    ns.append(make_events(10))
    proxy = Proxy(s3_server, strip_conditional=True)
    try:
        commit_safety._reset_for_tests()
        bad = s3_server.options(aws_endpoint=proxy.endpoint)
        before = s3_tree(client, f"s3://{bucket}")
        with pytest.raises(lp.UnsafeStoreError, match="If-None-Match") as info:
            lp.open(f"s3://{bucket}/ns", storage_options=bad).append(make_events(3))
        assert "Fix:" in str(info.value) and SECRET_KEY not in str(info.value)
        with pytest.raises(lp.UnsafeStoreError):
            lp.create(f"s3://{bucket}/other", EVENTS_SCHEMA, "country", storage_options=bad)
        assert s3_tree(client, f"s3://{bucket}") == before  # nothing written (probe removed)
        assert lp.open(f"s3://{bucket}/ns", storage_options=bad).count() == 10  # reads work
        trusted = s3_server.options(aws_endpoint=proxy.endpoint, lp_trust_conditional_put="true")
        lp.open(f"s3://{bucket}/ns", storage_options=trusted).append(make_events(3, 100))
        assert lp.open(f"s3://{bucket}/ns", storage_options=good).count() == 13
    finally:
        proxy.stop()
        commit_safety._reset_for_tests()


def test_moto_honours_conditional_puts_when_they_race(s3_server):
    """The premise of the S3 suite: of 8 racing If-None-Match PUTs exactly one wins."""
    import threading

    import botocore.exceptions

    bucket = s3_server.new_bucket()
    client = s3_server.client()
    results: list[str] = []

    def put(i: int) -> None:
        try:
            client.put_object(Bucket=bucket, Key="k", Body=f"{i}".encode(), IfNoneMatch="*")
            results.append("ok")
        except botocore.exceptions.ClientError as exc:
            results.append(exc.response["Error"]["Code"])

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["PreconditionFailed"] * 7 + ["ok"]


def test_network_failure_in_a_multi_partition_write_changes_nothing(s3_server, no_aws_env):
    """The connection drops after a few PUTs of a write touching many partitions: the write
    fails, readers see the namespace as it was, and the same write succeeds on retry."""
    bucket = s3_server.new_bucket()
    good = s3_server.options()
    root = f"s3://{bucket}/ns"
    ns = lp.create(root, EVENTS_SCHEMA, "country", storage_options=good)
    first = make_events(30)
    ns.append(first)
    version = ns.version
    proxy = Proxy(s3_server)
    try:
        via = s3_server.options(
            aws_endpoint=proxy.endpoint, client_max_retries="0", lp_trust_conditional_put="true"
        )
        flaky = lp.open(root, storage_options=via)
        proxy.drop_puts_after = proxy.puts + 6  # a few data files land, then the network fails
        more = make_events(40, start_id=1000)
        with pytest.raises(Exception) as info:
            flaky.append(more)
        assert SECRET_KEY not in str(info.value)
        after = lp.open(root, storage_options=good)
        assert after.version == version
        assert _sorted(after.to_arrow()) == _sorted(first)
        assert after.validate() == []
        proxy.drop_puts_after = None
        flaky.refresh().append(more)
        assert _sorted(lp.open(root, storage_options=good).to_arrow()) == _sorted(
            pa.concat_tables([first, more])
        )
    finally:
        proxy.stop()


@pytest.fixture(scope="module")
def auth_server():
    """A second moto server with IAM authentication on: a read-write and a read-only user
    (the first 6 requests, which create them, are allowed without credentials)."""
    import json

    from s3_support import MotoServer

    server = MotoServer(env={"INITIAL_NO_AUTH_ACTION_COUNT": "6"})
    try:
        import boto3

        iam = boto3.client(
            "iam",
            endpoint_url=server.endpoint,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
            region_name="us-east-1",
        )
        keys = {}
        for user, actions in (("rw", ["s3:*"]), ("ro", ["s3:Get*", "s3:List*", "s3:Head*"])):
            iam.create_user(UserName=user)
            key = iam.create_access_key(UserName=user)["AccessKey"]
            policy = {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
            }
            iam.put_user_policy(UserName=user, PolicyName=user, PolicyDocument=json.dumps(policy))
            keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
        yield server, keys
    finally:
        server.stop()


def test_wrong_and_read_only_credentials(auth_server, no_aws_env):
    server, keys = auth_server

    def opts(user: str | None) -> dict[str, str]:
        ak, sk = keys[user] if user else ("AKIAWRONGKEY", SECRET_KEY)
        return server.options(aws_access_key_id=ak, aws_secret_access_key=sk)

    rw = server.client(*keys["rw"])
    bucket = f"auth-{free_port()}"
    rw.create_bucket(Bucket=bucket)
    root = f"s3://{bucket}/ns"
    lp.create(root, EVENTS_SCHEMA, "country", storage_options=opts("rw")).append(make_events(20))
    before = s3_tree(rw, root)
    with pytest.raises(lp.StorageError, match="access denied") as info:
        lp.open(root, storage_options=opts(None))
    assert SECRET_KEY not in str(info.value)
    ro = lp.open(root, storage_options=opts("ro"))
    assert ro.count() == 20  # reading is allowed
    commit_safety._reset_for_tests()
    with pytest.raises(lp.StorageError, match="access denied"):
        ro.append(make_events(5, start_id=100))
    assert s3_tree(rw, root) == before
    assert lp.open(root, storage_options=opts("rw")).count() == 20
