"""Opening and scanning never write (issue 10 D12), and opening a missing version
or tag says what is missing and what exists (D13)."""

from __future__ import annotations

import datetime as dt
import json

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS_SCHEMA, make_events
from foreign_fixtures import SPEC_V2_UNKNOWN_SOURCE, build, tree
from lance.namespace import CreateNamespaceRequest, DirectoryNamespace

import lance_partitioned as lp


@pytest.fixture
def ns(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), EVENTS_SCHEMA, "country")
    for i in range(3):
        ns.append(make_events(5, start_id=10 * i))
    return ns


# -- D13: missing versions and tags ---------------------------------------------


@pytest.mark.parametrize("version", [999, 0, -1])
def test_missing_version_names_the_version_and_the_existing_ones(ns, version):
    existing = [v["version"] for v in lance.dataset(ns.manifest.uri).versions()]
    expected = f"{existing[0]}..{existing[-1]}"
    with pytest.raises(lp.VersionNotFoundError) as err:
        lp.open(ns.root, version=version)
    message = str(err.value)
    assert f"version {version} " in message and "does not exist" in message
    assert f"versions are {expected}" in message
    assert "not a partitioned namespace" not in message


def test_missing_tag_names_the_tag_and_the_existing_ones(ns):
    with pytest.raises(lp.VersionNotFoundError, match="no tag 'nosuchtag'; it has no tags"):
        lp.open(ns.root, version="nosuchtag")
    ns.tag("b")
    ns.tag("a", 2)
    with pytest.raises(lp.VersionNotFoundError, match="no tag 'nosuchtag'; tags: a, b$"):
        lp.open(ns.root, version="nosuchtag")


def test_version_gaps_after_cleanup_are_listed(ns):
    ns.tag("keep", 2)
    ns.cleanup(older_than=dt.timedelta(0))
    latest = ns.version
    with pytest.raises(
        lp.VersionNotFoundError, match=rf"versions are 2, {latest}(; tags: keep=2)?$"
    ):
        lp.open(ns.root, version=3)
    with pytest.raises(lp.VersionNotFoundError, match="it was cleaned up"):
        lp.open(ns.root, version=3)


# -- D12: opening and reading never write ---------------------------------------


def clobber(root: str) -> None:
    """What every DirectoryNamespace write does: rewrite __manifest with its base columns."""
    DirectoryNamespace(root=root).create_namespace(CreateNamespaceRequest(id=["foreign"]))


def read_everything(root: str, version=None) -> list[int]:
    """Every read entry point; returns the ids the scan saw."""
    ns = lp.open(root, version=version)
    got = sorted(ns.to_arrow(columns=["id"])["id"].to_pylist())
    assert ns.count() == len(got) == ns.count("id >= 0")
    assert len(ns.plan()) == ns.partitions().num_rows
    ns.describe()
    ns.validate()
    ns.versions()
    ns.tags()
    ns.namespace_properties(["v1"])
    for task in ns.plan():
        ns.namespace_properties(task.object_id.split("$")[:2])
    return got


def refused(ns, root: str, error, match: str) -> None:
    """Every write refuses with ``error`` and leaves the directory byte for byte as it was."""
    before = tree(root)
    writes = [
        lambda: ns.append(make_events(3, start_id=900)),
        lambda: ns.overwrite(make_events(3, start_id=900)),
        lambda: ns.overwrite(make_events(3, start_id=900), dynamic=True),
        lambda: ns.rewrite_partitions(),
    ]
    if error is lp.NamespaceDamagedError:  # a broken spec still allows these (the way out)
        writes += [
            lambda: ns.delete("id = 1"),
            lambda: ns.evolve_spec("country, year(event_date)"),
            lambda: ns.add_column("extra", pa.int32()),
            lambda: ns.compact(),
            lambda: ns.cleanup(older_than=dt.timedelta(0)),
            lambda: ns.vacuum(older_than=dt.timedelta(0)),
        ]
    for write in writes:
        with pytest.raises(error, match=match):
            write()
        assert tree(root) == before


def test_open_and_scans_of_a_damaged_namespace_are_read_only(ns, caplog):
    expected = sorted(i + 10 * k for k in range(3) for i in range(5))
    clobber(ns.root)
    damaged = lance.dataset(ns.manifest.uri).version
    before = tree(ns.root)
    with caplog.at_level("WARNING"):
        assert read_everything(ns.root) == expected
        assert tree(ns.root) == before
        assert lance.dataset(ns.manifest.uri).version == damaged
        assert read_everything(ns.root, version=damaged) == expected
        assert read_everything(ns.root, version=damaged - 1) == expected
    assert tree(ns.root) == before
    assert "lacks the read columns" in caplog.text and "ns.repair()" in caplog.text
    assert "foreign writer had dropped" not in caplog.text


def test_a_damaged_namespace_refuses_writes_until_repaired(ns):
    clobber(ns.root)
    damaged = lp.open(ns.root)
    refused(damaged, ns.root, lp.NamespaceDamagedError, r"lacks the read columns.*ns\.repair\(\)")
    before = lance.dataset(ns.manifest.uri).version
    assert damaged.repair()
    assert lance.dataset(ns.manifest.uri).version == before + 1
    damaged.append(make_events(3, start_id=900))
    assert damaged.count() == 18


def test_repair_refuses_to_invent_partition_values(tmp_path):
    foreign = build(str(tmp_path / "foreign"))  # rows of another implementation: no mirror
    clobber(foreign.root)
    lance.dataset(foreign.manifest_uri).cleanup_old_versions(older_than=dt.timedelta(0))
    ns = lp.open(foreign.root)  # readable, with a warning
    before = tree(foreign.root)
    with pytest.raises(lp.NamespaceDamagedError, match="recorded nowhere"):
        ns.repair()
    assert tree(foreign.root) == before


def test_repair_restores_another_implementations_values_from_history(tmp_path):
    foreign = build(str(tmp_path / "foreign"))
    before = lance.dataset(foreign.manifest_uri).to_table().sort_by("object_id")
    clobber(foreign.root)
    assert lp.open(foreign.root).repair()
    after = lance.dataset(foreign.manifest_uri).to_table()
    after = after.filter(pc.field("object_id") != "foreign").sort_by("object_id")
    for column in before.column_names:
        if column != "metadata":  # ours is unchanged; nothing was mirrored before either
            assert after[column].to_pylist() == before[column].to_pylist(), column


@pytest.mark.parametrize("with_column", [False, True])
def test_a_spec_naming_an_unknown_source_id_is_reported_and_refuses_writes(ns, caplog, with_column):
    manifest = lance.dataset(ns.manifest.uri)
    if with_column:  # written as seed 000 says, column and all
        manifest.add_columns([pa.field("partition_field_ghost", pa.int64())])
        manifest = lance.dataset(ns.manifest.uri)
    manifest.update_metadata({"partition_spec_v2": json.dumps(SPEC_V2_UNKNOWN_SOURCE)})
    before = tree(ns.root)
    with caplog.at_level("WARNING"):
        opened = lp.open(ns.root)
        assert opened.count() == 15
    assert tree(ns.root) == before
    assert "partition_spec_v2 fails validation" in caplog.text and "source id 99" in caplog.text
    assert "foreign writer had dropped" not in caplog.text
    if not with_column:
        assert "partition columns ['partition_field_ghost']" in caplog.text
        refused(opened, ns.root, lp.NamespaceDamagedError, "partition_field_ghost")
        opened.repair()
    refused(opened, ns.root, lp.SpecError, r"partition_spec_v2 fails validation.*source id 99")
    opened.evolve_spec("country")  # the way out: a valid spec
    opened.append(make_events(3, start_id=900))
    assert opened.count() == 18
