"""``IS [NOT] DISTINCT FROM`` follows the literal rules of ``=`` (FORMAT.md §7).

``x IS NOT DISTINCT FROM v`` is TRUE when ``x = v`` and FALSE otherwise (NULL
included); ``IS DISTINCT FROM`` is its negation. A literal the column's type cannot
hold exactly (``1e300`` or ``0.1`` on float32, ``200`` on int8, ``2.5`` on int32,
``0.105`` on decimal(12, 2)) compares by value, as with ``=``: before, Lance cast
it to the column's type (float32 ``1e300`` is +inf) or refused it.

The expected rows come from ``pyarrow.compute`` over the source rows: ``pc.equal``
with the column widened to a type that holds both sides exactly (float64 or
decimal(38, 10)), NULL read as FALSE.
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datafusion import SessionContext

import lance_partitioned as lp

D = decimal.Decimal
INF = float("inf")

TABLE = pa.table(
    {
        "id": pa.array(range(9), pa.int64()),
        "f32": pa.array(
            [INF, 0.1, 16777216, 1.0, None, -INF, float("nan"), 2.5, 0.0], pa.float32()
        ),
        "i8": pa.array([-128, 127, 0, None, 5, 2, -1, 100, 127], pa.int8()),
        "i32": pa.array([1, 2, 3, None, 2**31 - 1, -(2**31), 0, 5, 2], pa.int32()),
        "dec": pa.array(
            [D("0.10"), D("0.11"), None, D("1.00"), D("2"), D("-0.10"), D("0.1"), D("9.99"), None],
            pa.decimal128(12, 2),
        ),
    }
)

# the type each column is widened to for the oracle, so no literal is rounded
_EXACT = pa.decimal128(38, 10)  # holds every int32 and each literal below exactly
_WIDE = {"f32": pa.float64(), "i8": _EXACT, "i32": _EXACT, "dec": _EXACT}

# (column, literal as SQL text, the literal's exact value as a pyarrow scalar)
CASES = [
    ("f32", "1e300", pa.scalar(1e300)),
    ("f32", "0.1", pa.scalar(0.1)),
    ("f32", "1e-1", pa.scalar(0.1)),
    ("f32", "16777217", pa.scalar(16777217.0)),
    ("f32", "16777216", pa.scalar(16777216.0)),
    ("f32", "CAST('inf' AS DOUBLE)", pa.scalar(INF)),
    ("f32", "3.5e38", pa.scalar(3.5e38)),
    ("f32", "2.5", pa.scalar(2.5)),
    ("i8", "200", pa.scalar(200)),
    ("i8", "-129", pa.scalar(-129)),
    ("i8", "127", pa.scalar(127)),
    ("i8", "-128", pa.scalar(-128)),
    ("i8", "5.0", pa.scalar(5.0)),
    ("i32", "3000000000", pa.scalar(3_000_000_000)),
    ("i32", "2.5", pa.scalar(D("2.5"))),
    ("i32", "2147483647", pa.scalar(2**31 - 1)),
    ("i32", "'2'", pa.scalar(2)),
    ("dec", "0.105", pa.scalar(D("0.105"))),
    ("dec", "0.1", pa.scalar(D("0.1"))),
    ("dec", "2", pa.scalar(D(2))),
    ("dec", "1e20", pa.scalar(D(10**20))),
]


def oracle(column: str, value: pa.Scalar | None, distinct: bool, negate: bool = False) -> list[int]:
    """The ids ``column IS [NOT] DISTINCT FROM value`` keeps (under a NOT when ``negate``)."""
    x = TABLE[column].cast(_WIDE[column])
    if value is None:
        same = pc.is_null(x)
    else:
        same = pc.fill_null(pc.equal(x, value.cast(_WIDE[column])), False)
    keep = pc.invert(same) if distinct != negate else same
    return sorted(TABLE.filter(keep)["id"].to_pylist())


@pytest.fixture(scope="module")
def ns(tmp_path_factory) -> lp.PartitionedNamespace:
    out = lp.create(str(tmp_path_factory.mktemp("distinct") / "ns"), TABLE.schema, "i8")
    out.append(TABLE)
    return out


def _ids(ns: lp.PartitionedNamespace, flt) -> list[int]:
    return sorted(ns.scan(flt).to_arrow()["id"].to_pylist())


@pytest.mark.parametrize(("column", "text", "value"), CASES, ids=lambda x: str(x))
@pytest.mark.parametrize("distinct", [False, True], ids=["not_distinct", "distinct"])
def test_literal_follows_the_rules_of_equals(ns, column, text, value, distinct):
    op = "IS DISTINCT FROM" if distinct else "IS NOT DISTINCT FROM"
    expected = oracle(column, value, distinct)
    for flt in (f"{column} {op} {text}", f"{text} {op} {column}"):
        assert _ids(ns, flt) == expected, flt
        assert ns.count(flt) == len(expected), flt
    # never NULL, so a NOT around it is its exact negation
    negated = f"NOT ({column} {op} {text})"
    assert _ids(ns, negated) == oracle(column, value, distinct, negate=True), negated


@pytest.mark.parametrize("column", ["f32", "i8", "i32", "dec"])
def test_null_literal(ns, column):
    assert _ids(ns, f"{column} IS NOT DISTINCT FROM NULL") == oracle(column, None, False)
    assert _ids(ns, f"{column} IS DISTINCT FROM NULL") == oracle(column, None, True)


def test_datafusion_expr_gets_the_same_rules(ns):
    frame = SessionContext().from_arrow(TABLE)
    for column, text, value in CASES:
        for distinct in (False, True):
            op = "IS DISTINCT FROM" if distinct else "IS NOT DISTINCT FROM"
            expr = frame.parse_sql_expr(f"{column} {op} {text}")
            assert _ids(ns, expr) == oracle(column, value, distinct), f"{column} {op} {text}"


def test_prunes_like_equals(ns):
    """The identity partitions on i8 prune ``IS NOT DISTINCT FROM`` as they prune ``=``."""
    assert len(ns.plan("i8 IS NOT DISTINCT FROM 5")) == 1
    # an inexact literal does not prune (as with ``=``), but IS NOT NULL still does
    assert len(ns.plan("i8 IS NOT DISTINCT FROM 200")) == len(ns.plan("i8 IS NOT NULL"))
    assert len(ns.plan("i8 IS NOT DISTINCT FROM NULL")) == 1
    # every partition but i8 = 5, the NULL partition included
    assert len(ns.plan("i8 IS DISTINCT FROM 5")) == len(ns.plan()) - 1
