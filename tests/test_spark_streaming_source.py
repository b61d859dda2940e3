"""``spark.readStream.format("lance_partitioned")``: the streaming source (docs/STREAMING.md;
its examples run in tests/test_docs_spark_examples.py).

Every expected answer comes from the data the test wrote, or from pandas over the
namespace's snapshots (``lp.open(root, version=v).to_arrow()``), never from the change
feed the source reads through. Each append carries a ``seq`` column (the append's
number), so the order rows arrive in says which commit they came from.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import lance_partitioned as lp

pytest.importorskip("pyspark")

from pyspark.errors import StreamingQueryException  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("seq", pa.int64())])
CHANGE_COLUMNS = ["_change_type", "_commit_version", "_commit_timestamp"]
REPO = Path(__file__).resolve().parents[1]


def batch(seq: int, n: int = 6, keys: str = "abc") -> pa.Table:
    """The rows of append number ``seq``: ids unique across appends, spread over ``keys``."""
    ids = [seq * 100 + i for i in range(n)]
    return pa.table(
        {"id": ids, "k": [keys[i % len(keys)] for i in range(n)], "seq": [seq] * n}, schema=SCHEMA
    )


def rows(table: pa.Table | pd.DataFrame) -> list[tuple]:
    """The rows of ``table`` as a sorted list of (id, k, seq) tuples (a multiset)."""
    df = table.to_pandas() if isinstance(table, pa.Table) else table
    return sorted(df[["id", "k", "seq"]].itertuples(index=False, name=None))


def new_namespace(tmp_path: Path) -> tuple[str, lp.PartitionedNamespace]:
    root = str(tmp_path / "events")
    return root, lp.create(root, SCHEMA, "k")


class Collected:
    """A ``foreachBatch`` function keeping each non-empty batch's rows (pandas), in order."""

    def __init__(self) -> None:
        self.batches: list[pd.DataFrame] = []

    def __call__(self, df, batch_id: int) -> None:
        got = df.toPandas()
        if len(got):
            self.batches.append(got)

    @property
    def all(self) -> pd.DataFrame:
        return pd.concat(self.batches, ignore_index=True) if self.batches else pd.DataFrame()


def stream(spark, root: str, tmp_path: Path, **options: str):
    """The streaming DataFrame of ``root`` with ``options``, and a fresh checkpoint dir."""
    reader = spark.readStream.format("lance_partitioned")
    for key, value in options.items():
        reader = reader.option(key, value)
    checkpoint = tmp_path / f"checkpoint-{time.monotonic_ns()}"
    return reader.load(root), str(checkpoint)


def run_available_now(
    spark, root: str, tmp_path: Path, checkpoint: str | None = None, **options: str
) -> Collected:
    """Run a ``Trigger.AvailableNow`` query over ``root`` to its end (on ``checkpoint``:
    a fresh one when None); its batches."""
    df, fresh = stream(spark, root, tmp_path, **options)
    checkpoint = checkpoint or fresh
    out = Collected()
    query = (
        df.writeStream.foreachBatch(out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return out


APPENDER = textwrap.dedent(
    """
    import sys, time
    import pyarrow as pa
    import lance_partitioned as lp
    from test_spark_streaming_source import batch
    ns = lp.open(sys.argv[1])
    for seq in range(int(sys.argv[2]), int(sys.argv[3])):
        ns.append(batch(seq))
        time.sleep(0.3)
    """
)


def test_appends_by_another_process_arrive_once_each_in_version_order(spark, tmp_path):
    root, ns = new_namespace(tmp_path)
    ns.append(batch(0))  # before the query: the default start (latest) skips it
    df, checkpoint = stream(spark, root, tmp_path)
    out = Collected()
    query = (
        df.writeStream.foreachBatch(out)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()  # the query has taken its start offset
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "tests")]))
        subprocess.run(
            [sys.executable, "-c", APPENDER, root, "1", "6"], env=env, check=True, timeout=300
        )
        query.processAllAvailable()
    finally:
        query.stop()
    expected = pa.concat_tables([batch(seq) for seq in range(1, 6)])
    got = out.all
    assert rows(got) == rows(expected)  # each appended row once, nothing from before
    assert list(got["seq"]) == sorted(got["seq"])  # in version order


def stopped_stream(spark, root: str, tmp_path, starting: int) -> tuple[str, Collected]:
    """Run a stream of appends from version ``starting`` until it fails; the failure's
    message and what arrived before it."""
    df, checkpoint = stream(spark, root, tmp_path, startingVersion=str(starting))
    out = Collected()
    query = (
        df.writeStream.foreachBatch(out)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination()
    return str(caught.value), out


def test_a_delete_in_range_stops_the_stream_after_the_versions_before_it(spark, tmp_path):
    root, ns = new_namespace(tmp_path)
    start = ns.version
    ns.append(batch(1))
    ns.compact()  # moves rows, changes none: never stops the stream
    ns.append(batch(2))
    ns.delete("id = 101")
    deleted_at = ns.version
    ns.append(batch(3))
    message, out = stopped_stream(spark, root, tmp_path, start + 1)
    assert "RowsRemovedError" in message
    assert f"__manifest version {deleted_at} of {root!r} deleted or updated 1 row(s)" in message
    assert "(operation 'delete')" in message
    assert f"option('startingVersion', '{deleted_at + 1}')" in message
    # everything before the delete arrived, nothing after it
    assert rows(out.all) == rows(pa.concat_tables([batch(1), batch(2)]))


def test_an_update_in_range_stops_the_stream_too(spark, tmp_path):
    """An update's change rows are paired images (update_preimage/update_postimage), not
    deletes: it removes a row version all the same, so a stream of appends stops there."""
    root, ns = new_namespace(tmp_path)
    start = ns.version
    ns.append(batch(1))
    ns.update({"seq": "seq + 10"}, where="id = 101")
    updated_at = ns.version
    message, out = stopped_stream(spark, root, tmp_path, start + 1)
    assert f"__manifest version {updated_at} of {root!r} deleted or updated 1 row(s)" in message
    assert "(operation 'update')" in message
    assert rows(out.all) == rows(batch(1))


def _snapshot(root: str, version: int) -> pd.DataFrame:
    return lp.open(root, version=version).to_arrow().to_pandas()


def _multiset_minus(a: pd.DataFrame, b: pd.DataFrame) -> list[tuple]:
    """Rows of ``a`` not in ``b``, counting duplicates (pandas only)."""
    left = pd.Series(rows(a)).value_counts()
    right = pd.Series(rows(b)).value_counts()
    diff = left.sub(right, fill_value=0)
    return sorted(r for r, n in diff.items() for _ in range(int(max(n, 0))))


def test_read_change_feed_delivers_inserts_and_deletes_of_every_version(spark, tmp_path):
    root, ns = new_namespace(tmp_path)
    first = ns.version
    ns.append(batch(1))
    ns.append(batch(2))
    ns.update({"seq": "seq + 10"}, where="id = 201")
    updated = ns.version  # its images are paired by the columns it left alone (CHANGES.md §8)
    ns.delete("k = 'b'")
    ns.overwrite(batch(3, keys="c"), dynamic=True)
    last = ns.version
    out = run_available_now(spark, root, tmp_path, readChangeFeed="true", startingVersion="0")
    got = out.all
    assert list(got.columns) == ["id", "k", "seq", *CHANGE_COLUMNS]
    assert list(got["_commit_version"]) == sorted(got["_commit_version"])
    expected = []
    for v in range(first + 1, last + 1):
        before, after = _snapshot(root, v - 1), _snapshot(root, v)
        added, removed = (
            ("update_postimage", "update_preimage") if v == updated else ("insert", "delete")
        )
        expected += [(v, added, *r) for r in _multiset_minus(after, before)]
        expected += [(v, removed, *r) for r in _multiset_minus(before, after)]
    columns = ["_commit_version", "_change_type", "id", "k", "seq"]
    feed = [
        (int(v), t, int(i), k, int(s))
        for v, t, i, k, s in got[columns].itertuples(index=False, name=None)
    ]
    assert sorted(feed) == sorted(expected)
    assert {"insert", "delete"} <= {t for _, t, *_ in feed}


def test_filter_streams_only_the_partitions_it_keeps(spark, tmp_path):
    root, ns = new_namespace(tmp_path)
    start = ns.version
    ns.append(batch(1))
    ns.delete("k = 'b'")  # outside the filter: does not stop this stream
    ns.append(batch(2))
    out = run_available_now(spark, root, tmp_path, filter="k = 'a'", startingVersion=str(start + 1))
    appended = pa.concat_tables([batch(1), batch(2)]).to_pandas()
    assert rows(out.all) == rows(appended[appended["k"] == "a"])


def test_max_versions_per_trigger_bounds_each_batch(spark, tmp_path):
    root, ns = new_namespace(tmp_path)
    start = ns.version
    for seq in range(1, 6):
        ns.append(batch(seq))
    out = run_available_now(
        spark, root, tmp_path, maxVersionsPerTrigger="2", startingVersion=str(start + 1)
    )
    assert [sorted(set(b["seq"])) for b in out.batches] == [[1, 2], [3, 4], [5]]
    assert rows(out.all) == rows(pa.concat_tables([batch(s) for s in range(1, 6)]))


def test_starting_version_starts_at_that_commit(spark, tmp_path):
    root, ns = new_namespace(tmp_path)
    ns.append(batch(1))
    ns.append(batch(2))
    second = ns.version
    ns.append(batch(3))
    out = run_available_now(spark, root, tmp_path, startingVersion=str(second))
    assert rows(out.all) == rows(pa.concat_tables([batch(2), batch(3)]))
    everything = run_available_now(spark, root, tmp_path, startingVersion="earliest")
    assert rows(everything.all) == rows(pa.concat_tables([batch(s) for s in (1, 2, 3)]))


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"startingVersion": "yesterday"}, "option 'startingVersion' must be"),
        ({"startingVersion": "99"}, "latest __manifest version of"),
        ({"maxVersionsPerTrigger": "0"}, "maxVersionsPerTrigger"),
        ({"readChangeFeed": "yes"}, "option 'readChangeFeed' must be true or false"),
    ],
)
def test_bad_stream_options_fail_with_a_message_naming_them(spark, tmp_path, options, needle):
    root, ns = new_namespace(tmp_path)
    ns.append(batch(1))
    before = sorted(p.name for p in Path(root).rglob("*"))
    with pytest.raises(Exception) as caught:
        run_available_now(spark, root, tmp_path, **options)
    assert needle in str(caught.value)
    assert sorted(p.name for p in Path(root).rglob("*")) == before  # nothing written


def test_a_batch_read_refuses_read_change_feed(spark, tmp_path):
    root, ns = new_namespace(tmp_path)
    ns.append(batch(1))
    df = spark.read.format("lance_partitioned").option("readChangeFeed", "true").load(root)
    with pytest.raises(Exception, match="is for spark.readStream"):
        df.collect()


def test_a_restarted_query_resumes_from_its_checkpoint(spark, tmp_path):
    root, ns = new_namespace(tmp_path)
    start = ns.version
    ns.append(batch(1))
    checkpoint = str(tmp_path / "checkpoint")
    first = run_available_now(spark, root, tmp_path, checkpoint, startingVersion=str(start + 1))
    ns.append(batch(2))
    # startingVersion applies to a new query only: the checkpoint says where to resume
    again = run_available_now(spark, root, tmp_path, checkpoint, startingVersion=str(start + 1))
    assert rows(first.all) == rows(batch(1))
    assert rows(again.all) == rows(batch(2))


def test_what_executors_receive_holds_no_lance_handle_and_reads_the_rows(tmp_path):
    """No Spark: the reader and a batch's partitions pickle without a Lance object (as
    PySpark ships them), and read back the appended rows in another reader."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from lance_partitioned.spark.stream_source import LancePartitionedStreamReader
    from lance_partitioned.spark.types import arrow_to_spark

    root, ns = new_namespace(tmp_path)
    start = ns.version
    ns.append(batch(1))
    ns.append(batch(2, keys="abcdefghij"))
    reader = LancePartitionedStreamReader({"path": root}, arrow_to_spark(SCHEMA))
    end = reader.latestOffset({"version": start}, ReadAllAvailable())
    assert end == {"version": ns.version}
    blob = pickle.dumps((reader, reader.partitions({"version": start}, end)))
    assert b"LanceDataset" not in blob and b"lance.dataset" not in blob
    shipped, partitions = pickle.loads(blob)
    got = pa.Table.from_batches([b for p in partitions for b in shipped.read(p)])
    assert rows(got) == rows(pa.concat_tables([batch(1), batch(2, keys="abcdefghij")]))
