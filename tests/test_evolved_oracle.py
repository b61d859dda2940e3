"""Filters over evolved namespaces equal an independent oracle (issue 28 A1, B4, B5, B6).

One namespace per module is built in three steps: rows written with the original
types; every column widened (each integer and float widening, a decimal), one
renamed and one dropped and added again under its old name; then rows written
into new partitions (leaves with the new types) and into one old partition (a
write that widens that leaf first). So leaves that lag a widening, leaves
widened by a write and leaves born wide all answer one filter.

The oracle is ``pyarrow.compute`` over the source rows cast to the namespace
types (seed 003 §4: the namespace type takes precedence), with the re-added
column NULL in rows written before it was added. Literals sit at the edges of
both the old and the new type (``int8`` -128/127 and one beyond, 2**31,
``uint32`` max, float32's largest finite value, ``0.1``, ``16777217``, ±inf,
decimals finer than the scale).
"""

from __future__ import annotations

import decimal
import math

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle_filters import And, Between, Cmp, InList, IsNull, Lit, Not, Or, expected_ids, to_sql

import lance_partitioned as lp
from lance_partitioned.catalog.commit_info import CommitInfo

D = decimal.Decimal
SETTINGS = dict(
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

OLD = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("p", pa.int32()),
        pa.field("i8", pa.int8()),
        pa.field("i16", pa.int16()),
        pa.field("i32", pa.int32()),
        pa.field("u32", pa.uint32()),
        pa.field("f32", pa.float32()),
        pa.field("dec", pa.decimal128(5, 2)),
        pa.field("gone", pa.string()),
    ]
)
WIDER = {
    "i8": pa.int16(),
    "i16": pa.int32(),
    "i32": pa.int64(),
    "u32": pa.int64(),
    "f32": pa.float64(),
    "dec": pa.decimal128(12, 2),
}
F32_MAX = float(np.finfo(np.float32).max)
EDGE_INTS = [-128, 127, -32768, 32767, -(2**31), 2**31 - 1, 0, 1, -1, 5, 2**32 - 1]
EDGE_FLOATS = [math.inf, -math.inf, float(np.float32(0.1)), 16777216.0, F32_MAX, -F32_MAX, 1.0]
EDGE_DECS = [D("999.99"), D("-999.99"), D("0.10"), D("0.11"), D("1.00"), D("0")]


def _column(rng: np.random.Generator, pool: list, n: int) -> list:
    vals = [pool[k] for k in rng.integers(0, len(pool), n)]
    return [None if rng.random() < 0.08 else v for v in vals]


def _old_rows(rng: np.random.Generator, ids: range, parts: list[int]) -> pa.Table:
    n = len(ids)
    ints = lambda t: [  # noqa: E731
        v
        for v in EDGE_INTS
        if np.iinfo(t.to_pandas_dtype()).min <= v <= np.iinfo(t.to_pandas_dtype()).max
    ]
    cols = {
        "id": pa.array(ids, pa.int64()),
        "p": pa.array([parts[k] for k in rng.integers(0, len(parts), n)], pa.int32()),
        "gone": pa.array(_column(rng, ["secret-a", "secret-b"], n)),
    }
    for name in ("i8", "i16", "i32", "u32"):
        t = OLD.field(name).type
        cols[name] = pa.array(_column(rng, ints(t), n), t)
    cols["f32"] = pa.array(_column(rng, EDGE_FLOATS, n), pa.float32())
    cols["dec"] = pa.array(_column(rng, EDGE_DECS, n), pa.decimal128(5, 2))
    return pa.table(cols, schema=OLD)


def _new_rows(rng: np.random.Generator, ids: range, parts: list[int], schema: pa.Schema):
    """Rows in the evolved schema, with values only the wider types hold."""
    n = len(ids)
    big_ints = [*EDGE_INTS, 200, -129, 40000, 2**31, 3_000_000_000, -3_000_000_000, 2**40]
    cols: dict[str, pa.Array] = {
        "id": pa.array(ids, pa.int64()),
        "p": pa.array([parts[k] for k in rng.integers(0, len(parts), n)], pa.int32()),
        "gone": pa.array(_column(rng, ["new-a", "new-b"], n)),
    }
    for name in ("i8", "i16", "i32", "u32"):
        t = schema.field(name if name != "i16" else "i16r").type
        lo, hi = np.iinfo(t.to_pandas_dtype()).min, np.iinfo(t.to_pandas_dtype()).max
        key = name if name != "i16" else "i16r"
        if name == "u32":
            lo = 0
        cols[key] = pa.array(_column(rng, [v for v in big_ints if lo <= v <= hi], n), t)
    cols["f32"] = pa.array(_column(rng, [*EDGE_FLOATS, 0.1, 16777217.0, 1e300, 3.5e38], n))
    cols["dec"] = pa.array(
        _column(rng, [*EDGE_DECS, D("1000.00"), D("-1234567.89")], n), pa.decimal128(12, 2)
    )
    return pa.table(cols).select(schema.names).cast(schema)


@pytest.fixture(scope="module")
def evolved(tmp_path_factory):
    rng = np.random.default_rng(28)
    root = str(tmp_path_factory.mktemp("evolved") / "ns")
    first = _old_rows(rng, range(0, 300), [1, 2, 3])
    ns = lp.create(root, OLD, "p")
    ns.append(first)
    for name, t in WIDER.items():
        ns.widen_column(name, t)
    ns.rename_column("i16", "i16r")
    ns.drop_column("gone")
    ns.add_column("gone", pa.string())
    schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in ns.schema.arrow])
    later = _new_rows(rng, range(300, 500), [3, 4, 5], schema)
    ns.append(later)
    # the source rows in namespace form: old rows cast up, the re-added column NULL
    old = first.rename_columns(["i16r" if c == "i16" else c for c in first.column_names])
    old = old.set_column(old.schema.get_field_index("gone"), "gone", pa.nulls(300, pa.string()))
    source = pa.concat_tables([old.select(schema.names).cast(schema), later])
    return lp.open(root), source


@pytest.fixture(scope="module")
def widened_only(tmp_path_factory):
    """Every leaf lags every widening: rows written, then the columns widened."""
    first = _old_rows(np.random.default_rng(5), range(0, 300), [1, 2])
    ns = lp.create(str(tmp_path_factory.mktemp("widened") / "ns"), OLD, "p")
    ns.append(first)
    for name, t in WIDER.items():
        ns.widen_column(name, t)
    schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in ns.schema.arrow])
    return lp.open(ns.root), first.cast(schema)


def test_the_namespace_has_lagging_widened_and_new_leaves(evolved):
    ns, _ = evolved
    types = {}
    for task in ns.plan():
        leaf = lance.dataset(task.uri, version=task.read_version)
        types[task.partition_values["p"]] = leaf.schema.field("i32").type
    assert types == {1: pa.int32(), 2: pa.int32(), 3: pa.int64(), 4: pa.int64(), 5: pa.int64()}


def _lits(t: pa.DataType) -> st.SearchStrategy[Lit]:
    if pa.types.is_floating(t):
        values = [*EDGE_FLOATS, 0.1, 16777217.0, 1e300, -1e300, 3.5e38, 0.0, 2.5]
        return st.sampled_from([Lit(_float_sql(v), v, pa.float64()) for v in values])
    if pa.types.is_decimal(t):
        fine = [D("0.105"), D("0.1"), D("999.995"), D("-1000.001"), D("1000")]
        lits = [Lit(format(v, "f"), v, pa.decimal128(12, 2)) for v in EDGE_DECS]
        lits += [Lit(format(v, "f"), v, pa.decimal128(16, 3)) for v in fine]
        return st.sampled_from(lits)
    ints = [*EDGE_INTS, 128, -129, 200, 2**31, 3_000_000_000, -3_000_000_000, 2**32, 2**63 - 1]
    lits = [Lit(str(v), D(v), pa.decimal128(38, 0)) for v in ints]
    lits += [
        Lit("2.5", D("2.5"), pa.decimal128(38, 1)),
        Lit("-128.5", D("-128.5"), pa.decimal128(38, 1)),
    ]
    return st.sampled_from(lits)


def _float_sql(v: float) -> str:
    return f"'{v}'" if math.isinf(v) else repr(v)


@st.composite
def evolved_filters(draw, schema: pa.Schema, depth: int = 0):
    kinds = ["cmp", "cmp", "cmp", "in", "between", "null"]
    kind = draw(st.sampled_from(kinds + (["and", "or", "not"] if depth < 2 else [])))
    if kind in ("and", "or"):
        a, b = draw(evolved_filters(schema, depth + 1)), draw(evolved_filters(schema, depth + 1))
        return And(a, b) if kind == "and" else Or(a, b)
    if kind == "not":
        return Not(draw(evolved_filters(schema, depth + 1)))
    col = draw(st.sampled_from(["i8", "i16r", "i32", "u32", "f32", "dec", "gone"]))
    if col == "gone":
        return IsNull(col, draw(st.booleans()))
    lits = _lits(schema.field(col).type)
    if kind == "cmp":
        return Cmp(col, draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="])), draw(lits))
    if kind == "in":
        return InList(col, tuple(draw(st.lists(lits, min_size=1, max_size=3))), draw(st.booleans()))
    if kind == "between":
        return Between(col, draw(lits), draw(lits), draw(st.booleans()))
    return IsNull(col, draw(st.booleans()))


def _source_schema() -> pa.Schema:
    fields = [
        pa.field("i16r" if f.name == "i16" else f.name, WIDER.get(f.name, f.type)) for f in OLD
    ]
    return pa.schema(fields)


@settings(**SETTINGS)
@given(node=evolved_filters(_source_schema()))
def test_random_filters_over_an_evolved_namespace(evolved, node):
    ns, source = evolved
    sql = to_sql(node)
    want = expected_ids(source, node)
    got = sorted(ns.scan(sql, columns=["id"]).to_arrow()["id"].to_pylist())
    assert got == want, sql
    assert ns.count(sql) == len(want), sql


@pytest.mark.parametrize(
    ("sql", "expr"),
    [
        # A1: a float32 leaf under a float64 column compares in float64
        ("f32 = 1e300", pc.equal(pc.field("f32"), 1e300)),
        ("f32 = 0.1", pc.equal(pc.field("f32"), 0.1)),
        ("f32 = 16777217", pc.equal(pc.field("f32"), 16777217.0)),
        ("f32 > 0.1", pc.greater(pc.field("f32"), 0.1)),
        # B4: an int32 leaf under an int64 column takes literals only int64 holds
        ("i32 = 3000000000", pc.equal(pc.field("i32"), 3_000_000_000)),
        ("i32 > 2147483647", pc.greater(pc.field("i32"), 2_147_483_647)),
        ("i32 IN (3000000000)", pc.equal(pc.field("i32"), 3_000_000_000)),
        ("i32 < -3000000000", pc.less(pc.field("i32"), -3_000_000_000)),
        ("i8 > 200", pc.greater(pc.field("i8"), 200)),
    ],
)
def test_lagging_leaves_compare_in_the_namespace_type(widened_only, sql, expr):
    ns, source = widened_only
    want = sorted(source.filter(expr)["id"].to_pylist())
    assert sorted(ns.scan(sql).to_arrow()["id"].to_pylist()) == want
    assert ns.count(sql) == len(want)


def test_delete_on_lagging_leaves_matches_the_oracle(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), pa.schema([("p", pa.int32()), ("v", pa.float32())]), "p")
    ns.append(
        pa.table({"p": pa.array([1] * 4, pa.int32()), "v": pa.array(EDGE_FLOATS[:4], pa.float32())})
    )
    ns.widen_column("v", pa.float64())
    rows = ns.scan().to_arrow()
    ns.delete("v = 0.1 OR v = 1e300")  # no float64 row equals either: nothing deleted
    assert ns.scan().to_arrow().sort_by("v").equals(rows.sort_by("v"))
    ns.delete("v > 0.1")
    keep = rows.filter(pc.invert(pc.greater(rows["v"], 0.1)))
    assert ns.scan().to_arrow().sort_by("v").equals(keep.sort_by("v"))


def test_dropped_values_never_reach_a_reader_by_name(evolved):
    """B6: after drop_column + add_column of the same name, no leaf exposes the old values."""
    ns, _ = evolved
    for task in ns.plan():
        leaf = lance.dataset(task.uri, version=task.read_version)
        if "gone" in leaf.schema.names:
            assert not any(
                v and v.startswith("secret") for v in leaf.to_table()["gone"].to_pylist()
            )
        assert "i16" not in leaf.schema.names  # renamed in every leaf too
    assert ns.validate() != []  # partitions 1 and 2 still lag the widenings
    assert all("lags the namespace" in p for p in ns.validate())


def test_drop_then_add_of_a_name_leaves_no_old_values_in_any_leaf(tmp_path):
    """B6 on its own: the dropped column leaves every leaf in the drop's own operation."""
    schema = pa.schema([("p", pa.int32()), ("c", pa.string()), ("k", pa.int32())])
    ns = lp.create(str(tmp_path / "ns"), schema, "p")
    ns.append(pa.table({"p": [1, 1, 2], "c": ["s1", "s2", "s3"], "k": [1, 2, 3]}, schema=schema))
    ns.drop_column("c")
    ns.add_column("c", pa.string())
    for task in ns.plan():
        leaf = lance.dataset(task.uri, version=task.read_version)
        assert "c" not in leaf.schema.names
    assert ns.scan().to_arrow()["c"].null_count == 3
    assert ns.validate() == []


def test_align_leaves_widens_every_lagging_leaf_in_one_commit(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), pa.schema([("p", pa.int32()), ("v", pa.float32())]), "p")
    ns.append(
        pa.table(
            {"p": pa.array([1, 2, 3], pa.int32()), "v": pa.array([0.5, 1.5, 2.5], pa.float32())}
        )
    )
    ns.widen_column("v", pa.float64())
    before, rows = ns.version, ns.scan().to_arrow()
    report = ns.align_leaves()
    assert report.version == before + 1 and len(report.leaves_aligned) == 3
    assert ns.scan().to_arrow().sort_by("p").equals(rows.sort_by("p"))
    for task in ns.plan():
        leaf = lance.dataset(task.uri, version=task.read_version)
        assert leaf.schema.field("v").type == pa.float64()
        assert {f.name(): f.id() for f in leaf.lance_schema.fields()} == {"p": 0, "v": 1}
    assert ns.validate() == []
    assert ns.align_leaves().leaves_aligned == [] and ns.version == before + 1


@settings(**SETTINGS)
@given(
    col=st.sampled_from(["i8", "i16r", "i32", "u32", "f32", "dec"]),
    data=st.data(),
    negated=st.booleans(),
    outer=st.sampled_from(["alone", "not", "and", "or"]),
)
def test_is_distinct_from_over_an_evolved_namespace(evolved, col, data, negated, outer):
    """IS [NOT] DISTINCT FROM follows the literal rule of ``=`` on lagging leaves too."""
    ns, source = evolved
    lit = data.draw(_lits(_source_schema().field(col).type))
    same = pc.coalesce(pc.equal(pc.field(col), lit.scalar()), pa.scalar(False))
    expr = ~same if negated else same
    sql = f"{col} IS {'' if negated else 'NOT '}DISTINCT FROM {lit.sql}"
    if outer in ("and", "or"):
        other = data.draw(evolved_filters(_source_schema()))
        sql = f"({sql}) {outer.upper()} ({to_sql(other)})"
        from oracle_filters import to_pc

        expr = (expr & to_pc(other)) if outer == "and" else (expr | to_pc(other))
    elif outer == "not":
        sql, expr = f"NOT ({sql})", ~expr
    want = sorted(source.filter(expr)["id"].to_pylist())
    assert sorted(ns.scan(sql, columns=["id"]).to_arrow()["id"].to_pylist()) == want, sql


def test_validate_reports_a_dropped_column_a_leaf_still_names_and_align_removes_it(tmp_path):
    """A namespace whose drop_column did not reach its leaves (written before, or a crash
    between the schema commit and the leaves' commit): validate names the clash, and
    align_leaves removes the old column in one commit."""
    schema = pa.schema([("p", pa.int32()), ("c", pa.string())])
    ns = lp.create(str(tmp_path / "ns"), schema, "p")
    ns.append(pa.table({"p": [1, 2], "c": ["secret1", "secret2"]}, schema=schema))
    # the schema changes alone, as before drop_column reached the leaves
    ns._evolve_schema(lambda s: s.drop_column("c"), CommitInfo("drop_column", {"name": "c"}))
    ns._evolve_schema(
        lambda s: s.add_column(pa.field("c", pa.string())), CommitInfo("add_column", {"name": "c"})
    )
    problems = lp.open(ns.root).validate()
    assert len(problems) == 2 and all("holds a dropped column" in p for p in problems)
    assert ns.align_leaves().leaves_aligned != []
    assert lp.open(ns.root).validate() == []
    for task in lp.open(ns.root).plan():
        leaf = lance.dataset(task.uri, version=task.read_version)
        assert "c" not in leaf.schema.names
    assert lp.open(ns.root).scan().to_arrow()["c"].null_count == 2
