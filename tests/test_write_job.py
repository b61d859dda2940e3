"""The empty-write rule of ``WriteJob``, as every caller sees it.

A write that wrote no rows publishes nothing (no new ``__manifest`` version),
unless it removes partitions: a full overwrite empties the namespace, and
``rewrite_partitions`` removes the partitions it moved even when they hold no
rows. Expectations come from the ``__manifest`` table read with plain pylance.
"""

from __future__ import annotations

import lance
import pytest
from conftest import EVENTS_SCHEMA, make_events

import lance_partitioned as lp
from lance_partitioned.operations.write.job import WriteJob
from lance_partitioned.operations.write.publish import WriteMode


@pytest.fixture
def ns(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), EVENTS_SCHEMA, "country")
    ns.append(make_events(20))
    return ns


def manifest_tables(ns) -> list[str]:
    ds = lance.dataset(ns.manifest.uri)
    rows = ds.to_table(columns=["object_id"], filter="object_type = 'table'")
    return sorted(rows["object_id"].to_pylist())


def manifest_version(ns) -> int:
    return lance.dataset(ns.manifest.uri).version


@pytest.mark.parametrize(
    "write",
    [lambda ns, t: ns.append(t), lambda ns, t: ns.overwrite(t, dynamic=True)],
    ids=["append", "dynamic"],
)
def test_an_empty_append_or_dynamic_overwrite_publishes_nothing(ns, write):
    version, tables = manifest_version(ns), manifest_tables(ns)
    result = write(ns, make_events(0))
    assert (result.version, result.rows, result.partitions, result.new_partitions) == (
        version,
        0,
        0,
        0,
    )
    assert manifest_version(ns) == version
    assert manifest_tables(ns) == tables
    assert ns.count() == 20


def test_an_empty_overwrite_commits_and_empties_the_namespace(ns):
    version = manifest_version(ns)
    result = ns.overwrite(make_events(0))
    assert result.version == manifest_version(ns) == version + 1
    assert manifest_tables(ns) == []
    assert lp.open(ns.root).count() == 0


def test_rewrite_of_empty_partitions_still_removes_them(ns):
    old = manifest_tables(ns)
    ns.delete("true")  # the partitions stay, with no rows
    ns.evolve_spec("year(event_date)")
    version = manifest_version(ns)
    result = ns.rewrite_partitions()
    assert result.rows == 0 and result.partitions == 0
    assert result.version == manifest_version(ns) == version + 1
    assert not set(old) & set(manifest_tables(ns))


def test_write_job_rule_by_mode(ns):
    written = WriteJob(ns.manifest, ns.snapshot).write(lambda writer: None)
    assert not written.leaves
    for mode, replaces, nothing in [
        (WriteMode.APPEND, (), True),
        (WriteMode.DYNAMIC, (), True),
        (WriteMode.OVERWRITE, (), False),
        (WriteMode.APPEND, ("v1$x$dataset",), False),
    ]:
        job = WriteJob(ns.manifest, ns.snapshot, mode, replaces=replaces)
        assert job.publishes_nothing(written) is nothing, (mode, replaces)
