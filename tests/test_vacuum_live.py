"""Maintenance during a live write: vacuum and cleanup never remove what a transaction in
flight may still publish, whatever ``older_than`` says (issue 10 B5).

A writer process pauses at ``files_written``, ``leaf_staged`` or ``leaves_staged``;
the test runs ``vacuum`` (and ``cleanup``) with a cutoff of 0 or 1 s, then releases
the writer. The writer's lease makes maintenance keep its files and versions, so it
publishes; every row committed before stays readable, ``validate()`` is clean, and
later writes work. A writer whose lease was lost (it expired, or a vacuum that does
not know leases ran) and whose staged files were removed fails its commit cleanly
instead of publishing references to missing files.
"""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest
from txn_helpers import (
    SCHEMA,
    SPEC,
    assert_no_orphans,
    kill,
    rows,
    spawn,
    state,
    table_state,
    wait_for,
)

import lance_partitioned as lp
from lance_partitioned.operations.txn import leases

POINTS = ["files_written", "leaf_staged", "leaves_staged"]
CUTOFFS = {"0s": dt.timedelta(0), "1s": dt.timedelta(seconds=1)}
# (operation, pause point, cutoff): every write point x both cutoffs, and the other
# transactions that stage leaves (they hold leases too)
CASES = [("append", p, c) for p in POINTS for c in CUTOFFS] + [
    ("delete", "leaves_staged", "0s"),
    ("compact", "leaves_staged", "0s"),
]
NEW = ("x", [1, 2, 3], 3, 1000)  # partitions 1 and 2 exist, 3 is new
DELETE_FILTER = "part IN (1, 2) AND id >= 6"


def baseline(root: str):
    ns = lp.create(root, SCHEMA, SPEC)
    ns.append(rows("b0", [0, 1, 2], 4, 0))
    ns.append(rows("b1", [0, 1, 2], 4, 100))
    return state(root)


def _start(base, name: str, point: str, op: str = "append"):
    folder = base / name
    folder.mkdir()
    root = str(folder / "ns")
    old = baseline(root)
    txn, parts, per, start = NEW
    args = {
        "append": ["append", txn, ",".join(map(str, parts)), str(per), str(start)],
        "delete": ["delete", DELETE_FILTER, "", "0", "0"],
        "compact": ["compact", "-", "", "0", "0"],
    }[op]
    proc = spawn(root, "one", *args, pause=point, pause_dir=str(folder))
    return root, str(folder), proc, old


def expected_after(op: str, old):
    if op == "append":
        return old + table_state(rows(*NEW))
    if op == "delete":  # oracle: the filter evaluated on the (txn, part, id) triples
        return type(old)({r: n for r, n in old.items() if not (r[1] in (1, 2) and r[2] >= 6)})
    return old  # compaction keeps the rows


def _finish(proc) -> tuple[int, str]:
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.fixture(scope="module")
def vacuumed(tmp_path_factory):
    """Every (op, point, cutoff) writer paused at once; maintenance runs; all are released."""
    base = tmp_path_factory.mktemp("live")
    runs = {case: _start(base, "-".join(case), case[1], case[0]) for case in CASES}
    try:
        for (_op, point, _c), (_root, folder, proc, _old) in runs.items():
            wait_for(os.path.join(folder, f"{point}.paused"), proc, timeout=120)
        time.sleep(1.1)  # so that a 1 s cutoff lies after everything the writers made
        for (_op, point, cutoff), (root, folder, _proc, _old) in runs.items():
            ns = lp.open(root)
            ns.vacuum(older_than=CUTOFFS[cutoff])
            ns.cleanup(older_than=CUTOFFS[cutoff])
            ns.vacuum(older_than=CUTOFFS[cutoff])
            open(os.path.join(folder, f"{point}.go"), "w").close()
        return {case: (root, _finish(proc), old) for case, (root, _f, proc, old) in runs.items()}
    finally:
        for _root, _folder, proc, _old in runs.values():
            if proc.poll() is None:
                kill(proc)


@pytest.mark.parametrize(("op", "point", "cutoff"), CASES, ids=["-".join(c) for c in CASES])
def test_vacuum_during_a_live_write_keeps_what_it_will_publish(vacuumed, op, point, cutoff):
    root, (code, err), old = vacuumed[(op, point, cutoff)]
    assert code == 0, err  # the lease kept the writer's files: it published
    new = expected_after(op, old)
    assert state(root) == new  # every row committed before, and the write
    assert lp.open(root).validate() == []
    later = rows("later", [1, 3, 4], 1, 5000)
    lp.open(root).append(later)
    assert state(root) == new + table_state(later)
    lp.open(root).vacuum(older_than=dt.timedelta(0))  # the writer's lease is gone now
    assert_no_orphans(root)
    assert state(root) == new + table_state(later)


def _lose_lease_then(tmp_path, point: str, vacuum: bool):
    """Pause a writer at ``point``, remove its lease (as maintenance claims an expired
    lease), optionally vacuum with zero retention, release it: (exit code, stderr, root, old)."""
    root, folder, proc, old = _start(tmp_path, "w", point)
    try:
        wait_for(os.path.join(folder, f"{point}.paused"), proc, timeout=120)
        held = leases.live(lp.open(root).manifest)
        assert [lease.pid for lease in held] == [proc.pid]
        for lease in held:
            os.remove(lease.path)
        if vacuum:
            assert lp.open(root).vacuum(older_than=dt.timedelta(0)).live_leases == 0
        open(os.path.join(folder, f"{point}.go"), "w").close()
        code, err = _finish(proc)
    finally:
        if proc.poll() is None:
            kill(proc)
    return code, err, root, old


def _assert_intact(root: str, old) -> None:
    assert state(root) == old  # nothing of the failed write, everything from before
    assert lp.open(root).validate() == []
    later = rows("later", [1, 3], 1, 5000)
    lp.open(root).append(later)
    assert state(root) == old + table_state(later)
    lp.open(root).vacuum(older_than=dt.timedelta(0))
    assert_no_orphans(root)


@pytest.mark.parametrize("point", POINTS)
def test_a_writer_whose_files_were_vacuumed_fails_cleanly(tmp_path, point):
    """A vacuum that did not honour the writer's lease (it expired) removed its files or
    staged versions: the commit checks them and publishes nothing."""
    code, err, root, old = _lose_lease_then(tmp_path, point, vacuum=True)
    assert code != 0
    assert "StagedFilesMissingError" in err and "nothing was published" in err, err
    _assert_intact(root, old)


def test_a_writer_that_lost_its_lease_does_not_publish(tmp_path):
    """Without a lease the writer cannot know what maintenance removed: it gives up."""
    code, err, root, old = _lose_lease_then(tmp_path, "leaves_staged", vacuum=False)
    assert code != 0
    assert "LeaseLostError" in err and "nothing was published" in err, err
    _assert_intact(root, old)


# -- lease rules, in one process -------------------------------------------------


def _fake_lease(root: str, host: str, pid: int, started: float, age: dt.timedelta) -> str:
    """A lease file as another writer would leave it, last renewed ``age`` ago."""
    from lance_partitioned.catalog import sidecar, storage

    path = os.path.join(root, "__manifest", leases.LEASE_DIR, f"fake{pid}.json")
    sidecar.write_json(
        storage.resolve(path), path, {"id": "fake", "host": host, "pid": pid, "started": started}
    )
    renewed = time.time() - age.total_seconds()
    os.utime(path, (renewed, renewed))
    return path


def _dead_pid() -> int:
    proc = spawn("unused", "no-such-mode")
    proc.communicate(timeout=60)
    return proc.pid  # exited and reaped: no such process now


def test_lease_liveness_rules(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, SPEC)
    here = leases._host()
    fresh = dt.timedelta(0)
    expired = leases.TTL + dt.timedelta(seconds=1)
    # another host: live until not renewed for TTL, whatever its pid
    remote = _fake_lease(root, "elsewhere/boot", 1, time.time(), fresh)
    assert [lease.path for lease in leases.live(ns.manifest)] == [remote]
    os.utime(remote, (time.time() - expired.total_seconds(),) * 2)
    assert leases.live(ns.manifest) == [] and not os.path.exists(remote)  # claimed
    # this host: dead as soon as its process is gone, even if renewed just now
    dead = _fake_lease(root, here, _dead_pid(), time.time(), fresh)
    assert leases.live(ns.manifest) == [] and not os.path.exists(dead)
    alive = _fake_lease(root, here, os.getpid(), time.time(), fresh)
    assert [lease.path for lease in leases.live(ns.manifest)] == [alive]
    os.remove(alive)
    # a writer whose lease was claimed cannot renew it, so it cannot publish
    own = leases.acquire(ns.manifest, "test")
    own.check()
    os.rename(own.path, own.path[: -len(".json")] + ".dead")
    with pytest.raises(lp.LeaseLostError, match="nothing was published"):
        own.check()
    own.release()


def test_maintenance_keeps_what_is_newer_than_a_live_lease(tmp_path):
    """An orphan file written after a live lease began survives vacuum(0) and cleanup(0);
    once the lease is dead, vacuum removes it."""
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, SPEC)
    ns.append(rows("a", [1], 2, 0))
    lease = _fake_lease(
        root, "elsewhere/boot", 1, time.time() - leases.CLOCK_SLACK.total_seconds(), dt.timedelta(0)
    )
    (task,) = ns.plan()
    orphan = os.path.join(task.uri, "data", "orphan-of-a-live-writer.lance")
    with open(orphan, "wb") as fh:
        fh.write(b"staged bytes")
    for call in (ns.vacuum, ns.cleanup):
        assert call(older_than=dt.timedelta(0)).live_leases == 1
    assert os.path.exists(orphan)
    os.utime(lease, (time.time() - leases.TTL.total_seconds() - 1,) * 2)  # its writer died
    report = ns.vacuum(older_than=dt.timedelta(0))
    assert report.live_leases == 0 and report.files_removed == 1
    assert not os.path.exists(orphan)
    assert state(root) == table_state(rows("a", [1], 2, 0))
