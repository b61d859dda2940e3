"""Writers' leases: what keeps ``vacuum`` and ``cleanup`` away from a transaction in flight.

Until it publishes, a transaction (write, delete, compaction) owns files and
leaf versions that no ``__manifest`` version references, which is exactly what
maintenance removes once it is older than the cutoff. A short cutoff, or a long
transaction, would remove them under a live writer, which would then publish
references to missing files (``docs/TRANSACTIONS.md`` §9).

So a transaction holds a **lease** while it runs: a small JSON file
``__manifest/_lp_leases/<id>.json`` (``catalog.sidecar``) written before its
first data file, renewed by touching its modification time every
``RENEW_EVERY``, and removed when the transaction ends. Maintenance removes
nothing created after the oldest live lease began (less ``CLOCK_SLACK``),
whatever ``older_than`` says.

- **Live.** A lease is live while it was renewed within ``TTL``, and, when it
  was taken on this host (same host name and boot), its process still exists.
  So a writer that died is ignored at once on its own host, and after ``TTL``
  from anywhere else.
- **Claiming a dead lease.** Maintenance renames a lease it finds dead to
  ``<id>.dead`` *before* acting on it, then re-reads its modification time: a
  renewal that slipped in before the rename makes it live again (it is renamed
  back). Renewal touches the original name, so a renewal after the rename fails.
- **Restore and cleanup.** A restore (``operations.maintain.restore``) needs an
  old ``__manifest`` version kept until it has committed: its lease names it
  (``keeps``), and cleanup keeps the versions live leases name. A cleanup takes a
  lease of its own (``removes_versions``; it protects nothing) *before* it reads
  the leases, and a restore reads the leases *after* writing its own: so either
  the cleanup sees the restore's lease and keeps the version, or the restore sees
  the cleanup and waits for it (``cleanup_running``).
- **Lost.** A writer whose lease file is gone (claimed) cannot know what was
  removed: ``check()`` raises ``LeaseLostError`` and the transaction publishes
  nothing. Writers renew in ``check()`` right before their ``__manifest``
  commit, so no maintenance run can claim the lease between the check and the
  commit without waiting ``TTL`` first.

Leases live on every store (``catalog.storage``); object stores have no
``utime`` and no atomic rename, so there the lease is kept by compare-and-swap:

- **S3 with conditional requests** (``Storage.put_if``; AWS S3, and any endpoint
  whose ``If-Match`` the conditional-write check saw honoured): the lease object
  is written with ``If-None-Match: *``; each renewal rewrites it (with a new
  renewal time, so a new ETag) with ``If-Match: <the ETag of our last write>``;
  a claim reads content, ETag and modification time in one GET and, if dead,
  replaces it by a ``claimed`` tombstone with ``If-Match: <that ETag>``, then
  deletes it. Whichever of a renewal and a claim reaches the server first wins;
  the other's precondition fails: a renewal after a claim is refused (the writer
  knows it lost the lease, and never recreates it), a claim after a renewal is
  refused (the lease is honoured as live).
- **Other object stores** (``gs://``, ``az://``, S3 without static credentials or
  with a server that ignores ``If-Match``): renewal rewrites the object and a claim
  is a copy then a delete. A renewal racing a claim can then recreate the lease
  after maintenance read it as dead; that needs a writer silent for ``TTL`` that
  renews in the same instant (docs/TRANSACTIONS.md §12).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from lance_partitioned.catalog import commit_safety, sidecar
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.storage import Storage
from lance_partitioned.errors import CommitConflictError, LeaseLostError
from lance_partitioned.format import caches

log = logging.getLogger(__name__)

LEASE_DIR = "_lp_leases"
TTL = dt.timedelta(minutes=5)  # a lease not renewed for this long is dead
RENEW_EVERY = dt.timedelta(seconds=30)
CLOCK_SLACK = dt.timedelta(minutes=1)  # file and version clocks vs. the lease's start


@caches.memoize("leases.host", maxsize=1)
def _host() -> str:
    boot = ""
    with (
        contextlib.suppress(OSError),
        open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh,
    ):
        boot = fh.read().strip()
    return f"{socket.gethostname()}/{boot}"


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


@dataclass
class Lease:
    """One transaction's lease (see the module docstring)."""

    path: str
    id: str
    host: str
    pid: int
    started: float  # epoch seconds, before the transaction wrote anything
    what: str = ""
    storage: Storage | None = field(default=None, repr=False)
    # compare-and-swap stores: the ETag of the lease object as we last wrote it
    etag: str | None = field(default=None, repr=False)
    # ``__manifest`` versions cleanup must keep while the lease lives (a restore's source)
    keeps: tuple[int, ...] = ()
    # a cleanup in progress: it protects nothing, it tells restores to wait
    removes_versions: bool = False
    _lost: bool = field(default=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def renew(self) -> bool:
        """Touch the lease file; False (and lost from then on) when it was claimed."""
        if self._lost:
            return False
        assert self.storage is not None
        try:
            if self.etag is not None:  # compare-and-swap: only over our own last write
                etag = self.storage.put_if(self.path, self._content(), self.etag)
                if etag is None:
                    self._lost = True
                else:
                    self.etag = etag
            elif not self.storage.touch(self.path):
                self._lost = True
        except OSError as exc:  # unreachable store: try again at the next renewal
            log.warning("could not renew lease %s: %s", self.path, exc)
            return True
        return not self._lost

    def _content(self) -> bytes:
        """The lease object: who holds it, since when, and when it was last renewed (which
        makes every renewal's bytes, and so its ETag, new)."""
        content = {
            "id": self.id,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "what": self.what,
            "renewed": time.time(),
        }
        if self.keeps:
            content["keeps"] = list(self.keeps)
        if self.removes_versions:
            content["removes_versions"] = True
        return json.dumps(content, separators=(",", ":")).encode()

    def check(self) -> None:
        """Renew now; raise LeaseLostError when the lease was claimed by maintenance."""
        if not self.renew():
            raise LeaseLostError(
                f"the lease of this {self.what or 'transaction'} ({self.path}) expired and was "
                "claimed by a vacuum or cleanup, which may have removed its files; nothing was "
                f"published; retry it (a lease expires when not renewed for {TTL})"
            )

    def release(self) -> None:
        """End the lease (the transaction published or gave up)."""
        self._stop.set()
        assert self.storage is not None
        try:
            sidecar.remove(self.storage, self.path)
        except OSError as exc:  # a leftover lease dies after TTL
            log.warning("could not remove lease %s: %s", self.path, exc)

    def _renew_until_released(self) -> None:
        while not self._stop.wait(RENEW_EVERY.total_seconds()):
            if not self.renew():
                log.warning("lease %s was claimed by maintenance; the commit will fail", self.path)
                return


def acquire(
    manifest: Manifest, what: str = "", keeps: tuple[int, ...] = (), removes_versions: bool = False
) -> Lease | None:
    """Take a lease for a transaction on ``manifest``'s namespace.

    Call it before the transaction writes anything; ``release()`` it at the end.
    ``keeps``: ``__manifest`` versions cleanup must not remove meanwhile;
    ``removes_versions``: the holder is a cleanup (see the module docstring).
    """
    lid = uuid.uuid4().hex
    lease = Lease(
        sidecar.path(manifest.uri, LEASE_DIR, f"{lid}.json"),
        lid,
        _host(),
        os.getpid(),
        time.time(),
        what,
        manifest.storage,
        keeps=tuple(keeps),
        removes_versions=removes_versions,
    )
    if compare_and_swap(manifest):
        lease.etag = manifest.storage.put_if(lease.path, lease._content(), None)
        if lease.etag is None:  # a fresh random id: only a broken store says it exists
            raise CommitConflictError(f"lease {lease.path} exists already; retry")
    else:
        # the lease dies with the machine, as does its writer: no fsync
        manifest.storage.write_bytes(lease.path, lease._content(), durable=False)
    threading.Thread(
        target=lease._renew_until_released, name=f"lp-lease-{lid[:8]}", daemon=True
    ).start()
    return lease


@contextlib.contextmanager
def hold(
    manifest: Manifest, what: str = "", keeps: tuple[int, ...] = (), removes_versions: bool = False
) -> Iterator[Lease | None]:
    """``with hold(manifest, "append") as lease:`` — a lease for the duration of the block
    (``keeps``, ``removes_versions``: as for ``acquire``)."""
    lease = acquire(manifest, what, keeps, removes_versions)
    try:
        yield lease
    finally:
        if lease is not None:
            lease.release()


def compare_and_swap(manifest: Manifest) -> bool:
    """Whether leases on ``manifest``'s store are kept by compare-and-swap (module docstring):
    ``s3://`` with static credentials on a server that honours ``If-Match``."""
    st = manifest.storage
    if st.scheme != "s3" or not st.can_compare_and_swap:
        return False
    commit_safety.check(manifest.root, st)  # once per store: learns whether If-Match works
    return commit_safety.if_match_honoured(st)


def _read(storage: Storage, path: str) -> Lease | None:
    return _lease_of(path, sidecar.read_json(storage, path), storage)


def _lease_of(path: str, content: object, storage: Storage) -> Lease | None:
    if not isinstance(content, dict):
        return None
    try:
        return Lease(
            path,
            str(content["id"]),
            str(content["host"]),
            int(content["pid"]),
            float(content["started"]),
            str(content.get("what", "")),
            storage,
            keeps=tuple(int(v) for v in content.get("keeps", ())),
            removes_versions=bool(content.get("removes_versions", False)),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _epoch(when: dt.datetime | None) -> float:
    return when.timestamp() if when is not None else 0.0


def _alive(lease: Lease, renewed: float, now: float, host: str) -> bool:
    if now - renewed > TTL.total_seconds():
        return False
    return lease.host != host or _process_exists(lease.pid)


def live(manifest: Manifest) -> list[Lease]:
    """Every live lease of the namespace, after claiming (removing) the dead ones.

    Called by maintenance before it removes anything. A lease file that cannot
    be parsed is treated as live (a writer may be writing it) until it is
    ``TTL`` old.
    """
    st = manifest.storage
    host, out = _host(), []
    cas = compare_and_swap(manifest)
    for entry in st.list(sidecar.path(manifest.uri, LEASE_DIR)):
        path, name = entry.uri, entry.name
        if entry.is_dir or entry.mtime is None:
            continue
        renewed = entry.mtime.timestamp()
        now = time.time()
        if not name.endswith(".json"):
            if now - renewed > TTL.total_seconds():  # old claims and stray temporary files
                sidecar.remove(st, path)
            continue
        if cas:
            found = _claim_if_dead(st, path, name, host)
            if found is not None:
                out.append(found)
            continue
        lease = _read(st, path)
        if lease is None:
            if now - renewed <= TTL.total_seconds():
                out.append(Lease(path, name[:-5], "", -1, renewed, storage=st))
            else:
                sidecar.remove(st, path)
            continue
        if _alive(lease, renewed, now, host):
            out.append(lease)
            continue
        claimed = path[: -len(".json")] + ".dead"
        if not st.rename(path, claimed):
            continue  # released meanwhile
        found = st.info(claimed) if st.rename_is_atomic else None
        if found is not None and _alive(lease, _epoch(found.mtime), time.time(), host):
            # renewed just before the claim: give it back (a renewal in between made the
            # writer give up, which is safe) and honour it. (Object stores: the copy has a
            # new time, so there is nothing to re-check; see the module docstring.)
            with contextlib.suppress(OSError):
                st.rename(claimed, path)
            out.append(lease)
            continue
        sidecar.remove(st, claimed)
        log.info("removed the dead lease of %s (pid %d on %s)", lease.what, lease.pid, lease.host)
    return out


def _claim_if_dead(st: Storage, path: str, name: str, host: str) -> Lease | None:
    """Compare-and-swap stores: the lease at ``path`` if live, else claim it (None).

    Content, ETag and modification time come from one GET, so the decision is
    about exactly the version the claim then replaces (``If-Match``): a renewal
    in between makes the claim fail, and the lease is honoured.
    """
    got = st.read_tagged(path)
    if got is None:
        return None  # released meanwhile
    data, etag, mtime = got
    renewed, now = _epoch(mtime), time.time()
    try:
        content = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        content = None
    if isinstance(content, dict) and "claimed" in content:  # a claim whose delete failed
        sidecar.remove(st, path)
        return None
    lease = _lease_of(path, content, st)
    if lease is None:  # unreadable: live until TTL old, like any lease
        if now - renewed <= TTL.total_seconds():
            return Lease(path, name[:-5], "", -1, renewed, storage=st)
        sidecar.remove(st, path)
        return None
    if _alive(lease, renewed, now, host):
        return lease
    tombstone = json.dumps({"claimed": time.time(), "by": host}).encode()
    if st.put_if(path, tombstone, etag) is None:
        # renewed (or released) since we read it: a renewal means the writer is alive
        return lease if st.exists(path) else None
    sidecar.remove(st, path)
    log.info("removed the dead lease of %s (pid %d on %s)", lease.what, lease.pid, lease.host)
    return None


def protected_since(
    manifest: Manifest, held: list[Lease] | None = None
) -> tuple[dt.datetime | None, int]:
    """The time from which maintenance must keep everything, and how many leases hold it.

    ``(start of the oldest live lease - CLOCK_SLACK, count)``, as a naive local
    datetime like Lance's version timestamps; ``(None, 0)`` without live leases.
    ``held``: the live leases when already read (``live``). A cleanup's own lease
    (``removes_versions``) protects nothing and is not counted.
    """
    held = [
        lease for lease in (live(manifest) if held is None else held) if not lease.removes_versions
    ]
    if not held:
        return None, 0
    oldest = min(lease.started for lease in held)
    return dt.datetime.fromtimestamp(oldest) - CLOCK_SLACK, len(held)


def kept_versions(held: list[Lease]) -> set[int]:
    """The ``__manifest`` versions the live leases ``held`` need kept (``Lease.keeps``)."""
    return {v for lease in held for v in lease.keeps}


def cleanup_running(manifest: Manifest, own: Lease | None) -> Lease | None:
    """A live cleanup's lease (or one unreadable, which may be one being written), if any.

    Called after ``own`` lease was written: a cleanup that started earlier is
    seen here, and one that starts later sees ``own`` (the module docstring).
    """
    for lease in live(manifest):
        if own is not None and lease.id == own.id:
            continue
        if lease.removes_versions or lease.pid == -1:
            return lease
    return None


__all__ = [
    "LeaseLostError",
    "Lease",
    "acquire",
    "cleanup_running",
    "hold",
    "kept_versions",
    "live",
    "protected_since",
]
