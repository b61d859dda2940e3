"""A damaged ``__manifest`` accepts no write, and says so (issue 28 item D10).

Lance opens a version from its manifest file and reads data files only when
rows are read, so before, a ``__manifest`` whose data files were truncated
opened, took metadata-only commits (``add_column``, ``tag``) on top of the
damage, and ``repair`` found "nothing to repair"; reads failed with Lance's
error and its Rust paths. The damage is made here by truncating files with
plain file operations (or boto3 on S3); which files a version references comes
from plain pylance, never from the code under test.
"""

from __future__ import annotations

import datetime as dt
import os

import lance
import pyarrow as pa
import pytest
from conftest import tree_digest
from test_cli import run

import lance_partitioned as lp

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64())])
ROWS = pa.table({"id": [1, 2, 3], "k": [1, 2, 2]}, schema=SCHEMA)
RUST = ("/rustc/", ".rs:")


def referenced(manifest_uri: str, version: int | None = None) -> set[str]:
    """Paths (relative to ``__manifest``) of the data files a version reads: plain pylance."""
    ds = lance.dataset(manifest_uri, version=version)
    return {f"data/{f.path}" for frag in ds.get_fragments() for f in frag.metadata.files}


def truncate(path: str) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 2)


@pytest.fixture
def damaged(tmp_path) -> str:
    """A namespace with rows whose every ``__manifest`` data file is cut to half its size."""
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(ROWS)
    data = os.path.join(ns.root, "__manifest", "data")
    for name in os.listdir(data):
        truncate(os.path.join(data, name))
    return ns.root


def assert_names_damage(exc: BaseException, root: str) -> None:
    msg = str(exc)
    latest = referenced(os.path.join(root, "__manifest"))
    assert any(f"__manifest/{path}" in msg for path in latest), msg
    assert "truncated" in msg and not any(r in msg for r in RUST), msg
    assert set(exc.files) == {os.path.join(root, "__manifest", p) for p in latest}


WRITES = {
    "add_column": lambda ns: ns.add_column("z", pa.int32()),
    "tag": lambda ns: ns.tag("before"),
    "append": lambda ns: ns.append(pa.table({"id": [9], "k": [1]}, schema=SCHEMA)),
    "delete": lambda ns: ns.delete("k = 1"),
    "evolve_spec": lambda ns: ns.evolve_spec("bucket(2, id)"),
    "rename_column": lambda ns: ns.rename_column("id", "ident"),
    "overwrite": lambda ns: ns.overwrite(ROWS, dynamic=True),
    "compact": lambda ns: ns.compact(),
    "vacuum": lambda ns: ns.vacuum(dt.timedelta(0)),
    "cleanup": lambda ns: ns.cleanup(dt.timedelta(0)),
    "repair": lambda ns: ns.repair(),
    "restore": lambda ns: ns.restore(ns.versions()[0]["version"]),
}


@pytest.mark.parametrize("op", list(WRITES))
def test_a_write_on_a_damaged_manifest_is_refused_and_changes_nothing(damaged, op):
    before = tree_digest(damaged)
    ns = lp.open(damaged)  # opening reads metadata only: it still works
    with pytest.raises(lp.CorruptNamespaceError) as err:
        WRITES[op](ns)
    assert_names_damage(err.value, damaged)
    assert tree_digest(damaged) == before


def test_reads_name_the_damaged_file_and_keep_lances_error(damaged):
    ns = lp.open(damaged)
    for read in (ns.count, ns.to_arrow, lambda: ns.count("k = 2")):
        with pytest.raises(lp.CorruptNamespaceError) as err:
            read()
        assert_names_damage(err.value, damaged)
        assert err.value.__cause__ is not None  # Lance's own error, for --debug


def test_validate_reports_the_damage(damaged):
    problems = lp.open(damaged).validate()
    assert len(problems) == 1
    assert "is damaged" in problems[0] and not any(r in problems[0] for r in RUST)
    out = run("validate", damaged, ok=1)
    assert "problem: __manifest version" in out.stdout and "truncated" in out.stdout


def test_cli_repair_says_what_it_cannot_fix_and_exits_nonzero(damaged):
    before = tree_digest(damaged)
    out = run("repair", damaged, ok=1)
    assert "cannot repair" in out.stderr and "cannot rebuild damaged files" in out.stderr
    assert "__manifest/data/" in out.stderr and not any(r in out.stderr for r in RUST)
    assert "nothing to repair" not in out.stdout
    assert tree_digest(damaged) == before


def test_damage_to_the_latest_version_only_points_at_the_intact_one(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(ROWS)
    good = ns.version
    ns.append(pa.table({"id": [4], "k": [3]}, schema=SCHEMA))
    uri = os.path.join(ns.root, "__manifest")
    only_latest = referenced(uri) - referenced(uri, good)
    assert only_latest  # the second append wrote a __manifest file of its own
    for path in only_latest:
        os.remove(os.path.join(uri, path))
    with pytest.raises(lp.CorruptNamespaceError, match="missing") as err:
        lp.open(ns.root).append(ROWS)
    assert f"the newest intact version is {good}" in str(err.value)
    assert lp.open(ns.root, version=good).count() == ROWS.num_rows  # still readable


def test_on_s3_a_write_is_refused_and_create_is_one_commit(s3_server, monkeypatch):
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3_server.new_bucket()
    root = f"s3://{bucket}/ns"
    ns = lp.create(root, SCHEMA, "k")
    assert len(lance.dataset(f"{root}/__manifest").versions()) == 1
    ns.append(ROWS)
    client = s3_server.client()
    listed = client.list_objects_v2(Bucket=bucket, Prefix="ns/__manifest/data/")["Contents"]
    for obj in listed:
        body = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
        client.put_object(Bucket=bucket, Key=obj["Key"], Body=body[: len(body) // 2])
    keys = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    with pytest.raises(lp.CorruptNamespaceError, match="truncated"):
        lp.open(root).add_column("z", pa.int32())
    after = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]}
    assert after == keys
