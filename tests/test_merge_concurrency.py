"""Row-level changes (merge, update) under concurrency and crashes, as real processes.

- **Concurrent merges**: writer processes upsert overlapping key sets (rows that
  move partition, partitions created), on a namespace partitioned by identity on
  a column and on one bucketed by the key. Every merge rewrites every spec's lock
  row, so any two conflict and the loser re-plans: commit order is the serial
  order. The final table (and every version, by time travel) must equal a pure
  Python replay of the successful merges in version order, each key once, and
  each merge's counts must be those of its place in that order.
- **Kills**: a merge and an update are SIGKILLed at every pause point they pass
  (``rolling_back`` after a conflicting commit). The namespace then reads all of
  the change or none of it, validates, and the next merge and update give the
  oracle's answer; ``vacuum`` reclaims what the dead writer left.
- **Lost races**: a merge or update that loses the ``__manifest`` race re-matches
  what the winner published (two merges never both insert a key), and after a
  concurrent rename re-plans by the new schema.

The oracle is plain Python over ``(txn, part, id)`` triples (``txn_helpers.state``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from collections import Counter
from collections.abc import Iterable, Iterator

import lance
import pyarrow as pa
import pytest
from txn_helpers import (
    SCHEMA,
    SPEC,
    assert_no_orphans,
    baseline,
    kill,
    records,
    rows,
    spawn,
    state,
    table_state,
    wait_for,
)
from txn_worker import UPDATE_SET, upsert

import lance_partitioned as lp

# -- the oracle ------------------------------------------------------------------


def upserted(before: Counter, source: Iterable[tuple[str, int, int]]) -> Counter:
    """SQL MERGE by ``id`` (matched: take the source row; not matched: insert) over
    ``(txn, part, id)`` triples; ``before`` holds each id once."""
    by_id = {i: (txn, part) for txn, part, i in before.elements()}
    assert len(by_id) == sum(before.values()), "the oracle needs unique ids"
    for txn, part, i in source:
        by_id[i] = (txn, part)
    return Counter((txn, part, i) for i, (txn, part) in by_id.items())


UPDATE_WHERE = "part IN (1, 2) AND id >= 6"


def updated(before: Counter) -> Counter:
    """``ns.update(UPDATE_SET, where=UPDATE_WHERE)`` in Python: matching rows get
    ``txn = 'u'`` and move two partitions up."""
    assert UPDATE_SET == {"txn": "'u'", "part": "part + 2"}
    out: Counter = Counter()
    for (txn, part, i), n in before.items():
        out[("u", part + 2, i) if part in (1, 2) and i >= 6 else (txn, part, i)] += n
    return out


def ids_of(content: Counter) -> set[int]:
    return {i for _, _, i in content}


# -- concurrent merges -------------------------------------------------------------

WRITERS, MERGES, KEYS = 3, 20, 24


@pytest.mark.parametrize("spec", ["part", "bucket(4, id)"])
def test_concurrent_merges_equal_their_serial_replay(tmp_path, spec):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, spec)
    init_ids = list(range(0, KEYS, 2))  # half the keys exist: merges both update and insert
    init = pa.table(
        {"id": init_ids, "part": [i % 4 for i in init_ids], "txn": ["init"] * len(init_ids)},
        schema=SCHEMA,
    )
    start = ns.append(init).version
    logs = [str(tmp_path / f"w{w}.log") for w in range(WRITERS)]
    writers = [
        spawn(root, "merges", str(w), str(MERGES), str(w + 11), str(KEYS), logs[w])
        for w in range(WRITERS)
    ]
    try:
        for proc in writers:
            proc.wait(timeout=300)
    finally:
        for proc in writers:
            if proc.poll() is None:
                kill(proc)
    for proc in writers:
        assert proc.returncode == 0, proc.stderr.read()

    recs = [r for log in logs for r in records(log)]
    assert len(recs) == WRITERS * MERGES
    assert not [r for r in recs if "unexpected" in r]
    failures = [r for r in recs if r.get("failed")]
    assert all(f["retryable"] for f in failures), failures  # conflicts after the retries only
    successes = sorted((r for r in recs if not r.get("failed")), key=lambda r: r["version"])
    versions = [r["version"] for r in successes]
    assert len(set(versions)) == len(versions) and min(versions) > start
    assert len(successes) >= WRITERS * MERGES // 2, f"{len(failures)} merges failed"

    # the serial replay in version order, and each merge's counts at its place in it
    content = table_state(init)
    by_version = {start: content}
    for rec in successes:
        keys = set(rec["ids"])
        present = ids_of(content)
        assert (rec["inserted"], rec["updated"], rec["deleted"]) == (
            len(keys - present),
            len(keys & present),
            0,
        ), rec
        content = upserted(
            content, ((rec["txn"], p, i) for p, i in zip(rec["parts"], rec["ids"], strict=True))
        )
        by_version[rec["version"]] = content
    final = state(root)
    assert final == content
    assert len(ids_of(final)) == sum(final.values())  # each key exactly once
    # time travel: every version since is the replay up to it (no half-published merge)
    for v in lp.open(root).versions():
        if v["version"] >= start:
            at = max(k for k in by_version if k <= v["version"])
            assert state(root, v["version"]) == by_version[at], v

    assert lp.open(root).validate() == []
    lp.open(root).vacuum(older_than=dt.timedelta(0))
    assert state(root) == content
    assert_no_orphans(root)
    # the writers did contend: some merges lost a race and re-planned
    assert sum(r["replans"] for r in recs) > 0


# -- kills at every pause point -------------------------------------------------------

POINTS = ["files_written", "leaf_staged", "leaves_staged", "published", "rolling_back"]
CASES = [(op, point) for op in ("merge", "update") for point in POINTS]
# ids 6-14 into partitions 1, 2, 3: 6-11 exist (8 moves from partition 2 to 1), 12-14 are new,
# in a new partition 3
MERGE_SOURCE = ("x", [1, 2, 3], 3, 6)
# committed while the change is paused at leaves_staged, into partition 1, which both the
# merge and the update publish: the change conflicts and rolls back
CONCURRENT = rows("c", [1], 2, 3000)


def worker_args(op: str) -> list[str]:
    if op == "merge":
        txn, parts, per_part, start = MERGE_SOURCE
        return ["one", "merge", txn, ",".join(map(str, parts)), str(per_part), str(start)]
    return ["one", "update", UPDATE_WHERE, "", "0", "0"]


def expected_after(op: str, before: Counter) -> Counter:
    if op == "merge":
        return upserted(before, table_state(rows(*MERGE_SOURCE)).elements())
    return updated(before)


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """Start every (op, point) worker at once, wait until each pauses, SIGKILL it.

    Each run: (root, state at baseline, state the change was planned to apply to)."""
    base = tmp_path_factory.mktemp("change-crash")
    runs = {}
    for op, point in CASES:
        folder = base / f"{op}-{point}"
        folder.mkdir()
        root = str(folder / "ns")
        old = baseline(root)
        pause = "leaves_staged,rolling_back" if point == "rolling_back" else point
        proc = spawn(root, *worker_args(op), pause=pause, pause_dir=str(folder))
        runs[(op, point)] = (root, str(folder), proc, old)
    out = {}
    try:
        for (op, point), (root, folder, proc, old) in runs.items():
            before = old
            if point == "rolling_back":
                wait_for(os.path.join(folder, "leaves_staged.paused"), proc, timeout=120)
                lp.open(root).append(CONCURRENT)
                before = old + table_state(CONCURRENT)
                open(os.path.join(folder, "leaves_staged.go"), "w").close()
            wait_for(os.path.join(folder, f"{point}.paused"), proc, timeout=120)
            kill(proc)
            out[(op, point)] = (root, old, before)
    finally:  # a worker that never paused is not left waiting
        for _root, _folder, proc, _old in runs.values():
            if proc.poll() is None:
                kill(proc)
    return out


@pytest.mark.parametrize(("op", "point"), CASES, ids=[f"{o}-{p}" for o, p in CASES])
def test_kill_at_every_step(killed, op, point):
    root, old, before = killed[(op, point)]
    after = expected_after(op, before)
    now = state(root)
    # all of the change once __manifest is committed, else none of it
    assert now == (after if point == "published" else before)
    assert lp.open(root).validate() == []
    # every manifest version holds a whole state
    wholes = [Counter(), table_state(rows("b0", [0, 1, 2], 4, 0)), old, before, after]
    for v in lp.open(root).versions():
        assert state(root, v["version"]) in wholes, v

    # the next merge (ids 10-15: some the dead change wrote, rows moving partition) and
    # update work and give the oracle's answer, never picking up the dead writer's rows
    nxt = rows("n", [0, 3, 4], 2, 10)
    result = upsert(lp.open(root), nxt)
    expected = upserted(now, table_state(nxt).elements())
    assert state(root) == expected
    keys, present = set(nxt["id"].to_pylist()), ids_of(now)
    assert (result.rows_inserted, result.rows_updated, result.rows_deleted) == (
        len(keys - present),
        len(keys & present),
        0,
    )
    moved = updated(expected)
    result = lp.open(root).update(UPDATE_SET, where=UPDATE_WHERE)
    assert state(root) == moved
    assert result.rows_updated == sum(
        n for (_, p, i), n in expected.items() if p in (1, 2) and i >= 6
    )
    assert lp.open(root).validate() == []

    # vacuum reclaims what the dead writer left, and changes no row
    report = lp.open(root).vacuum(older_than=dt.timedelta(0))
    assert state(root) == moved
    assert_no_orphans(root)
    if point != "published":
        # its new partition directories, staged versions or files
        assert report.dirs_removed + report.leaf_versions_removed + report.files_removed > 0


# -- lost races re-plan ------------------------------------------------------------------


@contextlib.contextmanager
def racing(root: str, folder: str, args: list[str]) -> Iterator[dict]:
    """Run the worker ``args`` until it stops at ``leaves_staged``, for the block to commit
    what races it; then let it go on: ``outcome`` gets its exit ``code`` and stderr
    (``err``). A worker still paused when the block raised is killed."""
    proc = spawn(root, *args, pause="leaves_staged", pause_dir=folder)
    outcome: dict = {}
    try:
        wait_for(os.path.join(folder, "leaves_staged.paused"), proc)
        yield outcome
        open(os.path.join(folder, "leaves_staged.go"), "w").close()
        _, outcome["err"] = proc.communicate(timeout=120)
        outcome["code"] = proc.returncode
    finally:
        if proc.poll() is None:
            kill(proc)


def test_two_merges_never_both_insert_a_key(tmp_path):
    """The paused merge inserts ids 12-14; a merge inserting the same ids commits first:
    the paused one re-matches and updates them (one row per key, in its partitions)."""
    root = str(tmp_path / "ns")
    old = baseline(root)
    winner = rows("c", [0], 3, 12)
    with racing(root, str(tmp_path), worker_args("merge")) as outcome:
        upsert(lp.open(root), winner)
    assert outcome["code"] == 0, outcome["err"]
    expected = upserted(
        upserted(old, table_state(winner).elements()), table_state(rows(*MERGE_SOURCE)).elements()
    )
    assert state(root) == expected
    assert len(ids_of(expected)) == sum(expected.values())
    assert lp.open(root).validate() == []


def test_an_update_replans_over_rows_appended_to_its_partitions(tmp_path):
    """Rows matching the update's filter land in a partition it changes while it is
    paused: it conflicts, re-plans, and updates them too."""
    root = str(tmp_path / "ns")
    old = baseline(root)
    with racing(root, str(tmp_path), worker_args("update")) as outcome:
        lp.open(root).append(CONCURRENT)
    assert outcome["code"] == 0, outcome["err"]
    assert state(root) == updated(old + table_state(CONCURRENT))
    assert lp.open(root).validate() == []


def test_merges_inserting_one_key_into_different_partitions_conflict(tmp_path):
    """Two merges insert id 500, each into another existing partition, each touching only
    that partition, whose ``__manifest`` rows sit in different fragments (Lance would
    let the two commits through): the loser must still conflict, re-match, and move the
    winner's row (one row for the key)."""
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, SPEC)
    ns.append(rows("b0", [0], 2, 0))  # one commit per partition: one fragment per leaf row
    ns.append(rows("b1", [1], 2, 10))
    old = state(root)
    with racing(root, str(tmp_path), ["one", "merge", "a", "1", "1", "500"]) as outcome:
        upsert(lp.open(root), rows("w", [0], 1, 500))
    assert outcome["code"] == 0, outcome["err"]
    assert state(root) == old + table_state(rows("a", [1], 1, 500))
    assert lp.open(root).validate() == []


def test_an_append_racing_a_merge_into_a_partition_it_only_reads_comes_after_it(tmp_path):
    """docs/CHANGES.md §5: the merge inserts id 500 into partition 1 and reads partition
    0 without changing it; an append of id 500 into partition 0 publishes meanwhile.
    Nothing makes the merge plan again: the result is the merge, then the append (the
    key twice), and the history shows the append's version first."""
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, SPEC)
    ns.append(rows("b0", [0], 2, 0))
    ns.append(rows("b1", [1], 2, 10))
    old = state(root)
    appended = rows("w", [0], 1, 500)
    with racing(root, str(tmp_path), ["one", "merge", "a", "1", "1", "500"]) as outcome:
        append_version = lp.open(root).append(appended).version
    assert outcome["code"] == 0, outcome["err"]
    merged = table_state(rows("a", [1], 1, 500))
    assert state(root) == old + table_state(appended) + merged
    assert state(root, append_version) == old + table_state(appended)
    assert lp.open(root).version == append_version + 1


# -- a schema change while a change is in flight ---------------------------------------------


def test_an_update_that_replans_after_a_rename_refuses_the_renamed_column(tmp_path):
    """The update sets ``txn`` and ``part``; ``txn`` is renamed while it is paused. The
    re-planned update must not move the rows and drop the ``txn`` assignment (no serial
    order does that): like the update after the rename, it names the missing column."""
    root = str(tmp_path / "ns")
    baseline(root)
    with racing(root, str(tmp_path), worker_args("update")) as outcome:
        lp.open(root).rename_column("txn", "tag")
        renamed = lp.open(root).to_arrow()
    err = outcome["err"]
    assert outcome["code"] != 0 and "ColumnNotFoundError" in err and "'txn'" in err, err
    assert lp.open(root).to_arrow().sort_by("id").equals(renamed.sort_by("id"))
    assert lp.open(root).validate() == []


def test_a_merge_that_replans_after_a_rename_reads_its_source_by_the_new_schema(tmp_path):
    """The merge's source has ``txn``; ``txn`` is renamed to ``tag`` while it is paused.
    The re-planned merge is the merge after the rename: ``txn`` is then a source column
    the namespace does not have (left out, as for any merge), ``id`` and ``part`` apply."""
    root = str(tmp_path / "ns")
    old = baseline(root)
    with racing(root, str(tmp_path), worker_args("merge")) as outcome:
        lp.open(root).rename_column("txn", "tag")
    assert outcome["code"] == 0, outcome["err"]
    # matched rows keep their tag, new ids get NULL; id and part are the source's
    kept = {i: txn for txn, _, i in old.elements()}
    source = table_state(rows(*MERGE_SOURCE)).elements()
    expected = upserted(old, ((kept.get(i), part, i) for _, part, i in source))
    t = lp.open(root).to_arrow()
    got = zip(t["tag"].to_pylist(), t["part"].to_pylist(), t["id"].to_pylist(), strict=True)
    assert Counter(got) == expected
    assert lp.open(root).validate() == []


# -- a version slipping in while a leaf is staged ----------------------------------------------


def test_a_staging_retry_of_an_upsert_still_deletes_the_rows_that_move_out(tmp_path, monkeypatch):
    """The upsert moves id 1 from partition 0 to 1 and updates id 0 in partition 0, so
    partition 0 is staged as two versions: the deletion of id 1, then Lance's
    merge_insert of id 0. A concurrent writer's version (a Restore of the published
    one, as its own staging makes) lands between them: the staging starts again on
    the published content, and the deletion must be made again there (else id 1 is
    in both partitions)."""
    from lance_partitioned.operations.leaf import leaf_changes

    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, SPEC)
    ns.append(rows("b", [0], 2, 0))
    ns.append(rows("b", [1], 2, 10))
    old = state(root)
    real = leaf_changes.MergeRows.operation
    slipped = []

    def slip_in_first(self, base):
        op = real(self, base)
        if self.moved_out and not slipped:  # once, after a deletion of moved rows
            published = lance.dataset(base.uri, version=1)
            slipped.append(published.restore() or lance.dataset(base.uri).version)
        return op

    monkeypatch.setattr(leaf_changes.MergeRows, "operation", slip_in_first)
    source = pa.table({"id": [0, 1], "part": [0, 1], "txn": ["m", "m"]}, schema=SCHEMA)
    result = upsert(lp.open(root), source)
    assert slipped, "the upsert took Lance's path (MergeRows) with a deletion"
    assert state(root) == upserted(old, [("m", 0, 0), ("m", 1, 1)])
    assert (result.rows_inserted, result.rows_updated) == (0, 2)
    assert lp.open(root).validate() == []
