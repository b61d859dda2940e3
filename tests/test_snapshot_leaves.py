"""``Snapshot.leaves``: one Leaf per partition table row, across spec versions.

Leaves are built column-wise (a plan of 10,000 partitions builds 10,000 of
them); these tests pin what each one carries, against the ``__manifest`` rows
read with plain pylance.
"""

from __future__ import annotations

import lance
import pyarrow as pa

import lance_partitioned as lp

SCHEMA = pa.schema([pa.field("k", pa.int64()), pa.field("v", pa.int64())])


def _rows(k: list[int]) -> pa.Table:
    return pa.table({"k": pa.array(k, pa.int64()), "v": pa.array(k, pa.int64())})


def _manifest_tables(root: str) -> dict[str, dict]:
    rows = lance.dataset(f"{root}/__manifest").to_table(filter="object_type = 'table'")
    return {r["object_id"]: r for r in rows.to_pylist()}


def test_leaves_of_two_spec_versions_carry_their_own_values(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "k")
    ns.append(_rows([1, 2, 3]))
    ns.evolve_spec("truncate(10, k)")
    ns.append(_rows([25, 31]))
    leaves = lp.open(root).snapshot.leaves()
    rows = _manifest_tables(root)
    assert sorted(leaf.object_id for leaf in leaves) == sorted(rows)
    for leaf in leaves:
        row = rows[leaf.object_id]
        assert leaf.spec_id == int(leaf.object_id.split("$")[0][1:])
        assert leaf.location == row["location"]
        assert leaf.read_version == row["read_version"]
        assert leaf.read_branch is None and leaf.read_tag is None
        column = [c for c in row if c.startswith("partition_field_")]
        # the value under the leaf's own spec column, the other spec's column is NULL
        (mine,) = [row[c] for c in column if row[c] is not None]
        assert leaf.values == (mine,)
    assert sorted(leaf.values for leaf in leaves if leaf.spec_id == 2) == [(20,), (30,)]


def test_a_table_row_outside_the_spec_version_namespaces_is_not_a_leaf(tmp_path):
    root = str(tmp_path / "ns")
    ns = lp.create(root, SCHEMA, "k")
    ns.append(_rows([1, 2]))
    manifest = lance.dataset(f"{root}/__manifest")
    # another tool's table beside the spec versions (plain pylance, not our writer)
    other = pa.Table.from_pylist(
        [{"object_id": "other$dataset", "object_type": "table", "location": "other_dir"}],
        schema=manifest.schema,
    )
    manifest.merge_insert("object_id").when_not_matched_insert_all().execute(other)
    leaves = lp.open(root).snapshot.leaves()
    assert sorted(leaf.values for leaf in leaves) == [(1,), (2,)]
    assert all(leaf.spec_id == 1 for leaf in leaves)
    assert lp.open(root).scan().to_arrow().num_rows == 2
