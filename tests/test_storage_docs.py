"""docs/STORAGE.md's Python example (marked ``<!-- needs: s3 -->``) runs against the
moto S3 server the tests start, with the server's endpoint, credentials and a fresh
bucket in place of the placeholders the document shows (the only change made to its
text)."""

from __future__ import annotations

from dataclasses import replace

from docs_blocks import DOCS, blocks, run_blocks


def test_the_s3_example_runs(s3_server):
    (block,) = [b for b in blocks(DOCS / "STORAGE.md") if "s3" in b.needs]
    code = block.code
    options = s3_server.options()
    placeholders = {
        '"my-key-id"': repr(options["aws_access_key_id"]),
        '"my-secret"': repr(options["aws_secret_access_key"]),
        '"http://127.0.0.1:9000"': repr(options["aws_endpoint"]),
        '"us-east-1"': repr(options["aws_region"]),
        "s3://bucket/": f"s3://{s3_server.new_bucket()}/",
    }
    for shown, real in placeholders.items():
        assert shown in code, shown
        code = code.replace(shown, real)
    run_blocks([replace(block, code=code)])
