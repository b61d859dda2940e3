"""How two versions of one Lance dataset differ in rows, read from fragment metadata.

The change feed (``operations.read.changes``) compares each ``__manifest`` version
with the next, and a changed partition's old version with its new one. Both must
cost what the change costs, not what the dataset holds: the ``__manifest`` of a
namespace of N partitions has a fragment of N rows, and a commit that republishes
one partition marks one of them deleted.

So a fragment whose deletions changed is compared by its **deletion files**, not
by its rows: Lance's small ones (``array``: an Arrow IPC file of ``uint32`` row
offsets) and its large ones (``bitmap``: a portable-format roaring bitmap) are
read directly, and the offsets one version deleted and the other did not are the
change. Only a deletion file that cannot be read that way (another base, a file
that is gone) falls back to listing the fragment's live row addresses.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import lance
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from lance_partitioned.catalog import storage


@dataclass
class FragmentDiff:
    """How version ``new`` of a Lance dataset differs from version ``old`` in rows.

    ``added``: fragments of ``new`` whose rows are all new; ``removed``: fragments of
    ``old`` whose rows are all gone; ``deleted``: row addresses live in ``old`` and
    not in ``new`` (a deletion file); ``revived``: row addresses live in ``new`` and
    not in ``old`` (a restore of an earlier version).
    """

    added: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    deleted: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    revived: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or len(self.deleted) or len(self.revived))


def _same_rows(old: Any, new: Any) -> bool:
    """Whether fragment metadata ``new`` holds the rows of ``old`` (same id): the same
    physical rows in the same data files, possibly with files of added columns."""
    old_files, new_files = {f.path for f in old.files}, {f.path for f in new.files}
    return old.physical_rows == new.physical_rows and old_files <= new_files


def fragment_diff(
    old: lance.LanceDataset,
    new: lance.LanceDataset,
    storage_options: dict[str, str] | None = None,
) -> FragmentDiff:
    """Compare two versions of one dataset by fragment metadata; a fragment whose
    deletions changed has its two deletion files read (no data file)."""
    before = {f.id: f for f in (fr.metadata for fr in old.get_fragments())}
    diff, deleted, revived = FragmentDiff(), [], []
    for frag in (fr.metadata for fr in new.get_fragments()):
        was = before.pop(frag.id, None)
        if was is None or not _same_rows(was, frag):
            diff.added.append(frag.id)
            if was is not None:
                diff.removed.append(frag.id)
        elif _deletion_key(was) != _deletion_key(frag):
            gone, back = _deletion_change(old, new, was, frag, storage_options)
            base = np.uint64(frag.id) << np.uint64(32)
            deleted.append(gone.astype(np.uint64) | base)
            revived.append(back.astype(np.uint64) | base)
    diff.removed.extend(before)
    if deleted:
        diff.deleted = np.sort(np.concatenate(deleted))
        diff.revived = np.sort(np.concatenate(revived))
    return diff


def _deletion_key(meta: Any) -> tuple | None:
    """What identifies a fragment's deletion file (None: no deletions)."""
    d = meta.deletion_file
    return None if d is None else (d.id, d.read_version, d.num_deleted_rows)


def _deletion_change(
    old: lance.LanceDataset,
    new: lance.LanceDataset,
    was: Any,
    now: Any,
    options: dict[str, str] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """(offsets deleted by ``new``, offsets revived by it) in one fragment."""
    before = deleted_offsets(old.uri, was, options)
    after = deleted_offsets(new.uri, now, options)
    if before is None or after is None:  # unreadable deletion file: compare live rows
        old_live, new_live = _live_offsets(old, was), _live_offsets(new, now)
        return _minus(old_live, new_live, now.physical_rows), _minus(
            new_live, old_live, now.physical_rows
        )
    return _minus(after, before, now.physical_rows), _minus(before, after, now.physical_rows)


def _minus(a: np.ndarray, b: np.ndarray, size: int) -> np.ndarray:
    """The offsets of ``a`` not in ``b`` (both below ``size``), sorted: a mask, not a
    hash, so its cost is one pass over the two arrays."""
    if not len(a):
        return a.astype(np.uint32)
    if not len(b):
        return np.sort(a).astype(np.uint32)
    keep = np.zeros(max(size, int(a.max()) + 1, int(b.max()) + 1), dtype=bool)
    keep[a] = True
    keep[b] = False
    return np.flatnonzero(keep).astype(np.uint32)


def _live_offsets(ds: lance.LanceDataset, meta: Any) -> np.ndarray:
    """The row offsets of the live rows of one fragment of ``ds`` (reads its rows)."""
    scanner = ds.get_fragment(meta.id).scanner(columns=[], with_row_address=True)
    addresses = scanner.to_table().column("_rowaddr").to_numpy()
    return (addresses & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def deleted_offsets(
    uri: str, meta: Any, options: dict[str, str] | None = None
) -> np.ndarray | None:
    """The row offsets a fragment's deletion file marks deleted (``uint32``; empty
    without one), read from the file itself; None when it cannot be read here (a
    file of another base, a file that is gone, a kind this reader does not know)."""
    d = meta.deletion_file
    if d is None:
        return np.zeros(0, np.uint32)
    ext = {"array": "arrow", "bitmap": "bin"}.get(d.file_type)
    if ext is None or getattr(d, "base_id", None) is not None:
        return None
    path = storage.Storage.join(uri, "_deletions", f"{meta.id}-{d.read_version}-{d.id}.{ext}")
    try:
        data = storage.resolve(uri, options).read_bytes(path)
    except Exception:  # storage errors: the live rows still answer
        return None
    if data is None:
        return None
    try:
        out = _arrow_offsets(data) if ext == "arrow" else roaring_offsets(data)
    except (ValueError, struct.error, pa.ArrowInvalid):
        return None
    return out if len(out) == d.num_deleted_rows else None


def _arrow_offsets(data: bytes) -> np.ndarray:
    table = ipc.open_file(pa.BufferReader(data)).read_all()
    return table.column(0).to_numpy().astype(np.uint32)


_COOKIE_RUNS, _COOKIE_NO_RUNS = 12347, 12346


def roaring_offsets(data: bytes) -> np.ndarray:
    """The values of a roaring bitmap in the portable serialization (the format of
    Lance's ``bitmap`` deletion files: RoaringFormatSpec), as sorted ``uint32``."""
    (cookie,) = struct.unpack_from("<I", data, 0)
    pos, runs = 4, b""
    if cookie & 0xFFFF == _COOKIE_RUNS:
        size = (cookie >> 16) + 1
        runs = data[pos : pos + (size + 7) // 8]
        pos += len(runs)
    elif cookie == _COOKIE_NO_RUNS:
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
    else:
        raise ValueError(f"not a roaring bitmap (cookie {cookie})")
    header = np.frombuffer(data, "<u2", 2 * size, pos).reshape(size, 2).astype(np.uint32)
    pos += 4 * size
    if not runs or size >= 4:  # the offset header: positions we do not need
        pos += 4 * size
    parts = []
    for i, (key, card_1) in enumerate(header):
        low, pos = _container(
            data, pos, int(card_1) + 1, bool(runs and runs[i // 8] >> (i % 8) & 1)
        )
        parts.append(low.astype(np.uint32) | (np.uint32(key) << np.uint32(16)))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint32)


def _container(data: bytes, pos: int, card: int, is_run: bool) -> tuple[np.ndarray, int]:
    """One container's 16-bit values, and the position after it."""
    if is_run:
        (n,) = struct.unpack_from("<H", data, pos)
        pairs = np.frombuffer(data, "<u2", 2 * n, pos + 2).reshape(n, 2).astype(np.int64)
        values = [np.arange(s, s + length + 1) for s, length in pairs]
        return np.concatenate(values) if values else np.zeros(0, np.int64), pos + 2 + 4 * n
    if card <= 4096:
        return np.frombuffer(data, "<u2", card, pos), pos + 2 * card
    words = np.frombuffer(data, "<u8", 1024, pos)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    return np.flatnonzero(bits), pos + 8192
