"""Small JSON files kept inside the ``__manifest`` directory, on any store.

Maintenance bookkeeping that must not create ``__manifest`` versions lives
here: writers' leases (``operations.txn.leases``) and the record of past cleanups
(``catalog.history``). Names start with ``_lp_``; Lance ignores files outside
its own sub-directories (``data``, ``_versions``, ``_deletions``, ...), and so
does our orphan sweep, so these files are never mistaken for table data.
Every access goes through ``catalog.storage``, so local roots and object
stores keep the same files.
"""

from __future__ import annotations

from typing import Any

from lance_partitioned.catalog.storage import Storage


def path(manifest_uri: str, *parts: str) -> str:
    """``<__manifest>/<parts...>``."""
    return Storage.join(manifest_uri, *parts)


def read_json(storage: Storage, file: str) -> Any | None:
    """The JSON content of ``file``; None when it is missing or unreadable (half-written)."""
    return storage.read_json(file)


def write_json(storage: Storage, file: str, content: Any, durable: bool = True) -> None:
    """Write ``file`` atomically: readers see the old content or the new, never a part.

    ``durable`` adds an fsync on local file systems. Without it a power loss may
    lose the file; that is fine for what dies with the machine anyway (a
    writer's lease) and saves milliseconds per transaction.
    """
    storage.write_json(file, content, durable)


def remove(storage: Storage, file: str) -> bool:
    """Delete ``file``; False when it was already gone."""
    return storage.delete(file)
