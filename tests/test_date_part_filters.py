"""Calendar fields in filters: ``year()``, ``month()``, ``day()``, ``hour()``, ``date_part``.

The random oracle tests (``test_oracle.py::test_time_functions_*``) check rows. Here:
pruning is exact (the partitions a plan reads are those the oracle finds matching rows
in, computed with ``pyarrow.compute`` over the source rows), a partition whose value
answers the predicate reads no residual filter, deletes and updates and the CLI take
the functions, and bad uses are refused by name, changing nothing.
"""

from __future__ import annotations

import datetime as dt
import itertools

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.cli.main import main
from lance_partitioned.errors import FilterError

NY = "America/New_York"
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("ts_ny", pa.timestamp("us", tz=NY)),
        pa.field("d", pa.date32()),
    ]
)


def _table() -> pa.Table:
    """Rows every 29 hours and 13 minutes from 2022-11-01 to 2025-02: every hour of the
    day, every day of the month, across year ends; every 17th row NULL."""
    start = dt.datetime(2022, 11, 1, 0, 7)
    ts = [start + k * dt.timedelta(hours=29, minutes=13) for k in range(700)]
    ts = [None if k % 17 == 5 else v for k, v in enumerate(ts)]
    utc = [None if v is None else v.replace(tzinfo=dt.timezone.utc) for v in ts]
    return pa.table(
        {
            "id": pa.array(range(len(ts)), pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "ts_ny": pa.array(utc, pa.timestamp("us", tz=NY)),
            "d": pa.array([None if v is None else v.date() for v in ts], pa.date32()),
        },
        schema=SCHEMA,
    )


TABLE = _table()
UNITS = {"year": pc.year, "month": pc.month, "day": pc.day, "hour": pc.hour}


def _namespace(tmp_path, spec: str) -> lp.PartitionedNamespace:
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, spec)
    ns.append(TABLE)
    return ns


def _expected_partitions(fields: list[tuple[str, str]], mask: pa.ChunkedArray) -> set[tuple]:
    """The partition values, (unit, column) per field ("identity" for the column itself),
    of the source rows ``mask`` keeps: computed with pyarrow alone."""
    rows = TABLE.filter(mask)
    cols = [
        rows[c] if unit == "identity" else UNITS[unit](rows[c]).cast(pa.int32())
        for unit, c in fields
    ]
    return set(zip(*(c.to_pylist() for c in cols), strict=True))


def _planned_partitions(ns: lp.PartitionedNamespace, flt: str) -> set[tuple]:
    return {tuple(t.partition_values.values()) for t in ns.plan(flt)}


def _field(unit: str, column: str) -> pc.Expression:
    return UNITS[unit](pc.field(column))


# (spec, its fields as (unit, column), filter, the oracle's predicate)
PRUNING_CASES = [
    ("year(ts)", [("year", "ts")], "year(ts) = 2023", _field("year", "ts") == 2023),
    ("year(ts)", [("year", "ts")], "year(ts) >= 2024", _field("year", "ts") >= 2024),
    ("year(ts)", [("year", "ts")], "YEAR(ts) < 2024", _field("year", "ts") < 2024),
    ("year(ts)", [("year", "ts")], "year(ts) != 2023", _field("year", "ts") != 2023),
    (
        "year(ts)",
        [("year", "ts")],
        "date_part('year', ts) IN (2022, 2025)",
        _field("year", "ts").isin([2022, 2025]),
    ),
    (
        "year(ts), month(ts)",
        [("year", "ts"), ("month", "ts")],
        "year(ts) = 2024",
        _field("year", "ts") == 2024,
    ),
    (
        "year(ts), month(ts)",
        [("year", "ts"), ("month", "ts")],
        "month(ts) = 3",
        _field("month", "ts") == 3,
    ),
    (
        "year(ts), month(ts)",
        [("year", "ts"), ("month", "ts")],
        "EXTRACT(MONTH FROM ts) BETWEEN 11 AND 12 AND year(ts) <= 2023",
        (_field("month", "ts") >= 11) & (_field("year", "ts") <= 2023),
    ),
    (
        "month(ts)",
        [("month", "ts")],
        "NOT (month(ts) NOT IN (1, 12))",
        _field("month", "ts").isin([1, 12]),
    ),
    ("day(ts)", [("day", "ts")], "day(ts) > 29", _field("day", "ts") > 29),
    ("hour(ts)", [("hour", "ts")], "hour(ts) <= 2", _field("hour", "ts") <= 2),
    ("d", [("identity", "d")], "year(d) = 2024", _field("year", "d") == 2024),
    (
        "year(d), month(d), day(d)",
        [("year", "d"), ("month", "d"), ("day", "d")],
        "year(d) = 2023 AND day(d) = 1",
        (_field("year", "d") == 2023) & (_field("day", "d") == 1),
    ),
    # a zoned column's fields are its zone's: 2023 in New York starts at 05:00 UTC
    (
        "year(ts_ny), month(ts_ny)",
        [("year", "ts_ny"), ("month", "ts_ny")],
        "year(ts_ny) = 2023",
        _field("year", "ts_ny") == 2023,
    ),
    (
        "year(ts_ny), hour(ts_ny)",
        [("year", "ts_ny"), ("hour", "ts_ny")],
        "hour(ts_ny) IN (0, 23) AND year(ts_ny) > 2022",
        _field("hour", "ts_ny").isin([0, 23]) & (_field("year", "ts_ny") > 2022),
    ),
]


@pytest.mark.parametrize(
    "spec, fields, flt, oracle", PRUNING_CASES, ids=[c[2] + " on " + c[0] for c in PRUNING_CASES]
)
def test_pruning_reads_exactly_the_matching_partitions(tmp_path, spec, fields, flt, oracle):
    """The plan reads exactly the partitions holding a matching row, and no partition
    reads a residual filter where the partition values decide the predicate."""
    ns = _namespace(tmp_path, spec)
    mask = TABLE.filter(oracle)
    expected_ids = sorted(mask["id"].to_pylist())
    assert expected_ids, "the case matches some rows"
    assert sorted(ns.to_arrow(flt)["id"].to_pylist()) == expected_ids
    assert ns.count(flt) == len(expected_ids)
    kept = pc.is_in(TABLE["id"], pa.array(expected_ids, pa.int64()))
    planned = _planned_partitions(ns, flt)
    assert planned == _expected_partitions(fields, kept)
    assert len(planned) < len(ns.plan())
    if " IN " not in flt and "!=" not in flt:  # their ranges are ORs, which stay residual
        assert {t.filter_sql for t in ns.plan(flt)} == {None}


def test_year_is_the_calendar_year_on_a_zoned_column(tmp_path):
    """``year()`` is the calendar year (as Spark SQL and DuckDB), not years since 1970 (the
    value of Iceberg's year transform), read on the column's wall clock."""
    ns = _namespace(tmp_path, "year(ts_ny)")
    assert _planned_partitions(ns, "year(ts_ny) = 2024") == {(2024,)}
    # rows on 2023-01-01 before 05:00 UTC are in 2022 in New York
    early = pa.table(
        {
            "id": pa.array([10_000], pa.int64()),
            "ts": pa.array([None], pa.timestamp("us")),
            "ts_ny": pa.array([dt.datetime(2023, 1, 1, 4, 59, tzinfo=dt.timezone.utc)]).cast(
                pa.timestamp("us", tz=NY)
            ),
            "d": pa.array([None], pa.date32()),
        },
        schema=SCHEMA,
    )
    ns.append(early)
    assert 10_000 in ns.to_arrow("year(ts_ny) = 2022")["id"].to_pylist()
    assert 10_000 not in ns.to_arrow("year(ts_ny) = 2023")["id"].to_pylist()


def test_a_month_predicate_without_a_month_field_runs_in_each_partition(tmp_path):
    """``month(ts)`` on a ``year(ts)`` spec cannot prune: every partition keeps it as its
    residual filter, spelled ``date_part`` for Lance, and the rows are exact."""
    ns = _namespace(tmp_path, "year(ts)")
    flt = "month(ts) = 2"
    assert len(ns.plan(flt)) == len(ns.plan())
    assert {t.filter_sql for t in ns.plan(flt)} == {"date_part('month', ts) = 2"}
    expected = TABLE.filter(_field("month", "ts") == 2)["id"].to_pylist()
    assert sorted(ns.to_arrow(flt)["id"].to_pylist()) == sorted(expected)


def test_delete_and_update_take_calendar_fields(tmp_path):
    ns = _namespace(tmp_path, "year(ts), month(ts)")
    gone = TABLE.filter((_field("year", "ts") == 2023) & (_field("hour", "ts") < 6))
    ns.delete("year(ts) = 2023 AND hour(ts) < 6")
    remaining = ns.to_arrow(columns=["id"])["id"].to_pylist()
    assert sorted(remaining) == sorted(set(TABLE["id"].to_pylist()) - set(gone["id"].to_pylist()))
    changed = TABLE.filter((_field("month", "ts") == 7) & (_field("year", "ts") == 2024))
    result = ns.update({"d": "DATE '2000-01-01'"}, where="month(ts) = 7 AND year(ts) = 2024")
    assert result.rows_updated == changed.num_rows
    assert ns.count("year(d) = 2000") == changed.num_rows


def test_cli_filter_takes_calendar_fields(tmp_path, capsys):
    ns = _namespace(tmp_path, "year(ts)")
    with pytest.raises(SystemExit) as exit_info:
        main(["count", ns.root, "--filter", "year(ts) = 2024 AND day(ts) = 1"])
    assert exit_info.value.code == 0
    expected = TABLE.filter((_field("year", "ts") == 2024) & (_field("day", "ts") == 1))
    assert capsys.readouterr().out.strip() == str(expected.num_rows)


@pytest.mark.parametrize(
    "flt, words",
    [
        ("date_part('yearz', ts) = 1", ["unknown date part 'yearz'"]),
        ("EXTRACT(fortnight FROM ts) = 1", ["unknown date part 'fortnight'"]),
        ("year(id) = 2024", ["year()", "'id'", "int64", "date or timestamp"]),
        ("month(ts) = DATE '2024-01-01'", ["month(ts)", "DATE '2024-01-01'", "number"]),
        ("day(ts) IN (1, 'x')", ["day(ts)", "'x'"]),
        ("hour(ts, d) = 1", ["hour() takes one"]),
    ],
)
def test_bad_calendar_fields_are_refused_by_name(tmp_path, flt, words):
    ns = _namespace(tmp_path, "year(ts)")
    version, rows = ns.version, ns.count()
    for call in (ns.count, ns.to_arrow, ns.delete):
        with pytest.raises(FilterError) as err:
            call(flt)
        message = str(err.value)
        assert all(w in message for w in words), message
        assert ".rs:" not in message and "/rustc/" not in message
    reopened = lp.open(ns.root)
    assert (reopened.version, reopened.count()) == (version, rows)


def test_units_other_than_year_month_day_hour_are_left_to_lance(tmp_path):
    """Lance's other ``date_part`` units still run (inside each partition), by any
    spelling it accepts; ``datepart`` and plural units are accepted too."""
    ns = _namespace(tmp_path, "year(ts)")
    minutes = pc.minute(TABLE["ts"])
    expected = TABLE.filter(pc.equal(minutes, 7))["id"].to_pylist()
    for flt in ("date_part('minute', ts) = 7", "datepart('MINUTES', ts) = 7"):
        assert sorted(ns.to_arrow(flt)["id"].to_pylist()) == sorted(expected)
    spellings = [
        "year(ts)",
        "date_part('years', ts)",
        "DATEPART('yr', ts)",
        "EXTRACT(YEAR FROM ts)",
    ]
    counts = {s: ns.count(f"{s} = 2024") for s in spellings}
    assert set(counts.values()) == {pc.sum(pc.equal(pc.year(TABLE["ts"]), 2024)).as_py()}


def test_literal_forms(tmp_path):
    """A whole number may be written as a string or ``2024.0``; a number no field value
    equals (``2024.5``) compares as SQL compares numbers."""
    ns = _namespace(tmp_path, "year(ts)")
    years = pc.year(TABLE["ts"])
    for flt, expected in itertools.chain(
        [(f"year(ts) = {v}", pc.equal(years, 2024)) for v in ("'2024'", "2024.0", "2024")],
        [
            ("year(ts) = 2024.5", pc.equal(years, 2024.5)),
            ("year(ts) < 2024.5", pc.less(years, 2024.5)),
            ("2024 <= year(ts)", pc.greater_equal(years, 2024)),
        ],
    ):
        assert ns.count(flt) == (pc.sum(expected).as_py() or 0), flt
