"""Small JSON files kept inside the ``__manifest`` directory (local file systems only).

Maintenance bookkeeping that must not create ``__manifest`` versions lives
here: writers' leases (``operations.leases``) and the record of past cleanups
(``catalog.history``). Names start with ``_lp_``; Lance ignores files outside
its own sub-directories (``data``, ``_versions``, ``_deletions``, ...), and so
does our orphan sweep, so these files are never mistaken for table data.
Object stores have no such files: callers get None from ``path`` and skip.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from typing import Any

from lance_partitioned.catalog.layout import local_path


def path(manifest_uri: str, *parts: str) -> str | None:
    """``<__manifest>/<parts...>`` on a local file system, None on object stores."""
    base = local_path(manifest_uri)
    return None if base is None else os.path.join(base, *parts)


def read_json(file: str) -> Any | None:
    """The JSON content of ``file``; None when it is missing or unreadable (half-written)."""
    try:
        with open(file, encoding="utf-8") as fh:
            return json.load(fh)
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return None


def write_json(file: str, content: Any, durable: bool = True) -> None:
    """Write ``file`` atomically (a temporary file renamed over it); ``durable`` adds an fsync.

    Readers see the old content or the new, never a part. Without ``durable`` a
    power loss may lose the file; that is fine for what dies with the machine
    anyway (a writer's lease) and saves milliseconds per transaction.
    """
    os.makedirs(os.path.dirname(file), exist_ok=True)
    tmp = f"{file}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(content, fh, separators=(",", ":"))
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, file)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def remove(file: str) -> bool:
    """Delete ``file``; False when it was already gone."""
    try:
        os.remove(file)
        return True
    except FileNotFoundError:
        return False
