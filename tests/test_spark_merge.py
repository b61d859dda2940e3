"""MERGE with a Spark DataFrame source, run on the executors (issue 30, item 5).

The oracle is the same dictionary MERGE as tests/test_merge.py, applied to the
rows the DataFrame was built from.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from test_merge import SCHEMA, assert_conforms, assert_rows, change_batch, oracle_merge, rows, table

import lance_partitioned as lp

pytest.importorskip("pyspark")
from lance_partitioned import spark as lps  # noqa: E402
from lance_partitioned.spark.timing import TIMING_LOG_ENV  # noqa: E402

SOURCE_SCHEMA = SCHEMA.append(pa.field("op", pa.string()))


def spark_frame(spark, data: list[dict]):
    return spark.createDataFrame(table(data, SOURCE_SCHEMA).to_pandas())


@pytest.mark.parametrize("spec", ["bucket(4, id)", "g, year(d)"])
def test_spark_merge_matches_the_oracle(spark, tmp_path, spec):
    root = str(tmp_path / "ns")
    target = rows(150, 0, seed=21)
    ns = lp.create(root, SCHEMA, spec)
    ns.append(table(target), progress=False)
    source = change_batch(target, seed=22, start=5000)
    result = (
        lps.merge(spark, spark_frame(spark, source), root, on="id", tasks=3)
        .when_matched_delete("source.op = 'D'")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    expected = oracle_merge(
        target, source, ["id"], delete_if=lambda s, t: s["op"] == "D", columns=SCHEMA.names
    )
    ns = lp.open(root)
    assert_rows(ns, expected)
    assert result.version == ns.version
    ids = {t["id"] for t in target}
    assert result.rows_inserted == sum(1 for s in source if s["id"] is None or s["id"] not in ids)
    assert_conforms(ns)


def test_a_failed_task_publishes_nothing(spark, tmp_path):
    root = str(tmp_path / "ns")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("g", pa.int32(), nullable=False)])
    ns = lp.create(root, schema, "g")
    ns.append(pa.table({"id": [1, 2], "g": [0, 1]}, schema=schema), progress=False)
    before = (ns.version, sorted(ns.to_arrow().to_pylist(), key=str))
    # an inserted row with a NULL in the non-nullable partition column fails its task
    df = spark.createDataFrame([(1, 5), (3, None)], "id long, g int")
    with pytest.raises(Exception, match="not nullable|non-nullable|NULL"):
        lps.merge(
            spark, df, root, on="id", tasks=2
        ).when_matched_update_all().when_not_matched_insert_all().execute()
    ns = lp.open(root)
    assert (ns.version, sorted(ns.to_arrow().to_pylist(), key=str)) == before


def test_by_source_delete_is_refused_with_a_spark_source(spark, tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "g")
    ns.append(table(rows(10, 0, 23)), progress=False)
    builder = lps.merge(spark, spark_frame(spark, rows(2, 0, 24)), root, on="id")
    with pytest.raises(lp.UnsupportedFeatureError, match="not_matched_by_source"):
        builder.when_not_matched_by_source_delete().execute()
    assert lp.open(root).version == ns.version


def _upsert(spark, tmp_path, seed: int) -> tuple[str, list[dict], list[dict]]:
    """A plain upsert by Spark (3 tasks) into a bucketed namespace: (root, target, source)."""
    root = str(tmp_path / "ns")
    target = rows(120, 0, seed=seed)
    lp.create(root, SCHEMA, "bucket(4, id)").append(table(target), progress=False)
    source = change_batch(target, seed=seed + 1, start=5000)
    df = spark_frame(spark, source)
    builder = lps.merge(spark, df, root, on="id", tasks=3)
    builder.when_matched_update_all().when_not_matched_insert_all().execute()
    assert_rows(lp.open(root), oracle_merge(target, source, ["id"], columns=SCHEMA.names))
    return root, target, source


def test_timing_log_says_where_the_tasks_and_the_commit_spent_their_time(
    spark, tmp_path, monkeypatch
):
    """The variable is set on the driver only now, long after Spark started: the driver
    hands its path to the tasks. One line per task that had rows (its rows, the seconds
    waiting for them, in plan_merge and in the write, wall and CPU) and one for the
    driver (the Spark job, the commit); the merge itself is unchanged (the oracle)."""
    log = tmp_path / "timing.jsonl"
    monkeypatch.setenv(TIMING_LOG_ENV, str(log))
    _, _, source = _upsert(spark, tmp_path, seed=31)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    tasks = [e for e in entries if e["phase"] == "merge_task"]
    (driver,) = [e for e in entries if e["phase"] == "merge_driver"]
    assert sum(t["rows"] for t in tasks) == len(source)
    assert driver["tasks"] == len(tasks) >= 1
    assert driver["files"] == sum(t["files"] for t in tasks) >= 1
    for t in tasks:
        parts = t["input_wait_seconds"] + t["plan_seconds"] + t["write_seconds"]
        assert min(t["input_wait_seconds"], t["plan_seconds"], t["write_seconds"]) >= 0
        assert parts <= t["seconds"] <= driver["job_seconds"]
        assert t["plan_cpu_seconds"] > 0 and t["write_cpu_seconds"] > 0
    assert driver["commit_seconds"] > 0 and driver["commit_cpu_seconds"] > 0


def test_no_timing_log_without_the_variable(spark, tmp_path, monkeypatch):
    monkeypatch.delenv(TIMING_LOG_ENV, raising=False)
    _upsert(spark, tmp_path, seed=41)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ns"]
