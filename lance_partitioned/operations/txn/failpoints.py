"""Failpoints: the places a test can stop a transaction in flight.

Crash and race tests run a writer in a child process with ``LP_TEST_PAUSE_AT``
naming one or more points (``files_written``, ``leaf_staged``,
``leaves_staged``, ``published``, ``rolling_back``); the writer stops at the
first one it reaches, says so with a file, and waits until the test lets it go
or kills it. A failpoint changes nothing else: without the variable it costs one
environment lookup, and with it the transaction runs exactly as it would (same
threads, same order of commits) up to the point.
"""

from __future__ import annotations

import os
import time

PAUSE_ENV = "LP_TEST_PAUSE_AT"
PAUSE_DIR_ENV = "LP_TEST_PAUSE_DIR"

_paused: set[str] = set()  # points this process has stopped at (each stops once)


def pause_point(name: str) -> None:
    """Stop here once when ``LP_TEST_PAUSE_AT`` lists ``name``.

    Writes ``<LP_TEST_PAUSE_DIR>/<name>.paused`` (holding the pid) and waits until
    the test creates ``<name>.go``, or kills the process.

    Example::

        pause_point("leaves_staged")  # a no-op unless a test asked to stop here
    """
    points = os.environ.get(PAUSE_ENV)
    if not points or name not in points.split(",") or name in _paused:
        return
    _paused.add(name)
    folder = os.environ.get(PAUSE_DIR_ENV, ".")
    with open(os.path.join(folder, f"{name}.paused"), "w") as fh:
        fh.write(str(os.getpid()))
    go = os.path.join(folder, f"{name}.go")
    while not os.path.exists(go):
        time.sleep(0.01)
