"""Start-up: what ``import lance_partitioned`` and ``lance-partitioned --help`` load.

Rules, not timings (``benchmarks/startup_bench.py`` measures the times):

- ``import lance_partitioned`` loads the errors only: not Lance, not pyarrow; the rest
  of the library loads on first use of a name (``lp.open``), PEP 562;
- the library, once loaded, imports none of the optional engines (Spark, DataFusion,
  rich, lance_namespace, DuckDB, Polars, scikit-learn) nor the S3 request client;
- ``lance-partitioned --help`` imports only click and the command modules: not the
  library, not Lance, pyarrow or rich.

Each check runs in a fresh interpreter, since this test session has long imported
everything.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import lance_partitioned as lp

REPO = Path(__file__).resolve().parent.parent
ENGINES = ("pyspark", "datafusion", "rich", "lance_namespace", "duckdb", "polars", "sklearn")


def _loaded_after(code: str) -> set[str]:
    """The modules (full names) loaded by a fresh interpreter after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_import_loads_the_errors_only():
    loaded = _loaded_after("import lance_partitioned")
    assert not _tops(loaded) & {"lance", "pyarrow", "numpy", "pandas", *ENGINES}
    ours = {m for m in loaded if m.startswith("lance_partitioned")}
    assert ours == {
        "lance_partitioned",
        "lance_partitioned.errors",
        "lance_partitioned.namespace_registration",
    }


def test_the_library_loaded_imports_no_optional_engine():
    loaded = _loaded_after("import lance_partitioned as lp\nlp.open\nlp.PartitionedNamespace")
    assert "lance_partitioned.namespace" in loaded and "lance" in loaded
    assert not _tops(loaded) & set(ENGINES)
    # the S3 request client (http.client, email) loads for an s3:// store only
    assert not {"http.client", "lance_partitioned.catalog.s3_http"} & loaded


def test_cli_help_loads_neither_the_library_nor_lance():
    loaded = _loaded_after(
        "from lance_partitioned.cli.main import cli\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--help'], standalone_mode=False)"
    )
    assert "click" in loaded
    assert not _tops(loaded) & {"lance", "pyarrow", "numpy", "pandas", "rich", *ENGINES}
    ours = {m.removeprefix("lance_partitioned.") for m in loaded if m.startswith("lance_")}
    assert ours <= {
        "lance_partitioned",
        "errors",
        "namespace_registration",
        "cli",
        "cli.main",
        "cli.common",
        "cli.output",
        "cli.read_commands",
        "cli.write_commands",
        "cli.change_commands",
    }, ours


def _type_checking_names() -> set[str]:
    """The names ``lance_partitioned/__init__.py`` imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse((REPO / "lance_partitioned" / "__init__.py").read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                assert all(stmt.module == lp._LAZY[a.name] for a in stmt.names), stmt.module
                names |= {a.asname or a.name for a in stmt.names}
    return names


def test_every_public_name_resolves_and_type_checkers_see_the_same():
    assert _type_checking_names() == set(lp._LAZY)
    assert set(lp._LAZY) <= set(lp.__all__)
    for name in lp.__all__:
        assert getattr(lp, name) is not None, name
    assert set(lp.__all__) <= set(dir(lp))
    assert lp.open is __import__("lance_partitioned.namespace").namespace.open
    try:
        lp.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
