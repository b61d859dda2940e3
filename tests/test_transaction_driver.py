"""The one transaction driver (``operations.txn.driver.LeafTransaction``), issue 29 item 1.

Every operation that stages leaves goes through it, so each gets the whole
protocol: a lease that keeps ``vacuum`` away from what it staged, the check
before publishing, and, when the ``__manifest`` commit lands but then raises
(an object store's PUT that succeeded before the connection broke), no
rollback over versions that are now published.
"""

from __future__ import annotations

import datetime as dt
import os

import lance
import pyarrow as pa
import pytest
from test_field_ids import SCHEMA, _drift, published_leaves, rows

import lance_partitioned as lp
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.operations.evolve import realign
from lance_partitioned.operations.txn import driver, restage


def _drifted(root: str) -> pa.Table:
    """A namespace with one leaf whose Lance field ids drift (realign has work), with a
    deleted row: realign rewrites that fragment, so it stages new data files."""
    ns = lp.create(root, SCHEMA, "p")
    ns.drop_column("j")
    ns.append(rows([0], "x", k=["a"]))
    ((_, location, _),) = published_leaves(root)
    table = pa.table({"id": [1, 2, 3], "k": ["a", "b", "c"], "p": ["x", "x", "x"]})
    _drift(root, location, table)
    leaf = lance.dataset(os.path.join(root, location))
    leaf.delete("id = 3")
    manifest = lance.dataset(os.path.join(root, "__manifest"))
    row = manifest.to_table(filter=f"location = '{location}'")
    index = row.schema.get_field_index("read_version")
    version = lance.dataset(os.path.join(root, location)).version
    Manifest(root).commit(
        manifest, row.set_column(index, "read_version", pa.array([version], pa.uint64()))
    )
    return lp.open(root).to_arrow().sort_by("id")


def _vacuum_at(point: str, root: str):
    def hook(name: str) -> None:
        if name == point:
            lp.open(root).vacuum(older_than=dt.timedelta(0))

    return hook


def test_realign_racing_vacuum_publishes_nothing_broken(tmp_path, monkeypatch):
    root = str(tmp_path / "ns")
    expected = _drifted(root)
    hook = _vacuum_at("leaves_staged", root)
    for module in (realign, restage, driver):
        monkeypatch.setattr(module, "pause_point", hook, raising=False)
    try:
        lp.open(root).realign_field_ids()
    except lp.PartitionedNamespaceError:
        pass  # refusing to publish is fine; publishing what vacuum removed is not
    monkeypatch.undo()
    ns = lp.open(root)
    assert ns.to_arrow().sort_by("id").equals(expected)
    for oid, location, version in published_leaves(root):
        leaf = lance.dataset(os.path.join(root, location), version=version)
        assert leaf.to_table().num_rows == leaf.count_rows(), oid  # every file is there


def _commit_lands_then_raises(monkeypatch):
    real = Manifest.commit

    def commit(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise OSError("connection reset after the PUT succeeded (injected)")

    monkeypatch.setattr(Manifest, "commit", commit)


def _leaves_at_their_published_versions(root: str) -> None:
    """No version was committed over a published one: plain Lance readers of the latest
    version see what the namespace publishes."""
    for oid, location, version in published_leaves(root):
        assert lance.dataset(os.path.join(root, location)).version == version, oid


@pytest.mark.parametrize("operation", ["compact", "realign"])
def test_a_commit_that_lands_then_raises_keeps_the_published_leaves(
    tmp_path, monkeypatch, operation
):
    root = str(tmp_path / "ns")
    if operation == "realign":
        expected = _drifted(root)
    else:
        ns = lp.create(root, SCHEMA, "p")
        for i in range(3):  # three small fragments to compact in each leaf
            ns.append(pa.concat_tables([rows([i], "x", k=["a"]), rows([10 + i], "y", k=["b"])]))
        expected = ns.to_arrow().sort_by("id")
    before = lp.open(root).version
    _commit_lands_then_raises(monkeypatch)
    with pytest.raises(OSError, match="injected"):
        lp.open(root).compact() if operation == "compact" else lp.open(root).realign_field_ids()
    monkeypatch.undo()
    ns = lp.open(root)
    assert ns.version > before  # the commit did land
    assert ns.to_arrow().sort_by("id").equals(expected)
    _leaves_at_their_published_versions(root)


def test_a_failed_transaction_says_so_and_rolls_its_leaves_back_in_parallel(
    tmp_path, monkeypatch, caplog
):
    """A transaction that fails after staging restores its leaves on the driver's threads
    (at a million partitions, one after another took about as long as the job itself), and
    logs why before it starts."""
    import threading

    from lance_partitioned.operations.maintain import maintenance

    root = str(tmp_path / "ns")
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    ns = lp.create(root, schema, "p")
    parts = ["a", "b", "c", "d"]
    for first in (0, 100):  # two fragments per leaf: compaction stages every leaf
        ns.append(pa.table({"id": [first + i for i in range(4)], "p": parts}, schema=schema))
    expected = ns.to_arrow().sort_by("id")

    def fail(point: str) -> None:
        if point == "leaves_staged":
            raise RuntimeError("boom")

    together = threading.Barrier(2, timeout=10)  # met only if two leaves restore at once
    real = driver.unstage_leaf

    def unstage(staged, txn, opts):
        together.wait()
        real(staged, txn, opts)

    monkeypatch.setattr(maintenance, "pause_point", fail)
    monkeypatch.setattr(driver, "unstage_leaf", unstage)
    caplog.set_level("INFO", logger=driver.__name__)
    with pytest.raises(RuntimeError, match="boom"):
        lp.open(root).compact()
    assert "compaction failed (RuntimeError: boom); rolling back 4 staged partitions" in caplog.text
    for _, location, _ in published_leaves(root):  # plain Lance: the latest version is restored
        assert len(lance.dataset(os.path.join(root, location)).get_fragments()) == 2
    ns = lp.open(root)
    assert ns.to_arrow().sort_by("id").equals(expected)
    assert ns.validate() == []


def test_publishing_says_how_long_each_step_took(tmp_path, monkeypatch, caplog):
    """The rows, the check before publishing and the commit are timed apart (DEBUG log,
    ``LeafTransaction.timings``): two of them slowed by known sleeps show at least those."""
    import re
    import time

    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "p")
    for i in range(2):  # two fragments per leaf: compaction stages both leaves
        ns.append(pa.concat_tables([rows([i], "x", k=["a"]), rows([10 + i], "y", k=["b"])]))

    def slowed(fn, seconds):
        def run(*args, **kwargs):
            time.sleep(seconds)
            return fn(*args, **kwargs)

        return run

    monkeypatch.setattr(driver, "republish_rows", slowed(driver.republish_rows, 0.2))
    monkeypatch.setattr(driver, "lacking", slowed(driver.lacking, 0.3))
    caplog.set_level("DEBUG", logger=driver.__name__)
    assert lp.open(root).compact().leaves_compacted == 2
    said = re.findall(r"compaction over 2 staged partitions: (\w+) took ([\d.]+) s", caplog.text)
    took = {step: float(seconds) for step, seconds in said}
    assert [step for step, _ in said] == ["rows", "check", "commit"]
    assert took["rows"] >= 0.2 and took["check"] >= 0.3
