"""``ns.changes(a, b)``: the change feed against an independent oracle.

The oracle is the multiset difference between the namespace's rows at version
``a`` and at version ``b`` (each read with ``lp.open(root, version=v).to_arrow()``),
computed by DuckDB: every row of ``b`` counts +1, every row of ``a`` -1, and the
rows whose sum is not zero are the net change. The feed's net change is its
inserts counted +1 and its deletes -1, grouped the same way. For random
sequences of appends, deletes, static and dynamic overwrites, compactions,
column additions, merges, updates, spec evolution and restores, the two agree
for every pair ``a < b``.
"""

from __future__ import annotations

import random

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

import lance_partitioned as lp
from lance_partitioned.errors import InvalidArgumentError, VersionNotFoundError
from lance_partitioned.operations.read import changes as changes_module

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int64())])
KEYS = ["a", "b", "c", "d"]


def _conformed(table: pa.Table, names: list[str], types: dict[str, pa.DataType]) -> pa.Table:
    """``table`` with exactly ``names`` (a column it lacks is NULL)."""
    cols = [
        table.column(n) if n in table.column_names else pa.nulls(table.num_rows, types[n])
        for n in names
    ]
    return pa.Table.from_arrays(cols, names=names)


def _net(con: duckdb.DuckDBPyConnection, names: list[str]) -> list[tuple]:
    cols = ", ".join(f'"{n}"' for n in names)
    return con.sql(
        f"SELECT {cols}, sum(n) AS n FROM t GROUP BY ALL HAVING sum(n) <> 0 ORDER BY ALL"
    ).fetchall()


def oracle(root: str, a: int, b: int, filter: str | None = None) -> list[tuple]:
    """The net change from version ``a`` to ``b`` (columns of ``b``), by DuckDB."""
    end = lp.open(root, version=b)
    names = end.schema.names
    types = {f.name: f.type for f in end.schema.arrow}
    before = _conformed(lp.open(root, version=a).to_arrow(), names, types)
    after = _conformed(end.to_arrow(), names, types)
    con = duckdb.connect()
    con.register("before_rows", before)
    con.register("after_rows", after)
    where = f"WHERE {filter}" if filter else ""
    con.sql(
        "CREATE TABLE t AS SELECT *, 1 AS n FROM after_rows "
        f"{where} UNION ALL SELECT *, -1 AS n FROM before_rows {where}"
    )
    return _net(con, names)


def feed_net(root: str, a: int, b: int, filter: str | None = None) -> list[tuple]:
    """The net change the feed reports from ``a`` to ``b``."""
    feed = lp.open(root).changes(a, b, filter=filter).to_arrow()
    names = lp.open(root, version=b).schema.names
    con = duckdb.connect()
    con.register("feed", feed)
    cols = ", ".join(f'"{n}"' for n in names)
    con.sql(
        f"CREATE TABLE t AS SELECT {cols}, "
        "CASE WHEN _change_type IN ('insert', 'update_postimage') THEN 1 ELSE -1 END AS n "
        "FROM feed"
    )
    return _net(con, names)


class Steps:
    """Random namespace operations with deterministic data."""

    def __init__(self, ns: lp.PartitionedNamespace, rng: random.Random):
        self.ns, self.rng, self.next_id = ns, rng, 0

    def rows(self, n: int, keys: list[str] | None = None) -> pa.Table:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        data = {
            "id": ids,
            "k": [self.rng.choice(keys or KEYS) for _ in ids],
            "v": [self.rng.randrange(3) for _ in ids],  # duplicates of whole rows happen
        }
        for name in self.ns.schema.names:
            if name not in data:
                data[name] = [self.rng.randrange(5) for _ in ids]
        return pa.table(data).select(self.ns.schema.names).cast(self.ns.schema.arrow)

    def append(self) -> None:
        self.ns.append(self.rows(self.rng.randrange(1, 6)), progress=False)

    def delete(self) -> None:
        self.ns.delete(f"v = {self.rng.randrange(3)} AND id % 2 = {self.rng.randrange(2)}")

    def dynamic(self) -> None:
        keys = self.rng.sample(KEYS, 2)
        self.ns.overwrite(self.rows(3, keys), dynamic=True, progress=False)

    def static(self) -> None:
        self.ns.overwrite(self.rows(4), progress=False)

    def compact(self) -> None:
        self.ns.compact()

    def add_column(self) -> None:
        self.ns.add_column(f"c{len(self.ns.schema.names)}", pa.int64())

    def merge(self) -> None:
        source = self.rows(2)
        existing = self.ns.to_arrow(columns=self.ns.schema.names)
        if existing.num_rows:  # one existing key, with new values
            old = existing.slice(self.rng.randrange(existing.num_rows), 1)
            changed = old.set_column(2, "v", pa.array([7], pa.int64()))
            source = pa.concat_tables([source, changed.cast(source.schema)])
        self.ns.merge(
            source, on="id"
        ).when_matched_update_all().when_not_matched_insert_all().execute()

    def update(self) -> None:
        self.ns.update({"v": "v + 10"}, where=f"k = '{self.rng.choice(KEYS)}'")

    def evolve(self) -> None:
        if len(self.ns.specs) == 1:
            self.ns.evolve_spec("k, bucket(2, id)")
        else:
            self.ns.rewrite_partitions()

    def restore(self) -> None:
        versions = [v["version"] for v in self.ns.versions()]
        self.ns.restore(self.rng.choice(versions[: max(1, len(versions) - 1)]))


OPERATIONS = [
    "append", "append", "delete", "dynamic", "static", "compact", "add_column",
    "merge", "update", "evolve", "restore",
]  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_changes_between_every_pair_equal_the_snapshot_difference(tmp_path, seed):
    rng = random.Random(seed)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    steps = Steps(ns, rng)
    steps.append()
    for _ in range(9):
        getattr(steps, rng.choice(OPERATIONS))()
    versions = [v["version"] for v in ns.versions()]
    for i, a in enumerate(versions):
        for b in versions[i + 1 :]:
            assert feed_net(ns.root, a, b) == oracle(ns.root, a, b), (seed, a, b)


def test_a_filter_selects_the_changed_rows_it_matches(tmp_path):
    rng = random.Random(7)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    steps = Steps(ns, rng)
    start = ns.version
    for op in ["append", "append", "delete", "dynamic", "merge", "update", "static"]:
        getattr(steps, op)()
    for where in ["k = 'a'", "k IN ('b', 'c') AND v = 1", "v >= 1"]:
        assert feed_net(ns.root, start, ns.version, where) == oracle(
            ns.root, start, ns.version, where
        ), where


def test_columns_project_and_every_row_says_its_commit(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    start = ns.version
    ns.append(pa.table({"id": [1, 2], "k": ["a", "b"], "v": [0, 0]}), progress=False)
    appended = ns.version
    ns.delete("id = 1")
    feed = ns.changes(start, columns=["id"]).to_arrow()
    assert feed.column_names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    got = sorted(zip(*(feed.column(c).to_pylist() for c in feed.column_names[:3]), strict=True))
    assert got == [(1, "delete", ns.version), (1, "insert", appended), (2, "insert", appended)]
    assert str(feed.schema.field("_commit_timestamp").type) == "timestamp[us, tz=UTC]"
    assert ns.changes(start).count() == 3
    assert ns.changes(start).to_reader().read_all().num_rows == 3
    assert ns.changes(ns.version).count() == 0


def test_compaction_adds_no_change_rows(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    for i in range(4):
        ns.append(pa.table({"id": [i], "k": ["a"], "v": [i]}), progress=False)
    before = ns.version
    ns.compact()
    assert ns.version > before
    assert ns.changes(before).count() == 0


def test_an_unchanged_partition_is_never_opened(tmp_path, monkeypatch):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(pa.table({"id": [1, 2, 3], "k": ["a", "b", "c"], "v": [0, 0, 0]}), progress=False)
    start = ns.version
    ns.append(pa.table({"id": [4], "k": ["b"], "v": [1]}), progress=False)
    changed = {t.location for t in ns.plan("k = 'b'")}
    opened: list[str] = []
    real = changes_module.open_leaf_dataset

    def spy(uri, leaf, *args, **kwargs):
        opened.append(leaf.location)
        return real(uri, leaf, *args, **kwargs)

    monkeypatch.setattr(changes_module, "open_leaf_dataset", spy)
    assert ns.changes(start).to_arrow().column("id").to_pylist() == [4]
    assert set(opened) == changed


def test_a_range_into_cleaned_up_versions_names_the_cleanup(tmp_path):
    import datetime as dt

    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(pa.table({"id": [1], "k": ["a"], "v": [0]}), progress=False)
    old = ns.version
    for i in range(2):
        ns.append(pa.table({"id": [i + 2], "k": ["a"], "v": [0]}), progress=False)
    ns.cleanup(older_than=dt.timedelta(0))
    with pytest.raises(VersionNotFoundError, match="cleaned up"):
        ns.changes(old).to_arrow()


def test_bad_ranges_are_refused(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(pa.table({"id": [1], "k": ["a"], "v": [0]}), progress=False)
    with pytest.raises(InvalidArgumentError, match="after end_version"):
        ns.changes(ns.version, ns.version - 1)
    with pytest.raises(InvalidArgumentError, match="version number"):
        ns.changes("yesterday")
    with pytest.raises(VersionNotFoundError):
        ns.changes(ns.version, ns.version + 5)


def test_a_commit_is_found_without_reading_the_manifest_fragments_rows(tmp_path, monkeypatch):
    """The ``__manifest`` fragment holding every partition's row is compared by its
    deletion files: none of its rows (nor their addresses) is listed, whatever its size."""
    import lance.fragment

    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    many = [f"p{i}" for i in range(200)]
    ns.append(pa.table({"id": range(200), "k": many, "v": [0] * 200}), progress=False)
    for i in range(3):  # the later commits delete rows of that fragment
        ns.append(pa.table({"id": [1000 + i], "k": [many[i]], "v": [1]}), progress=False)
    ns.delete("k = 'p50'")
    scanned: list[str] = []
    real = lance.fragment.LanceFragment.scanner

    def spy(self, *args, **kwargs):
        scanned.append(self._ds.uri)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(lance.fragment.LanceFragment, "scanner", spy)
    v = ns.version
    assert feed_net(ns.root, v - 4, v) == oracle(ns.root, v - 4, v)
    assert not [uri for uri in scanned if uri.rstrip("/").endswith("__manifest")]


# -- update pre and post images: the oracle pairs by the test's own unique ``id`` --------


def _images_oracle(before: pd.DataFrame, after: pd.DataFrame, updated: set[int]) -> list[tuple]:
    """(change type, id, k, v) of a commit that updated the rows ``updated`` (ids, unique)
    and inserted or deleted the rest, from the two snapshots in pandas."""
    out = []
    for kind, frame, ids in (
        ("update_preimage", before, updated),
        ("update_postimage", after, updated),
        ("delete", before, set(before.id) - set(after.id)),
        ("insert", after, set(after.id) - set(before.id)),
    ):
        rows = frame[frame.id.isin(ids)]
        out += [(kind, int(r.id), r.k, int(r.v)) for r in rows.itertuples()]
    return sorted(out)


def _feed_rows(ns: lp.PartitionedNamespace, a: int, b: int, **kwargs) -> list[tuple]:
    feed = ns.changes(a, b, **kwargs).to_pandas()
    assert set(feed["_commit_version"]) <= {b}
    rows = feed.to_dict("records")
    return sorted((r["_change_type"], int(r["id"]), r["k"], int(r["v"])) for r in rows)


def _images_namespace(tmp_path) -> lp.PartitionedNamespace:
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    rows = {"id": list(range(12)), "k": [KEYS[i % 4] for i in range(12)], "v": [0] * 12}
    ns.append(pa.table(rows, schema=SCHEMA), progress=False)
    return ns


def test_update_reports_pre_and_post_images_even_across_partitions(tmp_path):
    ns = _images_namespace(tmp_path)
    a = ns.version
    before = ns.to_arrow().to_pandas()
    where = "id % 3 = 0"
    ns.update({"v": "v + 5", "k": "CASE WHEN id = 3 THEN 'z' ELSE k END"}, where=where)
    after = lp.open(ns.root).to_arrow().to_pandas()
    updated = set(before.query("id % 3 == 0").id)  # pandas evaluates the where itself
    assert _feed_rows(ns, a, ns.version) == _images_oracle(before, after, updated)
    pre = ns.changes(a, columns=["v"]).to_pandas()
    kinds = pre["_change_type"].tolist()
    assert kinds == ["update_preimage", "update_postimage"] * (len(kinds) // 2)


def test_merge_reports_images_by_its_keys_and_plain_inserts(tmp_path):
    ns = _images_namespace(tmp_path)
    a = ns.version
    before = ns.to_arrow().to_pandas()
    source = pa.table({"id": [2, 5, 40], "k": ["b", "a", "c"], "v": [9, 9, 9]}, schema=SCHEMA)
    ns.merge(source, on="id").when_matched_update_all().when_not_matched_insert_all().execute()
    after = lp.open(ns.root).to_arrow().to_pandas()
    updated = set(before.id) & {2, 5}
    assert _feed_rows(ns, a, ns.version) == _images_oracle(before, after, updated)


def test_merge_that_deletes_matched_rows_reports_deletes(tmp_path):
    ns = _images_namespace(tmp_path)
    a = ns.version
    before = ns.to_arrow().to_pandas()
    source = pa.table({"id": [1, 7, 50], "k": ["a", "a", "a"], "v": [3, 3, 3]}, schema=SCHEMA)
    ns.merge(source, on="id").when_matched_update_all("source.id = 1").when_matched_delete(
    ).when_not_matched_insert_all().execute()  # fmt: skip
    after = lp.open(ns.root).to_arrow().to_pandas()
    assert _feed_rows(ns, a, ns.version) == _images_oracle(before, after, {1})


def test_rows_of_one_key_that_differ_stay_deletes_and_inserts(tmp_path):
    """Two rows share every column the update leaves alone but differ in ``v``: which new
    row came from which old one is not known, so the feed does not pair them."""
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    rows = {"id": [1, 1, 2, 2], "k": ["a", "a", "a", "a"], "v": [0, 1, 4, 4]}
    ns.append(pa.table(rows, schema=SCHEMA), progress=False)
    a = ns.version
    ns.update({"v": "v * 2"}, where="true")
    got = _feed_rows(ns, a, ns.version)
    assert got == sorted(
        [("delete", 1, "a", 0), ("delete", 1, "a", 1), ("insert", 1, "a", 0),
         ("insert", 1, "a", 2)]
        + [("update_preimage", 2, "a", 4), ("update_postimage", 2, "a", 8)] * 2
    )  # fmt: skip


def test_a_filter_pairs_only_the_images_it_selects(tmp_path):
    ns = _images_namespace(tmp_path)
    a = ns.version
    ns.update({"v": "v + 1"}, where="id IN (0, 1)")
    got = _feed_rows(ns, a, ns.version, filter="v = 0")  # the preimages only
    assert got == [("delete", 0, "a", 0), ("delete", 1, "b", 0)]
