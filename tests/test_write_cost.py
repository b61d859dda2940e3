"""The per-partition work of a write that creates many partitions stays small.

An append creating 10,000 partitions pays its per-leaf Python work 10,000 times.
These tests pin the cheap paths (no timing: they count calls or check identity)
and that the guarantees those paths keep still hold.
"""

from __future__ import annotations

import json

import lance
import pyarrow as pa
import pytest
from lance.fragment import write_fragments

import lance_partitioned as lp
from lance_partitioned.operations import leaf_schema, publish
from lance_partitioned.operations.field_ids import FieldIdLayoutError, IdLayout
from lance_partitioned.operations.staged_check import fragment_files


def _fragments(tmp_path, table: pa.Table) -> list:
    return write_fragments(table, str(tmp_path / "leaf"), schema=table.schema, mode="create")


def test_remap_with_lance_numbering_returns_the_fragments_as_written(tmp_path):
    table = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array(["x"])})
    frags = _fragments(tmp_path, table)
    layout = IdLayout.of(table.schema, [[0], [1]])
    assert layout.is_natural
    out = layout.remap(frags)
    # no JSON round trip per fragment: the very same objects come back
    assert len(out) == len(frags) and all(a is b for a, b in zip(out, frags, strict=True))


def test_remap_with_lance_numbering_still_refuses_unknown_field_ids(tmp_path):
    table = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array(["x"])})
    frags = _fragments(tmp_path, table)
    data = frags[0].to_json()
    data["files"][0]["fields"] = [0, 7]  # a column Lance's numbering of (a, b) lacks
    bad = lance.fragment.FragmentMetadata.from_json(json.dumps(data))
    with pytest.raises(FieldIdLayoutError, match=r"\[7\]"):
        IdLayout.of(table.schema, [[0], [1]]).remap([bad])


def test_remap_to_other_ids_rewrites_the_file_fields(tmp_path):
    table = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array(["x"])})
    frags = _fragments(tmp_path, table)
    out = IdLayout.of(table.schema, [[5], [3]]).remap(frags)
    assert [f.fields for f in out[0].files] == [[5, 3]]
    assert [f.fields for f in frags[0].files] == [[0, 1]]  # the input is left alone


def test_fragment_files_names_the_same_paths_as_lance(tmp_path):
    table = pa.table({"a": pa.array(range(10), pa.int64())})
    frags = write_fragments(
        table, str(tmp_path / "leaf"), schema=table.schema, mode="create", max_rows_per_file=3
    )
    expected = {"data/" + f.path for frag in frags for f in frag.files}
    assert len(expected) == 4
    assert fragment_files(frags) == expected


def test_namespace_layout_is_computed_once_per_commit_not_per_new_leaf(tmp_path, monkeypatch):
    calls: list[object] = []
    real = leaf_schema.namespace_layout

    def counting(schema):
        calls.append(schema)
        return real(schema)

    monkeypatch.setattr(publish, "namespace_layout", counting)
    table = pa.table({"k": pa.array(range(20), pa.int32()), "v": pa.array(range(20), pa.int64())})
    ns = lp.create(str(tmp_path / "ns"), table.schema, "k")
    result = ns.append(table)
    assert result.partitions == 20
    assert len(calls) == 1
    # and the write is whole: every row back, per partition
    back = lp.open(str(tmp_path / "ns")).scan().to_arrow().sort_by("k")
    assert back.column("v").to_pylist() == list(range(20))
