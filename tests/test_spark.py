"""The Spark source and sink, end to end on one shared local session (``spark`` fixture)."""

from __future__ import annotations

import datetime as dt
import decimal
import os
import threading
import time

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS_SCHEMA, make_events

import lance_partitioned as lp

pyspark = pytest.importorskip("pyspark")

from lance.namespace import (  # noqa: E402
    DescribeTableRequest,
    DirectoryNamespace,
    ListNamespacesRequest,
    ListTablesRequest,
)
from pyspark.sql import Row  # noqa: E402
from pyspark.sql import datasource as sds  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    ArrayType,
    BinaryType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    TimeType,
)

from demo import pipeline  # noqa: E402
from lance_partitioned import spark as lps  # noqa: E402
from lance_partitioned.format.filters.render import to_sql  # noqa: E402
from lance_partitioned.spark.filters import FilterTranslator  # noqa: E402

FMT = "lance_partitioned"


def load(spark, root, **options):
    reader = spark.read.format(FMT)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load(str(root))


def by_id(rows):
    return sorted((r.asDict(recursive=True) for r in rows), key=lambda r: r["id"])


def sql_options(options: dict[str, str]) -> str:
    """``, `k` 'v', ...``: extra OPTIONS of a SQL view (``storage.<key>`` credentials)."""
    return "".join(f", `{k}` '{v}'" for k, v in options.items())


def listing(root) -> set[str]:
    """Every file and directory below ``root`` except ``__manifest`` internals."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.split(os.sep)[0] == "__manifest":
            continue
        out.update(os.path.join(rel, n) for n in dirnames + filenames)
    return out


def events_df(spark, table: pa.Table, partitions: int = 2):
    return spark.createDataFrame(
        table.to_pandas(),
        schema="id long, event_date date, country string, ts timestamp, amount double",
    ).repartition(partitions)


# -- TPC-H: correctness and pruning -------------------------------------------------


@pytest.fixture(scope="module")
def tpch_ns(spark, tpch_dir, tmp_path_factory):
    """lineitem by year/month(l_shipdate) and orders by bucket(16, o_orderkey), written by Spark."""
    base = tmp_path_factory.mktemp("tpch_ns")
    paths = {t: os.path.join(tpch_dir, f"{t}.parquet") for t in ("lineitem", "orders")}
    roots = {t: str(base / t) for t in paths}
    li = spark.read.parquet(paths["lineitem"])
    li = li.repartition(4, F.year("l_shipdate"), F.month("l_shipdate"))
    pipeline.write_namespace(li, roots["lineitem"], pipeline.LINEITEM_SPEC)
    pipeline.write_namespace(
        spark.read.parquet(paths["orders"]), roots["orders"], pipeline.ORDERS_SPEC
    )
    pipeline.create_parquet_views(spark, paths)
    return roots, paths


@pytest.mark.parametrize("name", list(pipeline.QUERIES))
def test_tpch_queries_match_spark_on_parquet(spark, tpch_ns, name):
    roots, _ = tpch_ns
    pipeline.create_views(spark, roots, suffix="_lp")  # fresh views, pushdown on
    got = spark.sql(pipeline.query(name, "lineitem_lp", "orders_lp")).collect()
    want = spark.sql(pipeline.query(name, "lineitem_parquet", "orders_parquet")).collect()
    assert got == want and len(got) > 0


def test_tpch_q6_without_pushdown_also_matches(spark, tpch_ns):
    roots, _ = tpch_ns
    pipeline.create_views(spark, roots, suffix="_plain", push_filters=False)
    got = spark.sql(pipeline.query("Q6", "lineitem_plain")).collect()
    assert got == spark.sql(pipeline.query("Q6", "lineitem_parquet")).collect()


def test_pushdown_is_on_by_default_shows_in_explain_and_prunes_partitions(spark, tpch_ns, tmp_path):
    roots, _ = tpch_ns
    log = str(tmp_path / "scans.jsonl")
    df = load(spark, roots["lineitem"], scanLog=log).where(  # no pushFilters option: on
        "l_shipdate >= date'1994-01-01' AND l_shipdate < date'1995-01-01' AND l_quantity < 24"
    )
    plan = spark._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "formatted")
    pushed = next(line for line in plan.splitlines() if line.startswith("PushedFilters:"))
    assert "GreaterThanOrEqual(l_shipdate,1994-01-01)" in pushed
    assert "LessThan(l_shipdate,1995-01-01)" in pushed
    assert "LessThan(l_quantity,24" in pushed
    n = df.count()
    entry = lps.read_scan_log(log)[-1]
    ns = lp.open(roots["lineitem"])
    total = len(ns.plan())
    in_1994 = [t for t in ns.plan() if t.partition_values.get("l_shipdate_year") == 1994]
    assert entry["partitions_total"] == total > 80
    assert entry["partitions_scanned"] == len(in_1994) == 12
    assert n == ns.count(
        "l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01' AND l_quantity < 24"
    )
    info = lps.plan_info(
        spark, roots["lineitem"], "l_shipdate >= '1994-01-01' AND l_shipdate < '1995-01-01'"
    )
    assert (info["partitions_scanned"], info["partitions_total"]) == (12, total)


def test_push_filters_false_leaves_every_filter_to_spark(spark, tpch_ns, tmp_path):
    roots, _ = tpch_ns
    log = str(tmp_path / "scans.jsonl")
    cond = "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'"
    df = load(spark, roots["lineitem"], pushFilters="false", scanLog=log).where(cond)
    plan = spark._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "formatted")
    assert "GreaterThanOrEqual(l_shipdate" not in plan
    assert df.count() == lp.open(roots["lineitem"]).count(cond.replace("DATE ", ""))
    entry = lps.read_scan_log(log)[-1]
    assert entry["partitions_scanned"] == entry["partitions_total"] > 80


def test_filter_option_prunes_and_survives_plan_reuse(spark, tpch_ns, tmp_path):
    roots, _ = tpch_ns
    log = str(tmp_path / "scans.jsonl")
    cond = "l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'"
    df = load(spark, roots["lineitem"], filter=cond, scanLog=log)
    want = lp.open(roots["lineitem"]).count(cond)
    assert df.where("l_shipmode = 'MAIL'").count() == lp.open(roots["lineitem"]).count(
        cond + " AND l_shipmode = 'MAIL'"
    )
    assert df.count() == want  # reuses the plan: still right, the filter belongs to the relation
    total = len(lp.open(roots["lineitem"]).plan())
    assert {(e["partitions_scanned"], e["partitions_total"]) for e in lps.read_scan_log(log)} == {
        (12, total)
    }


def test_default_reads_are_right_when_spark_reuses_a_plan(spark, tpch_ns):
    # PySpark 4.3 reuses a relation's last read plan for later queries without
    # pushable filters and for every scan of a self-join (see spark/datasource.py).
    roots, _ = tpch_ns
    ns = lp.open(roots["lineitem"])
    df = load(spark, roots["lineitem"])
    assert df.where("l_shipmode = 'MAIL'").count() == ns.count("l_shipmode = 'MAIL'")
    assert df.count() == ns.count()
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW li_reuse USING {FMT} OPTIONS (root '{roots['lineitem']}')"
    )
    got = spark.sql(
        "SELECT (SELECT count(*) FROM li_reuse WHERE l_shipmode = 'MAIL') AS a, "
        "(SELECT count(*) FROM li_reuse WHERE l_shipmode = 'SHIP' AND l_quantity < 10) AS b"
    ).collect()[0]
    assert (got.a, got.b) == (
        ns.count("l_shipmode = 'MAIL'"),
        ns.count("l_shipmode = 'SHIP' AND l_quantity < 10"),
    )


def _events_oracle(table: pa.Table, country: str, since: dt.date, min_amount: float | None):
    """Ids of ``table`` rows matching the test filter, computed with pyarrow.compute."""
    mask = pc.and_(
        pc.equal(table["country"], country), pc.greater_equal(table["event_date"], since)
    )
    if min_amount is not None:
        mask = pc.and_(mask, pc.greater(table["amount"], min_amount))
    return sorted(table.filter(mask)["id"].to_pylist())


@pytest.mark.parametrize(
    ("flt", "since", "min_amount"),
    [
        # 2025 leaves still need the date; 2026 leaves need only the amount
        ("country = 'US' AND event_date >= '2025-06-01' AND amount > 3", dt.date(2025, 6, 1), 3.0),
        # every selected leaf's partition values guarantee the whole filter
        ("country = 'US' AND event_date >= '2025-01-01'", dt.date(2025, 1, 1), None),
    ],
)
def test_spark_tasks_read_each_leaf_with_its_residual_filter(
    spark, tmp_path, flt, since, min_amount
):
    from lance_partitioned.spark.datasource import LancePartitionedDataSource

    source = make_events(300)
    ns = lp.create(str(tmp_path / "events"), EVENTS_SCHEMA, "year(event_date), country")
    ns.append(source)
    core = {t.object_id: t.filter_sql for t in ns.plan(flt)}
    assert core and all("country" not in (f or "") for f in core.values())
    if min_amount is None:
        assert set(core.values()) == {None}
    else:
        years = {t.object_id: t.partition_values["event_date_year"] for t in ns.plan(flt)}
        assert {years[o] for o, f in core.items() if "event_date" in f} == {2025}
        assert {years[o] for o, f in core.items() if "event_date" not in f} == {2026}
        assert all("amount" in f for f in core.values())

    # What the Spark source hands its tasks, planned as Spark plans it (driver side).
    ds = LancePartitionedDataSource({"path": ns.root, "filter": flt, "minPartitions": "4"})
    pieces = [p for part in ds.reader(ds.schema()).partitions() for p in part.task.pieces]
    assert {p.leaf.object_id: p.filter_sql for p in pieces} == core

    want = _events_oracle(source, "US", since, min_amount)
    assert want
    assert sorted(r.id for r in load(spark, ns.root, filter=flt).select("id").collect()) == want
    got = lps.read_arrow(spark, ns.root, columns=["id"], filter=flt).collect()
    assert sorted(r.id for r in got) == want
    assert sorted(ns.scan(flt, columns=["id"]).to_arrow()["id"].to_pylist()) == want


def test_namespace_written_by_spark_reads_in_core_and_pylance(spark, tpch_ns):
    roots, paths = tpch_ns
    orders = pa.Table.from_pandas(
        spark.read.parquet(paths["orders"]).toPandas(), preserve_index=False
    )
    core = lp.open(roots["orders"]).scan().to_arrow()
    assert core.num_rows == orders.num_rows
    assert sorted(core["o_orderkey"].to_pylist()) == sorted(orders["o_orderkey"].to_pylist())
    assert core.schema.field("o_totalprice").type == pa.decimal128(15, 2)
    dn = DirectoryNamespace(root=roots["orders"])
    assert dn.list_namespaces(ListNamespacesRequest(id=[])).namespaces == ["v1"]
    buckets = dn.list_namespaces(ListNamespacesRequest(id=["v1"])).namespaces
    assert len(buckets) == 16
    total = 0
    for b in buckets:
        assert dn.list_tables(ListTablesRequest(id=["v1", b])).tables == ["dataset"]
        desc = dn.describe_table(DescribeTableRequest(id=["v1", b, "dataset"]))
        total += lance.dataset(desc.location).count_rows()
    assert total == orders.num_rows


# -- filter translation --------------------------------------------------------------

SCHEMA = pa.schema(
    [
        pa.field("i", pa.int64()),
        pa.field("s", pa.string()),
        pa.field("f", pa.float64()),
        pa.field("u", pa.uint32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("st", pa.struct([pa.field("a", pa.int32())])),
        pa.field("d", pa.date32()),
    ]
)


@pytest.mark.parametrize(
    "flt, sql",
    [
        (sds.EqualTo(("i",), 5), "i = 5"),
        (sds.GreaterThanOrEqual(("i",), 5), "i >= 5"),
        (sds.In(("s",), ("a", "b")), "s IN ('a', 'b')"),
        (sds.IsNull(("st",)), "st IS NULL"),
        (sds.Not(sds.EqualTo(("s",), "x")), "NOT (s = 'x')"),
        (sds.EqualNullSafe(("s",), "x"), "s = 'x' AND s IS NOT NULL"),
        (sds.EqualNullSafe(("s",), None), "s IS NULL"),
        (sds.StringStartsWith(("s",), "a%_\\"), "s LIKE 'a\\%\\_\\\\%'"),
        (sds.EqualTo(("f",), 1.5), "f = 1.5e0"),
        (
            sds.LessThan(("ts",), dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)),
            "ts < arrow_cast('2024-01-01T00:00:00Z', 'Timestamp(Microsecond, Some(\"UTC\"))')",
        ),
    ],
)
def test_exact_filters_are_accepted(flt, sql):
    t = FilterTranslator(SCHEMA).translate([flt])
    assert t.rejected == [] and to_sql(t.expr) == sql


@pytest.mark.parametrize(
    "flt",
    [
        sds.GreaterThan(("f",), 1.5),  # IEEE total order vs Spark's NaN/-0.0 rules
        sds.EqualTo(("f",), 0.0),
        sds.EqualTo(("u",), 5),  # uint32 read as long: implicit conversion
        sds.EqualTo(("st", "a"), 1),  # nested
        sds.EqualTo(("missing",), 1),
        sds.StringEndsWith(("s",), "x"),
        sds.In(("s",), ()),
        sds.In(("s",), ("a", None)),
        sds.EqualTo(("ts",), dt.datetime(2024, 1, 1)),  # naive literal for an instant column
        # before the Gregorian calendar: PySpark hands these over shifted (Julian)
        sds.EqualTo(("d",), dt.date(1582, 10, 15)),
        sds.LessThan(("ts",), dt.datetime(1582, 10, 15, 12, tzinfo=dt.timezone.utc)),
        sds.In(("d",), (dt.date(1582, 10, 15), dt.date(2020, 1, 1))),
    ],
)
def test_doubtful_filters_are_left_to_spark(flt):
    t = FilterTranslator(SCHEMA).translate([flt])
    assert t.accepted == [] and t.rejected == [flt] and t.expr is None


@pytest.fixture(scope="module")
def tricky_ns(spark, tmp_path_factory):
    """Values that make filter semantics differ between engines if translated carelessly."""
    root = str(tmp_path_factory.mktemp("tricky") / "ns")
    strings = ["a%b", "axb", "a_c", "abc", "a\\z", "a\\", "x", "Zürich", None, ""]
    n = 40
    rows = []
    for i in range(n):
        rows.append(
            {
                "id": i,
                "s": strings[i % len(strings)],
                "ts": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(days=7 * i),
                "ntz": dt.datetime(2024, 1, 1) + dt.timedelta(days=5 * i),
                "dec": decimal.Decimal(i) / 4 if i % 7 else None,
                "b": bytes([i % 3, 1]),
                "f": [1.5, -0.0, 0.0, float("nan"), None][i % 5],
                "flag": None if i % 6 == 0 else i % 2 == 0,
            }
        )
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("s", pa.string()),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
            pa.field("ntz", pa.timestamp("us")),
            pa.field("dec", pa.decimal128(10, 2)),
            pa.field("b", pa.binary()),
            pa.field("f", pa.float64()),
            pa.field("flag", pa.bool_()),
        ]
    )
    ns = lp.create(root, schema, "s, bucket(3, id)")
    ns.append(pa.Table.from_pylist(rows, schema=schema))
    return root


# (predicate, text the pushed Lance filter must contain, text it must not contain)
TRICKY = [
    ("startswith(s, 'a%')", "s LIKE 'a\\%%'", None),
    ("startswith(s, 'a_')", "s LIKE 'a\\_%'", None),
    ("startswith(s, 'a\\\\')", "s LIKE 'a\\\\%'", None),  # SQL 'a\\' is the two characters a\
    ("startswith(s, '')", "s LIKE '%'", None),
    ("s = 'a%b'", "s = 'a%b'", None),
    ("s IN ('x', 'Zürich', '')", "s IN (", None),
    ("NOT (s = 'x')", "NOT (s = 'x')", None),
    ("s <=> 'x'", "s = 'x' AND s IS NOT NULL", None),
    ("NOT (s <=> 'x')", "NOT (s = 'x' AND s IS NOT NULL)", None),
    ("s IS NULL", "s IS NULL", None),
    ("ts >= timestamp'2024-03-01 00:00:00'", "ts >= arrow_cast('2024-03-01T00:00:00Z'", None),
    ("ntz < timestamp_ntz'2024-02-01 00:00:00'", "ntz < TIMESTAMP '2024-02-01 00:00:00'", None),
    ("dec > 3.25", "dec > ", None),
    ("b = X'0101'", "b = X'0101'", None),
    ("flag", "flag = TRUE", None),
    ("NOT flag", "NOT (flag = TRUE)", None),
    ("f = 1.5", "f = 1.5e0", None),
    ("f > 0.0", "f IS NOT NULL", "f >"),  # range on a double: left to Spark
    ("f = 0.0", "f IS NOT NULL", "f ="),  # -0.0 = 0.0 in Spark only
]


@pytest.mark.parametrize("pred, contains, excludes", TRICKY, ids=[p for p, _, _ in TRICKY])
def test_pushed_filters_match_spark_semantics(spark, tricky_ns, tmp_path, pred, contains, excludes):
    log = str(tmp_path / "scans.jsonl")
    # Baseline: Spark evaluates every filter itself. (Not a cached DataFrame: Spark's
    # in-memory cache answered ``f > 0.0`` without the NaN rows, which Spark's own
    # NaN ordering includes.)
    baseline = load(spark, tricky_ns, minPartitions=1).where(pred)
    got = load(spark, tricky_ns, pushFilters="true", scanLog=log, minPartitions=1).where(pred)
    assert sorted(r.id for r in got.collect()) == sorted(r.id for r in baseline.collect())
    pushed = lps.read_scan_log(log)[-1]["filter"] or ""
    assert contains in pushed, pushed
    assert excludes is None or excludes not in pushed, pushed


def test_pushed_filters_at_the_ends_of_the_calendar(spark, tmp_path):
    """PySpark converts a date or timestamp literal in 1582-10-05..14 through the
    Julian calendar before handing it over (``DATE'1582-10-10'`` arrives as
    1582-10-15): pushed, ``=`` lost its row and ``<`` gained 1582-10-13. And
    ``ts >= TIMESTAMP'9999-12-31 00:00:00'`` failed the query. Spark on the source
    DataFrame is the oracle."""
    src = spark.sql(
        """SELECT * FROM VALUES
        (1, TIMESTAMP'1582-10-10 12:00:00', DATE'1582-10-10'),
        (2, TIMESTAMP'1582-10-20 12:00:00', DATE'1582-10-20'),
        (3, TIMESTAMP'9999-12-31 00:00:00', DATE'9999-12-31'),
        (4, TIMESTAMP'2020-01-01 00:00:00', DATE'2020-01-01'),
        (5, TIMESTAMP'1582-10-13 12:00:00', DATE'1582-10-13') AS t(id, ts, d)"""
    ).localCheckpoint()
    root = str(tmp_path / "ns")
    src.write.format(FMT).option("spec", "year(ts)").mode("append").save(root)
    for pred in [
        "ts = TIMESTAMP'1582-10-10 12:00:00'",
        "d = DATE'1582-10-10'",
        "d IN (DATE'1582-10-10', DATE'2020-01-01')",
        "ts < TIMESTAMP'1582-10-12 00:00:00'",
        "d < DATE'1582-10-12'",
        "d >= DATE'1582-10-20'",
        "ts >= TIMESTAMP'9999-12-31 00:00:00'",
        "ts < TIMESTAMP'9999-12-31 00:00:00'",
    ]:
        want = sorted(r.id for r in src.where(pred).collect())
        got = load(spark, root, pushFilters="true", minPartitions=1).where(pred)
        assert sorted(r.id for r in got.collect()) == want, pred


# -- writes: atomicity, bad input, types, modes --------------------------------------


@pytest.fixture
def events_ns(tmp_path):
    ns = lp.create(str(tmp_path / "events"), EVENTS_SCHEMA, "year(event_date), country")
    ns.append(make_events(300))
    return ns


def test_small_scans_take_few_tasks_unless_min_partitions_is_given(spark, events_ns):
    # a Python-source task costs more than Lance takes to read 500k rows
    assert len(events_ns.plan()) > 4
    assert load(spark, events_ns.root).rdd.getNumPartitions() == 1
    spread = load(spark, events_ns.root, minPartitions="4")
    assert spread.rdd.getNumPartitions() >= 4  # about 4: whole leaves are packed greedily
    assert spread.count() == events_ns.count()


def _state(ns):
    fresh = lp.open(ns.root)
    return fresh.version, fresh.count(), listing(ns.root)


def _store_state(store, root):
    """Version, rows and every file outside ``__manifest`` (names, sizes, stamps)."""
    fresh = lp.open(root, storage_options=store.options())
    files = {k: v for k, v in store.tree(root).items() if not k.startswith("__manifest")}
    return fresh.version, fresh.count(), files, listing(root) if not store.is_s3 else None


def test_task_failure_aborts_and_leaves_nothing(spark, store, tmp_path):
    """abort() removes every file of the tasks it heard of, on local disk and on S3."""
    root = store.root("events")
    ns = lp.create(root, EVENTS_SCHEMA, "year(event_date), country", store.options())
    ns.append(make_events(300))
    before = _store_state(store, root)
    new = make_events(400, start_id=1000).to_pandas()
    new.loc[:49, "country"] = "NEW"  # new partitions, written by the task that succeeds
    df = spark.createDataFrame(
        new, schema="id long, event_date date, country string, ts timestamp, amount double"
    )
    df = df.coalesce(1).repartitionByRange(2, "id")  # ids 1000-1199 | 1200-1399
    waiting, go = str(tmp_path / "waiting"), str(tmp_path / "fail-now")

    @F.udf("long")
    def boom(x):
        if x == 1399:
            import os
            import time

            open(waiting, "w").close()
            deadline = time.monotonic() + 300
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.05)
            raise ValueError("injected failure for id 1399")
        return x

    tracker = spark.sparkContext.statusTracker()

    def release_when_first_task_reported():
        # Fail the second task only once the driver has the first task's result (and
        # so its commit message): the scheduler handles that before the failure. The
        # write stage is the newest active one once the failing task is waiting.
        deadline = time.monotonic() + 300
        while not os.path.exists(waiting) and time.monotonic() < deadline:
            time.sleep(0.05)
        stage = max(tracker.getActiveStageIds(), default=None)
        while stage is not None and time.monotonic() < deadline:
            info = tracker.getStageInfo(stage)
            if info is None or info.numCompletedTasks >= 1:
                break
            time.sleep(0.05)
        open(go, "w").close()

    releaser = threading.Thread(target=release_when_first_task_reported, daemon=True)
    releaser.start()
    writer = df.withColumn("id", boom("id")).write.format(FMT).mode("append")
    with pytest.raises(Exception, match="injected failure"):
        writer.options(**store.spark_options()).save(root)
    releaser.join(timeout=60)
    assert _store_state(store, root) == before


@pytest.mark.parametrize(
    "select, column, message",
    [
        ("event_date, country, ts, amount", "id", "missing the non-nullable column 'id'"),
        ("id, event_date, country, ts, 'abc' AS amount", "amount", "column 'amount'"),
        (
            "CAST(IF(id = 5007, NULL, id) AS BIGINT) AS id, event_date, country, ts, amount",
            "id",
            "column 'id' is not nullable",
        ),
        ("id, event_date, country, ts, amount, 1 AS extra", "extra", "'extra'"),
        # Spark reads the wall clock in the session zone; naive Arrow values read as UTC
        (
            "id, event_date, country, CAST(ts AS TIMESTAMP_NTZ) AS ts, amount",
            "ts",
            "column 'ts' is TIMESTAMP_NTZ",
        ),
    ],
    ids=["missing", "impossible-cast", "null-in-non-null", "extra", "ntz-into-instants"],
)
def test_bad_input_fails_naming_the_column_and_changes_nothing(
    spark, events_ns, select, column, message
):
    # One task: a second, successful task could finish just after the failure and
    # its commit message never reach abort (its files are orphans for vacuum).
    before = _state(events_ns)
    events_df(spark, make_events(50, start_id=5000), partitions=1).createOrReplaceTempView(
        "bad_src"
    )
    df = spark.sql(f"SELECT {select} FROM bad_src")
    with pytest.raises(Exception, match=message):
        df.write.format(FMT).mode("append").save(events_ns.root)
    assert _state(events_ns) == before


def test_types_round_trip(spark, tmp_path):
    schema = StructType(
        [
            StructField("id", LongType(), False),
            StructField("ts", TimestampType()),
            StructField("ntz", TimestampNTZType()),
            StructField("dec", DecimalType(20, 4)),
            StructField("d", DateType()),
            StructField("bin", BinaryType()),
            StructField("tags", ArrayType(StringType())),
            StructField(
                "st", StructType([StructField("a", IntegerType()), StructField("b", StringType())])
            ),
            StructField("m", MapType(StringType(), LongType())),
            StructField("t", TimeType(6)),
            StructField("iv", DayTimeIntervalType()),
        ]
    )
    rows = [
        Row(
            id=i,
            ts=dt.datetime(2024, 3, 10, 1, 2, 3, 456789, tzinfo=dt.timezone.utc)
            + dt.timedelta(days=40 * i),
            ntz=dt.datetime(2024, 3, 10, 1, 2, 3) + dt.timedelta(hours=i),
            dec=decimal.Decimal("12345678.1234") * i,
            d=dt.date(2023, 12, 31) + dt.timedelta(days=i),
            bin=bytes([i, 0, 255]),
            tags=["x", None, str(i)],
            st=Row(a=i, b=None),
            m={"k": i},
            t=dt.time(23, 59, 58, 999999),
            iv=dt.timedelta(days=i, microseconds=7),
        )
        for i in range(6)
    ] + [
        Row(
            id=99,
            ts=None,
            ntz=None,
            dec=None,
            d=None,
            bin=None,
            tags=None,
            st=None,
            m=None,
            t=None,
            iv=None,
        )
    ]
    df = spark.createDataFrame(rows, schema)
    root = str(tmp_path / "types")
    df.write.format(FMT).option("spec", "month(ts), bucket(2, id)").mode("append").save(root)
    ns = lp.open(root)
    types = {f.name: f.type for f in ns.schema.arrow}
    assert types["ts"] == pa.timestamp("us", tz="UTC")
    assert types["ntz"] == pa.timestamp("us")
    assert types["dec"] == pa.decimal128(20, 4)
    assert types["d"] == pa.date32() and types["bin"] == pa.binary()
    assert types["t"] == pa.time64("us") and types["iv"] == pa.duration("us")
    assert (
        pa.types.is_list(types["tags"])
        and pa.types.is_struct(types["st"])
        and pa.types.is_map(types["m"])
    )
    back = load(spark, root)
    assert back.schema == df.schema
    assert by_id(back.collect()) == by_id(df.collect())


def test_unsupported_types_fail_naming_the_column(spark, tmp_path):
    root = str(tmp_path / "u64")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("big", pa.uint64())])
    lp.create(root, schema).append(pa.table({"id": [1, 2], "big": [1, 2**64 - 1]}, schema=schema))
    with pytest.raises(Exception, match="column 'big' has type uint64"):
        load(spark, root)
    assert load(spark, root, columns="id").count() == 2
    target = str(tmp_path / "ym")
    with pytest.raises(Exception, match="column 'ym'"):
        spark.sql("SELECT 1L AS id, INTERVAL '1' YEAR AS ym").write.format(FMT).mode("append").save(
            target
        )
    assert not os.path.exists(os.path.join(target, "__manifest"))


def test_write_modes(spark, store):
    """The sink's modes; on S3 the credentials reach Spark only as ``storage.<key>`` options
    (Spark's Python workers do not see the test's AWS environment)."""
    root = store.root("modes")
    spec = "year(event_date), country"
    first, second = make_events(100), make_events(60, start_id=500)

    def writer(table):
        return events_df(spark, table).write.format(FMT).options(**store.spark_options())

    writer(first).option("spec", spec).mode("append").save(root)
    writer(second).mode("append").save(root)
    assert lp.open(root).count() == 160
    # static overwrite: the namespace becomes exactly the new data
    writer(second).mode("overwrite").save(root)
    ns = lp.open(root)
    assert sorted(ns.to_arrow()["id"].to_pylist()) == second["id"].to_pylist()
    # dynamic overwrite: only the partitions the data touches are replaced
    writer(first).mode("append").save(root)
    us = first.filter(pa.compute.equal(first["country"], "US"))
    us_new = us.set_column(
        0, "id", pa.array([i + 10_000 for i in us["id"].to_pylist()], pa.int64())
    )
    writer(us_new).mode("overwrite").option("partitionOverwriteMode", "dynamic").save(root)
    got = lp.open(root).to_arrow()
    expected = [
        i
        for i, c in zip(
            second["id"].to_pylist() + first["id"].to_pylist(),
            second["country"].to_pylist() + first["country"].to_pylist(),
            strict=True,
        )
        if c != "US"
    ]
    assert sorted(got["id"].to_pylist()) == sorted(expected + us_new["id"].to_pylist())
    # the session conf, honoured through lps.write
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        lps.write(events_df(spark, us), root, mode="overwrite", **store.spark_options())
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    assert sorted(lp.open(root).to_arrow()["id"].to_pylist()) == sorted(
        expected + us["id"].to_pylist()
    )


def test_sql_insert_into_and_overwrite(spark, events_ns):
    root = events_ns.root
    events_df(spark, make_events(40, start_id=7000)).createOrReplaceTempView("src_sql")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW ev USING {FMT} OPTIONS (root '{root}')")
    spark.sql("INSERT INTO ev SELECT * FROM src_sql")
    assert lp.open(root).count() == 340
    spark.sql("INSERT OVERWRITE ev SELECT * FROM src_sql WHERE country = 'FR'")
    assert sorted(set(lp.open(root).to_arrow()["country"].to_pylist())) == ["FR"]
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY VIEW ev_dyn USING {FMT} OPTIONS (root '{root}', partitionOverwriteMode 'dynamic')"
    )
    spark.sql("INSERT INTO ev_dyn SELECT * FROM src_sql WHERE country = 'US'")
    spark.sql("INSERT OVERWRITE ev_dyn SELECT * FROM src_sql WHERE country = 'US' AND id % 2 = 0")
    got = lp.open(root).to_arrow().to_pylist()
    assert {r["country"] for r in got} == {"FR", "US"}
    assert all(r["id"] % 2 == 0 for r in got if r["country"] == "US")
    # a fresh view reads the latest version
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW ev USING {FMT} OPTIONS (root '{root}')")
    assert spark.sql("SELECT count(*) FROM ev").collect()[0][0] == len(got)


def test_sql_view_sees_its_own_writes(spark, store):
    # issue 10 item 16, the exact sequence: PySpark 4.3 caches a view's read plan,
    # so after these writes the view kept counting 200.
    root = store.root("li")
    lp.create(root, EVENTS_SCHEMA, "year(event_date), country").append(make_events(200))
    opts = sql_options(store.spark_options())
    spark.sql(f"CREATE TEMPORARY VIEW li USING {FMT} OPTIONS (root '{root}'{opts})")
    try:
        assert spark.sql("SELECT count(*) FROM li").collect()[0][0] == 200
        spark.sql("INSERT INTO li SELECT * FROM li")
        assert lp.open(root).count() == 400
        assert spark.sql("SELECT count(*) FROM li").collect()[0][0] == 400
        spark.sql("INSERT OVERWRITE li SELECT * FROM li WHERE id < 5")
        assert lp.open(root).count() == 10
        assert spark.sql("SELECT count(*) FROM li").collect()[0][0] == 10
        assert spark.table("li").count() == 10
        # a write made outside Spark is seen after lps.refresh
        lp.open(root).append(make_events(3, start_id=500))
        assert lps.refresh(spark) >= 1  # li, and any other view of the session
        assert spark.sql("SELECT count(*) FROM li").collect()[0][0] == 13
    finally:
        spark.catalog.dropTempView("li")


def test_read_arrow_version_and_columns(spark, events_ns):
    root = events_ns.root
    old = lp.open(root)
    lp.open(root).append(make_events(10, start_id=9000))
    df = lps.read_arrow(
        spark, root, columns=["id", "country"], filter="country = 'FR' AND id >= 100"
    )
    assert df.columns == ["id", "country"]
    assert sorted(r.id for r in df.collect()) == sorted(
        lp.open(root).to_arrow("country = 'FR' AND id >= 100")["id"].to_pylist()
    )
    assert load(spark, root, version=old.version).count() == old.count()
    assert load(spark, root, columns="country,id").columns == ["country", "id"]
    assert lps.read_arrow(spark, root, filter="country = 'nowhere'").count() == 0
    assert load(spark, root, filter="country = 'nowhere'").count() == 0


def test_evolution_round_trip_through_spark(spark, tmp_path):
    """Spec and schema evolve in Python; Spark keeps writing and reading across versions."""
    root = str(tmp_path / "evolving")
    first = make_events(80)
    events_df(spark, first).write.format(FMT).option("spec", "event_date").mode("append").save(root)
    ns = lp.open(root)
    ns.evolve_spec("year(event_date), country")
    ns.add_column("score", pa.float64())
    ns.rename_column("country", "nation")
    # Spark sees the new schema and writes under spec v2
    second = spark.createDataFrame(
        [(1000 + i, dt.date(2026, 1, 1 + i), "US", None, 1.0, float(i)) for i in range(5)],
        schema="id long, event_date date, nation string, ts timestamp, amount double, score double",
    )
    second.write.format(FMT).mode("append").save(root)
    df = load(spark, root)
    assert df.columns == ["id", "event_date", "nation", "ts", "amount", "score"]
    rows = by_id(df.collect())
    assert len(rows) == 85
    assert [r["score"] for r in rows if r["id"] >= 1000] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert all(r["score"] is None for r in rows if r["id"] < 1000)
    assert {r["nation"] for r in rows if r["id"] < 1000} == set(first["country"].to_pylist())
    # pruning spans both versions, each by its own spec
    flt = "nation = 'US' AND event_date = '2026-01-02'"
    info = lps.plan_info(spark, root, flt)
    expected = lp.open(root).plan(flt)
    assert info["partitions_scanned"] == len(expected) < info["partitions_total"]
    assert {t.spec_id for t in expected} >= {2}
    got = load(spark, root, filter="nation = 'US' AND event_date = '2026-01-02'").collect()
    assert [r["id"] for r in got] == [1001]
    assert {t.spec_id for t in lp.open(root).plan()} == {1, 2}
