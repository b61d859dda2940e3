"""The examples of docs/CHANGES.md, docs/PYTHON.md and docs/CLI.md run as
written, and the conflict rule CHANGES.md §5 states holds.

The blocks of a document run in order in one empty directory (its examples use
relative paths), sharing their variables as a reader's session would: each
```python block is executed, each line of a ```bash block is a
``lance-partitioned`` command run through the command line's ``main`` and must
exit 0. The examples check their own results with ``assert`` (values worked
out by hand from the rows they write).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pyarrow as pa
import pytest
from test_cli import run
from test_search_docs import ROOT

import lance_partitioned as lp
from lance_partitioned.operations.change import merge as merge_module

FENCE = re.compile(r"```(python|bash)\n(.*?)```", flags=re.S)


def blocks(path: Path, section: str | None = None) -> list[tuple[str, str]]:
    """(language, code) of the python and bash blocks of ``path`` (of its ``section``,
    up to the next ``## `` heading), in document order."""
    text = path.read_text()
    if section is not None:
        start = text.index(section)
        nxt = text.find("\n## ", start + len(section))
        text = text[start : nxt if nxt != -1 else len(text)]
    return FENCE.findall(text)


def run_blocks(found: list[tuple[str, str]], where: str) -> None:
    scope: dict = {"__name__": "__doc_example__"}
    for language, code in found:
        if language == "python":
            exec(compile(code, where, "exec"), scope)
            continue
        for line in code.splitlines():
            args = shlex.split(line, comments=True)
            if not args:
                continue
            assert args[0] == "lance-partitioned", line
            run(*args[1:])  # exit code 0, or the assertion shows stderr


def test_examples_run(tmp_path, monkeypatch):
    found = blocks(ROOT / "docs/CHANGES.md")
    assert {language for language, _ in found} == {"python", "bash"}
    monkeypatch.chdir(tmp_path)
    run_blocks(found, "docs/CHANGES.md:example")
    assert lp.open("orders").validate() == []


@pytest.mark.parametrize("path", ["docs/PYTHON.md", "docs/CLI.md"])
def test_guide_examples_run(tmp_path, monkeypatch, path):
    """The Python guide and the command-line page run in order in an empty directory."""
    monkeypatch.chdir(tmp_path)
    run_blocks(blocks(ROOT / path), f"{path}:example")
    assert lp.open("events").validate() == []


def test_two_merges_of_one_new_key_never_duplicate_it(tmp_path, monkeypatch):
    """Merge A plans (key 5 is new: an insert); merge B inserts key 5 and publishes
    before A does. A's commit conflicts, A plans again, finds key 5 and updates it:
    the key is there once, with A's values (A published last)."""
    schema = pa.schema([("id", pa.int64()), ("g", pa.string()), ("v", pa.float64())])
    root = str(tmp_path / "ns")
    lp.create(root, schema, "g").append(pa.table({"id": [1], "g": ["a"], "v": [0.0]}, schema))
    real = merge_module.plan_merge
    plans = []

    def plan_then_let_b_publish(snapshot, source, clauses):
        planned = real(snapshot, source, clauses)
        plans.append(snapshot.version)
        if len(plans) == 1:  # A's first plan: B runs to its commit before A publishes
            b = pa.table({"id": [5], "g": ["b"], "v": [2.0]}, schema)
            lp.open(root).merge(b, on="id").when_not_matched_insert_all().execute()
        return planned

    monkeypatch.setattr(merge_module, "plan_merge", plan_then_let_b_publish)
    a = pa.table({"id": [5], "g": ["a"], "v": [1.0]}, schema)
    result = (
        lp.open(root).merge(a, on="id").when_matched_update_all().when_not_matched_insert_all()
    ).execute()
    assert len(plans) == 3 and plans[2] > plans[0]  # A, B, then A again on B's version
    assert (result.rows_inserted, result.rows_updated) == (0, 1)
    rows = lp.open(root).to_arrow().to_pylist()
    assert sorted((r["id"], r["g"], r["v"]) for r in rows) == [(1, "a", 0.0), (5, "a", 1.0)]


def test_an_append_published_while_a_merge_plans_is_kept(tmp_path, monkeypatch):
    """CHANGES.md §5: an append into a partition the merge does not touch, published
    while the merge is planned, survives the merge (which may plan again: Lance
    refuses an update of ``__manifest`` another update preempted), and the merge's
    change is there too."""
    schema = pa.schema([("id", pa.int64()), ("g", pa.string()), ("v", pa.float64())])
    root = str(tmp_path / "ns")
    ns = lp.create(root, schema, "g")
    ns.append(pa.table({"id": [1, 2], "g": ["a", "b"], "v": [0.0, 0.0]}, schema))
    real = merge_module.plan_merge
    plans = []

    def plan_then_append(snapshot, source, clauses):
        planned = real(snapshot, source, clauses)
        plans.append(snapshot.version)
        if len(plans) == 1:
            lp.open(root).append(pa.table({"id": [9], "g": ["b"], "v": [9.0]}, schema))
        return planned

    monkeypatch.setattr(merge_module, "plan_merge", plan_then_append)
    change = pa.table({"id": [1], "g": ["a"], "v": [1.0]}, schema)
    result = lp.open(root).merge(change, on="id").when_matched_update_all().execute()
    assert result.rows_updated == 1 and result.version == lp.open(root).version
    rows = lp.open(root).to_arrow().to_pylist()
    assert sorted((r["id"], r["v"]) for r in rows) == [(1, 1.0), (2, 0.0), (9, 9.0)]
