"""The ``lance-partitioned`` group, error handling and exit codes.

Exit codes: 0 success; 1 a user error (the library's
``PartitionedNamespaceError`` family, bad input the library refused, or a
check that found problems, such as ``validate``); 2 bad usage (unknown
command or option, a malformed value). An error prints one line,
``error: <message>``; ``--debug`` (before or after the command) adds the
traceback and the whole message. A warning (an unknown storage option, a
cyclic partition field) prints one line, ``warning: <message>``.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

import click

from lance_partitioned.cli import change_commands, read_commands, write_commands
from lance_partitioned.errors import PartitionedNamespaceError, lance_message

USER_ERROR = 1
USAGE_ERROR = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
@click.version_option(package_name="lance-partitioned", prog_name="lance-partitioned")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Inspect and maintain Lance partitioned namespaces.

    Every command takes the namespace ROOT (a directory or an object-store URI)
    and --json, --storage-option KEY=VALUE (repeatable), --at-version N|TAG (a
    namespace version; --version N|TAG after the command is the same) and --debug.
    Before any command, --version prints this package's version.
    """
    ctx.ensure_object(dict)["debug"] = debug


read_commands.register(cli)
write_commands.register(cli)
change_commands.register(cli)


def _one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line, without Rust source paths: its first line, and
    a pointer to ``--debug`` (which prints it whole) when there were more (a filter's
    caret line under the filter, a list of problems)."""
    lines = [line for line in lance_message(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[0] + (" (--debug shows the whole message)" if len(lines) > 1 else "")


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """A warning on one line of stderr, ``warning: <message>``, like errors (no source line)."""
    click.echo(f"warning: {message}", err=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line ``argv`` (default ``sys.argv[1:]``) and exit with its code.

    Example::

        main(["describe", "/data/events", "--json"])
    """
    args = list(sys.argv[1:] if argv is None else argv)
    with warnings.catch_warnings():  # the caller's warning display comes back after
        warnings.showwarning = _show_warning
        _run(args)


def _run(args: list[str]) -> None:
    debug = "--debug" in args
    try:
        code = cli.main(args=args, prog_name="lance-partitioned", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(USER_ERROR)
    except click.UsageError as exc:  # one line too, with where to find help
        where = exc.ctx.command_path if exc.ctx is not None else "lance-partitioned"
        click.echo(f"error: {exc.format_message()} (see '{where} --help')", err=True)
        sys.exit(USAGE_ERROR)
    except click.ClickException as exc:  # e.g. a file that cannot be opened
        exc.show()
        sys.exit(exc.exit_code)
    except (PartitionedNamespaceError, ValueError, TypeError, LookupError, OSError) as exc:
        # the library refused the input (our errors, and the ValueError/TypeError/KeyError
        # its arguments raise); a missing root or file is the user's too
        if debug:
            traceback.print_exc()
        click.echo(f"error: {_one_line(exc)}", err=True)
        sys.exit(USER_ERROR)
    except Exception as exc:  # a bug: still one line unless asked
        if debug:
            traceback.print_exc()
        click.echo(
            f"error: {type(exc).__name__}: {_one_line(exc)} (--debug shows the traceback)",
            err=True,
        )
        sys.exit(USER_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
