"""Leaf Lance field ids equal the namespace lance:field_id (seed 000), through any
evolution; writes add the namespace columns a leaf lacks (issue 10 items 6 and 9).

Every expectation here comes from plain pylance (``lance_schema`` ids, leaf
data, ``__manifest`` rows and metadata JSON) or pyarrow, never from our code.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lance.namespace import DescribeTableRequest, DirectoryNamespace

import lance_partitioned as lp
from lance_partitioned.catalog.manifest import Manifest

LEAF_KEY = b"lance-partitioned:field_id"


# -- oracles: plain pylance and JSON ------------------------------------------


def namespace_ids(root: str) -> dict[str, list[int]]:
    """Column name -> its lance:field_id and those of its nested fields, depth-first,
    read straight from the JsonArrowSchema in ``__manifest`` metadata."""

    def walk(f: dict) -> list[int]:
        meta = f.get("metadata") or {}
        out = [int(meta["lance:field_id"])] if "lance:field_id" in meta else []
        for child in f["type"].get("fields", []):
            out.extend(walk(child))
        return out

    schema = json.loads(lance.dataset(os.path.join(root, "__manifest")).metadata["schema"])
    return {f["name"]: walk(f) for f in schema["fields"]}


def published_leaves(root: str) -> list[tuple[str, str, int]]:
    """(object_id, location, read_version) of every table row in ``__manifest``."""
    rows = (
        lance.dataset(os.path.join(root, "__manifest"))
        .to_table(columns=["object_id", "location", "read_version"], filter="object_type = 'table'")
        .to_pylist()
    )
    return [(r["object_id"], r["location"], r["read_version"]) for r in rows]


def lance_ids(field) -> list[int]:
    return [field.id()] + [i for c in field.children() for i in lance_ids(c)]


def leaf_ids(root: str, location: str, version: int | None = None) -> dict[str, list[int]]:
    ds = lance.dataset(os.path.join(root, location), version=version)
    return {f.name(): lance_ids(f) for f in ds.lance_schema.fields()}


def assert_aligned(root: str, renamed: dict[str, str] | None = None, dropped=()) -> None:
    """Every published leaf: each column's Lance id is the namespace id of that column.

    Leaf names may lag a rename (``renamed``: old leaf name -> namespace name), and
    leaves may keep columns the namespace ``dropped`` (their ids are retired).
    """
    want = namespace_ids(root)
    name_of = {ids[0]: name for name, ids in want.items()}
    renamed = renamed or {}
    for oid, location, version in published_leaves(root):
        for name, ids in leaf_ids(root, location, version).items():
            if ids[0] not in name_of:
                assert name in dropped, (oid, name, ids, want)
                continue
            ns_name = name_of[ids[0]]
            assert ns_name in (name, renamed.get(name)), (oid, name, ids, want)
            if len(want[ns_name]) == len(ids):  # nested fields too, where Lance models them
                assert ids == want[ns_name], (oid, name, ids, want)


# -- item 6: ids across evolutions --------------------------------------------

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("j", pa.int32()),
        pa.field("k", pa.string()),
        pa.field("p", pa.string()),
    ]
)


def rows(ids, p, **extra):
    data = {"id": ids, "p": [p] * len(ids)}
    data.update(extra)
    return pa.table(data)


def test_issue_reproduction_drop_add_rename(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.append(rows([1, 2], "x", j=pa.array([1, 2], pa.int32()), k=["a", "b"]))
    ns.drop_column("j")
    ns.add_column("c", pa.string())
    ns.rename_column("k", "kk")
    ns.append(rows([3], "new", kk=["c"], c=["cc"]))
    assert namespace_ids(root) == {"id": [0], "kk": [2], "p": [3], "c": [4]}
    by_rows = {}
    for _, location, version in published_leaves(root):
        t = lance.dataset(os.path.join(root, location), version=version).to_table()
        by_rows[tuple(t["id"].to_pylist())] = leaf_ids(root, location, version)
    # the leaf created after the evolution: Lance ids 0, 2, 3, 4 (was 0, 1, 2, 3)
    assert by_rows[(3,)] == {"id": [0], "kk": [2], "p": [3], "c": [4]}
    assert_aligned(root, renamed={"k": "kk"}, dropped={"j"})
    assert ns.validate() == []


def test_ids_stay_aligned_through_a_sequence_of_evolutions(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    expected = []

    def put(table):
        ns.append(table)
        expected.append(table)

    put(rows([1, 2], "x", j=pa.array([1, 2], pa.int32()), k=["a", "b"]))
    steps = [
        lambda: ns.drop_column("j"),
        lambda: ns.add_column("s", pa.struct([("u", pa.int32()), ("v", pa.string())])),
        lambda: ns.rename_column("k", "kk"),
        lambda: ns.add_column("w", pa.int32()),
        lambda: ns.widen_column("w", pa.int64()),
        lambda: ns.drop_column("s"),
        lambda: ns.add_column("k", pa.float64()),  # the old name, a new id
    ]
    next_id = 10
    for step_no, step in enumerate(steps):
        step()
        cols = ns.schema.names
        for p in ("x", f"new{step_no}"):  # an existing partition and a new one
            extra = {}
            if "kk" in cols:
                extra["kk"] = [f"k{next_id}"]
            elif "k" in cols:
                extra["k"] = [f"k{next_id}"]
            if "s" in cols:
                extra["s"] = pa.array([{"u": next_id, "v": "s"}], ns.schema.field("s").type)
            if "w" in cols:
                extra["w"] = pa.array([next_id], ns.schema.field("w").type)
            if "k" in cols and ns.schema.field("k").type == pa.float64():
                extra["k"] = [float(next_id)]
            put(rows([next_id], p, **extra))
            next_id += 1
        # drop_column and rename_column align every leaf's names (issue 28 B6)
        assert_aligned(root)
        # a leaf created before widen_column lags it until a write or align_leaves()
        assert all("lags the namespace" in p for p in lp.open(root).validate())
    ns.align_leaves()
    assert lp.open(root).validate() == []
    assert_aligned(root)
    want = namespace_ids(root)
    assert [ids[0] for ids in want.values()] == [0, 2, 3, 7, 8]  # id, kk, p, w, k
    # nested children follow the namespace too, in every leaf that holds the struct
    got = lp.open(root).to_arrow().sort_by("id")
    assert got["id"].to_pylist() == [1, 2, *range(10, next_id)]
    # the values written under the final names, checked with pyarrow only
    last = pa.concat_tables([t.select(["id", "k"]) for t in expected[-2:]])
    assert got.filter(pc.is_in(got["id"], last["id"]))["k"].to_pylist() == last["k"].to_pylist()
    assert got.filter(pc.equal(got["id"], 13))["kk"].to_pylist() == ["k13"]


def test_struct_children_get_the_namespace_ids(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.drop_column("j")
    ns.add_column("s", pa.struct([("u", pa.int32()), ("t", pa.struct([("z", pa.string())]))]))
    assert namespace_ids(root)["s"] == [4, 5, 6, 7]
    ns.append(rows([1], "x", k=["a"], s=[{"u": 1, "t": {"z": "q"}}]))
    ((_, location, version),) = published_leaves(root)
    assert leaf_ids(root, location, version) == {"id": [0], "k": [2], "p": [3], "s": [4, 5, 6, 7]}
    leaf = lance.dataset(os.path.join(root, location), version=version)
    assert leaf.to_table(columns=["s"]).to_pylist() == [{"s": {"u": 1, "t": {"z": "q"}}}]


def test_list_map_and_fixed_size_list_columns(tmp_path):
    root = str(tmp_path / "ns")
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("gone", pa.int8()),
            pa.field("l", pa.list_(pa.int32())),
            pa.field("m", pa.map_(pa.string(), pa.int32())),
            pa.field("v", pa.list_(pa.float32(), 2)),
            pa.field("p", pa.string()),
        ]
    )
    ns = lp.create(root, schema, "p")
    ns.drop_column("gone")
    data = pa.table(
        {
            "id": [1],
            "l": pa.array([[1, 2]], pa.list_(pa.int32())),
            "m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32())),
            "v": pa.array([[0.5, 1.5]], pa.list_(pa.float32(), 2)),
            "p": ["x"],
        }
    )
    ns.append(data)
    want = namespace_ids(root)
    ((_, location, version),) = published_leaves(root)
    have = leaf_ids(root, location, version)
    assert {n: ids[0] for n, ids in have.items()} == {n: ids[0] for n, ids in want.items()}
    assert have["l"] == want["l"]  # list and its item
    assert have["m"][2:] == want["m"][1:]  # Lance's map: map, entries, key, value
    leaf = lance.dataset(os.path.join(root, location), version=version)
    assert leaf.to_table().select(data.column_names).equals(data)


# -- item 9: writes into leaves that lack namespace columns ----------------------


def test_append_after_add_column_into_existing_partitions(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    first = pa.table(
        {
            "id": [1, 2, 3],
            "j": pa.array([1, 2, 3], pa.int32()),
            "k": ["a", "b", "c"],
            "p": ["x", "y", "x"],
        }
    )
    ns.append(first)
    before = {oid: v for oid, _, v in published_leaves(root)}
    ns.add_column("c", pa.string())
    second = pa.table(
        {"id": [4, 5, 6], "k": ["d", "e", "f"], "p": ["x", "y", "z"], "c": ["c4", None, "c6"]}
    )
    ns.append(second)  # failed before: "partition … has no column 'c' … rewrite the partition"
    expected = pa.concat_tables(
        [
            first.append_column("c", pa.nulls(3, pa.string())),
            second.add_column(1, "j", pa.nulls(3, pa.int32())).select(first.column_names + ["c"]),
        ]
    ).sort_by("id")
    got = lp.open(root).to_arrow().select(expected.column_names).sort_by("id")
    assert got.equals(expected)
    assert lp.open(root).count("c = 'c4'") == 1
    assert_aligned(root)
    # plain Lance sees the column in the old leaves, NULL for the old rows
    for oid, location, version in published_leaves(root):
        leaf = lance.dataset(os.path.join(root, location))
        assert leaf.version == version  # the published version is the latest
        t = leaf.to_table()
        assert "c" in t.column_names
        if oid in before:
            assert version > before[oid]
        want = expected.filter(pc.is_in(expected["id"], t["id"]))
        assert t.select(["id", "c"]).sort_by("id").equals(want.select(["id", "c"]))
    # pylance's DirectoryNamespace reads every leaf too
    dn = DirectoryNamespace(root=root)
    total = 0
    for oid, _, _ in published_leaves(root):
        desc = dn.describe_table(DescribeTableRequest(id=oid.split("$")))
        total += lance.dataset(desc.location).count_rows()
    assert total == 6
    assert lp.open(root).validate() == []


def test_add_column_evolution_is_metadata_only(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.append(rows([1, 2], "x", k=["a", "b"]))
    ((_, location, v0),) = published_leaves(root)
    old_files = {
        f.path
        for fr in lance.dataset(os.path.join(root, location)).get_fragments()
        for f in fr.metadata.files
    }
    ns.add_column("c", pa.string())
    ns.append(rows([3], "x", c=["z"]))
    ((_, _, v1),) = published_leaves(root)
    leaf = lance.dataset(os.path.join(root, location), version=v1)
    files = [{f.path for f in fr.metadata.files} for fr in leaf.get_fragments()]
    assert old_files <= set().union(*files)  # the old data files are kept as they were
    # the versions in between (schema change, then the append) are ours and unpublished
    assert v1 > v0 + 1
    assert lance.dataset(os.path.join(root, location), version=v1 - 1).count_rows() == 2


def test_add_column_with_a_name_the_leaf_uses_for_another_id(tmp_path):
    # the leaf's 'k' (id 2) was dropped and 'k' re-added with a new id; the old
    # leaf also lags the rename j -> jj: the write renames and drops, then adds
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.append(rows([1], "x", j=pa.array([7], pa.int32()), k=["a"]))
    ns.rename_column("j", "jj")
    ns.drop_column("k")
    ns.add_column("k", pa.float64())
    ns.append(rows([2], "x", jj=pa.array([8], pa.int32()), k=[2.5]))
    got = lp.open(root).to_arrow().sort_by("id")
    assert got.column_names == ["id", "jj", "p", "k"]
    assert got.to_pylist() == [
        {"id": 1, "jj": 7, "p": "x", "k": None},
        {"id": 2, "jj": 8, "p": "x", "k": 2.5},
    ]
    ((_, location, version),) = published_leaves(root)
    assert leaf_ids(root, location, version) == {"id": [0], "jj": [1], "p": [3], "k": [4]}
    assert_aligned(root)


def test_dynamic_overwrite_of_an_existing_leaf_after_add_column(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.append(rows([1, 2], "x", k=["a", "b"]))
    ns.drop_column("j")
    ns.add_column("c", pa.string())
    ns.overwrite(rows([9], "x", k=["z"], c=["cz"]), dynamic=True)
    assert lp.open(root).to_arrow().to_pylist() == [{"id": 9, "k": "z", "p": "x", "c": "cz"}]
    assert_aligned(root, dropped={"j"})
    assert lp.open(root).validate() == []


def test_failed_write_leaves_the_evolved_leaf_unpublished(tmp_path, monkeypatch):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.append(rows([1], "x", k=["a"]))
    ns.add_column("c", pa.string())
    manifest_version = lance.dataset(os.path.join(root, "__manifest")).version
    ((_, location, published),) = published_leaves(root)

    def boom(*args, **kwargs):
        raise RuntimeError("injected: __manifest commit fails")

    monkeypatch.setattr(Manifest, "commit", boom)
    with pytest.raises(RuntimeError, match="injected"):
        ns.append(rows([2], "x", c=["c2"]))
    monkeypatch.undo()
    assert lance.dataset(os.path.join(root, "__manifest")).version == manifest_version
    assert published_leaves(root)[0][2] == published
    leaf = lance.dataset(os.path.join(root, location))
    # rolled back: the latest leaf version holds the published content again
    assert "c" not in leaf.schema.names and leaf.count_rows() == 1
    assert lp.open(root).to_arrow().to_pylist() == [
        {"id": 1, "j": None, "k": "a", "p": "x", "c": None}
    ]
    ns = lp.open(root)
    ns.append(rows([2], "x", c=["c2"]))
    assert lp.open(root).to_arrow(filter="id = 2")["c"].to_pylist() == ["c2"]
    assert_aligned(root)


def test_failure_between_schema_change_and_append_publishes_nothing(tmp_path, monkeypatch):
    from lance_partitioned.operations.leaf import leaf_changes

    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.append(rows([1], "x", k=["a"]))
    ns.add_column("c", pa.string())
    before = published_leaves(root)

    def boom(self, base):
        assert "c" in base.schema.names  # the leaf was evolved, unpublished
        raise RuntimeError("injected after the schema change")

    monkeypatch.setattr(leaf_changes.AppendFiles, "operation", boom)
    with pytest.raises(RuntimeError, match="injected"):
        ns.append(rows([2], "x", c=["c2"]))
    monkeypatch.undo()
    assert published_leaves(root) == before
    assert lp.open(root).count() == 1 and lp.open(root).validate() == []


# -- item 6: drifted leaves of existing namespaces --------------------------------


def _drift(root: str, location: str, table: pa.Table, max_rows_per_file: int = 1 << 20) -> int:
    """Rewrite a leaf as versions before issue 10 wrote it: Lance's own ids,
    namespace ids recorded only under lance-partitioned:field_id. Publishes it."""
    ids = namespace_ids(root)
    schema = pa.schema(
        [f.with_metadata({LEAF_KEY: str(ids[f.name][0]).encode()}) for f in table.schema]
    )
    shutil.rmtree(os.path.join(root, location))  # as a new leaf: Lance numbers from 0
    leaf = lance.write_dataset(
        table.cast(schema), os.path.join(root, location), max_rows_per_file=max_rows_per_file
    )
    mds = lance.dataset(os.path.join(root, "__manifest"))
    row = mds.to_table(filter=f"location = '{location}'")
    row = row.set_column(
        row.schema.get_field_index("read_version"),
        "read_version",
        pa.array([leaf.version], pa.uint64()),
    )
    Manifest(root).commit(mds, row)
    return leaf.version


def test_validate_reports_drift_and_realign_fixes_it(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.drop_column("j")
    ns.add_column("s", pa.struct([("u", pa.int32()), ("v", pa.string())]))
    ns.append(rows([0], "x", k=["seed"]))
    ns.append(rows([100], "y", k=["other"]))
    x_loc = [
        loc
        for _, loc, v in published_leaves(root)
        if lance.dataset(os.path.join(root, loc), version=v).to_table()["id"][0].as_py() == 0
    ][0]
    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "k": [f"k{i}" for i in range(6)],
            "p": ["x"] * 6,
            "s": pa.array([{"u": i, "v": f"v{i}"} for i in range(6)], ns.schema.field("s").type),
        }
    )
    _drift(root, x_loc, data, max_rows_per_file=3)
    # one fragment gets a deletion file
    leaf = lance.dataset(os.path.join(root, x_loc))
    leaf.delete("id = 4")
    leaf = lance.dataset(os.path.join(root, x_loc))
    mds = lance.dataset(os.path.join(root, "__manifest"))
    row = mds.to_table(filter=f"location = '{x_loc}'")
    row = row.set_column(
        row.schema.get_field_index("read_version"),
        "read_version",
        pa.array([leaf.version], pa.uint64()),
    )
    Manifest(root).commit(mds, row)
    assert leaf_ids(root, x_loc) == {"id": [0], "k": [1], "p": [2], "s": [3, 4, 5]}
    assert namespace_ids(root) == {"id": [0], "k": [2], "p": [3], "s": [4, 5, 6]}

    ns = lp.open(root)
    expected = ns.to_arrow().sort_by("id")  # reads by the recorded ids: already right
    assert expected["id"].to_pylist() == [0, 1, 2, 3, 5, 100]
    problems = ns.validate()
    assert len(problems) == 3 and all("realign_field_ids()" in p for p in problems)
    assert any(
        "column 'k' has Lance field id(s) [1] but namespace field id(s) [2]" in p for p in problems
    )
    old_files = {f.path for fr in leaf.get_fragments() for f in fr.metadata.files}
    manifest_before = lance.dataset(os.path.join(root, "__manifest")).version

    report = ns.realign_field_ids()
    assert report.version == manifest_before + 1  # one __manifest commit
    assert len(report.leaves_realigned) == 1 and report.fragments_rewritten == 1
    ((_, version),) = [(loc, v) for _, loc, v in published_leaves(root) if loc == x_loc]
    assert leaf_ids(root, x_loc, version) == {"id": [0], "k": [2], "p": [3], "s": [4, 5, 6]}
    realigned = lance.dataset(os.path.join(root, x_loc), version=version)
    new_files = {f.path for fr in realigned.get_fragments() for f in fr.metadata.files}
    assert len(old_files & new_files) == 1  # the fragment without deletions is reused as is
    assert (
        realigned.to_table()
        .sort_by("id")
        .equals(data.filter(pc.not_equal(data["id"], 4)).cast(realigned.schema))
    )
    assert lp.open(root).to_arrow().sort_by("id").equals(expected)
    assert lp.open(root).validate() == []
    assert lp.open(root).realign_field_ids().leaves_realigned == []  # nothing left to do
    # the version before the repair still reads as it was
    assert lp.open(root, version=manifest_before).to_arrow().sort_by("id").equals(expected)
    lp.open(root).append(rows([7], "x", k=["new"]))
    assert lp.open(root).count("p = 'x'") == 6


def test_failed_realign_publishes_nothing(tmp_path, monkeypatch):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.drop_column("j")
    ns.append(rows([0], "x", k=["a"]))
    ((_, location, _),) = published_leaves(root)
    _drift(root, location, pa.table({"id": [1, 2], "k": ["a", "b"], "p": ["x", "x"]}))
    before = published_leaves(root)
    manifest_version = lance.dataset(os.path.join(root, "__manifest")).version

    def boom(*args, **kwargs):
        raise RuntimeError("injected")

    monkeypatch.setattr(Manifest, "commit", boom)
    with pytest.raises(RuntimeError):
        lp.open(root).realign_field_ids()
    monkeypatch.undo()
    assert lance.dataset(os.path.join(root, "__manifest")).version == manifest_version
    assert published_leaves(root) == before
    assert len(lp.open(root).validate()) == 2  # still drifted: k and p
    assert lp.open(root).realign_field_ids().leaves_realigned == [before[0][0]]
    assert_aligned(root)


def test_writes_into_a_drifted_leaf_still_map_by_the_recorded_ids(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.drop_column("j")
    ns.append(rows([0], "x", k=["a"]))
    ((_, location, _),) = published_leaves(root)
    _drift(root, location, pa.table({"id": [1], "k": ["a"], "p": ["x"]}))
    ns = lp.open(root)
    ns.add_column("c", pa.date32())
    ns.append(rows([2], "x", k=["b"], c=[dt.date(2024, 1, 2)]))
    got = lp.open(root).to_arrow().sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "k": "a", "p": "x", "c": None},
        {"id": 2, "k": "b", "p": "x", "c": dt.date(2024, 1, 2)},
    ]
    lp.open(root).realign_field_ids()
    assert_aligned(root)
    assert lp.open(root).to_arrow().sort_by("id").to_pylist() == got


def test_ids_no_lance_table_can_carry_are_reported_not_guessed(tmp_path):
    # a map created before ids were reserved for Lance's entries struct: the map
    # takes 4 Lance ids (map, entries, key, value) but the namespace gave it 3
    def fid(i):
        return {"lance:field_id": str(i)}

    mt = pa.map_(
        pa.field("key", pa.string(), False, metadata=fid(2)),
        pa.field("value", pa.int32(), metadata=fid(3)),
    )
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata=fid(0)),
            pa.field("m", mt, metadata=fid(1)),
            pa.field("z", pa.string(), metadata=fid(4)),
        ]
    )
    root = str(tmp_path / "ns")
    ns = lp.create(root, schema, "z")
    data = pa.table(
        {"id": [1], "m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32())), "z": ["q"]}
    )
    ns.append(data)  # still writes, with Lance's own ids
    assert lp.open(root).to_arrow().to_pylist() == data.to_pylist()
    (problem,) = lp.open(root).validate()
    assert "column 'z' has Lance field id(s) [5] but namespace field id(s) [4]" in problem
    assert "cannot be realigned: map column 'm'" in problem
    version = lance.dataset(os.path.join(root, "__manifest")).version
    with pytest.raises(lp.SchemaError, match="cannot realign field ids: map column 'm'"):
        lp.open(root).realign_field_ids()
    assert lance.dataset(os.path.join(root, "__manifest")).version == version


def test_concurrent_appends_after_add_column_both_land(tmp_path):
    # B plans on the same snapshot as A; A publishes first (the leaf gains 'c'),
    # B's commit conflicts, rebases and re-stages on A's evolved leaf
    from lance_partitioned.catalog.snapshot import Snapshot
    from lance_partitioned.operations.write.partition_writer import PartitionWriter, new_job_secret
    from lance_partitioned.operations.write.publish import commit_write

    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    ns.append(rows([1], "x", k=["a"]))
    ns.add_column("c", pa.string())
    manifest = Manifest(root)
    snapshot = Snapshot.load(manifest, for_write=True)
    written = []
    for ids, c in (([2], "from A"), ([3], "from B")):
        writer = PartitionWriter(snapshot, new_job_secret())
        table = rows(ids, "x", c=[c])
        writer.write(pa.Table.from_pylist(table.to_pylist(), ns.schema.arrow).to_batches()[0])
        written.append(writer.finish())
    commit_write(manifest, snapshot, written[0])
    commit_write(manifest, snapshot, written[1])
    got = lp.open(root).to_arrow().sort_by("id")
    assert got.select(["id", "c"]).to_pylist() == [
        {"id": 1, "c": None},
        {"id": 2, "c": "from A"},
        {"id": 3, "c": "from B"},
    ]
    assert_aligned(root)
    assert lp.open(root).validate() == []
