"""Structure of the package: layers import downward only, and no modules import each other.

Imports are read from the source (``ast``), including imports inside functions,
which is where a cycle hides (the import then runs late and "works"). The layer
checks leave out imports under ``if TYPE_CHECKING:`` (they never run); the cycle
check counts them too, since a type named back is the same tangle for a reader.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lance_partitioned
import lance_partitioned as lp

PACKAGE = Path(lance_partitioned.__file__).parent


def _imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that ``path`` imports anywhere but under TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith(package + ".")}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module → imported modules), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                return path[path.index(d) :] + [d]
            if d not in state and (found := visit(d)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_catalog_modules_import_without_a_cycle():
    package = "lance_partitioned.catalog"
    files = {
        f"{package}.{p.stem}": p for p in (PACKAGE / "catalog").glob("*.py") if p.stem != "__init__"
    }
    graph = {m: _imports(p, package) & (set(files) - {m}) for m, p in files.items()}
    assert len(graph) >= 6  # the walk found the catalog
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_graph() -> dict[str, set[str]]:
    """Every module of the package -> the package's modules it imports, anywhere in it
    (in functions, under TYPE_CHECKING); ``from pkg import name`` imports the module
    ``pkg.name`` when there is one, else ``pkg``."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for m, p in files.items():
        graph[m] = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                subs = {f"{node.module}.{a.name}" for a in node.names}
                graph[m] |= (subs & set(files)) or {node.module}
            elif isinstance(node, ast.Import):
                graph[m] |= {a.name for a in node.names}
        graph[m] = (graph[m] & set(files)) - {m}
    return graph


def _cyclic_groups(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import each other, directly or around a loop."""
    reach = {m: set() for m in graph}
    for m in graph:
        todo = list(graph[m])
        while todo:
            d = todo.pop()
            if d not in reach[m]:
                reach[m].add(d)
                todo.extend(graph.get(d, ()))
    groups: list[set[str]] = []
    for m in sorted(graph):
        group = {m} | {d for d in reach[m] if m in reach[d]}
        if len(group) > 1 and group not in groups:
            groups.append(group)
    return groups


# Import cycles that remain, each with why it needs more than a move to break.
KNOWN_CYCLES: dict[frozenset[str], str] = {}  # none left


def test_no_modules_import_each_other():
    """No module imports one that imports it back (directly or around a loop), at
    module level, in a function or under TYPE_CHECKING; except the listed ones."""
    graph = _package_graph()
    assert {"lance_partitioned.operations.txn.driver", "lance_partitioned.seed003"} <= set(graph)
    found = {
        frozenset(m.removeprefix("lance_partitioned.") for m in g) for g in _cyclic_groups(graph)
    }
    assert found - set(KNOWN_CYCLES) == set(), f"import cycles: {found - set(KNOWN_CYCLES)}"
    assert set(KNOWN_CYCLES) - found == set(), "no longer cycles: remove from KNOWN_CYCLES"


def test_cyclic_groups_finds_loops_and_pairs():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert _cyclic_groups(graph) == [{"a", "b", "c"}, {"d", "e"}]
    assert _cyclic_groups({"a": {"b"}, "b": set()}) == []


# What each layer may not import (imports flow format -> catalog -> operations ->
# namespace, facade, seed003 -> engines (search, spark) -> cli).
_ABOVE = {
    "catalog": {"operations", "namespace", "facade", "seed003", "search", "spark", "cli"},
    "operations": {"namespace", "facade", "seed003", "search", "spark", "cli"},
}
# Inside operations: each concern imports only the ones listed (and itself, progress).
_OPERATIONS_USES = {
    "leaf": {"write"},  # leaf_schema checks casts with write/input.check_lossless
    "read": {"leaf"},
    "txn": {"leaf"},
    "write": {"leaf", "read", "txn"},
    "evolve": {"leaf", "read", "txn", "write"},  # rewrite_partitions moves rows by a write job
    "maintain": {"leaf", "txn", "evolve"},
    "change": {"leaf", "read", "txn", "write"},  # row-level changes write through the write job
    "join": {"read"},
}


def test_layers_import_nothing_above_them():
    for layer, above in _ABOVE.items():
        files = list((PACKAGE / layer).rglob("*.py"))
        assert len(files) >= 10, layer
        for path in files:
            bad = {m for m in _imports(path, "lance_partitioned") if m.split(".")[1] in above}
            assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_operations_concerns_import_in_one_direction():
    concerns = {p.name for p in (PACKAGE / "operations").iterdir() if p.is_dir()} - {"__pycache__"}
    assert concerns == set(_OPERATIONS_USES)
    for concern, uses in _OPERATIONS_USES.items():
        for path in (PACKAGE / "operations" / concern).rglob("*.py"):
            for m in _imports(path, "lance_partitioned.operations"):
                other = m.split(".")[2]
                assert other in uses | {concern, "progress"}, (
                    f"{path.relative_to(PACKAGE)} imports {m}"
                )


def _sources_containing(text: str) -> list[str]:
    return sorted(
        str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if text in p.read_text()
    )


# Local file-system calls that are not about a namespace's files: the test pause hook's
# own directory, Spark's scan log and hook files, the join's local spill directory, the
# package's own source location, and the JDK and build cache of the Spark extension.
_LOCAL_ONLY = {
    "operations/txn/failpoints.py",
    "format/time_ranges.py",
    "operations/join/execution.py",
    "spark/datasource.py",
    "spark/refresh.py",
    "spark/session.py",
    "spark/extension.py",
    "spark/__init__.py",
}


def test_one_storage_layer_and_one_home_for_base36_names():
    from lance_partitioned.catalog.layout import derived_namespace_name

    # every path operation on a namespace goes through catalog/storage.py: no scheme test
    # and no file-system call anywhere else
    assert _sources_containing('"://" in') == ["catalog/storage.py"]
    for call in ("os.remove(", "os.listdir(", "os.walk(", "os.utime(", "os.rename(", "rmtree("):
        assert set(_sources_containing(call)) - _LOCAL_ONLY <= {"catalog/storage.py"}, call
    for text in ("os.path.", "shutil", "pathlib"):
        assert set(_sources_containing(text)) - _LOCAL_ONLY <= {"catalog/storage.py"}, text

    name = derived_namespace_name(b"secret", "label")
    assert len(name) == 16 and set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789")
    assert _sources_containing("abcdefghijklmnopqrstuvwxyz0123456789") == ["catalog/layout.py"]


def test_one_home_for_the_spec_version_namespace_name():
    from lance_partitioned.catalog import layout
    from lance_partitioned.catalog.manifest_query import partitions_matching, spec_members

    assert layout.spec_namespace(7) == "v7"
    assert layout.spec_id_of_namespace("v12") == 12
    for other in ("v", "vx", "x1", "V1", "v1$abc", "dataset"):
        assert layout.spec_id_of_namespace(other) is None, other
    assert layout.spec_id_of("v3$k7m2n9p4q8r5s3t6$dataset") == 3
    assert layout.spec_members_like(3) == "v3$%"
    assert spec_members(3) == "left(object_id, 3) = 'v3$'"
    assert partitions_matching({1: None, 2: None}) is None
    # object ids are parsed and matched through layout; the __manifest query is composed once
    assert _sources_containing("$%") == ["catalog/layout.py"]
    assert _sources_containing("left(object_id") == ["catalog/manifest_query.py"]
    assert _sources_containing('startswith("v")') == []


def test_input_type_aliases_are_real_unions():
    import typing

    import pyarrow as pa
    import pyarrow.compute as pc

    from lance_partitioned.format.expressions import Expr
    from lance_partitioned.namespace import SchemaLike, SpecLike
    from lance_partitioned.operations.read.scan_filter import FilterLike
    from lance_partitioned.operations.write.input import DataLike

    def members(alias) -> set:
        args = typing.get_args(alias)
        assert args and typing.Any not in args, alias
        return {a.__forward_arg__ if isinstance(a, typing.ForwardRef) else a for a in args}

    assert {pa.Table, pa.RecordBatch, pa.RecordBatchReader, "pandas.DataFrame"} <= members(DataLike)
    assert {str, pc.Expression, "datafusion.Expr", Expr, type(None)} == members(FilterLike)
    assert {pa.Schema, lp.Schema, str} <= members(SchemaLike)
    assert {str, lp.PartitionSpec} <= members(SpecLike)


def test_the_format_layer_imports_nothing_above_it():
    """``format`` is pure: pruning, binding and the filter AST import no catalog,
    operations or engine module (imports flow format -> catalog -> operations -> ...)."""
    above = {"catalog", "operations", "namespace", "spark", "search", "cli"}
    files = list((PACKAGE / "format").rglob("*.py"))
    assert {"pruning.py", "time_ranges.py", "bind.py", "visitor.py"} <= {p.name for p in files}
    for path in files:
        bad = {m for m in _imports(path, "lance_partitioned") if m.split(".")[1] in above}
        assert not bad, f"{path.relative_to(PACKAGE)} imports {sorted(bad)}"


def test_and_or_not_are_dispatched_only_by_the_filter_visitor():
    """Every walk over the filter AST is a ``format.filters.visitor`` visitor: no module
    checks ``isinstance(…, And/Or/Not)`` to recurse on its own."""
    import re

    pattern = re.compile(r"isinstance\([^)]*(?<![.\w])(And|Or|Not)\b")
    files = [*PACKAGE.rglob("*.py"), PACKAGE.parent / "tests" / "ast_to_pyarrow.py"]
    found = sorted(
        str(p.relative_to(PACKAGE.parent)) for p in files if pattern.search(p.read_text())
    )
    assert found == []


def test_every_commit_is_made_by_the_manifest_or_by_leaf_staging():
    """Lance's calls that commit a dataset version appear in two modules only:
    ``catalog/manifest.py`` for ``__manifest`` (rows, metadata, repair, create) and
    ``operations/txn/staging.py`` for leaves. So the compare-and-swap rules and the
    conflict handling of each are written once."""
    homes = {"catalog/manifest.py", "operations/txn/staging.py"}
    for call in ("LanceDataset.commit(", "update_metadata(", "deep_clone("):
        found = set(_sources_containing(call))
        assert found <= homes, f"{call} outside {sorted(homes)}: {sorted(found - homes)}"
    assert _sources_containing("LanceDataset.commit(") == sorted(homes)
    assert _sources_containing("update_metadata(") == ["catalog/manifest.py"]


def test_one_conflict_test_and_one_retry_policy():
    """A commit conflict is told by ``catalog/retry.py::is_commit_conflict`` (by Lance's
    error type, never by looking for the word in a message), and every retry loop
    follows ``catalog/retry.py::COMMIT_RETRY``: no module counts tries or sleeps on its own."""
    import re

    text_tests = re.compile(r"""["']conflict["']\s+in\b""")
    found = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if text_tests.search(p.read_text())
    )
    assert found == [], f"conflicts told by message text in {found}"
    assert _sources_containing("def is_commit_conflict(") == ["catalog/retry.py"]
    for loop in ("range(attempts", "range(max_attempts", "max_rebase", "_ATTEMPTS", "random."):
        assert set(_sources_containing(loop)) <= {"catalog/retry.py"}, loop
    assert "catalog/retry.py" in _sources_containing("COMMIT_RETRY = RetryPolicy(")
    users = set(_sources_containing("COMMIT_RETRY.tries()"))
    # the transaction driver retries every __manifest commit of a transaction over
    # leaves and re-plans (driver.replanned) delete and restage under it too
    assert {"operations/txn/driver.py", "operations/txn/staging.py", "catalog/repair.py"} <= users
