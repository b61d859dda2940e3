"""The one conflict test and the one retry policy (``catalog/retry.py``).

``is_commit_conflict`` is checked against the errors Lance 14.0.2 really raises when
two commits race, produced here on small datasets, and against errors that merely
mention the word. The retry policy is checked for its count, its bound and its jitter,
and through a caller (leaf staging) that meets a conflict at every try.
"""

from __future__ import annotations

import os
import types

import lance
import pyarrow as pa
import pytest
from lance.dataset import Transaction
from lance.fragment import write_fragments
from lance.optimize import Compaction
from txn_helpers import SCHEMA, SPEC, rows

import lance_partitioned as lp
from lance_partitioned.catalog import retry
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.retry import COMMIT_RETRY, RetryPolicy, is_commit_conflict
from lance_partitioned.errors import lance_message
from lance_partitioned.operations.leaf.leaf_changes import AppendFiles, LeafChange
from lance_partitioned.operations.txn.staging import stage_leaf


def _raised(fn) -> BaseException:
    with pytest.raises(BaseException) as info:
        fn()
    return info.value


def _dataset(path, n: int = 3) -> str:
    uri = str(path)
    table = pa.table({"id": pa.array(range(n), pa.int64()), "v": [str(i) for i in range(n)]})
    lance.write_dataset(table, uri)
    return uri


def _config(key: str, value: str):
    return lance.LanceOperation.UpdateConfig(
        table_metadata_updates=lance.LanceOperation.UpdateMap({key: value}, replace=False)
    )


# -- real conflicts ----------------------------------------------------------------


def test_two_commits_on_the_same_version_conflict(tmp_path):
    uri = _dataset(tmp_path / "d")
    ds = lance.dataset(uri)
    op = lance.LanceOperation.Overwrite(ds.schema, [f.metadata for f in ds.get_fragments()])
    lance.LanceDataset.commit(uri, op, read_version=ds.version, max_retries=0)
    exc = _raised(
        lambda: lance.LanceDataset.commit(uri, op, read_version=ds.version, max_retries=0)
    )
    assert type(exc).__name__ == "CommitConflictError" and exc.retryable
    assert is_commit_conflict(exc)


def test_an_incompatible_metadata_commit_conflicts(tmp_path):
    """Two changes of the same table-metadata key: Lance's non-retryable conflict."""
    uri = _dataset(tmp_path / "d")
    base = lance.dataset(uri).version

    def commit(value):
        lance.LanceDataset.commit(
            uri, Transaction(base, _config("k", value)), read_version=base, max_retries=0
        )

    commit("1")
    exc = _raised(lambda: commit("2"))
    assert type(exc).__name__ == "CommitConflictError" and not exc.retryable
    # "Incompatible transaction: ...": only the Rust source path Lance appends
    # (".../conflict_resolver.rs:...") holds the word
    assert "conflict" not in lance_message(exc).lower()
    assert is_commit_conflict(exc)


def test_conflicts_lance_raises_as_a_bare_oserror(tmp_path):
    """Lance's entry points other than ``LanceDataset.commit`` raise the same Rust
    errors as a plain OSError: told apart by the start of the message only."""
    uri = str(tmp_path / "c")
    for i in range(4):
        lance.write_dataset(pa.table({"id": pa.array([i], pa.int64())}), uri, mode="append")
    ds = lance.dataset(uri)
    plan = Compaction.plan(ds, {"target_rows_per_fragment": 1000})
    rewritten = [task.execute(ds) for task in plan.tasks]
    lance.dataset(uri).delete("id = 0")  # touches a fragment the compaction rewrote
    compaction = _raised(lambda: Compaction.commit(ds, rewritten))
    a, b = lance.dataset(uri), lance.dataset(uri)
    a.update_metadata({"k": "1"})
    metadata = _raised(lambda: b.update_metadata({"k": "2"}))
    for exc in (compaction, metadata):
        assert type(exc) is OSError, exc
        assert is_commit_conflict(exc), exc


def test_a_merge_insert_race_conflicts(tmp_path):
    uri = _dataset(tmp_path / "d")
    a, b = lance.dataset(uri), lance.dataset(uri)

    def upsert(ds, v):
        row = pa.table({"id": pa.array([1], pa.int64()), "v": [v]})
        ds.merge_insert(
            "id"
        ).when_matched_update_all().when_not_matched_insert_all().conflict_retries(0).execute(row)

    upsert(a, "x")
    exc = _raised(lambda: upsert(b, "y"))
    assert is_commit_conflict(exc)


def test_an_error_that_only_mentions_conflict_is_not_one(tmp_path):
    """By type, not by text: the behaviour the message-based checks got wrong."""
    uri = _dataset(tmp_path / "d")
    lance_error = _raised(lambda: lance.dataset(uri).to_table(filter="conflict = 1"))
    assert "conflict" in str(lance_error)
    for exc in (
        lance_error,  # a Lance error about a column named "conflict"
        OSError("write conflict on disk"),
        ValueError("conflict between two options"),
        RuntimeError("Commit conflict for version 3"),  # Lance's text, but not Lance's kind
        OSError("the message says: Commit conflict for version 3"),  # not at the start
        lp.SpecError("conflicting partition fields"),
    ):
        assert not is_commit_conflict(exc), exc


def test_the_manifest_raises_our_conflict_with_lances_as_cause(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, SPEC)
    manifest = Manifest(ns.root)
    base = manifest.dataset()
    manifest.commit_operation(base, _config("k", "1"))
    with pytest.raises(lp.CommitConflictError, match="changed concurrently") as info:
        manifest.commit_operation(base, _config("k", "2"), what="the test's change")
    assert is_commit_conflict(info.value.__cause__)
    assert "the test's change was not committed" in str(info.value)
    assert manifest.dataset().metadata["k"] == "1"


# -- the policy --------------------------------------------------------------------


def test_the_policy_counts_its_tries_and_waits_between_them(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(retry, "time", types.SimpleNamespace(sleep=slept.append))
    policy = RetryPolicy(attempts=5, base=0.01, cap=0.03)
    assert list(policy.tries()) == [0, 1, 2, 3, 4]
    assert len(slept) == 4  # none before the first try
    for n, s in enumerate(slept, start=1):
        assert 0 <= s <= min(0.03, 0.01 * 2 ** (n - 1))
    assert [policy.is_last(n) for n in range(5)] == [False] * 4 + [True]
    assert RetryPolicy(attempts=8, base=0.005, cap=0.5) == COMMIT_RETRY


def test_the_backoff_is_bounded_exponential_and_jittered():
    policy = RetryPolicy(attempts=20, base=0.005, cap=0.5)
    assert policy.delay(0) == 0
    for n in range(1, 20):
        bound = min(0.5, 0.005 * 2 ** (n - 1))
        samples = [policy.delay(n) for _ in range(400)]
        assert all(0 <= s <= bound for s in samples), n
        # jittered: spread over the range, not one fixed wait
        assert min(samples) < 0.2 * bound and max(samples) > 0.8 * bound, n
    # COMMIT_RETRY waits at most 5, 10, 20, 40, 80, 160, 320 ms: 0.635 s over its 8 tries
    longest = [max(COMMIT_RETRY.delay(n) for _ in range(400)) for n in range(1, 8)]
    assert 0.6 < sum(longest) <= 0.635


class AlwaysInterfered(LeafChange):
    """Lands another commit on the leaf right before each of ours: every try conflicts."""

    def __init__(self, inner: LeafChange, uri: str, extra: pa.Table):
        self.inner, self.uri, self.extra, self.tries = inner, uri, extra, 0

    def operation(self, base):
        self.tries += 1
        frags = write_fragments(self.extra, self.uri, schema=base.schema)
        lance.LanceDataset.commit(
            self.uri, lance.LanceOperation.Append(frags), read_version=base.version
        )
        return self.inner.operation(base)


def test_staging_tries_as_often_as_the_policy_says(tmp_path, monkeypatch):
    monkeypatch.setattr(retry, "time", types.SimpleNamespace(sleep=lambda s: None))
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, SPEC)
    ns.append(rows("b0", [1], 3, 0))
    (task,) = ns.plan("part = 1")
    uri = os.path.join(ns.root, task.location)
    frags = write_fragments(rows("a", [1], 2, 100), uri, schema=lance.dataset(uri).schema)
    change = AlwaysInterfered(AppendFiles(frags), uri, rows("other", [1], 1, 500))
    with pytest.raises(lp.CommitConflictError, match="kept interleaving"):
        stage_leaf(uri, None, change, "me")
    assert change.tries == COMMIT_RETRY.attempts
