"""Reads of a seed-003 namespace work as reads (issue 34 item 7), in Python and in the CLI;
every other CLI command says the namespace needs ``convert`` first.

Fixtures are built by hand with plain pylance (``tests/seed003_fixtures.py``).
Expected rows and counts come from the source tables read with plain pylance and
pyarrow (``fx.read_all``), versions from plain pylance on ``__manifest``; nothing is
taken from our code. Every check also asserts that nothing under the root changed.
"""

from __future__ import annotations

import json
from collections import Counter

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import tree_digest
from test_cli import run

import lance_partitioned as lp
from tests import seed003_fixtures as fx


@pytest.fixture
def identity_root(tmp_path) -> str:
    root = str(tmp_path / "legacy")
    fx.build_identity(root)
    return root


def _leaf_counts(root: str) -> Counter:
    """Rows per (event_date, country) table name, from the tables themselves (pylance)."""
    out: Counter = Counter()
    for location in fx.read_all_locations(root):
        t = lance.dataset(f"{root}/{location}").to_table(columns=["id"])
        levels = dict(p.split("=", 1) for p in location.split("_", 1)[1].split("$"))
        out[(levels["event_date"], levels["country"])] += t.num_rows
    return out


def _manifest_versions(root: str) -> list[int]:
    return sorted(v["version"] for v in lance.dataset(f"{root}/__manifest").versions())


def test_to_arrow_describe_versions_and_tags_are_reads(identity_root):
    before = tree_digest(identity_root)
    oracle = fx.read_all(identity_root, fx.IDENTITY_SCHEMA)
    old = lp.open(identity_root)
    assert old.to_arrow().sort_by("id").to_pylist() == oracle.to_pylist()
    got = old.to_arrow("amount > 2", columns=["id", "country"]).sort_by("id")
    want = oracle.filter(pc.field("amount") > 2).select(["id", "country"])
    assert got.to_pylist() == want.to_pylist()

    text = old.describe()
    assert "seed 003" in text.lower() and "lp.convert" in text
    assert f"{oracle.num_rows:,} rows in all" in text
    for (date, country), n in _leaf_counts(identity_root).items():
        line = f"  event_date={date}, country={country}: {n:,} row{'' if n == 1 else 's'}"
        assert line in text, (line, text)
    summary = old.summary()
    assert summary["rows"] == oracle.num_rows
    assert len(summary["partitions"]) == len(fx.read_all_locations(identity_root))

    versions = _manifest_versions(identity_root)
    assert [v["version"] for v in old.versions()] == versions
    assert old.version == versions[-1]
    assert old.tags() == {}
    assert tree_digest(identity_root) == before


def test_reads_needing_seed000_metadata_say_convert(identity_root):
    before = tree_digest(identity_root)
    old = lp.open(identity_root)
    for call in (old.validate, old.list_indexes, lambda: old.manifest, lambda: old.specs):
        with pytest.raises(lp.UnsupportedFeatureError, match=r"needs seed 000's.*lp\.convert"):
            call()
    with pytest.raises(lp.UnsupportedFeatureError, match=r"latest state only.*lp\.convert"):
        lp.open(identity_root, version=_manifest_versions(identity_root)[0])
    assert tree_digest(identity_root) == before


# Every command of the CLI on a seed-003 root: the reads work, each with a check of its
# output against the oracle; the rest fail (exit 1) with one line naming convert.
READS = ["describe", "partitions", "plan", "explain", "history", "versions", "tags"]
READS += ["count", "head"]
NEED_CONVERT = {
    "validate": [],
    "tag": ["t1"],
    "restore": ["1"],
    "evolve": ["country"],
    "add-column": ["z", "int64"],
    "drop-column": ["amount"],
    "rename-column": ["amount", "amt"],
    "widen-column": ["amount", "double"],
    "align": [],
    "compact": [],
    "cleanup": [],
    "vacuum": [],
    "repair": [],
    "delete": ["--where", "id = 1"],
    "update": ["--where", "id = 1", "--set", "amount=1"],
    "merge": ["CHANGES", "--on", "id"],
}


def test_the_cli_covers_every_command():
    from lance_partitioned.cli.main import cli

    assert set(cli.commands) == {*READS, *NEED_CONVERT, "convert"}


def _read_json(command: str, root: str, *extra: str) -> object:
    return json.loads(run(command, root, *extra, "--json").stdout)


@pytest.mark.parametrize("command", READS)
def test_cli_reads_work_on_a_seed003_namespace(command, identity_root):
    before = tree_digest(identity_root)
    oracle = fx.read_all(identity_root, fx.IDENTITY_SCHEMA)
    counts = _leaf_counts(identity_root)
    us = oracle.filter(pc.field("country") == "US")
    if command == "describe":
        assert _read_json(command, identity_root)["rows"] == oracle.num_rows
        assert "seed 003" in run(command, identity_root).stdout.lower()
    elif command == "partitions":
        parts = _read_json(command, identity_root)
        got = Counter(
            {(p["values"]["event_date"], p["values"]["country"]): p["rows"] for p in parts}
        )
        assert got == counts
        kept = _read_json(command, identity_root, "--filter", "country = 'US'")
        assert sum(p["rows"] for p in kept) == us.num_rows
    elif command in ("plan", "explain"):
        out = _read_json(command, identity_root, "country = 'US'")
        want = sum(1 for (_, c) in counts if c == "US")
        assert (len(out) if command == "plan" else out["partitions"]) == want
    elif command in ("history", "versions"):
        rows = _read_json(command, identity_root)
        newest_first = _manifest_versions(identity_root)[::-1]
        assert [r["version"] for r in rows] == newest_first
        assert [r["read"] for r in rows][0] is True
    elif command == "tags":
        assert _read_json(command, identity_root) == {}
    elif command == "count":
        out = _read_json(command, identity_root, "--filter", "country = 'US'")
        assert out == {"rows": us.num_rows}
    elif command == "head":
        rows = _read_json(command, identity_root, "-n", "100")
        assert sorted(r["id"] for r in rows) == oracle.column("id").to_pylist()
    assert tree_digest(identity_root) == before


@pytest.mark.parametrize("command", sorted(NEED_CONVERT))
def test_cli_changes_on_a_seed003_namespace_say_convert(command, identity_root, tmp_path):
    changes = str(tmp_path / "changes.parquet")
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "amount": [9.0]}), changes)
    args = [changes if a == "CHANGES" else a for a in NEED_CONVERT[command]]
    before = tree_digest(identity_root)
    out = run(command, identity_root, *args, ok=1)
    assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1
    assert "seed 003" in out.stderr and "lance-partitioned convert" in out.stderr
    assert tree_digest(identity_root) == before


def test_cli_version_on_a_seed003_namespace_says_latest_only(identity_root):
    out = run("describe", identity_root, "--version", "1", ok=1)
    assert "latest state only" in out.stderr and "convert" in out.stderr
