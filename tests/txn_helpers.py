"""Helpers shared by the transaction, crash, concurrency and maintenance tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import lance
from s3_support import listdir
from txn_worker import SCHEMA, SPEC, rows

import lance_partitioned as lp
from lance_partitioned.operations.maintain.maintenance import LEAF_DIR, leaf_references

WORKER = os.path.join(os.path.dirname(__file__), "txn_worker.py")
__all__ = ["SCHEMA", "SPEC", "rows"]


def state(root: str, version: int | str | None = None) -> Counter:
    """The namespace content as a multiset of (txn, part, id)."""
    t = lp.open(root, version=version).to_arrow(columns=["id", "part", "txn"])
    return Counter(
        zip(t["txn"].to_pylist(), t["part"].to_pylist(), t["id"].to_pylist(), strict=True)
    )


def baseline(root: str) -> Counter:
    """A new namespace at ``root`` holding partitions 0, 1, 2 with two fragments each (ids
    0-11 from ``b0``, 100-111 from ``b1``), so compaction, deletes and merges have work."""
    ns = lp.create(root, SCHEMA, SPEC)
    ns.append(rows("b0", [0, 1, 2], 4, 0))
    ns.append(rows("b1", [0, 1, 2], 4, 100))
    return state(root)


def table_state(table) -> Counter:
    return Counter(
        zip(
            table["txn"].to_pylist(),
            table["part"].to_pylist(),
            table["id"].to_pylist(),
            strict=True,
        )
    )


def spawn(root: str, *args: str, pause: str | None = None, pause_dir: str | None = None):
    env = dict(os.environ, LANCE_LOG="error")
    if pause:
        env["LP_TEST_PAUSE_AT"] = pause
        env["LP_TEST_PAUSE_DIR"] = pause_dir or "."
    return subprocess.Popen(
        [sys.executable, WORKER, root, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: str, proc: subprocess.Popen | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"worker exited with {proc.returncode} before {os.path.basename(path)}: "
                f"{proc.stderr.read() if proc.stderr else ''}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {path}")
        time.sleep(0.02)


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()


def assert_no_orphans(root: str) -> None:
    """After vacuum: every file is referenced and every leaf version is needed.

    - every leaf directory is referenced by some ``__manifest`` version;
    - in every leaf and in ``__manifest``, every data / deletion file belongs to
      a version that still exists;
    - a leaf keeps only versions some manifest version references, plus its latest.
    """
    manifest = lp.open(root).manifest
    refs, _current = leaf_references(manifest)
    dirs = {d for d in listdir(root) if LEAF_DIR.match(d)}
    assert dirs <= set(refs), f"unreferenced leaf directories: {dirs - set(refs)}"
    for location, keep in refs.items():
        ds = lance.dataset(os.path.join(root, location))
        versions = {v["version"] for v in ds.versions()}
        extra = versions - keep - {ds.version}
        assert not extra, f"{location}: unreferenced versions {extra} survived vacuum"
        _assert_files_tracked(ds, location)
    _assert_files_tracked(lance.dataset(os.path.join(root, "__manifest")), "__manifest")


def _assert_files_tracked(ds: lance.LanceDataset, name: str) -> None:
    tracked = set(ds.tracked_files().read_all().column("path").to_pylist())
    present = {
        p
        for p in ds.all_files().read_all().column("path").to_pylist()
        if p.startswith(("data/", "_deletions/"))
    }
    assert present <= tracked, f"{name}: orphan files {sorted(present - tracked)}"


def disk_listing(root: str) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` (relative path -> size, mtime in ns): "unchanged on disk" oracle."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            out[os.path.relpath(path, root)] = (0 if name in dirs else st.st_size, st.st_mtime_ns)
    return out


def records(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def replay(txns: list[dict], upto: int | None = None) -> Counter:
    """The namespace content after the successful transactions (version order) up to ``upto``."""
    by_part: dict[int, Counter] = {}
    for rec in sorted(txns, key=lambda r: r["version"]):
        if upto is not None and rec["version"] > upto:
            break
        mine: dict[int, Counter] = {}
        ids = iter(rec["ids"])
        per = len(rec["ids"]) // len(rec["parts"])
        for p in rec["parts"]:
            mine[p] = Counter((rec["txn"], p, next(ids)) for _ in range(per))
        for p, c in mine.items():
            by_part[p] = c if rec["op"] == "dynamic" else by_part.get(p, Counter()) + c
    out: Counter = Counter()
    for c in by_part.values():
        out += c
    return out
