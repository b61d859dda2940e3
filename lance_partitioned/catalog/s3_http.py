"""Plain S3 requests with conditional headers, signed here (AWS Signature V4).

Neither Lance nor ``pyarrow.fs`` exposes ``If-None-Match`` / ``If-Match`` on a
write, and two things need them: the conditional-write check of
``catalog.commit_safety`` and compare-and-swap on small objects
(``Storage.put_if``, used by the writers' leases). This module sends exactly one
HTTP request per call; ``Storage.s3_client()`` builds the client from the
``storage_options`` (or the standard ``AWS_*`` environment variables).

Static credentials are required (an access key and secret, optionally a session
token): without them (e.g. an instance profile) there is no client, and callers
fall back to what works without conditional requests.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import hmac
import http.client
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlsplit


@dataclass(frozen=True)
class Response:
    """One answer: HTTP status, headers (lower-case names) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")

    @property
    def last_modified(self) -> dt.datetime | None:
        text = self.headers.get("last-modified")
        if not text:
            return None
        try:
            return email.utils.parsedate_to_datetime(text).astimezone(dt.timezone.utc)
        except (TypeError, ValueError):
            return None


class Client:
    """Signed requests to one S3 endpoint (path-style unless ``virtual_hosted``)."""

    def __init__(self, endpoint: str, region: str, access: str, secret: str, token: str | None,
                 virtual_hosted: bool, timeout: float):  # fmt: skip
        parts = urlsplit(endpoint)
        self.https = parts.scheme != "http"
        self.netloc = parts.netloc
        self.prefix = parts.path.rstrip("/")
        self.virtual = virtual_hosted
        self.region, self.access, self.secret, self.token = region, access, secret, token
        self.timeout = timeout

    def request(
        self,
        method: str,
        bucket: str,
        key: str,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """Send one request for ``bucket``/``key``; raises OSError on network failures."""
        host = f"{bucket}.{self.netloc}" if self.virtual else self.netloc
        path = f"{self.prefix}/{quote(key, safe='/-_.~')}"
        if not self.virtual:
            path = f"{self.prefix}/{quote(bucket)}/{quote(key, safe='/-_.~')}"
        now = dt.datetime.now(dt.timezone.utc)
        amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        hdrs = {k.lower(): v for k, v in (headers or {}).items()}
        hdrs.update(
            {
                "host": host,
                "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
                "x-amz-date": amz_date,
            }
        )
        if self.token:
            hdrs["x-amz-security-token"] = self.token
        signed = ";".join(sorted(hdrs))
        canonical = "\n".join(
            [
                method,
                path,
                "",
                "".join(f"{k}:{hdrs[k].strip()}\n" for k in sorted(hdrs)),
                signed,
                hdrs["x-amz-content-sha256"],
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
        hdrs["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={self.access}/{scope}, "
            f"SignedHeaders={signed}, Signature={signature}"
        )
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(host, timeout=self.timeout)
        try:
            conn.request(method, path, body=body if method in ("PUT", "POST") else None,
                         headers=hdrs)  # fmt: skip
            resp = conn.getresponse()
            data = resp.read()
            return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            conn.close()

    def put_if_absent(self, bucket: str, key: str, body: bytes) -> int:
        """``PUT`` with ``If-None-Match: *``; the HTTP status."""
        return self.request("PUT", bucket, key, body, {"if-none-match": "*"}).status


__all__ = ["Client", "Response"]
