"""Whether a store makes a Lance commit atomic; writers refuse stores that do not.

pylance 14.0.2 commits a version by writing its manifest file with a
put-if-absent (``ConditionalPutCommitHandler`` for local paths, ``s3://``,
``gs://`` and ``az://``): on S3 that is a ``PUT`` with ``If-None-Match: *``.
Two writers racing for the same version then cannot both win, which is what
every compare-and-swap of this package (``Manifest.commit``, leaf staging)
rests on. A store that *ignores* the header answers 200 to both, and the later
manifest silently replaces the earlier: a lost update.

- Local file systems, ``gs://`` and ``az://``: the native preconditions are
  honoured (Lance uses the file system's no-clobber link, GCS generation match,
  Azure ``If-None-Match``).
- AWS S3 (no endpoint, or an ``amazonaws.com`` endpoint): honours
  ``If-None-Match`` since August 2024.
- Any other S3 endpoint (MinIO, R2, Ceph, moto, ...): checked once per
  endpoint and bucket and process, before the first write, by two conditional
  PUTs of a probe object under ``__manifest/`` (the second must be refused with
  412) and a delete. A store that accepts both is refused with
  ``UnsafeStoreError``. ``lp_trust_conditional_put = "true"`` in
  ``storage_options`` skips the probe (for a store known to be safe whose
  credentials the probe cannot use, e.g. an instance profile).

The probe signs its two requests itself (AWS Signature V4, below): neither
Lance nor ``pyarrow.fs`` can send ``If-None-Match``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import http.client
import threading
import uuid
from urllib.parse import quote, urlsplit

from lance_partitioned.catalog import storage as st
from lance_partitioned.errors import StorageError, UnsafeStoreError

_CHECKED: set[tuple[str, str]] = set()
_LOCK = threading.Lock()

FIX = (
    "upgrade the server to one that honours conditional writes (MinIO since "
    "RELEASE.2024-11-07, Ceph RGW since Squid, Cloudflare R2), or use AWS S3 itself; "
    "see docs/TRANSACTIONS.md, 'Object stores'"
)


def check(root: str, storage: st.Storage) -> None:
    """Raise UnsafeStoreError unless Lance's commits on ``root``'s store are atomic.

    Cheap after the first call per store: the answer is remembered for the process.
    """
    if storage.scheme != "s3":
        return  # local, gs, az: native put-if-absent
    endpoint = storage.endpoint
    if not endpoint or urlsplit(endpoint).hostname.endswith("amazonaws.com"):  # type: ignore[union-attr]
        return
    if st._truthy(st.raw_option(storage.options, st.TRUST_CONDITIONAL_PUT)):
        return
    key = (endpoint, storage.authority)
    with _LOCK:
        if key in _CHECKED:
            return
    _probe(root, storage, endpoint)
    with _LOCK:
        _CHECKED.add(key)


def _probe(root: str, storage: st.Storage, endpoint: str) -> None:
    opts = storage.options
    access = st._option(opts, "access_key", ("AWS_ACCESS_KEY_ID",))
    secret = st._option(opts, "secret_key", ("AWS_SECRET_ACCESS_KEY",))
    token = st._option(opts, "session_token", ("AWS_SESSION_TOKEN",))
    region = st._option(opts, "region", ("AWS_REGION", "AWS_DEFAULT_REGION")) or "us-east-1"
    if not access or not secret:
        raise UnsafeStoreError(
            f"{root}: cannot tell whether the S3 endpoint {endpoint} honours conditional writes "
            "(If-None-Match), which Lance needs for atomic commits: the check needs static "
            "credentials (aws_access_key_id / aws_secret_access_key in storage_options or the "
            f"AWS_* environment). Nothing was written. Fix: pass them, or, if the store is known "
            f"to honour If-None-Match, set storage_options['{st.TRUST_CONDITIONAL_PUT}'] = 'true'"
        )
    probe = st.Storage.join(root, "__manifest", f"_lp_probe_{uuid.uuid4().hex}")
    bucket, key = storage.authority, urlsplit(probe).path.lstrip("/")
    signer = _Signer(endpoint, region, access, secret, token, opts)
    try:
        first = signer.put_if_absent(bucket, key)
        if first >= 300:
            cause = "access denied: these credentials may not write" if first == 403 else ""
            raise StorageError(
                f"{root}: {cause or 'storage error'}: the conditional-write check could not "
                f"write {probe} (HTTP {first}); nothing was written"
            )
        second = signer.put_if_absent(bucket, key)
    except OSError as exc:
        if isinstance(exc, StorageError):
            raise
        raise st.storage_error(root, exc, opts) from exc
    finally:
        try:
            storage.delete(probe)
        except Exception:  # best effort; a leftover probe object is harmless
            pass
    if second in (412, 409):
        return
    if 200 <= second < 300:
        problem = "accepted a second If-None-Match: * PUT of an existing object"
    else:
        problem = f"answered HTTP {second} to a conditional PUT"
    raise UnsafeStoreError(
        f"{root}: the S3 endpoint {endpoint} {problem}, so two Lance commits of the same "
        "version could both succeed and one would be silently lost. Nothing was written. "
        f"Fix: {FIX}"
    )


class _Signer:
    """Just enough AWS Signature V4 to send the probe's conditional PUT."""

    def __init__(self, endpoint, region, access, secret, token, opts):  # type: ignore[no-untyped-def]
        parts = urlsplit(endpoint)
        self.https = parts.scheme != "http"
        self.netloc = parts.netloc
        self.prefix = parts.path.rstrip("/")
        self.virtual = st._truthy(st._option(opts, "virtual_hosted"))
        self.region, self.access, self.secret, self.token = region, access, secret, token
        self.timeout = st._seconds(st._option(opts, "timeout"), st.REQUEST_TIMEOUT_S)

    def put_if_absent(self, bucket: str, key: str) -> int:
        host = f"{bucket}.{self.netloc}" if self.virtual else self.netloc
        path = f"{self.prefix}/{quote(key, safe='/-_.~')}"
        if not self.virtual:
            path = f"{self.prefix}/{quote(bucket)}/{quote(key, safe='/-_.~')}"
        body = b"lance-partitioned conditional write check\n"
        now = dt.datetime.now(dt.timezone.utc)
        amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        headers = {
            "host": host,
            "if-none-match": "*",
            "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
            "x-amz-date": amz_date,
        }
        if self.token:
            headers["x-amz-security-token"] = self.token
        signed = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                "PUT",
                path,
                "",
                "".join(f"{k}:{headers[k].strip()}\n" for k in sorted(headers)),
                signed,
                headers["x-amz-content-sha256"],
            ]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        k = hmac.new(f"AWS4{self.secret}".encode(), day.encode(), hashlib.sha256).digest()
        for part in (self.region, "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        signature = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}"
        )
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(host, timeout=self.timeout)
        try:
            conn.request("PUT", path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            return resp.status
        finally:
            conn.close()


def _reset_for_tests() -> None:
    with _LOCK:
        _CHECKED.clear()


__all__ = ["FIX", "check"]
