"""Field ids are never reused (seed 000), even after the highest id is dropped.

The namespace persists a high-water mark of the ids it ever assigned
(``lance-partitioned:last_field_id`` in ``__manifest`` metadata); namespaces
without it (0.1, other implementations) get a bound derived from the schema,
the specs and the leaves. Specs naming a dropped column read it as NULL, never
as a newer column; ``validate()`` accepts retired ids in old leaves and reports
a current spec that fails validation.

Expectations come from hand-written rows, pyarrow and plain pylance, never from
our parser, binder or transforms.
"""

from __future__ import annotations

import json
import os

import lance
import pyarrow as pa
import pytest
from foreign_fixtures import SPEC_V2_UNKNOWN_SOURCE, build, events

import lance_partitioned as lp

KEY = "lance-partitioned:last_field_id"


def manifest_meta(root: str) -> dict[str, str]:
    return lance.dataset(os.path.join(root, "__manifest")).metadata


def namespace_ids(root: str) -> dict[str, int]:
    """Column name -> lance:field_id, straight from the JsonArrowSchema in ``__manifest``."""
    schema = json.loads(manifest_meta(root)["schema"])
    return {f["name"]: int(f["metadata"]["lance:field_id"]) for f in schema["fields"]}


def by_id(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def three_columns(root: str, spec: str) -> lp.PartitionedNamespace:
    ns = lp.create(
        root, pa.schema([("id", pa.int64()), ("p", pa.string()), ("k", pa.string())]), spec
    )
    ns.append(pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"], "k": ["red", "blue"]}))
    return ns


def test_issue_reproduction_drop_highest_then_add(tmp_path):
    root = str(tmp_path / "ns")
    ns = three_columns(root, "k")
    ns.evolve_spec("p")
    ns.drop_column("k")
    ns.add_column("colour", pa.string())
    assert namespace_ids(root) == {"id": 0, "p": 1, "colour": 3}
    assert manifest_meta(root)[KEY] == "3"
    # the rows were written with k, before colour existed: colour is NULL for them
    assert ns.to_arrow("colour = 'red'").num_rows == 0
    assert by_id(ns.to_arrow()) == [
        {"id": 1, "p": "a", "colour": None},
        {"id": 2, "p": "b", "colour": None},
    ]
    # the old spec still names the retired id 2, not the new column
    assert "colour AS k" not in ns.describe()
    assert ns.validate() == []
    # new rows do carry colour; the old partitions are pruned by their own spec,
    # whose source reads as NULL, so they cannot match
    ns.append(pa.table({"id": pa.array([3], pa.int64()), "p": ["a"], "colour": ["red"]}))
    reopened = lp.open(root)
    assert by_id(reopened.to_arrow("colour = 'red'")) == [{"id": 3, "p": "a", "colour": "red"}]
    assert reopened.count("colour IS NULL") == 2
    assert reopened.validate() == []


def test_the_mark_is_persisted_and_survives_reopening(tmp_path):
    root = str(tmp_path / "ns")
    ns = three_columns(root, "p")
    assert manifest_meta(root)[KEY] == "2"
    ns.drop_column("k")
    assert manifest_meta(root)[KEY] == "2"  # dropping retires id 2, the mark stays
    ns.rename_column("p", "q")
    assert manifest_meta(root)[KEY] == "2"
    lp.open(root).add_column("x", pa.int32())
    assert namespace_ids(root) == {"id": 0, "q": 1, "x": 3}
    assert manifest_meta(root)[KEY] == "3"


def test_drop_and_readd_the_same_name_with_another_type(tmp_path):
    root = str(tmp_path / "ns")
    ns = three_columns(root, "p")
    ns.drop_column("k")
    ns.add_column("k", pa.int32())
    assert namespace_ids(root) == {"id": 0, "p": 1, "k": 3}
    # every scan works: the old leaves' string k is a retired column, not this one
    assert by_id(ns.to_arrow()) == [
        {"id": 1, "p": "a", "k": None},
        {"id": 2, "p": "b", "k": None},
    ]
    # a write into an existing partition replaces the leaf's retired k with the new one
    ns.append(
        pa.table({"id": pa.array([3], pa.int64()), "p": ["a"], "k": pa.array([5], pa.int32())})
    )
    assert by_id(ns.to_arrow("k = 5")) == [{"id": 3, "p": "a", "k": 5}]
    assert ns.count("k IS NULL") == 2
    assert ns.validate() == []
    # plain pylance: the leaf of p='a' holds the new k under id 3, as an int32
    rows = lance.dataset(os.path.join(root, "__manifest")).to_table(
        filter="object_type = 'table' AND partition_field_p = 'a'"
    )
    (location,), (version,) = rows["location"].to_pylist(), rows["read_version"].to_pylist()
    leaf = lance.dataset(os.path.join(root, location), version=version)
    ids = {f.name(): f.id() for f in leaf.lance_schema.fields()}
    assert ids["k"] == 3 and leaf.schema.field("k").type == pa.int32()
    assert sorted(leaf.to_table()["k"].to_pylist(), key=lambda v: (v is None, v)) == [5, None]


def test_drop_the_highest_id_and_add_two_columns(tmp_path):
    root = str(tmp_path / "ns")
    ns = three_columns(root, "p")
    ns.drop_column("k")
    ns.add_column("a1", pa.string())
    ns.add_column("a2", pa.struct([("x", pa.int64()), ("y", pa.string())]))
    assert namespace_ids(root) == {"id": 0, "p": 1, "a1": 3, "a2": 4}
    nested = json.loads(manifest_meta(root)["schema"])["fields"][-1]["type"]["fields"]
    assert [int(c["metadata"]["lance:field_id"]) for c in nested] == [5, 6]
    assert manifest_meta(root)[KEY] == "6"
    assert by_id(ns.to_arrow(columns=["id", "a1"])) == [
        {"id": 1, "a1": None},
        {"id": 2, "a1": None},
    ]
    assert ns.count("a1 = 'red'") == 0
    assert ns.validate() == []


def test_dropped_column_not_readded_is_no_validate_problem(tmp_path):
    root = str(tmp_path / "ns")
    ns = three_columns(root, "p")
    ns.drop_column("k")
    assert ns.validate() == []


def test_widen_keeps_the_mark(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(
        root, pa.schema([("id", pa.int32()), ("p", pa.string()), ("k", pa.string())]), "p"
    )
    ns.drop_column("k")
    ns.widen_column("id", pa.int64())
    assert manifest_meta(root)[KEY] == "2"
    ns.add_column("z", pa.string())
    assert namespace_ids(root)["z"] == 3


# -- namespaces without the key: 0.1 and other implementations --------------------


def drop_value_like_another_implementation(root: str) -> None:
    """What a foreign writer leaves after dropping column ``value`` (id 3, the highest):
    the schema without it, no high-water key; the leaves still hold it (Lance id 3)."""
    manifest = lance.dataset(os.path.join(root, "__manifest"))
    schema = json.loads(manifest.metadata["schema"])
    schema["fields"] = [f for f in schema["fields"] if f["name"] != "value"]
    manifest.update_metadata({"schema": json.dumps(schema)})
    assert KEY not in lance.dataset(os.path.join(root, "__manifest")).metadata


def test_foreign_namespace_without_the_key_never_reuses_a_leaf_id(tmp_path):
    foreign = build(str(tmp_path / "foreign"))
    drop_value_like_another_implementation(foreign.root)
    ns = lp.open(foreign.root)
    assert ns.validate() == []  # leaves keep the dropped value: retired, not unknown
    ns.add_column("note", pa.string())
    # id 3 is in every leaf (the dropped float column): the new column gets 4
    assert namespace_ids(foreign.root) == {"id": 0, "event_date": 1, "country": 2, "note": 4}
    assert manifest_meta(foreign.root)[KEY] == "4"
    got = ns.to_arrow(columns=["id", "note"])
    assert got.num_rows == len(foreign.published_ids())
    assert got["note"].null_count == got.num_rows
    assert ns.count("note IS NOT NULL") == 0
    assert ns.validate() == []
    # rows written after it carry the note, and old leaves still hold value (id 3)
    ns.append(
        events([40], 2018, "US").drop_columns(["value"]).append_column("note", pa.array(["hi"]))
    )
    assert by_id(ns.to_arrow("note = 'hi'", columns=["id", "note"])) == [{"id": 40, "note": "hi"}]


def test_an_id_above_the_mark_is_reported(tmp_path):
    foreign = build(str(tmp_path / "foreign"))
    manifest = lance.dataset(foreign.manifest_uri)
    manifest.update_metadata({KEY: "3"})
    leaf = foreign.leaves["main"]
    # another writer adds a column (Lance id 4) to a leaf and publishes that version
    assert lance.dataset(leaf.uri).version == leaf.read_version
    lance.dataset(leaf.uri).add_columns(pa.field("stray", pa.string()))
    version = lance.dataset(leaf.uri).version
    lance.dataset(foreign.manifest_uri).update(
        {"read_version": str(version)}, where=f"object_id = '{leaf.object_id}'"
    )
    problems = lp.open(foreign.root).validate()
    assert any("'stray'" in p and "field id 4" in p and "unknown" in p for p in problems), problems


# -- item 3: validate reports a current spec that fails validation ----------------


@pytest.mark.parametrize("how", ["unknown", "dropped"])
def test_validate_reports_a_current_spec_naming_a_missing_source(tmp_path, how):
    foreign = build(str(tmp_path / "foreign"))
    manifest = lance.dataset(foreign.manifest_uri)
    if how == "unknown":
        spec = SPEC_V2_UNKNOWN_SOURCE
        manifest.add_columns([pa.field("partition_field_ghost", pa.int64())])
        lance.dataset(foreign.manifest_uri).update_metadata({"partition_spec_v2": json.dumps(spec)})
    else:  # another writer dropped country, which the current spec v1 partitions by
        schema = json.loads(manifest.metadata["schema"])
        schema["fields"] = [f for f in schema["fields"] if f["name"] != "country"]
        manifest.update_metadata({"schema": json.dumps(schema)})
    problems = lp.open(foreign.root).validate()
    assert any("fails validation" in p for p in problems), problems
    assert any(("99" if how == "unknown" else "2") in p for p in problems), problems
