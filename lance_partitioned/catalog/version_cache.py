"""A small, bounded, thread-safe cache of values derived from one ``__manifest`` version.

A version's content never changes once committed, so what a read derives from
it (its leaf rows for a filter) can be kept while the process repeats queries.
Keys must name the content exactly (``Snapshot._version_key``); values must be
immutable, since every hit returns the same object.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class VersionCache:
    """Least-recently-used values under a byte budget.

    A value bigger than an eighth of the budget is not kept (a plan of a
    million partitions would evict everything else and gain little: reading it
    costs far more than planning). A None key is never stored nor found.

    >>> cache = VersionCache(max_bytes=100)
    >>> cache.put(("v", 1), "rows", 10)
    >>> cache.get(("v", 1)), cache.get(("v", 2))
    ('rows', None)
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable | None) -> Any:
        """The value kept under ``key``, or None."""
        if key is None:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable | None, value: Any, nbytes: int) -> None:
        """Keep ``value`` (about ``nbytes`` of memory), evicting the least recently used."""
        if key is None or nbytes > self.max_bytes // 8:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, nbytes)
            self._bytes += nbytes
            while self._bytes > self.max_bytes:
                _, (_, size) = self._entries.popitem(last=False)
                self._bytes -= size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
