"""Row counts kept with ``__manifest`` table rows, read without opening any leaf.

Every commit that publishes a leaf version writes that version's row count
into the row's ``metadata`` JSON as ``"lp.num_rows": "<n>"``, beside the
``"lp.read_version"`` mirror (``catalog.manifest.with_read_mirror``; the rule is
in docs/FORMAT.md "Row counts"). A count is *trusted* only when it provably
describes the version readers are pointed to:

- the row has ``lp.num_rows``;
- its ``lp.read_version`` mirror equals its ``read_version`` column, so a
  writer that moved ``read_version`` without knowing our key (another
  implementation, or a hand edit) invalidates the count instead of lying;
- ``read_branch`` and ``read_tag`` are NULL (a tag can be moved outside any
  ``__manifest`` commit, and branch-pinned leaves are rare enough to open).

Rows without a trusted count (other implementations' rows, older rows) are
counted by opening their leaf. Extraction is vectorised: the compact form our
writer emits (``{"k":"v",...}``, no blanks) is parsed with numpy over the
string buffer, and only rows not in that form (another writer's spacing, a key
missing) go through an Arrow regex, so a million rows cost tens of milliseconds.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# A key can only start right after '{' or ',' (plus blanks): inside a JSON string
# every '"' is escaped, so these never match text within a value.
_NUM_ROWS = r'[{,]\s*"lp\.num_rows"\s*:\s*"(?P<n>[0-9]{1,18})"'
_READ_VERSION = r'[{,]\s*"lp\.read_version"\s*:\s*"(?P<v>[0-9]{1,18})"'

# At most this many digits are read: 18 digits always fit an int64. The window holds
# them and the closing quote; a 19th digit leaves no quote in it, so the regex decides.
_MAX_DIGITS = 18
_WINDOW = _MAX_DIGITS + 1
_BLOCK = 1 << 16


def _regex_values(metadata: pa.Array, pattern: str) -> pa.Array:
    """The pattern's one group as int64 per row (null where it does not match)."""
    return pc.cast(pc.struct_field(pc.extract_regex(metadata, pattern), [0]), pa.int64())


def _compact_values(strings: pa.Array, key: str) -> tuple[np.ndarray, np.ndarray]:
    """``"<key>":"<digits>"`` in compact JSON, parsed with numpy over the string buffer.

    Returns (values, found). ``found`` is True only where the key's first
    occurrence follows ``{`` or ``,`` directly and its value is 1-18 digits in
    quotes: rows the regex reads the same way. Every other row is left to the regex.
    """
    needle = f'"{key}":"'.encode()
    n = len(strings)
    pos = pc.fill_null(pc.find_substring(strings, needle.decode()), -1).to_numpy()
    values = np.zeros(n, dtype=np.int64)
    found = np.zeros(n, dtype=bool)
    rows = np.flatnonzero(pos >= 0)
    if len(rows) == 0:
        return values, found
    _, offsets_buf, data_buf = strings.buffers()[:3]
    offset_type = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[strings.offset : strings.offset + n + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8)
    last = len(data) - 1
    starts = offsets[rows].astype(np.int64) + pos[rows]
    ends = offsets[rows + 1].astype(np.int64)
    before = data[np.maximum(starts - 1, 0)]
    keyed = (pos[rows] > 0) & ((before == ord("{")) | (before == ord(",")))
    first = starts + len(needle)
    for lo in range(0, len(rows), _BLOCK):  # blocks bound the (rows x window) scratch
        block = slice(lo, lo + _BLOCK)
        at = first[block, None] + np.arange(_WINDOW)
        # Bytes past a row's own end read as 0 (neither digit nor quote): no row
        # ever reads another's.
        window = np.where(at < ends[block, None], data[np.minimum(at, last)], 0)
        is_digit = (window >= ord("0")) & (window <= ord("9"))
        length = np.argmin(is_digit, axis=1)  # digits before the first non-digit
        closed = window[np.arange(len(window)), length] == ord('"')
        ok = keyed[block] & closed & (length >= 1)
        number = np.zeros(len(window), dtype=np.int64)
        for j in range(int(length[ok].max(initial=0))):  # Horner, digit by digit
            digit = window[:, j].astype(np.int64) - ord("0")
            number = np.where(j < length, number * 10 + digit, number)
        values[rows[block]] = np.where(ok, number, 0)
        found[rows[block]] = ok
    return values, found


def _values(metadata: pa.Array, key: str, pattern: str) -> tuple[np.ndarray, np.ndarray]:
    """``key``'s value per row as int64 and where it was found (1-18 digits)."""
    if not (pa.types.is_string(metadata.type) or pa.types.is_large_string(metadata.type)):
        metadata = metadata.cast(pa.large_string())
    values, found = _compact_values(metadata, key)
    rest = np.flatnonzero(~found & metadata.is_valid().to_numpy(zero_copy_only=False))
    if len(rest):
        # Another writer's spacing or key order: the regex reads those rows.
        slow = _regex_values(metadata.take(pa.array(rest)), pattern)
        matched = slow.is_valid().to_numpy(zero_copy_only=False)
        values[rest[matched]] = slow.filter(slow.is_valid()).to_numpy()
        found[rest[matched]] = True
    return values, found


def _is_null(column: pa.ChunkedArray) -> np.ndarray:
    return pc.is_null(column).to_numpy(zero_copy_only=False)


def trusted_counts(rows: pa.Table) -> pa.ChunkedArray:
    """Per row of ``rows`` (``metadata``, ``read_version``, ``read_branch``, ``read_tag``):
    its stored row count as int64 where it can be trusted, else null."""
    column = rows.column("metadata")
    meta = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if meta.null_count == len(meta):
        return pa.chunked_array([pa.nulls(len(meta), pa.int64())])
    counts, counted = _values(meta, "lp.num_rows", _NUM_ROWS)
    mirrored, mirror_found = _values(meta, "lp.read_version", _READ_VERSION)
    version = pc.cast(rows.column("read_version"), pa.int64())
    pinned = pc.fill_null(pc.equal(version, pa.array(mirrored)), False)
    trusted = (
        counted
        & mirror_found
        & pinned.to_numpy(zero_copy_only=False)
        & _is_null(rows.column("read_branch"))
        & _is_null(rows.column("read_tag"))
    )
    # numpy, not pc.if_else: if_else with a null scalar costs ~1 s per million rows
    return pa.chunked_array([pa.array(counts, mask=~trusted)])
