"""``ns.restore(version_or_tag)`` and ``lance-partitioned restore`` (issue 30, item 4).

Oracles never come from the code under test: a version's rows are read with plain
pylance (every table row of ``__manifest`` at that version, each leaf opened at
its ``read_version`` with ``lance.dataset``), its schema and specs from the plain
``__manifest`` metadata, "nothing changed" from the bytes of every file.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import lance
import pyarrow as pa
import pytest
from conftest import tree_digest
from test_cli import run, run_json

import lance_partitioned as lp
from lance_partitioned.operations.txn import leases

REPO = Path(__file__).resolve().parents[1]
SCHEMA = pa.schema([("id", pa.int64()), ("country", pa.string()), ("amount", pa.float64())])
COLUMNS = ["id", "country", "amount"]
SPEC_PREFIX = "partition_spec_v"
MARK_KEY = "lance-partitioned:last_field_id"


def rows(ids: list[int], countries: list[str]) -> pa.Table:
    return pa.table(
        {"id": ids, "country": countries, "amount": [i * 0.5 for i in ids]}, schema=SCHEMA
    )


def manifest(root: str, version: int | None = None) -> lance.LanceDataset:
    return lance.dataset(f"{root}/__manifest", version=version)


def plain_rows(root: str, version: int | None = None) -> pa.Table:
    """The namespace's rows at ``version`` by plain pylance: every table row, its leaf at
    its ``read_version`` (``COLUMNS`` only: they exist in every version)."""
    tables = []
    for row in (
        manifest(root, version)
        .to_table(columns=["location", "read_version"], filter="object_type = 'table'")
        .to_pylist()
    ):
        leaf = lance.dataset(f"{root}/{row['location']}", version=row["read_version"])
        tables.append(leaf.to_table(columns=COLUMNS).cast(SCHEMA))
    return pa.concat_tables(tables or [SCHEMA.empty_table()]).sort_by("id")


def manifest_rows(root: str, version: int | None = None) -> pa.Table:
    return manifest(root, version).to_table().sort_by("object_id")


def published(root: str, version: int | None = None) -> dict[str, tuple]:
    """object_id -> (location, read_version, read_branch, read_tag) of the table rows."""
    table = manifest(root, version).to_table(filter="object_type = 'table'").to_pylist()
    return {
        r["object_id"]: (r["location"], r["read_version"], r["read_branch"], r["read_tag"])
        for r in table
    }


def schema_of(root: str, version: int | None = None) -> list[tuple[str, int]]:
    """(name, field id) of each top-level column of the namespace schema at ``version``."""
    fields = json.loads(manifest(root, version).metadata["schema"])["fields"]
    return [(f["name"], int(f["metadata"]["lance:field_id"])) for f in fields]


def specs_of(root: str, version: int | None = None) -> dict[str, str]:
    meta = manifest(root, version).metadata
    return {k: v for k, v in meta.items() if k.startswith(SPEC_PREFIX)}


def latest_version(root: str) -> int:
    return manifest(root).version


@pytest.fixture
def history(tmp_path):
    """A namespace at version ``n`` (FR, US, DE), then appends, a delete, a dynamic
    overwrite, an added column, a spec evolution and new partitions after it; ``m``
    is a version in between."""
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "country")
    ns.append(rows([1, 2, 3, 4], ["FR", "US", "DE", "FR"]))
    n = ns.version
    ns.append(rows([5, 6], ["US", "JP"]))  # JP: a new partition
    ns.delete("country = 'FR'")
    m = ns.version
    ns.overwrite(rows([30], ["DE"]), dynamic=True)
    ns.add_column("extra", pa.int32())
    ns.append(pa.table({"id": [7], "country": ["IT"], "amount": [7.0], "extra": [7]}))
    ns.evolve_spec("bucket(4, id)")
    ns.append(rows([8, 9], ["US", "BR"]))
    return ns, n, m


def test_restore_brings_back_rows_schema_specs_and_rows_of_manifest(history):
    ns, n, m = history
    root = ns.root
    expected, expected_m = plain_rows(root, n), plain_rows(root, m)
    assert expected["id"].to_pylist() == [1, 2, 3, 4]
    before = latest_version(root)
    versions_before = [v["version"] for v in manifest(root).versions()]
    moved = published(root, before)
    old = published(root, n)
    changed = sum(moved.get(k) != old.get(k) for k in moved.keys() | old.keys())

    result = ns.restore(n)

    assert result.restored_from == n
    assert result.version == latest_version(root) > before
    assert result.partitions_changed == changed > 0
    assert ns.version == result.version
    # rows: our reader and plain pylance both give version n's rows
    assert ns.to_arrow().select(COLUMNS).sort_by("id").equals(expected)
    assert plain_rows(root).equals(expected)
    # __manifest itself: the same rows (JP, IT and the bucket partitions unpublished)
    assert manifest_rows(root).equals(manifest_rows(root, n))
    assert [name for name, _ in schema_of(root)] == COLUMNS == ns.schema.names
    assert specs_of(root) == specs_of(root, n) and len(specs_of(root, before)) == 2
    assert sorted(ns.specs) == [int(k[len(SPEC_PREFIX) :]) for k in specs_of(root, n)]
    assert ns.validate() == []
    # every version before it still reads as it did
    assert [v["version"] for v in manifest(root).versions()][: len(versions_before)] == (
        versions_before
    )
    assert lp.open(root, version=m).to_arrow().select(COLUMNS).sort_by("id").equals(expected_m)
    assert plain_rows(root, before)["id"].to_pylist() == [2, 5, 6, 7, 8, 9, 30]


def test_writes_after_a_restore_build_on_the_restored_content(history):
    ns, n, _m = history
    root = ns.root
    expected = plain_rows(root, n)
    retired = dict(schema_of(root, latest_version(root)))["extra"]
    ns.restore(n)
    more = rows([40, 41, 42], ["FR", "JP", "DE"])  # an old partition, a once-new one, DE
    ns.append(more)
    assert plain_rows(root).equals(pa.concat_tables([expected, more]).sort_by("id"))
    assert ns.to_arrow().sort_by("id").equals(plain_rows(root))
    ns.delete("id = 3")
    assert plain_rows(root)["id"].to_pylist() == [1, 2, 4, 40, 41, 42]
    # field ids are never reused: the column added after n keeps its id retired
    ns.add_column("extra", pa.int32())
    assert dict(schema_of(root))["extra"] > retired
    assert ns.validate() == []
    assert ns.vacuum(older_than=dt.timedelta(0)) is not None and ns.validate() == []


def test_restore_by_tag(history):
    ns, n, _m = history
    expected = plain_rows(ns.root, n)
    ns.tag("good", version=n)
    result = ns.restore("good")
    assert result.restored_from == n
    assert plain_rows(ns.root).equals(expected)
    assert manifest_rows(ns.root).equals(manifest_rows(ns.root, n))


def test_restoring_the_current_version_commits_nothing(history):
    ns, _n, _m = history
    root = ns.root
    current = latest_version(root)
    before = tree_digest(root)
    result = ns.restore(current)
    assert (result.version, result.restored_from, result.partitions_changed) == (
        current,
        current,
        0,
    )
    assert latest_version(root) == current
    assert tree_digest(root) == before


@pytest.mark.parametrize(
    "target, error, match",
    [
        (999, lp.VersionNotFoundError, r"version 999 .* does not exist"),
        (1, lp.VersionNotFoundError, r"version 1 .* does not exist"),
        ("nope", lp.VersionNotFoundError, r"has no tag 'nope'"),
        (True, TypeError, r"version must be an integer"),
        (2.0, TypeError, r"version must be an integer"),
        (None, TypeError, r"restore needs"),
        (dt.datetime(2026, 1, 1), TypeError, r"asof"),
    ],
)
def test_a_version_or_tag_that_does_not_exist_is_refused_and_changes_nothing(
    history, target, error, match
):
    ns, _n, _m = history
    root = ns.root
    before, current = tree_digest(root), latest_version(root)
    with pytest.raises(error, match=match):
        ns.restore(target)
    assert tree_digest(root) == before and latest_version(root) == current


def test_a_cleaned_up_version_is_refused_and_changes_nothing(history):
    ns, n, _m = history
    root = ns.root
    ns.cleanup(older_than=dt.timedelta(0))
    assert n not in [v["version"] for v in manifest(root).versions()]
    before, current = tree_digest(root), latest_version(root)
    with pytest.raises(lp.VersionNotFoundError, match=r"cleaned up"):
        ns.restore(n)
    assert tree_digest(root) == before and latest_version(root) == current


def test_a_version_whose_leaf_version_was_removed_is_refused_and_changes_nothing(history):
    ns, n, _m = history
    root = ns.root
    # plain Lance removes the old versions of one leaf version n reads (a foreign cleanup)
    now = {loc: v for loc, v, _b, _t in published(root).values()}
    location, version = next(
        (loc, v) for loc, v, _b, _t in published(root, n).values() if now.get(loc, v) != v
    )
    leaf = lance.dataset(f"{root}/{location}")
    leaf.cleanup_old_versions(older_than=dt.timedelta(0), error_if_tagged_old_versions=False)
    assert version not in [v["version"] for v in lance.dataset(f"{root}/{location}").versions()]
    before, current = tree_digest(root), latest_version(root)
    with pytest.raises(lp.RestoreError, match=rf"{re.escape(repr(location))} version {version}"):
        ns.restore(n)
    assert tree_digest(root) == before and latest_version(root) == current


def test_cleanup_keeps_the_version_a_live_restore_lease_names(history, monkeypatch):
    ns, n, _m = history
    root = ns.root
    # without the slack, a lease protects only what is newer than its start: every
    # version here is older, so only ``keeps`` can save version n
    monkeypatch.setattr(leases, "CLOCK_SLACK", dt.timedelta(0))
    with leases.hold(ns.manifest, "restore", keeps=(n,)):
        ns.cleanup(older_than=dt.timedelta(0))
        assert n in [v["version"] for v in manifest(root).versions()]
        expected = plain_rows(root, n)  # and every leaf version it reads
    assert ns.restore(n).restored_from == n
    assert plain_rows(root).equals(expected)
    ns.cleanup(older_than=dt.timedelta(0))  # no lease now: n goes
    assert n not in [v["version"] for v in manifest(root).versions()]
    assert plain_rows(root).equals(expected)  # the restored version reads on


def test_a_restore_waits_for_a_running_cleanup_and_changes_nothing(history):
    ns, n, _m = history
    root = ns.root
    with leases.hold(ns.manifest, "cleanup", removes_versions=True):
        before, current = tree_digest(root), latest_version(root)
        with pytest.raises(lp.CommitConflictError, match=r"a cleanup .* is running"):
            ns.restore(n)
        assert tree_digest(root) == before and latest_version(root) == current
    assert ns.restore(n).restored_from == n


def test_a_cleanup_lease_holds_back_no_other_maintenance(history):
    ns, _n, _m = history
    with leases.hold(ns.manifest, "cleanup", removes_versions=True):
        assert leases.protected_since(ns.manifest) == (None, 0)
        assert ns.vacuum(older_than=dt.timedelta(0)).live_leases == 0


def test_a_pinned_handle_refuses_to_restore(history):
    ns, n, _m = history
    pinned = lp.open(ns.root, version=n)
    before = tree_digest(ns.root)
    with pytest.raises(lp.PinnedSnapshotError, match="restore"):
        pinned.restore(n)
    assert tree_digest(ns.root) == before


def test_plain_pylance_reads_the_restored_manifest(history):
    ns, n, _m = history
    before = latest_version(ns.root)
    ns.restore(n)
    ds = lance.dataset(f"{ns.root}/__manifest")
    assert ds.to_table().sort_by("object_id").equals(manifest_rows(ns.root, n))
    assert ds.metadata["schema"] == manifest(ns.root, n).metadata["schema"]
    # the restore's commit says what it restored; the next one only keeps the id mark
    new = range(before + 1, ds.version + 1)
    props = [ds.read_transaction(v).transaction_properties or {} for v in new]
    assert props[0].get("lp.restored_from") == str(n)
    marks = [int(manifest(ns.root, v).metadata[MARK_KEY]) for v in (before, n, ds.version)]
    assert marks[0] == marks[2] > marks[1]  # a column was added after n


def test_a_commit_that_lands_while_a_restore_runs_is_ordered_before_it(history, monkeypatch):
    ns, n, _m = history
    root = ns.root
    expected = plain_rows(root, n)
    from lance_partitioned.operations.maintain import restore as restore_module

    check = restore_module._check_leaves

    def check_then_someone_appends(*args):
        check(*args)
        lp.open(root).append(rows([77], ["FR"]))

    monkeypatch.setattr(restore_module, "_check_leaves", check_then_someone_appends)
    before = latest_version(root)
    result = ns.restore(n)
    assert plain_rows(root).equals(expected)  # the restore came last: its content wins
    assert 77 in plain_rows(root, before + 1)["id"].to_pylist()  # the append is history
    assert result.version == latest_version(root) and ns.validate() == []


@pytest.mark.parametrize("kind", ["update", "insert"])
def test_a_commit_planned_before_a_restore_conflicts(history, kind):
    ns, n, _m = history
    base = ns.manifest.dataset()  # a writer read this version, then the restore landed
    ns.restore(n)
    row = base.to_table(filter="object_type = 'table'").slice(0, 1)
    if kind == "insert":
        row = row.set_column(0, "object_id", pa.array(["v1$brandnew"]))
    with pytest.raises(lp.CommitConflictError):
        ns.manifest.commit(base, row)
    assert plain_rows(ns.root).equals(plain_rows(ns.root, n))


def test_cli_restore(history):
    ns, n, _m = history
    root = ns.root
    expected = plain_rows(root, n)
    out = run("restore", root, str(n))
    assert re.search(rf"restored version {n} as __manifest version \d+", out.stdout)
    assert plain_rows(root).equals(expected)
    ns.refresh().tag("restored")
    data = run_json("restore", root, "restored")
    assert data == {
        "version": latest_version(root),
        "restored_from": latest_version(root),
        "partitions_changed": 0,
    }
    before = tree_digest(root)
    err = run("restore", root, "nope", ok=1).stderr
    assert err.startswith("error: ") and "has no tag 'nope'" in err and "Traceback" not in err
    err = run("restore", root, str(n), "--version", str(n), ok=1).stderr
    assert "pinned" in err and "Traceback" not in err
    assert tree_digest(root) == before
