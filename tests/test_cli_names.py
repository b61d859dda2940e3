"""Names that people from other tools read right (issue 34 item 9).

- ``lance-partitioned --version`` prints the package version; the namespace version a
  command reads is ``--at-version N|TAG`` in every command, ``--version N|TAG`` after
  the command staying an alias;
- ``cleanup`` and ``vacuum`` say what each removes and what Iceberg and Delta call it,
  in their docstrings, their CLI help and the README.

Row counts are checked against the table appended (pyarrow); versions against plain
pylance on ``__manifest``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import SCHEMA, manifest_versions, run, run_json

import lance_partitioned as lp
from lance_partitioned.cli.main import cli

REPO = Path(__file__).resolve().parents[1]


def _with_version_option() -> list[str]:
    return sorted(
        name for name, c in cli.commands.items() if "version" in {p.name for p in c.params}
    )


def test_top_level_version_prints_the_package_version():
    out = run("--version").stdout
    assert out.strip() == f"lance-partitioned, version {lp.__version__}"


def test_every_command_reading_a_namespace_version_spells_it_at_version():
    names = _with_version_option()
    assert len(names) >= 20  # every command with the shared options
    for name in names:
        (param,) = [p for p in cli.commands[name].params if p.name == "version"]
        assert param.opts == ["--at-version", "--version"], name
        assert "--at-version, --version N|TAG" in run(name, "--help").stdout, name


@pytest.mark.parametrize("spelling", ["--at-version", "--version"])
def test_both_spellings_read_the_version_named(tmp_path, spelling):
    import pyarrow as pa

    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "country")
    first = pa.table({"id": [1, 2], "country": ["FR", "US"], "amount": [1.0, 2.0]}, SCHEMA)
    ns.append(first)
    ns.tag("before")
    ns.append(first)
    root = ns.root
    before = manifest_versions(root)[-2]
    assert run_json("count", root, spelling, "before") == {"rows": first.num_rows}
    assert run_json("count", root, spelling, str(before)) == {"rows": first.num_rows}
    assert run_json("count", root) == {"rows": 2 * first.num_rows}
    rows = run_json("history", root, spelling, str(before))
    assert [r["version"] for r in rows if r["read"]] == [before]


# what each removes, and its name in Iceberg and Delta
CLEANUP_WORDS = ("old versions", "expire_snapshots", "VACUUM")
VACUUM_WORDS = ("orphan files", "remove_orphan_files", "VACUUM")


def test_cleanup_and_vacuum_say_what_they_remove_and_their_peers_names():
    for words, doc, command in (
        (CLEANUP_WORDS, lp.PartitionedNamespace.cleanup.__doc__, "cleanup"),
        (VACUUM_WORDS, lp.PartitionedNamespace.vacuum.__doc__, "vacuum"),
    ):
        shown = " ".join(run(command, "--help").stdout.split())
        for word in words:
            assert word in (doc or ""), (command, word)
            assert word in shown, (command, word)
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "`cleanup` removes old versions" in readme
    assert "`vacuum` removes orphan files" in readme
    for word in ("`expire_snapshots`", "`remove_orphan_files`", "Delta's `VACUUM`"):
        assert word in readme
