"""Each transform owns its meaning: projection, implication, join coarsening, result type.

Issue 11 item 1: pruning, join planning and spec validation ask the transform
(``project``, ``strict_project``, ``coarsens_to``/``shared_coarsening``/
``derivation``, ``check_result_type``) instead of checking its kind. Expected
values are worked out by hand, with ``datetime`` or with the scalar reference
hash of ``tests/hashing_reference.py``, never with the transforms under test.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pyarrow as pa
import pytest
from hashing_reference import bucket_scalar

import lance_partitioned
from lance_partitioned import PartitionField
from lance_partitioned.errors import SpecError
from lance_partitioned.format.expression_eval import ExpressionTransform
from lance_partitioned.format.expressions import Compare, In, IsNull, Like, Literal, Ref
from lance_partitioned.format.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    MultiBucket,
    Truncate,
    Year,
)
from lance_partitioned.format.types import TypeFamily

PACKAGE = Path(lance_partitioned.__file__).parent
X, P = Ref("x"), Ref("p")
I64, I32, D32, STR = pa.int64(), pa.int32(), pa.date32(), pa.string()


def lit(v):
    return Literal(v)


# -- no kind checks outside the transforms -----------------------------------------

TRANSFORM_CLASSES = (
    "Identity|TimeTransform|Year|Month|Day|Hour|Bucket|MultiBucket|_Bucketing|Truncate"
    "|ExpressionTransform"
)


@pytest.mark.parametrize(
    "module",
    [
        "format/pruning.py",
        "format/time_ranges.py",
        "operations/evolve/placement.py",
        "operations/join/compatibility.py",
        "operations/join/planning.py",
        "operations/join/execution.py",
        "format/spec.py",
    ],
)
def test_callers_do_not_check_transform_kinds(module):
    text = (PACKAGE / module).read_text()
    found = re.findall(rf"isinstance\([^)]*\b({TRANSFORM_CLASSES})\b", text)
    assert not found, f"{module} checks transform kinds: {found}"


def test_unused_expression_text_methods_are_gone():
    # seed 000's derived expression text is tabled once, in docs/FORMAT.md §4
    assert not hasattr(Truncate(3), "expression_for")
    assert not hasattr(Year(), "expression")
    assert "left(v, W)" in (PACKAGE.parent / "docs" / "FORMAT.md").read_text()


# -- project: inclusive projection of one predicate ------------------------------


@pytest.mark.parametrize(
    "transform,pred,src,result,expected",
    [
        (Identity(), Compare(">", X, lit(5)), I64, I64, Compare(">", P, lit(5))),
        (Identity(), In(X, (lit(1), lit(2)), True), I64, I64, In(P, (lit(1), lit(2)), True)),
        (Identity(), Like(X, "ab%"), STR, STR, Like(P, "ab%")),
        # a widened identity result maps the literal instead of copying the predicate
        (Identity(), Compare("<", X, lit(7)), I32, I64, Compare("<=", P, lit(7))),
        (Identity(), IsNull(X, True), I64, I64, IsNull(P, True)),
        (Year(), Compare(">=", X, lit(dt.date(2023, 5, 1))), D32, I32, Compare(">=", P, lit(2023))),
        # 2024-01-01 starts its year: nothing of 2024 is below it
        (Year(), Compare("<", X, lit(dt.date(2024, 1, 1))), D32, I32, Compare("<", P, lit(2024))),
        (Year(), Compare("<", X, lit(dt.date(2024, 3, 1))), D32, I32, Compare("<=", P, lit(2024))),
        (Month(), Compare(">=", X, lit(dt.date(2023, 5, 1))), D32, I32, None),  # wraps around
        (Month(), Compare("=", X, lit(dt.date(2023, 5, 9))), D32, I32, Compare("=", P, lit(5))),
        (
            Day(),
            In(X, (lit(dt.date(2023, 5, 9)), lit(dt.date(2024, 1, 9)), lit(dt.date(2023, 2, 3)))),
            D32,
            I32,
            In(P, (lit(3), lit(9))),
        ),
        (Truncate(10), Compare("<=", X, lit(25)), I64, I64, Compare("<=", P, lit(20))),
        (Truncate(10), Compare(">", X, lit(-25)), I64, I64, Compare(">=", P, lit(-20))),
        (Truncate(3), Like(X, "apple%"), STR, STR, Compare("=", P, lit("app"))),
        (Truncate(3), Like(X, "a%b%"), STR, STR, None),
        (Truncate(3), Like(X, "a%"), STR, STR, Like(P, "a%")),
        (Truncate(3), Like(X, "apple%", negated=True), STR, STR, None),
        (Bucket(8), Compare(">", X, lit(3)), I64, I32, None),
        (Bucket(8), In(X, (lit(1),), True), I64, I32, None),
        (
            ExpressionTransform("col0 % 7", I64),
            Compare("=", X, lit(10)),
            I64,
            I64,
            Compare("=", P, lit(3)),
        ),
        (ExpressionTransform("col0 % 7", I64), Compare("<", X, lit(10)), I64, I64, None),
        (ExpressionTransform("col0 % 7", I64), IsNull(X), I64, I64, None),  # FORMAT.md §7
    ],
)
def test_project(transform, pred, src, result, expected):
    assert transform.project(pred, "p", src, result) == expected


def test_bucket_projects_equality_and_in_through_the_hash():
    b = Bucket(16)
    want = bucket_scalar(42, I64, 16)
    assert b.project(Compare("=", X, lit(42)), "p", I64, I32) == Compare("=", P, lit(want))
    values = sorted({bucket_scalar(v, I64, 16) for v in (1, 2, 3, 42)})
    got = b.project(In(X, tuple(lit(v) for v in (1, 2, 3, 42))), "p", I64, I32)
    assert got == In(P, tuple(lit(v) for v in values))


def test_year_of_a_zoned_timestamp_projects_on_its_wall_clock():
    ny = pa.timestamp("us", tz="America/New_York")
    # 2024-01-01 03:00 UTC is still 2023 in New York: the year range starts at 2023
    bound = dt.datetime(2024, 1, 1, 3, tzinfo=dt.timezone.utc)
    assert Year().project(Compare(">=", X, lit(bound)), "p", ny, I32) == Compare(">=", P, lit(2023))


# -- strict_project: what a partition value guarantees ------------------------------


@pytest.mark.parametrize(
    "transform,pred,value,src,expected",
    [
        (Identity(), Compare(">", X, lit(3)), 5, I64, True),
        (Identity(), Compare(">", X, lit(7)), 5, I64, False),
        (Identity(), Compare("=", X, lit(5)), None, I64, None),
        (Identity(), IsNull(X, True), 5, I64, True),
        (Bucket(8), IsNull(X, True), 3, I64, True),
        (Bucket(8), IsNull(X, True), None, I64, None),
        (Bucket(8), Compare("=", X, lit(3)), 3, I64, None),
        (Year(), Compare(">=", X, lit(dt.date(2023, 1, 1))), 2023, D32, None),  # the hierarchy's
        # an expression may map NULL to a value, so its value guarantees nothing
        (ExpressionTransform("coalesce(col0, 0)", I64), IsNull(X, True), 0, I64, None),
    ],
)
def test_strict_project(transform, pred, value, src, expected):
    assert transform.strict_project(pred, value, src) == expected


def test_calendar_units_and_order():
    assert [t.calendar_unit for t in (Year(), Month(), Day(), Hour())] == list(
        ("year", "month", "day", "hour")
    )
    assert Identity().calendar_unit is None and Bucket(4).calendar_unit is None
    assert [t.preserves_order for t in (Year(), Month(), Identity(), Truncate(2), Bucket(2))] == [
        True,
        False,
        True,
        True,
        False,
    ]


# -- joins: coarsens_to, shared_coarsening, derivation ------------------------------


@pytest.mark.parametrize(
    "fine,coarse,family,expected",
    [
        (Bucket(16), Bucket(8), TypeFamily.INTEGER, True),
        (Bucket(8), Bucket(16), TypeFamily.INTEGER, False),
        (Bucket(12), Bucket(8), TypeFamily.INTEGER, False),
        (MultiBucket(8), Bucket(4), None, True),
        (Truncate(10), Truncate(100), TypeFamily.INTEGER, True),
        (Truncate(100), Truncate(10), TypeFamily.INTEGER, False),
        (Truncate(10), Truncate(15), TypeFamily.INTEGER, False),
        (Truncate(4), Truncate(2), TypeFamily.STRING, True),
        (Truncate(2), Truncate(4), TypeFamily.STRING, False),
        (Truncate(4), Truncate(2), TypeFamily.DATE, False),
        (Year(), Year(), TypeFamily.DATE, True),
        (Day(), Month(), TypeFamily.DATE, False),  # a day of the month does not give the month
        (Month(), Year(), TypeFamily.DATE, False),
        (Identity(), Identity(), TypeFamily.INTEGER, True),
        (Identity(), Bucket(4), TypeFamily.INTEGER, False),
        (
            ExpressionTransform("col0 % 7", I64),
            ExpressionTransform("col0 % 7", I32),
            TypeFamily.INTEGER,
            True,
        ),
        (
            ExpressionTransform("col0 % 7", I64),
            ExpressionTransform("col0 % 5", I64),
            TypeFamily.INTEGER,
            False,
        ),
    ],
)
def test_coarsens_to(fine, coarse, family, expected):
    assert fine.coarsens_to(coarse, family) is expected


def test_shared_coarsening_and_derivation():
    assert Bucket(16).shared_coarsening(Bucket(8)) == Bucket(8)
    assert MultiBucket(8).shared_coarsening(MultiBucket(4)) == Bucket(4)
    assert Bucket(12).shared_coarsening(Bucket(8)) is None
    assert Truncate(10).shared_coarsening(Truncate(100), TypeFamily.INTEGER) == Truncate(100)
    assert Truncate(4).shared_coarsening(Truncate(2), TypeFamily.STRING) == Truncate(2)
    assert Year().shared_coarsening(Month(), TypeFamily.DATE) is None
    assert Bucket(16).derivation(Bucket(4), TypeFamily.INTEGER, I32)(13) == 1  # 13 % 4
    assert Bucket(16).derivation(Bucket(4), TypeFamily.INTEGER, I32)(None) is None
    assert Truncate(4).derivation(Truncate(2), TypeFamily.STRING, STR)("abcd") == "ab"
    assert Truncate(10).derivation(Truncate(100), TypeFamily.INTEGER, I64)(120) == 100
    assert Truncate(10).derivation(Truncate(15), TypeFamily.INTEGER, I64) is None
    assert Year().derivation(Year(), TypeFamily.DATE, I32)(2024) == 2024
    assert "neither divides" in Bucket(12).why_not_shared(Bucket(8))
    assert "do not nest" in Truncate(10).why_not_shared(Truncate(15))
    assert "different transforms" in Day().why_not_shared(Month())


# -- spec validation: which result_type a field may declare -------------------------


def test_result_type_rules():
    assert Identity().fits_result_type([I32], I64)  # the source may since have widened
    assert Truncate(3).fits_result_type([I32], I64)
    assert not Year().fits_result_type([D32], I64)  # int32 by definition
    with pytest.raises(SpecError, match="result_type int64 does not fit year"):
        Year().check_result_type("y", [D32], I64)
    with pytest.raises(SpecError, match="partition field 'e'"):
        ExpressionTransform("col0 +", I64).check_result_type("e", [I64], I64)


def test_partition_field_function():
    f = PartitionField("e", (0,), I64, expression="col0 % 7")
    assert f.function == ExpressionTransform("col0 % 7", I64)
    assert f.function.apply([pa.array([10, None, -3])]).to_pylist() == [3, None, -3]
    g = PartitionField("b", (0,), I32, transform=Bucket(8))
    assert g.function is g.transform


# -- an expression may map NULL to a value: IS [NOT] NULL does not project ------------


@pytest.mark.parametrize("expression", ["coalesce(col0, 0)", "nullif(col0, 1)", "col0 % 2"])
@pytest.mark.parametrize("flt", ["id IS NULL", "id IS NOT NULL"])
def test_is_null_through_an_expression_field(tmp_path, expression, flt):
    import pyarrow.compute as pc

    import lance_partitioned as lp

    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    table = pa.table({"id": [1, None, 3, None, 1, 4], "v": [1, 2, 3, 4, 5, 6]}, schema=schema)
    field = {
        "field_id": "e",
        "source_ids": [0],
        "expression": expression,
        "result_type": {"type": "int64"},
    }
    ns = lp.create(str(tmp_path / "ns"), schema, {"id": 1, "fields": [field]})
    ns.append(table)
    mask = pc.is_null(table["id"]) if flt == "id IS NULL" else pc.is_valid(table["id"])
    expected = sorted(table.filter(mask)["v"].to_pylist())
    assert sorted(ns.scan(flt).to_arrow()["v"].to_pylist()) == expected
    assert ns.count(flt) == len(expected)
