"""Dates and timestamps at both ends of the calendar (FORMAT.md §7 "The ends of the
calendar").

``9999-12-31`` is a common "end of time" sentinel and ``0001-01-01`` its twin. The
pruning bounds of time transforms are computed with Python's ``datetime``, whose
range ends there: a bound one step beyond (``d <= DATE '9999-12-31'`` is ``wall <
10000-01-01``) used to raise ValueError or OverflowError from every range filter,
for every time transform and hierarchy. Now such a bound means "unbounded". The
expected rows come from ``pyarrow.compute`` over the source rows.

A ``timestamp[s]`` (or ``[ms]``, ``[us]``) column holds times beyond year 9999,
which no filter literal can name (Python's ``datetime`` cannot): such rows are read
and compared by Lance, and partition by their time fields (DataFusion's
``date_part`` beyond pyarrow's 16-bit years, which wrapped year 33658 to -31878
and so pruned the row away), like any other; a literal beyond year 9999 is a
FilterError. A ``timestamp[ns]`` column ends in 1677
and 2262: a literal beyond them compares by value (``n < DATE '9999-12-31'`` keeps
every row), where Lance alone would wrap it around and keep none.
"""

from __future__ import annotations

import datetime as dt
import warnings

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.errors import CyclicPartitionWarning, FilterError

UTC = dt.timezone.utc
MIN, MAX = dt.datetime.min, dt.datetime.max
LAST_SECOND = dt.datetime(9999, 12, 31, 23, 59, 59)
EPOCH = dt.datetime(1970, 1, 1)

DATES = [dt.date(1, 1, 1), dt.date(1, 1, 2), dt.date(2024, 6, 15)]
DATES += [dt.date(9999, 12, 30), dt.date(9999, 12, 31), None]
TIMES = [MIN, dt.datetime(1, 1, 1, 0, 30), dt.datetime(2024, 6, 15, 12)]
TIMES += [dt.datetime(9999, 12, 31, 22), MAX, None]
SECONDS = [MIN, dt.datetime(1, 1, 1, 1), dt.datetime(2024, 6, 15, 12)]
SECONDS += [dt.datetime(9999, 12, 31, 23), LAST_SECOND, None]


def _seconds(t: dt.datetime | None) -> int | None:
    return None if t is None else int((t - EPOCH).total_seconds())


TABLE = pa.table(
    {
        "id": pa.array(range(8), pa.int64()),
        "d": pa.array([*DATES, None, dt.date(1, 1, 1)], pa.date32()),
        "ts": pa.array([*TIMES, None, MAX], pa.timestamp("us")),
        "tz": pa.array([t and t.replace(tzinfo=UTC) for t in [*TIMES, None, MIN]]),
        # two rows beyond year 9999 and before year 1, which no datetime can hold
        "s": pa.array([*map(_seconds, SECONDS), 10**12, -(10**11)], pa.timestamp("s")),
    }
).cast(
    pa.schema(
        [
            ("id", pa.int64()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us")),
            ("tz", pa.timestamp("us", "UTC")),
            ("s", pa.timestamp("s")),
        ]
    )
)

HIERARCHIES = [
    ["year"],
    ["month"],
    ["day"],
    ["hour"],
    ["year", "month"],
    ["year", "month", "day"],
    ["year", "month", "day", "hour"],
]
SPECS = [
    (col, ", ".join(f"{u}({col})" for u in units))
    for col in ("d", "ts", "tz", "s")
    for units in HIERARCHIES
    if not (col == "d" and "hour" in units)
]


def _spell(col: str, value: dt.datetime | dt.date) -> tuple[str, pa.Scalar]:
    """``value`` as SQL text for column ``col``, and as the oracle's scalar."""
    t = TABLE.schema.field(col).type
    if col == "d":
        return f"DATE '{value.isoformat()}'", pa.scalar(value, t)
    text = value.isoformat(" ", "microseconds" if value.microsecond else "seconds")
    if col == "tz":
        return f"TIMESTAMP '{text}Z'", pa.scalar(value.replace(tzinfo=UTC), t)
    return f"TIMESTAMP '{text}'", pa.scalar(value, t)


def _bounds(col: str) -> list:
    if col == "d":
        return [dt.date(1, 1, 1), dt.date(1, 1, 2), dt.date(9999, 12, 30), dt.date(9999, 12, 31)]
    if col == "s":
        return [MIN, dt.datetime(1, 1, 1, 1), dt.datetime(9999, 12, 31, 23), LAST_SECOND]
    return [MIN, dt.datetime(1, 1, 1, 0, 30), dt.datetime(9999, 12, 31, 22), MAX]


_OPS = {"<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}
_OPS.update({"=": pc.equal, "!=": pc.not_equal})


def cases(col: str) -> list[tuple[str, pc.Expression]]:
    """(filter, oracle) pairs at and around both ends of the column's range."""
    out = []
    field = pc.field(col)
    bounds = _bounds(col)
    for value in bounds:
        text, scalar = _spell(col, value)
        out += [(f"{col} {op} {text}", fn(field, scalar)) for op, fn in _OPS.items()]
    for lo, hi in [(bounds[0], bounds[-1]), (bounds[2], bounds[3]), (bounds[0], bounds[1])]:
        (lo_text, lo_s), (hi_text, hi_s) = _spell(col, lo), _spell(col, hi)
        out.append((f"{col} BETWEEN {lo_text} AND {hi_text}", (field >= lo_s) & (field <= hi_s)))
    return out


@pytest.fixture(scope="module")
def namespaces(tmp_path_factory) -> dict[str, lp.PartitionedNamespace]:
    out = {}
    for _col, spec in SPECS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CyclicPartitionWarning)
            ns = lp.create(str(tmp_path_factory.mktemp("edges") / "ns"), TABLE.schema, spec)
        ns.append(TABLE)
        out[spec] = ns
    return out


@pytest.mark.parametrize(("col", "spec"), SPECS, ids=[s for _, s in SPECS])
def test_ranges_at_both_ends(namespaces, col, spec):
    ns = namespaces[spec]
    for text, oracle in cases(col):
        expected = sorted(TABLE.filter(oracle)["id"].to_pylist())
        assert sorted(ns.scan(text).to_arrow()["id"].to_pylist()) == expected, text
        assert ns.count(text) == len(expected), text


@pytest.mark.parametrize("col", ["d", "ts", "s"])
def test_delete_after_the_first_day(namespaces, tmp_path, col):
    units = f"year({col}), month({col})"
    ns = lp.create(str(tmp_path / "ns"), TABLE.schema, units)
    ns.append(TABLE)
    text, scalar = _spell(col, _bounds(col)[0])
    flt = f"{col} > {text}"
    keep = TABLE.filter(pc.invert(pc.fill_null(pc.greater(TABLE[col], scalar), False)))
    assert namespaces[units].count(flt) == TABLE.num_rows - keep.num_rows
    ns.delete(flt)
    assert sorted(ns.to_arrow()["id"].to_pylist()) == sorted(keep["id"].to_pylist())


def test_literals_beyond_year_9999_are_filter_errors(namespaces):
    ns = namespaces["year(s), month(s)"]
    with pytest.raises(FilterError, match="invalid TIMESTAMP literal"):
        ns.count("s < TIMESTAMP '10000-01-01 00:00:00'")
    with pytest.raises(FilterError, match="years 1 to 9999"):
        ns.count(pc.field("s") < pa.scalar(10**12, pa.timestamp("s")))
    # the rows out there are read and compared all the same
    assert ns.count("s > TIMESTAMP '9999-12-31 23:59:59'") == 1
    assert ns.count("s < TIMESTAMP '0001-01-01 00:00:00'") == 1


def test_nanosecond_column_against_literals_beyond_its_range(tmp_path):
    times = [dt.datetime(1700, 1, 1), dt.datetime(2024, 6, 15, 12), dt.datetime(2262, 1, 1)]
    for t in (pa.timestamp("ns"), pa.timestamp("ns", "UTC")):
        table = pa.table({"id": pa.array([0, 1, 2, 3]), "n": pa.array([*times, None], t)})
        ns = lp.create(str(tmp_path / t.tz.__str__() / "ns"), table.schema, "year(n), month(n)")
        ns.append(table)
        wide = table["n"].cast(pa.timestamp("us", t.tz))  # holds both sides exactly
        for value in [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31), dt.datetime(1600, 1, 1)]:
            text = f"TIMESTAMP '{value.isoformat(' ')}{'Z' if t.tz else ''}'"
            scalar = pa.scalar(value.replace(tzinfo=UTC) if t.tz else value, wide.type)
            for op, fn in _OPS.items():
                expected = table.filter(fn(wide, scalar))["id"].to_pylist()
                flt = f"n {op} {text}"
                assert sorted(ns.scan(flt).to_arrow()["id"].to_pylist()) == expected, flt
            inside = f"n IN ({text}, TIMESTAMP '2024-06-15 12:00:00{'Z' if t.tz else ''}')"
            assert ns.count(inside) == 1, inside
            assert ns.count(f"n NOT IN ({text})") == 3


def test_identity_partition_beyond_year_9999_is_refused_clearly(tmp_path):
    """An identity partition value must be a Python datetime: one beyond year 9999 is
    refused naming the value, and nothing is written."""
    ns = lp.create(str(tmp_path / "ns"), pa.schema([("t", pa.timestamp("s"))]), "t")
    version = ns.version
    with pytest.raises(lp.SchemaError, match="outside years 1-9999"):
        ns.append(pa.table({"t": pa.array([300_000_000_000], pa.timestamp("s"))}))
    assert lp.open(ns.root).version == version and lp.open(ns.root).count() == 0
