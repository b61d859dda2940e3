"""Struct fields (``s.a``, ``s.b.c``) in filters and in schema evolution (issue 34 item 6).

Expected rows come from DuckDB over the source rows, with the same struct access
(``s.a`` of a NULL struct is NULL there too), or from plain Python over the rows;
field ids come from plain pylance (``lance_schema``) and the ``__manifest``
metadata JSON, never from our code.
"""

from __future__ import annotations

import json
import os

import duckdb
import lance
import pyarrow as pa
import pytest
from conftest import tree_digest

import lance_partitioned as lp
from lance_partitioned.format.expressions import Compare, Literal, Ref
from lance_partitioned.format.filters.parse import parse_filter

INNER = pa.struct([pa.field("c", pa.string())])
S = pa.struct([pa.field("a", pa.int32()), pa.field("b", INNER), pa.field("x.y", pa.int64())])
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("k", pa.int32()), pa.field("s", S)])


def rows() -> pa.Table:
    values = [
        {"a": 1, "b": {"c": "p"}, "x.y": 10},
        {"a": 2, "b": {"c": "q"}, "x.y": 20},
        None,
        {"a": None, "b": {"c": None}, "x.y": None},
        {"a": 3, "b": None, "x.y": 30},
        {"a": 1, "b": {"c": "r"}, "x.y": 40},
        {"a": 5, "b": {"c": "p"}, "x.y": 50},
        None,
    ]
    return pa.table(
        {"id": range(len(values)), "k": [i % 3 for i in range(len(values))], "s": values},
        schema=SCHEMA,
    )


def duckdb_ids(table: pa.Table, where: str) -> list[int]:
    con = duckdb.connect()
    con.register("t", table)
    return sorted(r[0] for r in con.execute(f"SELECT id FROM t WHERE {where}").fetchall())


def scan_ids(ns: lp.PartitionedNamespace, flt: str) -> list[int]:
    return sorted(ns.scan(flt).to_arrow()["id"].to_pylist())


@pytest.fixture
def ns(tmp_path) -> lp.PartitionedNamespace:
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(rows())
    return ns


# (our filter, the same filter in DuckDB's spelling)
FILTERS = [
    ("s.a = 1", "s.a = 1"),
    ("s.a > 1 AND k < 2", "s.a > 1 AND k < 2"),
    ("s.a IS NULL", "s.a IS NULL"),
    ("s.a IS NOT NULL OR k = 2", "s.a IS NOT NULL OR k = 2"),
    ("s.b.c IN ('p', 'q')", "s.b.c IN ('p', 'q')"),
    ("s.b.c IS NULL", "s.b.c IS NULL"),
    ("NOT (s.b.c = 'p')", "NOT (s.b.c = 'p')"),
    ("`s`.`a` BETWEEN 2 AND 5", "s.a BETWEEN 2 AND 5"),
    ('"s"."b"."c" LIKE \'p%\'', "s.b.c LIKE 'p%'"),
    ("s.`x.y` >= 30", 's."x.y" >= 30'),
    ("s.a + 1 > 3", "s.a + 1 > 3"),  # left to Lance (Opaque), struct access kept
    ("t.s.a = 1", "s.a = 1"),  # a table qualifier before the struct column
]


@pytest.mark.parametrize(("flt", "duck"), FILTERS, ids=[f for f, _ in FILTERS])
def test_filters_on_struct_fields_match_duckdb(ns, flt, duck):
    expected = duckdb_ids(rows(), duck)
    assert scan_ids(ns, flt) == expected
    assert ns.count(flt) == len(expected)


def test_a_struct_field_binds_to_its_own_field_id(ns):
    ids = namespace_ids(ns)
    assert ns.scan("s.b.c = 'p'").expr == Compare(
        "=", Ref("s", ids["s.b.c"], ("b", "c")), Literal("p")
    )
    # the top-level part still prunes: only the k = 0 partition is read
    assert len(ns.scan("s.b.c = 'p' AND k = 0").plan()) == 1


def test_quoted_dotted_names_stay_one_name():
    # a dotted name is a path; a quoted one is one name, with a dot in it
    assert parse_filter("a.b = 1") == Compare("=", Ref("a", path=("b",)), Literal(1))
    assert parse_filter('"a.b" = 1') == Compare("=", Ref("a.b"), Literal(1))
    assert parse_filter("`a.b` = 1") == Compare("=", Ref("a.b"), Literal(1))


def test_a_quoted_dotted_name_is_not_the_struct_field(ns):
    assert scan_ids(ns, "s.a = 1") == duckdb_ids(rows(), "s.a = 1")
    with pytest.raises(lp.FilterError, match=r"unknown column 's\.a'"):
        ns.scan('"s.a" = 1').to_arrow()


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        ("s.q = 1", r"unknown field 's\.q'.*struct 's' has fields \['a', 'b', 'x\.y'\]"),
        ("s.b.z = 'p'", r"unknown field 's\.b\.z'.*struct 's\.b' has fields \['c'\]"),
        ("s.a.q = 1", r"unknown field 's\.a\.q'.*'s\.a' is int32, not a struct"),
        ("k.q = 1", r"unknown field 'k\.q'.*'k' is int32, not a struct"),
        ("q.a = 1", r"unknown column 'q'"),
    ],
)
def test_unknown_struct_fields_are_named_with_the_struct_fields(ns, flt, message):
    with pytest.raises(lp.FilterError, match=message):
        ns.scan(flt).to_arrow()


# -- evolution ------------------------------------------------------------------------


def manifest(ns: lp.PartitionedNamespace) -> lance.LanceDataset:
    return lance.dataset(os.path.join(ns_root(ns), "__manifest"))


def ns_root(ns: lp.PartitionedNamespace) -> str:
    return ns._manifest.root  # the directory the test created


def namespace_ids(ns: lp.PartitionedNamespace) -> dict[str, int]:
    """Dotted path -> lance:field_id, from the JsonArrowSchema in ``__manifest``."""
    out: dict[str, int] = {}

    def walk(f: dict, prefix: str) -> None:
        path = prefix + f["name"]
        out[path] = int(f["metadata"]["lance:field_id"])
        for child in f["type"].get("fields", []):
            walk(child, path + ".")

    for f in json.loads(manifest(ns).metadata["schema"])["fields"]:
        walk(f, "")
    return out


def leaf_ids(ns: lp.PartitionedNamespace) -> list[dict[str, int]]:
    """For every published leaf: dotted path -> its Lance field id (plain pylance)."""
    out = []
    table = manifest(ns).to_table(filter="object_type = 'table'").to_pylist()
    for row in table:
        ds = lance.dataset(os.path.join(ns_root(ns), row["location"]), version=row["read_version"])
        out.append({p: i for f in ds.lance_schema.fields() for p, i in _lance_paths(f, "")})
    return out


def _lance_paths(f, prefix: str) -> list[tuple[str, int]]:
    path = prefix + f.name()
    return [(path, f.id())] + [x for c in f.children() for x in _lance_paths(c, path + ".")]


def assert_leaf_ids_are_the_namespace_ids(ns, retired=()) -> None:
    """Each leaf field has the namespace's id for that path; a field the namespace
    lacks (a leaf older than ``add_column``) is fine, a leaf field with an id the
    namespace retired must be in ``retired``."""
    want = namespace_ids(ns)
    for leaf in leaf_ids(ns):
        for path, fid in leaf.items():
            if path in want:
                assert fid == want[path], (path, leaf, want)
            else:
                assert fid in retired, (path, leaf, want)


def rows_of(ns) -> list[dict]:
    return sorted(ns.to_arrow().to_pylist(), key=lambda r: r["id"])


def test_add_rename_widen_drop_struct_fields_keep_field_ids(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    src = rows()
    ns.append(src)
    before = namespace_ids(ns)
    assert_leaf_ids_are_the_namespace_ids(ns)

    # add: a fresh id above every id so far; old rows read NULL
    ns.add_column("s.z", pa.int64())
    ids = namespace_ids(ns)
    assert ids["s.z"] == max(before.values()) + 1
    expected = [
        {**r, "s": None if r["s"] is None else {**r["s"], "z": None}} for r in src.to_pylist()
    ]
    assert rows_of(ns) == expected
    assert scan_ids(ns, "s.z IS NULL") == list(range(8))
    assert_leaf_ids_are_the_namespace_ids(ns)
    # a new leaf (k = 7) and an old one (k = 1) get the new field, with its id
    new = pa.Table.from_pylist(
        [
            {"id": 8, "k": 7, "s": {"a": 9, "b": {"c": "n"}, "x.y": 1, "z": 99}},
            {"id": 9, "k": 1, "s": {"a": 9, "b": {"c": "o"}, "x.y": 2, "z": 98}},
        ],
        schema=ns.schema.arrow,
    )
    ns.append(new)
    expected += new.to_pylist()
    assert rows_of(ns) == expected
    assert scan_ids(ns, "s.z >= 98") == [8, 9]
    assert_leaf_ids_are_the_namespace_ids(ns)

    # rename: the id stays; leaves follow the name
    ns.rename_column("s.a", "aa")
    assert namespace_ids(ns)["s.aa"] == before["s.a"]
    renamed = [
        {
            **r,
            "s": None
            if r["s"] is None
            else {("aa" if k == "a" else k): v for k, v in r["s"].items()},
        }
        for r in expected
    ]
    assert rows_of(ns) == renamed
    assert scan_ids(ns, "s.aa = 9") == [8, 9]
    assert_leaf_ids_are_the_namespace_ids(ns)
    assert all("s.a" not in leaf for leaf in leaf_ids(ns))

    # widen: int32 -> int64, the same id; a value only int64 holds lands in an old leaf
    ns.widen_column("s.aa", pa.int64())
    assert namespace_ids(ns)["s.aa"] == before["s.a"]
    big = pa.Table.from_pylist(
        [{"id": 10, "k": 0, "s": {"aa": 2**40, "b": {"c": "w"}, "x.y": 3, "z": 1}}],
        schema=ns.schema.arrow,
    )
    ns.append(big)
    renamed += big.to_pylist()
    assert rows_of(ns) == renamed
    assert scan_ids(ns, f"s.aa = {2**40}") == [10]
    assert_leaf_ids_are_the_namespace_ids(ns)
    ns.align_leaves()
    assert ns.validate() == []
    for row in manifest(ns).to_table(filter="object_type = 'table'").to_pylist():
        leaf = lance.dataset(
            os.path.join(ns_root(ns), row["location"]), version=row["read_version"]
        )
        assert leaf.schema.field("s").type.field("aa").type == pa.int64()

    # drop: the id is retired, never handed out again
    z = namespace_ids(ns)["s.z"]
    ns.drop_column("s.z")
    assert "s.z" not in namespace_ids(ns)
    dropped = [
        {**r, "s": None if r["s"] is None else {k: v for k, v in r["s"].items() if k != "z"}}
        for r in renamed
    ]
    assert rows_of(ns) == dropped
    assert_leaf_ids_are_the_namespace_ids(ns, retired={z})
    assert all("s.z" not in leaf for leaf in leaf_ids(ns))
    ns.add_column("s.z", pa.string())
    assert namespace_ids(ns)["s.z"] > z
    assert scan_ids(ns, "s.z IS NULL") == list(range(11))
    with pytest.raises(lp.FilterError, match=r"unknown field 's\.a'"):
        ns.scan("s.a = 1").to_arrow()
    assert ns.validate() == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda ns: ns.add_column("s.a", pa.int64()), "already exists"),
        (lambda ns: ns.add_column("q.z", pa.int64()), "no column 'q'"),
        (lambda ns: ns.add_column("k.z", pa.int64()), "not a struct"),
        (lambda ns: ns.rename_column("s.a", "b"), "has a field named 'b'"),
        (lambda ns: ns.rename_column("s.a", "s.b.a"), "stays in its struct"),
        (lambda ns: ns.rename_column("s.q", "r"), r"struct 's' has fields"),
        (lambda ns: ns.widen_column("s.a", pa.int16()), "only lossless widening"),
        (lambda ns: ns.drop_column("s.b.c"), "only field of struct 's.b'"),
        (lambda ns: ns.drop_column("s.q"), r"no field 's\.q'"),
    ],
)
def test_bad_struct_field_changes_are_refused_and_change_nothing(ns, tmp_path, change, message):
    before = tree_digest(tmp_path / "ns")
    with pytest.raises(lp.SchemaError, match=message):
        change(ns)
    assert tree_digest(tmp_path / "ns") == before


EVOLVED_FILTERS = [
    "s.a = 1",
    f"s.a > {2**31}",
    "s.a IS NULL",
    "s.z IS NULL",
    "s.z = 7",
    "s.b.c IN ('p', 'r') AND k < 2",
    "NOT (s.a <= 2) OR s.z > 5",
]


@pytest.mark.parametrize("flt", EVOLVED_FILTERS)
def test_filters_on_leaves_that_lag_the_struct(tmp_path, flt):
    """Old leaves lack ``s.z`` and store ``s.a`` as int32 while the namespace has int64:
    their rows are conformed field by field (by id) and filtered in the namespace's
    types, new leaves are filtered by Lance; both match DuckDB over the rows."""
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(rows())
    ns.add_column("s.z", pa.int64())
    ns.widen_column("s.a", pa.int64())
    new = pa.Table.from_pylist(
        [
            {"id": 8, "k": 5, "s": {"a": 2**40, "b": {"c": "r"}, "x.y": 1, "z": 7}},
            {"id": 9, "k": 6, "s": None},
            {"id": 10, "k": 5, "s": {"a": 1, "b": None, "x.y": None, "z": None}},
        ],
        schema=ns.schema.arrow,
    )
    ns.append(new)
    old = [
        {**r, "s": None if r["s"] is None else {**r["s"], "z": None}} for r in rows().to_pylist()
    ]
    source = pa.Table.from_pylist(old + new.to_pylist(), schema=ns.schema.arrow)
    duck = flt.replace("`x.y`", '"x.y"')
    expected = duckdb_ids(source, duck)
    assert scan_ids(ns, flt) == expected
    assert ns.count(flt) == len(expected)


def test_a_leaf_schema_can_carry_ids_of_fields_added_to_a_struct():
    """A struct field added after later columns has a larger id than they do, which
    Lance's depth-first numbering of a new dataset never gives; the leaf schema still
    carries exactly those ids (read back with plain pylance), also when a struct's
    first field was dropped."""
    from lance_partitioned.operations.leaf.field_ids import IdLayout

    s = pa.struct([("a", pa.int32()), ("b", INNER), ("z", pa.int64())])
    t = pa.struct([("w", pa.string())])
    arrow = pa.schema([("id", pa.int64()), ("s", s), ("t", t), ("k", pa.int32())])
    ids = [[0], [1, 2, 3, 4, 9], [10, 12], [5]]
    got = IdLayout.of(arrow, ids).lance_schema
    assert {f.name(): [i for _, i in _lance_paths(f, "")] for f in got.fields()} == {
        "id": [0],
        "s": [1, 2, 3, 4, 9],
        "t": [10, 12],
        "k": [5],
    }
    assert [p for f in got.fields() for p, _ in _lance_paths(f, "")] == [
        "id", "s", "s.a", "s.b", "s.b.c", "s.z", "k", "t", "t.w"
    ]  # fmt: skip


def test_fields_added_deeper_and_after_a_dropped_first_field(tmp_path):
    """A list added two levels down, a struct added to a struct whose first field was
    dropped: old and new leaves carry exactly the namespace's ids, old rows read NULL."""
    st = pa.struct([("a", pa.int32()), ("b", INNER)])
    schema = pa.schema([("x", pa.int64()), ("s", st), ("y", pa.int8())])
    ns = lp.create(str(tmp_path / "ns"), schema, "x")
    ns.append(
        pa.Table.from_pylist([{"x": 1, "s": {"a": 1, "b": {"c": "p"}}, "y": 1}], schema=schema)
    )
    ns.drop_column("s.a")
    ns.add_column("s.b.d", pa.list_(pa.int64()))
    ns.add_column("s.t", pa.struct([("u", pa.int64()), ("v", pa.struct([("w", pa.string())]))]))
    new = [
        {"x": 1, "s": {"b": {"c": "q", "d": [1, 2]}, "t": {"u": 5, "v": {"w": "z"}}}, "y": 2},
        {"x": 2, "s": {"b": {"c": "r", "d": None}, "t": None}, "y": 3},
    ]
    ns.append(pa.Table.from_pylist(new, schema=ns.schema.arrow))
    ids = namespace_ids(ns)
    assert ids["s.t.v.w"] == max(ids.values()) > ids["y"]
    for leaf in leaf_ids(ns):
        assert leaf == ids  # both leaves: every field, with the namespace's id
    old = {"x": 1, "s": {"b": {"c": "p", "d": None}, "t": None}, "y": 1}
    assert sorted(ns.to_arrow().to_pylist(), key=lambda r: r["y"]) == [old, *new]
    assert sorted(ns.scan("s.t.v.w = 'z' OR s.b.c = 'p'").to_arrow()["y"].to_pylist()) == [1, 2]
    assert ns.validate() == []
