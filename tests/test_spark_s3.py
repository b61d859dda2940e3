"""The Spark source on S3 (moto, 127.0.0.1) with credentials as ``storage.<key>`` options only:
pruning by pushed filters, and the secret key never shown.

The sink's modes, its abort cleanup and ``INSERT`` through SQL views run on both
stores through the ``store`` fixture (``test_spark.py``), the storage partitioned
join in ``test_spj.py``; a standalone cluster on S3 in ``test_spark_cluster.py``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import logging

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS_SCHEMA, make_events
from s3_support import SECRET_KEY

import lance_partitioned as lp

pytest.importorskip("pyspark")

from lance_partitioned import spark as lps  # noqa: E402

FMT = "lance_partitioned"
AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN")


def test_spark_workers_see_no_aws_environment(spark):
    """The premise of the Spark S3 tests: Spark's Python workers get credentials from the
    ``storage.<key>`` options alone, never from an environment the test process set."""
    import os

    seen = spark.range(2).rdd.map(lambda _: [k for k in AWS_ENV if os.environ.get(k)]).collect()
    assert seen == [[], []]


def test_pushed_filters_prune_on_s3_and_the_secret_never_shows(
    spark, s3_server, tmp_path, capsys, caplog
):
    opts = s3_server.options()
    root = f"s3://{s3_server.new_bucket()}/events"
    events = make_events(300)
    ns = lp.create(root, EVENTS_SCHEMA, "year(event_date), country", storage_options=opts)
    ns.append(events)
    log = str(tmp_path / "scans.jsonl")
    shown: list[str] = []
    errors: list[str] = []
    with caplog.at_level(logging.DEBUG):
        reader = spark.read.format(FMT).options(**s3_server.spark_options())
        df = (
            reader.option("pushFilters", "true")
            .option("scanLog", log)
            .load(root)
            .where("country = 'US' AND event_date >= date'2026-01-01'")
        )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            df.explain(True)
        shown += [out.getvalue(), df._jdf.queryExecution().toString()]
        shown.append(spark._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "formatted"))
        got = sorted(r.id for r in df.select("id").collect())
        # the oracle: pyarrow.compute on the input rows
        mask = pc.and_(
            pc.equal(events["country"], "US"),
            pc.greater_equal(events["event_date"], pa.scalar(dt.date(2026, 1, 1))),
        )
        assert got == sorted(events.filter(mask)["id"].to_pylist()) and got
        entry = lps.read_scan_log(log)[-1]
        assert 0 < entry["partitions_scanned"] < entry["partitions_total"]
        with open(log, encoding="utf-8") as fh:
            shown.append(fh.read())
        # a SQL view carrying the secret in its OPTIONS, and its plans
        keys = "".join(f", `{k}` '{v}'" for k, v in s3_server.spark_options().items())
        created = spark.sql(
            f"CREATE OR REPLACE TEMPORARY VIEW ev_s3 USING {FMT} OPTIONS (root '{root}'{keys})"
        )
        shown.append(created._jdf.queryExecution().toString())
        shown.append(spark.sql("EXPLAIN EXTENDED SELECT * FROM ev_s3").collect()[0][0])
        assert spark.sql("SELECT count(*) FROM ev_s3").collect()[0][0] == 300
        # exception messages: a missing root, a write Spark rejects, a bad option
        for fail in (
            lambda: reader.load(f"{root}-missing").count(),
            lambda: spark.sql("INSERT INTO ev_s3 SELECT id FROM ev_s3").collect(),
            lambda: reader.option("version", "no-such-tag").load(root).count(),
        ):
            with pytest.raises(Exception) as info:
                fail()
            errors.append(str(info.value))
    spark.catalog.dropTempView("ev_s3")
    shown += [caplog.text, *capsys.readouterr(), *errors]
    for text in shown:
        assert SECRET_KEY not in text
    # the errors were the ones meant
    assert "NotAPartitionedNamespace" in errors[0] and "no-such-tag" in errors[2]
