"""docs/STORAGE.md's Python example runs against the moto S3 server the tests start,
with the server's endpoint, credentials and a fresh bucket in place of the
placeholders the document shows (the only change made to its text)."""

from __future__ import annotations

from test_changes_docs import blocks, run_blocks
from test_search_docs import ROOT


def test_the_s3_example_runs(s3_server):
    (code,) = [
        c for lang, c in blocks(ROOT / "docs/STORAGE.md", "# On object storage") if lang == "python"
    ][:1]
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
    run_blocks([("python", code)], "docs/STORAGE.md:example")
