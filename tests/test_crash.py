"""Crash matrix: a writer process is SIGKILLed at every step of the protocol, and at random times.

After each kill: readers see exactly the old state or exactly the new one; the
next write to the same partitions succeeds and never resurrects the dead
writer's rows (G4); ``vacuum`` leaves no orphan file or version; counts are exact.
The workers of a module run side by side (one namespace each) to keep it quick.

Both stores of ``module_store`` (``conftest.py``): local disk and the S3 server. On S3
a kill mid-commit leaves objects, not files, behind (a half-staged leaf, a lease
object, data files no version references); afterwards the namespace still opens and
validates, and the retry succeeds.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from collections import Counter

import pytest
from txn_helpers import (
    SCHEMA,
    SPEC,
    assert_no_orphans,
    baseline,
    kill,
    rows,
    spawn,
    state,
    table_state,
    wait_for,
)
from txn_worker import seq_txn

import lance_partitioned as lp

WRITE_POINTS = ["files_written", "leaf_staged", "leaves_staged", "published"]
STAGE_POINTS = ["leaf_staged", "leaves_staged", "published"]
CASES = (
    [("append", p) for p in WRITE_POINTS]
    + [("dynamic", p) for p in WRITE_POINTS]
    + [("overwrite", p) for p in WRITE_POINTS]
    + [("delete", p) for p in STAGE_POINTS]
    + [("compact", p) for p in STAGE_POINTS]
)
DELETE_FILTER = "part IN (1, 2) AND id >= 6"


def new_data():
    return rows("x", [1, 2, 3], 3, 1000)


def expected_after(op: str, old: Counter) -> Counter:
    x = table_state(new_data())
    if op == "append":
        return old + x
    if op == "dynamic":
        return Counter({r: n for r, n in old.items() if r[1] not in (1, 2, 3)}) + x
    if op == "overwrite":
        return x
    if op == "delete":
        return Counter({r: n for r, n in old.items() if not (r[1] in (1, 2) and r[2] >= 6)})
    return old  # compact: same rows


def worker_args(op: str) -> list[str]:
    if op == "delete":
        return ["one", "delete", DELETE_FILTER, "", "0", "0"]
    if op == "compact":
        return ["one", "compact", "-", "", "0", "0"]
    return ["one", op, "x", "1,2,3", "3", "1000"]


@pytest.fixture(scope="module")
def crashed(module_store, tmp_path_factory):
    """Start every (op, point) worker at once, wait until each pauses, SIGKILL it."""
    base = tmp_path_factory.mktemp("crash")  # pause files: always local
    runs = {}
    for op, point in CASES:
        folder = base / f"{op}-{point}"
        folder.mkdir()
        root = module_store.root(f"{op}-{point}")
        old = baseline(root)
        proc = spawn(root, *worker_args(op), pause=point, pause_dir=str(folder))
        runs[(op, point)] = (root, str(folder), proc, old)
    for (_op, point), (_root, folder, proc, _old) in runs.items():
        wait_for(os.path.join(folder, f"{point}.paused"), proc, timeout=120)
        kill(proc)
    return runs


@pytest.mark.parametrize(("op", "point"), CASES, ids=[f"{o}-{p}" for o, p in CASES])
def test_kill_at_every_step(crashed, op, point):
    root, _folder, _proc, old = crashed[(op, point)]
    new = expected_after(op, old)
    now = state(root)
    # G1/G2: exactly the old state, or exactly the new one once __manifest is committed
    assert now == (new if point == "published" else old)
    assert lp.open(root).validate() == []  # what the dead writer left is not damage
    # every manifest version shows a whole state
    for v in lp.open(root).versions()[2:]:
        assert state(root, v["version"]) in (old, new, table_state(rows("b0", [0, 1, 2], 4, 0)))
    # the namespace stays writable, and the next append to the same partitions
    # does not pick up the dead writer's staged rows (G4)
    nxt = rows("next", [1, 2, 3], 2, 5000)
    lp.open(root).append(nxt)
    assert state(root) == now + table_state(nxt)
    # a second transaction of the same kind works too
    if op == "compact":
        lp.open(root).compact()
    elif op == "delete":
        lp.open(root).delete("txn = 'next' AND part = 3")
        nxt = rows("next", [1, 2], 2, 5000)
    assert state(root) == now + table_state(nxt)
    # vacuum reclaims everything the dead writer left, and changes no row
    report = lp.open(root).vacuum(older_than=dt.timedelta(0))
    assert state(root) == now + table_state(nxt)
    assert_no_orphans(root)
    if point in ("files_written", "leaf_staged", "leaves_staged") and op in (
        "append",
        "dynamic",
        "overwrite",
    ):
        # the dead writer's new partition directory (part 3) or staged versions were reclaimed
        assert report.dirs_removed + report.leaf_versions_removed + report.files_removed > 0


# -- random-time kills ---------------------------------------------------------

KILLS = 4


@pytest.fixture(scope="module")
def randomly_killed(module_store):
    rng = random.Random(5)
    runs = []
    for i in range(KILLS):
        root = module_store.root(f"random-{i}")
        created = lp.create(root, SCHEMA, SPEC).version
        runs.append((root, spawn(root, "seq", "1000"), created))
    for root, proc, created in runs:
        # once the stream is under way, kill it at a random moment (mid-transaction
        # most of the time: a transaction is mostly staging)
        deadline = time.monotonic() + 60
        while lp.open(root).manifest.dataset().version == created:
            assert proc.poll() is None and time.monotonic() < deadline, "worker never committed"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.6))
        kill(proc)
    return [root for root, _, _ in runs]


@pytest.mark.parametrize("i", range(KILLS))
def test_kill_at_random_times(randomly_killed, i):
    root = randomly_killed[i]
    now = state(root)
    present = {txn for txn, _, _ in now}
    k = len(present)
    # whole transactions only, and exactly a prefix of the sequence
    assert present == {f"t{j}" for j in range(k)}
    expected = Counter()
    for j in range(k):
        txn, parts = seq_txn(j)
        expected += table_state(rows(txn, parts, 5, 10_000 * (j + 1)))
    assert now == expected
    assert lp.open(root).validate() == []
    nxt = rows("next", [0, 1, 2, 3, 4], 1, 9_000_000)
    lp.open(root).append(nxt)
    assert state(root) == expected + table_state(nxt)
    lp.open(root).vacuum(older_than=dt.timedelta(0))
    assert_no_orphans(root)
    assert state(root) == expected + table_state(nxt)
