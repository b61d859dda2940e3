"""Seed 000 Read Behavior: read_version; read_branch + read_version; read_tag; all NULL = latest main."""

from __future__ import annotations

import os

import lance
import pyarrow as pa
import pytest
from conftest import EVENTS_SCHEMA, make_events

import lance_partitioned as lp


@pytest.fixture
def one_leaf(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), EVENTS_SCHEMA, "")
    ns.append(make_events(10))
    (task,) = ns.plan()
    uri = os.path.join(ns.root, task.location)
    # the leaf moves on without the namespace knowing: 10 rows published, 13 at latest
    lance.write_dataset(make_events(3, start_id=100), uri, mode="append")
    return ns, task, uri


def set_read_columns(ns, object_id, **values):
    base = ns.manifest.dataset()
    row = base.to_table(filter=f"object_id = '{object_id}'")
    for name, value in values.items():
        row = row.set_column(
            row.schema.get_field_index(name), name, pa.array([value], row.schema.field(name).type)
        )
    ns.manifest.commit(base, row)
    return lp.open(ns.root)


def test_read_version_only(one_leaf):
    ns, _, _ = one_leaf
    assert ns.count() == 10


def test_all_null_reads_latest_main(one_leaf):
    ns, task, _ = one_leaf
    assert set_read_columns(ns, task.object_id, read_version=None).count() == 13


def test_read_tag_only(one_leaf):
    ns, task, uri = one_leaf
    lance.dataset(uri).tags.create("published", task.read_version)
    ns2 = set_read_columns(ns, task.object_id, read_version=None, read_tag="published")
    assert ns2.count() == 10
    assert ns2.scan().to_arrow().num_rows == 10


def test_read_branch_and_version(one_leaf):
    ns, task, uri = one_leaf
    branch = lance.dataset(uri).create_branch("staging", task.read_version)
    moved = lance.write_dataset(make_events(5, start_id=200), branch, mode="append")
    ns2 = set_read_columns(ns, task.object_id, read_branch="staging", read_version=moved.version)
    assert ns2.count() == 15
    ids = ns2.scan(columns=["id"]).to_arrow()["id"].to_pylist()
    assert sorted(ids) == list(range(10)) + list(range(200, 205))
