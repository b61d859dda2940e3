"""Row counts kept with ``__manifest`` table rows (docs/FORMAT.md "Row counts").

Every commit that publishes a leaf version stores that version's row count in
the row's ``metadata`` as ``lp.num_rows``; ``count()`` with no filter, or with a
filter partition values alone decide, sums them without opening a leaf. The
oracle is plain pylance: each leaf opened at its pinned version and counted.
"""

from __future__ import annotations

import json
import os

import foreign_fixtures as ff
import lance
import pyarrow as pa
import pyarrow.compute as pc

import lance_partitioned as lp
from lance_partitioned.catalog.snapshot import Snapshot

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.int64())])


def _rows(ids, ks) -> pa.Table:
    return pa.table({"id": ids, "k": ks, "v": [i * 10 for i in ids]}, schema=SCHEMA)


def _pinned(root: str, row: dict) -> lance.LanceDataset:
    """A leaf at the version its row publishes, opened with plain pylance."""
    uri = os.path.join(root, row["location"])
    if row["read_tag"] is not None:
        return lance.dataset(uri, version=row["read_tag"])
    if row["read_branch"] is not None:
        return lance.dataset(uri).checkout_version((row["read_branch"], row["read_version"]))
    return lance.dataset(uri, version=row["read_version"])


def _table_rows(root: str) -> list[dict]:
    man = lance.dataset(os.path.join(root, "__manifest"))
    return man.to_table(filter="object_type = 'table'").to_pylist()


def _check_stored_counts(root: str) -> int:
    """Every table row's ``lp.num_rows`` equals plain Lance's count of its pinned version."""
    total = 0
    for row in _table_rows(root):
        real = _pinned(root, row).count_rows()
        stored = json.loads(row["metadata"]).get("lp.num_rows")
        assert stored == str(real), (row["object_id"], stored, real)
        total += real
    return total


def _oracle_table(root: str) -> pa.Table:
    """Every published row, read leaf by leaf with plain pylance."""
    tables = [_pinned(root, row).to_table(columns=["id", "k", "v"]) for row in _table_rows(root)]
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table()


def _check_counts(ns) -> None:
    oracle = _oracle_table(ns.root)
    assert _check_stored_counts(ns.root) == oracle.num_rows
    assert ns.count() == oracle.num_rows
    assert ns.count("k < 2") == pc.sum(pc.less(oracle["k"], 2)).as_py()
    # a residual filter still counts inside the leaves it cannot decide
    assert (
        ns.count("k >= 1 AND v > 20")
        == oracle.filter(
            pc.and_(pc.greater_equal(oracle["k"], 1), pc.greater(oracle["v"], 20))
        ).num_rows
    )


def test_counts_follow_every_kind_of_commit(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows([1, 2, 3, 4, 5], [0, 0, 1, 2, 3]))
    _check_counts(ns)
    ns.append(_rows([6, 7], [0, 9]))  # one existing partition, one new
    _check_counts(ns)
    ns.overwrite(_rows([8, 9, 10], [1, 1, 4]), dynamic=True)
    _check_counts(ns)
    ns.delete("v = 20 OR k = 4")
    _check_counts(ns)
    ns.compact()
    _check_counts(ns)
    ns.evolve_spec("bucket(4, id)")
    ns.append(_rows([11, 12, 13], [5, 5, 6]))
    _check_counts(ns)
    ns.rewrite_partitions()
    _check_counts(ns)
    ns.add_column("w", pa.string())
    ns.append(pa.table({"id": [14], "k": [1], "v": [0], "w": ["x"]}))
    _check_counts(ns)
    ns.overwrite(_rows([20, 21], [7, 8]))
    _check_counts(ns)


def test_count_without_a_residual_opens_no_leaf(tmp_path, monkeypatch):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows(list(range(20)), [i % 7 for i in range(20)]))
    ns.append(_rows([100, 101], [3, 50]))
    oracle = _oracle_table(ns.root)

    def refuse(self, leaf):
        raise AssertionError(f"count opened leaf {leaf.object_id}")

    monkeypatch.setattr(Snapshot, "open_leaf", refuse)
    ns = lp.open(ns.root)
    assert ns.count() == oracle.num_rows == 22
    assert ns.count("k = 3") == pc.sum(pc.equal(oracle["k"], 3)).as_py()
    assert ns.count("k >= 3 AND k < 60") == pc.sum(pc.greater_equal(oracle["k"], 3)).as_py()
    assert ns.count("k > 100") == 0


def test_counts_survive_a_repair(tmp_path):
    from lance.namespace import CreateNamespaceRequest, DirectoryNamespace

    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows([1, 2, 3], [0, 0, 1]))
    DirectoryNamespace(root=ns.root).create_namespace(CreateNamespaceRequest(id=["foreign"]))
    lp.open(ns.root).repair()
    ns = lp.open(ns.root)
    _check_counts(ns)


def test_a_hand_built_namespace_without_counts_counts_by_opening_its_leaves(tmp_path):
    foreign = ff.build(str(tmp_path / "foreign"))
    ns = lp.open(foreign.root)
    assert ns.count() == len(foreign.published_ids())
    in_2018 = [
        i for leaf in foreign.leaves.values() if leaf.year == 2018 for i in leaf.published_ids
    ]
    assert ns.count("event_date >= '2018-01-01'") == len(in_2018)
    # our append to one of its partitions stores a count for that leaf only
    ns.append(ff.events([40, 41], 2017, "US"))
    assert lp.open(foreign.root).count() == len(foreign.published_ids()) + 2


def test_a_count_whose_version_mirror_disagrees_is_not_trusted(tmp_path):
    """A foreign writer that moves ``read_version`` but keeps our metadata (it does
    not know ``lp.num_rows``) must not make ``count()`` report the old count."""
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows([1, 2], [0, 0]))
    ns.append(_rows([3], [0]))
    man = lance.dataset(os.path.join(ns.root, "__manifest"))
    (row,) = _table_rows(ns.root)
    # plain Lance: republish the older version (2 rows) as another implementation would
    man.update({"read_version": str(row["read_version"] - 1)}, where="object_type = 'table'")
    assert lp.open(ns.root).count() == 2
    assert json.loads(_table_rows(ns.root)[0]["metadata"])["lp.num_rows"] == "3"


def test_a_count_on_a_tag_pinned_leaf_is_not_trusted(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(_rows([1, 2], [0, 0]))
    (row,) = _table_rows(ns.root)
    leaf = lance.dataset(os.path.join(ns.root, row["location"]))
    leaf.tags.create("t", leaf.version)
    lance.write_dataset(_rows([3, 4, 5], [0, 0, 0]), leaf.uri, mode="append")
    leaf = lance.dataset(leaf.uri)
    leaf.tags.update("t", leaf.version)  # the tag moves outside any __manifest commit
    man = lance.dataset(os.path.join(ns.root, "__manifest"))
    man.update({"read_tag": "'t'"}, where="object_type = 'table'")
    assert lp.open(ns.root).count() == 5


def _oracle_count(meta, read_version, branch, tag):
    """What a reader of the rule would trust, decided with ``json.loads``."""
    if meta is None or branch is not None or tag is not None:
        return None
    doc = json.loads(meta)

    def digits(value):
        ok = isinstance(value, str) and value.isascii() and value.isdigit()
        return int(value) if ok and 1 <= len(value) <= 18 else None

    count, mirror = digits(doc.get("lp.num_rows")), digits(doc.get("lp.read_version"))
    return count if count is not None and mirror == read_version else None


def test_stored_counts_are_parsed_as_json_would_read_them():
    """The parser of ``lp.num_rows`` (numpy over compact JSON, a regex for any
    other spelling) against ``json.loads``, on metadata as different writers
    spell it: other spacing and key order, keys inside values, bad digits,
    too many digits, moved versions, branches and tags."""
    import random

    from lance_partitioned.catalog.row_counts import trusted_counts

    rng = random.Random(7)
    rows = []
    for _ in range(5000):
        version = rng.randint(1, 60)
        doc = {}
        if rng.random() < 0.9:
            doc["lp.read_version"] = str(version if rng.random() < 0.85 else version + 1)
        if rng.random() < 0.9:
            good = str(rng.randint(0, 10 ** rng.randint(1, 18) - 1))
            doc["lp.num_rows"] = rng.choice([good] * 8 + ["", "x1", "12a", "1" * 19])
        if rng.random() < 0.3:
            doc["note"] = rng.choice(['"lp.num_rows":"5"', ',"lp.num_rows":"9"', "{", "\\"])
        items = list(doc.items())
        rng.shuffle(items)
        style = rng.choice([{"separators": (",", ":")}, {}, {"indent": 1}])
        meta = json.dumps(dict(items), **style) if rng.random() > 0.02 else None
        branch = "b" if rng.random() < 0.05 else None
        tag = "t" if rng.random() < 0.05 else None
        rows.append((meta, version, branch, tag))
    columns = list(zip(*rows, strict=True))
    table = pa.table(
        {
            "metadata": pa.array(columns[0], pa.string()),
            "read_version": pa.array(columns[1], pa.uint64()),
            "read_branch": pa.array(columns[2], pa.string()),
            "read_tag": pa.array(columns[3], pa.string()),
        }
    )
    expected = [_oracle_count(*row) for row in rows]
    assert sum(e is not None for e in expected) > 1000  # the fast path is exercised
    assert trusted_counts(table).to_pylist() == expected
    large = table.set_column(0, "metadata", table["metadata"].cast(pa.large_string()))
    assert trusted_counts(large).to_pylist() == expected
    assert trusted_counts(table.slice(13, 700)).to_pylist() == expected[13:713]
