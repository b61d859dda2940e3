"""The blocks of docs/ that need Spark (marked ``<!-- needs: spark -->``) run as
written, with the test session (tests/docs_blocks.py)."""

from __future__ import annotations

import pytest
from docs_blocks import blocks, documents, run_spark_blocks

SPARK_PAGES = [p for p in documents() if any("spark" in b.needs for b in blocks(p))]


@pytest.mark.parametrize("path", SPARK_PAGES, ids=lambda path: path.name)
def test_spark_examples_run(spark, tmp_path, monkeypatch, path):
    """A page's Spark blocks run in order in one scope holding the test session."""
    monkeypatch.chdir(tmp_path)
    run_spark_blocks([b for b in blocks(path) if "spark" in b.needs], spark, monkeypatch)


def test_the_spark_pages_have_spark_examples():
    """SPARK.md, SPJ.md, SEARCH.md's Spark section and STREAMING.md are covered here."""
    pages = {path.name for path in SPARK_PAGES}
    assert {"SPARK.md", "SPJ.md", "SEARCH.md", "STREAMING.md"} <= pages
