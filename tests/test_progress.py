"""Progress of long operations (issue 14 item 2): a callback receives ordered
events; without a terminal nothing is printed; ``progress=False`` is silent.

Expected counts come from the input data (``num_rows``, the number of distinct
partition values computed with pyarrow.compute), not from our code.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.operations.progress import ProgressEvent, reporter

REPO = Path(__file__).resolve().parents[1]
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def table(n: int, parts: int) -> pa.Table:
    return pa.table({"k": [i % parts for i in range(n)], "v": [str(i) for i in range(n)]}, SCHEMA)


class Recorder:
    def __init__(self) -> None:
        self.events: list[ProgressEvent] = []

    def __call__(self, event: ProgressEvent) -> None:
        self.events.append(event)

    def check_shape(self, task: str, unit: str) -> None:
        """Events of one task: done never decreases, exactly one finished event, last."""
        assert self.events, "no progress reported"
        assert {e.task for e in self.events} == {task}
        assert {e.unit for e in self.events} == {unit}
        done = [e.done for e in self.events]
        assert done == sorted(done)
        assert [e.finished for e in self.events] == [False] * (len(self.events) - 1) + [True]


def test_append_reports_rows_written_of_a_table_and_of_a_stream(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    t = table(5000, 7)
    rec = Recorder()
    ns.append(t, progress=rec)
    rec.check_shape("append", "rows")
    assert rec.events[0].total == t.num_rows  # a table's size is known up front
    assert rec.events[-1].done == t.num_rows

    stream = Recorder()
    reader = pa.RecordBatchReader.from_batches(SCHEMA, t.to_batches(max_chunksize=1000))
    ns.overwrite(reader, progress=stream)
    stream.check_shape("overwrite", "rows")
    assert stream.events[0].total is None  # a stream's is not
    assert stream.events[-1].done == t.num_rows


def test_maintenance_and_rewrite_report_partitions(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    t = table(300, 5)
    parts = len(pc.unique(t["k"]))
    for chunk in t.to_batches(max_chunksize=100):  # three commits: small files to compact
        ns.append(pa.Table.from_batches([chunk]))

    for name, call in [
        ("compact", lambda rec: ns.compact(progress=rec)),
        ("cleanup", lambda rec: ns.cleanup(older_than=dt.timedelta(0), progress=rec)),
        ("vacuum", lambda rec: ns.vacuum(older_than=dt.timedelta(0), progress=rec)),
    ]:
        rec = Recorder()
        call(rec)
        rec.check_shape(name, "partitions")
        assert rec.events[0].total == parts, name
        assert rec.events[-1].done == parts, name

    ns.evolve_spec("bucket(2, k)")
    rec = Recorder()
    ns.rewrite_partitions(progress=rec)
    rec.check_shape("rewrite_partitions", "partitions")
    assert rec.events[-1].done == rec.events[0].total == parts
    assert ns.count() == t.num_rows


def test_progress_false_and_bad_values(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(table(10, 2), progress=False)
    with pytest.raises(TypeError, match="progress must be"):
        reporter("yes", "append", "rows")  # type: ignore[arg-type]


def test_a_failed_operation_still_finishes_its_progress(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    rec = Recorder()
    bad = pa.table({"k": ["not a number"], "v": ["x"]})
    with pytest.raises(lp.SchemaError):
        ns.append(bad, progress=rec)
    assert rec.events and rec.events[-1].finished


def test_no_terminal_prints_nothing(tmp_path):
    """The default (progress=None) draws nothing when standard error is not a terminal."""
    script = textwrap.dedent(
        f"""
        import datetime as dt
        import pyarrow as pa
        import lance_partitioned as lp
        schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
        ns = lp.create({str(tmp_path / "ns")!r}, schema, "k")
        t = pa.table({{"k": [i % 4 for i in range(2000)], "v": ["x"] * 2000}}, schema)
        ns.append(t)
        ns.append(t)
        ns.compact()
        ns.cleanup(older_than=dt.timedelta(0))
        ns.vacuum(older_than=dt.timedelta(0))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout == "" and out.stderr == ""


def test_progress_true_draws_a_bar_even_without_a_terminal(tmp_path):
    script = textwrap.dedent(
        f"""
        import pyarrow as pa
        import lance_partitioned as lp
        schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
        ns = lp.create({str(tmp_path / "ns")!r}, schema, "k")
        ns.append(pa.table({{"k": [1, 2, 3], "v": ["a", "b", "c"]}}, schema), progress=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout == ""
    assert "append" in out.stderr and "3/3" in out.stderr


def test_index_builds_report_partitions(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    t = table(300, 5)
    parts = len(pc.unique(t["k"]))
    ns.append(t)
    rec = Recorder()
    ns.create_index("v", "BTREE", progress=rec)
    rec.check_shape("create_index", "partitions")
    assert rec.events[0].total == parts
    assert rec.events[-1].done == parts

    ns.append(table(20, 7))  # two new partitions (k = 5, 6) and rows in old ones
    rec = Recorder()
    ns.optimize_indexes(progress=rec)
    rec.check_shape("optimize_indexes", "partitions")
    assert rec.events[-1].done == rec.events[0].total >= 2
