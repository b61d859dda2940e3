"""Every process-wide cache of the package, in one registry: each bounded, all cleared together.

A module that keeps something between calls (parsed metadata, opened leaf
datasets, probe answers, zone rules) keeps it in a ``BoundedCache`` (or a
``functools.lru_cache``) and registers it here under a name::

    _layouts = caches.register("leaf_schema.layouts", BoundedCache(maxsize=256))

``clear_all`` (``lp.clear_caches()``) empties every registered cache;
``tests/test_caches.py`` checks that no module keeps a cache outside the
registry. Pure: no I/O, imports nothing of the package, so every layer may use it.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
C = TypeVar("C")


class BoundedCache(Generic[K, V]):
    """Least-recently-used values, at most ``maxsize`` of them and at most
    ``max_bytes`` of their stated sizes (either bound may be None, not both).
    Thread-safe; every hit returns the same object, so values must not be mutated.

    A value larger than ``max_bytes`` by itself is not kept.

    >>> cache = BoundedCache(maxsize=2)
    >>> cache.put("a", 1); cache.put("b", 2); cache.put("c", 3)
    >>> cache.get("a"), cache.get("c"), len(cache)
    (None, 3, 2)
    """

    def __init__(self, maxsize: int | None = None, max_bytes: int | None = None):
        if maxsize is None and max_bytes is None:
            raise ValueError("a BoundedCache needs maxsize or max_bytes")
        self.maxsize = maxsize
        self.max_bytes = max_bytes
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K, default: Any = None) -> V | Any:
        """The value kept under ``key`` (now the most recently used), else ``default``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return default
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: K, value: V, nbytes: int = 0) -> None:
        """Keep ``value`` (about ``nbytes`` of memory), evicting the least recently used."""
        if self.max_bytes is not None and nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, nbytes)
            self._bytes += nbytes
            self._evict()

    def resize(self, max_bytes: int) -> None:
        """Set the byte bound, evicting at once what no longer fits."""
        with self._lock:
            self.max_bytes = max_bytes
            self._evict()

    def _evict(self) -> None:
        while self._entries and (
            (self.maxsize is not None and len(self._entries) > self.maxsize)
            or (self.max_bytes is not None and self._bytes > self.max_bytes)
        ):
            _, (_, size) = self._entries.popitem(last=False)
            self._bytes -= size

    @property
    def nbytes(self) -> int:
        """The sum of the kept values' stated sizes."""
        return self._bytes

    def values(self) -> list[V]:
        """The kept values, least recently used first (a copy)."""
        with self._lock:
            return [v for v, _ in self._entries.values()]

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


class Clearable(Protocol):
    """What the registry holds: a container with ``clear`` and ``len``."""

    def clear(self) -> None: ...
    def __len__(self) -> int: ...


class _LruFunction:
    """A ``functools.lru_cache``/``functools.cache`` function seen as a container."""

    def __init__(self, fn: Any):
        self.fn = fn

    def clear(self) -> None:
        self.fn.cache_clear()

    def __len__(self) -> int:
        return self.fn.cache_info().currsize


_registry: dict[str, Clearable] = {}  # the registry itself: one entry per cache, by name
_registry_lock = threading.Lock()


def register(name: str, cache: C) -> C:
    """Register ``cache`` under ``name`` and return it (unchanged).

    ``cache`` is a container with ``clear()`` and ``len()`` that bounds itself
    (``BoundedCache``, ``VersionCache``, a ``WeakKeyDictionary`` of live
    objects) or a ``functools.lru_cache``/``functools.cache`` function (its
    ``cache_clear``). Registering a name again replaces the entry (a reloaded
    module).
    """
    entry: Any = _LruFunction(cache) if hasattr(cache, "cache_clear") else cache
    if not (callable(getattr(entry, "clear", None)) and hasattr(entry, "__len__")):
        raise TypeError(f"cache {name!r} has no clear() and len(): {type(cache).__name__}")
    with _registry_lock:
        _registry[name] = entry
    return cache


def registered() -> dict[str, Any]:
    """The registered caches by name (``functools`` caches as their functions)."""
    with _registry_lock:
        entries = dict(_registry)
    return {n: e.fn if isinstance(e, _LruFunction) else e for n, e in entries.items()}


def sizes() -> dict[str, int]:
    """How many entries each registered cache holds now, by name."""
    with _registry_lock:
        entries = dict(_registry)
    return {name: len(entry) for name, entry in entries.items()}


def clear_all() -> None:
    """Empty every registered cache."""
    with _registry_lock:
        entries = list(_registry.values())
    for entry in entries:
        entry.clear()


def memoize(name: str, maxsize: int) -> Callable[[Callable[..., V]], Callable[..., V]]:
    """``functools.lru_cache(maxsize)``, registered under ``name``."""

    def wrap(fn: Callable[..., V]) -> Callable[..., V]:
        return register(name, functools.lru_cache(maxsize=maxsize)(fn))

    return wrap


__all__ = ["BoundedCache", "Clearable", "clear_all", "memoize", "register", "registered", "sizes"]
