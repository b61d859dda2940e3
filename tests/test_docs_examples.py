"""Every code block of the documentation runs as written (tests/docs_blocks.py says
what runs and how a block is marked): here, the blocks of each page of docs/ that
need nothing; blocks that need Spark or S3 run in the modules named by
``docs_blocks.NEEDS``. (The README's tour runs in tests/test_readme_tour.py.)"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from docs_blocks import DOCS, blocks, documents, run_blocks

import lance_partitioned as lp
from lance_partitioned.format.type_json import json_to_arrow_type

# A no-run block is an exception (a cluster, real cloud credentials): at most this many.
MAX_NO_RUN = 3


@pytest.mark.parametrize("path", documents(), ids=lambda path: path.name)
def test_examples_run(tmp_path, monkeypatch, path):
    """The page's blocks that need nothing run in order in an empty working directory;
    every namespace they leave there validates clean."""
    monkeypatch.chdir(tmp_path)
    run_blocks([block for block in blocks(path) if not block.needs])
    for manifest in tmp_path.rglob("__manifest"):
        assert lp.open(str(manifest.parent)).validate() == [], manifest.parent


def test_no_run_blocks_are_rare_and_say_why():
    """Every ``no-run`` block states its reason (``blocks`` refuses one without), and
    there are few of them."""
    skipped = [block for path in documents() for block in blocks(path) if block.no_run]
    assert len(skipped) <= MAX_NO_RUN, [(b.path.name, b.line, b.no_run) for b in skipped]


@pytest.mark.parametrize(
    "page, error",
    [
        ("<!-- no-run -->\n```python\nx = 1\n```\n", "must state its reason"),
        ("<!-- no-run: needs a cluster -->\nText.\n\n```python\nx = 1\n```\n", "just above"),
        ("<!-- needs: gpu -->\n```python\nx = 1\n```\n", "no test provides it"),
        ("```python\nx = 1\n", "never closed"),
    ],
    ids=["no-reason", "away", "unknown-need", "unclosed"],
)
def test_a_wrong_marker_is_an_error(tmp_path, page, error):
    """A marker without its reason, away from its block or needing what no test
    provides is an error, rather than a block that silently runs (or does not)."""
    (tmp_path / "page.md").write_text(page)
    with pytest.raises(ValueError, match=error):
        blocks(tmp_path / "page.md")


def test_markers_and_lines_of_blocks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- no-run: needs a cluster -->\n```python\nraise SystemExit\n```\n\n"
        "<!-- needs: spark -->\n```python\ny = spark\n```\n\n"
        "```bash\nlance-partitioned --help\n```\n\n```python spark\nz = 1\n```\n"
    )
    found = blocks(page)
    assert [(b.language, b.needs, b.no_run, b.runs) for b in found] == [
        ("python", frozenset(), "needs a cluster", False),
        ("python", {"spark"}, None, True),
        ("bash", frozenset(), None, True),
        ("python", {"spark"}, None, True),
    ]
    assert [b.line for b in found] == [3, 8, 12, 16]  # first code lines


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
