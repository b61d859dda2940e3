"""Namespace history: ``__manifest`` versions, timestamps and tags.

A ``__manifest`` version pins every partition (``read_version`` of each leaf
row), so a manifest version *is* a consistent snapshot of the whole namespace.
Time travel by timestamp resolves to the newest version committed at or before
it; a tag names a manifest version (a Lance tag on ``__manifest``), and
``cleanup`` keeps tagged versions and every leaf version they reference.
"""

from __future__ import annotations

import datetime as dt
import numbers
from collections.abc import Callable
from typing import Any, Protocol

import lance
import pyarrow as pa

from lance_partitioned.catalog import sidecar
from lance_partitioned.catalog.commit_info import UNKNOWN, CommitInfo
from lance_partitioned.catalog.layout import join_uri
from lance_partitioned.errors import PartitionedNamespaceError, VersionNotFoundError


class ManifestLike(Protocol):
    """What history reads of a ``catalog.manifest.Manifest``. ``Manifest`` imports this
    module to explain a missing version, so history names the members it uses
    instead of importing the class back."""

    root: str
    uri: str
    storage: Any

    def dataset(self, version: int | str | None = None) -> lance.LanceDataset: ...

    def first_partitioned(self, versions: list[int]) -> int: ...

    def open_checked(self, *args: Any, **kwargs: Any) -> Any: ...

    def check_intact(self, *args: Any, **kwargs: Any) -> Any: ...


def _local_naive(ts: dt.datetime) -> dt.datetime:
    """Lance reports version timestamps as naive local time; compare on that scale."""
    if ts.tzinfo is None:
        return ts
    return ts.astimezone().replace(tzinfo=None)


def versions(manifest: ManifestLike) -> list[dict[str, Any]]:
    """``__manifest`` versions, oldest first: ``{"version", "timestamp"}`` (naive local time).

    Only versions ``lp.open(root, version=N)`` reads: the ones before the
    namespace's first partition spec (an earlier release's ``create`` committed
    an empty ``__manifest`` first, then its metadata) are left out.
    """
    listed = sorted(manifest.dataset().versions(), key=lambda v: v["version"])
    first = manifest.first_partitioned([v["version"] for v in listed])
    return [
        {"version": v["version"], "timestamp": v["timestamp"]}
        for v in listed
        if v["version"] >= first
    ]


def utc(ts: dt.datetime) -> dt.datetime:
    """A version's timestamp (naive local time, as Lance reports it) as a UTC instant."""
    return ts.astimezone(dt.timezone.utc)


# Lance operations that change neither rows nor metadata: ``__manifest``'s own upkeep
# (``catalog.manifest_index``: indexes, compaction), whoever committed them.
CONTENT_KEEPING = ("Rewrite", "CreateIndex")
MAINTENANCE = "maintenance"


def commit_record(latest: lance.LanceDataset, version: int, first: int) -> CommitInfo:
    """What ``__manifest`` version ``version`` did, read from its transaction's properties
    (``latest`` is any version at or after it; ``first`` the namespace's first version).

    Without a record (an earlier release's or another writer's commit) the operation is
    ``unknown`` and the parameters name the Lance operation, the one thing known; the
    first version, which ``create`` makes by cloning (Lance cannot carry properties on a
    clone), is ``create``.
    """
    try:
        txn = latest.read_transaction(version)
    except Exception:  # no transaction file: nothing more is known
        txn = None
    return record_of(txn, version, first)


def record_of(txn: Any, version: int, first: int) -> CommitInfo:
    """``commit_record`` from version ``version``'s transaction ``txn`` already read
    (None: it has none)."""
    info = CommitInfo.read(txn.transaction_properties if txn is not None else None)
    if info is not None:
        return info
    kind = type(txn.operation).__name__ if txn is not None else None
    if version == first and kind in ("Clone", None):
        return CommitInfo("create", {}, 0, 0, 0)
    if kind in CONTENT_KEEPING:
        return CommitInfo(MAINTENANCE, {"lance_operation": kind}, 0, 0, 0)
    return CommitInfo(UNKNOWN, {"lance_operation": kind} if kind else {})


def newest_commit(
    manifest: ManifestLike, match: Callable[[CommitInfo], bool]
) -> tuple[int, CommitInfo] | None:
    """The newest ``__manifest`` version whose commit record satisfies ``match``, and
    that record; None when no version does.

    Walks back from the latest version one transaction at a time and stops at the
    first match, so finding a recent commit costs a few reads whatever the length
    of the history. The walk also stops at the first version that can no longer be
    read (removed by ``cleanup``): records older than that are out of reach.
    """
    latest = manifest.dataset()
    for version in range(latest.version, 0, -1):
        try:
            txn = latest.read_transaction(version)
        except Exception:  # removed by cleanup: older versions are gone too
            return None
        info = CommitInfo.read(txn.transaction_properties if txn is not None else None)
        if info is not None and match(info):
            return version, info
    return None


HISTORY_SCHEMA = pa.schema(
    [
        pa.field("version", pa.int64(), nullable=False),
        pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("operation", pa.string(), nullable=False),
        pa.field("parameters", pa.string()),
        pa.field("rows_added", pa.int64()),
        pa.field("rows_removed", pa.int64()),
        pa.field("partitions", pa.int64()),
    ]
)


def history_table(manifest: ManifestLike, limit: int | None = None) -> pa.Table:
    """Every ``__manifest`` version ``lp.open`` reads, newest first (``limit``: the newest
    ``limit`` only), with what its commit did: ``HISTORY_SCHEMA``; ``parameters`` is JSON
    text, and counts a commit did not record are NULL."""
    listed = versions(manifest)
    first = listed[0]["version"] if listed else 0
    listed = listed[::-1][:limit] if limit is not None else listed[::-1]
    latest = manifest.dataset()
    rows = []
    for v in listed:
        info = commit_record(latest, v["version"], first)
        rows.append(
            {
                "version": v["version"],
                "timestamp": utc(v["timestamp"]),
                "operation": info.operation,
                "parameters": info.parameters_json(),
                "rows_added": info.rows_added,
                "rows_removed": info.rows_removed,
                "partitions": info.partitions,
            }
        )
    return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)


def version_asof(manifest: ManifestLike, asof: dt.datetime | dt.date | str) -> int:
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


def tags(manifest: ManifestLike) -> dict[str, int]:
    """Tag name → ``__manifest`` version."""
    return {name: info["version"] for name, info in sorted(manifest.dataset().tags.list().items())}


def create_tag(manifest: ManifestLike, name: str, version: int) -> None:
    """Name ``__manifest`` version ``version``; fails if the tag exists, or if the
    name is a number (``--version 2`` in the CLI means version 2, so such a tag
    could never be read by name)."""
    if name.strip().isdigit():
        raise PartitionedNamespaceError(
            f"tag name {name!r} is a number, which reads as a version number; "
            "use a name with a letter in it (e.g. 'v2' or 'release-2')"
        )
    ds = manifest.dataset()
    if name in ds.tags.list():
        raise PartitionedNamespaceError(f"tag {name!r} already exists on {manifest.root!r}")
    # a tag keeps its version from cleanup: never promise to keep a damaged one
    manifest.check_intact(ds if ds.version == version else manifest.open_checked(version))
    ds.tags.create(name, version)


def delete_tag(manifest: ManifestLike, name: str) -> None:
    """Remove a tag (its versions become eligible for cleanup)."""
    ds = manifest.dataset()
    if name not in ds.tags.list():
        raise PartitionedNamespaceError(f"no tag {name!r} on {manifest.root!r}")
    ds.tags.delete(name)


# -- what cleanup removed ----------------------------------------------------------
#
# Reading a version cleanup removed must say so, and with which retention, not
# surface Lance's "Not found". Cleanup therefore appends a line to a small
# record beside __manifest's files (``catalog.sidecar``; no __manifest version
# is created for it), and readers consult it only when a read has failed.

CLEANUP_RECORD = "_lp_cleanup.json"
CLEANUP_RECORDS_KEPT = 20


def _ranges(versions: list[int]) -> str:
    """``1..7`` or ``1, 4..7``: a set of versions, compactly."""
    spans: list[list[int]] = []
    for v in sorted(versions):
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in spans) or "none"


def record_cleanup(
    manifest: ManifestLike,
    older_than: dt.timedelta,
    cutoff: dt.datetime,
    manifest_versions: list[int],
    leaf_versions: int,
) -> None:
    """Remember what one cleanup removed and under which retention."""
    path = sidecar.path(manifest.uri, CLEANUP_RECORD)
    if not (manifest_versions or leaf_versions):
        return
    entries = sidecar.read_json(manifest.storage, path)
    entries = entries if isinstance(entries, list) else []
    entries.append(
        {
            "at": dt.datetime.now().isoformat(sep=" ", timespec="seconds"),
            "older_than_seconds": older_than.total_seconds(),
            "cutoff": cutoff.isoformat(sep=" ", timespec="seconds"),
            "manifest_versions": sorted(manifest_versions),
            "leaf_versions": leaf_versions,
        }
    )
    sidecar.write_json(manifest.storage, path, entries[-CLEANUP_RECORDS_KEPT:])


def _cleanups(manifest: ManifestLike, version: int | None = None) -> list[dict[str, Any]]:
    """The recorded cleanups (that removed ``__manifest`` version ``version``), oldest first."""
    path = sidecar.path(manifest.uri, CLEANUP_RECORD)
    entries = sidecar.read_json(manifest.storage, path)
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    if version is not None:
        entries = [e for e in entries if version in e.get("manifest_versions", [])]
    return entries


def cleanup_note(manifest: ManifestLike, version: int | None = None) -> str:
    """``(it was cleaned up: ...)``: the cleanup that removed ``__manifest`` version
    ``version`` (None: the latest recorded cleanup) and the retention it used."""
    entries = _cleanups(manifest, version)
    if not entries:
        return (
            "(it was cleaned up: cleanup(older_than=R) removes versions superseded more than "
            "R ago unless tagged; no record of that cleanup was found)"
        )
    e = entries[-1]
    retention = dt.timedelta(seconds=float(e.get("older_than_seconds", 0)))
    which = "the cleanup" if version is not None else "the last recorded cleanup"
    return (
        f"(it was cleaned up: {which}, of {e.get('at')}, used older_than={retention}, which "
        f"removes versions superseded before {e.get('cutoff')} unless tagged)"
    )


def _existing(manifest: ManifestLike) -> tuple[list[int], dict[str, int]] | None:
    try:
        latest = manifest.dataset()
        return [v["version"] for v in latest.versions()], tags(manifest)
    except Exception:
        return None


def removed_version_error(manifest: ManifestLike, version: Any) -> VersionNotFoundError | None:
    """The error for ``__manifest`` version ``version`` if cleanup removed it, else None.

    A version is "removed" when it is below the latest yet no longer exists
    (Lance numbers versions without gaps).
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return None
    existing = _existing(manifest)
    if existing is None:
        return None
    known, named = existing
    if not known or version in known or version > known[-1]:
        return None
    tag_list = ", ".join(f"{n}={v}" for n, v in named.items()) or "none"
    if version < known[0] and not _cleanups(manifest, version):
        # before the oldest version, with no cleanup on record: maybe never there
        # (create's one commit is version 2)
        why = f"(the oldest version kept is {known[0]})"
    else:
        why = cleanup_note(manifest, version)
    return VersionNotFoundError(
        f"__manifest version {version} of {manifest.root!r} does not exist "
        f"{why}; versions are {_ranges(known)}; tags: {tag_list}"
    )


def explain_failed_read(
    manifest: ManifestLike,
    version: int,
    location: str | None = None,
    leaf_version: Any = None,
    storage_options: dict[str, str] | None = None,
) -> VersionNotFoundError | None:
    """Why reading snapshot ``version`` failed, if cleanup removed what it needs; else None.

    Called only after a read of a pinned snapshot raised (the handle was opened
    before a cleanup removed its ``__manifest`` version, or a leaf version it
    references). ``location``/``leaf_version`` name the partition table being read.
    """
    gone = removed_version_error(manifest, version)
    if gone is not None:
        return VersionNotFoundError(f"this handle's snapshot was removed while in use: {gone}")
    if location is None or not isinstance(leaf_version, int):
        return None
    try:
        leaf = lance.dataset(join_uri(manifest.root, location), storage_options=storage_options)
        known = {v["version"] for v in leaf.versions()}
    except Exception:
        return None
    if leaf_version in known or leaf_version > leaf.version:
        return None
    return VersionNotFoundError(
        f"partition table {location!r} version {leaf_version}, which __manifest version "
        f"{version} of {manifest.root!r} reads, does not exist {cleanup_note(manifest)}; "
        "open a newer version of the namespace"
    )


def check_version_arg(version: object) -> int | str | None:
    """``version`` as ``open()`` takes it: None (latest), an integer (a ``__manifest``
    version number) or a string (a tag). Raises TypeError naming what was given.

    ``bool`` is refused although Python counts it as an int (``version=True``
    would silently open version 1), and so are non-integer numbers (``1.5``,
    also ``2.0``: versions are counted, not measured) and datetimes, which
    belong to ``asof=``.
    """
    if version is None or isinstance(version, str):
        return version
    if isinstance(version, (dt.date, dt.datetime)):
        raise TypeError(
            f"version={version!r} is a point in time; to open the namespace as of a time, "
            "pass asof= instead (lp.open(root, asof=...)); version= takes a version number or a tag"
        )
    if not isinstance(version, bool) and isinstance(version, numbers.Integral):
        return int(version)  # numpy integers too
    raise TypeError(
        f"version must be an integer (a __manifest version number) or a string (a tag), "
        f"got {type(version).__name__} {version!r}"
    )
