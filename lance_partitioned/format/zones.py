"""Wall clocks of time zones, as DataFusion (seed 000's reference engine) reads them.

Seed 000 derives ``year``/``month``/``day``/``hour`` as ``date_part('…', col0)``,
and DataFusion evaluates a timestamp with a time zone in that zone. Everything
here that needs a zone's rules asks DataFusion, not pyarrow or ``zoneinfo``:
the three disagree after 2037 (pyarrow stops applying daylight saving time,
DataFusion's chrono-tz applies it until 2099, ``zoneinfo`` forever; FORMAT.md §4
has the vector), and partition values, pruning bounds and literal binding must
all use the same rules.

Instants and wall-clock times are handled as integer microseconds since the
epoch (a wall clock is the naive time a clock in the zone shows). A zone's UTC
offset is piecewise constant; :func:`pieces` finds the pieces around an instant
by sampling every 15 minutes and then, inside each interval where the offset
changed, every second (tz database transitions fall on whole seconds); the
pieces are cached per zone in blocks of 8 days. This
assumes that no offset lasts less than 15 minutes, which holds for every zone
of the tz database.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import NamedTuple

import pyarrow as pa

from lance_partitioned.errors import AmbiguousTimeError
from lance_partitioned.format import caches
from lance_partitioned.format.filters.evaluate import one_batch_context

SECOND = 1_000_000  # microseconds
_STEP = 900 * SECOND  # coarse sampling step
# Further than any zone's offset can move a wall clock (offsets stay within ±15 h,
# so a change of offset moves it by at most 30 h): searches look this far.
REACH = 48 * 3600 * SECOND
_EPOCH = dt.datetime(1970, 1, 1)
_MIN_US = (dt.datetime(1, 1, 2) - _EPOCH) // dt.timedelta(microseconds=1)
_MAX_US = (dt.datetime(9999, 12, 30) - _EPOCH) // dt.timedelta(microseconds=1)

# Zones whose wall clock is UTC: time transforms agree with the pre-0.2 UTC rule.
UTC_NAMES = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Zulu", "Etc/Zulu"}
    | {"GMT", "Etc/GMT", "Etc/GMT0", "Etc/GMT+0", "Etc/GMT-0", "GMT0", "GMT+0", "GMT-0"}
    | {"Etc/Greenwich", "Greenwich", "Z", "+00:00", "-00:00", "+0000", "+00"}
)


def is_utc(tz: str | None) -> bool:
    """Whether wall clocks in ``tz`` always equal UTC."""
    return tz is not None and tz in UTC_NAMES


def _context(arrays: dict[str, pa.Array]):
    return one_batch_context(pa.RecordBatch.from_arrays(list(arrays.values()), names=list(arrays)))


def _single(out: pa.Table | pa.ChunkedArray) -> pa.Array:
    col = out.column(0) if isinstance(out, pa.Table) else out
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def date_part(unit: str, arr: pa.Array) -> pa.Array:
    """``date_part(unit, arr)`` as DataFusion computes it, as int32 (zoned timestamps in their zone)."""
    if len(arr) == 0:
        return pa.array([], type=pa.int32())
    ctx = _context({"c": arr})
    out = ctx.sql(f"SELECT CAST(date_part('{unit}', c) AS INT) AS v FROM t").to_arrow_table()
    return _single(out).cast(pa.int32())


def wall_clock(arr: pa.Array) -> pa.Array:
    """Zoned timestamps as naive wall-clock timestamps of their zone (same unit)."""
    t = arr.type
    if not (pa.types.is_timestamp(t) and t.tz is not None):
        return arr
    if len(arr) == 0:
        return pa.array([], type=pa.timestamp(t.unit))
    ctx = _context({"c": arr})
    out = _single(ctx.sql("SELECT to_local_time(c) AS v FROM t").to_arrow_table())
    return out.cast(pa.timestamp(t.unit))


def offsets(tz: str, instants: Sequence[int]) -> list[int]:
    """The UTC offset (microseconds) of ``tz`` at each instant (microseconds since the epoch)."""
    arr = pa.array(list(instants), type=pa.int64())
    walls = wall_clock(arr.cast(pa.timestamp("us", tz))).cast(pa.int64())
    return [w - i for w, i in zip(walls.to_pylist(), instants, strict=True)]


class Piece(NamedTuple):
    """Instants ``[start, end)`` during which the zone's offset is ``offset``."""

    start: int
    end: int
    offset: int


_BLOCK = 8 * 24 * 3600 * SECOND  # zone rules are sampled and cached in blocks this long


@caches.memoize("zones.blocks", maxsize=4096)
def _block(tz: str, k: int) -> tuple[Piece, ...]:
    """The pieces covering block ``k``: instants ``[k * _BLOCK, (k + 1) * _BLOCK)``."""
    start, stop = k * _BLOCK, (k + 1) * _BLOCK
    coarse = list(range(start, stop + 1, _STEP))
    coarse_offsets = offsets(tz, coarse)
    brackets = [i for i in range(len(coarse) - 1) if coarse_offsets[i] != coarse_offsets[i + 1]]
    fine = [s for i in brackets for s in range(coarse[i] + SECOND, coarse[i + 1] + 1, SECOND)]
    fine_offsets = dict(zip(fine, offsets(tz, fine) if fine else [], strict=True))
    out: list[Piece] = []
    piece_start, current = start, coarse_offsets[0]
    for i in brackets:
        for s in range(coarse[i] + SECOND, coarse[i + 1] + 1, SECOND):
            if fine_offsets[s] != current:
                out.append(Piece(piece_start, s, current))
                piece_start, current = s, fine_offsets[s]
    out.append(Piece(piece_start, stop, current))
    return tuple(out)


def pieces(tz: str, lo: int, hi: int) -> list[Piece]:
    """The offset pieces of ``tz`` covering at least ``[lo, hi)``.

    Offsets are looked up between 0001-01-02 and 9999-12-30 (zone arithmetic
    overflows Python's datetime at the ends); outside that the nearest offset
    holds, so a time on 9999-12-31 (a common "open-ended" value) has one.
    """
    want_lo, want_hi = lo, hi
    lo = max(_MIN_US, min(lo, _MAX_US))
    hi = max(lo + 1, min(hi, _MAX_US))
    out: list[Piece] = []
    for k in range(lo // _BLOCK, (hi - 1) // _BLOCK + 1):
        for p in _block(tz, k):
            if out and out[-1].offset == p.offset and out[-1].end == p.start:
                out[-1] = Piece(out[-1].start, p.end, p.offset)
            else:
                out.append(p)
    if want_hi > out[-1].end:
        out[-1] = Piece(out[-1].start, want_hi, out[-1].offset)
    if want_lo < out[0].start:
        out[0] = Piece(want_lo, out[0].end, out[0].offset)
    return out


def to_us(value: dt.datetime) -> int:
    """Microseconds since the epoch: the instant of an aware datetime, the wall clock of a naive one."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


def naive(us: int) -> dt.datetime:
    """A naive datetime from microseconds since the epoch."""
    return _EPOCH + dt.timedelta(microseconds=us)


def instant(us: int) -> dt.datetime:
    """An aware (UTC) datetime from microseconds since the epoch."""
    return naive(us).replace(tzinfo=dt.timezone.utc)


def min_wall_from(tz: str, t: int) -> int:
    """The smallest wall clock any instant ``>= t`` shows (earlier than ``t``'s own
    when the clocks are set back soon after ``t``)."""
    return min(max(p.start, t) + p.offset for p in pieces(tz, t, t + REACH) if p.end > t)


def sup_wall_before(tz: str, t: int) -> int:
    """An exclusive upper bound, and the least one, of the wall clocks of instants ``< t``."""
    return max(min(p.end, t) + p.offset for p in pieces(tz, t - REACH, t) if p.start < t)


def instants_showing(tz: str, wall_start: int, wall_end: int) -> tuple[int, int] | None:
    """``(first, end)``: every instant whose wall clock is in ``[wall_start, wall_end)`` lies
    in ``[first, end)``, and ``first`` is one of them; None when no instant shows such a time."""
    found = []
    for p in pieces(tz, wall_start - REACH, wall_end + REACH):
        a, b = max(p.start, wall_start - p.offset), min(p.end, wall_end - p.offset)
        if a < b:
            found.append((a, b))
    if not found:
        return None
    return min(a for a, _ in found), max(b for _, b in found)


def localize(tz: str, wall: int) -> int:
    """The one instant at which clocks in ``tz`` show ``wall``.

    Raises AmbiguousTimeError when they show it twice (clocks set back) or never
    (clocks set forward), as DataFusion and Lance refuse such a literal.
    """
    hits = [
        wall - p.offset
        for p in pieces(tz, wall - REACH, wall + REACH)
        if p.start <= wall - p.offset < p.end
    ]
    hits = sorted(set(hits))
    if len(hits) == 1:
        return hits[0]
    what = "twice (the clocks are set back)" if hits else "never (the clocks are set forward)"
    raise AmbiguousTimeError(
        f"wall-clock time {naive(wall).isoformat(' ')} occurs {what} in time zone {tz}; "
        "write the literal with a UTC offset ('YYYY-MM-DD HH:MM:SS+HH:MM') to name one instant"
    )
