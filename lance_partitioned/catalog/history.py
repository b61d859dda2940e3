"""Namespace history: ``__manifest`` versions, timestamps and tags.

A ``__manifest`` version pins every partition (``read_version`` of each leaf
row), so a manifest version *is* a consistent snapshot of the whole namespace.
Time travel by timestamp resolves to the newest version committed at or before
it; a tag names a manifest version (a Lance tag on ``__manifest``), and
``cleanup`` keeps tagged versions and every leaf version they reference.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.errors import PartitionedNamespaceError


def _local_naive(ts: dt.datetime) -> dt.datetime:
    """Lance reports version timestamps as naive local time; compare on that scale."""
    if ts.tzinfo is None:
        return ts
    return ts.astimezone().replace(tzinfo=None)


def versions(manifest: Manifest) -> list[dict[str, Any]]:
    """``__manifest`` versions, oldest first: ``{"version", "timestamp"}`` (naive local time)."""
    return [
        {"version": v["version"], "timestamp": v["timestamp"]}
        for v in manifest.dataset().versions()
    ]


def version_asof(manifest: Manifest, asof: dt.datetime | dt.date | str) -> int:
    """The newest ``__manifest`` version committed at or before ``asof``.

    ``asof`` is a datetime (naive = local time, as Lance reports versions; aware
    ones are converted), a date (its end of day) or an ISO 8601 string.
    """
    if isinstance(asof, str):
        asof = dt.datetime.fromisoformat(asof)
    if isinstance(asof, dt.date) and not isinstance(asof, dt.datetime):
        asof = dt.datetime.combine(asof, dt.time.max)
    when = _local_naive(asof)
    best = None
    for v in versions(manifest):
        if _local_naive(v["timestamp"]) <= when:
            best = v["version"]
    if best is None:
        raise PartitionedNamespaceError(
            f"{manifest.root!r} has no __manifest version at or before {asof.isoformat()} "
            "(it was created later, or older versions were cleaned up)"
        )
    return best


def tags(manifest: Manifest) -> dict[str, int]:
    """Tag name → ``__manifest`` version."""
    return {name: info["version"] for name, info in sorted(manifest.dataset().tags.list().items())}


def create_tag(manifest: Manifest, name: str, version: int) -> None:
    """Name ``__manifest`` version ``version``; fails if the tag exists."""
    ds = manifest.dataset()
    if name in ds.tags.list():
        raise PartitionedNamespaceError(f"tag {name!r} already exists on {manifest.root!r}")
    ds.tags.create(name, version)


def delete_tag(manifest: Manifest, name: str) -> None:
    """Remove a tag (its versions become eligible for cleanup)."""
    ds = manifest.dataset()
    if name not in ds.tags.list():
        raise PartitionedNamespaceError(f"no tag {name!r} on {manifest.root!r}")
    ds.tags.delete(name)
