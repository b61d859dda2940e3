"""Plans and partition-only counts kept as columns (issue 15: a million partitions).

``plan()`` returns a list-like ``ScanPlan`` that builds a ``ScanTask`` (and the
``Leaf`` under it) only for the entries a consumer reads; ``count()`` with a
filter decides column-wise which leaves the filter selects whole and sums their
stored row counts, building no per-partition object for them. An identity
field's value also decides ``IN`` / ``NOT IN`` lists, so those leaves drop the
conjunct from their residual. Oracles: plain pylance on ``__manifest`` and on
the leaves, and pyarrow.compute on the rows written.
"""

from __future__ import annotations

import datetime as dt
import os
import random

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.format.expressions import Compare, In, IsNull, Literal, Ref
from lance_partitioned.format.transforms import Identity
from lance_partitioned.operations.read.scan import ScanTask

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.int64())])


def _rows(ids: list[int], ks: list[int]) -> pa.Table:
    return pa.table({"id": ids, "k": ks, "v": [i * 10 for i in ids]}, schema=SCHEMA)


def _namespace(tmp_path, partitions: int = 12):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ids = list(range(3 * partitions))
    data = _rows(ids, [i % partitions for i in ids])
    ns.append(data)
    return lp.open(ns.root), data


def _manifest_tables(root: str) -> list[dict]:
    man = lance.dataset(os.path.join(root, "__manifest"))
    return man.to_table(filter="object_type = 'table'").to_pylist()


class _Counter:
    def __init__(self, real):
        self.real, self.calls = real, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.real(*args, **kwargs)


def _count_builds(monkeypatch) -> tuple[_Counter, _Counter]:
    """Count the ``Leaf`` and ``ScanTask`` tuples built (both are made by ``_make``)."""
    leaf = _Counter(Leaf._make)
    task = _Counter(ScanTask._make)
    monkeypatch.setattr(Leaf, "_make", leaf)
    monkeypatch.setattr(ScanTask, "_make", task)
    return leaf, task


def test_plan_builds_tasks_only_for_the_entries_read(tmp_path, monkeypatch):
    ns, _ = _namespace(tmp_path)
    leaf, task = _count_builds(monkeypatch)
    plan = ns.plan()
    assert len(plan) == 12
    assert leaf.calls == 0 and task.calls == 0  # nothing per partition until read
    first = plan[0]
    assert isinstance(first, ScanTask)
    assert leaf.calls == 0 and task.calls == 1  # built from the columns, no Leaf between


def test_plan_is_list_compatible_and_matches_manifest(tmp_path):
    ns, _ = _namespace(tmp_path)
    rows = _manifest_tables(ns.root)
    plan = ns.plan()
    tasks = list(plan)
    # == a list, both ways; indexing, negative indexing, slicing, iteration
    assert plan == tasks and tasks == plan and plan == ns.plan()
    assert plan != tasks[:-1]
    assert plan[-1] == tasks[-1] and plan[2:5] == tasks[2:5] and plan[::5] == tasks[::5]
    with pytest.raises(IndexError):
        plan[len(tasks)]
    assert bool(plan) and not ns.plan("k > 1000") and ns.plan("k > 1000") == []
    # oracle: plain Lance's __manifest rows
    want = {
        r["object_id"]: (r["location"], r["read_version"], {"k": r["partition_field_k"]})
        for r in rows
    }
    got = {t.object_id: (t.location, t.read_version, t.partition_values) for t in tasks}
    assert got == want
    assert all(t.uri == os.path.join(ns.root, t.location) for t in tasks)


@pytest.mark.parametrize(
    "flt",
    [
        "k >= 5 AND v > 40",
        "k < 3 OR v > 200",
        "k IN (1, 2, 7) AND v >= 0",
        "k NOT IN (1, 2) AND v < 300",
        "k NOT IN (1, NULL) OR v = 70",
        "k IS NOT NULL AND v % 20 = 0",
        "k != 4",
    ],
)
def test_plan_residuals_read_exactly_the_matching_rows(tmp_path, flt):
    """Each task's residual, run by plain Lance on its leaf, gives the rows the
    filter selects there (pyarrow.compute on the rows written)."""
    ns, data = _namespace(tmp_path)
    expr = {
        "k >= 5 AND v > 40": (pc.field("k") >= 5) & (pc.field("v") > 40),
        "k < 3 OR v > 200": (pc.field("k") < 3) | (pc.field("v") > 200),
        "k IN (1, 2, 7) AND v >= 0": pc.field("k").isin([1, 2, 7]) & (pc.field("v") >= 0),
        "k NOT IN (1, 2) AND v < 300": ~pc.field("k").isin([1, 2]) & (pc.field("v") < 300),
        "k NOT IN (1, NULL) OR v = 70": pc.field("v") == 70,  # NOT IN with NULL is never true
        "k IS NOT NULL AND v % 20 = 0": pc.field("v").isin(list(range(0, 1000, 20))),
        "k != 4": pc.field("k") != 4,
    }[flt]
    want = data.filter(expr)
    plan = ns.plan(flt)
    scan = ns.scan(flt)
    got = []
    for task in plan:
        leaf = lance.dataset(task.uri, version=task.read_version)
        got.append(leaf.to_table(columns=["id", "k", "v"], filter=task.filter_sql))
    got = pa.concat_tables(got) if got else SCHEMA.empty_table()
    assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    # the tasks' residuals are the ones the readers use, leaf by leaf
    assert [t.filter_sql for t in plan] == [scan.leaf_filter(lf) for lf in scan.leaves]
    assert ns.count(flt) == want.num_rows


def test_an_identity_in_list_drops_its_residual(tmp_path):
    ns, _ = _namespace(tmp_path)
    assert [t.filter_sql for t in ns.plan("k IN (1, 2, 7)")] == [None] * 3
    assert {t.filter_sql for t in ns.plan("k NOT IN (1, 2)")} == {None}
    assert len(ns.plan("k NOT IN (1, 2)")) == 10
    # NOT IN with a NULL is never TRUE: every leaf keeps it
    assert all(t.filter_sql is not None for t in ns.plan("k NOT IN (1, NULL)"))
    mixed = ns.plan("k IN (1, 2) AND v > 50")
    assert len(mixed) == 2 and all("k" not in t.filter_sql for t in mixed)


def test_partition_only_counts_open_no_leaf_and_build_no_leaf(tmp_path, monkeypatch):
    ns, data = _namespace(tmp_path)

    def refuse(self, leaf):
        raise AssertionError(f"count opened leaf {leaf.object_id}")

    monkeypatch.setattr(Snapshot, "open_leaf", refuse)
    leaf, task = _count_builds(monkeypatch)
    ks = data.column("k")
    assert ns.count("k >= 0") == data.num_rows
    assert ns.count("k IN (1, 2, 7)") == pc.sum(pc.is_in(ks, pa.array([1, 2, 7]))).as_py()
    assert ns.count("k NOT IN (1, 2)") == pc.sum(pc.invert(pc.is_in(ks, pa.array([1, 2])))).as_py()
    assert (
        ns.count("k > 3 AND k <= 9")
        == pc.sum(pc.and_(pc.greater(ks, 3), pc.less_equal(ks, 9))).as_py()
    )
    assert leaf.calls == 0 and task.calls == 0


def test_a_count_with_a_residual_still_opens_the_leaves_it_needs(tmp_path, monkeypatch):
    ns, data = _namespace(tmp_path)
    opened: list[str] = []
    real = Snapshot.open_leaf

    def spy(self, leaf, *args, **kwargs):
        opened.append(leaf.object_id)
        return real(self, leaf, *args, **kwargs)

    monkeypatch.setattr(Snapshot, "open_leaf", spy)
    want = data.filter(pc.field("k").isin([1, 2]) & (pc.field("v") > 50)).num_rows
    assert ns.count("k IN (1, 2) AND v > 50") == want
    assert len(opened) == 2  # the two partitions IN selects, not all twelve


def test_string_and_date_partitions_decide_column_wise_as_per_value(tmp_path):
    """String and date identity values (vectorised) and a bucket (per value) together."""
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("d", pa.date32())])
    rng = random.Random(7)
    names = ["", "a", "ab", "b", "é", "z", None]
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(5)] + [None]
    n = 60
    data = pa.table(
        {
            "id": list(range(n)),
            "s": [rng.choice(names) for _ in range(n)],
            "d": [rng.choice(days) for _ in range(n)],
        },
        schema=schema,
    )
    ns = lp.create(str(tmp_path / "ns"), schema, "s, d, bucket(4, id)")
    ns.append(data)
    ns = lp.open(ns.root)
    cases = {
        "s >= 'ab' AND id > 10": (pc.field("s") >= "ab") & (pc.field("id") > 10),
        "s IN ('a', 'é') AND d < DATE '2024-01-03'": pc.field("s").isin(["a", "é"])
        & (pc.field("d") < dt.date(2024, 1, 3)),
        "d >= DATE '2024-01-02' AND s IS NOT NULL": (pc.field("d") >= dt.date(2024, 1, 2))
        & pc.field("s").is_valid(),
        # SQL: NULL NOT IN (...) is NULL, so NULL strings are not selected
        "s NOT IN ('b') AND id < 40": pc.field("s").is_valid()
        & ~pc.field("s").isin(["b"])
        & (pc.field("id") < 40),
    }
    for flt, expr in cases.items():
        scan = ns.scan(flt)
        assert [t.filter_sql for t in ns.plan(flt)] == [
            scan.leaf_filter(lf) for lf in scan.leaves
        ], flt
        assert ns.count(flt) == data.filter(expr).num_rows, flt
        got = ns.scan(flt).to_arrow()
        assert sorted(got.column("id").to_pylist()) == sorted(
            data.filter(expr).column("id").to_pylist()
        ), flt


def test_a_count_over_every_partition_builds_no_leaf(tmp_path, monkeypatch):
    """``k >= 0`` keeps every partition and decides each one whole: counted from
    ``__manifest`` column-wise, with no ``Leaf`` built per partition."""
    ns, data = _namespace(tmp_path, partitions=30)
    leaf, task = _count_builds(monkeypatch)
    assert ns.count("k >= 0") == data.num_rows
    assert ns.count("k != 3") == data.num_rows - 3
    assert leaf.calls == 0 and task.calls == 0


def test_calendar_fields_decide_per_value_beside_identity(tmp_path):
    """Month ranges go through the calendar hierarchy (value by value); the answers
    match the per-leaf residuals and pyarrow.compute."""
    schema = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("k", pa.int64())])
    start = dt.date(2023, 11, 1)
    n = 80
    data = pa.table(
        {
            "id": list(range(n)),
            "d": [start + dt.timedelta(days=9 * i) for i in range(n)],
            "k": [i % 3 for i in range(n)],
        },
        schema=schema,
    )
    ns = lp.create(str(tmp_path / "ns"), schema, "year(d), month(d), k")
    ns.append(data)
    ns = lp.open(ns.root)
    cases = {
        "d >= DATE '2024-02-01' AND k IN (0, 2)": (pc.field("d") >= dt.date(2024, 2, 1))
        & pc.field("k").isin([0, 2]),
        "d < DATE '2024-03-15' AND k > 0": (pc.field("d") < dt.date(2024, 3, 15))
        & (pc.field("k") > 0),
    }
    for flt, expr in cases.items():
        scan = ns.scan(flt)
        assert [t.filter_sql for t in ns.plan(flt)] == [
            scan.leaf_filter(lf) for lf in scan.leaves
        ], flt
        assert ns.count(flt) == data.filter(expr).num_rows, flt


_X = Ref("x")
_COLUMNS = [
    (pa.int64(), [0, 5, -3, 10**12, None, 7]),
    (pa.int32(), [0, 5, -3, None]),
    (pa.string(), ["", "a", "ab", "b", "é", None]),
    (pa.date32(), [dt.date(2024, 1, 1), dt.date(2023, 12, 31), None]),
    (pa.bool_(), [True, False, None]),
    (pa.float64(), [0.5, -1.0, None]),
]
_LITERALS = [0, 5, 10**12, 2**70, "ab", "é", dt.date(2024, 1, 1), True, 0.5, None]


def _preds():
    for op in ("=", "!=", "<", "<=", ">", ">="):
        for lit in _LITERALS:
            yield Compare(op, _X, Literal(lit))
    for negated in (False, True):
        for lits in ([5, 7], ["a", "b"], [dt.date(2024, 1, 1)], [True], [5, None], [2**70]):
            yield In(_X, tuple(Literal(v) for v in lits), negated)
    yield IsNull(_X, True)
    yield IsNull(_X, False)


@pytest.mark.parametrize(("arrow_type", "values"), _COLUMNS)
def test_identity_column_wise_answers_equal_the_per_value_ones(arrow_type, values):
    """Where identity answers column-wise, each answer is the per-value one (None: null)."""
    ident = Identity()
    column = pa.array(values, arrow_type)
    answered = 0
    for pred in _preds():
        got = ident.strict_project_array(pred, column, arrow_type)
        if got is None:  # no exact column-wise form: asked value by value
            continue
        answered += 1
        want = [ident.strict_project(pred, v, arrow_type) for v in values]
        assert got.to_pylist() == want, pred
    assert answered > 0


@pytest.mark.parametrize(
    ("pred", "value", "expected"),
    [
        (In(_X, (Literal(1), Literal(2))), 1, True),
        (In(_X, (Literal(1), Literal(2))), 3, False),
        (In(_X, (Literal(1), Literal(None))), 1, True),
        (In(_X, (Literal(1), Literal(None))), 3, False),  # NULL, not TRUE
        (In(_X, (Literal(1), Literal(2)), True), 3, True),
        (In(_X, (Literal(1), Literal(2)), True), 2, False),
        (In(_X, (Literal(1), Literal(None)), True), 3, False),  # never TRUE
        (In(_X, (Literal(1),)), None, None),  # a NULL partition: cannot say here
    ],
)
def test_identity_in_list_by_hand(pred, value, expected):
    assert Identity().strict_project(pred, value, pa.int64()) is expected


def test_spark_planning_counts_the_partitions_without_a_leaf_each(tmp_path, monkeypatch):
    """Spark's read planning reports how many partitions the filter skipped; the
    total comes from the columns, so a pruned read builds a ``Leaf`` only for the
    partitions it keeps (a million-partition namespace would otherwise build a
    million)."""
    pytest.importorskip("pyspark")
    from lance_partitioned.spark.planning import plan_read

    ns, _ = _namespace(tmp_path, partitions=30)
    leaf, _task = _count_builds(monkeypatch)
    plan, scan = plan_read(ns.snapshot, "k = 3")
    assert len(scan.leaves) == 1
    assert leaf.calls <= 1
