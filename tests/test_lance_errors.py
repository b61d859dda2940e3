"""No message a user sees shows a Rust source path (issue 28 D12).

Lance appends the Rust source location to its errors (``, /rustc/<hash>/library/…
/function.rs:250:5``, ``, /home/runner/…/projection.rs:76:24``), and it panics on
some input (``pyo3_runtime.PanicException``, which ``except Exception`` misses).
Every public method of ``PartitionedNamespace`` and ``Scan`` is a boundary
(``errors.lance_boundary``): what it raises has a clean message, and Lance's own
exception stays ``__cause__`` for ``--debug``. Errors are provoked through the
public API: a damaged leaf, filters Lance refuses while planning or executing,
input that used to reach Lance unchecked, and failures injected into Lance calls.
"""

from __future__ import annotations

import re
from pathlib import Path

import lance
import pytest
from conftest import EVENTS_SCHEMA, make_events

import lance_partitioned as lp
from lance_partitioned.errors import lance_message, shows_rust_path
from lance_partitioned.operations.write import job

RUST_PATH = re.compile(r"/rustc/|\.rs:\d")
LANCE_SAYS = "LanceError(IO): boom, /rustc/0123abcd/library/core/src/ops/function.rs:250:5"


def provoke(action) -> BaseException:
    """The exception ``action`` raises (any kind, a panic too); fails if it raises none."""
    try:
        action()
    except BaseException as exc:  # noqa: BLE001 (a panic is what some of these were)
        return exc
    pytest.fail("expected an error")


def assert_clean(exc: BaseException) -> None:
    assert isinstance(exc, Exception), f"{type(exc).__name__} escapes `except Exception`"
    assert not RUST_PATH.search(str(exc)), str(exc)


@pytest.fixture
def ns(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), EVENTS_SCHEMA, "year(event_date), country")
    ns.append(make_events(60))
    return ns


def test_a_damaged_leaf_gives_clean_chained_errors(ns):
    ns.append(make_events(60, start_id=1000))  # two files per leaf: compaction reads them
    leaf = ns.plan("country = 'US'")[0]
    data_file = next((Path(leaf.uri) / "data").glob("*.lance"))
    with open(data_file, "r+b") as f:
        f.truncate(100)
    version = lp.open(ns.root).version
    reads = [
        lambda: ns.to_arrow(),
        lambda: ns.count("amount > -1"),
        lambda: list(ns.scan().to_batches()),
        lambda: ns.scan(columns=["id"]).to_reader().read_all(),
        lambda: ns.scan("country = 'US'").to_pandas(),
    ]
    for action in reads:
        exc = provoke(action)
        assert_clean(exc)
        assert isinstance(exc, lp.LanceError) and isinstance(exc, (OSError, ValueError))
        assert f"reading partition {leaf.object_id}" in str(exc)
        assert RUST_PATH.search(str(exc.__cause__)), "Lance's own error is the cause"
    for action in (lambda: ns.delete("id = 3"), lambda: ns.compact()):
        exc = provoke(action)
        assert_clean(exc)
        assert isinstance(exc, lp.LanceError) and RUST_PATH.search(str(exc.__cause__))
    assert lp.open(ns.root).version == version


@pytest.mark.parametrize(
    "action",
    [
        # before issue 28: a Lance panic, then a Rust path
        lambda ns: ns.append(make_events(5), max_rows_per_file=0),
        lambda ns: ns.scan(columns=["id", "id"]).to_arrow(),
        # filters Lance refuses while planning, and while running inside a leaf
        lambda ns: ns.to_arrow("id + 'x' = 3"),
        lambda ns: ns.to_arrow("CAST(country AS int) = 3"),
        lambda ns: ns.count("regexp_match(country, '(') IS NOT NULL"),
        lambda ns: ns.delete("CAST(country AS int) = 3"),
    ],
    ids=["max_rows_per_file=0", "duplicate-column", "plan", "cast", "regex", "delete-cast"],
)
def test_bad_input_gives_clean_errors(ns, action):
    version = lp.open(ns.root).version
    exc = provoke(lambda: action(ns))
    assert_clean(exc)
    assert isinstance(exc, lp.PartitionedNamespaceError)
    assert lp.open(ns.root).version == version


def test_injected_lance_failures_are_wrapped_by_kind(ns, monkeypatch):
    class PanicException(BaseException):  # pyo3's, as Lance raises it
        pass

    def fails(kind):
        def count_rows(self, *args, **kwargs):
            raise kind(LANCE_SAYS)

        return count_rows

    for kind, builtin in ((OSError, OSError), (ValueError, ValueError), (PanicException, None)):
        monkeypatch.setattr(lance.LanceDataset, "count_rows", fails(kind))
        exc = provoke(lambda: ns.count("amount > -1"))
        assert_clean(exc)
        assert isinstance(exc, lp.LanceError) and isinstance(exc.__cause__, kind)
        assert "LanceError(IO): boom" in str(exc)
        if builtin is not None:
            assert isinstance(exc, builtin)  # code catching Lance's kind still catches it
        else:
            assert isinstance(exc, RuntimeError) and "panic" in str(exc)


def test_our_errors_quoting_lance_are_cleaned(ns, monkeypatch):
    def commit(*args, **kwargs):
        raise lp.SchemaError(f"partition p: cannot add columns ['x']: {LANCE_SAYS}")

    monkeypatch.setattr(job, "commit_write", commit)
    exc = provoke(lambda: ns.append(make_events(3, start_id=900)))
    assert_clean(exc)
    assert type(exc) is lp.SchemaError
    assert str(exc) == "partition p: cannot add columns ['x']: LanceError(IO): boom"


LONG_WORD = "invert(" * 40_000 + "x"  # a generated filter quoted in a message


@pytest.mark.parametrize(
    "said, shown",
    [
        (LANCE_SAYS, "LanceError(IO): boom"),
        (
            "Duplicate column name: id, /home/runner/lance/src/projection.rs:76:24",
            "Duplicate column name: id",
        ),
        ("two: a /x/y.rs:1:2 and b, /p/q.rs:3:4 end", "two: a and b end"),
        ("joined, /a/b.rs:1:2/c/d.rs:3:4 rest", "joined rest"),
        (
            "not a path: lib.rs:1:2 or /.rs:1:2 or a/ b.rs:3:4",
            "not a path: lib.rs:1:2 or /.rs:1:2 or a/ b.rs:3:4",
        ),
        (f"filter {LONG_WORD}: failed, /a/b.rs:9:9", f"filter {LONG_WORD}: failed"),
        (f"filter {LONG_WORD}/a/b.rs:9:9 failed", "filter failed"),
    ],
    ids=["rustc", "home", "two", "adjacent", "not-paths", "long-word", "long-word-path"],
)
def test_lance_message_removes_exactly_the_rust_paths(said, shown):
    """The path is the whole word ending in ``/<path>.rs:<line>:<column>``, with the ", "
    before it; the rest of the message stays as it was, however long its words."""
    assert lance_message(Exception(said)) == shown
    assert shows_rust_path(said) == (said != shown)
