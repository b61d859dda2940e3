"""Timestamps with a time zone: filters, time transforms and pruning (issue 10, A1/A10/A17).

Expected rows never come from this library's parser or binder: every expected
answer is a ``pyarrow.compute`` expression built by hand on the source table,
with the literal as ``pa.scalar(..., pa.timestamp(unit, tz))``; a literal
without an offset is first placed in the column's zone with pandas
(``tz_localize``), the rule FORMAT.md §7 states. Expected partition values are
pyarrow's ``pc.year``/``pc.month``/``pc.day``/``pc.hour`` of the rows (which
agree with DataFusion's ``date_part`` before 2038).
"""

from __future__ import annotations

import datetime as dt
import warnings

import lance
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datafusion import SessionContext, col, lit

import lance_partitioned as lp
from lance_partitioned.format import transforms

UTC = dt.timezone.utc
NY = "America/New_York"

# 2018 clock changes (instants, UTC): the rows sample a day either side of each
TRANSITIONS = {
    NY: ["2018-03-11T07:00", "2018-11-04T06:00"],
    "Europe/London": ["2018-03-25T01:00", "2018-10-28T01:00"],
    "Australia/Lord_Howe": ["2018-03-31T15:00", "2018-10-06T15:30"],  # 30-minute shifts
    "Pacific/Chatham": ["2018-03-31T14:00", "2018-09-29T14:00"],  # +12:45 / +13:45
    "Asia/Kolkata": [],  # +05:30 all year
}
ZONES = list(TRANSITIONS)
HIERARCHY = "year(ts), month(ts), day(ts), hour(ts)"


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


def rows_for(zone: str, unit: str) -> pa.Table:
    """Rows every 23 min 7 s for a day either side of the UTC new year and each clock change."""
    centres = [utc("2018-01-01T00:00")] + [utc(t) for t in TRANSITIONS[zone]]
    step = dt.timedelta(minutes=23, seconds=7)
    values = sorted({c + k * step for c in centres for k in range(-63, 64)})
    ts = pa.array(values, pa.timestamp("us", UTC)).cast(pa.timestamp(unit, zone))
    if unit == "ns":  # sub-microsecond parts, so that ns comparisons are exercised
        ts = pc.add(ts.cast(pa.int64()), pa.array([i % 3 * 250 for i in range(len(ts))]))
        ts = ts.cast(pa.timestamp(unit, zone))
    return pa.table({"id": pa.array(range(len(values)), pa.int64()), "ts": ts})


_CACHE: dict[tuple[str, str, str], tuple[lp.PartitionedNamespace, pa.Table]] = {}


@pytest.fixture(scope="module")
def namespaces(tmp_path_factory):
    """``get(zone, unit, spec)`` -> (namespace, source table), built once per module."""

    def get(zone: str, unit: str, spec: str):
        key = (zone, unit, spec)
        if key not in _CACHE:
            table = rows_for(zone, unit)
            root = tmp_path_factory.mktemp("tz") / "ns"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", lp.CyclicPartitionWarning)
                ns = lp.create(str(root), table.schema, spec)
            ns.append(table)
            _CACHE[key] = (ns, table)
        return _CACHE[key]

    yield get
    _CACHE.clear()


def ids(table: pa.Table) -> list[int]:
    return sorted(table["id"].to_pylist())


def expected(table: pa.Table, op: str, instant: dt.datetime) -> list[int]:
    """Rows of ``ts <op> instant`` by pyarrow.compute, the literal typed like the column."""
    scalar = pa.scalar(instant, table.schema.field("ts").type)
    fn = {
        "=": pc.equal,
        "<": pc.less,
        "<=": pc.less_equal,
        ">": pc.greater,
        ">=": pc.greater_equal,
    }[op]
    return ids(table.filter(fn(pc.field("ts"), scalar)))


def wall(instant: dt.datetime, zone: str) -> pd.Timestamp:
    """The wall clock of ``instant`` in ``zone`` (pandas)."""
    return pd.Timestamp(instant).tz_convert(zone).tz_localize(None)


def localized(wall_clock: pd.Timestamp, zone: str) -> dt.datetime:
    """The instant a naive wall clock names in ``zone`` (pandas, refuses ambiguity)."""
    return wall_clock.tz_localize(zone, ambiguous="raise", nonexistent="raise").to_pydatetime()


def datafusion_ids(table: pa.Table, where: str) -> list[int]:
    ctx = SessionContext()
    ctx.register_record_batches("t", [table.to_batches()])
    return sorted(ctx.sql(f"SELECT id FROM t WHERE {where}").to_arrow_table()["id"].to_pylist())


def explained_filter(scan) -> str:
    first = scan.explain().splitlines()[0]
    assert first.startswith("filter: ")
    return first[len("filter: ") :]


def probe_instants(zone: str) -> list[dt.datetime]:
    """Literals on and off unit boundaries, around the new year and each clock change."""
    out = [utc("2018-01-01T00:00"), utc("2018-01-01T00:17:03")]
    for t in TRANSITIONS[zone]:
        c = utc(t)
        out += [c - dt.timedelta(microseconds=1), c + dt.timedelta(minutes=41, seconds=5)]
    return out


def sql_spellings(instant: dt.datetime, zone: str) -> list[str]:
    """The same instant as SQL text: with Z, with an offset, without one (wall clock)."""
    w = wall(instant, zone)
    frac = f".{instant.microsecond:06d}" if instant.microsecond else ""
    minus5 = instant.astimezone(dt.timezone(dt.timedelta(hours=-5)))
    plus1045 = instant.astimezone(dt.timezone(dt.timedelta(hours=10, minutes=45)))
    out = [
        f"TIMESTAMP '{instant:%Y-%m-%dT%H:%M:%S}{frac}Z'",
        f"TIMESTAMP '{minus5:%Y-%m-%d %H:%M:%S}{frac}-05:00'",
        f"TIMESTAMP '{plus1045:%Y-%m-%d %H:%M:%S}{frac}+10:45'",
        f"'{instant:%Y-%m-%dT%H:%M:%S}{frac}+00:00'",
    ]
    try:
        localized(w, zone)
    except Exception:  # this wall clock is ambiguous in the zone: tested separately
        return out
    text = w.strftime("%Y-%m-%d %H:%M:%S") + frac
    return out + [f"TIMESTAMP '{text}'", f"'{text}'"]


def object_spellings(instant: dt.datetime, zone: str, unit: str) -> list[object]:
    """The same instant as pyarrow, pandas and DataFusion values."""
    w = wall(instant, zone)
    out: list[object] = [
        pc.field("ts") == pa.scalar(instant, pa.timestamp("us", zone)),
        pc.field("ts") == pa.scalar(instant, pa.timestamp("ns", "UTC")),
        pc.field("ts") == pd.Timestamp(instant).tz_convert(zone),
        col("ts") == lit(pa.scalar(instant, pa.timestamp("us", "UTC"))),
        col("ts") == lit(pa.scalar(instant, pa.timestamp(unit, zone))),
    ]
    try:
        localized(w, zone)
    except Exception:
        return out
    return out + [
        pc.field("ts") == pa.scalar(w.to_pydatetime(), pa.timestamp("us")),  # naive
        pc.field("ts") == w,  # naive pd.Timestamp
        col("ts") == lit(pa.scalar(w.to_pydatetime(), pa.timestamp("us"))),
    ]


# -- A1: every spelling of a literal compares the same instant -----------------


@pytest.mark.parametrize(
    ("zone", "unit"), [(z, "us") for z in ZONES] + [(NY, "ns"), ("Australia/Lord_Howe", "ns")]
)
def test_every_sql_spelling_compares_the_instant_pyarrow_compares(namespaces, zone, unit):
    ns, table = namespaces(zone, unit, "day(ts)")
    for instant in probe_instants(zone):
        spellings = sql_spellings(instant, zone)
        # every spelling with =; ranges with the Z form and the wall-clock form
        cases = [("=", s) for s in spellings]
        cases += [(op, s) for op in (">=", "<") for s in (spellings[0], spellings[-1])]
        for op, spelling in cases:
            want = expected(table, op, instant)
            flt = f"ts {op} {spelling}"
            scan = ns.scan(flt)
            assert ids(scan.to_arrow()) == want, (zone, unit, flt)
            # explain() shows the filter Lance runs: DataFusion agrees with it
            assert datafusion_ids(table, explained_filter(scan)) == want, flt
            if op != "=":
                assert scan.count() == len(want), flt


@pytest.mark.parametrize(("zone", "unit"), [(NY, "us"), ("Australia/Lord_Howe", "ns")])
def test_pyarrow_pandas_and_datafusion_literals(namespaces, zone, unit):
    ns, table = namespaces(zone, unit, "day(ts)")
    for instant in probe_instants(zone)[1:4]:
        want = expected(table, "=", instant)
        for flt in object_spellings(instant, zone, unit):
            assert ids(ns.to_arrow(flt)) == want, (zone, unit, instant, flt)


def test_the_reported_day_range_returns_every_row(namespaces):
    """Issue 10: on day(ts), ``ts >= '2018-01-01 00:00:00+00:00'`` lost the rows of
    00:00-05:00Z. The bound literal reached Lance as ``TIMESTAMP '2017-12-31
    19:00:00-05:00'``; Lance (DataFusion) folds the offset into the naive UTC value
    2018-01-01 00:00 and reads that as New York wall-clock time, 05:00Z. (With
    year(ts) the answer happened to be right: the conjunct was dropped as implied.)"""
    ns, table = namespaces(NY, "us", "day(ts)")
    flt = "ts >= TIMESTAMP '2018-01-01 00:00:00+00:00'"
    want = expected(table, ">=", utc("2018-01-01T00:00"))
    assert ids(ns.to_arrow(flt)) == want
    assert ns.count(flt) == len(want)
    assert "arrow_cast('2018-01-01T00:00:00Z'" in ns.scan(flt).explain()


def test_a_literal_without_offset_is_wall_clock_time_in_the_column_zone(namespaces):
    ns, table = namespaces(NY, "us", "day(ts)")
    # 16:00 in New York is 21:00Z; explain shows that instant, as Lance runs it
    flt = "ts = TIMESTAMP '2017-12-31 16:00:00'"
    assert ids(ns.to_arrow(flt)) == expected(table, "=", utc("2017-12-31T21:00"))
    assert "arrow_cast('2017-12-31T21:00:00Z'" in ns.scan(flt).explain()
    # DATE is midnight of that wall clock, like TIMESTAMP without a time
    d = ns.to_arrow("ts >= DATE '2018-01-01'")
    assert ids(d) == expected(table, ">=", utc("2018-01-01T05:00"))
    assert ids(d) == ids(ns.to_arrow("ts >= TIMESTAMP '2018-01-01'"))


@pytest.mark.parametrize(
    "text",
    ["2018-11-04 01:30:00", "2018-03-11 02:30:00"],  # New York shows these twice / never
)
def test_a_wall_clock_time_the_zone_shows_twice_or_never_is_refused(namespaces, text):
    ns, _ = namespaces(NY, "us", "day(ts)")
    with pytest.raises(lp.FilterError, match="write the literal with a UTC offset") as info:
        ns.to_arrow(f"ts = TIMESTAMP '{text}'")
    assert "'ts'" in str(info.value) and NY in str(info.value)
    with pytest.raises(lp.FilterError):
        ns.to_arrow(pc.field("ts") >= pd.Timestamp(text))
    # with an offset it names one instant
    got = ns.to_arrow(f"ts >= TIMESTAMP '{text}-05:00'")
    inst = dt.datetime.fromisoformat(text + "-05:00")
    assert ids(got) == expected(rows_for(NY, "us"), ">=", inst)


# -- A10: time transforms in the column's zone ---------------------------------


@pytest.mark.parametrize(("zone", "unit"), [(z, "us") for z in ZONES] + [(NY, "ns")])
def test_partition_values_are_the_rows_calendar_fields_in_their_zone(namespaces, zone, unit):
    ns, table = namespaces(zone, unit, HIERARCHY)
    seen = 0
    for task in ns.plan():
        rows = lance.dataset(task.uri, version=task.read_version).to_table(columns=["ts"])
        ts = rows["ts"]
        fields = {
            "ts_year": pc.year(ts),
            "ts_month": pc.month(ts),
            "ts_day": pc.day(ts),
            "ts_hour": pc.hour(ts),
        }
        for name, values in fields.items():
            assert set(values.to_pylist()) == {task.partition_values[name]}, (zone, task)
        seen += rows.num_rows
    assert seen == table.num_rows


def test_a_day_with_a_clock_change_has_23_or_25_hours(namespaces):
    ns, table = namespaces(NY, "us", HIERARCHY)
    for day, hours, hour_values in ((dt.date(2018, 3, 11), 23, 23), (dt.date(2018, 11, 4), 25, 24)):
        flt = f"ts >= TIMESTAMP '{day} 00:00:00' AND ts < TIMESTAMP '{day + dt.timedelta(1)} 00:00:00'"
        kept = {(t.partition_values["ts_day"], t.partition_values["ts_hour"]) for t in ns.plan(flt)}
        assert {d for d, _ in kept} == {day.day}
        assert len(kept) == hour_values  # no hour 2 in March; in November hour 1 lasts 2 h
        start = localized(pd.Timestamp(day), NY)
        end = localized(pd.Timestamp(day + dt.timedelta(1)), NY)
        assert (end - start) == dt.timedelta(hours=hours)
        want = sorted(set(expected(table, ">=", start)) & set(expected(table, "<", end)))
        assert ids(ns.to_arrow(flt)) == want


def _range_filters(zone: str) -> list[tuple[str, dt.datetime, dt.datetime]]:
    """``ts >= lo AND ts < hi`` filters (SQL with UTC offsets) and their bounds."""
    out = []
    centres = [utc("2018-01-01T00:00")] + [utc(t) for t in TRANSITIONS[zone]]
    for c in centres:
        local_midnight = localized(wall(c, zone).normalize(), zone)
        for lo, hi in [
            (local_midnight, local_midnight + dt.timedelta(hours=24)),
            (c - dt.timedelta(hours=1), c + dt.timedelta(minutes=30)),
            (c - dt.timedelta(minutes=13, seconds=1), c + dt.timedelta(hours=3, minutes=2)),
            (c - dt.timedelta(hours=20), c),
            (c, c + dt.timedelta(hours=20)),
        ]:
            flt = (
                f"ts >= TIMESTAMP '{lo.astimezone(UTC):%Y-%m-%d %H:%M:%S}+00:00' AND "
                f"ts < TIMESTAMP '{hi.astimezone(UTC):%Y-%m-%d %H:%M:%S}+00:00'"
            )
            out.append((flt, lo, hi))
    return out


@pytest.mark.parametrize(
    ("zone", "spec"),
    [(z, s) for z in ZONES for s in ("day(ts)", HIERARCHY)]
    + [(NY, "hour(ts)"), ("Australia/Lord_Howe", "hour(ts)")]
    + [("Europe/London", "year(ts), month(ts), day(ts)")],
)
def test_ranges_prune_by_local_calendar_and_return_exact_rows(namespaces, zone, spec):
    ns, table = namespaces(zone, "us", spec)
    keys = {
        "ts_year": pc.year(table["ts"]).to_pylist(),
        "ts_month": pc.month(table["ts"]).to_pylist(),
        "ts_day": pc.day(table["ts"]).to_pylist(),
        "ts_hour": pc.hour(table["ts"]).to_pylist(),
    }
    pruned_any = False
    for flt, lo, hi in _range_filters(zone):
        want = sorted(set(expected(table, ">=", lo)) & set(expected(table, "<", hi)))
        assert ids(ns.to_arrow(flt)) == want, (zone, spec, flt)
        assert ns.count(flt) == len(want)
        kept = ns.plan(flt)
        names = list(kept[0].partition_values) if kept else []
        kept_keys = {tuple(t.partition_values.values()) for t in kept}
        needed = {tuple(keys[n][i] for n in names) for i in want}
        assert needed <= kept_keys, (zone, spec, flt)  # never drops a matching partition
        on_local_hours = all(wall(b, zone) == wall(b, zone).floor("h") for b in (lo, hi))
        if spec == HIERARCHY and on_local_hours:
            assert kept_keys == needed, (zone, flt)  # and keeps no other (every hour has rows)
        pruned_any |= len(kept) < len(ns.plan())
    assert pruned_any


def _old_utc_rule(self, arrays):
    """Time transforms as 0.1 computed them: a zoned timestamp read in UTC."""
    arr = arrays[0]
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    if pa.types.is_timestamp(arr.type):
        arr = arr.view(pa.timestamp(arr.type.unit))
    fn = {"year": pc.year, "month": pc.month, "day": pc.day, "hour": pc.hour}[self.type]
    return fn(arr).cast(pa.int32())


def test_validate_reports_partitions_written_under_the_utc_rule_and_rewrite_fixes_them(
    tmp_path, monkeypatch
):
    table = rows_for(NY, "us")
    with monkeypatch.context() as m:
        m.setattr(transforms.TimeTransform, "apply", _old_utc_rule)
        old = lp.create(str(tmp_path / "old"), table.schema, "year(ts), month(ts), day(ts)")
        old.append(table)
        utc_table = table.cast(
            pa.schema([table.schema.field("id"), pa.field("ts", pa.timestamp("us", "UTC"))])
        )
        utc_ns = lp.create(str(tmp_path / "utc"), utc_table.schema, "year(ts), day(ts), hour(ts)")
        utc_ns.append(utc_table)
    ns = lp.open(str(tmp_path / "old"))
    problems = ns.validate()
    assert problems and all("rewrite_partitions" in p and NY in p for p in problems)
    # until rewritten, pruning trusts the old values: a local-day filter misses rows
    flt = "ts >= TIMESTAMP '2017-12-31 20:00:00' AND ts < TIMESTAMP '2018-01-01 00:00:00'"
    want = sorted(
        set(expected(table, ">=", utc("2018-01-01T01:00")))
        & set(expected(table, "<", utc("2018-01-01T05:00")))
    )
    assert ids(ns.to_arrow(flt)) != want
    ns.rewrite_partitions()
    assert ns.validate() == []
    assert ids(ns.to_arrow()) == ids(table)
    assert ids(ns.to_arrow(flt)) == want
    for task in ns.plan():
        rows = lance.dataset(task.uri, version=task.read_version).to_table(columns=["ts"])
        assert set(pc.day(rows["ts"]).to_pylist()) == {task.partition_values["ts_day"]}
    # a UTC column reads the same under both rules: nothing to report
    assert lp.open(str(tmp_path / "utc")).validate() == []


# -- A17: month/day/hour alone are cyclic ---------------------------------------


@pytest.mark.parametrize("zone", [None, NY])
def test_a_range_prunes_a_cyclic_field_by_the_values_it_covers(tmp_path, zone):
    start = dt.datetime(2012, 12, 1, tzinfo=UTC)
    values = [start + dt.timedelta(hours=13 * i) for i in range(1700)]
    ts = pa.array(values, pa.timestamp("us", UTC)).cast(pa.timestamp("us", zone))
    if zone is None:
        ts = pa.array([v.replace(tzinfo=None) for v in values], pa.timestamp("us"))
    table = pa.table({"id": pa.array(range(len(values)), pa.int64()), "ts": ts})
    with pytest.warns(lp.CyclicPartitionWarning, match="month"):
        ns = lp.create(str(tmp_path / "m"), table.schema, "month(ts), bucket(8, id)")
    ns.append(table)

    def bound(text: str) -> dt.datetime:
        naive = pd.Timestamp(text)
        return naive.to_pydatetime() if zone is None else localized(naive, zone)

    for lo, hi, months in [
        ("2013-07-01", "2013-08-01", {7}),
        ("2013-12-15", "2014-01-15", {12, 1}),
        ("2013-07-31 23:00", "2013-08-01 00:30", {7, 8}),
        ("2013-01-01", "2014-01-01", set(range(1, 13))),  # a whole cycle: no pruning
    ]:
        flt = f"ts >= '{lo}' AND ts < '{hi}'"
        kept = {t.partition_values["ts_month"] for t in ns.plan(flt)}
        assert kept == months, flt
        want = sorted(set(expected(table, ">=", bound(lo))) & set(expected(table, "<", bound(hi))))
        assert ids(ns.to_arrow(flt)) == want
    for spec, flt, field, values in [
        (
            "day(ts)",
            "ts BETWEEN '2013-07-30 22:00' AND '2013-08-02 01:30'",
            "ts_day",
            {30, 31, 1, 2},
        ),
        (
            "hour(ts)",
            "ts > '2013-07-30 22:10' AND ts <= '2013-07-31 01:30'",
            "ts_hour",
            {22, 23, 0, 1},
        ),
    ]:
        with pytest.warns(lp.CyclicPartitionWarning):
            other = lp.create(str(tmp_path / field), table.schema, spec)
        other.append(table)
        kept = {t.partition_values[field] for t in other.plan(flt)}
        assert kept <= values and len(kept) < len(other.plan()), (spec, kept)


def test_the_cyclic_warning_names_the_field_and_is_not_raised_with_a_year(tmp_path):
    schema = pa.schema([("ts", pa.timestamp("us")), ("x", pa.int64())])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ns = lp.create(str(tmp_path / "a"), schema, "year(ts), month(ts), day(ts), bucket(4, x)")
        ns.evolve_spec("year(ts), hour(ts)")
    with pytest.warns(lp.CyclicPartitionWarning, match=r"'ts_day' = day\(ts\)") as record:
        ns.evolve_spec("day(ts), bucket(4, x)")
    assert issubclass(record[0].category, UserWarning)
    assert record[0].filename == __file__  # points at the caller


# -- A2's mutation: an upper bound off a unit boundary -------------------------


@pytest.mark.parametrize("zone", [None, NY, "Asia/Kolkata"])
def test_an_upper_bound_off_a_day_boundary_keeps_its_day(tmp_path, zone):
    """``_is_unit_start``'s day check decides whether ``ts < U`` keeps U's own day;
    weakening it to the hour check drops 2025-03-05 00:xx rows."""
    walls = [
        dt.datetime(2025, 3, 4, 23, 0),
        dt.datetime(2025, 3, 5, 0, 0),
        dt.datetime(2025, 3, 5, 0, 30),
    ]
    walls += [dt.datetime(2025, 3, 5, 1, 0), dt.datetime(2025, 3, 6, 0, 30)]
    if zone is None:
        ts = pa.array(walls, pa.timestamp("us"))
    else:
        ts = pa.array([localized(pd.Timestamp(w), zone) for w in walls], pa.timestamp("us", zone))
    table = pa.table({"id": pa.array(range(len(walls)), pa.int64()), "ts": ts})
    ns = lp.create(str(tmp_path / "ns"), table.schema, "year(ts), month(ts), day(ts)")
    ns.append(table)
    for text, n in [
        ("2025-03-05 01:00:00", 3),
        ("2025-03-05 00:00:01", 2),
        ("2025-03-05 00:00:00", 1),
    ]:
        flt = f"ts < TIMESTAMP '{text}'"
        assert ids(ns.to_arrow(flt)) == list(range(n)), (zone, flt)
    flt = "ts <= TIMESTAMP '2025-03-05 00:00:00'"
    assert ids(ns.to_arrow(flt)) == [0, 1]


# -- D13: a literal that cannot be compared with its column --------------------


def test_a_string_against_a_number_column_is_a_filter_error_naming_the_column(
    tmp_path, monkeypatch
):
    table = pa.table(
        {"id": pa.array([1, 5, 7], pa.int64()), "k": ["a", "b", "c"], "b": [True, False, None]}
    )
    ns = lp.create(str(tmp_path / "ns"), table.schema, "k")
    ns.append(table)

    def files() -> dict[str, bytes]:
        return {str(p): p.read_bytes() for p in (tmp_path / "ns").rglob("*") if p.is_file()}

    before = files()

    def no_lance(*args, **kwargs):
        raise AssertionError("Lance was asked to run a filter that must be refused first")

    monkeypatch.setattr(lance.LanceDataset, "scanner", no_lance)
    monkeypatch.setattr(lance.LanceDataset, "count_rows", no_lance)
    for flt in [
        "id = 'abc'",
        "id IN (1, 'x')",
        "id > 'abc'",
        "b = 'yes'",
        "id = TRUE",
        "k = 'a' AND id = 'x1'",
    ]:
        for call in (ns.to_arrow, ns.count, ns.scan, ns.delete):
            with pytest.raises(lp.FilterError) as info:
                call(flt)
            message = str(info.value)
            assert "column 'id'" in message or "column 'b'" in message, message
            assert ("int64" in message) or ("bool" in message), message
            assert "/rust/" not in message and ".rs:" not in message
    assert files() == before  # nothing on disk changed
    monkeypatch.undo()
    # a string that is a value of the column's type compares as that value (DataFusion's coercion)
    assert ids(ns.to_arrow("id = '5'")) == [5]
    assert ids(ns.to_arrow("b = 'true'")) == [1]


# -- the zone helper against pandas --------------------------------------------


@pytest.mark.parametrize("zone", ZONES)
def test_wall_clocks_and_localize_agree_with_pandas(zone):
    from lance_partitioned.format import zones

    start = pd.Timestamp("2018-01-01")
    walls = [start + pd.Timedelta(minutes=97 * k + 13) for k in range(0, 5500, 7)]
    walls += [
        pd.Timestamp(t) + pd.Timedelta(minutes=m)
        for t in TRANSITIONS[zone]
        for m in range(-90, 150, 15)
    ]
    for w in walls:
        try:
            want = w.tz_localize(zone, ambiguous="raise", nonexistent="raise").value // 1000
        except Exception:
            want = None
        try:
            got = zones.localize(zone, zones.to_us(w.to_pydatetime()))
        except zones.AmbiguousTimeError:
            got = None
        assert got == want, (zone, w)
    instants = [utc("2018-01-01T00:00") + dt.timedelta(minutes=41 * k) for k in range(13000)]
    arr = pa.array(instants, pa.timestamp("us", zone))
    expected_walls = pc.local_timestamp(arr).cast(pa.int64()).to_pylist()
    assert zones.wall_clock(arr).cast(pa.int64()).to_pylist() == expected_walls


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Australia/Lord_Howe", None])
@pytest.mark.parametrize("spec", ["year(ts)", "day(ts)", "hour(ts)"])
def test_filters_at_the_end_of_the_timestamp_range(tmp_path, zone, spec):
    """9999-12-31 (the usual "open-ended" value) used to be refused as a wall-clock
    time the zone "never" shows: offsets were only looked up to 9999-12-30. The
    expected rows are pyarrow's, on the same values and the same instants."""
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz=zone))])
    walls = [dt.datetime(2020, 1, 1), dt.datetime(9999, 12, 30, 12), dt.datetime(9999, 12, 31)]
    walls.append(dt.datetime(9999, 12, 31, 23, 59, 59, 999999))
    # each value is a wall clock in the column's zone (UTC's offset: no shift)
    local = pa.array(walls, pa.timestamp("us"))
    values = local if zone is None else pc.assume_timezone(local, zone)
    table = pa.table({"id": range(len(walls)), "ts": values}, schema=schema)
    ns = lp.create(str(tmp_path / "ns"), schema, spec)
    ns.append(table)
    for op, fn in [("=", pc.equal), ("<", pc.less), (">=", pc.greater_equal)]:
        for wall in walls[1:]:
            literal = pa.scalar(wall, pa.timestamp("us"))
            if zone is not None:
                literal = pc.assume_timezone(pa.array([wall], pa.timestamp("us")), zone)[0]
            want = table.filter(fn(table["ts"], literal))["id"].to_pylist()
            text = f"ts {op} TIMESTAMP '{wall.isoformat(' ')}'"
            assert sorted(ns.scan(text).to_arrow()["id"].to_pylist()) == want, text
