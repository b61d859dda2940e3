"""Filters Lance cannot evaluate as a condition, and ``open()`` version arguments of
the wrong kind, get our clear error before anything is read or written (issue 10 D13).

Expected counts come from pyarrow.compute over the rows the test wrote.
"""

from __future__ import annotations

import datetime as dt

import datafusion
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from foreign_fixtures import tree

import lance_partitioned as lp

ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "p": ["a", "b", "ab", None],
        "b": [True, False, None, True],
        "raw": pa.array([b"a1", b"b2", b"a3", None], pa.binary()),
    }
)


@pytest.fixture
def ns(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), ROWS.schema, "p")
    ns.append(ROWS)
    return ns


def no_rust_paths(message: str) -> None:
    assert ".rs:" not in message and "/home/" not in message, message


REFUSED = [
    ("id LIKE 'a%'", r"LIKE to column 'id' of type int64; LIKE needs a string or binary column"),
    ("id NOT LIKE 'a%'", r"LIKE to column 'id' of type int64"),
    ("NULL", r"filter NULL is not a condition"),
    ("NOT NULL", r"filter NULL is not a condition"),
    ("id", r"column 'id' of type int64 .*int64 is not boolean"),
    ("p", r"column 'p' of type string .*string is not boolean"),
    ("id + 1", r"filter '\(?id \+ 1\)?' cannot be evaluated.*does not return a boolean"),
    ("abs(id)", r"cannot be evaluated.*does not return a boolean"),
    ("nosuch(id) > 1", r"cannot be evaluated.*nosuch"),
    ("b AND (id + 1)", r"cannot be evaluated"),
]


@pytest.mark.parametrize("text, match", REFUSED)
def test_count_refuses_non_conditions_with_our_error(ns, text, match):
    with pytest.raises(lp.FilterError, match=match) as err:
        ns.count(text)
    no_rust_paths(str(err.value))


@pytest.mark.parametrize(
    "filter",
    [pc.scalar(None), datafusion.lit(None), pc.field("id"), datafusion.col("id")],
    ids=["pa-null", "df-null", "pa-int-column", "df-int-column"],
)
def test_expression_objects_that_are_not_conditions(ns, filter):
    with pytest.raises(lp.FilterError) as err:
        ns.count(filter)
    no_rust_paths(str(err.value))


@pytest.mark.parametrize(
    "filter",
    ["NULL", datafusion.lit(None), pc.scalar(None), "id + 1", "id LIKE 'a%'", "id", "abs(id)"],
    ids=["sql-null", "df-null", "pa-null", "arith", "like-int", "int-column", "function"],
)
def test_delete_refuses_and_writes_nothing(ns, filter):
    before, version = tree(ns.root), ns.version
    with pytest.raises(lp.FilterError) as err:
        ns.delete(filter)
    no_rust_paths(str(err.value))
    assert tree(ns.root) == before
    assert lp.open(ns.root).version == version and lp.open(ns.root).count() == ROWS.num_rows


def expected(mask: pa.ChunkedArray | pa.Array) -> int:
    """Rows a SQL filter keeps: those where the condition is TRUE (NULL is not)."""
    return pc.sum(pc.fill_null(mask, False).cast(pa.int64())).as_py() or 0


def test_conditions_still_accepted(ns):
    b, p, i, raw = ROWS["b"], ROWS["p"], ROWS["id"], ROWS["raw"]
    null = pa.nulls(ROWS.num_rows, pa.bool_())
    assert ns.count("b AND NULL") == expected(pc.and_kleene(b, null)) == 0
    assert ns.count("b OR NULL") == expected(pc.or_kleene(b, null)) == 2
    assert ns.count("p LIKE 'a%'") == expected(pc.starts_with(p, "a")) == 2
    assert ns.count("raw LIKE 'a%'") == expected(pc.starts_with(raw, b"a")) == 2
    assert ns.count("abs(id) > 2") == expected(pc.greater(pc.abs(i), 2)) == 2
    assert ns.count("id + 1 > 3") == expected(pc.greater(pc.add(i, 1), 3)) == 2
    assert ns.count("b") == expected(b) == 2
    assert ns.count("NOT b") == expected(pc.invert(b)) == 1


@pytest.mark.parametrize(
    "version, match",
    [
        (True, r"got bool True"),
        (False, r"got bool False"),
        (1.5, r"must be an integer .*got float 1.5"),
        (2.0, r"must be an integer .*got float 2.0"),
        (dt.datetime(2020, 1, 1), r"point in time.*asof="),
        (dt.date(2020, 1, 1), r"point in time.*asof="),
        ([2], r"got list"),
    ],
)
def test_open_refuses_versions_of_the_wrong_kind(ns, version, match):
    before = tree(ns.root)
    with pytest.raises(TypeError, match=match):
        lp.open(ns.root, version=version)
    assert tree(ns.root) == before


def test_open_accepts_numpy_integers(ns):
    assert lp.open(ns.root, version=np.int64(ns.version)).version == ns.version
