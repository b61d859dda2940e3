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

The probe signs its requests itself (``catalog.s3_http``, ``Storage.s3_client``): neither Lance nor
``pyarrow.fs`` can send ``If-None-Match``. It also sends a PUT with a stale
``If-Match``, which must be refused too: the leases' compare-and-swap
(``Storage.put_if``) uses it where it is honoured (``if_match_honoured``).
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from lance_partitioned.catalog import storage as st
from lance_partitioned.catalog.storage_options import TRUST_CONDITIONAL_PUT, raw_option, truthy
from lance_partitioned.errors import StorageError, UnsafeStoreError
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache

# (endpoint, bucket) checked -> whether it also honours If-Match (``_probe``).
_PROBED: BoundedCache = caches.register("commit_safety.probed", BoundedCache(maxsize=256))

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
    if truthy(raw_option(storage.options, TRUST_CONDITIONAL_PUT)):
        return
    if (endpoint, storage.authority) in _PROBED:
        return
    _probe(root, storage, endpoint)


def if_match_honoured(storage: st.Storage) -> bool:
    """Whether ``storage`` (an ``s3://`` store) refuses a PUT with a stale ``If-Match``, as
    the leases' compare-and-swap needs: AWS S3 (since November 2024) yes; another endpoint
    as ``check`` found it (False until it ran); with ``lp_trust_conditional_put``, yes."""
    endpoint = storage.endpoint
    if not endpoint or urlsplit(endpoint).hostname.endswith("amazonaws.com"):  # type: ignore[union-attr]
        return True
    if truthy(raw_option(storage.options, TRUST_CONDITIONAL_PUT)):
        return True  # the user vouches for conditional writes, If-Match included
    return bool(_PROBED.get((endpoint, storage.authority), False))


def _probe(root: str, storage: st.Storage, endpoint: str) -> None:
    opts = storage.options
    signer = storage.s3_client()
    if signer is None:
        raise UnsafeStoreError(
            f"{root}: cannot tell whether the S3 endpoint {endpoint} honours conditional writes "
            "(If-None-Match), which Lance needs for atomic commits: the check needs static "
            "credentials (aws_access_key_id / aws_secret_access_key in storage_options or the "
            f"AWS_* environment). Nothing was written. Fix: pass them, or, if the store is known "
            f"to honour If-None-Match, set storage_options['{TRUST_CONDITIONAL_PUT}'] = 'true'"
        )
    probe = st.Storage.join(root, "__manifest", f"_lp_probe_{uuid.uuid4().hex}")
    bucket, key = storage.authority, urlsplit(probe).path.lstrip("/")
    body = b"lance-partitioned conditional write check\n"
    if_match = False
    try:
        first = signer.put_if_absent(bucket, key, body)
        if first >= 300:
            cause = "access denied: these credentials may not write" if first == 403 else ""
            raise StorageError(
                f"{root}: {cause or 'storage error'}: the conditional-write check could not "
                f"write {probe} (HTTP {first}); nothing was written"
            )
        second = signer.put_if_absent(bucket, key, body)
        if second in (412, 409):  # and If-Match (the leases' compare-and-swap)?
            stale = signer.request("PUT", bucket, key, body, {"if-match": '"0"'}).status
            if_match = stale in (412, 409)
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
        _PROBED.put((endpoint, storage.authority), if_match)
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


def _reset_for_tests() -> None:
    _PROBED.clear()


__all__ = ["FIX", "check", "if_match_honoured"]
