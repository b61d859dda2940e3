"""A small, bounded, thread-safe cache of values derived from one ``__manifest`` version.

A version's content never changes once committed, so what a read derives from
it (its leaf rows for a filter) can be kept while the process repeats queries.
Keys must name the content exactly (``Snapshot._version_key``); values must be
immutable, since every hit returns the same object.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from lance_partitioned.format.caches import BoundedCache


class VersionCache(BoundedCache[Hashable, Any]):
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
        super().__init__(max_bytes=max_bytes)

    def get(self, key: Hashable | None, default: Any = None) -> Any:
        """The value kept under ``key``, or ``default``."""
        return default if key is None else super().get(key, default)

    def put(self, key: Hashable | None, value: Any, nbytes: int = 0) -> None:
        """Keep ``value`` (about ``nbytes`` of memory), evicting the least recently used."""
        if key is None or nbytes > (self.max_bytes or 0) // 8:
            return
        super().put(key, value, nbytes)
