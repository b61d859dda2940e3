"""Numbers compare with float columns by value (FORMAT.md §7), at every width, and
float ranges prune exactly through identity, bucket and truncate (whose infinities
truncate to NaN).

A float32 or float16 column cannot hold most float64 literals (``0.1``, ``1e30``)
nor every integer (16777217); a float64 column cannot hold every integer
(2**53 + 1). Lance casts a literal to the column's type before comparing, which
rounds it: ``f4 = 0.1`` would keep the float32 0.1 and ``f4 > 1e30`` would drop
the float32 1e30, which is 1.00000001e30. The expected rows here come from
Python's own comparisons of the source values with each literal, which are exact
between ints, floats and Decimals; nothing passes through our parser or binder.
A decimal literal in SQL text (``0.1``) is read as its nearest float64, as Spark
and PostgreSQL read it against a double column.
"""

from __future__ import annotations

import operator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp

F16 = [0.1, 2048.0, 65504.0, 6e-08, -0.1, float("inf"), -0.0, None]
F32 = [0.1, 16777216.0, 1e30, 3.4028234663852886e38, 1.401298464324817e-45, 2.0, -0.1]
F32 += [float("inf"), float("-inf"), -0.0, 0.0, None]
F64 = [0.1, 2.0**53, 2.0**53 + 2, 1e300, 5e-324, -0.1, float("inf"), -0.0, float("-inf"), None]
ROWS = max(len(F16), len(F32), len(F64))


def floats(values: list, dtype: type) -> np.ndarray:
    """``values`` padded with NULLs to ``ROWS``, each rounded to ``dtype`` by numpy
    as a writer would round it (a masked array: numpy reads None as NaN)."""
    padded = values + [None] * (ROWS - len(values))
    data = np.array([0.0 if v is None else v for v in padded], dtype=dtype)
    return np.ma.masked_array(data, mask=[v is None for v in padded])


def source() -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(ROWS), pa.int64()),
            "k": pa.array([i % 3 for i in range(ROWS)], pa.int64()),
            "f2": pa.array(floats(F16, np.float16), pa.float16()),
            "f4": pa.array(floats(F32, np.float32), pa.float32()),
            "f8": pa.array(floats(F64, np.float64), pa.float64()),
        }
    )


# truncate of an infinity is NaN (``v - v % W``): those partitions must not be pruned
SPECS = ["k", "f4", "f2, truncate(2, f8)", "bucket(3, f4), f8", "truncate(3, f4)"]

OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt}
OPS.update({"<=": operator.le, ">": operator.gt, ">=": operator.ge})

# (column, literal as SQL text, its value as the oracle compares it)
LITERALS = [
    ("f4", "1e-1", 0.1),
    ("f4", "0.1", 0.1),  # a decimal literal: its nearest float64
    ("f4", "-1e-1", -0.1),
    ("f4", "1e30", 1e30),
    ("f4", "16777217", 16777217),
    ("f4", "16777216", 16777216),
    ("f4", "3.5e38", 3.5e38),  # beyond float32's largest finite value
    ("f4", "-3.5e38", -3.5e38),
    ("f4", "1e-46", 1e-46),  # below float32's smallest subnormal
    ("f4", "2.5", 2.5),
    ("f2", "1e-1", 0.1),
    ("f2", "2049", 2049),
    ("f2", "70000", 70000),
    ("f2", "5e-8", 5e-8),
    ("f8", "9007199254740993", 2**53 + 1),
    ("f8", "0.1", 0.1),
    ("f8", "1" + "0" * 400, 10**400),
    ("f8", "CAST('inf' AS DOUBLE)", float("inf")),
    ("f8", "CAST('-inf' AS DOUBLE)", float("-inf")),
    ("f8", "0e0", 0.0),
    ("f8", "-1e308", -1e308),
    ("f4", "CAST('-inf' AS DOUBLE)", float("-inf")),
    ("f4", "-1e0", -1.0),
]


def expected(table: pa.Table, column: str, test) -> list[int]:
    """Ids of the rows where ``test(value)`` holds; NULL never does."""
    ids = table["id"].to_pylist()
    values = table[column].to_pylist()
    return [i for i, v in zip(ids, values, strict=True) if v is not None and test(v)]


@pytest.fixture(scope="module")
def namespaces(tmp_path_factory) -> dict[str, lp.PartitionedNamespace]:
    built = {}
    for spec in SPECS:
        ns = lp.create(str(tmp_path_factory.mktemp("floats") / "ns"), source().schema, spec)
        ns.append(source())
        built[spec] = ns
    return built


def ids(ns: lp.PartitionedNamespace, flt) -> list[int]:
    return sorted(ns.scan(flt).to_arrow()["id"].to_pylist())


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("column, text, value", LITERALS)
def test_comparisons_by_value(namespaces, spec, column, text, value):
    ns, table = namespaces[spec], source()
    for op, fn in OPS.items():
        flt = f"{column} {op} {text}"
        want = expected(table, column, lambda v, fn=fn: fn(v, value))
        assert ids(ns, flt) == want, flt
        assert ns.count(flt) == len(want), flt
        # the negation keeps exactly the other non-NULL rows
        others = expected(table, column, lambda v, fn=fn: not fn(v, value))
        assert ids(ns, f"NOT ({flt})") == others, f"NOT ({flt})"


@pytest.mark.parametrize("spec", SPECS)
def test_pyarrow_expressions_by_value(namespaces, spec):
    """A pyarrow expression's float64 or int64 scalar is its exact value too."""
    ns, table = namespaces[spec], source()
    cases = [
        ("f4", pa.scalar(0.1, pa.float64())),
        ("f4", pa.scalar(1e30, pa.float64())),
        ("f4", pa.scalar(16777217, pa.int64())),
        ("f8", pa.scalar(2**53 + 1, pa.int64())),
    ]
    for column, scalar in cases:
        for name, fn in (("equal", operator.eq), ("greater", operator.gt)):
            flt = getattr(pc, name)(pc.field(column), scalar)
            want = expected(table, column, lambda v, fn=fn, s=scalar: fn(v, s.as_py()))
            assert ids(ns, flt) == want, str(flt)


@pytest.mark.parametrize("spec", SPECS)
def test_in_lists_and_between_by_value(namespaces, spec):
    ns, table = namespaces[spec], source()
    cases = {
        "f4 IN (1e-1, 2e0)": lambda v: v == 2.0,
        "f4 IN (1e-1)": lambda v: False,
        "f4 IN (1e-1, 1e30)": lambda v: False,
        "f4 NOT IN (1e-1, 2e0)": lambda v: v != 2.0,
        "f4 NOT IN (1e-1)": lambda v: True,
        "f4 BETWEEN 1e-1 AND 1e30": lambda v: 0.1 <= v <= 1e30,
        "f4 NOT BETWEEN 1e-1 AND 1e30": lambda v: not 0.1 <= v <= 1e30,
        "f8 IN (9007199254740993, 1e-1)": lambda v: v in (2**53 + 1, 0.1),
        "f2 IN (2049, 2048)": lambda v: v == 2048,
    }
    for flt, test in cases.items():
        column = flt.split()[0]
        want = expected(table, column, test)
        assert ids(ns, flt) == want, flt
        assert ns.count(flt) == len(want), flt


def test_delete_with_an_unequal_literal_removes_nothing(tmp_path: Path):
    table = source()
    ns = lp.create(str(tmp_path / "ns"), table.schema, "k")
    ns.append(table)
    ns.delete(pc.field("f4") == pa.scalar(0.1, pa.float64()))
    ns.delete("f8 = 9007199254740993")
    assert lp.open(ns.root).count() == ROWS
    ns.delete("f4 > 1e30")  # the float32 1e30 is 1.00000001504e30: deleted
    assert sorted(lp.open(ns.root).to_arrow()["id"].to_pylist()) == expected(
        table, "f4", lambda v: not v > 1e30
    ) + [i for i, v in enumerate(table["f4"].to_pylist()) if v is None]
