"""The code blocks of a Markdown document, run as a reader would run them.

One home for running documentation examples: tests/test_docs_examples.py runs every
page of docs/ (the blocks that need nothing), tests/test_docs_spark_examples.py the
blocks that need Spark, tests/test_storage_docs.py those that need S3, and
tests/test_readme_tour.py the README's tour.

What runs:

- a ```python block is executed; the blocks of one document run in order in one
  scope, sharing their variables as a reader's session would;
- each line of a ```bash block is a ``lance-partitioned`` command, run through the
  command line's ``main`` (in this process), and must exit 0; any other command
  fails the test unless the block is marked ``no-run``;
- other fences (```json, ```text, diagrams without a language) are not code and do
  not run.

A comment on the line(s) just above a block's opening fence marks it:

- ``<!-- needs: spark -->``: the block needs a Spark session; it runs with the test
  session as ``spark`` (``lps.local_session()`` returns that session there and
  ``lps.stop_session`` leaves it running). Spark's Python workers do not share the
  test's working directory, so such blocks use absolute paths. The README's
  ```python spark fence means the same.
- ``<!-- needs: s3 -->``: the block runs against the tests' S3 server, with its
  endpoint, credentials and a fresh bucket in place of the placeholders it shows.
- ``<!-- no-run: reason -->``: the block does not run; the reason must be stated
  (for example: needs a cluster, or real cloud credentials). Such blocks are rare.

The examples check their own results with ``assert``. Tracebacks name the document
and its line, since each block is compiled at its own line of the file.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

FENCE = re.compile(r"^(`{3,})\s*(.*)$")
# the colon is optional here so that a marker missing its value is an error, not a comment
MARKER = re.compile(r"^<!--\s*(needs|no-run)\b\s*:?(.*?)-->\s*$")
# what a block may need, and the test module that provides it
NEEDS = {"spark": "tests/test_docs_spark_examples.py", "s3": "tests/test_storage_docs.py"}


@dataclass(frozen=True)
class Block:
    """One fenced block: its language (first word of the info string, "" if none), its
    code, the 1-based line of its first code line, and its markers."""

    path: Path
    language: str
    code: str
    line: int
    needs: frozenset[str] = frozenset()
    no_run: str | None = None

    @property
    def runs(self) -> bool:
        """Whether the runner executes it: python or bash, and not marked no-run."""
        return self.language in ("python", "bash") and self.no_run is None


def _marker(line: str, where: str) -> tuple[str, str] | None:
    """(kind, value) of a marker comment, or None for any other line."""
    found = MARKER.match(line.strip())
    if found is None:
        return None
    kind, value = found.group(1), found.group(2).strip()
    if kind == "no-run" and not value:
        raise ValueError(f"{where}: <!-- no-run: ... --> must state its reason")
    if kind == "needs" and value not in NEEDS:  # "" included
        raise ValueError(f"{where}: <!-- needs: {value} -->: no test provides it ({NEEDS})")
    return kind, value


def _section(lines: list[str], heading: str | None) -> tuple[list[str], int]:
    """The lines from ``heading`` up to the next ``## `` heading (all lines if None),
    and the index of the first one."""
    if heading is None:
        return lines, 0
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end], start


def blocks(path: Path, section: str | None = None) -> list[Block]:
    """The fenced blocks of ``path`` (of its ``section``: a heading's start, up to the
    next ``## `` heading), in document order. A marker comment not directly above a
    block, a ``no-run`` without a reason or an unknown ``needs`` raises ValueError."""
    lines, offset = _section(path.read_text().splitlines(), section)
    found: list[Block] = []
    markers: dict[str, str] = {}
    i = 0
    while i < len(lines):
        where = f"{path.name}:{offset + i + 1}"
        marker = _marker(lines[i], where)
        if marker is not None:
            markers[marker[0]] = marker[1]
        elif FENCE.match(lines[i]):
            block, i = _block(path, lines, i, offset, markers)
            found.append(block)
            markers = {}
        elif lines[i].strip() and markers:
            raise ValueError(f"{where}: a marker comment must stand just above a code block")
        i += 1
    return found


def _block(
    path: Path, lines: list[str], start: int, offset: int, markers: dict[str, str]
) -> tuple[Block, int]:
    """The block whose opening fence is ``lines[start]``, and the index of its closing
    fence."""
    fence = FENCE.match(lines[start])
    assert fence is not None
    end = next(
        (j for j in range(start + 1, len(lines)) if lines[j].strip() == fence.group(1)), None
    )
    if end is None:
        raise ValueError(f"{path.name}:{offset + start + 1}: a code block that is never closed")
    language, *words = fence.group(2).split() or [""]
    needs = {markers["needs"]} if "needs" in markers else set()
    needs |= {word for word in words if word in NEEDS}  # the README's ```python spark
    code = "\n".join(lines[start + 1 : end]) + "\n"
    block = Block(path, language, code, offset + start + 2, frozenset(needs), markers.get("no-run"))
    return block, end


def run_blocks(found: list[Block], scope: dict | None = None) -> dict:
    """Run the blocks that run (``Block.runs``) in order in one scope; return it."""
    scope = {"__name__": "__doc_example__"} if scope is None else scope
    for block in found:
        if not block.runs:
            continue
        if block.language == "python":
            # blank lines first: a traceback names the document's own line numbers
            source = "\n" * (block.line - 1) + block.code
            exec(compile(source, str(block.path), "exec"), scope)
        else:
            _run_commands(block)
    return scope


def run_spark_blocks(found: list[Block], spark: Any, monkeypatch: Any) -> dict:
    """Run ``found`` (blocks that need Spark) with the test session ``spark``: in their
    scope, and as what ``lps.local_session()`` returns (``lps.stop_session`` leaves it
    up). The session is shared by the whole run, so the temporary views the blocks
    create are dropped afterwards (a later test may create one of the same name)."""
    import lance_partitioned.spark as lps

    monkeypatch.setattr(lps, "local_session", lambda *args, **kwargs: spark)
    monkeypatch.setattr(lps, "stop_session", lambda *args, **kwargs: None)
    views = _temporary_views(spark)
    try:
        return run_blocks(found, {"__name__": "__doc_example__", "spark": spark})
    finally:
        for view in _temporary_views(spark) - views:
            spark.catalog.dropTempView(view)


def _temporary_views(spark: Any) -> set[str]:
    return {table.name for table in spark.catalog.listTables() if table.isTemporary}


def _run_commands(block: Block) -> None:
    from test_cli import run

    for number, args in _commands(block.code):
        where = f"{block.path.name}:{block.line + number}"
        assert args[0] == "lance-partitioned", (
            f"{where}: a bash block runs lance-partitioned commands only "
            f"(mark it <!-- no-run: reason --> otherwise): {shlex.join(args)}"
        )
        run(*args[1:])  # exit code 0, or the assertion shows stderr


def _commands(code: str) -> list[tuple[int, list[str]]]:
    """(line offset, argv) of each command; a trailing backslash continues a line."""
    commands: list[tuple[int, list[str]]] = []
    pending, first = "", 0
    for number, line in enumerate(code.splitlines()):
        if not pending:
            first = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        args = shlex.split(pending + line, comments=True)
        pending = ""
        if args:
            commands.append((first, args))
    return commands


def documents() -> list[Path]:
    """Every page of the documentation site (docs/*.md): each is run by the tests."""
    return sorted(DOCS.glob("*.md"))
