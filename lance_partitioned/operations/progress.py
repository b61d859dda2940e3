"""Progress of long operations: one small callback protocol the operations call.

An operation (an append, ``compact``, ``cleanup``, ``vacuum``,
``rewrite_partitions``, ``convert``) asks :func:`reporter` for a
:class:`Progress` and calls ``start(total)``, ``advance(n)`` and ``finish()``
on it. What the caller passed as ``progress=`` decides where that goes:

- ``None`` (the default): a progress bar on standard error when it is a
  terminal, nothing otherwise (pipes, files, CI logs, tests);
- ``True``: a bar on standard error even when it is not a terminal;
- ``False``: nothing;
- a callable: it receives a :class:`ProgressEvent` on every change, on the
  calling thread or a worker thread (operations that work in parallel report
  from their workers, serialised by a lock).

The bar is drawn with ``rich`` when it is installed (it is a dependency of the
command-line tool); without it a bar is silently skipped. Nothing here imports
the rest of the package, so every layer may use it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias


@dataclass(frozen=True)
class ProgressEvent:
    """One change of an operation's progress.

    ``task`` names the operation (``"append"``, ``"compact"``, ...), ``unit``
    what is counted (``"rows"``, ``"partitions"``), ``done`` how many so far,
    ``total`` how many in all (None: unknown, e.g. a stream of batches), and
    ``finished`` is True exactly once, on the last event.
    """

    task: str
    unit: str
    done: int
    total: int | None
    finished: bool = False


ProgressCallback: TypeAlias = Callable[[ProgressEvent], Any]
ProgressLike: TypeAlias = bool | ProgressCallback | None
"""What ``progress=`` accepts: None (a bar on a terminal), True, False, or a callback."""


class Progress:
    """The reporter an operation drives: ``start``, ``advance``, ``finish``.

    Use it as a context manager so ``finish`` runs on errors too. Thread-safe.
    With no callback every call is a cheap no-op.
    """

    def __init__(self, callback: ProgressCallback | None, task: str, unit: str):
        self._callback = callback
        self.task = task
        self.unit = unit
        self.done = 0
        self.total: int | None = None
        self._finished = False
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether anyone listens (operations may skip work done only to report)."""
        return self._callback is not None

    def _emit(self, finished: bool = False) -> None:
        # called under the lock, so events arrive in order with increasing ``done``
        assert self._callback is not None
        self._callback(ProgressEvent(self.task, self.unit, self.done, self.total, finished))

    def start(self, total: int | None = None) -> Progress:
        """Announce the work: ``total`` units (None if unknown). Returns self."""
        if self._callback is None:
            return self
        with self._lock:
            self.total = total
            self._emit()
        return self

    def advance(self, n: int = 1) -> None:
        """``n`` more units are done."""
        if self._callback is None or n == 0:
            return
        with self._lock:
            self.done += n
            self._emit()

    def finish(self) -> None:
        """The operation ended (successfully or not); the last event. Idempotent."""
        if self._callback is None:
            return
        with self._lock:
            if self._finished:
                return
            self._finished = True
            self._emit(finished=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.finish()


NO_PROGRESS = Progress(None, "", "")
"""A reporter that reports nothing (the default of internal functions)."""


def stderr_is_terminal() -> bool:
    """Whether standard error is an interactive terminal (where a bar may be drawn)."""
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def reporter(progress: ProgressLike, task: str, unit: str) -> Progress:
    """The :class:`Progress` for ``progress=`` as a user passed it (see the module doc).

    Example::

        with reporter(progress, "compact", "partitions") as p:
            p.start(len(leaves))
            for leaf in leaves:
                ...
                p.advance()
    """
    if progress is False:
        return Progress(None, task, unit)
    if progress is None or progress is True:
        if progress is None and not stderr_is_terminal():
            return Progress(None, task, unit)
        bar = _rich_bar()
        return Progress(bar, task, unit)
    if callable(progress):
        return Progress(progress, task, unit)
    raise TypeError(
        f"progress must be None, True, False or a callable taking a ProgressEvent, "
        f"got {type(progress).__name__}"
    )


def _rich_bar() -> ProgressCallback | None:
    """A callback drawing a rich progress bar on standard error (None without rich)."""
    try:
        import rich.progress as rp
        from rich.console import Console
    except ImportError:  # rich is optional for the library; no bar then
        return None
    state: dict[str, Any] = {}

    def draw(event: ProgressEvent) -> None:
        if "bar" not in state:
            bar = rp.Progress(
                rp.TextColumn("{task.description}"),
                rp.BarColumn(),
                rp.MofNCompleteColumn(),
                rp.TextColumn("{task.fields[unit]}"),
                rp.TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            bar.start()
            state["bar"] = bar
            state["id"] = bar.add_task(event.task, total=event.total, unit=event.unit)
        bar, tid = state["bar"], state["id"]
        bar.update(tid, completed=event.done, total=event.total)
        if event.finished:
            bar.stop()

    return draw


__all__ = [
    "NO_PROGRESS",
    "Progress",
    "ProgressCallback",
    "ProgressEvent",
    "ProgressLike",
    "reporter",
]
