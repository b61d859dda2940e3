"""Namespaces written by another implementation (hand-built with plain pylance in
``foreign_fixtures``): Appendix E properties (issue 10 C7) and writes into leaves
whose latest version is beyond the published one, or pinned by tag or branch (C8)."""

from __future__ import annotations

import json

import pytest
from foreign_fixtures import build

import lance_partitioned as lp


@pytest.fixture
def foreign(tmp_path):
    return build(str(tmp_path / "ns"))


def ids(ns) -> list[int]:
    return sorted(ns.to_arrow(columns=["id"])["id"].to_pylist())


# -- C7: Appendix E runtime properties from the typed columns ---------------------


def test_partition_properties_come_from_the_typed_columns(foreign):
    ns = lp.open(foreign.root)
    assert (
        json.loads(ns.namespace_properties(["v1"])["partition_spec"])["fields"][0]["field_id"]
        == "event_year"
    )
    for leaf in foreign.leaves.values():
        level1, level2 = (oid.split("$") for oid in leaf.level_ids)
        # each level shows its own field only (Appendix E)
        assert ns.namespace_properties(level1) == {"partition.event_year": str(leaf.year)}
        expected = {} if leaf.country is None else {"partition.country": leaf.country}
        assert ns.namespace_properties(level2) == expected
        table = leaf.object_id.split("$")
        assert ns.namespace_properties(table) == {
            "partition.event_year": str(leaf.year),
            **expected,
        }


def test_unknown_namespace_paths_raise_key_error(foreign):
    ns = lp.open(foreign.root)
    for path in (["v9"], ["x"], ["v1", "nosuchnamespace00"], []):
        with pytest.raises(KeyError):
            ns.namespace_properties(path)
