"""A handle pinned to an old version (``lp.open(root, version=...)``) never changes the namespace.

Every public method of ``PartitionedNamespace`` is classified below: a reader,
a call allowed on a pinned handle (it names or tidies versions, never changes
what a version holds), or a mutator. A new public method fails
``test_every_public_method_is_classified`` until it is put in one of them, so a
mutator cannot be added without the pinned guard being tested for it.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from conftest import EVENTS_SCHEMA, make_events
from txn_helpers import disk_listing

import lance_partitioned as lp
from lance_partitioned.namespace import PartitionedNamespace

READERS = {
    "create",
    "open",
    "refresh",
    "scan",
    "plan",
    "to_arrow",
    "count",
    "versions",
    "history",
    "changes",
    "validate",
    "partitions",
    "namespace_properties",
    "describe",
    "tags",
    "list_indexes",
    "search",
}
# Allowed on a pinned handle, which stays pinned: tags name versions (naming the
# pinned one is what a pinned handle is for); cleanup/vacuum remove only what no
# retained version needs.
PINNED_OK = {"tag", "delete_tag", "cleanup", "vacuum"}
# Each mutator with arguments it accepts on an unpinned handle (checked below, in
# this order), so the pinned refusal cannot come from bad arguments.
MUTATORS = {
    "append": [lambda ns: ns.append(make_events(3, start_id=900))],
    "overwrite": [
        lambda ns: ns.overwrite(make_events(3, start_id=900), dynamic=True),
        lambda ns: ns.overwrite(make_events(60, start_id=1000)),
    ],
    "delete": [lambda ns: ns.delete("id = 1000")],
    "add_column": [lambda ns: ns.add_column("extra", pa.int32())],
    "widen_column": [lambda ns: ns.widen_column("extra", pa.int64())],
    "rename_column": [lambda ns: ns.rename_column("amount", "amt")],
    "drop_column": [lambda ns: ns.drop_column("ts")],
    "evolve_spec": [lambda ns: ns.evolve_spec("country")],
    "rewrite_partitions": [lambda ns: ns.rewrite_partitions()],
    "realign_field_ids": [lambda ns: ns.realign_field_ids()],
    "align_leaves": [lambda ns: ns.align_leaves()],
    "repair": [lambda ns: ns.repair()],
    "compact": [lambda ns: ns.compact()],
    "create_index": [lambda ns: ns.create_index("id", "BTREE")],
    "optimize_indexes": [lambda ns: ns.optimize_indexes()],
    "drop_index": [lambda ns: ns.drop_index("id_btree")],
    "restore": [lambda ns: ns.restore(ns.versions()[0]["version"])],
    "merge": [lambda ns: ns.merge(make_events(3, start_id=900), on="id")],
    "update": [lambda ns: ns.update({"amount": "0"}, where="id = 1")],
}


def public_methods() -> set[str]:
    return {
        name
        # the facade's methods live in mixins (lance_partitioned/facade/): the whole MRO
        for klass in PartitionedNamespace.__mro__
        for name, value in vars(klass).items()
        if not name.startswith("_")
        and not isinstance(value, property)
        and callable(getattr(PartitionedNamespace, name))
    }


def test_every_public_method_is_classified():
    assert public_methods() == READERS | PINNED_OK | set(MUTATORS)
    assert not (READERS & PINNED_OK or READERS & set(MUTATORS) or PINNED_OK & set(MUTATORS))


@pytest.fixture
def pinned(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), EVENTS_SCHEMA, "year(event_date), country")
    ns.append(make_events(50))
    old = lp.open(ns.root, version=ns.version)
    ns.append(make_events(20, start_id=500))  # the pinned version is no longer the latest
    return old


def test_every_mutator_refuses_on_a_pinned_handle_and_changes_nothing(pinned):
    root, version = pinned.root, pinned.version
    expected = pinned.to_arrow().sort_by("id")
    for name, calls in MUTATORS.items():
        for call in calls:
            before, latest = disk_listing(root), lp.open(root).version
            with pytest.raises(lp.PinnedSnapshotError, match=f"pinned.*{name}") as info:
                call(pinned)
            assert not isinstance(info.value, lp.SchemaError), name
            assert disk_listing(root) == before, f"{name} changed files on disk"
            assert lp.open(root).version == latest, name
            assert pinned.version == version, f"{name} unpinned the handle"
    assert pinned.to_arrow().sort_by("id").equals(expected)
    # the same calls are fine once the handle is not pinned
    for calls in MUTATORS.values():
        for call in calls:
            call(pinned.refresh())


def test_pinned_snapshot_error_is_not_a_schema_error():
    assert issubclass(lp.PinnedSnapshotError, lp.PartitionedNamespaceError)
    assert not issubclass(lp.PinnedSnapshotError, lp.SchemaError)


def test_tags_and_housekeeping_work_on_a_pinned_handle_and_keep_it_pinned(pinned):
    version = pinned.version
    assert pinned.tag("old") == version
    assert lp.open(pinned.root, version="old").version == version
    pinned.delete_tag("old")
    pinned.cleanup(older_than=dt.timedelta(days=7))
    pinned.vacuum(older_than=dt.timedelta(days=1))
    assert pinned.version == version
    assert pinned.count() == 50
