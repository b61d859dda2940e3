"""Namespaces written by another implementation (hand-built with plain pylance in
``foreign_fixtures``): Appendix E properties (issue 10 C7) and writes into leaves
whose latest version is beyond the published one, or pinned by tag or branch (C8)."""

from __future__ import annotations

import datetime as dt
import json
import os

import lance
import pyarrow as pa
import pytest
from foreign_fixtures import add_unpublished, build, events, tree

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


# -- C8: writing into leaves another writer moved beyond their published version ---


def plain_read(root: str) -> tuple[list[int], dict[str, dict]]:
    """Every published row id, read with plain pylance per seed 000 Read Behavior
    (an oracle independent of our reader), and the table rows by object id."""
    manifest = lance.dataset(os.path.join(root, "__manifest"))
    rows = manifest.to_table(filter="object_type = 'table'").to_pylist()
    out = []
    for row in rows:
        uri = os.path.join(root, row["location"])
        if row["read_tag"] is not None:
            ds = lance.dataset(uri, version=row["read_tag"])
        elif row["read_branch"] is not None:
            ds = lance.dataset(uri).checkout_version((row["read_branch"], row["read_version"]))
        else:
            ds = lance.dataset(uri, version=row["read_version"])
        out.extend(ds.to_table(columns=["id"])["id"].to_pylist())
    return sorted(out), {r["object_id"]: r for r in rows}


GHOSTS = [950, 951]
OPS = ["append", "dynamic", "overwrite", "delete"]


def apply(ns, op: str, leaf, ids_before: list[int]) -> list[int]:
    """Run ``op`` on ``leaf``'s partition; return the ids expected afterwards."""
    new = events([600], leaf.year, leaf.country)
    if op == "append":
        ns.append(new)
        return sorted([*ids_before, 600])
    if op == "dynamic":
        ns.overwrite(new, dynamic=True)
        return sorted([*(i for i in ids_before if i not in leaf.published_ids), 600])
    if op == "overwrite":
        ns.overwrite(new)
        return [600]
    victim = leaf.published_ids[0]
    assert ns.delete(f"id = {victim}").rows == 1
    return [i for i in ids_before if i != victim]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", ["main", "tag", "branch", "null"])
def test_writes_build_on_the_published_version_never_on_unpublished_ones(foreign, name, op, caplog):
    leaf = foreign.leaves[name]
    ghost_version = add_unpublished(leaf, GHOSTS)
    ns = lp.open(foreign.root)
    before = foreign.published_ids()
    assert ids(ns) == before
    main_latest = lance.dataset(leaf.uri).version
    with caplog.at_level("WARNING"):
        expected = apply(ns, op, leaf, before)
    assert f"versions [{ghost_version}]" in caplog.text  # the restore over them is reported
    assert ids(ns) == expected == ids(lp.open(foreign.root))
    published, rows = plain_read(foreign.root)
    assert published == expected
    assert not set(GHOSTS) & set(published)
    row = rows[leaf.object_id]
    assert row["read_tag"] is None  # the tag's version was superseded by a published one
    if name == "branch":
        # the write went to the branch and moved its read_version; main did not move
        assert row["read_branch"] == "staging"
        assert lance.dataset(leaf.uri).version == main_latest
        assert json.loads(row["metadata"])["lp.read_branch"] == "staging"
    else:
        assert row["read_branch"] is None
    # later writes (and compaction) keep building on published versions only
    if op != "overwrite":
        ns.append(events([601], leaf.year, leaf.country))
        ns.compact()
        expected = sorted([*expected, 601])
        published, _ = plain_read(foreign.root)
        assert ids(ns) == published == expected
    assert ns.validate() == []


def test_a_write_to_a_branch_pinned_leaf_commits_on_top_of_the_branch(foreign):
    leaf = foreign.leaves["branch"]
    ns = lp.open(foreign.root)
    ns.append(events([600], leaf.year, leaf.country))
    _, rows = plain_read(foreign.root)
    row = rows[leaf.object_id]
    assert row["read_version"] == leaf.read_version + 1
    branch = lance.dataset(os.path.join(leaf.uri, "tree", "staging"))
    assert branch.version == row["read_version"]
    got = sorted(branch.to_table(columns=["id"])["id"].to_pylist())
    assert got == sorted([*leaf.published_ids, 600])
    # maintenance keeps what the branch needs (main's versions and files included)
    lance.write_dataset(events([921], leaf.year, leaf.country), leaf.uri, mode="overwrite")
    ns.vacuum(older_than=dt.timedelta(0))
    ns.cleanup(older_than=dt.timedelta(0))
    published, _ = plain_read(foreign.root)
    assert published == ids(lp.open(foreign.root)) == sorted([*foreign.published_ids(), 600])


def test_a_leaf_pinned_to_a_deleted_tag_is_refused_and_nothing_changes(foreign):
    leaf = foreign.leaves["tag"]
    lance.dataset(leaf.uri).tags.delete("published")
    ns = lp.open(foreign.root)
    before = tree(foreign.root)
    with pytest.raises(lp.ForeignChangeError, match="tag 'published', which its table"):
        ns.append(events([600, 601], leaf.year, leaf.country))
    with pytest.raises(lp.ForeignChangeError, match="tag 'published'"):
        ns.delete("id = 10")
    assert tree(foreign.root) == before


def test_a_leaf_pinned_to_a_tag_on_a_branch_is_written_on_that_branch(foreign):
    leaf = foreign.leaves["branch"]
    lance.dataset(leaf.uri).tags.create("on-branch", ("staging", leaf.read_version))
    manifest = lance.dataset(foreign.manifest_uri)
    row = manifest.to_table(filter=f"object_id = '{leaf.object_id}'")
    for name, value in (("read_version", None), ("read_branch", None), ("read_tag", "on-branch")):
        i = row.schema.get_field_index(name)
        row = row.set_column(i, name, pa.array([value], row.schema.field(name).type))
    manifest.merge_insert("object_id").when_matched_update_all().execute(row)
    add_unpublished(leaf, GHOSTS)  # on the branch, above the tagged version
    ns = lp.open(foreign.root)
    assert ids(ns) == foreign.published_ids()
    ns.append(events([600], leaf.year, leaf.country))
    published, rows = plain_read(foreign.root)
    assert published == sorted([*foreign.published_ids(), 600])
    row = rows[leaf.object_id]
    assert (row["read_branch"], row["read_tag"]) == ("staging", None)
    assert row["read_version"] == lance.dataset(os.path.join(leaf.uri, "tree", "staging")).version
