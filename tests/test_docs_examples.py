"""Every code block of the documentation runs as written (tests/docs_blocks.py says
what runs and how a block is marked): each page of docs/, and the README sections
whose examples are complete programs. Blocks that need Spark run in
tests/test_docs_spark_examples.py."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from docs_blocks import DOCS, ROOT, blocks, documents, run_blocks

import lance_partitioned as lp
from lance_partitioned.format.type_json import json_to_arrow_type

# (heading) of the README sections whose blocks run; its other blocks show calls on
# placeholder data (/data/events, `table`)
README_SECTIONS = ("## Search:", "## Changing rows")

SOURCES = [(path, None) for path in documents()] + [
    (ROOT / "README.md", section) for section in README_SECTIONS
]

# A no-run block is an exception (a cluster, real cloud credentials): at most this many.
MAX_NO_RUN = 3


def label(source: tuple[Path, str | None]) -> str:
    path, section = source
    return f"{path.name}{section or ''}"


@pytest.mark.parametrize("source", SOURCES, ids=[label(s) for s in SOURCES])
def test_examples_run(tmp_path, monkeypatch, source):
    """The document's blocks without Spark run in order in an empty working directory;
    every namespace they leave there validates clean."""
    path, section = source
    monkeypatch.chdir(tmp_path)
    run_blocks([block for block in blocks(path, section) if not block.spark])
    for manifest in tmp_path.rglob("__manifest"):
        assert lp.open(str(manifest.parent)).validate() == [], manifest.parent


def test_no_run_blocks_are_rare_and_say_why():
    """Every ``no-run`` block states its reason (``blocks`` refuses one without), and
    there are few of them."""
    skipped = [b for path, section in SOURCES for b in blocks(path, section) if b.no_run]
    assert len(skipped) <= MAX_NO_RUN, [(b.path.name, b.line, b.no_run) for b in skipped]


def test_markers_are_checked(tmp_path):
    """A no-run marker without a reason, or a marker that is not just above a block,
    is an error rather than a block that silently runs (or silently does not)."""
    page = tmp_path / "page.md"
    page.write_text("<!-- no-run -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="must state its reason"):
        blocks(page)
    page.write_text("<!-- no-run: needs a cluster -->\nSome text.\n\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="just above a code block"):
        blocks(page)
    page.write_text(
        "<!-- no-run: needs a cluster -->\n```python\nraise SystemExit\n```\n\n"
        "<!-- spark -->\n```python\ny = spark\n```\n\n```bash\nlance-partitioned --help\n```\n"
    )
    found = blocks(page)
    assert [(b.language, b.spark, b.no_run, b.runs) for b in found] == [
        ("python", False, "needs a cluster", False),
        ("python", True, None, True),
        ("bash", False, None, True),
    ]
    assert [b.line for b in found] == [3, 8, 12]  # first code lines


def json_values(text: str) -> list:
    """The JSON values written one after another in ``text``."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        value, at = decoder.raw_decode(text, at)
        values.append(value)
    return values


def test_the_type_examples_of_format_md_are_the_types_they_show():
    """FORMAT.md §8's ```json examples are data, not code: each parses to the Arrow
    type its text describes (written here by hand in pyarrow)."""
    (block,) = blocks(DOCS / "FORMAT.md", "### Examples")
    expected = [
        pa.int32(),
        pa.timestamp("us", "UTC"),
        pa.decimal128(38, 10),
        pa.dictionary(pa.int16(), pa.utf8()),
        pa.list_(pa.field("item", pa.float32(), nullable=False), 4),
        pa.map_(
            pa.field("key", pa.utf8(), nullable=False),
            pa.field("value", pa.list_(pa.int32())),
            keys_sorted=True,
        ),
    ]
    assert [json_to_arrow_type(v) for v in json_values(block.code)] == expected
