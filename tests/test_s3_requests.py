"""What a commit sends to S3, request by request (counted by the proxy of ``demo/s3_server.py``).

Object stores are latency-bound, so requests are the cost that matters: a commit
must touch each leaf a fixed, small number of times. The counts asserted are
what Lance itself needs (open the published version once, one listing inside its
commit) plus our pre-publish check (one HEAD for the staged manifest, one per
added file); anything above that is a redundant re-open or listing of ours.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from urllib.parse import parse_qs, unquote, urlsplit

import pyarrow as pa
import pytest
from s3_support import Proxy

import lance_partitioned as lp

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int32())])


def _table(keys: list[int], start: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + len(keys)), pa.int64()),
            "k": pa.array(keys, pa.int32()),
        },
        schema=SCHEMA,
    )


def _leaf_requests(proxy: Proxy, bucket: str) -> dict[str, Counter[str]]:
    """Requests per leaf directory (``<hex>_<id>$dataset``): kind, and LIST by prefix tail."""
    out: dict[str, Counter[str]] = defaultdict(Counter)
    for kind, _method, target in proxy.log:
        parts = urlsplit(target)
        path = unquote(parts.path)
        if kind == "LIST":
            path = "/" + bucket + "/" + unquote(parse_qs(parts.query).get("prefix", [""])[0])
        key = path[len(f"/{bucket}/") :]
        segments = key.split("/")
        leaf = next((s for s in segments if s.endswith("$dataset")), None)
        if leaf is None:
            continue
        rest = "/".join(segments[segments.index(leaf) + 1 :])
        out[leaf][kind] += 1
        if rest.startswith("_versions/"):
            out[leaf][f"{kind} _versions"] += 1
    return out


@pytest.mark.parametrize("mode", ["append", "dynamic"])
def test_a_commit_opens_and_lists_each_touched_leaf_once(s3_server, mode):
    """Each touched leaf: its published version opened once (HEAD + GET of its manifest,
    shared by the file writer and staging), its ``_versions/`` listed once (inside
    Lance's commit), and the staged version checked with one HEAD before publishing."""
    bucket = s3_server.new_bucket()
    root = f"s3://{bucket}/ns"
    ns = lp.create(root, SCHEMA, "k", storage_options=s3_server.options())
    ns.append(_table([0, 1, 2, 3], 0))
    proxy = Proxy(s3_server)
    try:
        via = s3_server.options(aws_endpoint=proxy.endpoint, lp_trust_conditional_put="true")
        ns = lp.open(root, storage_options=via)
        new = _table([1, 2, 2], 100)
        proxy.reset()
        if mode == "append":
            ns.append(new)
        else:
            ns.overwrite(new, dynamic=True)
        per_leaf = _leaf_requests(proxy, bucket)
    finally:
        proxy.stop()
    assert len(per_leaf) == 2, per_leaf  # only the two touched leaves were visited
    for leaf, c in per_leaf.items():
        assert c["LIST"] == c["LIST _versions"] <= 1, (leaf, c)  # Lance's commit (appends)
        assert c["GET _versions"] == 1, (leaf, c)  # the published manifest, read once
        assert c["HEAD _versions"] == 2, (leaf, c)  # open (Lance) + the pre-publish check
        assert c["PUT"] == 3, (leaf, c)  # data file, transaction file, manifest
    got = lp.open(root, storage_options=s3_server.options()).to_arrow().sort_by("id")
    if mode == "append":
        assert got["id"].to_pylist() == [0, 1, 2, 3, 100, 101, 102]
    else:
        assert got["id"].to_pylist() == [0, 3, 100, 101, 102]


def test_open_and_plan_read_only_the_manifest(s3_server):
    """Planning never opens a leaf: every request of ``lp.open`` + ``plan`` (pruned and
    whole) is for ``__manifest``, whatever the number of partitions."""
    bucket = s3_server.new_bucket()
    root = f"s3://{bucket}/ns"
    lp.create(root, SCHEMA, "k", storage_options=s3_server.options()).append(
        _table(list(range(40)), 0)
    )
    proxy = Proxy(s3_server)
    try:
        via = s3_server.options(aws_endpoint=proxy.endpoint, lp_trust_conditional_put="true")
        proxy.reset()
        ns = lp.open(root, storage_options=via)
        one, every = ns.plan("k = 7"), ns.plan()
        assert ns.count() == 40  # row counts kept in __manifest: no leaf opened either
        log = list(proxy.log)
    finally:
        proxy.stop()
    assert len(one) == 1 and len(every) == 40
    assert log, "the proxy saw no request"
    touched = [
        (kind, target)
        for kind, _method, target in log
        if "__manifest" not in unquote(target) and "_lp_leases" not in unquote(target)
    ]
    assert touched == [], touched
