"""The SQL surface of docs/SPARK.md ("SQL statements"): every statement of its table runs here.

A statement that works is checked against the same statement on a Parquet table of the
same rows (Spark's own answer); a statement that cannot work is checked for the
documented error, and for leaving the namespace unchanged. Catalog tables live in
Spark's in-memory session catalog of the shared test session: each test uses its own
table names and drops them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pytest
from conftest import tree_digest

import lance_partitioned as lp

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FMT = "lance_partitioned"
ROWS = "VALUES (1, 'a', 9, TIMESTAMP'2024-01-05 10:00:00'), (2, 'b', 8, TIMESTAMP'2024-02-07 11:00:00'), (3, 'c', 9, TIMESTAMP'2024-02-09 12:00:00')"
COLUMNS = "id BIGINT, s STRING, c INT, ts TIMESTAMP"


@pytest.fixture
def sql(spark) -> Iterator:
    """``spark.sql`` that skips without the extension's provider, and drops the tables a
    test created (names from ``sql.name()``)."""
    from lance_partitioned.spark.extension import PROVIDER_CLASS, loadable

    if not loadable(spark, PROVIDER_CLASS):
        pytest.skip("the lance_partitioned Spark extension is not on this session's class path")
    names: list[str] = []

    def run(text: str):
        return spark.sql(text)

    def name(prefix: str = "t") -> str:
        names.append(f"{prefix}_{uuid.uuid4().hex[:8]}")
        return names[-1]

    run.name = name
    yield run
    for n in names:
        spark.sql(f"DROP TABLE IF EXISTS {n}")
        spark.sql(f"DROP VIEW IF EXISTS {n}")


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def parquet_twin(sql, tmp_path, partitioned_by: str = "") -> str:
    """A Parquet catalog table with ROWS (Spark's answer for the same statements)."""
    name = sql.name("pq")
    part = f"PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
    sql(f"CREATE TABLE {name} ({COLUMNS}) USING parquet {part} LOCATION '{tmp_path / name}'")
    sql(f"INSERT INTO {name} (id, s, c, ts) {ROWS}")
    return name


def lance_table(sql, root, partitioned_by: str = "c", how: str = "location") -> str:
    name = sql.name()
    part = f"PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
    where = f"LOCATION '{root}'" if how == "location" else f"OPTIONS (root '{root}')"
    sql(f"CREATE TABLE {name} ({COLUMNS}) USING {FMT} {part} {where}")
    sql(f"INSERT INTO {name} (id, s, c, ts) {ROWS}")
    return name


# -- catalog tables: statements that work -------------------------------------------------


def test_create_table_location_partitioned_by_column_then_insert_and_select(sql, tmp_path):
    root = str(tmp_path / "ns")
    t = lance_table(sql, root, "c")
    pq = parquet_twin(sql, tmp_path, "c")
    assert rows(sql(f"SELECT id, s, c, ts FROM {t}")) == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))
    ns = lp.open(root)
    assert ns.spec.describe(ns.schema) == "c"
    assert ns.count() == 3


def test_create_table_options_root_partitioned_by_transforms(sql, tmp_path):
    """Spark's months(ts) is seed 000's year(ts), month(ts); bucket and truncate carry over."""
    root = str(tmp_path / "ns")
    t = lance_table(sql, root, "months(ts), bucket(4, id), truncate(2, s)", how="options")
    pq = parquet_twin(sql, tmp_path)
    assert rows(sql(f"SELECT * FROM {t}")) == rows(sql(f"SELECT * FROM {pq}"))
    ns = lp.open(root)
    assert ns.spec.describe(ns.schema) == (
        "year(ts) AS ts_year, month(ts) AS ts_month, bucket(4, id) AS id_bucket, "
        "truncate(2, s) AS s_trunc"
    )


@pytest.mark.parametrize(
    "spark_term, ours",
    [
        ("years(ts)", "year(ts) AS ts_year"),
        ("days(ts)", "year(ts) AS ts_year, month(ts) AS ts_month, day(ts) AS ts_day"),
        (
            "hours(ts)",
            "year(ts) AS ts_year, month(ts) AS ts_month, day(ts) AS ts_day, hour(ts) AS ts_hour",
        ),
    ],
)
def test_create_table_time_transforms_map_to_calendar_fields(sql, tmp_path, spark_term, ours):
    root = str(tmp_path / "ns")
    lance_table(sql, root, spark_term)
    ns = lp.open(root)
    assert ns.spec.describe(ns.schema) == ours


def test_create_table_as_select(sql, tmp_path):
    t, pq = sql.name(), sql.name("pq")
    query = f"SELECT * FROM {ROWS} AS v(id, s, c, ts)"
    sql(f"CREATE TABLE {t} USING {FMT} PARTITIONED BY (c) LOCATION '{tmp_path / t}' AS {query}")
    sql(f"CREATE TABLE {pq} USING parquet PARTITIONED BY (c) LOCATION '{tmp_path / pq}' AS {query}")
    assert rows(sql(f"SELECT id, s, c, ts FROM {t}")) == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))
    ns = lp.open(str(tmp_path / t))
    assert ns.spec.describe(ns.schema) == "c"


def test_insert_overwrite_replaces_everything(sql, tmp_path):
    t = lance_table(sql, str(tmp_path / "ns"))
    pq = parquet_twin(sql, tmp_path, "c")
    for name in (t, pq):
        sql(f"INSERT OVERWRITE {name} (id, s, c, ts) SELECT 7, 'z', 9, TIMESTAMP'2024-03-01'")
    assert rows(sql(f"SELECT id, s, c, ts FROM {t}")) == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))


@pytest.mark.parametrize("partition_clause", ["", "PARTITION (c = 9)"])
def test_insert_overwrite_dynamic_replaces_only_touched_partitions(
    spark, sql, tmp_path, partition_clause
):
    t = lance_table(sql, str(tmp_path / "ns"))
    pq = parquet_twin(sql, tmp_path, "c")
    # the PARTITION clause supplies c, the query the other columns
    cols, values = (
        ("(id, s, ts)", "7, 'z', TIMESTAMP'2024-03-01'")
        if partition_clause
        else ("(id, s, c, ts)", "7, 'z', 9, TIMESTAMP'2024-03-01'")
    )
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        for name in (t, pq):
            sql(f"INSERT OVERWRITE {name} {partition_clause} {cols} SELECT {values}")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    got = rows(sql(f"SELECT id, s, c, ts FROM {t}"))
    assert got == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))
    assert (2, "b", 8) in [g[:3] for g in got]  # the partition c = 8 stayed


def test_view_with_dynamic_overwrite_option(sql, tmp_path):
    root = str(tmp_path / "ns")
    lance_table(sql, root)
    pq = parquet_twin(sql, tmp_path, "c")
    v = sql.name("v")
    sql(
        f"CREATE TEMPORARY VIEW {v} USING {FMT} OPTIONS (root '{root}', partitionOverwriteMode 'dynamic')"
    )
    sql(f"INSERT OVERWRITE {v} SELECT 7, 'z', 9, TIMESTAMP'2024-03-01'")
    sql("SET spark.sql.sources.partitionOverwriteMode=dynamic")
    try:
        sql(f"INSERT OVERWRITE {pq} (id, s, c, ts) SELECT 7, 'z', 9, TIMESTAMP'2024-03-01'")
    finally:
        sql("RESET spark.sql.sources.partitionOverwriteMode")
    assert rows(sql(f"SELECT id, s, c, ts FROM {v}")) == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))


def test_save_as_table(spark, sql, tmp_path):
    t = sql.name()
    df = sql(f"SELECT * FROM {ROWS} AS v(id, s, c, ts)")
    df.write.format(FMT).option("path", str(tmp_path / t)).option("spec", "c").saveAsTable(t)
    assert rows(spark.table(t)) == rows(df)
    df.write.format(FMT).mode("append").saveAsTable(t)
    assert rows(spark.table(t)) == sorted(rows(df) * 2)


def test_truncate_table(sql, tmp_path):
    t = lance_table(sql, str(tmp_path / "ns"))
    sql(f"TRUNCATE TABLE {t}")
    assert rows(sql(f"SELECT * FROM {t}")) == []
    assert lp.open(str(tmp_path / "ns")).count() == 0


def test_drop_table_keeps_the_namespace(sql, tmp_path):
    root = str(tmp_path / "ns")
    t = lance_table(sql, root)
    before = tree_digest(root)
    sql(f"DROP TABLE {t}")
    assert tree_digest(root) == before
    assert lp.open(root).count() == 3


def test_managed_table_lives_in_its_database_directory(sql, tmp_path):
    """Neither LOCATION nor root: the namespace is the table's directory in its database
    (Spark's managed table), and DROP TABLE deletes it, as it does a Parquet table's."""
    db = sql.name("db")
    sql(f"CREATE DATABASE {db} LOCATION '{tmp_path / db}'")
    try:
        sql(f"CREATE TABLE {db}.t ({COLUMNS}) USING {FMT} OPTIONS (spec 'c')")
        sql(f"INSERT INTO {db}.t (id, s, c, ts) {ROWS}")
        assert lp.open(str(tmp_path / db / "t")).count() == 3
        assert len(rows(sql(f"SELECT * FROM {db}.t"))) == 3
        sql(f"DROP TABLE {db}.t")
        assert not os.path.exists(tmp_path / db / "t")
    finally:
        sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def test_create_table_over_an_existing_namespace_reads_its_schema(spark, sql, tmp_path):
    root = str(tmp_path / "ns")
    src = sql(f"SELECT * FROM {ROWS} AS v(id, s, c, ts)")
    src.write.format(FMT).option("spec", "c").mode("append").save(root)
    t = sql.name()
    sql(f"CREATE TABLE {t} USING {FMT} LOCATION '{root}'")
    assert rows(spark.table(t)) == rows(src)


def test_temporary_view_insert_and_select(spark, sql, tmp_path):
    root = str(tmp_path / "ns")
    src = sql(f"SELECT * FROM {ROWS} AS v(id, s, c, ts)")
    src.write.format(FMT).option("spec", "c").mode("append").save(root)
    v = sql.name("v")
    sql(f"CREATE TEMPORARY VIEW {v} USING {FMT} OPTIONS (root '{root}')")
    sql(f"INSERT INTO {v} SELECT 4, 'd', 8, TIMESTAMP'2024-04-01'")
    assert len(rows(spark.table(v))) == 4


# -- DataFrame writes: partitionBy and the spec of a new namespace -------------------------


def test_partition_by_creates_identity_fields(spark, tmp_path):
    root = str(tmp_path / "ns")
    df = spark.sql(f"SELECT * FROM {ROWS} AS v(id, s, c, ts)")
    df.write.format(FMT).partitionBy("c", "s").mode("append").save(root)
    ns = lp.open(root)
    assert ns.spec.describe(ns.schema) == "c, s"
    assert rows(spark.read.format(FMT).load(root).select("id", "s", "c", "ts")) == rows(df)
    df.write.format(FMT).partitionBy("c", "s").mode("append").save(root)  # the same: accepted
    assert lp.open(root).count() == 6


def test_partition_by_mismatch_names_both(spark, tmp_path):
    root = str(tmp_path / "ns")
    df = spark.sql(f"SELECT * FROM {ROWS} AS v(id, s, c, ts)")
    df.write.format(FMT).option("spec", "year(ts)").mode("append").save(root)
    before = tree_digest(root)
    with pytest.raises(Exception, match=r"partitioned by 'year\(ts\)[^']*'.*partitionBy.*'c'"):
        df.write.format(FMT).partitionBy("c").mode("append").save(root)
    assert tree_digest(root) == before


def test_first_write_without_spec_is_refused_and_writes_nothing(spark, tmp_path):
    root = tmp_path / "ns"
    df = spark.sql(f"SELECT * FROM {ROWS} AS v(id, s, c, ts)")
    before = tree_digest(tmp_path)
    with pytest.raises(Exception, match=r'\.option\("spec", "'):
        df.write.format(FMT).mode("append").save(str(root))
    assert tree_digest(tmp_path) == before
    assert not os.path.exists(root)


def test_spec_empty_creates_an_unpartitioned_namespace(spark, tmp_path):
    root = str(tmp_path / "ns")
    df = spark.sql(f"SELECT * FROM {ROWS} AS v(id, s, c, ts)")
    df.write.format(FMT).option("spec", "").mode("append").save(root)
    ns = lp.open(root)
    assert ns.spec.fields == ()
    assert ns.count() == 3


def test_catalog_table_without_spec_is_refused_at_its_first_insert(sql, tmp_path):
    root = tmp_path / "ns"
    t = sql.name()
    sql(f"CREATE TABLE {t} ({COLUMNS}) USING {FMT} LOCATION '{root}'")
    with pytest.raises(Exception, match=r"OPTIONS \(spec"):
        sql(f"INSERT INTO {t} {ROWS}")
    assert not os.path.exists(root / "__manifest")


# -- static INSERT OVERWRITE ... PARTITION: the rows of that partition ---------------------


@pytest.mark.parametrize(
    "query",
    ["SELECT 7, 'z', TIMESTAMP'2024-03-01'", "SELECT 7, 'z', TIMESTAMP'2024-03-01' WHERE false"],
)
def test_insert_overwrite_static_partition_matches_parquet(sql, tmp_path, query):
    """Static mode: partition c = 9 becomes exactly the query's rows (none: it is emptied,
    as on Parquet), the other partitions stay."""
    root = str(tmp_path / "ns")
    t = lance_table(sql, root)
    pq = parquet_twin(sql, tmp_path, "c")
    for name in (t, pq):
        sql(f"INSERT OVERWRITE {name} PARTITION (c = 9) (id, s, ts) {query}")
    got = rows(sql(f"SELECT id, s, c, ts FROM {t}"))
    assert got == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))
    assert (2, "b", 8) in [g[:3] for g in got]
    entry = lp.open(root).history(limit=1).to_pylist()[0]
    assert (entry["operation"], json.loads(entry["parameters"])) == (
        "overwrite",
        {"mode": "where", "where": "c = 9"},
    )


def test_write_to_overwrite_by_partition_condition(spark, sql, tmp_path):
    """writeTo(t).overwrite(c = 9) replaces the rows of c = 9; a row outside the condition
    is refused (nothing published), and so is a condition on a non-partition column."""
    from pyspark.sql import functions as F

    root = str(tmp_path / "ns")
    t = lance_table(sql, root)
    pq = parquet_twin(sql, tmp_path, "c")
    new_rows = "SELECT * FROM VALUES (7L, 'z', 9, TIMESTAMP'2024-03-01') AS v(id, s, c, ts)"
    sql(new_rows).writeTo(t).overwrite(F.col("c") == 9)
    sql(f"INSERT OVERWRITE {pq} PARTITION (c = 9) (id, s, ts) SELECT id, s, ts FROM ({new_rows})")
    assert rows(sql(f"SELECT id, s, c, ts FROM {t}")) == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))
    version = lp.open(root).version
    with pytest.raises(Exception, match=r"a row to write does not match 'c = 8'"):
        sql(new_rows).writeTo(t).overwrite(F.col("c") == 8)
    with pytest.raises(
        Exception, match=r"^lance_partitioned cannot overwrite only the rows matching"
    ):
        sql(new_rows).writeTo(t).overwrite(F.col("id") == 7)
    assert lp.open(root).version == version
    assert rows(sql(f"SELECT id, s, c, ts FROM {t}")) == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))


# -- statements that cannot work: the documented error, nothing changed -------------------

REFUSED = {
    "insert_overwrite_partition_view": (
        "INSERT OVERWRITE {v} PARTITION (c = 9) SELECT 7, 'z', TIMESTAMP'2024-03-01'",
        "NON_PARTITION_COLUMN",
    ),
    # the extension's own one-line refusals: they start with lance_partitioned and name
    # the equivalent call on the table's root
    "show_partitions": (
        "SHOW PARTITIONS {t}",
        r"^lance_partitioned: SHOW PARTITIONS .*: use lp\.open\('{root}'\)\.partitions\(\)",
    ),
    "delete_from": (
        "DELETE FROM {t} WHERE id = 1",
        r"^lance_partitioned: DELETE FROM .*: use lp\.open\('{root}'\)\.delete\(filter\)",
    ),
    "update": (
        "UPDATE {t} SET s = 'q' WHERE id = 1",
        r"^lance_partitioned: UPDATE .*: use lp\.open\('{root}'\)\.update\(\{{.*\}}, where\)",
    ),
    "merge_into": (
        "MERGE INTO {t} USING (SELECT 1L AS id) src ON {t}.id = src.id WHEN MATCHED THEN DELETE",
        r"^lance_partitioned: MERGE INTO .*lps\.merge\(spark, df, '{root}', on=\[\.\.\.\]\)",
    ),
    "describe_history": (
        "DESCRIBE HISTORY {t}",
        r"^lance_partitioned: Spark has no DESCRIBE HISTORY.*lp\.open\('{root}'\)\.history\(\)",
    ),
    # ... and the same on a temporary view (its relation sits under Spark's View node)
    "delete_from_view": (
        "DELETE FROM {v} WHERE id = 1",
        r"^lance_partitioned: DELETE FROM .*: use lp\.open\('{root}'\)\.delete\(filter\)",
    ),
    "update_view": (
        "UPDATE {v} SET s = 'q' WHERE id = 1",
        r"^lance_partitioned: UPDATE .*: use lp\.open\('{root}'\)\.update\(\{{.*\}}, where\)",
    ),
    "merge_into_view": (
        "MERGE INTO {v} USING (SELECT 1L AS id) src ON {v}.id = src.id WHEN MATCHED THEN DELETE",
        r"^lance_partitioned: MERGE INTO .*lps\.merge\(spark, df, '{root}', on=\[\.\.\.\]\)",
    ),
    "describe_history_view": (
        "DESCRIBE HISTORY {v}",
        r"^lance_partitioned: Spark has no DESCRIBE HISTORY.*lp\.open\('{root}'\)\.history\(\)",
    ),
    # Spark refuses these on any view before an extension's rule sees the statement
    "show_partitions_view": ("SHOW PARTITIONS {v}", "EXPECT_TABLE_NOT_VIEW"),
    "alter_table_view": ("ALTER TABLE {v} ADD COLUMNS (z INT)", "EXPECT_TABLE_NOT_VIEW"),
    "replace_table_as_select": (
        "REPLACE TABLE {t} USING lance_partitioned PARTITIONED BY (c) LOCATION '{root}' "
        "AS SELECT 7L AS id, 'z' AS s, 9 AS c, TIMESTAMP'2024-03-01' AS ts",
        r"^lance_partitioned: REPLACE TABLE .*INSERT OVERWRITE {t} ",
    ),
    "alter_table_add_columns": ("ALTER TABLE {t} ADD COLUMNS (z INT)", "ns.add_column"),
    "alter_table_rename_column": ("ALTER TABLE {t} RENAME COLUMN s TO s2", "rename_column"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_statement_gives_the_documented_error(sql, tmp_path, case):
    root = str(tmp_path / "ns")
    t = lance_table(sql, root)
    v = sql.name("v")
    sql(f"CREATE TEMPORARY VIEW {v} USING {FMT} OPTIONS (root '{root}')")
    statement, message = REFUSED[case]
    before = tree_digest(root)
    with pytest.raises(Exception, match=message.format(t=t, root=re.escape(root))):
        sql(statement.format(t=t, v=v, root=root)).collect()
    assert tree_digest(root) == before
    assert len(rows(sql(f"SELECT * FROM {t}"))) == 3  # the table is still there


# -- time travel on a catalog table ---------------------------------------------------------


def _appended_in_two_commits(root: str) -> tuple[pa.Table, pa.Table, str]:
    """A namespace with two appends; the rows of each, and an instant between them (ISO
    8601, UTC)."""
    first = pa.table({"a": pa.array([1, 2], pa.int32()), "c": ["x", "y"]})
    second = pa.table({"a": pa.array([3], pa.int32()), "c": ["x"]})
    ns = lp.create(root, first.schema, "c")
    ns.append(first)
    time.sleep(0.05)
    between = dt.datetime.now(dt.timezone.utc)
    time.sleep(0.05)
    ns.append(second)
    return first, second, between.isoformat()


def _arrow_rows(*tables: pa.Table) -> list[tuple]:
    return sorted((r["a"], r["c"]) for t in tables for r in t.to_pylist())


def test_version_as_of_reads_that_version(sql, tmp_path):
    root = str(tmp_path / "ns")
    first, second, _ = _appended_in_two_commits(root)
    version = lp.open(root).version - 1  # the first append's version
    t = sql.name()
    sql(f"CREATE TABLE {t} USING {FMT} LOCATION '{root}'")
    before = tree_digest(root)
    assert rows(sql(f"SELECT a, c FROM {t} VERSION AS OF {version}")) == _arrow_rows(first)
    assert rows(sql(f"SELECT a, c FROM default.{t} VERSION AS OF {version}")) == _arrow_rows(first)
    assert rows(sql(f"SELECT a, c FROM {t}")) == _arrow_rows(first, second)
    # one query naming the table at two versions reads each at its own
    both = sql(f"SELECT a, c FROM {t} VERSION AS OF {version} UNION ALL SELECT a, c FROM {t}")
    assert rows(both) == sorted(_arrow_rows(first) + _arrow_rows(first, second))
    assert rows(sql(f"SELECT a FROM {t} VERSION AS OF {version} WHERE c = 'x'")) == [(1,)]
    assert tree_digest(root) == before


def test_timestamp_as_of_reads_the_version_committed_by_then(sql, tmp_path):
    root = str(tmp_path / "ns")
    first, second, between = _appended_in_two_commits(root)
    t = sql.name()
    sql(f"CREATE TABLE {t} USING {FMT} LOCATION '{root}'")
    assert rows(sql(f"SELECT a, c FROM {t} TIMESTAMP AS OF '{between}'")) == _arrow_rows(first)
    later = dt.datetime.now(dt.timezone.utc).isoformat()
    assert rows(sql(f"SELECT a, c FROM {t} TIMESTAMP AS OF '{later}'")) == _arrow_rows(
        first, second
    )
    with pytest.raises(Exception, match="no __manifest version at or before"):
        sql(f"SELECT * FROM {t} TIMESTAMP AS OF '2001-01-01 00:00:00'").collect()


# -- a catalog table before its first write ------------------------------------------------


def test_catalog_table_before_its_first_write_reads_empty(spark, sql, tmp_path):
    root = tmp_path / "ns"
    t, pq = sql.name(), sql.name("pq")
    sql(
        f"CREATE TABLE {pq} (a INT, c STRING) USING parquet PARTITIONED BY (c) LOCATION '{tmp_path / pq}'"
    )
    sql(f"CREATE TABLE {t} (a INT, c STRING) USING {FMT} PARTITIONED BY (c) LOCATION '{root}'")
    before = tree_digest(tmp_path)
    for query in ("SELECT * FROM {}", "SELECT count(*) FROM {}", "SELECT a FROM {} WHERE c = 'x'"):
        ours, theirs = sql(query.format(t)), sql(query.format(pq))
        assert rows(ours) == rows(theirs)
        assert ours.schema == theirs.schema
    assert tree_digest(tmp_path) == before  # read paths never write
    assert not os.path.exists(root)
    # a view or load() of a root without a namespace still fails: a typo is no empty table
    with pytest.raises(Exception, match="not a partitioned namespace"):
        spark.read.format(FMT).load(str(root)).collect()
    v = sql.name("v")
    with pytest.raises(Exception, match="not a partitioned namespace"):
        sql(f"CREATE TEMPORARY VIEW {v} (a INT, c STRING) USING {FMT} OPTIONS (root '{root}')")
        sql(f"SELECT * FROM {v}").collect()
    assert not os.path.exists(root)


# -- DataFrameWriterV2 (df.writeTo) --------------------------------------------------------


def test_write_to_append_and_overwrite_partitions_match_parquet(spark, sql, tmp_path):
    """Spark cannot writeTo a Parquet table of the session catalog (a v1 table): the oracle
    is the SQL each call stands for, on Parquet (INSERT INTO; dynamic INSERT OVERWRITE)."""
    t = lance_table(sql, str(tmp_path / "ns"))
    pq = parquet_twin(sql, tmp_path, "c")
    new_rows = "SELECT * FROM VALUES (7L, 'z', 9, TIMESTAMP'2024-03-01') AS v(id, s, c, ts)"
    df = sql(new_rows)
    df.writeTo(t).append()
    sql(f"INSERT INTO {pq} (id, s, c, ts) {new_rows}")
    assert rows(sql(f"SELECT id, s, c, ts FROM {t}")) == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))
    df.writeTo(t).overwritePartitions()
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        sql(f"INSERT OVERWRITE {pq} (id, s, c, ts) {new_rows}")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    got = rows(sql(f"SELECT id, s, c, ts FROM {t}"))
    assert got == rows(sql(f"SELECT id, s, c, ts FROM {pq}"))
    assert [g[:3] for g in got] == [(2, "b", 8), (7, "z", 9)]


@pytest.mark.parametrize("how", ["createOrReplace", "replace", "saveAsTable"])
def test_write_to_replace_is_refused_and_keeps_the_table(spark, sql, tmp_path, how):
    """Spark would drop the table before writing: refused, the table and namespace stay."""
    root = str(tmp_path / "ns")
    t = lance_table(sql, root)
    df = sql("SELECT * FROM VALUES (7L, 'z', 9, TIMESTAMP'2024-03-01') AS v(id, s, c, ts)")
    before = tree_digest(root)
    with pytest.raises(
        Exception, match=rf"^lance_partitioned: REPLACE TABLE .*INSERT OVERWRITE {t} "
    ):
        if how == "saveAsTable":
            df.write.format(FMT).mode("overwrite").saveAsTable(t)
        else:
            getattr(df.writeTo(t).using(FMT), how)()
    assert tree_digest(root) == before
    assert len(rows(spark.table(t))) == 3


def test_write_to_create_or_replace_creates_a_new_table(spark, sql, tmp_path):
    """On a name with no table it is a CREATE TABLE AS SELECT (Spark cannot createOrReplace a
    Parquet table of the session catalog: the oracle is its CTAS)."""
    t, pq = sql.name(), sql.name("pq")
    query = f"SELECT * FROM {ROWS} AS v(id, s, c, ts)"
    sql(query).writeTo(t).using(FMT).tableProperty("location", str(tmp_path / t)).option(
        "spec", "c"
    ).createOrReplace()
    sql(f"CREATE TABLE {pq} USING parquet LOCATION '{tmp_path / pq}' AS {query}")
    assert rows(spark.table(t)) == rows(spark.table(pq))


def test_timestamp_as_of_option_is_checked():
    from lance_partitioned.spark.options import SourceOptions

    opts = SourceOptions.parse({"root": "r", "timestampAsOf": "2024-01-05T10:00:00+00:00"})
    assert opts.timestamp_as_of == "2024-01-05T10:00:00+00:00"
    with pytest.raises(lp.SchemaError, match="either option 'version' or 'timestampAsOf'"):
        SourceOptions.parse({"root": "r", "version": "3", "timestampAsOf": "2024-01-05"})
    with pytest.raises(lp.SchemaError, match="must be an ISO 8601 time, got 'yesterday'"):
        SourceOptions.parse({"root": "r", "timestampAsOf": "yesterday"})


def test_overwrite_where_replaces_whole_leaves_only_when_partition_values_decide(tmp_path):
    """The sink replaces the leaves a static overwrite's condition selects; a leaf whose
    rows its partition values do not decide (not partitioned by the column) is refused."""
    from lance_partitioned.catalog.manifest import Manifest
    from lance_partitioned.catalog.snapshot import Snapshot
    from lance_partitioned.spark.sink import replaced_by

    data = pa.table({"a": pa.array([1, 2, 3], pa.int32()), "c": [9, 8, 9]})
    by_c = lp.create(str(tmp_path / "by_c"), data.schema, "c")
    by_c.append(data)
    snapshot = Snapshot.load(Manifest(str(tmp_path / "by_c")))
    leaves, sql = replaced_by(snapshot, "c = 9")
    assert len(leaves) == 1 and sql == "c = 9"
    parts = by_c.partitions().to_pylist()
    assert [p["partition"]["c"] for p in parts if p["object_id"] in leaves] == ["9"]
    by_a = lp.create(str(tmp_path / "by_a"), data.schema, "a")
    by_a.append(data)
    with pytest.raises(
        lp.UnsupportedFeatureError, match=r"holds rows that do and rows that do not"
    ):
        replaced_by(Snapshot.load(Manifest(str(tmp_path / "by_a"))), "c = 9")
