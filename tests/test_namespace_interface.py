"""The lance-namespace interface (issue 14 item 4): generic clients browse a partitioned
namespace through ``lance_namespace.connect``, read-only; the lance_namespace models
carry our specs and schemas exactly or refuse.

Expectations come from ``__manifest`` read with plain pylance, and from pylance's own
``DirectoryNamespace`` reading the same root.
"""

from __future__ import annotations

import datetime as dt
import json

import lance
import lance_namespace as ln
import pyarrow as pa
import pytest
from conftest import tree_digest
from lance_namespace.errors import InvalidInputError, NamespaceNotFoundError, TableNotFoundError
from lance_namespace_urllib3_client.models import PartitionSpec as PartitionSpecModel

import lance_partitioned as lp
from lance_partitioned.format.namespace_models import (
    schema_from_model,
    schema_to_model,
    spec_from_model,
    spec_to_model,
)

SCHEMA = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("c", pa.string())])


def _rows(n: int, start: int = 0) -> pa.Table:
    days = [dt.date(2024, 12, 30) + dt.timedelta(days=3 * i) for i in range(n)]
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "d": pa.array(days, pa.date32()),
            "c": [["US", "FR", "JP"][i % 3] for i in range(n)],
        }
    )


@pytest.fixture
def root(tmp_path) -> str:
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "year(d), c")
    ns.append(_rows(12), progress=False)
    ns.append(_rows(4, 100), progress=False)  # a second read_version for some leaves
    return root


def _manifest_rows(root: str, version: int | None = None) -> list[dict]:
    return lance.dataset(f"{root}/__manifest", version=version).to_table().to_pylist()


@pytest.mark.parametrize(
    "impl", ["partitioned", "lance_partitioned.namespace_interface.PartitionedLanceNamespace"]
)
def test_browse_everything_through_connect(root, impl):
    client = ln.connect(impl, {"root": root})
    assert isinstance(client, ln.LanceNamespace)
    rows = _manifest_rows(root)
    namespaces = [r["object_id"].split("$") for r in rows if r["object_type"] == "namespace"]
    tables = [r for r in rows if r["object_type"] == "table"]
    for path in namespaces:
        listed = client.list_namespaces(ln.ListNamespacesRequest(id=path[:-1])).namespaces
        assert path[-1] in listed
        client.namespace_exists(ln.NamespaceExistsRequest(id=path))
    assert client.list_namespaces(ln.ListNamespacesRequest(id=[])).namespaces == ["v1"]
    for r in tables:
        path = r["object_id"].split("$")
        assert client.list_tables(ln.ListTablesRequest(id=path[:-1])).tables == ["dataset"]
        client.table_exists(ln.TableExistsRequest(id=path))
        desc = client.describe_table(ln.DescribeTableRequest(id=path, with_table_uri=True))
        assert desc.version == r["read_version"]  # the pinned read_version
        assert desc.location == f"{root}/{r['location']}"
        assert desc.table_uri == f"file://{root}/{r['location']}"
        detailed = client.describe_table(
            ln.DescribeTableRequest(id=path, load_detailed_metadata=True)
        )
        leaf = lance.dataset(f"{root}/{r['location']}", version=r["read_version"])
        assert detailed.stats.num_fragments == len(leaf.get_fragments())
        assert [f.name for f in detailed.var_schema.fields] == SCHEMA.names
    # every level lists exactly the children __manifest has
    v1_children = {p[1] for p in namespaces if len(p) == 2}
    assert (
        set(client.list_namespaces(ln.ListNamespacesRequest(id=["v1"])).namespaces) == v1_children
    )


def test_appendix_e_properties_and_root_metadata(root):
    client = ln.connect("partitioned", {"root": root})
    ds = lance.dataset(f"{root}/__manifest")
    meta = ds.metadata
    root_props = client.describe_namespace(ln.DescribeNamespaceRequest(id=[])).properties
    assert root_props == {"schema": meta["schema"], "partition_spec_v1": meta["partition_spec_v1"]}
    v1 = client.describe_namespace(ln.DescribeNamespaceRequest(id=["v1"])).properties
    assert json.loads(v1["partition_spec"]) == json.loads(meta["partition_spec_v1"])
    for r in _manifest_rows(root):
        path = r["object_id"].split("$")
        if r["object_type"] != "namespace" or len(path) < 2:
            continue
        props = client.describe_namespace(ln.DescribeNamespaceRequest(id=path)).properties
        if len(path) == 2:  # only its own level (Appendix E)
            assert props == {"partition.d_year": str(r["partition_field_d_year"])}
        else:
            assert props == {"partition.c": r["partition_field_c"]}


def test_pinned_version_does_not_move(root):
    old = lance.dataset(f"{root}/__manifest").version
    client = ln.connect("partitioned", {"root": root, "version": str(old)})
    lp.open(root).append(_rows(6, 200), progress=False)
    for r in _manifest_rows(root, old):
        if r["object_type"] == "table":
            path = r["object_id"].split("$")
            desc = client.describe_table(ln.DescribeTableRequest(id=path))
            assert desc.version == r["read_version"]
    latest = ln.connect("partitioned", {"root": root})
    assert latest.namespace_id() != client.namespace_id()


def test_missing_objects_raise_not_found(root):
    client = ln.connect("partitioned", {"root": root})
    with pytest.raises(NamespaceNotFoundError):
        client.describe_namespace(ln.DescribeNamespaceRequest(id=["v9"]))
    with pytest.raises(NamespaceNotFoundError):
        client.list_tables(ln.ListTablesRequest(id=["v1", "nope"]))
    with pytest.raises(TableNotFoundError):
        client.table_exists(ln.TableExistsRequest(id=["v1"]))
    with pytest.raises(ValueError, match="unknown properties"):
        ln.connect("partitioned", {"root": root, "rooot": "x"})


def test_ids_holding_the_separator_and_bad_limits_are_refused(root):
    # issue 28 D11: id=["v1$<child>"] listed [] instead of raising; limit=-1 was accepted
    client = ln.connect("partitioned", {"root": root})
    rows = _manifest_rows(root)
    child = next(r["object_id"] for r in rows if r["object_id"].count("$") == 1)
    joined = [child]  # one part holding "$": it names nothing
    for call in (
        lambda: client.list_namespaces(ln.ListNamespacesRequest(id=joined)),
        lambda: client.list_tables(ln.ListTablesRequest(id=joined)),
        lambda: client.namespace_exists(ln.NamespaceExistsRequest(id=joined)),
        lambda: client.describe_namespace(ln.DescribeNamespaceRequest(id=joined)),
    ):
        with pytest.raises(NamespaceNotFoundError, match="may not hold"):
            call()
    table = [r["object_id"] for r in rows if r["object_type"] == "table"][0].split("$")
    with pytest.raises(TableNotFoundError, match="may not hold"):
        client.table_exists(ln.TableExistsRequest(id=[table[0], "$".join(table[1:])]))
    # the same paths as separate parts are found
    assert client.namespace_exists(ln.NamespaceExistsRequest(id=child.split("$"))) is None
    assert client.list_tables(ln.ListTablesRequest(id=table[:-1])).tables == ["dataset"]
    for limit in (-1, 0):
        with pytest.raises(InvalidInputError, match="limit must be a positive integer"):
            client.list_namespaces(ln.ListNamespacesRequest(id=["v1"], limit=limit))
    children = sorted(r["object_id"].split("$")[1] for r in rows if r["object_id"].count("$") == 1)
    page = client.list_namespaces(ln.ListNamespacesRequest(id=["v1"], limit=1))
    assert page.namespaces == children[:1] and page.page_token == children[0]


def test_writes_are_refused_and_name_our_api(root):
    client = ln.connect("partitioned", {"root": root})
    before = tree_digest(root)
    calls = [
        lambda: client.create_namespace(ln.CreateNamespaceRequest(id=["v2"])),
        lambda: client.drop_table(ln.DropTableRequest(id=["v1", "x", "dataset"])),
        lambda: client.create_table(ln.CreateTableRequest(id=["t"]), b""),
        lambda: client.delete_from_table(ln.DeleteFromTableRequest(id=["t"], predicate="true")),
    ]
    for call in calls:
        with pytest.raises(ln.UnsupportedOperationError, match="read-only.*lance_partitioned"):
            call()
    assert tree_digest(root) == before


def test_pylance_directory_namespace_agrees(root):
    ours = ln.connect("partitioned", {"root": root})
    theirs = ln.connect("dir", {"root": root})
    for r in _manifest_rows(root):
        path = r["object_id"].split("$")
        if r["object_type"] == "namespace":
            req = ln.ListNamespacesRequest(id=path)
            assert sorted(ours.list_namespaces(req).namespaces) == sorted(
                theirs.list_namespaces(req).namespaces
            )
        else:
            a = ours.describe_table(ln.DescribeTableRequest(id=path)).location
            b = theirs.describe_table(ln.DescribeTableRequest(id=path)).location
            assert b.endswith(a.rsplit("/", 1)[1])


def test_models_carry_spec_and_schema_exactly_or_refuse(root):
    ns = lp.open(root)
    meta = lance.dataset(f"{root}/__manifest").metadata
    model = spec_to_model(ns.spec)
    assert isinstance(model, PartitionSpecModel)
    assert model.to_dict() == json.loads(meta["partition_spec_v1"])
    assert spec_from_model(PartitionSpecModel.from_json(meta["partition_spec_v1"])) == ns.spec
    assert schema_to_model(ns.schema).to_dict() == json.loads(meta["schema"])
    assert schema_from_model(schema_to_model(ns.schema)) == ns.schema
    zoned = lp.Schema.from_arrow(pa.schema([("ts", pa.timestamp("ns", tz="UTC"))]))
    with pytest.raises(lp.SchemaError, match=r"unit.*timezone"):
        schema_to_model(zoned)
    assert schema_to_model(zoned, exact=False).to_dict()["fields"][0]["type"] == {
        "type": "timestamp"
    }
    ts_spec = lp.parse_spec("ts", zoned)  # identity: result_type is the zoned timestamp
    with pytest.raises(lp.SpecError, match="result_type"):
        spec_to_model(ts_spec)


@pytest.mark.parametrize("first", ["lance_partitioned", "lance_namespace"])
def test_connect_finds_partitioned_whichever_is_imported_first(root, first):
    """``import lance_partitioned`` no longer imports lance_namespace (a second of startup),
    yet ``connect("partitioned", ...)`` works in either import order."""
    import subprocess
    import sys

    second = "lance_namespace" if first == "lance_partitioned" else "lance_partitioned"
    code = (
        "import sys\n"
        f"import {first}\n"
        "print('lance_namespace' in sys.modules)\n"
        f"import {second}\n"
        "import lance_namespace as ln\n"
        f"client = ln.connect('partitioned', {{'root': {root!r}}})\n"
        "print(*client.list_namespaces(ln.ListNamespacesRequest(id=[])).namespaces)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    # imported by lance_partitioned only when asked for
    assert out[0] == ("True" if first == "lance_namespace" else "False")
    assert out[1:] == ["v1"]  # connected: the root lists its one spec version namespace
