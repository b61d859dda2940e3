"""A real S3-compatible server for the tests: moto's standalone server on 127.0.0.1.

``MotoServer`` (``demo/s3_server.py``, shared with the demo and the benchmarks)
starts ``moto.server`` on a free loopback port in its own process and stops it
(by its pid) at the end; ``Proxy`` counts requests and injects faults. ``Store`` is what the parametrised
``store`` fixture (``conftest.py``) hands a test: where to put a root, and how
to look at it without going through the code under test (``os`` for local
roots, boto3 for S3), so "nothing changed" checks hold on both.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

# the server and the proxy are shared with the demo and the benchmarks
from demo.s3_server import (  # noqa: F401 (re-exported for the tests)
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    MotoServer,
    Proxy,
    free_port,
)


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

    def options(self) -> dict[str, str] | None:
        """``storage_options`` for this store (None on local disk)."""
        return self.server.options() if self.server is not None else None

    def spark_options(self) -> dict[str, str]:
        """Options giving the Spark source and sink this store's credentials (``storage.<key>``;
        none on local disk). Spark's Python workers do not see the test's environment."""
        return self.server.spark_options() if self.server is not None else {}

    def exists(self, uri: str) -> bool:
        if not self.is_s3:
            return os.path.exists(uri)
        assert self.server is not None
        bucket, _, key = uri[len("s3://") :].partition("/")
        with contextlib.suppress(Exception):
            self.server.client().head_object(Bucket=bucket, Key=key)
            return True
        return bool(self.tree(uri))
