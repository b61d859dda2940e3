"""The commands that change rows (issue 30 item 6): ``merge``, ``update`` and ``delete``.

Each runs end to end on a small namespace through ``main``, as tests/test_cli.py
does (one run in a child process, as a user's shell runs it). The expected rows
and counts come from DuckDB applying the same change to the input rows with
SQL's own MERGE rules written out (a NULL key never equals anything), never
from our code. Bad input prints one line, exits non-zero and leaves every file
of the namespace as it was.
"""

from __future__ import annotations

import json

import duckdb
import lance
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import tree_digest
from test_cli import manifest_versions, run, run_json, run_process

import lance_partitioned as lp

SCHEMA = pa.schema([("id", pa.int32()), ("country", pa.string()), ("amount", pa.float64())])
COUNTRIES = ["FR", "US", "DE", "US", "FR", "US", "JP", "US"]
TARGET = pa.table(
    {
        "id": list(range(len(COUNTRIES))),
        "country": COUNTRIES,
        "amount": [i * 1.5 for i in range(len(COUNTRIES))],
    },
    SCHEMA,
)


@pytest.fixture
def root(tmp_path) -> str:
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "country")
    ns.append(TARGET)
    return ns.root


def ordered(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=lambda r: tuple((v is None, v) for v in r))


def namespace_rows(root: str) -> list[tuple]:
    table = lp.open(root).to_arrow().select(SCHEMA.names)
    return ordered([tuple(r.values()) for r in table.to_pylist()])


def duck(sql: str, **tables: pa.Table) -> list[tuple]:
    """``sql`` run by DuckDB over ``tables`` (by name): the oracle."""
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)
    return ordered(con.sql(sql).fetchall())


def one(sql: str, **tables: pa.Table) -> int:
    return duck(sql, **tables)[0][0]


def assert_clean(root: str) -> None:
    assert lp.open(root).validate() == []


def test_help_lists_the_change_commands():
    out = run("--help").stdout
    for command in ("merge", "update", "delete"):
        assert command in out
    assert "--delete-not-matched" in run("merge", "--help").stdout


def test_merge_upsert_from_a_parquet_file(tmp_path, root):
    # an update in place, a move to a new partition (DE -> BR), a new key, a NULL key
    source = pa.table(
        {
            "id": [1, 2, 5, 100, None],
            "country": ["US", "BR", "US", "JP", "FR"],
            "amount": [10.0, 20.0, 50.0, 1000.0, 7.0],
        },
        SCHEMA,
    )
    path = str(tmp_path / "changes.parquet")
    pq.write_table(source, path)
    expected = duck(
        "SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM s WHERE s.id = t.id) "
        "UNION ALL SELECT * FROM s",
        t=TARGET,
        s=source,
    )
    updated = one("SELECT count(*) FROM t JOIN s ON s.id = t.id", t=TARGET, s=source)
    inserted = source.num_rows - updated
    # the partitions written (every source row's) and those rows were removed from
    touched = one(
        "SELECT count(DISTINCT c) FROM (SELECT country AS c FROM s UNION ALL "
        "SELECT t.country FROM t JOIN s ON s.id = t.id)",
        t=TARGET,
        s=source,
    )
    before = manifest_versions(root)[-1]

    out = run_process("merge", root, path, "--on", "id")  # as a user's shell runs it
    assert out.stdout.strip() == (
        f"merge: {updated} updated, {inserted} inserted, 0 deleted in {touched} partition(s) "
        f"(__manifest version {before + 1})"
    )
    assert namespace_rows(root) == expected
    assert manifest_versions(root)[-1] == before + 1  # one commit
    assert_clean(root)


def test_merge_clauses_with_a_lance_dataset_source(tmp_path, root):
    source = pa.table(
        {
            "id": pa.array([0, 1, 3, 200], pa.int32()),
            "country": ["FR", "US", "US", "JP"],
            "amount": [0.0, 0.5, 100.0, 1.0],
            "op": ["D", "U", "U", "I"],  # not a namespace column: for conditions only
        }
    )
    path = str(tmp_path / "changes.lance")
    lance.write_dataset(source, path)
    kept = (
        "SELECT t.* FROM t LEFT JOIN s ON s.id = t.id WHERE s.id IS NULL "
        "OR (s.op <> 'D' AND NOT s.amount > t.amount)"
    )
    updates = "FROM t JOIN s ON s.id = t.id WHERE s.op <> 'D' AND s.amount > t.amount"
    expected = duck(
        f"{kept} UNION ALL SELECT s.id, s.country, s.amount {updates}", t=TARGET, s=source
    )
    deleted = one(
        "SELECT count(*) FROM t JOIN s ON s.id = t.id WHERE s.op = 'D'", t=TARGET, s=source
    )
    updated = one(f"SELECT count(*) {updates}", t=TARGET, s=source)

    result = run_json(
        "merge", root, path, "--on", "id",
        "--delete-when", "source.op = 'D'",
        "--update-when", "source.amount > target.amount",
        "--no-insert",
    )  # fmt: skip
    assert (result["rows_updated"], result["rows_inserted"], result["rows_deleted"]) == (
        updated,
        0,
        deleted,
    )
    assert result["version"] == manifest_versions(root)[-1]
    assert namespace_rows(root) == expected
    assert_clean(root)


def test_merge_composite_key_from_a_parquet_directory_deleting_unmatched(tmp_path, root):
    """A directory of Parquet files as Spark writes it (``_SUCCESS`` beside the parts);
    keys (id, country); namespace rows no source row matches are deleted where FR."""
    part1 = pa.table({"id": [4, 6], "country": ["FR", "JP"], "amount": [9.0, 1.0]}, SCHEMA)
    part2 = pa.table({"id": [2], "country": ["FR"], "amount": [2.0]}, SCHEMA)  # (2, FR): new
    folder = tmp_path / "changes"
    folder.mkdir()
    pq.write_table(part1, str(folder / "part-0.parquet"))
    pq.write_table(part2, str(folder / "part-1.parquet"))
    (folder / "_SUCCESS").write_text("")
    source = pa.concat_tables([part1, part2])
    match = "s.id = t.id AND s.country = t.country"
    expected = duck(
        f"SELECT * FROM t WHERE NOT EXISTS (SELECT 1 FROM s WHERE {match}) "
        "AND t.country <> 'FR' UNION ALL SELECT * FROM s",
        t=TARGET,
        s=source,
    )
    updated = one(f"SELECT count(*) FROM t JOIN s ON {match}", t=TARGET, s=source)
    deleted = one(
        f"SELECT count(*) FROM t WHERE t.country = 'FR' AND NOT EXISTS "
        f"(SELECT 1 FROM s WHERE {match})",
        t=TARGET,
        s=source,
    )
    result = run_json(
        "merge", root, str(folder), "--on", "id", "--on", "country",
        "--delete-not-matched", "target.country = 'FR'",
    )  # fmt: skip
    assert (result["rows_updated"], result["rows_inserted"], result["rows_deleted"]) == (
        updated,
        source.num_rows - updated,
        deleted,
    )
    assert namespace_rows(root) == expected
    # id 2 is there twice now, (2, DE) and (2, FR): merged on id alone, both match
    twice = str(tmp_path / "two.parquet")
    pq.write_table(pa.table({"id": [2], "amount": [-1.0]}, SCHEMA.remove(1)), twice)
    assert run_json("merge", root, twice, "--on", "id")["rows_updated"] == 2
    expected = [(i, c, -1.0 if i == 2 else a) for i, c, a in expected]
    assert namespace_rows(root) == expected
    # 'true' deletes every unmatched row: the namespace becomes the source
    keys = ("--on", "id", "--on", "country")
    run("merge", root, str(folder), *keys, "--delete-not-matched", "true")
    assert namespace_rows(root) == ordered([tuple(r.values()) for r in source.to_pylist()])
    assert_clean(root)


def test_update_moves_rows_and_delete(root):
    where = "country = 'US' AND id > 2"
    # the SQL of --set may hold '=': the value is split at the first one
    amount = "CASE WHEN id = 3 THEN 0.0 ELSE amount * 2 END"
    expected = duck(
        "SELECT id, CASE WHEN country = 'US' AND id > 2 THEN 'FR' ELSE country END, "
        "CASE WHEN country = 'US' AND id > 2 THEN (CASE WHEN id = 3 THEN 0.0 ELSE amount * 2 END) "
        "ELSE amount END FROM t",
        t=TARGET,
    )
    chosen = pc.and_(pc.equal(TARGET["country"], "US"), pc.greater(TARGET["id"], 2))
    result = run_json(
        "update", root, "--set", f"amount={amount}", "--set", "country='FR'", "--where", where
    )
    assert result == {
        "version": manifest_versions(root)[-1],
        "rows_updated": pc.sum(chosen).as_py(),
        "partitions_touched": 2,  # out of US, into FR
    }
    assert namespace_rows(root) == expected
    assert (
        "update: no row changed"
        in run("update", root, "--set", "amount=1", "--where", "id > 1000").stdout
    )

    after_update = lp.open(root).to_arrow()
    doomed = after_update.filter(pc.greater(after_update["amount"], 5))
    out = run("delete", root, "--where", "amount > 5").stdout.strip()
    countries = len(pc.unique(doomed["country"]))
    assert out == (
        f"delete: {doomed.num_rows} deleted in {countries} partition(s) "
        f"(__manifest version {manifest_versions(root)[-1]})"
    )
    kept = after_update.filter(pc.invert(pc.greater(after_update["amount"], 5)))
    assert namespace_rows(root) == ordered([tuple(r.values()) for r in kept.to_pylist()])
    assert run_json("delete", root, "--where", "true")["rows_deleted"] == kept.num_rows
    assert run_json("count", root) == {"rows": 0}
    assert_clean(root)


@pytest.fixture
def inputs(tmp_path) -> dict[str, str]:
    """Change files, good and bad, outside the namespace."""
    out = {}

    def parquet(name: str, table: pa.Table) -> None:
        out[name] = str(tmp_path / f"{name}.parquet")
        pq.write_table(table, out[name])

    parquet("good", pa.table({"id": [1], "country": ["US"], "amount": [3.0]}, SCHEMA))
    parquet("duplicate", pa.table({"id": [1, 2, 1], "country": ["US"] * 3, "amount": [1.0] * 3}))
    parquet("no_key", pa.table({"country": ["US"], "amount": [3.0]}))
    parquet("string_key", pa.table({"id": ["x"], "country": ["US"]}))
    out["text"] = str(tmp_path / "notes.parquet")
    with open(out["text"], "w") as f:
        f.write("not parquet\n")
    out["missing"] = str(tmp_path / "nowhere.parquet")
    return out


def test_bad_input_prints_one_line_exits_non_zero_and_changes_nothing(root, inputs):
    first = str(manifest_versions(root)[0])
    good = inputs["good"]
    cases = [
        (("update", root, "--set", "amount=1"), 2, "--where true"),
        (("delete", root), 2, "--where"),
        (("update", root, "--where", "true"), 2, "--set"),
        (("update", root, "--set", "nope=1", "--where", "true"), 1, "nope"),
        (("update", root, "--set", "amount", "--where", "true"), 2, "COLUMN=SQL"),
        (("update", root, "--set", "amount=", "--where", "true"), 2, "no SQL"),
        (("update", root, "--set", "amount=1", "--set", "amount=2", "--where", "true"), 2, "twice"),
        (("update", root, "--set", "amount=nope + 1", "--where", "true"), 1, "nope"),
        (("update", root, "--set", "amount=1", "--where", "nope = 1"), 1, "nope"),
        (("delete", root, "--where", "  "), 1, "true"),
        (("merge", root, inputs["missing"], "--on", "id"), 1, "no such file"),
        (("merge", root, inputs["text"], "--on", "id"), 1, "cannot be read as a Parquet file"),
        (("merge", root, root, "--on", "id"), 1, "cannot be read as a directory of Parquet"),
        (("merge", root, inputs["duplicate"], "--on", "id"), 1, "more than once"),
        (("merge", root, good, "--on", "nope"), 1, "nope"),
        (("merge", root, inputs["no_key"], "--on", "id"), 1, "no key column 'id'"),
        (("merge", root, inputs["string_key"], "--on", "id"), 1, "'id'"),
        (("merge", root, good), 2, "--on"),
        (("merge", root, good, "--on", "id", "--no-update", "--no-insert"), 1, "clause"),
        (("merge", root, good, "--on", "id", "--no-update", "--update-when", "true"), 2, "contradict"),
        (("merge", root, good, "--on", "id", "--delete-when", "source.nope = 1"), 1, "nope"),
        (("merge", root, good, "--on", "id", "--update-when", " "), 1, "blank"),
        (("merge", root, good, "--on", "id", "--version", first), 1, "pinned"),
        (("update", root, "--set", "amount=1", "--where", "true", "--version", first), 1, "pinned"),
        (("delete", root, "--where", "true", "--version", first), 1, "pinned"),
    ]  # fmt: skip
    before = tree_digest(root)
    for args, code, words in cases:
        out = run(*args, ok=None)
        assert out.returncode == code, (args, out.returncode, out.stderr)
        assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, (args, out.stderr)
        assert words.lower() in out.stderr.lower(), (args, out.stderr)
        for bad in ("Traceback", "/rustc/", ".rs:"):
            assert bad not in out.stderr, (args, out.stderr)
    assert tree_digest(root) == before
    debug = run("merge", root, inputs["text"], "--on", "id", "--debug", ok=1)
    assert "Traceback" in debug.stderr and "direct cause" in debug.stderr  # pyarrow's error
    assert tree_digest(root) == before


def test_merge_reads_changes_on_an_object_store_with_the_storage_options(s3_server, tmp_path):
    """CHANGES on S3 (a Parquet file put with boto3, a Lance dataset written by pylance)
    is read with the same --storage-option flags as the root."""
    opts = s3_server.options()
    bucket = s3_server.new_bucket()
    ns = lp.create(f"s3://{bucket}/ns", SCHEMA, "country", storage_options=opts)
    ns.append(TARGET)
    flags = [x for k, v in opts.items() for x in ("-s", f"{k}={v}")]
    source = pa.table({"id": [1, 50], "country": ["US", "BR"], "amount": [0.0, 5.0]}, SCHEMA)
    local = str(tmp_path / "c.parquet")
    pq.write_table(source, local)
    with open(local, "rb") as f:
        s3_server.client().put_object(Bucket=bucket, Key="in/c.parquet", Body=f.read())
    lance.write_dataset(source, f"s3://{bucket}/in/c.lance", storage_options=opts)
    for changes in (f"s3://{bucket}/in/c.parquet", f"s3://{bucket}/in/c.lance"):
        out = json.loads(run("merge", ns.root, changes, "--on", "id", "--json", *flags).stdout)
        assert out["rows_updated"] + out["rows_inserted"] == source.num_rows, changes
    expected = duck(
        "SELECT * FROM t WHERE id NOT IN (SELECT id FROM s) UNION ALL SELECT * FROM s",
        t=TARGET,
        s=source,
    )
    got = lp.open(ns.root, storage_options=opts).to_arrow().select(SCHEMA.names)
    assert ordered([tuple(r.values()) for r in got.to_pylist()]) == expected
