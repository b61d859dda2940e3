"""A real S3-compatible server for the tests: moto's standalone server on 127.0.0.1.

``MotoServer`` starts ``moto.server`` on a free loopback port in its own process
and stops it (by its pid) at the end; ``Store`` is what the parametrised
``store`` fixture (``conftest.py``) hands a test: where to put a root, and how
to look at it without going through the code under test (``os`` for local
roots, boto3 for S3), so "nothing changed" checks hold on both.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass

# the moto server accepts any credentials unless IAM auth is switched on
ACCESS_KEY = "lp-test-access-key"
SECRET_KEY = "lp-test-SECRET-7f3a9c"  # recognisable: the leak tests look for it
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    """One moto S3 server process on 127.0.0.1 (``env`` adds to its environment)."""

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

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def options(self, **extra: str) -> dict[str, str]:
        """Lance storage options for this server."""
        return {
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "aws_endpoint": self.endpoint,
            "aws_region": REGION,
            "allow_http": "true",
            **extra,
        }

    def env(self) -> dict[str, str]:
        """The standard AWS environment variables for this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            region_name=REGION,
        )

    def new_bucket(self) -> str:
        name = f"lp-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name


def s3_tree(client, uri: str) -> dict[str, tuple[int, str]]:  # type: ignore[no-untyped-def]
    """Every object under ``uri`` (``s3://bucket/prefix``): relative key -> (size, ETag)."""
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            out[obj["Key"][len(prefix) :]] = (obj["Size"], obj["ETag"])
    return out


def listdir(uri: str) -> list[str]:
    """Names directly under a local path or an ``s3://`` URI (S3: boto3 with the standard
    AWS environment variables, as the ``store`` fixture sets them)."""
    if not uri.startswith("s3://"):
        return sorted(os.listdir(uri))
    import boto3

    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=REGION)
    return sorted({key.split("/", 1)[0] for key in s3_tree(client, uri)})


@dataclass
class Store:
    """Where a test's roots live: ``local`` (under tmp_path) or ``s3`` (a fresh bucket)."""

    kind: str
    base: str
    server: MotoServer | None = None

    def root(self, name: str) -> str:
        return f"{self.base.rstrip('/')}/{name}"

    @property
    def is_s3(self) -> bool:
        return self.kind == "s3"

    def tree(self, root: str) -> dict[str, tuple]:
        """Every file under ``root`` with its size and version stamp (mtime or ETag)."""
        if self.is_s3:
            assert self.server is not None
            return s3_tree(self.server.client(), root)
        out = {}
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                st = os.stat(path)
                out[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
        return out

    def listdir(self, uri: str) -> list[str]:
        """The names directly under ``uri`` (files and directories / prefixes)."""
        if not self.is_s3:
            return sorted(os.listdir(uri))
        assert self.server is not None
        return sorted({key.split("/", 1)[0] for key in s3_tree(self.server.client(), uri)})

    def exists(self, uri: str) -> bool:
        if not self.is_s3:
            return os.path.exists(uri)
        assert self.server is not None
        bucket, _, key = uri[len("s3://") :].partition("/")
        with contextlib.suppress(Exception):
            self.server.client().head_object(Bucket=bucket, Key=key)
            return True
        return bool(self.tree(uri))


class Proxy:
    """A small HTTP proxy on 127.0.0.1 in front of the moto server, in this process.

    ``strip_conditional``: drops ``If-None-Match`` / ``If-Match`` from requests, so the
    server behaves like a store that ignores conditional writes. ``drop_puts_after``:
    once that many PUTs passed, every further PUT gets its connection closed without an
    answer (a network failure in the middle of a write). ``requests`` counts by method.
    """

    def __init__(self, upstream: MotoServer, strip_conditional: bool = False):
        import http.client
        import http.server
        import socketserver
        import threading

        self.strip_conditional = strip_conditional
        self.drop_puts_after: int | None = None
        self.puts = 0
        self.requests: dict[str, int] = {}
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
                proxy.requests[self.command] = proxy.requests.get(self.command, 0) + 1
                if self.command == "PUT":
                    proxy.puts += 1
                    if proxy.drop_puts_after is not None and proxy.puts > proxy.drop_puts_after:
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

            def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
                pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
