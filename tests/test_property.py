"""Property: for random data, random specs over every transform, and random filters,
the pruned scan returns exactly the rows pyarrow's filter keeps from the raw data.

The filters are ``oracle_filters`` trees: test code renders each one as SQL text for
the scan and as a ``pyarrow.compute`` expression for the expectation, so no part of
the expectation comes from our parser, binder or ``to_pyarrow``."""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle_filters import And, Cmp, InList, IsNull, Like, Lit, Not, Or, sql_string, to_pc, to_sql

import lance_partitioned as lp

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        pa.field("i", pa.int64()),
        pa.field("j", pa.int32()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("s", pa.string()),
    ]
)

ints = st.one_of(st.none(), st.integers(-50, 50))
dates = st.one_of(st.none(), st.dates(dt.date(2022, 11, 1), dt.date(2024, 3, 1)))
stamps = st.one_of(
    st.none(),
    st.datetimes(dt.datetime(2024, 12, 30), dt.datetime(2025, 1, 3)).map(
        lambda x: x.replace(microsecond=0, tzinfo=UTC)
    ),
)
strings = st.one_of(
    st.none(), st.sampled_from(["", "a", "ab", "abc", "abd", "b", "ba", "Zz", "é", "a%", "日本"])
)

row = st.fixed_dictionaries({"i": ints, "j": ints, "d": dates, "ts": stamps, "s": strings})

SPEC_TERMS = [
    "i",
    "bucket(4, i)",
    "truncate(10, i)",
    "j",
    "bucket(3, j)",
    "truncate(7, j)",
    "year(d)",
    "month(d)",
    "day(d)",
    "d",
    "year(ts)",
    "month(ts)",
    "day(ts)",
    "hour(ts)",
    "s",
    "truncate(1, s)",
    "bucket(2, s)",
    "multi_bucket(3, i, s)",
]


@st.composite
def specs(draw):
    terms = draw(st.lists(st.sampled_from(SPEC_TERMS), min_size=0, max_size=3, unique=True))
    # a calendar hierarchy is the interesting case for ranges
    if draw(st.booleans()):
        terms = ["year(d)", "month(d)", *[t for t in terms if t not in ("year(d)", "month(d)")]][:4]
    return ", ".join(terms)


def literal_for(col: str):
    """Literals near the data of ``col``, each spelled in SQL by this test."""
    t = SCHEMA.field(col).type
    if col in ("i", "j"):
        return st.integers(-55, 55).map(lambda v: Lit(str(v), v, t))
    if col == "d":
        return st.dates(dt.date(2022, 10, 1), dt.date(2024, 4, 1)).map(
            lambda v: Lit(f"DATE '{v.isoformat()}'", v, t)
        )
    if col == "ts":
        # a UTC column: an offset-less literal is UTC wall-clock time either way
        return st.tuples(
            st.datetimes(dt.datetime(2024, 12, 29), dt.datetime(2025, 1, 4)),
            st.sampled_from(["", "+00:00", "Z"]),
        ).map(
            lambda p: Lit(
                f"TIMESTAMP '{p[0].replace(microsecond=0).isoformat(sep=' ')}{p[1]}'",
                p[0].replace(microsecond=0, tzinfo=UTC),
                t,
            )
        )
    return st.sampled_from(["", "a", "ab", "abc", "b", "Zz", "é", "zz"]).map(
        lambda v: Lit(sql_string(v), v, t)
    )


ALL_COLUMNS = ["i", "j", "d", "ts", "s"]


def spec_columns(spec: str) -> list[str]:
    """Columns a spec partitions by, so filters can favour them."""
    import re

    return [c for c in ALL_COLUMNS if re.search(rf"\b{c}\b", spec)]


@st.composite
def predicates(draw, columns: list[str], depth: int = 0):
    kinds = ["cmp", "cmp", "cmp", "in", "null", "like", "and", "and", "or", "not"]
    kind = draw(st.sampled_from(kinds if depth < 2 else ["cmp", "cmp", "in", "null"]))
    col = draw(st.sampled_from(columns * 3 + ALL_COLUMNS))
    if kind == "cmp":
        return Cmp(
            col, draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="])), draw(literal_for(col))
        )
    if kind == "in":
        vals = draw(st.lists(literal_for(col), min_size=1, max_size=4))
        return InList(col, tuple(vals), draw(st.booleans()))
    if kind == "null":
        return IsNull(col, draw(st.booleans()))
    if kind == "like":
        return Like(
            "s",
            draw(st.sampled_from(["a%", "ab%", "abc%", "%b", "b%", "é%", "_b%"])),
            draw(st.booleans()),
        )
    if kind == "not":
        return Not(draw(predicates(columns, depth + 1)))
    left, right = draw(predicates(columns, depth + 1)), draw(predicates(columns, depth + 1))
    return And(left, right) if kind == "and" else Or(left, right)


EXPRESSIONS = [
    ("i", "murmur3(col0) % 5", pa.int32()),
    ("i", "col0 / 10", pa.int64()),
    ("d", "date_part('year', col0)", pa.int32()),
    ("s", "left(col0, 1)", pa.string()),
]


@st.composite
def spec_versions(draw):
    """One to three spec versions, some with DataFusion expression fields."""
    return [
        (draw(specs()), draw(st.lists(st.sampled_from(EXPRESSIONS), max_size=1)))
        for _ in range(draw(st.integers(1, 3)))
    ]


def build_spec(ns, text, expressions, spec_id):
    from lance_partitioned import PartitionField, PartitionSpec, parse_spec

    base = parse_spec(text, ns.schema, spec_id=spec_id, existing=ns.specs.values())
    extra = tuple(
        PartitionField(f"e{spec_id}_{k}", (ns.schema.field_id(col),), rtype, expression=expr)
        for k, (col, expr, rtype) in enumerate(expressions)
    )
    return PartitionSpec(spec_id, base.fields + extra)


counter = itertools.count()


def multiset(t: pa.Table) -> Counter:
    return Counter(zip(*[t.column(c).to_pylist() for c in SCHEMA.names], strict=True))


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(rows=st.lists(row, min_size=15, max_size=60), spec=specs(), data=st.data())
def test_pruned_scan_equals_filtered_data(tmp_path, rows, spec, data):
    flt = data.draw(predicates(spec_columns(spec)), label="filter")
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    ns = lp.create(str(tmp_path / f"ns{next(counter)}"), SCHEMA, spec)
    ns.append(table)
    expected = table.filter(to_pc(flt))
    # through the SQL text, as users write it
    sql = to_sql(flt)
    got = ns.scan(sql).to_arrow()
    assert multiset(got) == multiset(expected), (spec, sql)
    assert ns.count(sql) == expected.num_rows


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(rows=st.lists(row, min_size=15, max_size=60), versions=spec_versions(), data=st.data())
def test_pruning_across_spec_versions_and_expressions(tmp_path, rows, versions, data):
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    ns = lp.create(str(tmp_path / f"ev{next(counter)}"), SCHEMA, "")
    chunk = max(1, table.num_rows // len(versions))
    columns = []
    for k, (text, expressions) in enumerate(versions):
        # the next version's id: evolving to the current spec again is a no-op
        ns.evolve_spec(build_spec(ns, text, expressions, spec_id=max(ns.specs) + 1))
        ns.append(table.slice(k * chunk, chunk if k < len(versions) - 1 else None))
        columns += spec_columns(text) + [c for c, _, _ in expressions]
    flt = data.draw(predicates(columns), label="filter")
    expected = table.filter(to_pc(flt))
    got = ns.scan(to_sql(flt)).to_arrow()
    assert multiset(got) == multiset(expected), (versions, to_sql(flt))
