"""The README's five-minute tour runs as written: its Python and command-line blocks
in order in one empty directory, then its Spark block with the test session."""

from __future__ import annotations

from test_changes_docs import blocks, run_blocks
from test_search_docs import ROOT, python_blocks

import lance_partitioned as lp

TOUR = "## A five-minute tour"


def test_the_tour_runs(tmp_path, monkeypatch, spark):
    monkeypatch.chdir(tmp_path)
    found = blocks(ROOT / "README.md", TOUR)
    assert [language for language, _ in found] == ["python", "bash"]
    run_blocks(found, "README.md:tour")
    assert lp.open("events").validate() == []
    (spark_block,) = python_blocks(ROOT / "README.md", TOUR, tag="python spark")
    exec(compile(spark_block, "README.md:tour-spark", "exec"), {"spark": spark})
    assert lp.open("sales").count() == 1000
