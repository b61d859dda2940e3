"""Seed 003's earlier layout (issue 14 item 5): read it read-only, convert it to seed 000.

Fixtures are built by hand with plain pylance (``tests/seed003_fixtures.py``).
Expected rows come from the source tables read with plain pylance and
conformed with pyarrow; seed-000 properties of the result are read from
``__manifest`` with plain pylance.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import tree_digest

import lance_partitioned as lp
from tests import seed003_fixtures as fx

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def identity_root(tmp_path) -> str:
    root = str(tmp_path / "legacy")
    fx.build_identity(root)
    return root


@pytest.fixture
def transform_root(tmp_path) -> str:
    root = str(tmp_path / "legacy_t")
    fx.build_transforms(root)
    return root


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


# -- read-only -----------------------------------------------------------------
def test_open_detects_seed003_and_reads_every_row_by_name(identity_root):
    ns = lp.open(identity_root)
    assert isinstance(ns, lp.Seed003Namespace)
    oracle = fx.read_all(identity_root, fx.IDENTITY_SCHEMA)
    got = _sorted(ns.scan().to_arrow())
    assert got.column_names == oracle.column_names
    assert got.to_pylist() == oracle.to_pylist()
    # seed 003 §4: a missing column reads NULL, an int32 column reads as float64
    assert got.filter(pc.field("id") == 5)["amount"].to_pylist() == [None]
    assert got.filter(pc.field("id") == 8)["amount"].to_pylist() == [4.0]


@pytest.mark.parametrize(
    "where, expr",
    [
        ("country = 'US'", pc.field("country") == "US"),
        ("country = 'US' AND amount > 2", (pc.field("country") == "US") & (pc.field("amount") > 2)),
        ("event_date = '2025-12-11'", pc.field("event_date") == pa.scalar(20433, pa.date32())),
        ("amount >= 4", pc.field("amount") >= 4),
    ],
)
def test_filtered_reads_and_counts_equal_pyarrow(identity_root, where, expr):
    ns = lp.open(identity_root)
    oracle = fx.read_all(identity_root, fx.IDENTITY_SCHEMA).filter(expr)
    assert _sorted(ns.scan(where).to_arrow()).to_pylist() == oracle.to_pylist()
    assert ns.count(where) == oracle.num_rows
    assert _sorted(ns.scan(where, columns=["id"]).to_arrow())["id"].to_pylist() == (
        oracle["id"].to_pylist()
    )


def test_plan_prunes_identity_partitions_by_table_name(identity_root):
    ns = lp.open(identity_root)
    rows = lance.dataset(f"{identity_root}/__manifest").to_table().to_pylist()
    us = sorted(
        r["location"]
        for r in rows
        if r["object_type"] == "table" and "country=US" in r["object_id"]
    )
    assert len(us) == 2
    assert sorted(t.location for t in ns.plan("country = 'US'")) == us
    assert "partitions: 2 of 4" in ns.explain("country = 'US'")


def test_transform_namespace_reads_exactly_without_trusting_hash_names(transform_root):
    ns = lp.open(transform_root)
    oracle = fx.read_all(transform_root, fx.TRANSFORM_SCHEMA)
    assert _sorted(ns.scan().to_arrow()).to_pylist() == oracle.to_pylist()
    expected = oracle.filter(pc.field("city") == "Oslo")
    assert ns.count("city = 'Oslo'") == expected.num_rows > 0
    # bucket/hash/year texts are not used to prune (seed 003 leaves their form open)
    assert len(ns.plan("city = 'Oslo'")) == len(fx.read_all_locations(transform_root))


def test_writes_are_refused_and_point_to_convert(identity_root):
    ns = lp.open(identity_root)
    before = tree_digest(identity_root)
    for call in (
        lambda: ns.append(fx.read_all(identity_root, fx.IDENTITY_SCHEMA)),
        lambda: ns.delete("id = 1"),
        lambda: ns.evolve_spec("country"),
        lambda: ns.compact(),
    ):
        with pytest.raises(lp.UnsupportedFeatureError, match=r"seed 003.*lp\.convert"):
            call()
    assert tree_digest(identity_root) == before


# -- conversion ----------------------------------------------------------------
def _manifest(root: str) -> tuple[list[dict], dict[str, str], pa.Schema]:
    ds = lance.dataset(f"{root}/__manifest")
    return ds.to_table().to_pylist(), ds.metadata, ds.schema


def _namespace_ids(metadata: dict[str, str]) -> dict[str, int]:
    schema = json.loads(metadata["schema"])
    return {f["name"]: int(f["metadata"]["lance:field_id"]) for f in schema["fields"]}


def _check_seed000(root: str, levels: int) -> list[dict]:
    """Appendices A-C, read with plain pylance: object ids, partition columns, field ids."""
    rows, meta, schema = _manifest(root)
    spec = json.loads(meta["partition_spec_v1"])
    assert len(spec["fields"]) == levels
    for f in spec["fields"]:
        assert f"partition_field_{f['field_id']}" in schema.names
    tables = [r for r in rows if r["object_type"] == "table"]
    pattern = re.compile(r"^v1" + r"\$[a-z0-9]{16}" * levels + r"\$dataset$")
    assert tables and all(pattern.match(r["object_id"]) for r in tables)
    for r in tables:
        assert re.match(r"^[0-9a-f]{8}_", r["location"]) and r["location"].endswith(r["object_id"])
        assert r["read_version"] is not None
    ns_rows = {r["object_id"] for r in rows if r["object_type"] == "namespace"}
    for r in tables:  # every ancestor namespace has its row
        parts = r["object_id"].split("$")[:-1]
        assert all("$".join(parts[: i + 1]) in ns_rows for i in range(len(parts)))
    ids = _namespace_ids(meta)
    for r in tables:  # leaf Lance field ids equal the namespace lance:field_id
        leaf = lance.dataset(f"{root}/{r['location']}", version=r["read_version"])
        assert {f.name(): f.id() for f in leaf.lance_schema.fields()} == ids
    return tables


def test_convert_identity_namespace(identity_root, tmp_path):
    dst = str(tmp_path / "events")
    before = tree_digest(identity_root)
    events: list = []
    result = lp.convert(identity_root, dst, progress=events.append)
    assert tree_digest(identity_root) == before  # the source is only read
    oracle = fx.read_all(identity_root, fx.IDENTITY_SCHEMA)
    ns = lp.open(dst)
    assert isinstance(ns, lp.PartitionedNamespace)
    assert _sorted(ns.scan().to_arrow()).to_pylist() == oracle.to_pylist()
    assert ns.validate() == []
    assert result.rows == oracle.num_rows and result.source_tables == 4
    assert events[-1].finished and events[-1].task == "convert" and events[-1].done == 10
    tables = _check_seed000(dst, 2)
    for r in tables:  # each leaf's partition columns hold its rows' values
        leaf = lance.dataset(f"{dst}/{r['location']}").to_table()
        assert pc.unique(leaf["country"]).to_pylist() == [r["partition_field_country"]]
        assert pc.unique(leaf["event_date"]).to_pylist() == [r["partition_field_event_date"]]
    # the converted namespace is writable
    ns.append(oracle.slice(0, 2))
    assert ns.count() == 12


def test_convert_transform_namespace_recomputes_partitions(transform_root, tmp_path):
    dst = str(tmp_path / "t")
    lp.convert(transform_root, dst, progress=False)
    oracle = fx.read_all(transform_root, fx.TRANSFORM_SCHEMA)
    ns = lp.open(dst)
    assert _sorted(ns.scan().to_arrow()).to_pylist() == oracle.to_pylist()
    assert ns.validate() == []
    _, meta, _ = _manifest(dst)
    fields = json.loads(meta["partition_spec_v1"])["fields"]
    assert [f["field_id"] for f in fields] == ["ts_year", "city_bucket", "name_hash"]
    assert fields[2] == {
        "field_id": "name_hash",
        "source_ids": [3],
        "expression": "murmur3(col0)",
        "result_type": {"type": "int32"},
    }
    for r in _check_seed000(dst, 3):
        leaf = lance.dataset(f"{dst}/{r['location']}").to_table()
        assert pc.unique(pc.year(leaf["ts"])).to_pylist() == [r["partition_field_ts_year"]]
    # pruning on the converted namespace: year(ts) now prunes
    expected = oracle.filter(pc.equal(pc.year(oracle["ts"]), 2023))
    assert ns.count("ts < '2024-01-01T00:00:00Z'") == expected.num_rows


def test_convert_refuses_bad_input_and_changes_nothing(identity_root, tmp_path):
    before = tree_digest(identity_root)
    existing = tmp_path / "exists"
    existing.mkdir()
    (existing / "keep.txt").write_text("x")
    with pytest.raises(lp.NamespaceExistsError, match="already exists"):
        lp.convert(identity_root, str(existing))
    assert os.listdir(existing) == ["keep.txt"]
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(lp.NotAPartitionedNamespaceError, match="seed-003"):
        lp.convert(str(plain), str(tmp_path / "out"))
    seed000 = lp.create(str(tmp_path / "s0"), fx.IDENTITY_SCHEMA, "country")
    s0_before = tree_digest(seed000.root)
    with pytest.raises(lp.NotAPartitionedNamespaceError, match="lance.partitioning.enabled"):
        lp.convert(seed000.root, str(tmp_path / "out"))
    assert tree_digest(seed000.root) == s0_before
    with pytest.raises(lp.UnsupportedFeatureError, match="local destination"):
        lp.convert(identity_root, "s3://bucket/x")
    # a destination inside the source would write into what convert only reads
    with pytest.raises(lp.UnsupportedFeatureError, match="inside the source"):
        lp.convert(identity_root, os.path.join(identity_root, "inside"))
    # ... also when the path reaches the source through a symlink
    (tmp_path / "link").symlink_to(identity_root, target_is_directory=True)
    with pytest.raises(lp.UnsupportedFeatureError, match="inside the source"):
        lp.convert(identity_root, str(tmp_path / "link" / "inside"))
    (tmp_path / "link").unlink()
    assert not (tmp_path / "out").exists()
    assert sorted(os.listdir(tmp_path)) == ["exists", "legacy", "plain", "s0"]
    assert tree_digest(identity_root) == before


def test_malformed_properties_are_named(tmp_path):
    root = str(tmp_path / "bad")
    fx.build_identity(root)
    lance.dataset(f"{root}/__manifest").update_metadata(
        {
            "lance.partitioning.partition-columns": json.dumps(
                [{"name": "nope", "function": "identity"}]
            )
        }
    )
    with pytest.raises(lp.SpecError, match="'nope' is not in lance.partitioning.schema"):
        lp.open(root)


CRASH = textwrap.dedent(
    """
    import os, sys
    import lance_partitioned as lp
    from lance_partitioned.operations.write import job
    point = sys.argv[3]
    if point == "write":
        real = job.WriteJob.write
        def crash_write(self, fill, **kw):
            def half(writer):
                os._exit(17)
            return real(self, half, **kw)
        job.WriteJob.write = crash_write
    else:
        # after the one __manifest commit and the check, at the rename
        def crash_rename(a, b):
            os._exit(17)
        os.rename = crash_rename
    lp.convert(sys.argv[1], sys.argv[2], progress=False)
    """
)


@pytest.mark.parametrize("point", ["write", "before-rename"])
def test_crash_mid_convert_leaves_destination_absent(identity_root, tmp_path, point):
    dst = str(tmp_path / "events")
    before = tree_digest(identity_root)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", CRASH, identity_root, dst, point], env=env, capture_output=True
    )
    assert out.returncode == 17, out.stderr
    assert not os.path.exists(dst)
    assert tree_digest(identity_root) == before
    # only a hidden staging directory is left; nothing reads it
    left = [n for n in os.listdir(tmp_path) if n != "legacy"]
    assert len(left) == 1 and left[0].startswith(".events.lp-convert-")
    lp.convert(identity_root, dst, progress=False)  # a rerun completes
    oracle = fx.read_all(identity_root, fx.IDENTITY_SCHEMA)
    assert _sorted(lp.open(dst).scan().to_arrow()).to_pylist() == oracle.to_pylist()


def test_cli_convert_and_read(identity_root, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "lance_partitioned", *args],
            capture_output=True,
            text=True,
            env=env,
        )

    count = run("count", identity_root, "--filter", "country = 'US'", "--json")
    assert count.returncode == 0, count.stderr
    assert json.loads(count.stdout)["rows"] == 5
    dst = str(tmp_path / "events")
    out = run("convert", identity_root, dst, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"] == 10
    assert lance.dataset(f"{dst}/__manifest").metadata["partition_spec_v1"]
    again = run("convert", identity_root, dst)
    assert (
        again.returncode == 1
        and again.stderr.startswith("error:")
        and "already exists" in again.stderr
    )
    compact = run("compact", identity_root)
    assert compact.returncode == 1 and "lp.convert" in compact.stderr
