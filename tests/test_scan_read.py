"""Reading a scan's tasks: ``to_arrow`` reads each leaf whole, many leaves at once,
through one shared Lance session. Results are checked against pyarrow.compute on
the source rows (never against our own filter code)."""

from __future__ import annotations

import datetime as dt
import decimal
import shutil

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.catalog.leaf_open import open_leaf_dataset, read_session
from lance_partitioned.catalog.snapshot import Leaf
from lance_partitioned.operations.read import filter_check

SCHEMA = pa.schema(
    [
        pa.field("day", pa.date32()),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.decimal128(15, 2)),
        pa.field("note", pa.string()),
    ]
)


def rows(n: int, seed: int) -> pa.Table:
    """n rows over 20 days of 2024 (20 partitions by day), deterministic values."""
    return pa.table(
        {
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 20) for i in range(n)]),
            "qty": pa.array([(i * 7 + seed) % 50 for i in range(n)], pa.int32()),
            "price": pa.array(
                [decimal.Decimal(f"{(i * 13 + seed) % 1000}.{i % 100:02d}") for i in range(n)],
                pa.decimal128(15, 2),
            ),
            "note": pa.array([f"n{seed}-{i}" for i in range(n)]),
        },
        schema=SCHEMA,
    )


def expected(source: pa.Table, columns: list[str]) -> pa.Table:
    """Rows of ``FILTER`` by pyarrow.compute, projected, in a canonical order."""
    mask = pc.and_(
        pc.and_(
            pc.greater_equal(source["day"], pa.scalar(dt.date(2024, 1, 3))),
            pc.less(source["day"], pa.scalar(dt.date(2024, 1, 18))),
        ),
        pc.less(source["qty"], 24),
    )
    return canonical(source.filter(mask).select(columns))


FILTER = "day >= '2024-01-03' AND day < '2024-01-18' AND qty < 24"


def canonical(t: pa.Table) -> pa.Table:
    keys = [(c, "ascending") for c in t.column_names]
    return t.sort_by(keys)


@pytest.fixture
def ns20(tmp_path):
    source = rows(4000, 1)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "day")
    ns.append(source)
    return ns, source


@pytest.mark.parametrize(
    "columns", [None, ["price", "day"], ["note", "qty", "price"], ["price"]], ids=str
)
def test_to_arrow_equals_pyarrow_on_the_source(ns20, columns):
    """15 of 20 partitions (more than the leaves read at once), a residual on a
    non-partition column, projections in any order with or without the partition
    column: the rows, column order and types are exactly pyarrow's."""
    ns, source = ns20
    scan = lp.open(ns.root).scan(FILTER, columns=columns)
    assert len(scan.leaves) == 15
    got = scan.to_arrow()
    want_cols = columns or SCHEMA.names
    assert got.column_names == want_cols
    assert got.schema.types == [SCHEMA.field(c).type for c in want_cols]
    assert canonical(got).equals(expected(source, want_cols))
    # the streaming readers give the same rows
    streamed = pa.Table.from_batches(list(scan.to_batches()), schema=got.schema)
    assert canonical(streamed).equals(canonical(got))
    assert scan.count() == got.num_rows


def test_a_scan_reads_its_snapshot_while_leaves_move_on(ns20):
    """Leaves are read at the versions the scan's ``__manifest`` pins, even after
    they were read once through the shared session and have moved on since."""
    ns, source = ns20
    before = lp.open(ns.root).scan(FILTER)
    first = before.to_arrow()  # warms the shared session with these leaves
    more = rows(2000, 2)
    lp.open(ns.root).append(more)
    assert canonical(before.to_arrow()).equals(canonical(first))
    assert canonical(first).equals(expected(source, SCHEMA.names))
    after = lp.open(ns.root).scan(FILTER).to_arrow()
    assert canonical(after).equals(expected(pa.concat_tables([source, more]), SCHEMA.names))


def test_widened_column_reads_as_the_namespace_type(ns20):
    """A leaf written before ``qty`` was widened holds int32; the scan gives int64."""
    ns, source = ns20
    ns.widen_column("qty", pa.int64())
    got = lp.open(ns.root).scan(FILTER, columns=["qty", "day"]).to_arrow()
    assert got.schema.field("qty").type == pa.int64()
    want = expected(source, ["qty", "day"])
    want = want.set_column(0, "qty", pc.cast(want["qty"], pa.int64()))
    assert canonical(got).equals(want)


def test_shared_session_reads_a_recreated_dataset_anew(tmp_path):
    """The shared read session caches metadata by path; a dataset deleted and
    written again at the same path (same version number) is read as it now is."""

    uri = str(tmp_path / "leaf.lance")
    leaf = Leaf("x", "leaf.lance", 0, (), read_version=1)
    lance.write_dataset(pa.table({"a": [1, 2, 3]}), uri)
    assert open_leaf_dataset(uri, leaf, None, read_session()).to_table()["a"].to_pylist() == [
        1,
        2,
        3,
    ]
    shutil.rmtree(uri)
    lance.write_dataset(pa.table({"a": [7, 8]}), uri)
    got = open_leaf_dataset(uri, leaf, None, read_session()).to_table()
    assert got["a"].to_pylist() == [7, 8]


def test_a_filter_lance_planned_is_not_planned_again(ns20, monkeypatch):
    """A filter with parts only Lance can check (here arithmetic) is planned by
    Lance once per schema; a filter Lance refuses is refused every time."""
    ns, source = ns20
    calls = []
    real = filter_check._empty_table

    def counting(schema):
        calls.append(1)
        return real(schema)

    monkeypatch.setattr(filter_check, "_empty_table", counting)
    sql = "day >= '2024-01-03' AND qty * 2 < 48 AND day < '2024-01-18'"
    first = ns.scan(sql).to_arrow()
    second = ns.scan(sql).to_arrow()
    assert len(calls) == 1
    assert canonical(first).equals(expected(source, SCHEMA.names))
    assert canonical(second).equals(canonical(first))
    for _ in range(2):
        with pytest.raises(lp.FilterError):
            ns.scan("qty + 'x' < note")


def test_to_arrow_gives_each_leaf_its_own_residual(tmp_path):
    """Leaves of one scan need different residuals: ``to_arrow`` takes them from the
    columnar plan, and each must reach its own leaf: January's leaf straddles the
    ``day`` bound and keeps it, February's lies wholly above it and needs only ``qty``."""
    data = pa.table(
        {
            "day": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 50) for i in range(2000)]),
            "qty": pa.array([(i * 7) % 50 for i in range(2000)], pa.int32()),
            "price": pa.array(
                [decimal.Decimal(i % 1000) for i in range(2000)], pa.decimal128(15, 2)
            ),
            "note": pa.array([f"n{i}" for i in range(2000)]),
        },
        schema=SCHEMA,
    )
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "year(day), month(day)")
    ns.append(data, progress=False)
    flt = "day >= '2024-01-20' AND qty < 10"
    scan = ns.scan(flt)
    residuals = {t.filter_sql for t in scan.plan()}
    assert len(residuals) == 2, residuals  # January keeps the day bound, February does not
    got = scan.to_arrow().sort_by([("note", "ascending")])
    mask = pc.and_(
        pc.greater_equal(data["day"], pa.scalar(dt.date(2024, 1, 20))),
        pc.less(data["qty"], 10),
    )
    want = data.filter(mask).sort_by([("note", "ascending")])
    assert got.equals(want)


def test_a_plan_shows_what_it_kept(tmp_path):
    """``print(ns.plan(f))`` names the partitions kept and their versions, not only a count."""
    schema = pa.schema([("id", pa.int64()), ("country", pa.string())])
    ns = lp.create(str(tmp_path / "t"), schema, "country")
    ns.append(pa.table({"id": list(range(8)), "country": ["US", "FR"] * 4}, schema))
    assert repr(ns.plan("country = 'US'")) == "ScanPlan(1 task: {'country': 'US'} @ v1)"
    assert repr(ns.plan("country = 'XX'")) == "ScanPlan(0 tasks)"
    assert repr(ns.plan()).startswith("ScanPlan(2 tasks: {'country': ")
