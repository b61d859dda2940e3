"""The documentation's blocks that need Spark (marked ``<!-- spark -->``, or the
README's ```python spark) run as written, with the test session: the one module
that runs them (tests/docs_blocks.py)."""

from __future__ import annotations

import pytest
from docs_blocks import blocks, run_blocks
from test_docs_examples import SOURCES, label

import lance_partitioned.spark as lps

SPARK_SOURCES = [s for s in SOURCES if any(b.spark for b in blocks(*s))]


@pytest.mark.parametrize("source", SPARK_SOURCES, ids=[label(s) for s in SPARK_SOURCES])
def test_spark_examples_run(spark, tmp_path, monkeypatch, source):
    """A document's Spark blocks run in order in one scope holding ``spark``; the
    session they start and stop is the test session, which stays up."""
    monkeypatch.setattr(lps, "local_session", lambda *args, **kwargs: spark)
    monkeypatch.setattr(lps, "stop_session", lambda *args, **kwargs: None)
    monkeypatch.chdir(tmp_path)
    views = temporary_views(spark)
    try:
        run_blocks(
            [b for b in blocks(*source) if b.spark], {"__name__": "__doc_example__", "spark": spark}
        )
    finally:  # the session is shared: a later test creates a view of the same name (li)
        for view in temporary_views(spark) - views:
            spark.catalog.dropTempView(view)


def temporary_views(spark) -> set[str]:
    """The names of the session's temporary views."""
    return {table.name for table in spark.catalog.listTables() if table.isTemporary}


def test_the_spark_pages_have_spark_examples():
    """SPARK.md, SPJ.md and SEARCH.md's Spark section are covered here."""
    names = {path.name for path, section in SPARK_SOURCES if section is None}
    assert {"SPARK.md", "SPJ.md", "SEARCH.md"} <= names
