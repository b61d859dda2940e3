"""Running one function over many items on a few threads, cheaply.

Staging a thousand new leaves, or writing ten thousand small partitions, is a
thousand short Lance calls that release the GIL. An executor's future per item
(a condition and a lock each, a wake-up of the thread waiting on it) cost about
10% of staging 1,000 new leaves on 2 cores (``benchmarks/many_partitions_bench.py``),
all of it holding the GIL the working threads need. Here the threads take items
from one shared iterator instead, and nothing is allocated per item.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

_DONE = object()


def for_each(
    items: Iterable[Any],
    fn: Callable[[Any], Any],
    threads: int,
    on_done: Callable[[Any, Any], None] | None = None,
) -> None:
    """Call ``fn(item)`` for every item, on up to ``threads`` threads.

    ``on_done(item, result)`` runs after each success, one call at a time
    (under a lock), so it may update shared state. After the first failure no
    further item starts; those already running finish, then the first failure
    is raised. An interruption of the calling thread (Ctrl-C) likewise waits
    for the running items before it propagates, so a caller's clean-up sees
    every result.

    Example::

        done = {}
        for_each(uris, lance.dataset, 4, on_done=done.__setitem__)
    """
    pending = iter(items)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        while True:
            with lock:
                if errors:
                    return
                item = next(pending, _DONE)
            if item is _DONE:
                return
            try:
                result = fn(item)
                if on_done is not None:
                    with lock:
                        on_done(item, result)
            except BaseException as exc:  # raised by the caller once every thread stops
                with lock:
                    errors.append(exc)
                return

    workers = [threading.Thread(target=work, name=f"lp-worker-{i}") for i in range(max(1, threads))]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.join()
    except BaseException as exc:
        with lock:
            errors.append(exc)  # start nothing more
        for worker in workers:
            worker.join()
        raise
    if errors:
        raise errors[0]
