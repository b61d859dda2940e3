"""Long and deeply nested filters (FORMAT.md §7 "Long and nested filters").

Generated filters (a list of ids from another system) reach thousands of terms: an
OR chain of 10,000 equalities, an IN list of 10,000 values, and chains nested in
parentheses by a code generator. They used to raise Python's RecursionError from
1,600 ORs or 100 parentheses. Now chains of any length are read in a loop and
built as balanced trees (equalities on one column as one IN list), expressions may
nest 1,000 levels, and past that, or past what Lance's own SQL parser reads, a
FilterError names the limit. The expected rows come from ``pyarrow.compute``
(``is_in``) over the source rows.
"""

from __future__ import annotations

import functools
import operator
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.errors import FilterError
from lance_partitioned.format.expressions import In
from lance_partitioned.format.filters.parse import parse_filter
from lance_partitioned.format.filters.visitor import nesting

ROWS = 12_000
TABLE = pa.table(
    {
        "id": pa.array(range(ROWS), pa.int64()),
        "k": pa.array([i % 4 for i in range(ROWS)], pa.int64()),
        "x": pa.array([None if i % 97 == 0 else i * 3 for i in range(ROWS)], pa.int64()),
    }
)
WANTED = list(range(0, 3 * ROWS, 7))[:10_000]  # every 7th value: some rows match, some not


def oracle(column: str, values: list[int], keep: bool = True) -> list[int]:
    member = pc.is_in(TABLE[column], value_set=pa.array(values, pa.int64()))
    mask = member if keep else pc.and_(pc.invert(member), pc.is_valid(TABLE[column]))
    return sorted(TABLE.filter(mask)["id"].to_pylist())


def make(root) -> lp.PartitionedNamespace:
    ns = lp.create(str(root), TABLE.schema, "k")
    ns.append(TABLE)
    return ns


@pytest.fixture(scope="module")
def ns(tmp_path_factory) -> lp.PartitionedNamespace:
    return make(tmp_path_factory.mktemp("long") / "ns")


def _ids(ns: lp.PartitionedNamespace, flt) -> list[int]:
    return sorted(ns.scan(flt).to_arrow()["id"].to_pylist())


OR_CHAIN = " OR ".join(f"x = {v}" for v in WANTED)
IN_LIST = f"x IN ({', '.join(map(str, WANTED))})"


@pytest.mark.parametrize("flt", [OR_CHAIN, IN_LIST], ids=["or_chain", "in_list"])
def test_ten_thousand_values_scan_count_plan_and_delete(ns, tmp_path, flt):
    expected = oracle("x", WANTED)
    assert 0 < len(expected) < ROWS
    assert _ids(ns, flt) == expected
    assert ns.count(flt) == len(expected)
    assert len(ns.plan(flt)) == 4
    doomed = make(tmp_path / "ns")
    doomed.delete(flt)
    assert sorted(doomed.to_arrow()["id"].to_pylist()) == sorted(set(range(ROWS)) - set(expected))
    # and its negation, NULLs kept out as SQL's three-valued NOT keeps them out
    assert ns.count(f"NOT ({flt})") == len(oracle("x", WANTED, keep=False))


def test_ten_thousand_values_on_the_partition_column_prune(ns):
    chain = " OR ".join(f"k = {v}" for v in [1, 3, *range(10, 10_008)])
    assert len(ns.plan(chain)) == 2
    assert ns.count(chain) == len(oracle("k", [1, 3]))


def test_an_or_chain_is_a_shallow_balanced_tree():
    expr = parse_filter(" OR ".join(f"(x = {v} AND k = 1)" for v in range(10_000)))
    assert nesting(expr) == 2  # OR of ANDs, however long
    depth, level = 0, [expr]
    while level:
        depth += 1
        level = [
            c for n in level for c in (getattr(n, "left", None), getattr(n, "right", None)) if c
        ]
    assert depth <= 16  # log2(10,000) + the ANDs
    merged = parse_filter(OR_CHAIN)
    assert isinstance(merged, In) and len(merged.values) == len(WANTED)


def _left_nested(n: int) -> str:
    """``((x = v0 OR x = v1) OR x = v2) …``, as a code generator folds a list."""
    text = f"x = {WANTED[0]}"
    for v in WANTED[1:n]:
        text = f"({text} OR x = {v})"
    return text


def test_nesting_a_thousand_levels(ns):
    limit = sys.getrecursionlimit()
    assert _ids(ns, "(" * 1000 + "x = 3" + ")" * 1000) == oracle("x", [3])
    assert _ids(ns, _left_nested(1000)) == oracle("x", WANTED[:1000])
    assert ns.count("NOT " * 1001 + "x = 3") == len(oracle("x", [3], keep=False))
    assert ns.count("x = " + "- " * 1000 + "3") == 1  # an even number of signs
    assert sys.getrecursionlimit() == limit  # the room made for the parse is given back


def test_deeper_than_the_limit_is_a_filter_error(ns):
    with pytest.raises(FilterError, match="more than 1000 levels deep"):
        ns.count("(" * 1001 + "x = 3" + ")" * 1001)
    with pytest.raises(FilterError, match="more than 1000 levels deep"):
        ns.scan("abs(" * 1001 + "x" + ")" * 1001 + " = 3")


def test_alternations_lance_cannot_read_are_a_filter_error(ns):
    """AND inside OR inside AND …: each level needs parentheses in SQL, and Lance's
    parser stops at some 30. Refused before any read, with Lance's reason."""
    text = "x = 0"
    for k in range(200):
        text = f"(x = {k + 1} {'AND' if k % 2 else 'OR'} {text})"
    for call in (ns.count, ns.plan, ns.delete, lambda f: ns.scan(f).to_arrow()):
        with pytest.raises(FilterError, match="Lance's SQL parser") as info:
            call(text)
        assert ".rs:" not in str(info.value)
    assert ns.count() == ROWS  # the refused delete changed nothing


def test_long_pyarrow_and_datafusion_expressions(ns):
    from datafusion import col, lit

    values = WANTED[:1000]
    chain = functools.reduce(operator.or_, [pc.field("x") == v for v in values])
    assert _ids(ns, chain) == oracle("x", values)
    assert _ids(ns, pc.field("x").isin(WANTED)) == oracle("x", WANTED)
    df_chain = functools.reduce(operator.or_, [col("x") == lit(v) for v in values[:500]])
    assert ns.count(df_chain) == len(oracle("x", values[:500]))
    deep = pc.field("x") == 3
    for _ in range(30_000):
        deep = ~deep
    with pytest.raises(FilterError, match="more than 1000 levels deep") as info:
        ns.count(deep)
    # the message quotes the start of the 240,000-character expression, not all of it
    assert len(str(info.value)) < 1000
    assert f"({len(str(deep)):,} characters)" in str(info.value)
