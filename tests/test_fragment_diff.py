"""Deletion files read directly (``operations.read.fragment_diff``): the offsets they mark
equal those whose rows Lance no longer returns (the oracle: a scan of the fragment)."""

from __future__ import annotations

import struct

import lance
import numpy as np
import pyarrow as pa
import pytest

from lance_partitioned.operations.read.fragment_diff import (
    deleted_offsets,
    fragment_diff,
    roaring_offsets,
)

ROWS = 20_000


def _dead(ds: lance.LanceDataset) -> np.ndarray:
    """Oracle: the offsets of fragment 0 that a scan no longer returns."""
    live = ds.get_fragment(0).to_table(columns=["x"]).column("x").to_numpy()
    return np.setdiff1d(np.arange(ROWS), live)


@pytest.mark.parametrize(
    ("predicates", "kind"),
    [(["x = 3", "x IN (7, 11)"], "array"), (["x % 2 = 0"], "bitmap"),
     (["x < 15000", "x % 5 = 1"], "bitmap")],
    ids=["array", "bitmap", "bitmap-twice"],
)  # fmt: skip
def test_deleted_offsets_equal_what_a_scan_no_longer_returns(tmp_path, predicates, kind):
    ds = lance.write_dataset(pa.table({"x": np.arange(ROWS)}), str(tmp_path / "d"))
    for where in predicates:
        old = ds
        ds.delete(where)
        ds = lance.dataset(str(tmp_path / "d"))
        meta = ds.get_fragments()[0].metadata
        got = deleted_offsets(ds.uri, meta)
        assert got is not None, meta.deletion_file
        assert meta.deletion_file.file_type == kind
        assert np.array_equal(np.sort(got), _dead(ds))
        diff = fragment_diff(old, ds)
        newly = np.setdiff1d(_dead(ds), _dead(old)).astype(np.uint64)
        assert np.array_equal(diff.deleted, newly) and not len(diff.revived)


def _portable(containers: list[tuple[int, str, np.ndarray]]) -> bytes:
    """A roaring bitmap serialized by hand per the portable format (RoaringFormatSpec),
    with a run container (so the cookie with run flags and no offset header)."""
    size = len(containers)
    runs = 0
    for i, (_, kind, _) in enumerate(containers):
        runs |= (kind == "run") << i
    out = struct.pack("<I", 12347 | ((size - 1) << 16)) + bytes([runs])
    for key, _, values in containers:
        out += struct.pack("<HH", key, len(values) - 1)
    for _, kind, values in containers:
        if kind == "run":
            starts = [v for v in values if v - 1 not in set(values)]
            pairs = [(s, next(e for e in range(s, 70000) if e + 1 not in set(values)) - s)
                     for s in starts]  # fmt: skip
            out += struct.pack("<H", len(pairs))
            out += b"".join(struct.pack("<HH", s, n) for s, n in pairs)
        else:
            out += np.asarray(values, "<u2").tobytes()
    return out


def test_roaring_run_and_array_containers_decode():
    runs = np.array([*range(10, 20), *range(100, 103)])
    array = np.array([1, 5, 65535])
    data = _portable([(0, "run", runs), (2, "array", array)])
    expected = np.concatenate([runs, array + (2 << 16)]).astype(np.uint32)
    assert np.array_equal(roaring_offsets(data), expected)


def test_an_unreadable_deletion_file_falls_back_to_the_live_rows(tmp_path, monkeypatch):
    from lance_partitioned.operations.read import fragment_diff as module

    ds = lance.write_dataset(pa.table({"x": np.arange(ROWS)}), str(tmp_path / "d"))
    ds.delete("x < 10")
    old = lance.dataset(str(tmp_path / "d"))
    old.delete("x % 1000 = 999")
    new = lance.dataset(str(tmp_path / "d"))
    monkeypatch.setattr(module, "deleted_offsets", lambda *args, **kwargs: None)
    diff = fragment_diff(old, new)
    assert np.array_equal(diff.deleted, np.setdiff1d(_dead(new), _dead(old)).astype(np.uint64))
    back = fragment_diff(new, old)  # a restore: the rows come back
    assert np.array_equal(back.revived, diff.deleted) and not len(back.deleted)
