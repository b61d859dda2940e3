"""A real second reader: pylance's DirectoryNamespace and plain lance.dataset read what we write."""

from __future__ import annotations

import json
import os

import lance
import pyarrow as pa
import pytest
from conftest import EVENTS_SCHEMA, make_events
from lance.namespace import (
    DescribeNamespaceRequest,
    DescribeTableRequest,
    DirectoryNamespace,
    ListNamespacesRequest,
    ListTablesRequest,
)

import lance_partitioned as lp


@pytest.fixture
def written(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), EVENTS_SCHEMA, "year(event_date), country")
    data = make_events(120)
    ns.append(data)
    return ns, data


def test_directory_namespace_lists_and_describes(written):
    ns, data = written
    dn = DirectoryNamespace(root=ns.root)
    assert dn.list_namespaces(ListNamespacesRequest(id=[])).namespaces == ["v1"]
    level1 = sorted(dn.list_namespaces(ListNamespacesRequest(id=["v1"])).namespaces)
    plan = ns.plan()
    assert level1 == sorted({t.object_id.split("$")[1] for t in plan})
    total = 0
    for task in plan:
        _, a, b, _ = task.object_id.split("$")
        assert dn.list_tables(ListTablesRequest(id=["v1", a, b])).tables == ["dataset"]
        # Appendix E: each namespace shows its own level's value
        props1 = dn.describe_namespace(DescribeNamespaceRequest(id=["v1", a])).properties
        assert props1 == {
            "partition.event_date_year": str(task.partition_values["event_date_year"])
        }
        props2 = dn.describe_namespace(DescribeNamespaceRequest(id=["v1", a, b])).properties
        country = task.partition_values["country"]
        assert json.loads(json.dumps(props2)).get("partition.country") == country
        desc = dn.describe_table(DescribeTableRequest(id=["v1", a, b, "dataset"]))
        assert desc.location.rstrip("/").endswith(task.location)
        leaf = lance.dataset(desc.location)
        total += leaf.count_rows()
    assert total == data.num_rows


def test_every_leaf_opens_with_plain_lance(written):
    ns, data = written
    parts = []
    for task in ns.plan():
        ds = lance.dataset(os.path.join(ns.root, task.location))
        assert ds.version == task.read_version
        t = ds.to_table()
        # the leaf holds exactly its partition's rows
        years = {d.year for d in t["event_date"].to_pylist()}
        assert years == {task.partition_values["event_date_year"]}
        assert set(t["country"].to_pylist()) == {task.partition_values["country"]}
        parts.append(t)
    combined = pa.concat_tables(parts)
    assert sorted(combined["id"].to_pylist()) == sorted(data["id"].to_pylist())


def test_leaf_field_ids_match_the_namespace(written):
    # Lance assigns a new dataset's field ids depth-first from 0, as we do for the
    # namespace schema, so a leaf's own field ids agree with the namespace's.
    ns, _ = written
    for task in ns.plan():
        fields = lance.dataset(os.path.join(ns.root, task.location)).lance_schema.fields()
        assert {f.name(): f.id() for f in fields} == {
            n: ns.schema.field_id(n) for n in ns.schema.names
        }


def test_foreign_tables_beside_the_spec_versions_are_ignored(written):
    import io

    from lance.namespace import CreateTableRequest

    ns, data = written
    t = pa.table({"x": [1, 2]})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    DirectoryNamespace(root=ns.root).create_table(
        CreateTableRequest(id=["scratch"]), sink.getvalue()
    )
    reopened = lp.open(ns.root)
    assert reopened.count() == data.num_rows
    assert all(task.object_id.startswith("v1$") for task in reopened.plan())
