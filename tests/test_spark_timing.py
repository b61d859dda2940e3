"""The timing log (``LANCE_PARTITIONED_SPARK_TIMING``), driven without a JVM.

The writer Spark pickles to tasks is called directly, as Spark would: ``write`` per
task, ``commit`` on the driver. The log must say what each task and the commit did
(rows, partitions, files) without changing what is written. The reader likewise:
``partitions()`` on the driver, ``read`` per task; each read task logs its rows and
how its time splits between reading and handing batches to Spark.
"""

from __future__ import annotations

import datetime as dt
import json

import lance
import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import DateType, LongType, StructField, StructType  # noqa: E402

from lance_partitioned.spark.options import SourceOptions  # noqa: E402
from lance_partitioned.spark.sink import TIMING_LOG_ENV, plan_write  # noqa: E402

SPARK_SCHEMA = StructType([StructField("id", LongType()), StructField("day", DateType())])
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("day", pa.date32())])


def _batch(ids: range) -> pa.RecordBatch:
    days = [dt.date(2024, 1 + i % 3, 1) for i in ids]  # three months
    return pa.RecordBatch.from_arrays(
        [pa.array(list(ids), pa.int64()), pa.array(days)], schema=ARROW
    )


def _write(root: str) -> None:
    opts = SourceOptions.parse({"path": root, "spec": "month(day)"})
    writer = plan_write(opts, SPARK_SCHEMA, overwrite=False)
    messages = [
        writer.write(iter([_batch(range(0, 60)), _batch(range(60, 90))])),
        writer.write(iter([_batch(range(90, 120))])),
    ]
    writer.commit(messages)


def _rows(root: str) -> int:
    """Rows of every leaf dataset under ``root`` (plain pylance: the oracle)."""
    import os

    total = 0
    for dirpath, dirnames, _ in os.walk(root):
        if "_versions" in dirnames and os.path.basename(dirpath) != "__manifest":
            total += lance.dataset(dirpath).count_rows()
    return total


def test_timing_log_records_each_task_and_the_commit(tmp_path, monkeypatch):
    log = tmp_path / "timing.jsonl"
    monkeypatch.setenv(TIMING_LOG_ENV, str(log))
    root = str(tmp_path / "ns")
    _write(root)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    tasks = [e for e in entries if e["phase"] == "task"]
    commits = [e for e in entries if e["phase"] == "commit"]
    assert [(t["rows"], t["batches"], t["partitions"]) for t in tasks] == [(90, 2, 3), (30, 1, 3)]
    assert all(t["files"] >= t["partitions"] for t in tasks)
    assert all(t["seconds"] >= t["input_wait_seconds"] >= 0 for t in tasks)
    assert len(commits) == 1 and commits[0]["partitions"] == 3
    assert commits[0]["files"] == sum(t["files"] for t in tasks)
    assert _rows(root) == 120


def test_no_timing_log_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv(TIMING_LOG_ENV, raising=False)
    root = str(tmp_path / "ns")
    _write(root)
    assert _rows(root) == 120
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ns"]


def _read_all(root: str) -> list[pa.RecordBatch]:
    """Every task of a plain read, as Spark would run them (the reader pickled to tasks)."""
    import pickle

    from lance_partitioned.spark.datasource import LancePartitionedDataSource

    source = LancePartitionedDataSource({"path": root, "minPartitions": "2"})
    reader = source.reader(source.schema())
    parts = reader.partitions()
    task_reader = pickle.loads(pickle.dumps(reader))
    return [b for p in parts for b in task_reader.read(p)]


def test_timing_log_records_each_read_task(tmp_path, monkeypatch):
    root = str(tmp_path / "ns")
    _write(root)
    log = tmp_path / "read.jsonl"
    monkeypatch.setenv(TIMING_LOG_ENV, str(log))
    batches = _read_all(root)
    tasks = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(t["phase"] == "read_task" for t in tasks) and len(tasks) >= 2
    # the rows each task logged are the rows it handed over; pylance counts the leaves
    assert sum(t["rows"] for t in tasks) == sum(b.num_rows for b in batches) == _rows(root)
    assert sum(t["batches"] for t in tasks) == len(batches)
    for t in tasks:
        assert t["columns"] == 2 and t["pieces"] >= 1
        assert t["read_seconds"] >= 0 and t["handoff_seconds"] >= 0
        assert abs(t["read_seconds"] + t["handoff_seconds"] - t["seconds"]) < 1e-6


def test_no_read_timing_without_the_variable(tmp_path, monkeypatch):
    root = str(tmp_path / "ns")
    monkeypatch.delenv(TIMING_LOG_ENV, raising=False)
    _write(root)
    assert sum(b.num_rows for b in _read_all(root)) == 120
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ns"]
