"""The conflict rules docs/CHANGES.md §5 states hold. (Its examples, like those of
every page of docs/, run in tests/test_docs_examples.py.)"""

from __future__ import annotations

import pyarrow as pa

import lance_partitioned as lp
from lance_partitioned.operations.change import merge as merge_module


def test_two_merges_of_one_new_key_never_duplicate_it(tmp_path, monkeypatch):
    """Merge A plans (key 5 is new: an insert); merge B inserts key 5 and publishes
    before A does. A's commit conflicts, A plans again, finds key 5 and updates it:
    the key is there once, with A's values (A published last)."""
    schema = pa.schema([("id", pa.int64()), ("g", pa.string()), ("v", pa.float64())])
    root = str(tmp_path / "ns")
    lp.create(root, schema, "g").append(pa.table({"id": [1], "g": ["a"], "v": [0.0]}, schema))
    real = merge_module.plan_merge
    plans = []

    def plan_then_let_b_publish(snapshot, source, clauses):
        planned = real(snapshot, source, clauses)
        plans.append(snapshot.version)
        if len(plans) == 1:  # A's first plan: B runs to its commit before A publishes
            b = pa.table({"id": [5], "g": ["b"], "v": [2.0]}, schema)
            lp.open(root).merge(b, on="id").when_not_matched_insert_all().execute()
        return planned

    monkeypatch.setattr(merge_module, "plan_merge", plan_then_let_b_publish)
    a = pa.table({"id": [5], "g": ["a"], "v": [1.0]}, schema)
    result = (
        lp.open(root).merge(a, on="id").when_matched_update_all().when_not_matched_insert_all()
    ).execute()
    assert len(plans) == 3 and plans[2] > plans[0]  # A, B, then A again on B's version
    assert (result.rows_inserted, result.rows_updated) == (0, 1)
    rows = lp.open(root).to_arrow().to_pylist()
    assert sorted((r["id"], r["g"], r["v"]) for r in rows) == [(1, "a", 0.0), (5, "a", 1.0)]


def test_an_append_published_while_a_merge_plans_is_kept(tmp_path, monkeypatch):
    """CHANGES.md §5: an append into a partition the merge does not touch, published
    while the merge is planned, survives the merge (which may plan again: Lance
    refuses an update of ``__manifest`` another update preempted), and the merge's
    change is there too."""
    schema = pa.schema([("id", pa.int64()), ("g", pa.string()), ("v", pa.float64())])
    root = str(tmp_path / "ns")
    ns = lp.create(root, schema, "g")
    ns.append(pa.table({"id": [1, 2], "g": ["a", "b"], "v": [0.0, 0.0]}, schema))
    real = merge_module.plan_merge
    plans = []

    def plan_then_append(snapshot, source, clauses):
        planned = real(snapshot, source, clauses)
        plans.append(snapshot.version)
        if len(plans) == 1:
            lp.open(root).append(pa.table({"id": [9], "g": ["b"], "v": [9.0]}, schema))
        return planned

    monkeypatch.setattr(merge_module, "plan_merge", plan_then_append)
    change = pa.table({"id": [1], "g": ["a"], "v": [1.0]}, schema)
    result = lp.open(root).merge(change, on="id").when_matched_update_all().execute()
    assert result.rows_updated == 1 and result.version == lp.open(root).version
    rows = lp.open(root).to_arrow().to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, 1.0), (2, 0.0), (9, 9.0)]
