"""Calendar arithmetic on the wall clock that the time transforms read.

Time transforms read a zoned timestamp in its own zone (FORMAT.md §4), so a range
on such a column is first moved to a range on its **wall clock**:

- ``ts >= L`` becomes ``wall >= min_wall_from(L)``: the earliest wall-clock time
  any instant from ``L`` on shows (earlier than ``L``'s own when the clocks are
  set back soon after ``L``);
- ``ts < U`` becomes ``wall < sup_wall_before(U)`` and ``ts <= U`` becomes
  ``wall < sup_wall_before(U + 1 µs)``.

On the wall clock the calendar fields are monotonic again, so the usual year and
hierarchy projections apply; a day of 23 or 25 hours needs no special case.
Naive timestamps and dates are their own wall clock.

Month, day and hour are cyclic (1-12, 1-31, 0-23). A range bounded on both
sides that covers less than a full cycle prunes through one of them alone by
the set of values it covers (:func:`covered_values`).

Pure functions of values and types: no partition fields, no filters.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa

from lance_partitioned.format import zones

TIME_UNITS = ("year", "month", "day", "hour")
WALL_TYPE = pa.timestamp("us")
_CYCLE = {"month": 12, "day": 31, "hour": 24}


def is_zoned(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) and t.tz is not None


# Bounds are Python dates and datetimes, 0001-01-01 to 9999-12-31: a bound a step
# beyond (``d <= DATE '9999-12-31'`` is ``wall < 10000-01-01``) is no bound at all,
# and a unit that ends with year 9999 ends at the end of the range (None below).
_OUT_OF_RANGE = (OverflowError, ValueError)
# 10000-01-01T00:00 in microseconds since the epoch: where the last unit ends
END_OF_RANGE_US = zones.to_us(dt.datetime.max) + 1


def lower_wall(op: str, value: Any, src_type: pa.DataType) -> dt.datetime | None:
    """An inclusive lower bound on the wall clock of every value matching ``col op value``
    (op ``>`` or ``>=``); None if ``value`` is not a date or timestamp, or the bound
    is beyond the range of Python's datetime (nothing to prune by)."""
    try:
        return _lower_wall(op, value, src_type)
    except _OUT_OF_RANGE:
        return None


def _lower_wall(op: str, value: Any, src_type: pa.DataType) -> dt.datetime | None:
    if is_zoned(src_type) and isinstance(value, dt.datetime) and value.tzinfo is not None:
        return zones.naive(zones.min_wall_from(src_type.tz, zones.to_us(value)))
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) if value.tzinfo is None else None
    if isinstance(value, dt.date):
        day = value + dt.timedelta(days=1) if op == ">" else value
        return dt.datetime(day.year, day.month, day.day)
    return None


def upper_wall(op: str, value: Any, src_type: pa.DataType) -> dt.datetime | None:
    """An exclusive upper bound on the wall clock of every value matching ``col op value``
    (op ``<`` or ``<=``); None if ``value`` is not a date or timestamp, or the bound
    is beyond the range of Python's datetime (``<= DATE '9999-12-31'``: no bound)."""
    try:
        return _upper_wall(op, value, src_type)
    except _OUT_OF_RANGE:
        return None


def _upper_wall(op: str, value: Any, src_type: pa.DataType) -> dt.datetime | None:
    step = dt.timedelta(0) if op == "<" else dt.timedelta(microseconds=1)
    if is_zoned(src_type) and isinstance(value, dt.datetime) and value.tzinfo is not None:
        t = zones.to_us(value) + step // dt.timedelta(microseconds=1)  # not value + step: fold
        return zones.naive(zones.sup_wall_before(src_type.tz, t))
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None) + step if value.tzinfo is None else None
    if isinstance(value, dt.date):
        day = value if op == "<" else value + dt.timedelta(days=1)
        return dt.datetime(day.year, day.month, day.day)
    return None


def calendar_bound(op: str, value: Any, src_type: pa.DataType) -> tuple[str, Any, pa.DataType]:
    """``col op value`` restated on the column's wall clock: ``(op, value, type)``.

    Naive timestamps and dates are returned unchanged; for a zoned column the
    result is ``(">=", wall, timestamp[us])`` or ``("<", wall, timestamp[us])``,
    which the calendar-field projections treat like a naive column's bound."""
    if not is_zoned(src_type):
        return op, value, src_type
    if op in (">", ">="):
        return ">=", lower_wall(op, value, src_type), WALL_TYPE
    return "<", upper_wall(op, value, src_type), WALL_TYPE


def is_unit_start(value: Any, unit: str) -> bool:
    """Whether a date or naive (wall-clock) timestamp is the first instant of its year/month/day/hour.

    Zoned bounds reach here as wall-clock times (``calendar_bound``); an aware
    value is read in UTC."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
        checks = {
            "hour": value.minute == 0 and value.second == 0 and value.microsecond == 0,
        }
        at_midnight = checks["hour"] and value.hour == 0
        checks["day"] = at_midnight
        checks["month"] = at_midnight and value.day == 1
        checks["year"] = checks["month"] and value.month == 1
        return checks[unit]
    if isinstance(value, dt.date):
        return {
            "hour": True,
            "day": True,
            "month": value.day == 1,
            "year": value.day == 1 and value.month == 1,
        }[unit]
    return False


def _unit_start(value: dt.datetime, unit: str) -> dt.datetime:
    if unit == "month":
        return dt.datetime(value.year, value.month, 1)
    if unit == "day":
        return dt.datetime(value.year, value.month, value.day)
    return value.replace(minute=0, second=0, microsecond=0)


def _next(value: dt.datetime, unit: str) -> dt.datetime:
    if unit == "month":
        return dt.datetime(value.year + (value.month == 12), value.month % 12 + 1, 1)
    return value + (dt.timedelta(days=1) if unit == "day" else dt.timedelta(hours=1))


def covered_values(unit: str, lo: dt.datetime, hi: dt.datetime) -> list[int] | None:
    """The month/day/hour values of the wall-clock times in ``[lo, hi)``, sorted.

    None when they are every value of the cycle (nothing to prune)."""
    if unit not in _CYCLE or hi <= lo:
        return None if unit not in _CYCLE else []
    values: set[int] = set()
    at = _unit_start(lo, unit)
    for _ in range(_CYCLE[unit] + 1):
        if at >= hi:
            break
        values.add(getattr(at, unit))
        try:
            at = _next(at, unit)
        except (OverflowError, ValueError):  # past year 9999
            break
    else:
        return None
    return None if len(values) >= _CYCLE[unit] else sorted(values)


def unit_interval(values: dict[str, Any]) -> tuple[dt.datetime, dt.datetime | None] | None:
    """[start, end) wall-clock times of the calendar unit named by year/month/day/hour values.

    ``values`` maps units to their values; the unit is the finest one reached
    from ``year`` down without a gap (``year`` and ``day`` without ``month``
    name a year). ``end`` is None for a unit that ends with year 9999 (at
    ``END_OF_RANGE_US``, which a datetime cannot hold). None when there is no
    year or the values name no date of Python's range (year 0, year 10000, …)."""
    y = values.get("year")
    if y is None:
        return None
    m = values.get("month")
    d = values.get("day") if m is not None else None
    h = values.get("hour") if d is not None else None
    try:
        start = dt.datetime(y, m or 1, d or 1, h or 0)
    except _OUT_OF_RANGE:
        return None
    try:
        if m is None:
            end = dt.datetime(y + 1, 1, 1)
        elif d is None:
            end = dt.datetime(y + (m == 12), m % 12 + 1, 1)
        else:
            end = start + (dt.timedelta(days=1) if h is None else dt.timedelta(hours=1))
    except _OUT_OF_RANGE:
        end = None
    return start, end


def unit_instants(
    start: dt.datetime, end: dt.datetime | None, src_type: pa.DataType
) -> tuple[int, int] | None:
    """Microsecond bounds ``(first, end)`` of the values whose wall clock is in ``[start, end)``
    (``end`` None: up to ``END_OF_RANGE_US``).

    ``first`` is the least such value and every such value is ``< end``. For a
    zoned column these are instants (a calendar day of 23 or 25 hours, an hour
    that happens twice); otherwise the wall clock itself."""
    end_us = END_OF_RANGE_US if end is None else zones.to_us(end)
    if is_zoned(src_type):
        return zones.instants_showing(src_type.tz, zones.to_us(start), end_us)
    return zones.to_us(start), end_us


def resolution_us(t: pa.DataType) -> int:
    """The step between consecutive timestamps of type ``t`` in microseconds (0 for ns)."""
    return {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0}[t.unit]


def interval_satisfies(
    op: str, lit: Any, start: dt.datetime, end: dt.datetime | None, src_type: pa.DataType
) -> bool:
    """True when every value whose wall clock lies in ``[start, end)`` satisfies ``col op lit``.

    ``op`` is one of ``<``, ``<=``, ``>``, ``>=``; ``src_type`` is the column's
    date or timestamp type (a zoned column's unit is a range of local times);
    ``end`` None is the end of year 9999 (``unit_interval``)."""
    if pa.types.is_date(src_type):
        if not isinstance(lit, dt.date) or isinstance(lit, dt.datetime):
            return False
        first = start.date()
        last = dt.date.max if end is None else end.date() - dt.timedelta(days=1)
        return {">=": first >= lit, ">": first > lit, "<": last < lit, "<=": last <= lit}[op]
    if not isinstance(lit, dt.datetime) or (lit.tzinfo is None) != (src_type.tz is None):
        return False
    span = unit_instants(start, end, src_type)
    if span is None:
        return False
    first, stop = span
    lit_us = zones.to_us(lit)
    # the largest storable value below ``stop`` is stop - resolution (any ns below it for ns)
    step = resolution_us(src_type)
    last_ok = stop <= lit_us if step == 0 else stop - step <= lit_us
    return {">=": first >= lit_us, ">": first > lit_us, "<": stop <= lit_us, "<=": last_ok}[op]
