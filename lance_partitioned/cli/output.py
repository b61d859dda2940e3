"""Rendering: rich tables and text for people, JSON for machines.

Every command builds plain data first; ``emit`` prints it as JSON with
``--json`` and otherwise calls the command's renderer. Values JSON does not
know (dates, decimals, timestamps, bytes) are written as text.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich loads when something is printed, not with --help
    from rich.console import Console
    from rich.table import Table


def console(stderr: bool = False) -> Console:
    """A console on stdout (or stderr); off a terminal, wide and without colour, so output
    piped to a file keeps one row per line."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    is_tty = stream.isatty()
    return Console(
        file=stream,
        width=None if is_tty else 200,
        no_color=not is_tty,
        highlight=False,
        soft_wrap=not is_tty,
    )


def _default(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if hasattr(value, "__dataclass_fields__"):
        return _finite({k: getattr(value, k) for k in value.__dataclass_fields__})
    return str(value)


def _finite(value: Any) -> Any:
    """``value`` with NaN and the infinities as the strings ``"NaN"``, ``"Infinity"``
    and ``"-Infinity"``: JSON has no such numbers (``json.dumps`` would print bare
    ``NaN``, which strict parsers refuse)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def to_json(data: Any) -> str:
    """``data`` as indented, strict JSON; non-JSON values become text (dates ISO,
    decimals exact, NaN and the infinities as strings)."""
    return json.dumps(_finite(data), default=_default, indent=2, sort_keys=False, allow_nan=False)


def emit(as_json: bool, data: Any, render: Callable[[Console], None]) -> None:
    """Print ``data`` as JSON, or call ``render`` with a console."""
    if as_json:
        sys.stdout.write(to_json(data) + "\n")
    else:
        render(console())


def text(value: Any) -> str:
    """One cell: NULL for None, ISO dates, plain numbers."""
    if value is None:
        return "NULL"
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return ", ".join(f"{k}={text(v)}" for k, v in value.items())
    return str(value)


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A rich table of ``rows`` under ``columns``."""
    from rich.table import Table

    out = Table(title=title, show_lines=False, title_justify="left")
    for c in columns:
        out.add_column(c, overflow="fold")
    for row in rows:
        out.add_row(*(text(v) for v in row))
    return out
