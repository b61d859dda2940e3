"""Opening and scanning never write (issue 10 D12), and opening a missing version
or tag says what is missing and what exists (D13)."""

from __future__ import annotations

import lance
import pytest
from conftest import EVENTS_SCHEMA, make_events

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
    import datetime as dt

    ns.tag("keep", 2)
    ns.cleanup(older_than=dt.timedelta(0))
    latest = ns.version
    with pytest.raises(lp.VersionNotFoundError, match=rf"versions are 2, {latest}$"):
        lp.open(ns.root, version=3)
    with pytest.raises(lp.VersionNotFoundError, match="it was cleaned up"):
        lp.open(ns.root, version=3)


def test_a_version_before_the_namespace_was_partitioned_says_so(ns):
    # create() writes the rows (version 1), then the table metadata (version 2)
    with pytest.raises(lp.VersionNotFoundError, match="predates the namespace's partition specs"):
        lp.open(ns.root, version=1)
