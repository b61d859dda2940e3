"""A local S3-compatible server for the demo, the tests and the benchmarks.

``MotoServer`` starts moto's standalone S3 server (``moto[server]``, in the
``dev`` extras) on a free 127.0.0.1 port in its own process, waits until it
answers, and stops it by its pid (``stop``, or leaving the ``with`` block).
``Proxy`` is a small HTTP proxy in front of it, in this process: it counts the
requests each operation sends (``counts``), and can inject faults (drop the
connection after N PUTs, strip conditional-write headers).

Not library code: ``make demo STORAGE=s3`` (``demo/pipeline.py``),
``tests/conftest.py`` and ``benchmarks/s3_bench.py`` share it.
"""

from __future__ import annotations

import http.client
import http.server
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from typing import Any
from urllib.parse import parse_qs, urlsplit

# moto accepts any credentials unless IAM auth is switched on (``env``)
ACCESS_KEY = "lp-test-access-key"
SECRET_KEY = "lp-test-SECRET-7f3a9c"  # recognisable: the leak tests look for it
REGION = "us-east-1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def options_for(endpoint: str, **extra: str) -> dict[str, str]:
    """Lance ``storage_options`` for the moto server at ``endpoint`` (``extra`` overrides)."""
    return {
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
        "aws_endpoint": endpoint,
        "aws_region": REGION,
        "allow_http": "true",
        **extra,
    }


class MotoServer:
    """One moto S3 server process on 127.0.0.1 (``env`` adds to its environment).

    Started by the constructor (raises RuntimeError if it does not answer within
    60 s); ``stop()`` ends exactly that process. Usable as a context manager.
    """

    def __init__(self, env: dict[str, str] | None = None):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2).read()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the moto server did not start") from None
                time.sleep(0.2)

    def __enter__(self) -> MotoServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        """Terminate the server process (kill it after 10 s); safe to call twice."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def options(self, **extra: str) -> dict[str, str]:
        """Lance ``storage_options`` for this server (``extra`` overrides)."""
        return options_for(self.endpoint, **extra)

    def spark_options(self, **extra: str) -> dict[str, str]:
        """The same, as options of the Spark source and sink (``storage.<key>``)."""
        return {f"storage.{k}": v for k, v in self.options(**extra).items()}

    def env(self) -> dict[str, str]:
        """The standard AWS environment variables for this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> Any:
        """A boto3 S3 client for this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            region_name=REGION,
        )

    def new_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh random name unless given); returns its name."""
        name = name or f"lp-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name


def request_kind(method: str, target: str) -> str:
    """The S3 operation of one request: LIST, GET, HEAD, PUT, DELETE, POST (multipart,
    batch delete), from its method and request target (path + query)."""
    parts = urlsplit(target)
    query = parse_qs(parts.query, keep_blank_values=True)
    key = parts.path.lstrip("/").partition("/")[2]  # path-style: /bucket/key
    if method == "GET" and (not key or "list-type" in query or "prefix" in query):
        return "LIST"
    return method


class Proxy:
    """A small HTTP proxy on 127.0.0.1 in front of an S3 server, in this process.

    ``counts()``: requests by kind (``request_kind``) since the last ``reset()``;
    ``log`` holds every ``(kind, method, target)``, ``ranges`` every GET's ``(target, Range)``.
    ``strip_conditional``: drops ``If-None-Match`` / ``If-Match`` from requests, so the
    server behaves like a store that ignores conditional writes. ``before``: called with
    ``(method, target)`` before each request is forwarded (a test runs a competing
    request there, to force an interleaving). ``drop_puts_after``:
    once that many PUTs passed, every further PUT gets its connection closed without an
    answer (a network failure in the middle of a write).
    """

    def __init__(self, upstream: MotoServer, strip_conditional: bool = False):
        self.strip_conditional = strip_conditional
        self.drop_puts_after: int | None = None
        self.before: Any = None  # Callable[[str, str], None] | None
        self.puts = 0
        self.requests: dict[str, int] = {}  # by HTTP method
        self.log: list[tuple[str, str, str]] = []
        self.ranges: list[tuple[str, str | None]] = []  # (target, Range header) of each GET
        self._lock = threading.Lock()
        proxy = self
        up_host, up_port = "127.0.0.1", upstream.port

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    body = b""
                    while True:  # HTTP chunks (the AWS C++ SDK streams uploads this way)
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline().strip():
                                pass
                            break
                        body += self.rfile.read(size)
                        self.rfile.readline()
                else:
                    n = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(n) if n else None
                with proxy._lock:
                    proxy.requests[self.command] = proxy.requests.get(self.command, 0) + 1
                    proxy.log.append(
                        (request_kind(self.command, self.path), self.command, self.path)
                    )
                    if self.command == "GET":
                        proxy.ranges.append((self.path, self.headers.get("Range")))
                    if self.command == "PUT":
                        proxy.puts += 1
                    drop = (
                        self.command == "PUT"
                        and proxy.drop_puts_after is not None
                        and proxy.puts > proxy.drop_puts_after
                    )
                if proxy.before is not None:
                    proxy.before(self.command, self.path)
                if drop:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                dropped = {"transfer-encoding", "expect", "content-length"}
                if proxy.strip_conditional:
                    dropped |= {"if-none-match", "if-match"}
                headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
                if body is not None:
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection(up_host, up_port, timeout=60)
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                length = None
                for k, v in resp.getheaders():
                    if k.lower() == "content-length":
                        length = v
                    elif k.lower() not in ("transfer-encoding", "connection"):
                        self.send_header(k, v)
                size = length if self.command == "HEAD" and length is not None else len(data)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *args: Any) -> None:
                pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self) -> None:
        """Forget the requests counted so far."""
        with self._lock:
            self.log.clear()
            self.ranges.clear()
            self.requests.clear()

    def counts(self) -> Counter[str]:
        """Requests by kind (LIST, GET, HEAD, PUT, DELETE, POST) since the last reset."""
        with self._lock:
            return Counter(kind for kind, _, _ in self.log)

    def targets(self, kind: str) -> list[str]:
        """The request targets (path + query) of every request of ``kind`` so far."""
        with self._lock:
            return [t for k, _, t in self.log if k == kind]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


__all__ = [
    "ACCESS_KEY",
    "MotoServer",
    "Proxy",
    "REGION",
    "SECRET_KEY",
    "free_port",
    "options_for",
    "request_kind",
]
