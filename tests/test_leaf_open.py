"""One leaf opener: reads (``open_leaf_dataset``), writes (``resolve_leaf``) and search
(``open_pinned``) agree on seed 000 Read Behavior for every combination of the read
columns, tags on branches included. Expected rows come from the data written, not
from the code under test."""

from __future__ import annotations

import lance
import pyarrow as pa
import pytest

import lance_partitioned as lp
from lance_partitioned.catalog.leaf_open import (
    LeafPin,
    open_leaf_dataset,
    open_pinned,
    resolve_leaf,
)
from lance_partitioned.catalog.snapshot import Leaf


def ids(n: int, start: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


MAIN_V1 = list(range(10))  # main version 1
MAIN_LATEST = MAIN_V1 + list(range(100, 103))  # main version 2
DEV_V2 = MAIN_V1 + list(range(200, 205))  # branch "dev" forked at 1, version 2


@pytest.fixture
def leaf_uri(tmp_path) -> str:
    """A leaf with two main versions, a branch ``dev`` with its own version 2, and tags
    ``on_main`` (main 1) and ``on_dev`` (dev 2)."""
    uri = str(tmp_path / "leaf.lance")
    ds = lance.write_dataset(ids(10, 0), uri)
    branch = ds.create_branch("dev", 1)
    moved = lance.write_dataset(ids(5, 200), branch, mode="append")
    assert moved.version == 2
    lance.write_dataset(ids(3, 100), uri, mode="append")
    tags = lance.dataset(uri).tags
    tags.create("on_main", 1)
    moved.tags.create("on_dev", 2)
    return uri


def leaf(**read) -> Leaf:
    return Leaf("v1$x", "leaf.lance", 1, (), **read)


CASES = [
    # (read columns, rows readers see, (directory, version, branch) a write builds on)
    ({"read_version": 1}, MAIN_V1, ("", 1, None)),
    ({}, MAIN_LATEST, ("", None, None)),
    ({"read_branch": "dev", "read_version": 2}, DEV_V2, ("/tree/dev", 2, "dev")),
    ({"read_branch": "dev"}, DEV_V2, ("/tree/dev", None, "dev")),
    ({"read_branch": "main", "read_version": 1}, MAIN_V1, ("", 1, None)),
    ({"read_tag": "on_main"}, MAIN_V1, ("", 1, None)),
    ({"read_tag": "on_dev"}, DEV_V2, ("/tree/dev", 2, "dev")),
]


@pytest.mark.parametrize(("read", "rows", "pin"), CASES, ids=[str(c[0]) for c in CASES])
def test_reads_writes_and_search_agree_on_the_published_content(leaf_uri, read, rows, pin):
    row = leaf(**read)
    opened = open_leaf_dataset(leaf_uri, row, None)
    assert sorted(opened.to_table()["id"].to_pylist()) == rows
    target = resolve_leaf(leaf_uri, row, None)
    assert target == LeafPin(leaf_uri + pin[0], pin[1], pin[2])
    built_on = lance.dataset(target.uri, version=target.published)
    assert sorted(built_on.to_table()["id"].to_pylist()) == rows
    searched = open_pinned(leaf_uri, row, None)
    assert sorted(searched.to_table()["id"].to_pylist()) == rows


def test_a_pinned_version_is_opened_once_and_a_movable_one_every_time(leaf_uri):
    pinned = leaf(read_branch="dev", read_version=2)
    assert open_pinned(leaf_uri, pinned, None) is open_pinned(leaf_uri, pinned, None)
    for movable in (leaf(), leaf(read_tag="on_main"), leaf(read_branch="dev")):
        assert open_pinned(leaf_uri, movable, None) is not open_pinned(leaf_uri, movable, None)
    first = open_pinned(leaf_uri, pinned, None)
    lp.clear_caches()
    assert open_pinned(leaf_uri, pinned, None) is not first


def test_a_write_on_a_tag_the_leaf_no_longer_has_raises(leaf_uri):
    with pytest.raises(lp.ForeignChangeError, match="tag 'gone', which its table"):
        resolve_leaf(leaf_uri, leaf(read_tag="gone"), None)
