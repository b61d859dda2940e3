"""The Python examples of docs/SEARCH.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def python_blocks(path: Path, section: str | None = None, tag: str = "python") -> list[str]:
    text = path.read_text()
    if section is not None:
        start = text.index(section)
        nxt = text.find("\n## ", start + len(section))
        text = text[start : nxt if nxt != -1 else len(text)]
    return re.findall(rf"```{tag}\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("path, section", [("docs/SEARCH.md", None)])
def test_search_examples_run(path, section):
    blocks = python_blocks(ROOT / path, section)
    assert blocks, f"no python block in {path}"
    for block in blocks:
        exec(compile(block, f"{path}:example", "exec"), {"__name__": "__doc_example__"})


@pytest.mark.parametrize("path, section", [("docs/SEARCH.md", None)])
def test_search_spark_examples_run(spark, path, section):
    """Blocks fenced ```python spark run with the test session as ``spark``."""
    blocks = python_blocks(ROOT / path, section, tag="python spark")
    assert blocks, f"no python spark block in {path}"
    for block in blocks:
        exec(compile(block, f"{path}:spark-example", "exec"), {"spark": spark})
