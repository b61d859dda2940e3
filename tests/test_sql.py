"""SQL filter text <-> AST (lance_partitioned.format.filters), checked against Lance,
pyarrow and DataFusion."""

from __future__ import annotations

import datetime as dt
import decimal

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import pytest
from ast_to_pyarrow import to_pyarrow
from datafusion import SessionConfig, SessionContext, col, lit
from datafusion import functions as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lance_partitioned.format.expressions import (
    And,
    Compare,
    In,
    IsNull,
    Like,
    Literal,
    Not,
    Opaque,
    Or,
    Ref,
)
from lance_partitioned.format.filters.from_datafusion import from_datafusion
from lance_partitioned.format.filters.from_pyarrow import from_pyarrow
from lance_partitioned.format.filters.parse import parse_filter
from lance_partitioned.format.filters.render import quote_identifier, render_literal, to_sql
from lance_partitioned.format.filters.tokens import FilterParseError
from lance_partitioned.format.filters.visitor import referenced_columns

D = decimal.Decimal
UTC = dt.timezone.utc
PLUS2 = dt.timezone(dt.timedelta(hours=2))
UTC_TYPE = "'Timestamp(Microsecond, Some(\"UTC\"))'"


def cmp(op, name, value):
    return Compare(op, Ref(name), Literal(value))


# --------------------------------------------------------------------------------------
# Parser: structured constructs and normal form
# --------------------------------------------------------------------------------------

PARSE_CASES = [
    # comparisons, operator spellings, column on either side
    ("x = 1", cmp("=", "x", 1)),
    ("x == 1", cmp("=", "x", 1)),
    ("x != 1", cmp("!=", "x", 1)),
    ("x <> 1", cmp("!=", "x", 1)),
    ("x < 1", cmp("<", "x", 1)),
    ("x <= 1", cmp("<=", "x", 1)),
    ("x > 1", cmp(">", "x", 1)),
    ("x >= 1", cmp(">=", "x", 1)),
    ("5 < x", cmp(">", "x", 5)),
    ("5 >= x", cmp("<=", "x", 5)),
    ("'a' = name", cmp("=", "name", "a")),
    ("x = NULL", cmp("=", "x", None)),
    # numbers
    ("x = -5", cmp("=", "x", -5)),
    ("x = - 5", cmp("=", "x", -5)),
    ("x = +5", cmp("=", "x", 5)),
    ("x = -(5)", cmp("=", "x", -5)),
    ("x = 1.5", cmp("=", "x", D("1.5"))),
    ("x = -0.25", cmp("=", "x", D("-0.25"))),
    ("x = .5", cmp("=", "x", D("0.5"))),
    ("x = 1.5e3", cmp("=", "x", 1500.0)),
    ("x = 2E-2", cmp("=", "x", 0.02)),
    ("x = 12345678901234567890", cmp("=", "x", 12345678901234567890)),
    # strings
    ("s = 'it''s'", cmp("=", "s", "it's")),
    ("s = ''", cmp("=", "s", "")),
    ("s = 'Zürich$/=x %_'", cmp("=", "s", "Zürich$/=x %_")),
    ("s = 'back\\slash'", cmp("=", "s", "back\\slash")),
    ("s = '日本'", cmp("=", "s", "日本")),
    # booleans
    ("flag", cmp("=", "flag", True)),
    ("flag = FALSE", cmp("=", "flag", False)),
    ("TRUE", Literal(True)),
    ("false", Literal(False)),
    ("NOT flag", Not(cmp("=", "flag", True))),
    # typed literals
    ("d = DATE '2025-01-01'", cmp("=", "d", dt.date(2025, 1, 1))),
    ("d = date '2025-1-2'", cmp("=", "d", dt.date(2025, 1, 2))),
    ("ts = TIMESTAMP '2025-01-01 10:00:00'", cmp("=", "ts", dt.datetime(2025, 1, 1, 10))),
    ("ts = TIMESTAMP '2025-01-01'", cmp("=", "ts", dt.datetime(2025, 1, 1))),
    (
        "ts = TIMESTAMP '2025-01-01T10:00:00.123456'",
        cmp("=", "ts", dt.datetime(2025, 1, 1, 10, 0, 0, 123456)),
    ),
    (
        "ts = TIMESTAMP '2025-01-01 10:00:00.5+02:00'",
        cmp("=", "ts", dt.datetime(2025, 1, 1, 10, 0, 0, 500000, tzinfo=PLUS2)),
    ),
    (
        "ts = TIMESTAMP '2025-01-01 10:00:00Z'",
        cmp("=", "ts", dt.datetime(2025, 1, 1, 10, tzinfo=UTC)),
    ),
    (
        "ts = TIMESTAMP '2025-01-01 10:00:00.123456000-0530'",
        cmp(
            "=",
            "ts",
            dt.datetime(
                2025, 1, 1, 10, 0, 0, 123456, tzinfo=dt.timezone(-dt.timedelta(hours=5, minutes=30))
            ),
        ),
    ),
    ("t = TIME '10:00:00'", cmp("=", "t", dt.time(10))),
    ("t < TIME '23:59:59.999999'", cmp("<", "t", dt.time(23, 59, 59, 999999))),
    ("b = X'0102ff'", cmp("=", "b", b"\x01\x02\xff")),
    ("b = x''", cmp("=", "b", b"")),
    # casts of literals fold to typed literals
    ("d = CAST('2025-01-01' AS DATE)", cmp("=", "d", dt.date(2025, 1, 1))),
    ("ts < CAST('2025-01-01 10:00:00' AS TIMESTAMP)", cmp("<", "ts", dt.datetime(2025, 1, 1, 10))),
    ("d = '2025-01-01'::date", cmp("=", "d", dt.date(2025, 1, 1))),
    ("x = CAST(1.5 AS DECIMAL(12,2))", cmp("=", "x", D("1.50"))),
    ("x = CAST('1.5' AS NUMERIC(3, 1))", cmp("=", "x", D("1.5"))),
    ("x = CAST('7' AS BIGINT)", cmp("=", "x", 7)),
    ("x = CAST('18446744073709551615' AS BIGINT UNSIGNED)", cmp("=", "x", 2**64 - 1)),
    ("x = CAST(1 AS DOUBLE)", cmp("=", "x", 1.0)),
    ("x = CAST('inf' AS DOUBLE PRECISION)", cmp("=", "x", float("inf"))),
    ("x = CAST(NULL AS INT)", cmp("=", "x", None)),
    ("s = CAST('a' AS VARCHAR)", cmp("=", "s", "a")),
    # identifiers
    ('"Order Date" = 1', cmp("=", "Order Date", 1)),
    ("`Order Date` = 1", cmp("=", "Order Date", 1)),
    ('"say ""hi""" = 1', cmp("=", 'say "hi"', 1)),
    ("`a``b` = 1", cmp("=", "a`b", 1)),
    ("país = 1", cmp("=", "país", 1)),
    ("CamelCase = 1", cmp("=", "CamelCase", 1)),
    # a dotted name is a path into a struct column (Lance's reading); with the
    # namespace's columns known, a leading table qualifier is dropped instead
    # (test_qualified_names_with_known_columns)
    ("t.col = 1", Compare("=", Ref("t", path=("col",)), Literal(1))),
    ('db.t."Order Date" = 1', Compare("=", Ref("db", path=("t", "Order Date")), Literal(1))),
    ("date = DATE '2025-01-01'", cmp("=", "date", dt.date(2025, 1, 1))),
    ("(x) = 1", cmp("=", "x", 1)),
    # IN
    ("x IN (1, 2, 3)", In(Ref("x"), (Literal(1), Literal(2), Literal(3)))),
    ("x in (1)", In(Ref("x"), (Literal(1),))),
    ("x NOT IN (1, -2)", In(Ref("x"), (Literal(1), Literal(-2)), negated=True)),
    ("x IN (1, NULL)", In(Ref("x"), (Literal(1), Literal(None)))),
    ("NOT x IN (1)", Not(In(Ref("x"), (Literal(1),)))),
    (
        "d IN (DATE '2025-01-01', '2025-01-02'::date)",
        In(Ref("d"), (Literal(dt.date(2025, 1, 1)), Literal(dt.date(2025, 1, 2)))),
    ),
    # BETWEEN
    ("x BETWEEN 1 AND 5", And(cmp(">=", "x", 1), cmp("<=", "x", 5))),
    ("x NOT BETWEEN 1 AND 5", Or(cmp("<", "x", 1), cmp(">", "x", 5))),
    (
        "x BETWEEN 1 AND 5 AND y = 2",
        And(And(cmp(">=", "x", 1), cmp("<=", "x", 5)), cmp("=", "y", 2)),
    ),
    # IS NULL
    ("x IS NULL", IsNull(Ref("x"))),
    ("x is not null", IsNull(Ref("x"), negated=True)),
    # LIKE
    ("s LIKE 'a%'", Like(Ref("s"), "a%")),
    ("s NOT LIKE '_b'", Like(Ref("s"), "_b", negated=True)),
    # boolean structure and precedence
    ("a = 1 AND b = 2", And(cmp("=", "a", 1), cmp("=", "b", 2))),
    ("a = 1 OR b = 2", Or(cmp("=", "a", 1), cmp("=", "b", 2))),
    (
        "a = 1 OR b = 2 AND c = 3",
        Or(cmp("=", "a", 1), And(cmp("=", "b", 2), cmp("=", "c", 3))),
    ),
    (
        "(a = 1 OR b = 2) AND c = 3",
        And(Or(cmp("=", "a", 1), cmp("=", "b", 2)), cmp("=", "c", 3)),
    ),
    (
        "NOT a = 1 AND b = 2",
        And(Not(cmp("=", "a", 1)), cmp("=", "b", 2)),
    ),
    ("NOT NOT a = 1", Not(Not(cmp("=", "a", 1)))),
    ("NOT (a = 1 OR b = 2)", Not(Or(cmp("=", "a", 1), cmp("=", "b", 2)))),
    (
        "a = 1 AND b = 2 AND c = 3",
        And(And(cmp("=", "a", 1), cmp("=", "b", 2)), cmp("=", "c", 3)),
    ),
    # a chain in parentheses joins a chain of the same operator: one balanced tree
    (
        "a = 1 AND (b = 2 AND c = 3)",
        And(And(cmp("=", "a", 1), cmp("=", "b", 2)), cmp("=", "c", 3)),
    ),
    (
        "a = 1 AND b = 2 AND c = 3 AND d = 4",
        And(And(cmp("=", "a", 1), cmp("=", "b", 2)), And(cmp("=", "c", 3), cmp("=", "d", 4))),
    ),
    (
        "((a = 1 OR b = 2) OR c = 3) OR (d = 4 OR e = 5)",
        Or(
            Or(Or(cmp("=", "a", 1), cmp("=", "b", 2)), Or(cmp("=", "c", 3), cmp("=", "d", 4))),
            cmp("=", "e", 5),
        ),
    ),
    # equalities on one column in an OR chain are one IN list, where the first stood
    ("x = 1 OR x = 2", In(Ref("x"), (Literal(1), Literal(2)))),
    (
        "x = 1 OR y = 2 OR x IN (3, NULL) OR (x = 4)",
        Or(In(Ref("x"), tuple(Literal(v) for v in (1, 3, None, 4))), cmp("=", "y", 2)),
    ),
    ("x = 1 OR x != 2", Or(cmp("=", "x", 1), cmp("!=", "x", 2))),
    ("x = 1 OR x NOT IN (2)", Or(cmp("=", "x", 1), In(Ref("x"), (Literal(2),), negated=True))),
    ("x = 1 AND x = 2", And(cmp("=", "x", 1), cmp("=", "x", 2))),
    ("((x = 1))", cmp("=", "x", 1)),
    ("x = 1 -- trailing comment", cmp("=", "x", 1)),
    ("  x\n=\t1  ", cmp("=", "x", 1)),
]


@pytest.mark.parametrize(("text", "expected"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_parse(text, expected):
    assert parse_filter(text) == expected


def test_qualified_names_with_known_columns():
    columns = ["col", "Order Date", "s"]
    assert parse_filter("t.col = 1", columns) == cmp("=", "col", 1)
    assert parse_filter('db.t."Order Date" = 1', columns) == cmp("=", "Order Date", 1)
    # a struct column's field stays a path, also behind a qualifier
    assert parse_filter("s.a = 1", columns) == Compare("=", Ref("s", path=("a",)), Literal(1))
    assert parse_filter("t.s.a = 1", columns) == Compare("=", Ref("s", path=("a",)), Literal(1))
    assert parse_filter("t.CamelCase * 2 > 4", ["CamelCase"]) == Opaque(
        "`CamelCase` * 2 > 4", ("CamelCase",)
    )


@pytest.mark.parametrize(("text", "_expected"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_round_trip_parse_cases(text, _expected):
    expr = parse_filter(text)
    assert parse_filter(to_sql(expr)) == expr


def test_keywords_case_insensitive():
    assert parse_filter("x not between 1 and 2 or y is null") == parse_filter(
        "x NOT BETWEEN 1 AND 2 OR y IS NULL"
    )


def test_decimal_keeps_scale_and_literal_types():
    (lit_value,) = [parse_filter("x = 1.50").literal.value]
    assert isinstance(lit_value, D) and str(lit_value) == "1.50"
    assert type(parse_filter("x = 10").literal.value) is int
    assert type(parse_filter("x = 1e1").literal.value) is float
    naive = parse_filter("ts = TIMESTAMP '2025-01-01 10:00:00'").literal.value
    assert naive.tzinfo is None
    aware = parse_filter("ts = TIMESTAMP '2025-01-01 12:00:00+02:00'").literal.value
    assert aware == dt.datetime(2025, 1, 1, 10, tzinfo=UTC)


# --------------------------------------------------------------------------------------
# Opaque predicates
# --------------------------------------------------------------------------------------

OPAQUE_CASES = [
    ("lower(name) = 'x'", "lower(name) = 'x'", ("name",)),
    ("a + 1 > 3", "a + 1 > 3", ("a",)),
    ("a = b", "a = b", ("a", "b")),
    ("s || 'x' = 'ax'", "s || 'x' = 'ax'", ("s",)),
    ("(a + 1) * 2 >= b", "(a + 1) * 2 >= b", ("a", "b")),
    ("flag IS TRUE", "flag IS TRUE", ("flag",)),
    ("flag IS NOT FALSE", "flag IS NOT FALSE", ("flag",)),
    ("s ILIKE 'a%'", "s ILIKE 'a%'", ("s",)),
    ("s LIKE 'a!%' ESCAPE '!'", "s LIKE 'a!%' ESCAPE '!'", ("s",)),
    ("lower(s) LIKE 'a%'", "lower(s) LIKE 'a%'", ("s",)),
    ("x IN (1, y)", "x IN (1, y)", ("x", "y")),
    ("x BETWEEN y AND 3", "x BETWEEN y AND 3", ("x", "y")),
    # against a literal it is desugared (test_distinct_from_literal_is_desugared)
    ("x IS DISTINCT FROM y", "x IS DISTINCT FROM y", ("x", "y")),
    ("starts_with(s, 'a')", "starts_with(s, 'a')", ("s",)),
    ("coalesce(x, 0) > 1", "coalesce(x, 0) > 1", ("x",)),
    ("1 = 1", "1 = 1", ()),
    ('"Order Date" + 1 > 2', "`Order Date` + 1 > 2", ("Order Date",)),
    ("t.CamelCase * 2 > 4", "t.`CamelCase` * 2 > 4", ("t",)),
    (
        "CASE WHEN x > 1 THEN y ELSE z END = 2",
        "CASE WHEN x > 1 THEN y ELSE z END = 2",
        ("x", "y", "z"),
    ),
    ("CAST(x AS DOUBLE) > 1", "CAST(x AS DOUBLE) > 1", ("x",)),
    ("TRY_CAST('1' AS INT) = x", "TRY_CAST('1' AS INT) = x", ("x",)),
    ("ts > now() - INTERVAL '1' DAY", "ts > now() - INTERVAL '1' DAY", ("ts",)),
    # units other than year/month/day/hour are Lance's; the calls Lance lacks are re-spelled
    ("date_part('quarter', d) = 2", "date_part('quarter', d) = 2", ("d",)),
    ("year(d) + 1 = 2026", "date_part('year', d) + 1 = 2026", ("d",)),
    ("EXTRACT(DOW FROM ts) = 1", "date_part('dow', ts) = 1", ("ts",)),
    ("(x = 1) = (y = 2)", "(x = 1) = (y = 2)", ("x", "y")),
    ("s ~ 'a.*'", "s ~ 'a.*'", ("s",)),
    # casts that are not exact literal conversions stay expressions
    ("CAST(1.5e0 AS INT) = x", "CAST(1.5e0 AS INT) = x", ("x",)),
    ("CAST(DATE '2025-01-01' AS BIGINT) < x", "CAST(DATE '2025-01-01' AS BIGINT) < x", ("x",)),
    ("x = CAST('a' AS MAP)", "x = CAST('a' AS MAP)", ("x",)),
]


@pytest.mark.parametrize(("text", "sql", "columns"), OPAQUE_CASES, ids=[c[0] for c in OPAQUE_CASES])
def test_opaque(text, sql, columns):
    expr = parse_filter(text)
    assert expr == Opaque(sql, columns)
    assert to_sql(expr) == f"({sql})"
    assert parse_filter(to_sql(expr)) == expr


def test_distinct_from_literal_is_desugared():
    """``IS [NOT] DISTINCT FROM`` a literal is a comparison and a NULL test, so its
    literal follows the rules of ``=`` (``tests/test_distinct_from.py`` runs it)."""
    x = Ref("x")
    not_distinct = And(cmp("=", "x", 1), IsNull(x, negated=True))
    assert parse_filter("x IS NOT DISTINCT FROM 1") == not_distinct
    assert parse_filter("1 IS NOT DISTINCT FROM x") == not_distinct
    assert parse_filter("x IS DISTINCT FROM 1") == Or(cmp("!=", "x", 1), IsNull(x))
    assert parse_filter("x IS NOT DISTINCT FROM NULL") == IsNull(x)
    assert parse_filter("x IS DISTINCT FROM NULL") == IsNull(x, negated=True)
    assert parse_filter("NOT x IS DISTINCT FROM 1") == Not(Or(cmp("!=", "x", 1), IsNull(x)))
    assert parse_filter(to_sql(not_distinct)) == not_distinct


def test_opaque_inside_boolean_structure():
    expr = parse_filter("x = 1 AND (lower(s) = 'a' OR NOT a = b)")
    assert expr == And(
        cmp("=", "x", 1),
        Or(Opaque("lower(s) = 'a'", ("s",)), Not(Opaque("a = b", ("a", "b")))),
    )
    assert to_sql(expr) == "x = 1 AND ((lower(s) = 'a') OR NOT (a = b))"
    assert parse_filter(to_sql(expr)) == expr


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------

ERROR_CASES = [
    ("x = ", "expected an expression after '=', found end of input", 4),
    ("", "empty filter", 0),
    ("(x = 1", "unbalanced parentheses: '(' at position 0 is never closed", 6),
    ("x = 1)", "unbalanced parentheses: unexpected ')'", 5),
    ("x IN ()", "IN list is empty", 5),
    ("s = 'abc", "unterminated string literal", 4),
    ("d = DATE 'not-a-date'", "invalid DATE literal 'not-a-date'", 9),
    ("d = DATE '2025-02-30'", "invalid DATE literal '2025-02-30': day is out of range", 9),
    ("ts > TIMESTAMP '2025-13-01 00:00:00'", "invalid TIMESTAMP literal", 15),
    ("x = 1 AND", "expected an expression after AND, found end of input", 9),
    ("x = 1 y = 2", "unexpected 'y' after a complete expression", 6),
    ("x BETWEEN 1 OR 2", "expected AND in BETWEEN … AND …, found 'OR'", 12),
    ("x === 1", "expected an expression, found '='", 4),
    ("x = @", "unexpected character '@'", 4),
    ("b = X'0g'", "invalid hex digits in binary literal X'0g'", 4),
    ('"abc = 1', "unterminated quoted identifier", 0),
    ("x IN (SELECT y FROM t)", "subqueries are not supported", 6),
    ("x = CAST('abc' AS INT)", "cannot cast 'abc' to INT", 9),
    ("5", "expected a boolean expression, found the literal '5'", 0),
    ("x IS 5", "expected NULL, TRUE, FALSE, UNKNOWN or DISTINCT FROM after IS, found '5'", 5),
    ("x IN (1, 2", "expected ',' or ')' in IN list, found end of input", 10),
    ("x = 1 AND OR y = 2", "expected an expression, found keyword OR", 10),
    ("ts = TIMESTAMP '2025-01-01 10:00:00.123456789'", "sub-microsecond precision", 15),
    ("x = 12abc", "invalid number '12a'", 4),
    ("lower(s = 'a'", "'(' at position 5 is never closed", 13),
    ("()", "expected an expression inside parentheses, found ')'", 1),
]


@pytest.mark.parametrize(
    ("text", "message", "position"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES]
)
def test_parse_errors(text, message, position):
    with pytest.raises(FilterParseError) as info:
        parse_filter(text)
    err = info.value
    assert message in str(err)
    assert err.position == position
    assert isinstance(err, ValueError)
    if text:
        assert repr(text) in str(err)  # the message quotes the filter...
        assert f"at position {position}" in str(err)
        caret_line = str(err).splitlines()[-1]
        assert caret_line.index("^") - 4 == position - (text.rfind("\n", 0, position) + 1)


def test_error_message_points_at_token():
    with pytest.raises(FilterParseError) as info:
        parse_filter("a = 1 AND b IN ()")
    lines = str(info.value).splitlines()
    assert lines[1] == "    a = 1 AND b IN ()"
    assert lines[2] == "                   ^"


def test_parse_filter_rejects_non_str():
    with pytest.raises(TypeError):
        parse_filter(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("x", "x"),
        ("order_date", "order_date"),
        ("_x1", "_x1"),
        ("CamelCase", "`CamelCase`"),
        ("Order Date", "`Order Date`"),
        ("país", "`país`"),
        ("a`b", "`a``b`"),
        ('a"b', '`a"b`'),
        ("1x", "`1x`"),
        ("select", "`select`"),
        ("date", "`date`"),
        ("and", "`and`"),
    ],
)
def test_quote_identifier(name, quoted):
    assert quote_identifier(name) == quoted
    assert parse_filter(f"{quoted} = 1") == cmp("=", name, 1)


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (None, "NULL"),
        (True, "TRUE"),
        (False, "FALSE"),
        (42, "42"),
        (-7, "-7"),
        (2**64 - 1, "18446744073709551615"),
        (-(2**63), "CAST('-9223372036854775808' AS BIGINT)"),
        (10**20 * 7, "CAST('700000000000000000000' AS DECIMAL(21,0))"),
        (1.5, "1.5e0"),
        (-0.0, "-0.0e0"),
        (1e20, "1e+20"),
        (float("inf"), "CAST('inf' AS DOUBLE)"),
        (float("-inf"), "CAST('-inf' AS DOUBLE)"),
        (float("nan"), "CAST('NaN' AS DOUBLE)"),
        (D("1.50"), "CAST('1.50' AS DECIMAL(3,2))"),
        (D("0.05"), "CAST('0.05' AS DECIMAL(2,2))"),
        (D("-3"), "CAST('-3' AS DECIMAL(1,0))"),
        (D("1E+3"), "CAST('1000' AS DECIMAL(4,0))"),
        ("it's", "'it''s'"),
        ("", "''"),
        (b"\x01\xff", "X'01FF'"),
        (b"", "X''"),
        (dt.date(2025, 1, 1), "DATE '2025-01-01'"),
        (dt.date(999, 1, 1), "DATE '0999-01-01'"),
        (dt.datetime(2025, 1, 1, 10), "TIMESTAMP '2025-01-01 10:00:00'"),
        (dt.datetime(2025, 1, 1, 10, 0, 0, 5), "TIMESTAMP '2025-01-01 10:00:00.000005'"),
        (
            dt.datetime(2025, 1, 1, 10, tzinfo=UTC),
            f"arrow_cast('2025-01-01T10:00:00Z', {UTC_TYPE})",
        ),
        (
            dt.datetime(2025, 1, 1, 12, tzinfo=PLUS2),
            f"arrow_cast('2025-01-01T10:00:00Z', {UTC_TYPE})",
        ),
        (dt.datetime(9999, 12, 31, 23, 59), "CAST('9999-12-31 23:59:00' AS TIMESTAMP(6))"),
        (
            dt.datetime(1500, 1, 1, tzinfo=PLUS2),
            f"arrow_cast('1499-12-31T22:00:00Z', {UTC_TYPE})",
        ),
        (dt.time(10, 30), "TIME '10:30:00'"),
        (dt.time(10, 30, 0, 250000), "TIME '10:30:00.250000'"),
    ],
)
def test_render_literal(value, sql):
    assert render_literal(value) == sql
    parsed = parse_filter(f"x = {sql}").literal.value
    if value == value:  # NaN aside, the literal reads back equal and of the same type
        assert parsed == value
        # (an integer beyond 64 bits can only be spelled as a decimal)
        assert type(parsed) is (D if isinstance(value, int) and value > 2**64 else type(value))


def test_render_literal_rejects_unknown():
    with pytest.raises(ValueError, match="cannot render a literal of type list"):
        render_literal([1, 2])
    with pytest.raises(ValueError, match="more than 38 digits"):
        render_literal(D("1." + "1" * 40))
    with pytest.raises(ValueError, match="non-finite decimal"):
        render_literal(D("NaN"))


def test_to_sql_spelling():
    expr = parse_filter(
        "NOT (a = 1 OR b IN (1, 2)) AND \"Order Date\" >= DATE '2025-01-01' "
        "AND (s LIKE 'x%' OR s IS NULL) AND flag"
    )
    assert to_sql(expr) == (
        "NOT (a = 1 OR b IN (1, 2)) AND `Order Date` >= DATE '2025-01-01' "
        "AND (s LIKE 'x%' OR s IS NULL) AND flag = TRUE"
    )
    assert to_sql(In(Ref("x"), ())) == "FALSE"
    assert to_sql(In(Ref("x"), (), negated=True)) == "TRUE"
    assert to_sql(Literal(None)) == "NULL"


# every AST the parser can produce survives to_sql -> parse_filter

_names = st.one_of(
    st.sampled_from(
        ["x", "order_date", "CamelCase", "Order Date", "país", "a`b", 'q"', "and", "date"]
    ),
    st.text(min_size=1, max_size=8),
)
_offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda m: dt.timezone(dt.timedelta(minutes=m))
)
_literals = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False),
    st.decimals(
        allow_nan=False, allow_infinity=False, places=4, max_value=10**20, min_value=-(10**20)
    ),
    st.text(max_size=10),
    st.binary(max_size=6),
    st.dates(),
    st.datetimes(),
    st.datetimes(
        min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(9000, 1, 1), timezones=_offsets
    ),
    st.times(),
).map(Literal)
_refs = _names.map(Ref)
_leaves = st.one_of(
    st.builds(Compare, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), _refs, _literals),
    st.builds(In, _refs, st.lists(_literals, min_size=1, max_size=4).map(tuple), st.booleans()),
    st.builds(IsNull, _refs, st.booleans()),
    st.builds(Like, _refs, st.text(max_size=8), st.booleans()),
    st.sampled_from(
        [Literal(True), Literal(False), Literal(None), Opaque("lower(s) = 'a'", ("s",))]
    ),
)
_exprs = st.recursive(
    _leaves,
    lambda children: st.one_of(
        st.builds(And, children, children),
        st.builds(Or, children, children),
        st.builds(Not, children),
    ),
    max_leaves=8,
)


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_exprs)
def test_round_trip_property(expr):
    """Rendered and parsed, any AST reaches the parser's form (AND/OR chains flat and
    balanced, equalities on one column in an OR chain one IN list: the same meaning,
    which the equivalence tests run), and the parser's form survives the trip exactly."""
    parsed = parse_filter(to_sql(expr))
    assert parse_filter(to_sql(parsed)) == parsed
    assert referenced_columns(parsed) == referenced_columns(expr)


def test_to_pyarrow_opaque_not_implemented():
    with pytest.raises(NotImplementedError, match="lower"):
        to_pyarrow(parse_filter("lower(s) = 'a'"))


# --------------------------------------------------------------------------------------
# Lance vs pyarrow (vs DataFusion) equivalence
# --------------------------------------------------------------------------------------


def _table() -> pa.Table:
    utc = UTC
    return pa.table(
        {
            "id": pa.array(range(8), pa.int64()),
            "i32": pa.array([1, 2, None, 4, 5, -1, 2, 0], pa.int32()),
            "i64": pa.array([10, 20, 30, None, -(2**63), 2**63 - 1, 20, 0], pa.int64()),
            "f": pa.array([1.5, None, 3.25, -1.0, 0.0, 2.5, 1e10, -0.5], pa.float64()),
            "s": pa.array(
                ["a", "it's", None, "héllo", "100%", "back\\slash", "x_y", ""], pa.string()
            ),
            "d": pa.array(
                [
                    dt.date(2025, 1, 1),
                    dt.date(2025, 2, 1),
                    None,
                    dt.date(2024, 12, 31),
                    dt.date(2025, 1, 15),
                    dt.date(1970, 1, 1),
                    dt.date(2025, 1, 1),
                    dt.date(2030, 6, 30),
                ],
                pa.date32(),
            ),
            "ts": pa.array(
                [
                    dt.datetime(2025, 1, 1, 10),
                    None,
                    dt.datetime(2025, 1, 2),
                    dt.datetime(2024, 1, 1),
                    dt.datetime(2025, 1, 1, 10, 0, 0, 1),
                    dt.datetime(2025, 1, 1, 9, 59, 59, 999999),
                    dt.datetime(2025, 6, 1),
                    dt.datetime(1999, 12, 31, 23, 59),
                ],
                pa.timestamp("us"),
            ),
            "tz": pa.array(
                [
                    dt.datetime(2025, 1, 1, 10, tzinfo=utc),
                    None,
                    dt.datetime(2025, 1, 2, tzinfo=utc),
                    dt.datetime(2024, 1, 1, tzinfo=utc),
                    dt.datetime(2025, 1, 1, 8, tzinfo=utc),
                    dt.datetime(2025, 1, 1, 0, tzinfo=utc),
                    dt.datetime(2025, 1, 1, 12, tzinfo=utc),
                    dt.datetime(2026, 1, 1, tzinfo=utc),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "dec": pa.array(
                [
                    D("1.50"),
                    D("2.25"),
                    None,
                    D("-3.00"),
                    D("0.00"),
                    D("1234567890.12"),
                    D("2"),
                    D("0.05"),
                ],
                pa.decimal128(12, 2),
            ),
            "b": pa.array([True, False, None, True, False, True, None, False], pa.bool_()),
            "bin": pa.array(
                [b"\x01\x02", b"", None, b"\xff", b"\x01", b"\x00", b"\x01\x02\x03", b"it's"],
                pa.binary(),
            ),
            "Order Date": pa.array(
                [
                    dt.date(2025, 1, 1),
                    dt.date(2025, 1, 2),
                    dt.date(2025, 1, 3),
                    None,
                    dt.date(2025, 1, 1),
                    dt.date(2024, 1, 1),
                    dt.date(2026, 1, 1),
                    dt.date(2025, 1, 2),
                ],
                pa.date32(),
            ),
            "país": pa.array(["ü", "España", None, "日本", "ü", "a'b", "", "x"], pa.string()),
            "CamelCase": pa.array([1, 2, 3, 4, None, 6, 7, 8], pa.int64()),
        }
    )


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return _table()


@pytest.fixture(scope="module")
def lance_ds(table, tmp_path_factory):
    return lance.write_dataset(table, str(tmp_path_factory.mktemp("sql") / "t.lance"))


@pytest.fixture(scope="module")
def df_ctx(table):
    ctx = SessionContext()
    ctx.register_record_batches("t", [table.to_batches()])
    return ctx


@pytest.fixture(scope="module")
def df_ctx_unoptimized(table):
    ctx = SessionContext(SessionConfig().set("datafusion.optimizer.max_passes", "0"))
    ctx.register_record_batches("t", [table.to_batches()])
    return ctx


def _ids(tbl: pa.Table) -> list[int]:
    return sorted(tbl.column("id").to_pylist())


def _lance_ids(ds, sql: str) -> list[int]:
    return _ids(ds.to_table(filter=sql, columns=["id"]))


def _pyarrow_ids(table: pa.Table, expr) -> list[int]:
    return _ids(pds.dataset(table).to_table(filter=expr))


def _datafusion_ids(ctx, sql: str) -> list[int]:
    return _ids(ctx.sql(f"SELECT id FROM t WHERE {sql}").to_arrow_table())


EQUIVALENCE_FILTERS = [
    # integers, all operator spellings, column on either side
    "i32 = 2",
    "i32 == 2",
    "i32 != 2",
    "i32 <> 2",
    "4 > i32",
    "i32 >= 2 AND i32 <= 4",
    "i32 = -1",
    "i32 = NULL",
    "i32 IS DISTINCT FROM 2",
    "i32 IS NOT DISTINCT FROM 2",
    "NOT (i32 IS NOT DISTINCT FROM 2)",
    "i32 IS NOT DISTINCT FROM NULL",
    "s IS DISTINCT FROM 'a'",
    "i64 BETWEEN 10 AND 30",
    "i64 NOT BETWEEN 10 AND 30",
    "i64 > -9223372036854775808",
    "i64 = 9223372036854775807",
    "i32 IN (1, 2, 5)",
    "i32 NOT IN (1, 2)",
    "i32 IN (1, NULL)",
    "i32 NOT IN (1, NULL)",
    "NOT (i32 IN (1, NULL))",
    "NOT i32 IN (1, 2)",
    "i32 > 1.5",
    "i32 = 1.5",
    "i32 < 1.5",
    "i32 IN (1.5, 2)",
    "i64 IN (20, 1.0)",
    "dec IN (2, 1.5)",
    # floats
    "f > 1.5",
    "f <= 2.5e0",
    "f < -0.25",
    "f = 1e10",
    "f BETWEEN -1 AND 1.5",
    # strings
    "s = 'it''s'",
    "s = 'back\\slash'",
    "s IN ('a', 'héllo', 'x_y')",
    "s NOT IN ('a')",
    "s LIKE 'h%'",
    "s NOT LIKE '%o'",
    "s LIKE '100\\%'",
    "s LIKE 'x\\_y'",
    "s LIKE '_'",
    "s = ''",
    "s > 'b'",
    "s IS NULL",
    "s IS NOT NULL",
    # dates and timestamps
    "d = DATE '2025-01-01'",
    "d > DATE '2025-01-15'",
    "d IN (DATE '2025-01-01', DATE '2024-12-31')",
    "d = CAST('2025-02-01' AS DATE)",
    "d BETWEEN '2025-01-01'::date AND '2025-12-31'::date",
    "ts >= TIMESTAMP '2025-01-01 10:00:00'",
    "ts > TIMESTAMP '2025-01-01 10:00:00'",
    "ts < TIMESTAMP '2025-01-01 10:00:00.000001'",
    "ts IN (TIMESTAMP '2025-01-02 00:00:00', TIMESTAMP '2024-01-01 00:00:00')",
    "tz = TIMESTAMP '2025-01-01 12:00:00+02:00'",
    "tz > TIMESTAMP '2025-01-01T00:00:00Z'",
    "tz <= TIMESTAMP '2025-01-01 10:00:00-01:00'",
    "tz < TIMESTAMP '2025-01-01 10:00:00'",
    "ts < TIMESTAMP '9999-12-31 23:59:59.999999'",
    "ts > TIMESTAMP '1500-06-01 00:00:00'",
    "tz > CAST('1000-01-01 00:00:00+02:00' AS TIMESTAMP)",
    # decimals
    "dec = 1.5",
    "dec > -3",
    "dec >= 2",
    "dec BETWEEN 0 AND 2.25",
    "dec IN (1.5, 2.25, 0.05)",
    "dec = 1234567890.12",
    "dec < CAST('0.1' AS DECIMAL(2,1))",
    # booleans
    "b",
    "NOT b",
    "b = FALSE",
    "b != TRUE",
    "b IS NULL",
    # binary
    "bin = X'0102'",
    "bin = X''",
    "bin > X'01'",
    "bin IN (X'FF', X'00')",
    # awkward column names
    "`Order Date` = DATE '2025-01-01'",
    "\"Order Date\" > DATE '2025-01-01'",
    't."Order Date" IS NULL',
    "país = 'ü'",
    "`país` IN ('a''b', '')",
    "CamelCase = 2",
    "`CamelCase` > 3",
    # boolean structure
    "NOT (i32 = 1)",
    "NOT i32 = 1 OR s IS NULL",
    "(i32 = 1 OR i32 = 2) AND NOT (s LIKE 'a%')",
    "i32 = 1 OR i64 = 20 AND f > 0",
    "(i32 = 1 OR i64 = 20) AND f > 0",
    "NOT (b OR i32 > 2)",
    "TRUE",
    "FALSE",
    "i32 > 0 AND TRUE",
]


@pytest.mark.parametrize("text", EQUIVALENCE_FILTERS)
def test_lance_matches_pyarrow(text, table, lance_ds, df_ctx):
    expr = parse_filter(text, table.column_names)
    sql = to_sql(expr)
    expected = _pyarrow_ids(table, to_pyarrow(expr, schema=table.schema))
    assert _lance_ids(lance_ds, sql) == expected, sql
    assert _datafusion_ids(df_ctx, sql) == expected, sql
    # the AST survives a trip through SQL text
    assert parse_filter(sql) == expr


def test_equivalence_matrix_is_not_trivial(table):
    """Most filters select some rows but not all, so the matrix really tests something."""
    proper = 0
    for text in EQUIVALENCE_FILTERS:
        expr = parse_filter(text, table.column_names)
        n = len(_pyarrow_ids(table, to_pyarrow(expr, schema=table.schema)))
        proper += 0 < n < table.num_rows
    assert proper >= 60


def test_to_pyarrow_without_schema(table):
    for text, expected in [
        ("i32 IN (1, 2) AND s IS NOT NULL", [0, 1, 6]),
        ("NOT (i32 IN (1, 2))", [3, 4, 5, 7]),
        ("f > 1.5 OR s LIKE 'h%'", [2, 3, 5, 6]),
        ("d = DATE '2025-01-01'", [0, 6]),
        ("tz = TIMESTAMP '2025-01-01 12:00:00+02:00'", [0]),
    ]:
        assert _pyarrow_ids(table, to_pyarrow(parse_filter(text))) == expected, text


OPAQUE_FILTERS = [
    "lower(s) = 'a'",
    "upper(país) = 'Ü'",
    "i32 + 1 > 3",
    "i32 * 10 = i64",
    "i32 = CamelCase",
    '"CamelCase" * 2 > 4',
    "s || 'x' = 'ax'",
    "character_length(s) > 3",
    "b IS TRUE",
    "b IS NOT TRUE",
    "s ILIKE 'H%'",
    "CAST(i32 AS DOUBLE) > 1.5e0",
    "coalesce(i32, 0) = 0",
    "i32 IS DISTINCT FROM i64",
    '"Order Date" > d',
]


@pytest.mark.parametrize("text", OPAQUE_FILTERS)
def test_opaque_runs_in_lance(text, lance_ds, df_ctx):
    """Opaque SQL (identifiers re-quoted with backticks) is accepted by Lance and
    selects what DataFusion selects."""
    expr = parse_filter(text)
    assert isinstance(expr, Opaque)
    sql = to_sql(expr)
    assert _lance_ids(lance_ds, sql) == _datafusion_ids(df_ctx, sql), sql


# random predicates over the test table: Lance and pyarrow agree (NULL logic under NOT,
# IN lists with NULL, literal coercion)

_small_decimals = st.decimals(min_value=-4, max_value=6, places=2)
_COLUMN_LITERALS = {
    "i32": st.one_of(st.integers(-2, 6), st.decimals(min_value=-2, max_value=6, places=1)),
    "i64": st.sampled_from([0, 10, 20, 30, -(2**63), 2**63 - 1, 15]),
    "f": st.one_of(st.sampled_from([1.5, -1.0, 0.0, 2.5, 1e10, -0.5, 3.0]), _small_decimals),
    "s": st.sampled_from(["a", "it's", "héllo", "100%", "back\\slash", "x_y", "", "b", "zz"]),
    "d": st.dates(min_value=dt.date(2024, 12, 1), max_value=dt.date(2025, 3, 1)),
    "ts": st.datetimes(min_value=dt.datetime(2024, 12, 31), max_value=dt.datetime(2025, 1, 3)),
    "tz": st.datetimes(
        min_value=dt.datetime(2024, 12, 31),
        max_value=dt.datetime(2025, 1, 3),
        timezones=st.sampled_from([UTC, PLUS2]),
    ),
    "dec": st.one_of(_small_decimals, st.integers(-4, 6)),
    "b": st.booleans(),
    "bin": st.sampled_from([b"", b"\x01", b"\x01\x02", b"\xff", b"\x00"]),
    "Order Date": st.dates(min_value=dt.date(2024, 12, 30), max_value=dt.date(2025, 1, 4)),
    "país": st.sampled_from(["ü", "España", "日本", "a'b", "", "x", "y"]),
    "CamelCase": st.integers(0, 9),
}


@st.composite
def _table_leaf(draw):
    name = draw(st.sampled_from(sorted(_COLUMN_LITERALS)))
    values = _COLUMN_LITERALS[name]
    maybe_null = st.one_of(values, st.none())
    kind = draw(st.sampled_from(["cmp", "cmp", "in", "null", "like"]))
    if kind == "like" and name in ("s", "país"):
        pattern = draw(st.sampled_from(["a%", "%o", "_", "%", "x\\_y", "100\\%", "%'%", "h_llo"]))
        return Like(Ref(name), pattern, draw(st.booleans()))
    if kind == "in":
        items = draw(st.lists(maybe_null, min_size=1, max_size=3))
        return In(Ref(name), tuple(Literal(v) for v in items), draw(st.booleans()))
    if kind == "null":
        return IsNull(Ref(name), draw(st.booleans()))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    return Compare(op, Ref(name), Literal(draw(values)))


_table_exprs = st.recursive(
    _table_leaf(),
    lambda children: st.one_of(
        st.builds(And, children, children),
        st.builds(Or, children, children),
        st.builds(Not, children),
    ),
    max_leaves=5,
)


@pytest.mark.filterwarnings("ignore:Generating overly large repr")
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(expr=_table_exprs)
def test_lance_matches_pyarrow_property(expr, table, lance_ds, df_ctx, df_ctx_unoptimized):
    sql = to_sql(expr)
    expected = _pyarrow_ids(table, to_pyarrow(expr, schema=table.schema))
    got = _lance_ids(lance_ds, sql)
    if got != expected:
        # Known upstream bug (DataFusion <= 55, hence Lance): the IN-list simplifier
        # folds `x IN (a) AND x NOT IN (a)` / `x IN (a) AND x IN (b)` to FALSE,
        # ignoring that it is NULL for a NULL x, which shows under a NOT. See
        # apache/datafusion#24258. Our SQL is right if DataFusion without its
        # optimizer agrees with pyarrow and the optimizer reproduces Lance.
        assert _datafusion_ids(df_ctx_unoptimized, sql) == expected, sql
        assert _datafusion_ids(df_ctx, sql) == got, sql
        assert " IN (" in sql and "NOT" in sql, sql


def test_opaque_mixed_with_structured(lance_ds, df_ctx):
    sql = to_sql(parse_filter("i32 > 0 AND (lower(s) LIKE 'h%' OR \"CamelCase\" + 1 = 3)"))
    assert _lance_ids(lance_ds, sql) == _datafusion_ids(df_ctx, sql) == [1, 3]


# --------------------------------------------------------------------------------------
# pyarrow expressions
# --------------------------------------------------------------------------------------

FIELD = pc.field

FROM_PYARROW_CASES = [
    ((FIELD("x") > 5) & (FIELD("name") == "a"), And(cmp(">", "x", 5), cmp("=", "name", "a"))),
    ((FIELD("x") < 1) | (FIELD("x") >= 9.5), Or(cmp("<", "x", 1), cmp(">=", "x", 9.5))),
    (pc.scalar(5) < FIELD("x"), cmp(">", "x", 5)),
    (FIELD("x") != 3, cmp("!=", "x", 3)),
    (FIELD("x").isin([1, 2]), In(Ref("x"), (Literal(1), Literal(2)))),
    (
        ~FIELD("x").isin([1, 2]),
        Not(And(IsNull(Ref("x"), negated=True), In(Ref("x"), (Literal(1), Literal(2))))),
    ),
    (FIELD("x").isin([1, None]), Or(IsNull(Ref("x")), In(Ref("x"), (Literal(1),)))),
    (FIELD("x").is_null(), IsNull(Ref("x"))),
    (FIELD("x").is_valid(), IsNull(Ref("x"), negated=True)),
    (~(FIELD("x") == 1), Not(cmp("=", "x", 1))),
    (FIELD("b"), cmp("=", "b", True)),
    (FIELD("s") == 'it\'s "q"', cmp("=", "s", 'it\'s "q"')),
    (FIELD("bin") == b"\x01\x02", cmp("=", "bin", b"\x01\x02")),
    (FIELD("dec") == D("1.50"), cmp("=", "dec", D("1.50"))),
    (FIELD("d") >= dt.date(2025, 1, 1), cmp(">=", "d", dt.date(2025, 1, 1))),
    (
        FIELD("ts") == dt.datetime(2025, 1, 1, 10, 0, 0, 123),
        cmp("=", "ts", dt.datetime(2025, 1, 1, 10, 0, 0, 123)),
    ),
    (
        FIELD("tz") == pa.scalar(dt.datetime(2025, 1, 1, 10), pa.timestamp("us", tz="UTC")),
        cmp("=", "tz", dt.datetime(2025, 1, 1, 10, tzinfo=UTC)),
    ),
    (
        FIELD("tz") == pa.scalar(dt.datetime(2025, 1, 1, 10), pa.timestamp("ns", tz="+02:00")),
        cmp("=", "tz", dt.datetime(2025, 1, 1, 12, tzinfo=PLUS2)),
    ),
    (FIELD("Order Date") == dt.date(2025, 1, 1), cmp("=", "Order Date", dt.date(2025, 1, 1))),
    (FIELD("x") == pa.scalar(1, pa.int8()), cmp("=", "x", 1)),
    (FIELD("x") == None, cmp("=", "x", None)),  # noqa: E711
    (pc.match_like(FIELD("s"), "h%"), Like(Ref("s"), "h%")),
    (pc.starts_with(FIELD("s"), "a_b"), Like(Ref("s"), "a\\_b%")),
    (pc.scalar(True), Literal(True)),
    (FIELD("x") + 1 > 3, Opaque("(x + 1) > 3", ("x",))),
    (FIELD("x") == FIELD("y"), Opaque("x = y", ("x", "y"))),
    (pc.utf8_lower(FIELD("s")) == "a", Opaque("lower(s) = 'a'", ("s",))),
    (FIELD("x").cast(pa.int32()) == 1, Opaque("CAST(x AS INT) = 1", ("x",))),
]


@pytest.mark.parametrize(
    ("expr", "expected"), FROM_PYARROW_CASES, ids=[str(c[0]) for c in FROM_PYARROW_CASES]
)
def test_from_pyarrow(expr, expected):
    assert from_pyarrow(expr) == expected


@pytest.mark.parametrize(
    "expr",
    [
        FIELD("i32") > 1,
        (FIELD("i32") > 1) & (FIELD("s") == "a"),
        FIELD("i32").isin([1, 2]),
        ~FIELD("i32").isin([1, 2]),
        FIELD("i32").isin([1, None]),
        ~FIELD("i32").isin([1, None]),
        pc.is_in(FIELD("i32"), value_set=pa.array([1, 4]), skip_nulls=True),
        ~pc.is_in(FIELD("i32"), value_set=pa.array([1, None]), skip_nulls=True),
        ~FIELD("i32").isin(pa.array([], pa.int32())),
        ~(FIELD("s").is_null() | (FIELD("f") < 0)),
        pc.match_like(FIELD("s"), "%l%"),
        ~pc.match_substring(FIELD("s"), "%"),
        pc.ends_with(FIELD("s"), "o"),
        FIELD("d") == dt.date(2025, 1, 1),
        FIELD("bin") == b"",
        FIELD("b"),
        ~FIELD("b"),
        FIELD("f") >= 1.5,
        FIELD("Order Date") > dt.date(2025, 1, 1),
    ],
    ids=str,
)
def test_from_pyarrow_semantics(expr, table, lance_ds):
    """Lance with the translated SQL selects what pyarrow selects with the original."""
    translated = from_pyarrow(expr)
    expected = _pyarrow_ids(table, expr)
    assert _lance_ids(lance_ds, to_sql(translated)) == expected, to_sql(translated)
    assert _pyarrow_ids(table, to_pyarrow(translated, schema=table.schema)) == expected


def test_from_pyarrow_negated_negative_literal():
    """negate(-5) is 5: the old route through SQL text spelled it ``(--5)``, which
    the tokenizer reads as a comment."""
    assert from_pyarrow(FIELD("a") < pc.negate(pc.scalar(-5))) == Compare("<", Ref("a"), Literal(5))
    # in an opaque predicate the text stays valid SQL
    opaque = from_pyarrow(FIELD("a") < pc.add(FIELD("b"), pc.negate(pc.scalar(-5))))
    assert opaque == Opaque("a < (b + (- -5))", ("a", "b"))
    assert parse_filter(to_sql(opaque)) == opaque


def test_from_pyarrow_unsupported():
    with pytest.raises(ValueError, match="if_else"):
        from_pyarrow(pc.if_else(FIELD("a"), FIELD("b"), FIELD("c")))
    with pytest.raises(ValueError, match="nested field"):
        from_pyarrow(FIELD(("a", "b")) == 1)
    with pytest.raises(ValueError, match="non-Kleene"):
        from_pyarrow(~pc.and_(FIELD("a"), FIELD("b")))
    # or(NULL, TRUE) is NULL in pyarrow and TRUE in SQL: refused even unnegated
    with pytest.raises(ValueError, match="non-Kleene 'or"):
        from_pyarrow(pc.or_(FIELD("a") == 1, FIELD("b") > 0))
    with pytest.raises(ValueError, match="nanosecond"):
        from_pyarrow(FIELD("t") == pa.scalar(1, pa.timestamp("ns")))
    with pytest.raises(TypeError):
        from_pyarrow("x > 1")


# --------------------------------------------------------------------------------------
# DataFusion expressions
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def df_frame(df_ctx):
    return df_ctx.table("t")


def test_from_datafusion_builders():
    cases = [
        ((col("x") > lit(5)) & (col("s") == lit("a")), And(cmp(">", "x", 5), cmp("=", "s", "a"))),
        (lit(5) < col("x"), cmp(">", "x", 5)),
        (col("x").is_null(), IsNull(Ref("x"))),
        (col("x").is_not_null(), IsNull(Ref("x"), negated=True)),
        (~(col("x") == lit(1)), Not(cmp("=", "x", 1))),
        (col("x").between(lit(1), lit(3)), And(cmp(">=", "x", 1), cmp("<=", "x", 3))),
        (col("x").between(lit(1), lit(3), negated=True), Or(cmp("<", "x", 1), cmp(">", "x", 3))),
        (F.in_list(col("x"), [lit(1), lit(2)]), In(Ref("x"), (Literal(1), Literal(2)))),
        (F.in_list(col("x"), [lit(1)], negated=True), In(Ref("x"), (Literal(1),), negated=True)),
        (col("x") == lit(1.5), cmp("=", "x", 1.5)),
        (col("x") == lit(D("1.50")), cmp("=", "x", D("1.50"))),
        (col("x") == lit(b"\x01"), cmp("=", "x", b"\x01")),
        (col("x") == lit(dt.date(2025, 1, 1)), cmp("=", "x", dt.date(2025, 1, 1))),
        (col("x") == lit(dt.datetime(2025, 1, 1, 10)), cmp("=", "x", dt.datetime(2025, 1, 1, 10))),
        (
            col("x") == lit(pa.scalar(dt.datetime(2025, 1, 1, 10), pa.timestamp("us", tz="UTC"))),
            cmp("=", "x", dt.datetime(2025, 1, 1, 10, tzinfo=UTC)),
        ),
        (col("Order Date") == lit(1), cmp("=", "Order Date", 1)),
        (col("b"), cmp("=", "b", True)),
        (col("x") + lit(1) > lit(3), Opaque("(x + 1) > 3", ("x",))),
        (col("x") == col("y"), Opaque("x = y", ("x", "y"))),
        (F.lower(col("s")) == lit("a"), Opaque("lower(s) = 'a'", ("s",))),
    ]
    for expr, expected in cases:
        assert from_datafusion(expr) == expected, expr.canonical_name()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("s LIKE 'h%'", Like(Ref("s"), "h%")),
        ("s NOT LIKE 'h%'", Like(Ref("s"), "h%", negated=True)),
        ("s ILIKE 'h%'", Opaque("s ILIKE 'h%'", ("s",))),
        ("s LIKE '100\\%' ESCAPE '\\'", Opaque("s LIKE '100\\%' ESCAPE '\\'", ("s",))),
        ("d = DATE '2025-01-01'", cmp("=", "d", dt.date(2025, 1, 1))),
        (
            "tz = TIMESTAMP '2025-01-01 12:00:00+02:00'",
            cmp("=", "tz", dt.datetime(2025, 1, 1, 10, tzinfo=UTC)),
        ),
        ("i32 = -1", cmp("=", "i32", -1)),
        ("i32 IN (1, NULL)", In(Ref("i32"), (Literal(1), Literal(None)))),
        ("dec = CAST('1.5' AS DECIMAL(3,1))", cmp("=", "dec", D("1.5"))),
        ("`Order Date` > DATE '2025-01-01'", cmp(">", "Order Date", dt.date(2025, 1, 1))),
        ("b IS TRUE", Opaque("b IS TRUE", ("b",))),
        ("-i32 < 0", Opaque("(-i32) < 0", ("i32",))),
        ("coalesce(i32, 0) > 1", Opaque("coalesce(i32, 0) > 1", ("i32",))),
        (
            "i32 IS DISTINCT FROM 1",
            Or(cmp("!=", "i32", 1), IsNull(Ref("i32"))),
        ),
        (
            "i32 IS NOT DISTINCT FROM 1",
            And(cmp("=", "i32", 1), IsNull(Ref("i32"), negated=True)),
        ),
        ("1 IS NOT DISTINCT FROM i32", And(cmp("=", "i32", 1), IsNull(Ref("i32"), negated=True))),
        ("i32 IS NOT DISTINCT FROM NULL", IsNull(Ref("i32"))),
        ("i32 IS DISTINCT FROM i64", Opaque("i32 IS DISTINCT FROM i64", ("i32", "i64"))),
        (
            "CASE WHEN i32 > 1 THEN true ELSE false END",
            Opaque("CASE WHEN (i32 > 1) THEN TRUE ELSE FALSE END", ("i32",)),
        ),
        (
            "i32 > 1 AND (s = 'a' OR NOT b)",
            And(cmp(">", "i32", 1), Or(cmp("=", "s", "a"), Not(cmp("=", "b", True)))),
        ),
    ],
)
def test_from_datafusion_sql(sql, expected, df_frame, lance_ds, df_ctx):
    expr = from_datafusion(df_frame.parse_sql_expr(sql))
    assert expr == expected
    # whatever came out still selects the same rows (in DataFusion; in Lance unless
    # its planner lacks the construct: CASE)
    assert _datafusion_ids(df_ctx, to_sql(expr)) == _datafusion_ids(df_ctx, sql)
    if "CASE" not in sql:
        assert _lance_ids(lance_ds, to_sql(expr)) == _datafusion_ids(df_ctx, sql)


def test_from_datafusion_unsupported(df_frame):
    with pytest.raises(ValueError, match="cannot translate DataFusion"):
        from_datafusion(F.count(col("x")) > lit(1))
    with pytest.raises(TypeError):
        from_datafusion("x > 1")
