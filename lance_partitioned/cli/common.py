"""Options every command shares, and parsing of the values they take.

Every command takes the namespace root first, then ``--json``,
``--storage-option key=value`` (repeatable), ``--at-version N|TAG`` (also
spelled ``--version`` after the command; before any command, ``--version`` prints
the package version) and ``--debug``. Bad values are usage errors (exit 2) raised as
``click.BadParameter``, so they name the option.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Context:
    """What the shared options said, handed to each command."""

    root: str
    json: bool
    storage_options: dict[str, str] | None
    version: int | str | None
    debug: bool

    def open(self, pinned: bool = True) -> Any:
        """The namespace at ``--at-version`` (or the latest; ``pinned=False`` ignores it)."""
        import lance_partitioned as lp

        version = self.version if pinned else None
        return lp.open(self.root, version=version, storage_options=self.storage_options)


def key_values(
    values: tuple[str, ...], option: str, form: str = "key=value"
) -> list[tuple[str, str]]:
    """``("k=v", ...)`` → ``[("k", "v"), ...]``, split at the first ``=`` (so a value may
    hold ``=``: ``--set "flag=a = b"``), keys stripped; ``form`` names the expected shape."""
    out: list[tuple[str, str]] = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected {form}, got {item!r}", param_hint=f"'{option}'")
        out.append((key.strip(), value))
    return out


def parse_storage_options(values: tuple[str, ...]) -> dict[str, str] | None:
    """``("k=v", ...)`` → ``{"k": "v"}``; None when empty."""
    return dict(key_values(values, "--storage-option")) or None


def parse_assignments(values: tuple[str, ...]) -> dict[str, str]:
    """``--set`` values, ``("price=price * 1.1", ...)`` → ``{"price": "price * 1.1"}``:
    each column once, each given SQL (the columns themselves are checked by the library)."""
    out: dict[str, str] = {}
    for column, sql in key_values(values, "--set", "COLUMN=SQL"):
        if not sql.strip():
            raise click.BadParameter(f"no SQL given for column {column!r}", param_hint="'--set'")
        if column in out:
            raise click.BadParameter(f"sets column {column!r} twice", param_hint="'--set'")
        out[column] = sql
    return out


def parse_version(value: str | None) -> int | str | None:
    """A ``__manifest`` version number, or a tag name."""
    if value is None:
        return None
    return int(value) if value.isdigit() else value


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(value: str, option: str) -> dt.timedelta:
    """``"7d"``, ``"12h"``, ``"30m"``, ``"0"``, ``"90s"``, ``"2w"`` → a timedelta (no unit: days)."""
    m = _DURATION.match(value)
    if not m:
        raise click.BadParameter(
            f"expected a duration such as 7d, 12h, 30m, 90s or 0, got {value!r}",
            param_hint=f"'{option}'",
        )
    try:
        return dt.timedelta(**{_UNITS[m.group(2) or "d"]: float(m.group(1))})
    except OverflowError:  # timedelta holds at most 999,999,999 days
        raise click.BadParameter(
            f"duration {value!r} is too long; the longest is 999999999d", param_hint=f"'{option}'"
        ) from None


_DECIMAL = re.compile(r"^decimal(128|256)?\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_TIMESTAMP = re.compile(r"^timestamp\[(s|ms|us|ns)(?:,\s*tz=([^\]]+))?\]$")


def parse_type(text: str) -> pa.DataType:
    """An Arrow type from its usual spelling: ``int64``, ``string``, ``date32``, ``double``,
    ``decimal(10,2)`` / ``decimal128(10,2)``, ``timestamp[us]``, ``timestamp[us, tz=UTC]``."""
    import pyarrow as pa  # here: the CLI's modules load only click (a fast --help)

    t = text.strip().lower()
    if m := _DECIMAL.match(t):
        width, p, s = m.groups()
        build = (
            pa.decimal256 if width == "256" or (width is None and int(p) > 38) else pa.decimal128
        )
        return build(int(p), int(s))
    if m := _TIMESTAMP.match(text.strip()):
        return pa.timestamp(m.group(1), tz=m.group(2))
    try:
        return pa.type_for_alias(t)
    except (ValueError, KeyError):
        raise click.BadParameter(
            f"unknown type {text!r}; use an Arrow type name such as int64, double, string, "
            "date32, decimal(10,2) or timestamp[us, tz=UTC]",
            param_hint="TYPE",
        ) from None


def shared_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ROOT and the shared options; the command receives a ``Context`` as ``ctx``."""

    @click.argument("root")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
    @click.option(
        "--storage-option",
        "-s",
        "storage_option",
        multiple=True,
        metavar="KEY=VALUE",
        help="Object-store option (repeatable), e.g. -s aws_region=us-east-1.",
    )
    @click.option(
        "--at-version",
        "--version",
        "version",
        metavar="N|TAG",
        help="Read the namespace at this __manifest version or tag (alias: --version).",
    )
    @click.option("--debug", is_flag=True, help="Show the traceback of an error.")
    @functools.wraps(command)
    def wrapper(
        root: str,
        as_json: bool,
        storage_option: tuple[str, ...],
        version: str | None,
        debug: bool,
        **kwargs: Any,
    ) -> Any:
        obj = click.get_current_context().find_root().ensure_object(dict)
        obj["debug"] = obj.get("debug", False) or debug
        ctx = Context(
            root, as_json, parse_storage_options(storage_option), parse_version(version), debug
        )
        return command(ctx=ctx, **kwargs)

    return wrapper
