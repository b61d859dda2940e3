"""The README's five-minute tour runs as written: its Python and command-line blocks
in order in one empty directory, then its Spark block with the test session."""

from __future__ import annotations

from docs_blocks import ROOT, blocks, run_blocks, run_spark_blocks

import lance_partitioned as lp

TOUR = "## A five-minute tour"


def test_the_tour_runs(tmp_path, monkeypatch, spark):
    monkeypatch.chdir(tmp_path)
    found = blocks(ROOT / "README.md", TOUR)
    assert [(b.language, b.needs) for b in found] == [
        ("python", set()),
        ("bash", set()),
        ("python", {"spark"}),
        ("python", {"spark"}),
    ]
    run_blocks(found[:2])
    assert lp.open("events").validate() == []
    run_spark_blocks(found[2:], spark, monkeypatch)
    assert lp.open("sales").count() == 1000
    assert lp.open("sales_copy").count() == 1000
