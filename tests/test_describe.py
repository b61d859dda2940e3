"""``describe()`` is readable (issue 10 item 19).

Expected orders and counts come from pyarrow.compute and plain Python on the
input data, never from our transforms.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc

import lance_partitioned as lp

SCHEMA = pa.schema([("k", pa.string()), ("n", pa.int64()), ("d", pa.date32())])

LINE = re.compile(
    r"^  v(\d+) (.*): ([\d,]+) rows?, [\d,]+ files?, [\d.]+ [KMGT]?i?B, leaf version (\d+)$"
)


def partition_lines(text: str) -> list[tuple[int, str, int]]:
    """(spec id, values text, rows) for every partition line, in the order shown."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2), int(m.group(3).replace(",", ""))))
    return out


def test_partitions_sorted_by_value_null_last_own_fields_and_total(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "n")
    # identity on int64: 2 < 10 < 100 (as strings "10" < "100" < "2"), NULL last
    first = pa.table(
        {"k": ["a"] * 6, "n": [10, 2, None, 100, 2, -5], "d": [dt.date(2024, 1, 1)] * 6},
        schema=SCHEMA,
    )
    ns.append(first)
    ns.evolve_spec("month(d)")
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=23 * i) for i in range(16)] + [None]
    second = pa.table({"k": ["b"] * 17, "n": [1] * 17, "d": days}, schema=SCHEMA)
    ns.append(second)

    text = ns.describe()
    shown = partition_lines(text)

    # spec v1: identity values in numeric order, NULL last, counts per value
    counts1 = Counter(first["n"].to_pylist())
    order1 = sorted(v for v in counts1 if v is not None) + [None]
    assert [(s, vals) for s, vals, _ in shown if s == 1] == [
        (1, f"n={'NULL' if v is None else v}") for v in order1
    ]
    assert [rows for s, _, rows in shown if s == 1] == [counts1[v] for v in order1]

    # spec v2: months in calendar order (1, 2, ..., 10, 11, 12), NULL last, and
    # only v2's own field on each line
    months = pc.month(second["d"]).to_pylist()
    counts2 = Counter(months)
    order2 = sorted(m for m in counts2 if m is not None) + [None]
    assert len(order2) == 13 and order2[9:12] == [10, 11, 12]
    assert [(s, vals) for s, vals, _ in shown if s == 2] == [
        (2, f"d_month={'NULL' if m is None else m}") for m in order2
    ]
    assert [rows for s, _, rows in shown if s == 2] == [counts2[m] for m in order2]

    # a total row count, and versions that say what they are
    total = first.num_rows + second.num_rows
    assert f"Partitions: {len(shown)}, {total} rows in all" in text
    assert f"namespace version {lp.open(ns.root).version} (the __manifest table's" in text
    assert "@ version" not in text


def test_dates_and_strings_sort_as_values(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "d, k")
    dates = [dt.date(2024, 10, 1), dt.date(2024, 9, 30), dt.date(2023, 12, 31), None]
    t = pa.table({"k": ["b", "a", "b", "a"], "n": [1, 2, 3, 4], "d": dates}, schema=SCHEMA)
    ns.append(t)
    shown = [vals for _, vals, _ in partition_lines(ns.describe())]
    expected = sorted(
        ((d, k) for d, k in zip(dates, t["k"].to_pylist(), strict=True) if d is not None)
    )
    assert shown == [f"d={d.isoformat()}, k={k}" for d, k in expected] + ["d=NULL, k=a"]


def test_files_sizes_versions_and_tags(tmp_path):
    """File counts and sizes per partition match the leaf directories on disk; the
    versions line counts __manifest versions (Lance's own list) and names the tags."""
    import os

    import lance

    from lance_partitioned.operations.maintain.describe import summary

    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    t = pa.table({"k": ["a", "a", "b"], "n": [1, 2, 3], "d": [None] * 3}, schema=SCHEMA)
    ns.append(t)
    ns.append(t)  # a second file in each partition
    ns.tag("first-two")
    text = ns.describe()

    for leaf in ns.plan():
        data = os.path.join(leaf.uri, "data")
        names = [n for n in os.listdir(data) if n.endswith(".lance")]
        size = sum(os.path.getsize(os.path.join(data, n)) for n in names)
        rows = pc.sum(pc.equal(t["k"], leaf.partition_values["k"])).as_py() * 2
        line = f"  v1 k={leaf.partition_values['k']}: {rows} rows, {len(names)} files, "
        assert len(names) == 2
        assert any(x.startswith(line) for x in text.splitlines()), (line, text)
        info = summary(ns.snapshot, ns.root)
        (p,) = [p for p in info["partitions"] if p["object_id"] == leaf.object_id]
        assert p["bytes"] == size and p["files"] == 2

    manifest_versions = lance.dataset(os.path.join(ns.root, "__manifest")).versions()
    # every version on disk: create is one commit
    assert f"Versions: {len(manifest_versions)} __manifest versions kept" in text
    assert "tags: first-two -> " in text
    assert "Size on disk: " in text
