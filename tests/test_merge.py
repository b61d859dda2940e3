"""MERGE, UPDATE and overwrite by predicate against an independent oracle (issue 30).

The oracle applies the same change to the rows as plain Python dictionaries
(SQL MERGE semantics written out: a NULL key matches nothing, the first
matched clause whose condition holds wins, unmatched source rows are
inserted, unmatched target rows deleted by ``when_not_matched_by_source``),
and every row of the namespace after the change must equal it. Change batches
are random: updates (some moving a row to another partition), deletes, inserts,
NULL keys and keys absent from the namespace, over namespaces partitioned by
identity, bucket, truncate, time hierarchies and an evolved spec with a column
added, widened and renamed. After each change ``validate()`` is clean and every
leaf's Lance field ids are the namespace's.
"""

from __future__ import annotations

import datetime as dt
import math
import random

import lance
import pyarrow as pa
import pytest
from conftest import tree_digest

import lance_partitioned as lp

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("g", pa.int32()),
        pa.field("d", pa.date32()),
        pa.field("s", pa.string()),
        pa.field("v", pa.float64()),
    ]
)
SPECS = ["g", "bucket(4, id)", "truncate(2, s)", "year(d), month(d)", "g, bucket(3, id)", ""]
BASE = dt.date(2023, 11, 1)


def rows(n: int, start: int, seed: int) -> list[dict]:
    rnd = random.Random(seed)
    return [
        {
            "id": start + i,
            "g": rnd.randrange(4),
            "d": BASE + dt.timedelta(days=rnd.randrange(500)),
            "s": rnd.choice(["aa", "ab", "ba", "bb", "c", None]),
            "v": rnd.choice([float(rnd.randrange(100)), None, -0.0, 1.5]),
        }
        for i in range(n)
    ]


def table(data: list[dict], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.Table.from_pylist(data, schema=schema)


def change_batch(target: list[dict], seed: int, start: int) -> list[dict]:
    """Random source rows: updates of existing keys (some moving partition), rows tagged
    for deletion, new keys, NULL keys; each non-NULL key at most once."""
    rnd = random.Random(seed)
    keys = [r["id"] for r in target if r["id"] is not None]
    chosen = rnd.sample(keys, min(len(keys), rnd.randrange(1, 25)))
    out = []
    for k in chosen:
        new = rows(1, k, rnd.randrange(10**6))[0]
        new["op"] = rnd.choice(["U", "U", "D"])
        out.append(new)
    for i, new in enumerate(rows(rnd.randrange(0, 10), start, rnd.randrange(10**6))):
        new["op"] = "I"
        if i % 4 == 3:
            new["id"] = None
        out.append(new)
    rnd.shuffle(out)
    return out


def oracle_merge(target, source, on, update=True, update_if=None, delete_if=None, insert=True,
                 by_source_delete_if=None, by_source=False, columns=None):  # fmt: skip
    """SQL MERGE over dictionaries; the conditions are Python twins of the SQL ones."""
    columns = columns or list(target[0]) if target else columns
    by_key = {tuple(s[k] for k in on): s for s in source if all(s[k] is not None for k in on)}
    out, matched = [], set()
    for row in target:
        key = tuple(row[k] for k in on)
        s = None if None in key else by_key.get(key)
        if s is None:
            if by_source and (by_source_delete_if is None or by_source_delete_if(row)):
                continue
            out.append(row)
            continue
        matched.add(key)
        if delete_if is not None and delete_if(s, row):
            continue
        if update and (update_if is None or update_if(s, row)):
            out.append({c: s[c] if c in s else row[c] for c in columns})
        else:
            out.append(row)
    for s in source:
        key = tuple(s[k] for k in on)
        if insert and (None in key or key not in matched):
            out.append({c: s.get(c) for c in columns})
    return out


def canonical(data: list[dict], columns: list[str]) -> list[tuple]:
    def norm(x):
        if isinstance(x, float) and math.isnan(x):
            return ("nan",)
        return (x is None, x if x is not None else 0)

    return sorted(
        (tuple(r[c] for c in columns) for r in data),
        key=lambda t: tuple(norm(x) if not isinstance(x, str) else (False, x) for x in t),
    )


def assert_rows(ns: lp.PartitionedNamespace, expected: list[dict]) -> None:
    columns = ns.schema.names
    got = ns.to_arrow().to_pylist()
    assert canonical(got, columns) == canonical(expected, columns)


def assert_conforms(ns: lp.PartitionedNamespace) -> None:
    """validate() clean (a leaf lagging a widening is allowed) and each leaf's Lance field
    ids equal the namespace's (seed 000)."""
    assert [p for p in ns.validate() if "which lags the namespace" not in p] == []
    ids = {f.name: ns.schema.field_id(f.name) for f in ns.schema.arrow}
    for task in ns.plan():
        ds = lance.dataset(task.uri, version=task.read_version)
        leaf_ids = {f.name(): f.id() for f in ds.lance_schema.fields()}
        for name, fid in ids.items():
            if name in leaf_ids:
                assert leaf_ids[name] == fid, (task.object_id, name)


@pytest.mark.parametrize("spec", SPECS)
def test_random_merges_match_the_oracle(tmp_path, spec):
    target = rows(120, 0, seed=1)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, spec)
    ns.append(table(target), progress=False)
    next_id = 10_000
    for round_ in range(4):
        source = change_batch(target, seed=hash((spec, round_)) % 10**6, start=next_id)
        next_id += 100
        src = table(source, SCHEMA.append(pa.field("op", pa.string())))
        result = (
            ns.merge(src, on="id")
            .when_matched_delete("source.op = 'D'")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        expected = oracle_merge(
            target, source, ["id"], delete_if=lambda s, t: s["op"] == "D", columns=SCHEMA.names
        )
        assert result.rows_deleted == sum(
            1 for s in source if s["op"] == "D" and s["id"] in {t["id"] for t in target}
        )
        assert result.rows_inserted == sum(
            1 for s in source if s["id"] is None or s["id"] not in {t["id"] for t in target}
        )
        target = expected
        assert_rows(ns, target)
        assert result.version == ns.version
    assert_conforms(ns)
    # a reader of plain Lance (pylance's own namespace) sees the same rows
    reopened = lp.open(str(tmp_path / "ns"))
    assert reopened.count() == len(target)


def test_conditions_over_source_and_target(tmp_path):
    target = rows(80, 0, seed=2)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "g")
    ns.append(table(target), progress=False)
    source = [dict(r, v=(r["v"] or 0) + 10, g=(r["g"] + 1) % 4) for r in target[::3]]
    source += rows(5, 500, seed=3)
    result = (
        ns.merge(table(source), on=["id"])
        .when_matched_update(
            set={"v": "source.v + target.v", "g": "source.g"},
            condition="target.v IS NOT NULL AND target.v > 20",
        )
        .when_matched_delete(condition="target.v IS NULL")
        .when_not_matched_insert_all(condition="source.id % 2 = 0")
        .execute()
    )
    by_id = {s["id"]: s for s in source}
    expected = []
    for t in target:
        s = by_id.get(t["id"])
        if s is None:
            expected.append(t)
        elif t["v"] is not None and t["v"] > 20:
            expected.append(dict(t, v=s["v"] + t["v"], g=s["g"]))
        elif t["v"] is None:
            continue
        else:
            expected.append(t)
    ids = {t["id"] for t in target}
    expected += [s for s in source if s["id"] not in ids and s["id"] % 2 == 0]
    assert_rows(ns, expected)
    assert result.rows_updated == sum(
        1 for t in target if t["id"] in by_id and t["v"] is not None and t["v"] > 20
    )
    assert_conforms(ns)


def test_not_matched_by_source_delete(tmp_path):
    target = rows(60, 0, seed=4)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "bucket(4, id)")
    ns.append(table(target), progress=False)
    source = target[:20]
    (
        ns.merge(table(source), on="id")
        .when_matched_update_all()
        .when_not_matched_by_source_delete(condition="target.g <> 2")
        .execute()
    )
    expected = oracle_merge(
        target, source, ["id"], insert=False, by_source=True,
        by_source_delete_if=lambda t: t["g"] != 2, columns=SCHEMA.names,
    )  # fmt: skip
    assert_rows(ns, expected)


def test_merge_with_partial_source_columns_keeps_the_rest(tmp_path):
    target = rows(40, 0, seed=5)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "g")
    ns.append(table(target), progress=False)
    src = pa.table({"id": pa.array([1, 2, 999], pa.int64()), "v": [7.0, 8.0, 9.0]})
    ns.merge(src, on="id").when_matched_update_all().when_not_matched_insert_all().execute()
    expected = [dict(t, v={1: 7.0, 2: 8.0}[t["id"]]) if t["id"] in (1, 2) else t for t in target]
    expected.append({"id": 999, "g": None, "d": None, "s": None, "v": 9.0})
    assert_rows(ns, expected)


def test_merge_over_an_evolved_namespace(tmp_path):
    """Leaves of an old spec, a renamed and a widened column, a column added later."""
    schema = pa.schema([("id", pa.int64()), ("g", pa.int32()), ("x", pa.float32())])
    old = [{"id": i, "g": i % 3, "x": float(i) / 4} for i in range(60)]
    ns = lp.create(str(tmp_path / "ns"), schema, "g")
    ns.append(pa.Table.from_pylist(old, schema=schema), progress=False)
    ns.evolve_spec("bucket(4, id)")
    ns.widen_column("x", pa.float64())
    ns.rename_column("x", "y")
    ns.add_column("w", pa.string())
    current = [{"id": r["id"], "g": r["g"], "y": r["x"], "w": None} for r in old]
    new_schema = pa.schema(
        [("id", pa.int64()), ("g", pa.int32()), ("y", pa.float64()), ("w", pa.string())]
    )
    more = [{"id": 100 + i, "g": i % 3, "y": 0.1 * i, "w": "n"} for i in range(20)]
    ns.append(pa.Table.from_pylist(more, schema=new_schema), progress=False)
    current += more
    source = [{"id": i, "g": (i + 1) % 3, "y": 0.1, "w": "m"} for i in (0, 5, 101, 110, 500)]
    (
        ns.merge(pa.Table.from_pylist(source, schema=new_schema), on="id")
        .when_matched_update_all(condition="target.y < 10")
        .when_not_matched_insert_all()
        .execute()
    )
    expected = oracle_merge(
        current, source, ["id"], update_if=lambda s, t: t["y"] < 10, columns=new_schema.names
    )
    assert_rows(ns, expected)
    assert_conforms(ns)


def test_update_matches_the_oracle(tmp_path):
    target = rows(150, 0, seed=6)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "g, year(d)")
    ns.append(table(target), progress=False)
    result = ns.update({"v": "coalesce(v, 0) * 2", "g": "(g + 1) % 4"}, where="s = 'aa' OR v > 50")
    expected, count = [], 0
    for t in target:
        if t["s"] == "aa" or (t["v"] is not None and t["v"] > 50):
            expected.append(dict(t, v=(t["v"] or 0) * 2, g=(t["g"] + 1) % 4))
            count += 1
        else:
            expected.append(t)
    assert result.rows_updated == count
    assert_rows(ns, expected)
    assert_conforms(ns)
    # a row moved to another partition is found by pruning on its new value
    moved = [e for e, t in zip(expected, target, strict=True) if e["g"] != t["g"]]
    assert ns.count(f"g = {moved[0]['g']}") == sum(1 for e in expected if e["g"] == moved[0]["g"])


def test_update_with_no_match_publishes_nothing(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "g")
    ns.append(table(rows(10, 0, 7)), progress=False)
    before = ns.version
    result = ns.update({"v": "1"}, where="id > 1000")
    assert (result.version, result.rows_updated, result.partitions_touched) == (before, 0, 0)
    assert lp.open(str(tmp_path / "ns")).version == before


def test_overwrite_by_predicate(tmp_path):
    target = rows(100, 0, seed=8)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "g")
    ns.append(table(target), progress=False)
    new = [dict(r, g=2) for r in rows(7, 1000, seed=9)]
    result = ns.overwrite(table(new), where="g = 2")
    expected = [t for t in target if t["g"] != 2] + new
    assert_rows(ns, expected)
    assert result.rows_deleted == sum(1 for t in target if t["g"] == 2)
    assert result.rows_written == 7
    assert_conforms(ns)


@pytest.fixture
def filled(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "g")
    ns.append(table(rows(30, 0, 10)), progress=False)
    return ns, str(tmp_path / "ns")


REFUSALS = [
    (
        lambda ns: ns.merge(table([{"id": 1}, {"id": 1}]), on="id").when_matched_update_all().execute(),
        lp.DuplicateKeyError,
        "{'id': 1}",
    ),
    (lambda ns: ns.merge(table([{"id": 1}]), on="nope").when_matched_update_all().execute(), lp.ColumnNotFoundError, "nope"),
    (lambda ns: ns.merge(pa.table({"v": [1.0]}), on="id").when_matched_update_all().execute(), lp.SchemaError, "'id'"),
    (lambda ns: ns.merge(pa.table({"id": ["x"]}), on="id").when_matched_update_all().execute(), lp.SchemaError, "'id'"),
    (lambda ns: ns.merge(table([{"id": 1}]), on="id").execute(), lp.InvalidArgumentError, "clause"),
    (lambda ns: ns.merge(table([{"id": 1}]), on="id").when_matched_delete("  ").execute(), lp.InvalidArgumentError, "blank"),
    (lambda ns: ns.merge(table([{"id": 1}]), on="id").when_matched_delete("source.nope = 1").execute(), lp.InvalidArgumentError, "nope"),
    (lambda ns: ns.merge(table([{"id": 1}]), on="id").when_matched_delete("source.v + 1").execute(), lp.InvalidArgumentError, "boolean"),
    (lambda ns: ns.merge(table([{"id": 1}]), on="id").when_matched_update(set={"zz": "1"}).execute(), lp.ColumnNotFoundError, "zz"),
    (lambda ns: ns.update({"v": "1"}, where=None), lp.FilterError, "where"),
    (lambda ns: ns.update({"v": "1"}, where="  "), lp.FilterError, "where"),
    (lambda ns: ns.update({"nope": "1"}, where="true"), lp.ColumnNotFoundError, "nope"),
    (lambda ns: ns.update({"v": "nope + 1"}, where="true"), lp.InvalidArgumentError, "nope"),
    (lambda ns: ns.overwrite(table([{"id": 5, "g": 1}]), where="g = 2"), lp.FilterError, "do not satisfy"),
    (lambda ns: ns.overwrite(table([{"id": 5, "g": 2}]), where="g = 2", dynamic=True), lp.InvalidArgumentError, "not both"),
]  # fmt: skip


@pytest.mark.parametrize("call,error,text", REFUSALS)
def test_bad_input_is_refused_and_changes_nothing(filled, call, error, text):
    ns, root = filled
    before = tree_digest(root)
    with pytest.raises(error, match=None) as info:
        call(ns)
    assert text in str(info.value)
    assert ".rs:" not in str(info.value)
    assert tree_digest(root) == before


def test_null_keys_never_match(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "g")
    ns.append(table([{"id": None, "g": 1, "v": 1.0}, {"id": 1, "g": 1, "v": 2.0}]), progress=False)
    src = table([{"id": None, "g": 1, "v": 5.0}, {"id": None, "g": 1, "v": 6.0}])
    r = ns.merge(src, on="id").when_matched_update_all().when_not_matched_insert_all().execute()
    assert (r.rows_updated, r.rows_inserted) == (0, 2)
    assert sorted(ns.to_arrow(columns=["v"]).column("v").to_pylist()) == [1.0, 2.0, 5.0, 6.0]


def test_pruning_by_keys_opens_only_the_partitions_keys_map_to(tmp_path, monkeypatch):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "bucket(8, id)")
    ns.append(table(rows(200, 0, 11)), progress=False)
    from lance_partitioned.operations.change import matching

    searched = []
    real = matching._match_leaf

    def spy(snapshot, leaf, *args):
        searched.append(leaf.object_id)
        return real(snapshot, leaf, *args)

    monkeypatch.setattr(matching, "_match_leaf", spy)
    # a source of some columns only: the general plan, which searches leaves itself
    partial = pa.table({"id": pa.array([3], pa.int64()), "v": [1.0]})
    ns.merge(partial, on="id").when_matched_update_all().execute()
    assert len(searched) == 1
    searched.clear()
    builder = ns.merge(partial, on="id").when_matched_update_all()
    builder.when_not_matched_by_source_delete("false").execute()
    assert len(searched) == 8


def test_pinned_handle_refuses_changes(filled):
    ns, root = filled
    pinned = lp.open(root, version=ns.version)
    with pytest.raises(lp.PinnedSnapshotError):
        pinned.merge(table([{"id": 1}]), on="id")
    with pytest.raises(lp.PinnedSnapshotError):
        pinned.update({"v": "1"}, where="true")


@pytest.mark.parametrize(
    "spec",
    ["bucket(4, id)", "truncate(100, id)", "id", "g", "year(d), month(d)", "truncate(1, s), g"],
)
def test_plain_upsert_by_partition_matches_the_oracle(tmp_path, spec, monkeypatch):
    """A plain upsert: each leaf gets Lance's merge_insert of its rows (the path is checked
    taken), new partitions are written; when the keys do not determine the partition
    (g, d, s) updated rows move, deleted from their old leaf first. The oracle is the
    same as for the general plan."""
    from lance_partitioned.operations.leaf import leaf_changes

    used = []
    real = leaf_changes.MergeRows.operation
    monkeypatch.setattr(
        leaf_changes.MergeRows, "operation", lambda self, base: used.append(1) or real(self, base)
    )
    target = [r for r in rows(150, 0, seed=12) if r["id"] is not None]
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, spec)
    ns.append(table(target), progress=False)
    for round_ in range(3):
        source = [dict(r, v=float(round_)) for r in rows(40, 0, seed=13 + round_)[::2]]
        source += rows(15, 1000 + 300 * round_, seed=20 + round_)
        source.append(dict(rows(1, 0, seed=99)[0], id=None))
        result = (
            ns.merge(table(source), on="id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        expected = oracle_merge(target, source, ["id"], columns=SCHEMA.names)
        ids = {t["id"] for t in target if t["id"] is not None}  # a NULL key matches nothing
        assert result.rows_updated == sum(1 for s in source if s["id"] in ids)
        assert result.rows_inserted == sum(1 for s in source if s["id"] not in ids)
        target = expected
        assert_rows(ns, target)
    assert used
    assert_conforms(ns)
