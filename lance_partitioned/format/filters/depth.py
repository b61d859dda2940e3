"""Room on Python's stack for a recursive-descent parse of a deeply nested filter.

The filter parser descends once per nesting level (parentheses, function
arguments, CAST, CASE): some 12 Python frames a level, so a filter nested a few
dozen levels deep would reach Python's default recursion limit of 1,000 frames.
Chains (``a OR b OR …``) and runs of ``NOT`` or signs are read in loops and need
no room. :func:`recursion_room` raises the limit for the duration of a parse
when the text needs it, and restores it when the last such parse ends.

Since Python 3.11 a call from Python code to a Python function uses no C stack,
so a higher limit for the parser's own recursion cannot overflow the thread's
stack. The limit is process-wide: raising it is serialised and counted, so
concurrent parses restore it only when the last one ends.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_users = 0  # parses inside ``recursion_room`` that raised, or found raised, the limit
_saved: int | None = None  # the limit before the first of them raised it

# frames for what runs inside the parse besides its descent (constructors, helpers)
_MARGIN = 200

# How deep a filter's expressions may nest (FORMAT.md §7): parentheses, function
# calls, CAST and CASE in SQL text; nodes in a pyarrow or DataFusion expression.
MAX_NESTING = 1000
# Python frames one level of nesting takes in the parser or a translation, at most
FRAMES_PER_LEVEL = 16


def _frames_in_use() -> int:
    frame, n = sys._getframe(1), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


@contextlib.contextmanager
def recursion_room(frames: int) -> Iterator[None]:
    """Make sure ``frames`` more Python frames fit below the caller's, inside the block."""
    global _users, _saved
    need = _frames_in_use() + frames + _MARGIN
    if need <= sys.getrecursionlimit() and _saved is None:
        yield  # the common case: a shallow filter, nothing to change
        return
    with _lock:
        if need > sys.getrecursionlimit():
            if _saved is None:
                _saved = sys.getrecursionlimit()
            sys.setrecursionlimit(need)
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                sys.setrecursionlimit(_saved)
                _saved = None


@contextlib.contextmanager
def translation_room(what: str) -> Iterator[None]:
    """Room for translating a foreign expression (``what``: "pyarrow", "DataFusion")
    nested up to ``MAX_NESTING`` levels; deeper, the translation's RecursionError
    becomes a ValueError naming the limit."""
    try:
        with recursion_room(FRAMES_PER_LEVEL * MAX_NESTING):
            yield
    except RecursionError:
        raise ValueError(
            f"the {what} expression nests more than {MAX_NESTING} levels deep; a list of "
            "values is one level as an IN list (pyarrow: pc.field(name).isin(values))"
        ) from None
