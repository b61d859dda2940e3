"""The code blocks of a Markdown document, run as a reader would run them.

One home for running documentation examples (tests/test_docs_examples.py for the
blocks without Spark, tests/test_docs_spark_examples.py for those that need it).

What runs:

- a ```python block is executed; the blocks of one document run in order in one
  scope, sharing their variables as a reader's session would;
- each line of a ```bash block is a ``lance-partitioned`` command, run through the
  command line's ``main`` (in this process), and must exit 0; any other command
  fails the test unless the block is marked ``no-run``;
- other fences (```json, diagrams without a language) are not code and do not run.

A comment on the line(s) just above a block's opening fence marks it:

- ``<!-- spark -->``: the block needs a Spark session; it runs in the Spark test
  module with the test session as ``spark`` (``lps.local_session()`` returns that
  session there and ``lps.stop_session`` leaves it running). Spark's Python
  workers do not share the test's working directory, so such blocks use absolute
  paths (``tempfile.mkdtemp()``). The README's ```python spark fence means the same.
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

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

FENCE = re.compile(r"^(`{3,})\s*(.*)$")
MARKER = re.compile(r"^<!--\s*(spark|no-run)\b(.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language (first word of the info string, "" if none), its
    code, the 1-based line of its first code line, and its markers."""

    path: Path
    language: str
    code: str
    line: int
    spark: bool = False
    no_run: str | None = None

    @property
    def runs(self) -> bool:
        """Whether the runner executes it: python or bash, and not marked no-run."""
        return self.language in ("python", "bash") and self.no_run is None


def _marker(line: str, where: str) -> tuple[str, str] | None:
    """(kind, reason) of a marker comment, or None for any other line."""
    found = MARKER.match(line.strip())
    if found is None:
        return None
    kind, rest = found.group(1), found.group(2).strip()
    reason = rest.removeprefix(":").strip()
    if kind == "no-run" and not reason:
        raise ValueError(f"{where}: <!-- no-run: ... --> must state its reason")
    return kind, reason


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
    block, or a ``no-run`` without a reason, raises ValueError."""
    lines, offset = _section(path.read_text().splitlines(), section)
    found: list[Block] = []
    markers: dict[str, str] = {}
    i = 0
    while i < len(lines):
        where = f"{path.name}:{offset + i + 1}"
        fence = FENCE.match(lines[i])
        marker = _marker(lines[i], where)
        if marker is not None:
            markers[marker[0]] = marker[1]
        elif fence is not None:
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j].strip() == fence.group(1)), None
            )
            if end is None:
                raise ValueError(f"{where}: a code block that is never closed")
            words = fence.group(2).split()
            found.append(
                Block(
                    path,
                    words[0] if words else "",
                    "\n".join(lines[i + 1 : end]) + "\n",
                    offset + i + 2,
                    spark="spark" in markers or "spark" in words[1:],
                    no_run=markers.get("no-run"),
                )
            )
            markers, i = {}, end
        elif lines[i].strip() and markers:
            raise ValueError(f"{where}: a marker comment must stand just above a code block")
        i += 1
    return found


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
