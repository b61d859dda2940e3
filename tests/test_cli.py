"""The ``lance-partitioned`` command (issue 14 item 1), checking output and exit codes.

Most tests call ``main`` in this process, with stdout and stderr captured: the
same function the console script and ``python -m lance_partitioned`` run, without
paying about two seconds of interpreter start and imports per command. The tests
of usage errors and of object storage (where the child's environment must hold no
AWS variables, and a secret must not reach even the raw file descriptors) run it
as users do, in a subprocess.

Expected values come from the input table with pyarrow.compute, from plain
pylance on ``__manifest``, or from the files on disk; never from our code.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import tree_digest

import lance_partitioned as lp
from lance_partitioned.cli.main import main

REPO = Path(__file__).resolve().parents[1]
SCHEMA = pa.schema([("id", pa.int32()), ("country", pa.string()), ("amount", pa.float64())])
COUNTRIES = ["FR", "US", "DE", "US", "FR", "US", "JP", "US"]


def run_process(*args: str, ok: int | None = 0) -> subprocess.CompletedProcess:
    """Run the command in a child process, as a user's shell does."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    out = subprocess.run(
        [sys.executable, "-m", "lance_partitioned", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if ok is not None:
        assert out.returncode == ok, (args, out.returncode, out.stdout, out.stderr)
    return out


def run(*args: str, ok: int | None = 0) -> subprocess.CompletedProcess:
    """Run the command's ``main`` in this process; the result has the exit code and
    the captured output, like ``run_process``'s."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(list(args))
            code = 0  # main always exits; reaching here would be a bug in main
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = subprocess.CompletedProcess(list(args), code, stdout.getvalue(), stderr.getvalue())
    if ok is not None:
        assert out.returncode == ok, (args, out.returncode, out.stdout, out.stderr)
    return out


def run_json(*args: str, runner=run) -> object:
    return json.loads(runner(*args, "--json").stdout)


@pytest.fixture
def data() -> pa.Table:
    n = len(COUNTRIES)
    return pa.table(
        {"id": list(range(n)), "country": COUNTRIES, "amount": [i * 1.5 for i in range(n)]},
        SCHEMA,
    )


@pytest.fixture
def root(tmp_path, data) -> str:
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "country")
    ns.append(data)
    return ns.root


def manifest_versions(root: str) -> list[int]:
    return [v["version"] for v in lance.dataset(os.path.join(root, "__manifest")).versions()]


def test_console_script_is_declared_and_resolves_to_main():
    tomllib = pytest.importorskip("tomllib")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, attr = scripts["lance-partitioned"].partition(":")
    import importlib

    target = getattr(importlib.import_module(module), attr)
    assert callable(target)
    # python -m runs the same function
    main_src = (REPO / "lance_partitioned" / "__main__.py").read_text()
    assert f"from {module} import {attr}" in main_src


def test_help_and_usage_errors_exit_2(root):
    out = run("--help")
    for command in ["describe", "partitions", "plan", "explain", "history", "versions", "tags"]:
        assert command in out.stdout
    unknown = run_process("no-such-command", ok=2).stderr  # end to end, once
    assert unknown.startswith("error: No such command") and unknown.count("\n") == 1
    bad = run("count", root, "--storage-option", "novalue", ok=2)
    assert "key=value" in bad.stderr
    assert "duration" in run("cleanup", root, "--older-than", "soon", ok=2).stderr
    assert "unknown type" in run("add-column", root, "x", "notatype", ok=2).stderr


def test_describe_text_and_json(root, data):
    out = run("describe", root).stdout
    assert out.startswith(f"Partitioned namespace {root}")
    assert f"{data.num_rows} rows in all" in out
    info = run_json("describe", root)
    assert info["rows"] == data.num_rows
    counts = pc.value_counts(data["country"]).to_pylist()
    expected = sorted((c["values"], c["counts"]) for c in counts)
    got = [(p["values"]["country"], p["rows"]) for p in info["partitions"]]
    assert got == expected  # sorted by value
    assert info["version"] == manifest_versions(root)[-1]
    assert info["files"] == len(expected)


def test_partitions_plan_explain(root, data):
    parts = run_json("partitions", root)
    assert sorted(p["values"]["country"] for p in parts) == sorted(set(COUNTRIES))
    kept = run_json("partitions", root, "--filter", "country IN ('US', 'JP')")
    assert sorted(p["values"]["country"] for p in kept) == ["JP", "US"]

    plan = run_json("plan", root, "country = 'FR' AND amount > 1")
    assert [t["values"]["country"] for t in plan] == ["FR"]
    assert plan[0]["filter"] is not None and "amount" in plan[0]["filter"]
    explain = run_json("explain", root, "country = 'FR'")
    assert (explain["partitions"], explain["partitions_total"]) == (1, len(set(COUNTRIES)))
    assert "partitions: 1 of" in run("explain", root, "country = 'FR'").stdout


def test_count_and_head(root, data):
    us = pc.equal(data["country"], "US")
    assert run_json("count", root) == {"rows": data.num_rows}
    assert run("count", root, "--filter", "country = 'US'").stdout.strip() == str(
        pc.sum(us).as_py()
    )
    rows = run_json("head", root, "--filter", "country = 'US'", "--columns", "id,amount", "-n", "3")
    assert len(rows) == 3 and all(set(r) == {"id", "amount"} for r in rows)
    us_ids = set(data.filter(us)["id"].to_pylist())
    assert {r["id"] for r in rows} <= us_ids
    text = run("head", root, "--columns", "country", "-n", "2").stdout
    assert "country" in text
    assert "unknown column 'nope'" in run("head", root, "--columns", "nope", ok=1).stderr


def test_tags_history_and_version_selection(root, data):
    assert run_json("tag", root, "before") == {
        "tag": "before",
        "version": manifest_versions(root)[-1],
    }
    lp.open(root).append(data)  # a second commit
    assert run_json("tags", root) == {"before": manifest_versions(root)[-2]}
    hist = run_json("history", root)
    # every version on disk, newest first: create is one commit
    assert [h["version"] for h in hist] == manifest_versions(root)[::-1]
    assert [h["operation"] for h in hist] == ["append", "append", "create"]
    assert [h["tags"] for h in hist if h["tags"]] == [["before"]]
    assert run_json("versions", root) == hist
    assert run_json("count", root) == {"rows": 2 * data.num_rows}
    assert run_json("count", root, "--version", "before") == {"rows": data.num_rows}
    first = manifest_versions(root)[-3]  # the empty namespace, before the first append
    assert run_json("count", root, "--version", str(first)) == {"rows": 0}
    assert "tagged version" in run("tag", root, "old", "--version", str(first)).stdout
    assert run_json("tags", root)["old"] == first
    run("tag", root, "old", "--delete")
    assert "old" not in run_json("tags", root)
    err = run("count", root, "--version", "no-such-tag", ok=1).stderr
    assert err.startswith("error: ") and "no-such-tag" in err


def test_evolution_commands(root):
    run("evolve", root, "bucket(4, id)")
    ns = lp.open(root)
    assert max(ns.specs) == 2
    run("add-column", root, "note", "string")
    run("add-column", root, "price", "decimal(10,2)")
    run("rename-column", root, "note", "comment")
    run("widen-column", root, "id", "int64")
    # partitions written before the widening lag it until `align` widens them
    assert run("validate", root, ok=1).stdout.count("lags the namespace") == len(
        lp.open(root).plan()
    )
    aligned = run_json("align", root)
    assert len(aligned["leaves_aligned"]) == len(lp.open(root).plan())
    assert run_json("validate", root) == {"valid": True, "problems": []}
    out = run_json("drop-column", root, "price")
    schema = lp.open(root).schema.arrow
    assert schema.names == ["id", "country", "amount", "comment"]
    assert schema.field("id").type == pa.int64()
    assert out["columns"] == {
        "id": "int64",
        "country": "string",
        "amount": "double",
        "comment": "string",
    }


def test_maintenance_commands(root, data):
    lp.open(root).append(data)  # small files to merge
    report = run_json("compact", root)
    assert report["leaves_compacted"] == len(set(COUNTRIES))
    assert run_json("cleanup", root, "--older-than", "0")["manifest_versions_removed"] > 0
    assert "vacuum: done" in run("vacuum", root, "--older-than", "0s").stdout
    assert run_json("validate", root) == {"valid": True, "problems": []}
    assert "valid" in run("validate", root).stdout
    assert run_json("repair", root) == {"repaired": []}
    assert run_json("count", root) == {"rows": 2 * data.num_rows}


def test_validate_exits_1_on_a_problem(root):
    # a leaf whose files are gone (by hand): validate reports it and exits 1
    ns = lp.open(root)
    leaf = ns.plan("country = 'JP'")[0]
    import shutil

    shutil.rmtree(leaf.uri)
    out = run("validate", root, "--json", ok=1)
    result = json.loads(out.stdout)
    assert result["valid"] is False and any(leaf.object_id in p for p in result["problems"])


def test_user_errors_one_line_exit_1_and_change_nothing(tmp_path, root):
    missing = run("describe", str(tmp_path / "nowhere"), ok=1)
    assert missing.stderr.startswith("error: ") and missing.stderr.count("\n") == 1
    assert "Traceback" not in missing.stderr and missing.stdout == ""

    before = tree_digest(root)
    for args in [
        ("evolve", root, "year(nope)"),  # unknown column
        ("drop-column", root, "country"),  # the spec partitions by it
        ("rename-column", root, "nope", "other"),
        ("count", root, "--filter", "nope = 1"),
        ("evolve", root, "bucket(4, id)", "--version", "2"),  # pinned handles do not write
        ("cleanup", root, "--older-than", "-1d"),
    ]:
        out = run(*args, ok=None)
        assert out.returncode in (1, 2), (args, out.stderr)
        assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, args
    assert tree_digest(root) == before

    debug = run("evolve", root, "year(nope)", "--debug", ok=1)
    assert "Traceback" in debug.stderr and debug.stderr.rstrip().splitlines()[-1].startswith(
        "error: "
    )
    assert tree_digest(root) == before


def test_overflows_duplicates_and_parse_errors_print_one_line(root):
    # issue 28 D11: raw OverflowErrors, a Rust path, and a 3-line filter error
    before = tree_digest(root)
    for args, code, words in [
        (("head", root, "-n", str(10**20)), 2, "'-n' / '--rows'"),
        (("cleanup", root, "--older-than", "99999999999d"), 2, "too long"),
        (("head", root, "--columns", "id,id"), 1, "names column 'id' more than once"),
        (("count", root, "--filter", "id = = 3"), 1, "at position 5"),
        (("count", root, "--filter", "CAST(country AS int) = 3"), 1, "cast"),
    ]:
        out = run(*args, ok=code)
        assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
        assert words.lower() in out.stderr.lower(), (args, out.stderr)
        assert (
            "/rustc/" not in out.stderr
            and ".rs:" not in out.stderr
            and "Traceback" not in out.stderr
        )
    assert tree_digest(root) == before


def test_a_lance_error_prints_one_clean_line_and_debug_shows_its_cause(root):
    leaf = lp.open(root).plan("country = 'US'")[0]
    data_file = next((Path(leaf.uri) / "data").glob("*.lance"))
    with open(data_file, "r+b") as f:
        f.truncate(100)  # a damaged data file: Lance's error names a /rustc/ path
    out = run("head", root, "-n", "100", ok=1)
    assert out.stderr.startswith("error: reading partition ") and out.stderr.count("\n") == 1
    assert leaf.object_id in out.stderr
    assert "/rustc/" not in out.stderr and ".rs:" not in out.stderr
    debug = run("head", root, "-n", "100", "--debug", ok=1)
    assert "direct cause" in debug.stderr and "/rustc/" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1] == out.stderr.rstrip()


def test_unknown_storage_option_is_a_one_line_warning(root, data):
    out = run("count", root, "-s", "bogus_cli_option=1", "--json")
    assert json.loads(out.stdout) == {"rows": data.num_rows}
    assert out.stderr.startswith("warning: ") and out.stderr.count("\n") == 1
    assert "bogus_cli_option" in out.stderr


def test_storage_options_are_passed_through(root, data):
    # a repeatable option reaches Lance: an option Lance knows for local files is accepted
    out = run_json("count", root, "-s", "allow_http=true", "--storage-option", "timeout=30s")
    assert out == {"rows": data.num_rows}


def test_nothing_below_the_cli_imports_it():
    """The cli is the top layer: no other module of the package imports it."""
    package = REPO / "lance_partitioned"
    importers = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "lance_partitioned.cli" in p.read_text()
        and p.parent.name != "cli"
        and p.name != "__main__.py"
    )
    assert importers == []


def test_commands_on_the_s3_server_with_storage_options_only(s3_server, data, monkeypatch):
    """The CLI on object storage: credentials only through ``--storage-option`` (no AWS
    environment in the subprocess), the secret never printed, and a refused command
    leaves the bucket as it was (listed with boto3, not with our code)."""
    from s3_support import s3_tree

    opts = s3_server.options()
    root = f"s3://{s3_server.new_bucket()}/ns"
    ns = lp.create(root, SCHEMA, "country", storage_options=opts)
    ns.append(data)
    flags = [x for k, v in opts.items() for x in ("-s", f"{k}={v}")]
    secret = opts["aws_secret_access_key"]
    for key in [k for k in os.environ if k.startswith("AWS_")]:  # only the options reach it
        monkeypatch.delenv(key)

    assert run_json("count", root, *flags, runner=run_process) == {"rows": data.num_rows}
    us = pc.sum(pc.equal(data["country"], "US")).as_py()
    assert run_json("count", root, "--filter", "country = 'US'", *flags, runner=run_process) == {
        "rows": us
    }
    for command in (["describe"], ["partitions"], ["explain", "country = 'US'"], ["validate"]):
        # in a child process too, so that Lance's own logging (file descriptor 2) is seen
        runner = run_process if command == ["describe"] else run
        out = runner(command[0], root, *command[1:], *flags)
        assert secret not in out.stdout + out.stderr, command
    run("compact", root, *flags)
    run("vacuum", root, *flags)

    before = s3_tree(s3_server.client(), root)
    bad = run("count", root, "--filter", "nope = 1", *flags, ok=1)
    assert "nope" in bad.stderr and secret not in bad.stderr
    run("drop-column", root, "country", *flags, ok=1)  # a partition source: refused
    assert s3_tree(s3_server.client(), root) == before


def test_json_output_is_strict_json_with_nan_and_infinities(tmp_path):
    """``json.dumps`` printed bare ``NaN`` and ``Infinity``, which strict parsers
    (JavaScript's ``JSON.parse``) refuse."""
    values = [float("nan"), float("inf"), float("-inf"), 1.5, None]
    schema = pa.schema([("id", pa.int64()), ("f", pa.float64())])
    ns = lp.create(str(tmp_path / "ns"), schema, "")
    ns.append(pa.table({"id": range(len(values)), "f": values}, schema))

    def refuse(constant: str):
        raise AssertionError(f"not JSON: {constant}")

    out = run("head", ns.root, "--json", "--columns", "id,f").stdout
    rows = json.loads(out, parse_constant=refuse)
    assert {r["id"]: r["f"] for r in rows} == {
        0: "NaN",
        1: "Infinity",
        2: "-Infinity",
        3: 1.5,
        4: None,
    }


def test_a_numeric_tag_name_is_refused(root):
    """``--version 2`` reads version 2, so a tag named "2" could never be read by name."""
    before = tree_digest(root)
    out = run("tag", root, "2", ok=None)
    assert out.returncode != 0 and "is a number" in out.stderr
    with pytest.raises(lp.PartitionedNamespaceError, match="is a number"):
        lp.open(root).tag(" 17")
    assert tree_digest(root) == before
    assert run_json("tag", root, "v2")["tag"] == "v2"
