"""The documentation site builds with ``mkdocs build --strict`` (mkdocs.yml): a missing
page, a broken link or #anchor between pages, or a docstring the API reference cannot
render fails the suite. MkDocs is a dev dependency (the ``docs`` extra): no skip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from docs_blocks import DOCS, ROOT


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config`` into ``site``, in a child process."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
        ]  # no -q: it hides the warnings --strict counts
        + ["--config-file", str(config), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_the_site_builds_strictly(tmp_path):
    out = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 0, out.stdout + out.stderr
    pages = {p.parent.name for p in (tmp_path / "site").glob("*/index.html")}
    assert {p.stem for p in DOCS.glob("*.md") if p.stem != "index"} <= pages
    api = (tmp_path / "site" / "api" / "lance_partitioned" / "index.html").read_text()
    assert 'id="lance_partitioned.namespace.PartitionedNamespace.append"' in api


def site_of(tmp_path: Path, page: str) -> Path:
    """A one-page site with mkdocs.yml's settings (validation included)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(page)
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A heading\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {tmp_path / 'docs'}\n"
        "nav: [index.md, other.md]\n"
    )
    return config


def test_a_broken_link_between_pages_fails_the_build(tmp_path):
    page = "# Home\n\n[gone](missing.md), [no such heading](other.md#nope).\n"
    out = build(site_of(tmp_path, page), tmp_path / "site")
    assert out.returncode != 0
    assert "missing.md" in out.stderr and "#nope" in out.stderr, out.stderr


def test_links_to_pages_headings_and_files_outside_docs_pass(tmp_path):
    """A root-relative link names a file of the repository outside docs/ (the
    README): MkDocs cannot check it and does not fail on it."""
    page = "# Home\n\n[a](other.md#a-heading), [b](/README.md#quick-start).\n"
    out = build(site_of(tmp_path, page), tmp_path / "site")
    assert out.returncode == 0, out.stdout + out.stderr
