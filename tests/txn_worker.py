"""A writer/reader process for the crash and concurrency tests (run as a script).

Rows are tiny: ``id`` (unique per row), ``part`` (the identity partition),
``txn`` (the transaction that wrote the row). Every transaction touches at
least two partitions, so a reader that sees part of one would notice.

Usage:
  txn_worker.py ROOT one OP TXN PARTS ROWS START_ID    # one transaction, then exit
  txn_worker.py ROOT seq COUNT                         # COUNT appends t0..t<COUNT-1>
  txn_worker.py ROOT loop WORKER COUNT SEED PARTS OUT  # random appends / dynamic overwrites
  txn_worker.py ROOT merges WORKER COUNT SEED KEYS OUT # upserts of random overlapping key sets
  txn_worker.py ROOT read OUT STOPFILE                 # read the latest version until STOPFILE exists
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time

import pyarrow as pa

import lance_partitioned as lp

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("part", pa.int32()),
        pa.field("txn", pa.string()),
    ]
)
SPEC = "part"
# what ``one update`` sets on the rows its filter selects: every row moves two partitions up
UPDATE_SET = {"txn": "'u'", "part": "part + 2"}
MERGE_PARTS = 6  # ``merges`` spreads its rows over partitions 0..5


def rows(txn: str, parts: list[int], per_part: int, start_id: int) -> pa.Table:
    data: dict[str, list] = {"id": [], "part": [], "txn": []}
    next_id = start_id
    for p in parts:
        for _ in range(per_part):
            data["id"].append(next_id)
            data["part"].append(p)
            data["txn"].append(txn)
            next_id += 1
    return pa.table(data, schema=SCHEMA)


def seq_txn(i: int) -> tuple[str, list[int]]:
    """The i-th transaction of ``seq`` mode: 2-3 partitions, 5 rows each, ids from 10_000 * (i+1)."""
    return f"t{i}", [i % 4, (i + 1) % 4] + ([4] if i % 3 == 0 else [])


def one(root: str, op: str, txn: str, parts: str, per_part: str, start_id: str) -> None:
    ns = lp.open(root)
    part_list = [int(p) for p in parts.split(",")] if parts else []
    data = rows(txn, part_list, int(per_part), int(start_id))
    if op == "append":
        ns.append(data)
    elif op == "overwrite":
        ns.overwrite(data)
    elif op == "dynamic":
        ns.overwrite(data, dynamic=True)
    elif op == "delete":
        ns.delete(txn)  # the filter travels in the TXN argument
    elif op == "merge":
        upsert(ns, data)
    elif op == "update":
        ns.update(UPDATE_SET, where=txn)  # the filter travels in the TXN argument
    elif op == "compact":
        ns.compact()
    else:
        raise SystemExit(f"unknown op {op}")


def upsert(ns: lp.PartitionedNamespace, data: pa.Table) -> lp.MergeResult:
    """Merge ``data`` by ``id``: matched rows take every source column, new ids are inserted."""
    return ns.merge(data, on="id").when_matched_update_all().when_not_matched_insert_all().execute()


def seq(root: str, count: str) -> None:
    ns = lp.open(root)
    for i in range(int(count)):
        txn, parts = seq_txn(i)
        ns.append(rows(txn, parts, 5, 10_000 * (i + 1)))


def loop(root: str, worker: str, count: str, seed: str, nparts: str, out: str) -> None:
    """``count`` transactions; a conflict is recorded and retried as a *new* transaction."""
    rng = random.Random(int(seed))
    w = int(worker)
    next_id = w * 1_000_000
    with open(out, "a") as log:
        for i in range(int(count)):
            parts = sorted(rng.sample(range(int(nparts)), rng.choice([2, 2, 3])))
            op = "dynamic" if rng.random() < 0.3 else "append"
            # A user retries a conflict with jittered exponential backoff; a fixed short
            # pause let a slow writer lose 20 times in a row on a loaded 2-core machine
            # (each attempt then takes seconds while the others keep committing).
            for attempt in range(40):
                txn = f"w{w}-{i}-{attempt}"
                data = rows(txn, parts, rng.randint(1, 3), next_id)
                next_id += data.num_rows
                rec = {"txn": txn, "op": op, "parts": parts, "ids": data["id"].to_pylist()}
                try:
                    ns = lp.open(root)
                    result = (
                        ns.overwrite(data, dynamic=True) if op == "dynamic" else ns.append(data)
                    )
                except lp.CommitConflictError as exc:
                    rec.update(
                        failed=True, retryable=getattr(exc, "retryable", False), error=str(exc)
                    )
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                    time.sleep(rng.uniform(0, min(2.0, 0.05 * 2 ** min(attempt, 6))))
                    continue
                except Exception as exc:  # anything else is a bug: the test reports it
                    rec.update(failed=True, unexpected=f"{type(exc).__name__}: {exc}")
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
                    raise
                rec.update(version=result.version)
                log.write(json.dumps(rec) + "\n")
                log.flush()
                break


class Replans(logging.Handler):
    """Counts the re-plans of row-level changes (``driver.replanned`` logs each at INFO)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        driver = logging.getLogger("lance_partitioned.operations.txn.driver")
        driver.setLevel(logging.INFO)
        driver.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "re-planning" in record.getMessage()


def merges(root: str, worker: str, count: str, seed: str, nkeys: str, out: str) -> None:
    """``count`` upserts, each of 3-8 random ids of ``0..nkeys-1`` (so the workers' key sets
    overlap), each row in a random partition (an update may move a row, an insert may create
    a partition), tagged ``txn = "w<worker>m<i>"``. One log line per merge: its version and
    counts, or ``failed`` (a CommitConflictError once the merge's own retries ran out), and
    how often it re-planned after a conflict."""
    rng = random.Random(int(seed))
    replans = Replans()
    with open(out, "a") as log:
        for i in range(int(count)):
            ids = sorted(rng.sample(range(int(nkeys)), rng.randint(3, 8)))
            parts = [rng.randrange(MERGE_PARTS) for _ in ids]
            txn = f"w{worker}m{i}"
            data = pa.table({"id": ids, "part": parts, "txn": [txn] * len(ids)}, schema=SCHEMA)
            rec: dict = {"txn": txn, "ids": ids, "parts": parts}
            replans.count = 0
            try:
                result = upsert(lp.open(root), data)
            except lp.CommitConflictError as exc:
                rec.update(failed=True, retryable=getattr(exc, "retryable", False), error=str(exc))
            except Exception as exc:  # anything else is a bug: the test reports it
                rec.update(failed=True, unexpected=f"{type(exc).__name__}: {exc}")
                log.write(json.dumps(rec) + "\n")
                raise
            else:
                rec.update(
                    version=result.version,
                    inserted=result.rows_inserted,
                    updated=result.rows_updated,
                    deleted=result.rows_deleted,
                )
            rec.update(replans=replans.count)
            log.write(json.dumps(rec) + "\n")
            log.flush()


def read(root: str, out: str, stopfile: str) -> None:
    """Read whole snapshots; record (version, sorted (txn, part, id) triples) of each."""
    with open(out, "a") as log:
        while not os.path.exists(stopfile):
            try:
                ns = lp.open(root)
                t = ns.to_arrow(columns=["id", "part", "txn"])
            except Exception as exc:
                log.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
                log.flush()
                raise
            triples = sorted(
                zip(t["txn"].to_pylist(), t["part"].to_pylist(), t["id"].to_pylist(), strict=True)
            )
            log.write(json.dumps({"version": ns.version, "rows": triples}) + "\n")
            log.flush()
            time.sleep(0.02)


if __name__ == "__main__":
    root, mode, *args = sys.argv[1:]
    {"one": one, "seq": seq, "loop": loop, "merges": merges, "read": read}[mode](root, *args)
