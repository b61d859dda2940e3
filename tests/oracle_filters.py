"""An independent oracle for filters: random predicate trees rendered twice.

A filter is a small tree of ``(column, op, literal)`` leaves joined by AND/OR/NOT.
This module renders each tree two ways with its own tiny code:

* :func:`to_sql` — SQL text, as a user would type it for ``ns.scan(sql)``;
* :func:`to_pc` — a ``pyarrow.compute`` expression built directly from
  ``pc.field(...)`` and ``pa.scalar(literal, type=...)``, evaluated over the
  source Arrow table.

Nothing here imports ``lance_partitioned``: the expected rows never pass through
our parser, binder, ``to_pyarrow`` or transforms, so a literal-coercion bug in the
library cannot sit on both sides of a comparison.

Semantics the oracle fixes (SQL three-valued logic throughout):

* a dotted column ``st.a`` / ``st.inner.c`` is a field of struct column ``st``
  (``pc.struct_field``): NULL wherever the struct (or a struct on the way) is NULL;
* comparisons with NULL are NULL; ``NOT NULL`` is NULL; AND/OR are Kleene; a row
  is kept only when the predicate is TRUE;
* ``x IN (a, b)`` is ``x = a OR x = b`` (so ``NULL NOT IN (...)`` is NULL, not TRUE
  as ``pc.is_in`` would say); ``x BETWEEN a AND b`` is ``x >= a AND x <= b``;
* numbers compare mathematically: a literal the column type cannot hold exactly
  (``2.5`` against an integer column, ``1.255`` against ``decimal(12,2)``,
  3e9 against int32) is kept at a wider exact type, never rounded;
* a timestamp literal with an offset (``-05:00``, ``Z``) is that instant; one
  without an offset is wall-clock time in the column's zone (``zoneinfo``;
  naive columns compare wall-clock values as stored). Wall-clock times that a
  DST change skips or repeats are not generated: the rule for them is not fixed.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import strategies as st

UTC = dt.timezone.utc
D = decimal.Decimal


# --------------------------------------------------------------------------------------
# The tree
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lit:
    """A literal: ``sql`` is how it is spelled, ``value``/``type`` build the pa.scalar."""

    sql: str
    value: Any
    type: pa.DataType

    def scalar(self) -> pa.Scalar:
        return pa.scalar(self.value, type=self.type)

    def __repr__(self) -> str:  # hypothesis prints this in counterexamples
        return self.sql


@dataclass(frozen=True)
class Cmp:
    col: str
    op: str
    lit: Lit


@dataclass(frozen=True)
class InList:
    col: str
    lits: tuple[Lit, ...]
    negated: bool


@dataclass(frozen=True)
class Between:
    col: str
    lo: Lit
    hi: Lit
    negated: bool


@dataclass(frozen=True)
class IsNull:
    col: str
    negated: bool


@dataclass(frozen=True)
class Like:
    col: str
    pattern: str
    negated: bool


@dataclass(frozen=True)
class Part:
    """A calendar field of ``col`` (``unit``: year, month, day or hour, as Spark SQL's and
    DuckDB's functions: the calendar year, month 1-12, day 1-31, hour 0-23, of a zoned
    timestamp in its zone) compared with literals: ``op`` is a comparison (one literal),
    ``IN``/``NOT IN`` or ``BETWEEN``/``NOT BETWEEN`` (two). ``spelling`` is how the
    field is written: ``year(c)``, ``date_part('year', c)`` or ``EXTRACT(YEAR FROM c)``."""

    unit: str
    col: str
    op: str
    lits: tuple[Lit, ...]
    spelling: str


@dataclass(frozen=True)
class And:
    a: Any
    b: Any


@dataclass(frozen=True)
class Or:
    a: Any
    b: Any


@dataclass(frozen=True)
class Not:
    a: Any


def sql_string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def to_sql(node: Any) -> str:
    """SQL text for a filter tree (fully parenthesised)."""
    if isinstance(node, Cmp):
        return f"{node.col} {node.op} {node.lit.sql}"
    if isinstance(node, InList):
        kw = "NOT IN" if node.negated else "IN"
        return f"{node.col} {kw} ({', '.join(v.sql for v in node.lits)})"
    if isinstance(node, Between):
        kw = "NOT BETWEEN" if node.negated else "BETWEEN"
        return f"{node.col} {kw} {node.lo.sql} AND {node.hi.sql}"
    if isinstance(node, IsNull):
        return f"{node.col} IS {'NOT ' if node.negated else ''}NULL"
    if isinstance(node, Like):
        return f"{node.col} {'NOT ' if node.negated else ''}LIKE {sql_string(node.pattern)}"
    if isinstance(node, Part):
        return _part_sql(node)
    if isinstance(node, And):
        return f"({to_sql(node.a)} AND {to_sql(node.b)})"
    if isinstance(node, Or):
        return f"({to_sql(node.a)} OR {to_sql(node.b)})"
    if isinstance(node, Not):
        return f"NOT ({to_sql(node.a)})"
    raise TypeError(node)


_PC_OPS = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<>": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _part_sql(node: Part) -> str:
    field = {
        "call": f"{node.unit}({node.col})",
        "date_part": f"date_part('{node.unit}', {node.col})",
        "plural": f"DATE_PART('{node.unit.upper()}S', {node.col})",
        "extract": f"EXTRACT({node.unit.upper()} FROM {node.col})",
    }[node.spelling]
    lits = [v.sql for v in node.lits]
    if node.op in ("IN", "NOT IN"):
        return f"{field} {node.op} ({', '.join(lits)})"
    if node.op in ("BETWEEN", "NOT BETWEEN"):
        return f"{field} {node.op} {lits[0]} AND {lits[1]}"
    return f"{field} {node.op} {lits[0]}"


def _part_pc(node: Part) -> pc.Expression:
    """``pc.year``/``pc.month``/``pc.day``/``pc.hour`` of the column (a zoned timestamp's
    fields in its zone, as pyarrow computes them) compared as SQL compares."""
    x = getattr(pc, node.unit)(col_expr(node.col))
    if node.op in ("IN", "NOT IN"):
        e = _any([pc.equal(x, v.scalar()) for v in node.lits])
        return ~e if node.op == "NOT IN" else e
    if node.op in ("BETWEEN", "NOT BETWEEN"):
        e = (x >= node.lits[0].scalar()) & (x <= node.lits[1].scalar())
        return ~e if node.op == "NOT BETWEEN" else e
    return _PC_OPS[node.op](x, node.lits[0].scalar())


def col_expr(col: str) -> pc.Expression:
    """Column ``col``, or for ``st.a`` the struct field, NULL where a struct is NULL."""
    head, *path = col.split(".")
    e = pc.field(head)
    for name in path:
        e = pc.struct_field(e, name)
    return e


def field_type(schema: pa.Schema, col: str) -> pa.DataType:
    """The type of column ``col`` of ``schema`` (a dotted name: a struct field's)."""
    head, *path = col.split(".")
    t = schema.field(head).type
    for name in path:
        t = t.field(name).type
    return t


def to_pc(node: Any) -> pc.Expression:
    """The same filter as a pyarrow.compute expression (SQL three-valued logic)."""
    if isinstance(node, Part):
        return _part_pc(node)
    if isinstance(node, Cmp):
        return _PC_OPS[node.op](col_expr(node.col), node.lit.scalar())
    if isinstance(node, InList):
        e = _any([pc.equal(col_expr(node.col), v.scalar()) for v in node.lits])
        return ~e if node.negated else e
    if isinstance(node, Between):
        x = col_expr(node.col)
        e = (x >= node.lo.scalar()) & (x <= node.hi.scalar())
        return ~e if node.negated else e
    if isinstance(node, IsNull):
        e = col_expr(node.col).is_null()
        return ~e if node.negated else e
    if isinstance(node, Like):
        e = pc.match_like(col_expr(node.col), pattern=node.pattern)
        return ~e if node.negated else e
    if isinstance(node, And):
        return to_pc(node.a) & to_pc(node.b)  # and_kleene
    if isinstance(node, Or):
        return to_pc(node.a) | to_pc(node.b)  # or_kleene
    if isinstance(node, Not):
        return ~to_pc(node.a)
    raise TypeError(node)


def _any(exprs: list[pc.Expression]) -> pc.Expression:
    out = exprs[0]
    for e in exprs[1:]:
        out = out | e
    return out


def expected_ids(table: pa.Table, node: Any) -> list[int]:
    """Sorted ids of the rows of ``table`` the oracle keeps."""
    return sorted(table.filter(to_pc(node))["id"].to_pylist())


# --------------------------------------------------------------------------------------
# Values: data and literals come from the same anchors, so filters cut through data
# --------------------------------------------------------------------------------------

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

STRINGS = [
    "",
    "a",
    "ab",
    "abc",
    "abd",
    "ap",
    "apple",
    "apricot",
    "b",
    "ba",
    "banana",
    "Zz",
    "é",
    "éa",
    "a%",
    "a%b",
    "a_c",
    "o'k",
    "日本",
]
LIKE_PATTERNS = [
    "a%",
    "ab%",
    "abc%",
    "ap%",
    "apr%",
    "b%",
    "é%",
    "日%",
    "A%",
    "%",
    "%b",
    "%c",
    "_b%",
    "a_c",
    "a%c",
    "abc",
    "a\\%%",
    "a\\_c",
    "o'%",
]

# dates around month ends, year ends and leap days
# both ends of the calendar (issue 28 C7): data and literals at and next to them
DATE_EDGES = [dt.date(1, 1, 1), dt.date(1, 1, 2), dt.date(9999, 12, 30), dt.date(9999, 12, 31)]
DATE_ANCHORS = [
    dt.date(2023, 12, 31),
    dt.date(2024, 1, 1),
    dt.date(2024, 1, 31),
    dt.date(2024, 2, 28),
    dt.date(2024, 2, 29),
    dt.date(2024, 3, 1),
    dt.date(2024, 12, 31),
    dt.date(2025, 1, 1),
    dt.date(2025, 2, 28),
    dt.date(2025, 3, 1),
    dt.date(2025, 3, 9),
    dt.date(2025, 11, 2),
]

# wall-clock instants on and off unit boundaries: year/month ends, a leap day, the
# issue's mutation case (2025-03-05 01:00), and both 2025 DST changes in New York
TIME_ANCHORS = [
    dt.datetime(2024, 2, 28, 23, 30),
    dt.datetime(2024, 2, 29, 0, 0),
    dt.datetime(2024, 2, 29, 12, 34, 56, 500000),
    dt.datetime(2024, 3, 1, 0, 0),
    dt.datetime(2024, 12, 31, 23, 0),
    dt.datetime(2025, 1, 1, 0, 0),
    dt.datetime(2025, 3, 5, 0, 0),
    dt.datetime(2025, 3, 5, 1, 0),
    dt.datetime(2025, 3, 9, 0, 0),
    dt.datetime(2025, 3, 9, 1, 30),
    dt.datetime(2025, 3, 9, 3, 0),
    dt.datetime(2025, 3, 9, 23, 30),
    dt.datetime(2025, 4, 30, 23, 59, 59),
    dt.datetime(2025, 11, 2, 0, 0),
    dt.datetime(2025, 11, 2, 1, 0),
    dt.datetime(2025, 11, 2, 2, 0),
    dt.datetime(2025, 11, 2, 23, 0),
]
# small steps around each anchor for literals (the anchor itself drawn most often)
TIME_DELTAS = [
    dt.timedelta(0),
    dt.timedelta(0),
    dt.timedelta(0),
    dt.timedelta(microseconds=1),
    dt.timedelta(seconds=-1),
    dt.timedelta(seconds=1),
    dt.timedelta(minutes=-30),
    dt.timedelta(minutes=30),
    dt.timedelta(hours=-1),
    dt.timedelta(hours=1),
]
DATA_TIME_DELTAS = [
    dt.timedelta(0),
    dt.timedelta(microseconds=-1),
    dt.timedelta(seconds=1),
    dt.timedelta(minutes=-30),
    dt.timedelta(minutes=20),
    dt.timedelta(minutes=59, seconds=59),
]
# offsets literals may be spelled with
OFFSETS = ["Z", "+00:00", "-05:00", "-04:00", "+05:30", "+01:00"]


def zone_of(t: pa.DataType) -> dt.tzinfo | None:
    """The tzinfo of a timestamp type (None for naive)."""
    if t.tz is None:
        return None
    return UTC if t.tz in ("UTC", "+00:00") else ZoneInfo(t.tz)


def wall_clock_is_unique(wall: dt.datetime, zone: dt.tzinfo) -> bool:
    """False for wall-clock times a DST change skips or repeats in ``zone``."""
    a = wall.replace(tzinfo=zone, fold=0)
    b = wall.replace(tzinfo=zone, fold=1)
    if a.utcoffset() != b.utcoffset():
        return False
    # a skipped time does not survive a round trip through UTC
    return a.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall


def time_instants(zone: dt.tzinfo | None) -> list[dt.datetime]:
    """Data values for a timestamp column: anchors read in the column's zone and in
    UTC, plus small steps. Aware datetimes for zoned columns, naive otherwise."""
    out = set()
    for wall in TIME_ANCHORS:
        for dz in [zone, UTC] if zone is not None else [None]:
            if dz is not None and not wall_clock_is_unique(wall, dz):
                continue
            base = wall if dz is None else wall.replace(tzinfo=dz).astimezone(UTC)
            for delta in DATA_TIME_DELTAS:
                out.add(base + delta)
    return sorted(out)


# --------------------------------------------------------------------------------------
# Literal strategies per column type
# --------------------------------------------------------------------------------------


def _int_lits(t: pa.DataType) -> st.SearchStrategy[Lit]:
    lo, hi = (INT32_MIN, INT32_MAX) if t == pa.int32() else (INT64_MIN, INT64_MAX)
    near = (-15, 15) if t == pa.int32() else (-60, 60)
    exact = st.one_of(
        st.integers(*near),
        st.sampled_from([lo, hi, lo + 1, hi - 1]),
    ).map(lambda v: Lit(str(v), v, t))
    # numbers the column type cannot hold compare by value, kept at a wider exact type
    wide = st.sampled_from(
        [
            Lit(str(hi + 1), D(hi + 1), pa.decimal128(38, 0)),
            Lit(str(lo - 1), D(lo - 1), pa.decimal128(38, 0)),
            Lit("3000000000", D(3_000_000_000), pa.decimal128(38, 0)),
            Lit(str(-(2**70)), D(-(2**70)), pa.decimal128(38, 0)),
            Lit(str(10**40), D(10**40), pa.decimal256(41, 0)),
            Lit("1e30", D(10**30), pa.decimal128(38, 0)),
            Lit("-9.3e18", D(-93 * 10**17), pa.decimal128(38, 0)),
        ]
    )
    # halves, as decimal numerals (2.5) and float numerals (2.5e0)
    half = st.integers(-120, 120).map(lambda k: D(k) / 2)
    fraction = st.one_of(
        half.map(lambda v: Lit(str(v), v, pa.decimal128(12, 1))),
        half.map(lambda v: Lit(f"{float(v)!r}e0", v, pa.decimal128(12, 1))),
    )
    return st.one_of(exact, exact, exact, wide, fraction)


def _float_lits(t: pa.DataType) -> st.SearchStrategy[Lit]:
    quarter = st.integers(-44, 44).map(lambda k: k / 4)
    return st.one_of(
        quarter.map(lambda v: Lit(_plain_decimal(v), v, t)),  # 1.25: a decimal numeral
        quarter.map(lambda v: Lit(f"{v!r}e0", v, t)),  # 1.25e0: a float numeral
        st.integers(-11, 11).map(lambda v: Lit(str(v), float(v), t)),
    )


def _plain_decimal(v: float) -> str:
    s = format(D(repr(v)), "f")
    return s if "." in s else s + ".0"


def _decimal_lits(t: pa.DataType) -> st.SearchStrategy[Lit]:
    cents = st.one_of(
        st.integers(-1200, 1200), st.sampled_from([-500, -499, -1, 0, 1, 499, 500, 501])
    )
    exact = cents.map(lambda c: D(c).scaleb(-2)).map(lambda v: Lit(_dec_sql(v), v, t))
    whole = st.integers(-12, 12).map(lambda v: Lit(str(v), D(v), t))
    # finer than the column's scale, as decimal numerals (1.255) and float numerals
    # (1.234375e0: sixty-fourths, so the float's exact value is short)
    thousandths = st.integers(-12000, 12000).map(lambda k: D(k).scaleb(-3))
    sixty_fourths = st.integers(-800, 800).map(lambda k: D(k) / 64)
    finer = st.one_of(
        thousandths.map(lambda v: Lit(_dec_sql(v), v, pa.decimal128(13, 3))),
        sixty_fourths.map(lambda v: Lit(f"{float(v)!r}e0", v, pa.decimal128(13, 6))),
    )
    # beyond the column's range
    wide = st.sampled_from(
        [
            Lit("10000000000000", D(10**13), pa.decimal128(16, 2)),
            Lit("-1e20", D(-(10**20)), pa.decimal128(23, 2)),
            Lit("99999999999.995", D("99999999999.995"), pa.decimal128(14, 3)),
        ]
    )
    return st.one_of(exact, exact, whole, finer, wide)


def _dec_sql(v: D) -> str:
    s = format(v, "f")
    return s if "." in s else s + ".0"


def _date_lits(t: pa.DataType) -> st.SearchStrategy[Lit]:
    day = st.one_of(
        st.tuples(st.sampled_from(DATE_ANCHORS), st.integers(-1, 1)).map(
            lambda p: p[0] + dt.timedelta(days=p[1])
        ),
        st.sampled_from(DATE_EDGES),
    )
    return st.one_of(
        day.map(lambda d: Lit(f"DATE '{d.isoformat()}'", d, t)),
        day.map(lambda d: Lit(f"'{d.isoformat()}'", d, t)),
    )


def _string_lits(t: pa.DataType) -> st.SearchStrategy[Lit]:
    return st.sampled_from([*STRINGS, "zz", "apq", "A"]).map(lambda s: Lit(sql_string(s), s, t))


def _fmt_wall(w: dt.datetime, sep: str = " ") -> str:
    s = w.strftime(f"%Y-%m-%d{sep}%H:%M:%S")
    return s + f".{w.microsecond:06d}" if w.microsecond else s


def _fmt_offset(off: dt.timedelta) -> str:
    minutes = int(off.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@st.composite
def _timestamp_lit(draw, t: pa.DataType, offsets: bool) -> Lit:
    """An instant near the data, spelled without an offset (wall clock in the column's
    zone) or, if ``offsets``, with one."""
    zone = zone_of(t)
    wall = draw(st.sampled_from(TIME_ANCHORS)) + draw(st.sampled_from(TIME_DELTAS))
    # often exactly the start of an hour, day or month near the data: the bounds that
    # strict/non-strict range pruning through a calendar hierarchy must get right
    unit = draw(st.sampled_from([None, None, "hour", "hour", "day", "month"]))
    if unit is not None:
        wall = wall.replace(minute=0, second=0, microsecond=0)
        if unit != "hour":
            wall = wall.replace(hour=0, day=1 if unit == "month" else wall.day)
    if zone is None:
        keyword = draw(st.sampled_from(["TIMESTAMP ", ""]))
        return Lit(f"{keyword}'{_fmt_wall(wall)}'", wall, t)
    # the anchor is read in the column's zone or in UTC
    read_in = draw(st.sampled_from([zone, UTC]))
    if not wall_clock_is_unique(wall, read_in):
        wall = wall + dt.timedelta(hours=2)  # off the DST change, still on its day
    instant = wall.replace(tzinfo=read_in)
    local = instant.astimezone(zone).replace(tzinfo=None)
    spelled = draw(st.sampled_from(["naive", "offset"] if offsets else ["naive"]))
    if spelled == "naive" and wall_clock_is_unique(local, zone):
        keyword = draw(st.sampled_from(["TIMESTAMP ", "TIMESTAMP ", ""]))
        # oracle: wall-clock time in the column's zone
        return Lit(f"{keyword}'{_fmt_wall(local)}'", local.replace(tzinfo=zone), t)
    off = draw(st.sampled_from(OFFSETS + ["zone"]))
    if off == "zone":
        shown = instant.astimezone(zone)
        text = _fmt_wall(shown.replace(tzinfo=None)) + _fmt_offset(shown.utcoffset())
    elif off == "Z":
        sep = draw(st.sampled_from([" ", "T"]))
        text = _fmt_wall(instant.astimezone(UTC).replace(tzinfo=None), sep) + "Z"
    else:
        sign = -1 if off[0] == "-" else 1
        tz = dt.timezone(sign * dt.timedelta(hours=int(off[1:3]), minutes=int(off[4:6])))
        text = _fmt_wall(instant.astimezone(tz).replace(tzinfo=None)) + off
    return Lit(f"TIMESTAMP '{text}'", instant, t)


def literals(t: pa.DataType, offsets: bool = True) -> st.SearchStrategy[Lit]:
    """Literals for a column of type ``t``."""
    if pa.types.is_integer(t):
        return _int_lits(t)
    if pa.types.is_floating(t):
        return _float_lits(t)
    if pa.types.is_decimal(t):
        return _decimal_lits(t)
    if pa.types.is_date(t):
        return _date_lits(t)
    if pa.types.is_string(t):
        return _string_lits(t)
    if pa.types.is_timestamp(t):
        return _timestamp_lit(t, offsets)
    raise TypeError(t)


# --------------------------------------------------------------------------------------
# Filter trees
# --------------------------------------------------------------------------------------

OPS = ["=", "!=", "<>", "<", "<=", ">", ">="]
# for range-focused tests: mostly bounds, strict and not
RANGE_OPS = ["<", "<", "<=", ">", ">=", ">=", "=", "!="]


@st.composite
def filters(
    draw,
    schema: pa.Schema,
    columns: list[str],
    favour: list[str] = (),
    depth: int = 0,
    offsets: bool = True,
    ops: list[str] = OPS,
    functions: bool = False,
):
    """A random filter tree over ``columns`` of ``schema`` (``favour``: drawn more often;
    ``ops``: the comparison operators to draw from; ``functions``: half the predicates
    on dates and timestamps test a calendar field, ``Part``)."""
    leaf_kinds = ["cmp", "cmp", "cmp", "in", "between", "null"]
    kinds = leaf_kinds + (["and", "and", "or", "not"] if depth < 2 else [])
    kind = draw(st.sampled_from(kinds))
    if kind in ("and", "or"):
        a = draw(filters(schema, columns, favour, depth + 1, offsets, ops, functions))
        b = draw(filters(schema, columns, favour, depth + 1, offsets, ops, functions))
        return And(a, b) if kind == "and" else Or(a, b)
    if kind == "not":
        return Not(draw(filters(schema, columns, favour, depth + 1, offsets, ops, functions)))
    col = draw(st.sampled_from([c for c in favour if c in columns] * 3 + list(columns)))
    t = field_type(schema, col)
    if functions and (pa.types.is_date(t) or pa.types.is_timestamp(t)) and draw(st.booleans()):
        return draw(parts(col, t))
    lits = literals(t, offsets)
    if pa.types.is_string(t) and draw(st.integers(0, 3)) == 0:
        return Like(col, draw(st.sampled_from(LIKE_PATTERNS)), draw(st.booleans()))
    if kind == "cmp":
        return Cmp(col, draw(st.sampled_from(ops)), draw(lits))
    if kind == "in":
        return InList(col, tuple(draw(st.lists(lits, min_size=1, max_size=4))), draw(st.booleans()))
    if kind == "between":
        lo, hi = draw(lits), draw(lits)
        return Between(col, lo, hi, draw(st.booleans()))
    return IsNull(col, draw(st.booleans()))


# calendar field values near the data (2023-2025, and dates in years 1 and 9999), with
# the values just outside each field's range
PART_VALUES = {
    "year": [2023, 2024, 2024, 2025, 2025, 2026, 1, 2, 9998, 9999, 0, 10000],
    "month": [*range(1, 13), 0, 13],
    "day": [1, 1, 2, 5, 9, 28, 29, 30, 31, 0, 32],
    "hour": [0, 0, 1, 2, 3, 12, 22, 23, -1, 24],
}


def _part_lit(unit: str) -> st.SearchStrategy[Lit]:
    """A whole number, sometimes spelled as a string or a decimal (``2024.0``), or a
    half (``2024.5``), which no field value equals."""
    n = st.sampled_from(PART_VALUES[unit])
    return st.one_of(
        n.map(lambda v: Lit(str(v), v, pa.int64())),
        n.map(lambda v: Lit(str(v), v, pa.int64())),
        n.map(lambda v: Lit(str(v), v, pa.int64())),
        n.map(lambda v: Lit(f"'{v}'", v, pa.int64())),
        n.map(lambda v: Lit(f"{v}.0", v, pa.int64())),
        n.map(lambda v: Lit(str(v + 0.5), v + 0.5, pa.float64())),
    )


@st.composite
def parts(draw, col: str, t: pa.DataType) -> Part:
    """A ``Part`` predicate on date or timestamp column ``col`` (hour only on timestamps)."""
    units = ["year", "year", "month", "day"] + (["hour"] if pa.types.is_timestamp(t) else [])
    unit = draw(st.sampled_from(units))
    spelling = draw(st.sampled_from(["call", "call", "date_part", "plural", "extract"]))
    op = draw(st.sampled_from([*OPS, *OPS, "IN", "NOT IN", "BETWEEN", "NOT BETWEEN"]))
    count = {"IN": draw(st.integers(1, 4)), "NOT IN": draw(st.integers(1, 4))}.get(op, 1)
    if "BETWEEN" in op:
        count = 2
    lits = tuple(draw(_part_lit(unit)) for _ in range(count))
    return Part(unit, col, op, lits, spelling)


# --------------------------------------------------------------------------------------
# The source table
# --------------------------------------------------------------------------------------

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("i", pa.int64()),
        pa.field("j", pa.int32()),
        pa.field("f", pa.float64()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("d", pa.date32()),
        pa.field("s", pa.string()),
        pa.field("ts_utc", pa.timestamp("us", tz="UTC")),
        pa.field("ts_naive", pa.timestamp("us")),
        pa.field("ts_ny", pa.timestamp("us", tz="America/New_York")),
        pa.field("ts_kol", pa.timestamp("ns", tz="Asia/Kolkata")),
        # a struct column: filters on its fields (``st.a``, ``st.inner.c``) bind to
        # the fields' own ids and run in the leaves
        pa.field(
            "st",
            pa.struct(
                [
                    pa.field("a", pa.int64()),
                    pa.field("b", pa.string()),
                    pa.field("inner", pa.struct([pa.field("c", pa.date32())])),
                ]
            ),
        ),
    ]
)
# the struct fields random filters draw from
NESTED_COLUMNS = ["st.a", "st.b", "st.inner.c"]


def make_table(rows: int = 400, seed: int = 10) -> pa.Table:
    """Deterministic data: every anchor value at least once per column, ~6% NULLs."""
    import random

    rng = random.Random(seed)

    def column(pool: list[Any]) -> list[Any]:
        vals = list(pool)
        rng.shuffle(vals)
        vals = vals[:rows] + [rng.choice(pool) for _ in range(rows - len(vals))]
        return [None if rng.random() < 0.06 else v for v in vals]

    ints = [*range(-50, 51), INT64_MIN, INT64_MAX, INT64_MIN + 1, INT64_MAX - 1]
    int32s = [*range(-12, 13), INT32_MIN, INT32_MAX]
    floats = [k / 4 for k in range(-44, 45)]
    cents = [*range(-1200, 1201, 7), -500, -499, -1, 0, 1, 499, 500, 501, 999, 1000]
    dates = [a + dt.timedelta(days=k) for a in DATE_ANCHORS for k in (-1, 0, 1)] + DATE_EDGES
    cols: dict[str, pa.Array] = {
        "id": pa.array(range(rows), pa.int64()),
        "i": pa.array(column(ints), pa.int64()),
        "j": pa.array(column(int32s), pa.int32()),
        "f": pa.array(column(floats), pa.float64()),
        "amount": pa.array(
            [None if c is None else D(c).scaleb(-2) for c in column(cents)],
            pa.decimal128(12, 2),
        ),
        "d": pa.array(column(dates), pa.date32()),
        "s": pa.array(column(STRINGS), pa.string()),
    }
    for name in ("ts_utc", "ts_naive", "ts_ny"):
        t = SCHEMA.field(name).type
        cols[name] = pa.array(column(time_instants(zone_of(t))), t)
    # nanoseconds: each instant, and one a nanosecond later
    kol = SCHEMA.field("ts_kol").type
    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    base = [(x - epoch) // dt.timedelta(microseconds=1) * 1000 for x in time_instants(zone_of(kol))]
    cols["ts_kol"] = pa.array(column(base + [v + 1 for v in base]), kol)
    inner = [{"c": c} for c in column(dates)]
    fields = zip(column(ints[:60]), column(STRINGS), column(inner + [None] * 20), strict=True)
    structs = [{"a": a, "b": b, "inner": c} for a, b, c in fields]
    cols["st"] = pa.array(column(structs), SCHEMA.field("st").type)
    return pa.table(cols, schema=SCHEMA)


@st.composite
def ranges(draw, schema: pa.Schema, columns: list[str], offsets: bool = True):
    """Range-heavy filters on one of ``columns``: a bound, a window of two bounds,
    BETWEEN, a negated bound, or (one time in six) any filter tree."""
    kind = draw(st.sampled_from(["bound", "bound", "window", "between", "not", "tree"]))
    if kind == "tree":
        return draw(filters(schema, columns, offsets=offsets, ops=RANGE_OPS))
    col = draw(st.sampled_from(columns))
    lits = literals(field_type(schema, col), offsets)
    if kind == "bound":
        return Cmp(col, draw(st.sampled_from(["<", "<=", ">", ">="])), draw(lits))
    if kind == "not":
        return Not(Cmp(col, draw(st.sampled_from(["<", "<=", ">", ">="])), draw(lits)))
    if kind == "between":
        return Between(col, draw(lits), draw(lits), draw(st.booleans()))
    lower = Cmp(col, draw(st.sampled_from([">", ">="])), draw(lits))
    upper = Cmp(col, draw(st.sampled_from(["<", "<="])), draw(lits))
    return And(lower, upper)
