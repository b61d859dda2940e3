"""The SQL surface of docs/SPARK.md ("SQL statements"): every statement of its table runs here.

A statement that works is checked against the same statement on a Parquet table of the
same rows (Spark's own answer); a statement that cannot work is checked for the
documented error, and for leaving the namespace unchanged. Catalog tables live in
Spark's in-memory session catalog of the shared test session: each test uses its own
table names and drops them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

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


# -- statements that cannot work: the documented error, nothing changed -------------------

REFUSED = {
    "insert_overwrite_partition_static": (
        "INSERT OVERWRITE {t} PARTITION (c = 9) SELECT 7, 'z', TIMESTAMP'2024-03-01'",
        "partitionOverwriteMode",
    ),
    "insert_overwrite_partition_view": (
        "INSERT OVERWRITE {v} PARTITION (c = 9) SELECT 7, 'z', TIMESTAMP'2024-03-01'",
        "NON_PARTITION_COLUMN",
    ),
    "show_partitions": ("SHOW PARTITIONS {t}", "does not support partition management"),
    "version_as_of": ("SELECT * FROM {t} VERSION AS OF 1", "TIME_TRAVEL"),
    "delete_from": ("DELETE FROM {t} WHERE id = 1", "does not support deletes"),
    "update": ("UPDATE {t} SET s = 'q' WHERE id = 1", "does not support UPDATE TABLE"),
    "merge_into": (
        "MERGE INTO {t} USING (SELECT 1L AS id) src ON {t}.id = src.id WHEN MATCHED THEN DELETE",
        "does not support MERGE INTO TABLE",
    ),
    "alter_table_add_columns": ("ALTER TABLE {t} ADD COLUMNS (z INT)", "ns.add_column"),
    "alter_table_rename_column": ("ALTER TABLE {t} RENAME COLUMN s TO s2", "rename_column"),
    "describe_history": ("DESCRIBE HISTORY {t}", "TABLE_OR_VIEW_NOT_FOUND"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_statement_gives_the_documented_error(sql, tmp_path, case):
    root = str(tmp_path / "ns")
    t = lance_table(sql, root)
    v = sql.name("v")
    sql(f"CREATE TEMPORARY VIEW {v} USING {FMT} OPTIONS (root '{root}')")
    statement, message = REFUSED[case]
    before = tree_digest(root)
    with pytest.raises(Exception, match=message):
        sql(statement.format(t=t, v=v, root=root)).collect()
    assert tree_digest(root) == before
