"""``create`` is one commit, and a root an interrupted create left has a way out
(issue 28 item D9).

Before, ``create`` committed ``__manifest`` twice: its rows, then the schema and
spec as table metadata. A kill between left a root that nothing could open,
create again, repair, vacuum or validate. Those roots are built here the way
that first commit was written, with plain pylance, and so are the files a
create killed before any commit leaves. Expected contents come from pyarrow
and plain pylance on the files, never from the code under test.
"""

from __future__ import annotations

import os
import shutil

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import tree_digest
from foreign_fixtures import MANIFEST_SCHEMA
from lance.namespace import CreateNamespaceRequest, DirectoryNamespace
from test_cli import run

import lance_partitioned as lp

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64())])
ROWS = pa.table({"id": [1, 2, 3, 4], "k": [7, 8, 7, None]}, schema=SCHEMA)


def old_first_commit(root: str, partition_columns: dict[str, pa.DataType]) -> None:
    """What the two-step create committed first: ``__manifest`` with seed 000's columns
    (``foreign_fixtures``, written out by hand) and the ``v1`` namespace row, no table
    metadata. Plain pylance."""
    base = [f for f in MANIFEST_SCHEMA if not f.name.startswith("partition_field_")]
    fields = [*base, *[pa.field(name, t) for name, t in partition_columns.items()]]
    row = pa.Table.from_pylist(
        [{"object_id": "v1", "object_type": "namespace", "metadata": "{}"}],
        schema=pa.schema(fields),
    )
    lance.write_dataset(row, os.path.join(root, "__manifest"), mode="create")


def manifest_versions(root: str) -> list[int]:
    return [v["version"] for v in lance.dataset(os.path.join(root, "__manifest")).versions()]


def test_create_is_one_manifest_commit(tmp_path):
    root = str(tmp_path / "ns")
    lp.create(root, SCHEMA, "k")
    ds = lance.dataset(os.path.join(root, "__manifest"))
    assert len(ds.versions()) == 1  # two on the old create: rows, then metadata
    assert {"schema", "partition_spec_v1"} <= set(ds.metadata)
    assert ds.to_table(columns=["object_id"]).column(0).to_pylist() == ["v1"]
    files = os.listdir(os.path.join(root, "__manifest", "_versions"))
    assert len([f for f in files if f.endswith(".manifest")]) == 1
    # the table is self-contained: nothing refers to where it was built
    assert lance.dataset(os.path.join(root, "__manifest")).count_rows() == 1
    lp.open(root).append(ROWS)
    assert lp.open(root).count() == ROWS.num_rows


def test_a_root_left_between_the_old_two_commits_says_what_it_is(tmp_path):
    root = str(tmp_path / "ns")
    old_first_commit(root, {"partition_field_k": pa.int64()})
    before = tree_digest(root)
    with pytest.raises(lp.UnfinishedNamespaceError) as err:
        lp.open(root)
    msg = str(err.value)
    assert "unfinished namespace" in msg and "holds no data" in msg
    assert "lp.create(root, schema, spec)" in msg and "lance-partitioned repair" in msg
    assert isinstance(err.value, lp.NotAPartitionedNamespaceError)  # still what it was
    out = run("count", root, ok=1)
    assert "unfinished namespace" in out.stderr and "/rustc/" not in out.stderr
    assert tree_digest(root) == before  # reading wrote nothing


def test_create_again_finishes_the_old_two_step_root(tmp_path):
    root = str(tmp_path / "ns")
    old_first_commit(root, {"partition_field_k": pa.int64()})
    ns = lp.create(root, SCHEMA, "k")
    assert manifest_versions(root) == [1, 2]  # one commit finished it
    assert [v["version"] for v in ns.versions()] == [2]  # version 1 has no spec
    with pytest.raises(lp.VersionNotFoundError, match="predates the namespace's partition"):
        lp.open(root, version=1)
    ns.append(ROWS)
    got = lp.open(root).to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == ROWS.column("id").to_pylist()
    expected = pc.sum(pc.equal(ROWS.column("k"), 7)).as_py()
    assert lp.open(root).count("k = 7") == expected
    assert lp.open(root).validate() == []


def test_another_spec_is_refused_and_repair_removes_the_root(tmp_path):
    root = str(tmp_path / "ns")
    old_first_commit(root, {"partition_field_k": pa.int64()})
    before = tree_digest(root)
    with pytest.raises(lp.NamespaceExistsError, match="partition_field_k") as err:
        lp.create(root, SCHEMA, "id")
    assert "lance-partitioned repair" in str(err.value)
    assert tree_digest(root) == before
    out = run("repair", root)
    assert "removed __manifest" in out.stdout and "interrupted create" in out.stdout
    assert not os.path.exists(os.path.join(root, "__manifest"))
    ns = lp.create(root, SCHEMA, "id")
    assert manifest_versions(root) == [2]
    ns.append(ROWS)
    assert ns.count() == ROWS.num_rows


def test_files_a_create_killed_before_its_commit_left(tmp_path):
    """The one commit comes last: a kill before it leaves data files under
    ``__manifest`` and no table version. Open says so; create and repair both work."""
    donor = lp.create(str(tmp_path / "donor"), SCHEMA, "k").root
    data = os.path.join(donor, "__manifest", "data")
    for name in ("a", "b"):
        os.makedirs(tmp_path / name / "__manifest" / "data")
        for f in os.listdir(data):
            shutil.copy(os.path.join(data, f), tmp_path / name / "__manifest" / "data")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    with pytest.raises(lp.UnfinishedNamespaceError, match="no table version, no data"):
        lp.open(a)
    ns = lp.create(a, SCHEMA, "k")
    ns.append(ROWS)
    assert lp.open(a).count() == ROWS.num_rows
    out = run("repair", b)
    assert "removed __manifest" in out.stdout
    assert os.listdir(b) == []


def test_repair_removes_nothing_that_is_not_an_interrupted_create(tmp_path):
    """A namespace, a plain DirectoryNamespace root, and the old first commit with a
    table row beside it (not what create wrote) are never removed."""
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(ROWS)
    plain = str(tmp_path / "plain")
    DirectoryNamespace(root=plain).create_namespace(CreateNamespaceRequest(id=["x"]))
    other = str(tmp_path / "other")
    old_first_commit(other, {"partition_field_k": pa.int64()})
    ds = lance.dataset(os.path.join(other, "__manifest"))
    row = {"object_id": "v1$t", "object_type": "table", "location": "t", "metadata": "{}"}
    ds.insert(pa.Table.from_pylist([row], schema=ds.schema))
    digests = {r: tree_digest(r) for r in (ns.root, plain, other)}
    assert lp.repair(ns.root) == []
    for r in (plain, other):
        with pytest.raises(lp.NotAPartitionedNamespaceError) as err:
            lp.repair(r)
        assert not isinstance(err.value, lp.UnfinishedNamespaceError)
        assert run("repair", r, ok=1).stderr.startswith("error: ")
    assert {r: tree_digest(r) for r in digests} == digests


def test_on_s3_an_unfinished_root_is_recognised_and_removed(s3_server, monkeypatch):
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    bucket = s3_server.new_bucket()
    root, other = f"s3://{bucket}/ns", f"s3://{bucket}/other"
    old_first_commit(root, {"partition_field_k": pa.int64()})
    old_first_commit(other, {"partition_field_k": pa.int64()})
    with pytest.raises(lp.UnfinishedNamespaceError, match="unfinished namespace"):
        lp.open(root)
    assert "removed __manifest" in lp.repair(root)[0]
    client = s3_server.client()
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert keys and all(k.startswith("other/") for k in keys)  # only the other root is left
    lp.create(root, SCHEMA, "k").append(ROWS)
    lp.create(other, SCHEMA, "k").append(ROWS)  # finishes it
    assert lp.open(root).count() == lp.open(other).count() == ROWS.num_rows
    assert len(lance.dataset(f"{root}/__manifest").versions()) == 2  # create + append
