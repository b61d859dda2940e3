"""The one storage layer: every path operation of the package goes through here.

A root is a local path, a ``file://`` URI or an object-store URI (``s3://``,
``gs://``, ``az://``). ``resolve(uri, storage_options)`` gives the ``Storage``
of the store holding it, and every caller asks that object, never ``os`` or a
scheme test of its own: exists, list, read and write small files, delete a file
or a tree, join, relative locations. Local and object stores take the same
calls; only this module knows how they differ.

- Lance reads and writes the datasets themselves (with the same
  ``storage_options``); this module handles what Lance exposes nothing for.
- Metadata, listing and small files use ``pyarrow.fs`` (sizes, modification
  times), configured from the Lance ``storage_options`` keys (``STORAGE_KEYS``)
  and the standard ``AWS_*`` environment variables, with bounded connect and
  request timeouts.
- Object deletes go through Lance's own object store (``LanceFileSession``):
  ``pyarrow.fs``'s S3 delete writes an empty "directory marker" object for a
  parent it empties, which would litter the namespace.
- ``memory://`` is refused: pylance 14.0.2 gives each ``lance.dataset`` call a
  new empty memory store, so a namespace there would vanish between calls.

Secrets: a ``Storage`` never prints its options, and ``redact`` removes the
values of secret keys from any text that is shown to a user.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import threading
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow.fs as pafs

from lance_partitioned.catalog.storage_options import (  # noqa: F401 (re-exported)
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    SECRET_KEYS,
    STORAGE_KEYS,
    TRUST_CONDITIONAL_PUT,
    lance_options,
    raw_option,
    redact,
    warn_unknown_options,
)
from lance_partitioned.catalog.storage_options import duration_seconds as _seconds
from lance_partitioned.catalog.storage_options import option as _option
from lance_partitioned.catalog.storage_options import truthy as _truthy
from lance_partitioned.errors import StorageError
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache

if TYPE_CHECKING:  # loaded for an s3:// store only (http.client and email cost ~15 ms)
    from lance_partitioned.catalog import s3_http

CONNECT_TIMEOUT_S = 5.0  # an unreachable endpoint fails within seconds, never hangs
REQUEST_TIMEOUT_S = 30.0
_OBJECT_SCHEMES = ("s3", "gs", "az")
# Metadata requests (object stores) or batches of them (local disk) sent at once.
_PARALLEL_REQUESTS = 16
# Paths per metadata call on local disk when many are asked (``Storage._file_infos``).
_LOCAL_BATCH = 20_000


@dataclass(frozen=True)
class Entry:
    """One listed file or directory: its URI, size in bytes and modification time (UTC)."""

    uri: str
    size: int
    mtime: dt.datetime | None
    is_dir: bool

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]


class Storage:
    """The store holding one URI: a ``pyarrow.fs`` file system plus Lance's object store.

    Methods take absolute URIs in the spelling of the root (a local path stays
    a path, ``s3://bucket/key`` stays a URI), so results can be handed to Lance.
    """

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None):
        options = dict(storage_options or {})
        warn_unknown_options(options)  # once per store and options: ``resolve`` shares them
        parts = urlsplit(uri) if "://" in uri else None
        self.scheme = parts.scheme.lower() if parts is not None else "file"
        if self.scheme == "memory":
            raise StorageError(
                f"{uri!r}: memory:// cannot hold a namespace: pylance gives every dataset "
                "opened there a new, empty store, so nothing would survive between calls"
            )
        if self.scheme not in ("file", *_OBJECT_SCHEMES):
            raise StorageError(
                f"{uri!r}: the {self.scheme}:// scheme is not supported; use a local path, "
                "file://, s3://, gs:// or az://"
            )
        self.authority = parts.netloc if parts is not None and self.scheme != "file" else ""
        self.options = options
        self._uri = uri
        self._lance_session: Any = None
        self._lock = threading.Lock()
        self.fs = self._filesystem(options)
        self.endpoint = _option(options, "endpoint", ("AWS_ENDPOINT_URL", "AWS_ENDPOINT"))

    def __reduce__(self) -> tuple[Any, tuple[str, dict[str, str]]]:
        # Spark ships snapshots (and so their Storage) to executors: rebuild the store
        # there from its URI and options instead of pickling locks and file systems
        return resolve, (self._uri, self.options)

    def __repr__(self) -> str:  # never the options: they hold credentials
        return f"Storage({self.scheme}://{self.authority})"

    @property
    def is_local(self) -> bool:
        """A local file system: real directories, atomic rename, ``utime``."""
        return self.scheme == "file"

    @property
    def rename_is_atomic(self) -> bool:
        """Whether ``rename`` is one atomic step keeping the modification time (local only;
        object stores copy, then delete)."""
        return self.is_local

    def _filesystem(self, options: Mapping[str, str]) -> pafs.FileSystem:
        connect = _seconds(_option(options, "connect_timeout"), CONNECT_TIMEOUT_S)
        request = _seconds(_option(options, "timeout"), REQUEST_TIMEOUT_S)
        if self.scheme == "file":
            return pafs.LocalFileSystem()
        if self.scheme == "s3":
            endpoint = _option(options, "endpoint", ("AWS_ENDPOINT_URL", "AWS_ENDPOINT"))
            allow_http = _truthy(_option(options, "allow_http", ("AWS_ALLOW_HTTP",)))
            scheme = "https"
            if endpoint and endpoint.startswith("http://"):
                if not allow_http:
                    raise StorageError(
                        f"the endpoint {endpoint} is plain http: pass allow_http='true' in "
                        "storage_options to allow it"
                    )
                scheme = "http"
            return pafs.S3FileSystem(
                access_key=_option(options, "access_key"),
                secret_key=_option(options, "secret_key"),
                session_token=_option(options, "session_token"),
                region=_option(options, "region", ("AWS_REGION", "AWS_DEFAULT_REGION")),
                endpoint_override=endpoint,
                scheme=scheme,
                connect_timeout=connect,
                request_timeout=request,
                force_virtual_addressing=_truthy(_option(options, "virtual_hosted")),
                retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=3),
            )
        if self.scheme == "gs":
            return pafs.GcsFileSystem(retry_time_limit=dt.timedelta(seconds=request))
        return self._azure(options)

    def _azure(self, options: Mapping[str, str]) -> pafs.FileSystem:
        """``az://``: the account, key and endpoint Lance's Azure store is given.

        An ``azure_storage_endpoint`` (``http(s)://host:port/<account>``, e.g. Azurite)
        or ``azure_storage_use_emulator`` (Lance's default: ``AZURITE_BLOB_STORAGE_URL``
        or ``http://127.0.0.1:10000``, account ``devstoreaccount1`` and the emulator's
        published key) point both at the same service.
        """
        name = _option(options, "account_name", ("AZURE_STORAGE_ACCOUNT_NAME",))
        key = _option(options, "account_key", ("AZURE_STORAGE_ACCOUNT_KEY",))
        endpoint = _option(options, "azure_endpoint", ("AZURE_STORAGE_ENDPOINT",))
        emulator = _truthy(_option(options, "use_emulator", ("AZURE_STORAGE_USE_EMULATOR",)))
        if emulator and not endpoint:
            endpoint = os.environ.get("AZURITE_BLOB_STORAGE_URL") or "http://127.0.0.1:10000"
            name = name or AZURITE_ACCOUNT
            key = key or AZURITE_KEY
        extra: dict[str, str] = {}
        if endpoint:
            parts = urlsplit(endpoint)
            if parts.scheme == "http" and not (
                emulator or _truthy(_option(options, "allow_http", ("AZURE_ALLOW_HTTP",)))
            ):
                raise StorageError(
                    f"the endpoint {endpoint} is plain http: pass allow_http='true' in "
                    "storage_options to allow it"
                )
            extra = {
                "blob_storage_authority": parts.netloc,
                "dfs_storage_authority": parts.netloc,
                "blob_storage_scheme": parts.scheme or "https",
                "dfs_storage_scheme": parts.scheme or "https",
            }
        return pafs.AzureFileSystem(account_name=name or "", account_key=key, **extra)

    # -- naming ---------------------------------------------------------------
    @staticmethod
    def join(uri: str, *parts: str) -> str:
        """``uri/part/...``: local paths and object-store URIs alike."""
        out = uri.rstrip("/") if uri != "/" else ""
        for part in parts:
            out += "/" + part.strip("/")
        return out

    @staticmethod
    def relative(uri: str, base: str) -> str:
        """``uri`` relative to ``base`` (which must contain it)."""
        prefix = base.rstrip("/") + "/"
        if not uri.startswith(prefix):
            raise ValueError(f"{uri!r} is not under {base!r}")
        return uri[len(prefix) :]

    def path(self, uri: str) -> str:
        """The ``pyarrow.fs`` path of ``uri``."""
        if self.scheme == "file":
            local = uri[len("file://") :] if uri.startswith("file://") else uri
            # normpath alone when already absolute: half of abspath's cost, per file checked
            return os.path.normpath(local) if local[:1] == "/" else os.path.abspath(local)
        parts = urlsplit(uri)
        return (parts.netloc + parts.path).rstrip("/")

    def nested(self, uri: str, other: str) -> bool:
        """True when ``uri`` and ``other`` (both on this storage) are the same
        directory or one holds the other, after following local symlinks."""
        a, b = self.path(uri), self.path(other)
        if self.scheme == "file":
            a, b = os.path.realpath(a), os.path.realpath(b)
            return os.path.commonpath([a, b]) in (a, b)
        a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
        return a.startswith(b) or b.startswith(a)

    def _key(self, uri: str) -> str:
        """The object key of ``uri`` inside its bucket / container (object stores)."""
        return urlsplit(uri).path.lstrip("/")

    def _uri_of(self, path: str, like: str, like_path: str) -> str:
        """The URI of ``path`` (a pyarrow path under ``like_path``) spelled like ``like``."""
        rest = path[len(like_path) :].lstrip("/")
        return self.join(like, rest) if rest else like

    # -- reading --------------------------------------------------------------
    def info(self, uri: str) -> Entry | None:
        """The file or directory at ``uri``; None when nothing is there."""
        fi = self._call(uri, lambda: self.fs.get_file_info(self.path(uri)))
        if fi.type == pafs.FileType.NotFound:
            return None
        return _entry(uri, fi)

    def exists(self, uri: str) -> bool:
        return self.info(uri) is not None

    def infos(self, uris: Iterable[str]) -> list[Entry | None]:
        """``info`` of each of ``uris``, in order (``_file_infos``)."""
        wanted = list(uris)
        return [
            None if fi.type == pafs.FileType.NotFound else _entry(u, fi)
            for u, fi in zip(wanted, self._file_infos(wanted), strict=True)
        ]

    def missing(self, uris: Iterable[str]) -> list[str]:
        """Those of ``uris`` that do not exist (batched metadata calls, ``_file_infos``)."""
        wanted = list(uris)
        found = self._file_infos(wanted)
        # ``is_file`` first: ``type`` builds a Python enum per call, a third of the cost
        return [
            u
            for u, fi in zip(wanted, found, strict=True)
            if not fi.is_file and fi.type == pafs.FileType.NotFound
        ]

    def _file_infos(self, wanted: list[str]) -> list[pafs.FileInfo]:
        """``pyarrow.fs`` infos of ``wanted``, in order. On local disk ``_LOCAL_BATCH``
        paths per call, the calls on threads (a cold ``stat`` waits on the disk); on
        object stores one request each, ``_PARALLEL_REQUESTS`` at a time (pyarrow sends
        a batch one request after another: 30 HEADs cost 30 round trips)."""
        if not wanted:
            return []
        paths = [self.path(u) for u in wanted]
        if self.is_local:
            batches = [paths[i : i + _LOCAL_BATCH] for i in range(0, len(paths), _LOCAL_BATCH)]
        else:
            batches = [[p] for p in paths]
        if len(batches) == 1:
            return self._call(wanted[0], lambda: self.fs.get_file_info(paths))
        with ThreadPoolExecutor(min(len(batches), _PARALLEL_REQUESTS)) as pool:
            parts = self._call(wanted[0], lambda: list(pool.map(self.fs.get_file_info, batches)))
        return [fi for part in parts for fi in part]

    def read_tail(self, uri: str, size: int, n: int) -> bytes:
        """The last ``n`` bytes of the file at ``uri`` of ``size`` bytes (fewer if shorter)."""
        start = max(size - n, 0)

        def read() -> bytes:
            with self.fs.open_input_file(self.path(uri)) as fh:
                return fh.read_at(size - start, start)

        return self._call(uri, read)

    def is_dir(self, uri: str) -> bool:
        """A directory (local) or a prefix that has objects under it (object stores)."""
        found = self.info(uri)
        return found is not None and found.is_dir

    def check_container(self, uri: str) -> None:
        """Raise StorageError when the bucket (container) holding ``uri`` does not exist,
        or when ``uri`` is a file where a directory is expected."""
        if self.is_local:
            found = self.info(uri)
            if found is not None and not found.is_dir:
                raise StorageError(f"{uri}: this is a file, not a directory")
            return
        fi = self._call(uri, lambda: self.fs.get_file_info(self.authority))
        if fi.type == pafs.FileType.NotFound:
            raise StorageError(f"{uri}: the bucket {self.authority!r} does not exist")

    def list(self, uri: str, recursive: bool = False) -> list[Entry]:
        """What is under ``uri`` (empty when nothing is); directories too unless recursive."""
        base = self.path(uri)
        sel = pafs.FileSelector(base, recursive=recursive, allow_not_found=True)
        infos = self._call(uri, lambda: self.fs.get_file_info(sel))
        out = [_entry(self._uri_of(fi.path, uri, base), fi) for fi in infos]
        if recursive:
            out = [e for e in out if not e.is_dir]
        return sorted(out, key=lambda e: e.uri)

    def read_bytes(self, uri: str) -> bytes | None:
        """The content of the file at ``uri``; None when it does not exist."""
        try:
            with self.fs.open_input_stream(self.path(uri)) as fh:
                return fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            if self.info(uri) is None:
                return None
            raise self._error(uri, exc) from exc

    def read_json(self, uri: str) -> Any | None:
        """The JSON content of ``uri``; None when missing or unreadable (half-written)."""
        data = self.read_bytes(uri)
        if data is None:
            return None
        try:
            return json.loads(data.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None

    # -- writing --------------------------------------------------------------
    def write_bytes(self, uri: str, data: bytes, durable: bool = True) -> None:
        """Write ``uri`` so readers see the old content or the new, never a part.

        Local: a temporary file renamed over it (``durable`` adds an fsync);
        object stores: one PUT, which is atomic.
        """
        if self.is_local:
            path = self.path(uri)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            try:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    if durable:
                        fh.flush()
                        os.fsync(fh.fileno())
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp)
            return

        def put() -> None:
            with self.fs.open_output_stream(self.path(uri)) as fh:
                fh.write(data)

        self._call(uri, put)

    def write_json(self, uri: str, content: Any, durable: bool = True) -> None:
        self.write_bytes(uri, json.dumps(content, separators=(",", ":")).encode(), durable)

    # -- compare-and-swap (object stores with conditional requests) ------------
    @property
    def can_compare_and_swap(self) -> bool:
        """Whether ``put_if`` / ``read_tagged`` work here: ``s3://`` with static credentials
        (whether the server honours ``If-Match`` is ``commit_safety.if_match_honoured``)."""
        return self.s3_client() is not None

    def s3_client(self) -> s3_http.Client | None:
        """Signed plain requests to this ``s3://`` store (``catalog.s3_http``); None for
        other schemes or without static credentials."""
        opts = self.options
        access = _option(opts, "access_key", ("AWS_ACCESS_KEY_ID",))
        secret = _option(opts, "secret_key", ("AWS_SECRET_ACCESS_KEY",))
        if self.scheme != "s3" or not access or not secret:
            return None
        region = _option(opts, "region", ("AWS_REGION", "AWS_DEFAULT_REGION")) or "us-east-1"
        from lance_partitioned.catalog import s3_http

        return s3_http.Client(
            self.endpoint or f"https://s3.{region}.amazonaws.com",
            region,
            access,
            secret,
            _option(opts, "session_token", ("AWS_SESSION_TOKEN",)),
            _truthy(_option(opts, "virtual_hosted")),
            _seconds(_option(opts, "timeout"), REQUEST_TIMEOUT_S),
        )

    def read_tagged(self, uri: str) -> tuple[bytes, str, dt.datetime | None] | None:
        """``(content, ETag, modification time)`` of ``uri`` from one GET; None when missing.

        ``s3://`` only (``can_compare_and_swap``)."""
        client = self.s3_client()
        if client is None:
            raise StorageError(f"{uri}: no conditional requests on this store")
        resp = self._call(uri, lambda: client.request("GET", self.authority, self._key(uri)))
        if resp.status == 404:
            return None
        if resp.status >= 300 or resp.etag is None:
            raise self._error(uri, OSError(f"HTTP {resp.status} reading {uri}"))
        return resp.body, resp.etag, resp.last_modified

    def put_if(self, uri: str, data: bytes, etag: str | None) -> str | None:
        """Write ``uri`` only if it is as expected: absent (``etag`` None: ``If-None-Match: *``)
        or still the version ``etag`` names (``If-Match``). One PUT, atomic on the server.

        Returns the new ETag; None when the precondition failed (the object was changed,
        created or removed by someone else), in which case nothing was written.
        ``s3://`` only (``can_compare_and_swap``).
        """
        client = self.s3_client()
        if client is None:
            raise StorageError(f"{uri}: no conditional requests on this store")
        cond = {"if-none-match": "*"} if etag is None else {"if-match": etag}
        resp = self._call(
            uri, lambda: client.request("PUT", self.authority, self._key(uri), data, cond)
        )
        if resp.status in (404, 409, 412):  # 404: If-Match on an object that is gone
            return None
        if resp.status >= 300:
            raise self._error(uri, OSError(f"HTTP {resp.status} writing {uri}"))
        return resp.etag or ""

    def touch(self, uri: str) -> bool:
        """Set ``uri``'s modification time to now; False when it does not exist.

        Object stores have no ``utime``: the object is rewritten with its own
        content. A delete racing the rewrite can leave it recreated (TRANSACTIONS.md §12).
        """
        if self.is_local:
            try:
                os.utime(self.path(uri))
                return True
            except FileNotFoundError:
                return False
        data = self.read_bytes(uri)
        if data is None:
            return False
        self.write_bytes(uri, data)
        return True

    def rename(self, src: str, dst: str) -> bool:
        """Move ``src`` to ``dst``; False when ``src`` does not exist.

        Atomic on local file systems; a copy then a delete on object stores.
        """
        if self.is_local:
            try:
                os.rename(self.path(src), self.path(dst))
                return True
            except FileNotFoundError:
                return False
        try:
            self.fs.copy_file(self.path(src), self.path(dst))
        except FileNotFoundError:
            return False
        except OSError as exc:
            if self.info(src) is None:
                return False
            raise self._error(src, exc) from exc
        self.delete(src)
        return True

    def delete(self, uri: str) -> bool:
        """Delete the file at ``uri``; False when it was not there (local only knows)."""
        if self.is_local:
            try:
                os.remove(self.path(uri))
                return True
            except (FileNotFoundError, IsADirectoryError):
                return False
        self._call(uri, lambda: self._lance().delete_file(self._key(uri)))
        return True

    def delete_tree(self, uri: str) -> tuple[int, int]:
        """Delete ``uri`` and everything under it; returns (files, bytes) removed."""
        files = self.list(uri, recursive=True)
        if self.is_local:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_dir(self.path(uri))
        else:
            for f in files:
                self.delete(f.uri)
        return len(files), sum(f.size for f in files)

    def remove_empty_dir(self, uri: str) -> bool:
        """Remove the directory ``uri`` if it is empty (object stores have no directories)."""
        if not self.is_local:
            return not self.list(uri)
        try:
            os.rmdir(self.path(uri))
            return True
        except OSError:
            return False

    # -- helpers --------------------------------------------------------------
    def _lance(self) -> Any:
        with self._lock:
            if self._lance_session is None:
                from lance.file import LanceFileSession

                self._lance_session = LanceFileSession(
                    f"{self.scheme}://{self.authority}", storage_options=lance_options(self.options)
                )
            return self._lance_session

    def _call(self, uri: str, fn: Any) -> Any:
        try:
            return fn()
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise self._error(uri, exc) from exc

    def _error(self, uri: str, exc: BaseException) -> StorageError:
        return storage_error(uri, exc, self.options)


def storage_error(uri: str, exc: BaseException, options: Mapping[str, str] | None) -> StorageError:
    """A StorageError naming ``uri`` and the likely cause of ``exc`` (secrets redacted)."""
    text = redact(str(exc), options)
    low = text.lower()
    if "nosuchbucket" in low or "bucket does not exist" in low or "no such bucket" in low:
        cause = "the bucket does not exist"
    elif any(
        s in low
        for s in (
            "accessdenied",
            "access_denied",
            "access denied",
            "invalidaccesskeyid",
            "signaturedoesnotmatch",
            "forbidden",
            "403",
            "credentials",
        )
    ):
        cause = "access denied: check the credentials and their permissions"
    elif any(
        s in low
        for s in ("connect", "timed out", "timeout", "network", "dns", "resolve", "unreachable")
    ):
        cause = "the storage endpoint cannot be reached"
    else:
        cause = "storage error"
    return StorageError(f"{uri}: {cause}: {text}")


def _entry(uri: str, fi: pafs.FileInfo) -> Entry:
    mtime = fi.mtime
    if mtime is not None and mtime.tzinfo is None:
        mtime = mtime.replace(tzinfo=dt.timezone.utc)
    is_dir = fi.type == pafs.FileType.Directory
    return Entry(uri, 0 if is_dir else int(fi.size or 0), mtime, is_dir)


# One ``Storage`` per (store, options): its file system and Lance file session are
# built once. Bounded: a process rarely talks to more than a few stores.
_CACHE: BoundedCache = caches.register("storage.stores", BoundedCache(maxsize=64))
_CACHE_LOCK = threading.Lock()


def resolve(uri: str, storage_options: Mapping[str, str] | None = None) -> Storage:
    """The ``Storage`` of ``uri`` (one per store and options, shared)."""
    uri = str(uri)
    parts = urlsplit(uri) if "://" in uri else None
    scheme = parts.scheme.lower() if parts is not None else "file"
    store = f"{scheme}://{parts.netloc if parts is not None and scheme != 'file' else ''}"
    key = (store, tuple(sorted((storage_options or {}).items())))
    found = _CACHE.get(key)
    if found is None:
        found = Storage(uri, storage_options)
        with _CACHE_LOCK:  # of two threads racing, both keep the first one stored
            kept = _CACHE.get(key)
            if kept is None:
                _CACHE.put(key, found)
            else:
                found = kept
    return found


__all__ = [
    "Entry",
    "Storage",
    "StorageError",
    "lance_options",
    "redact",
    "resolve",
    "storage_error",
]
