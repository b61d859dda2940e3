"""Residual filters are decided per spec first, then per leaf (issue 11, constraints).

Whether any partition value of a field can guarantee a conjunct depends only on
the transform and the conjunct: a bucket never guarantees a range. A scan asks
that once per spec (``Transform.may_strict_project``,
``time_ranges.hierarchy_may_imply``) and skips the per-leaf question when no
field can answer, which is what keeps ``plan()`` over thousands of bucket
leaves cheap. These tests pin both halves: the per-spec answer never hides a
per-leaf one, and leaves are not asked what no field can guarantee. Expected
answers are worked out by hand or counted with pyarrow.compute.
"""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.format import pruning, time_ranges
from lance_partitioned.format.expression_eval import ExpressionTransform
from lance_partitioned.format.expressions import Compare, In, IsNull, Like, Literal, Ref
from lance_partitioned.format.transform_base import Transform
from lance_partitioned.format.transforms import (
    Bucket,
    Day,
    Hour,
    Identity,
    Month,
    Truncate,
    Year,
)

X = Ref("x")
OPS = ("=", "!=", "<", "<=", ">", ">=")


def _predicates(samples):
    for op, v in itertools.product(OPS, [*samples, None]):
        yield Compare(op, X, Literal(v))
    yield IsNull(X, False)
    yield IsNull(X, True)
    yield In(X, tuple(Literal(v) for v in samples))
    yield Like(X, "a%", False)


CASES = [
    (Identity(), pa.int64(), [0, 5, -3, 10**12]),
    (Identity(), pa.string(), ["a", "ab", "b"]),
    (Bucket(4), pa.int64(), [0, 1, 2, 3]),
    (Truncate(10), pa.int64(), [0, 10, 20]),
    (Truncate(2), pa.string(), ["a", "ab"]),
    (Year(), pa.date32(), [2020, 2024]),
    (Month(), pa.date32(), [1, 12]),
    (Day(), pa.timestamp("us"), [1, 31]),
    (Hour(), pa.timestamp("us"), [0, 23]),
    (ExpressionTransform("col0 % 2", pa.int64()), pa.int64(), [0, 1]),
]


@pytest.mark.parametrize(("transform", "src_type", "samples"), CASES)
def test_may_strict_project_covers_every_per_leaf_answer(transform, src_type, samples):
    """Where ``strict_project`` answers for some partition value, ``may_strict_project``
    says it may: skipping the per-leaf question never changes a residual."""
    literals = [dt.date(2024, 3, 1), 7, "ab"]
    for pred in _predicates([*samples, *literals]):
        for value in [*samples, None]:
            try:
                verdict = transform.strict_project(pred, value, src_type)
            except Exception:  # noqa: BLE001 - a raising answer is still an answer
                verdict = "raised"
            if verdict is not None:
                assert transform.may_strict_project(pred), (transform, pred, value, verdict)


@pytest.mark.parametrize(
    ("transform", "pred", "expected"),
    [
        (Identity(), Compare(">=", X, Literal(5)), True),
        (Identity(), Compare("=", X, Literal(None)), False),
        (Identity(), Like(X, "a%", False), False),
        (Bucket(4), Compare(">=", X, Literal(5)), False),
        (Bucket(4), Compare("=", X, Literal(5)), False),
        (Bucket(4), IsNull(X, True), True),  # a non-NULL bucket means a non-NULL key
        (Bucket(4), IsNull(X, False), False),
        (Truncate(10), Compare("<", X, Literal(5)), False),
        (Year(), Compare("<", X, Literal(dt.date(2024, 1, 1))), False),
        (ExpressionTransform("col0 % 2", pa.int64()), IsNull(X, True), False),
    ],
)
def test_may_strict_project_by_hand(transform, pred, expected):
    assert transform.may_strict_project(pred) is expected


def test_hierarchy_may_imply_needs_a_range_and_a_year_field(tmp_path):
    schema = pa.schema([pa.field("d", pa.date32())])
    ns = lp.create(str(tmp_path / "ns"), schema, "year(d), month(d)")
    fields = list(ns.spec.fields)
    d = Ref("d")
    day = Literal(dt.date(2024, 3, 1))
    assert time_ranges.hierarchy_may_imply(Compare(">=", d, day), fields)
    assert not time_ranges.hierarchy_may_imply(Compare("=", d, day), fields)
    assert not time_ranges.hierarchy_may_imply(Compare(">=", d, Literal(None)), fields)
    assert not time_ranges.hierarchy_may_imply(Compare(">=", d, day), fields[1:])


@pytest.fixture
def bucketed(tmp_path):
    k = np.arange(64, dtype=np.int64)
    data = pa.table({"k": k, "v": k * 2})
    ns = lp.create(str(tmp_path / "ns"), data.schema, "bucket(8, k)")
    ns.append(data)
    return lp.open(ns.root), data


def test_plan_does_not_ask_leaves_what_no_field_can_guarantee(bucketed, monkeypatch):
    """A range on a bucketed column: no leaf is asked, every leaf keeps the filter."""
    ns, data = bucketed
    calls = []
    original = Transform.strict_project
    hierarchy = time_ranges.hierarchy_implies

    def counting(self, pred, value, source_type):
        calls.append(("strict_project", self, pred))
        return original(self, pred, value, source_type)

    def counting_hierarchy(*args):
        calls.append(("hierarchy_implies",))
        return hierarchy(*args)

    monkeypatch.setattr(Transform, "strict_project", counting)
    monkeypatch.setattr(Bucket, "strict_project", counting, raising=False)
    monkeypatch.setattr(pruning, "hierarchy_implies", counting_hierarchy)
    tasks = ns.plan("k >= 40 AND v < 100")
    assert len(tasks) == 8
    assert calls == []
    assert len({t.filter_sql for t in tasks}) == 1
    assert all(t.filter_sql is not None for t in tasks)
    want = pc.sum(pc.and_(pc.greater_equal(data["k"], 40), pc.less(data["v"], 100))).as_py()
    assert ns.scan("k >= 40 AND v < 100").count() == want


def test_is_not_null_is_still_dropped_per_leaf(bucketed):
    """A conjunct some field may guarantee is still asked per leaf: a non-NULL bucket
    guarantees ``k IS NOT NULL``, so only the range is left."""
    ns, _ = bucketed
    tasks = ns.plan("k IS NOT NULL AND k >= 40")
    assert len(tasks) == 8
    for t in tasks:
        assert "NULL" not in t.filter_sql.upper(), t.filter_sql
        assert "40" in t.filter_sql


def test_leaves_sharing_calendar_values_share_the_answer(tmp_path, monkeypatch):
    """year/month/bucket: the residual depends on (year, month) alone, so it is worked
    out once per month, and each leaf gets its month's answer."""
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(0, 120, 3)]
    data = pa.table({"d": pa.array(days, pa.date32()), "k": pa.array(range(len(days)), pa.int64())})
    ns = lp.create(str(tmp_path / "ns"), data.schema, "year(d), month(d), bucket(4, k)")
    ns.append(data)
    ns = lp.open(ns.root)
    asked = []
    hierarchy = time_ranges.hierarchy_implies

    def counting(p, fields, values, src_type):
        asked.append(tuple(sorted(values.items())))
        return hierarchy(p, fields, values, src_type)

    monkeypatch.setattr(pruning, "hierarchy_implies", counting)
    flt = "d >= DATE '2024-02-15' AND d < DATE '2024-04-01'"
    tasks = ns.plan(flt)
    months = {(t.partition_values["d_year"], t.partition_values["d_month"]) for t in tasks}
    assert months == {(2024, 2), (2024, 3)}
    assert len(tasks) > len(months)  # several buckets per month
    for t in tasks:
        if t.partition_values["d_month"] == 3:  # all of March is inside the range
            assert t.filter_sql is None, t
        else:  # February starts before the bound: the lower bound is still checked
            assert "2024-02-15" in t.filter_sql and "2024-04-01" not in t.filter_sql, t
    # two range conjuncts, asked once per month, not once per leaf
    assert len(asked) == 2 * len(months)
    mask = pc.and_(
        pc.greater_equal(data["d"], pa.scalar(dt.date(2024, 2, 15), pa.date32())),
        pc.less(data["d"], pa.scalar(dt.date(2024, 4, 1), pa.date32())),
    )
    assert ns.scan(flt).count() == pc.sum(mask).as_py()
