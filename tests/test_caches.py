"""One cache registry: every process-wide cache is registered, bounded, and emptied by
``lp.clear_caches()``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_partitioned
import lance_partitioned as lp
from lance_partitioned.format import caches
from lance_partitioned.format.caches import BoundedCache
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.leaf import leaf_schema

PACKAGE = Path(lance_partitioned.__file__).parent

# Module-level containers that are not caches, and why.
NOT_CACHES = {
    "lance_partitioned.format.caches._registry": "the registry itself",
    "lance_partitioned.catalog.manifest._SESSION": (
        "Lance's session for __manifest: Lance bounds its caches, and it holds the "
        "store's connections (like leaf_open.read_session)"
    ),
    "lance_partitioned.operations.txn.failpoints._paused": "failpoints already passed (tests)",
    "lance_partitioned.seed003.handle.NAMESPACE_METHODS": (
        "the PartitionedNamespace method names the seed-003 handle refuses, filled once "
        "when lance_partitioned.namespace is imported"
    ),
    "lance_partitioned.seed003.handle.NAMESPACE_PROPERTIES": (
        "those of them that are properties (refused on access), filled with them"
    ),
}
CONTAINERS = {
    "dict",
    "set",
    "list",
    "OrderedDict",
    "defaultdict",
    "deque",
    "Counter",
    "WeakKeyDictionary",
    "WeakValueDictionary",
    "WeakSet",
    "BoundedCache",
    "VersionCache",
    "register",
}


def _name(node: ast.AST) -> str:
    """``f`` of ``f``, ``m.f`` or ``f(...)`` (a decorator or a callee)."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_container(value: ast.AST | None) -> bool:
    """An empty ``{}``/``[]`` or a call making a container: a module filling it at run time."""
    if isinstance(value, ast.Dict | ast.List | ast.Set):
        return not (value.keys if isinstance(value, ast.Dict) else value.elts)
    return isinstance(value, ast.Call) and _name(value) in CONTAINERS


def module_caches(path: Path) -> list[str]:
    """Names of the module-level containers and memoized functions ``path`` defines."""
    out = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and _is_container(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [t.id for t in targets if isinstance(t, ast.Name) and t.id != "__all__"]
        elif isinstance(node, ast.FunctionDef) and any(
            _name(d) in ("cache", "lru_cache", "memoize") for d in node.decorator_list
        ):
            out.append(node.name)
    return out


def _module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def all_module_caches() -> dict[str, list[str]]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names = module_caches(path)
        if names:
            found[_module_of(path)] = names
    return found


def test_the_scan_finds_module_caches():
    found = all_module_caches()
    assert sum(map(len, found.values())) >= 15
    assert "_layouts" in found["lance_partitioned.operations.leaf.leaf_schema"]
    assert "_block" in found["lance_partitioned.format.zones"]  # a memoized function


def test_every_module_level_cache_is_registered():
    unregistered = []
    for module_name, names in all_module_caches().items():
        if module_name.startswith("lance_partitioned.spark"):
            pytest.importorskip("pyspark")
        module = importlib.import_module(module_name)
        kept = list(caches.registered().values())
        for name in names:
            full = f"{module_name}.{name}"
            if full not in NOT_CACHES and not any(getattr(module, name) is c for c in kept):
                unregistered.append(full)
    assert unregistered == [], f"caches outside format/caches.py's registry: {unregistered}"


@pytest.fixture
def ns(tmp_path):
    ns = lp.create(str(tmp_path / "ns"), pa.schema([("k", pa.int64()), ("v", pa.float32())]), "k")
    rng = np.random.default_rng(0)
    ns.append(pa.table({"k": np.arange(40) % 4, "v": rng.random(40, dtype=np.float32)}))
    return ns


def test_clear_caches_empties_every_registered_cache(ns):
    importlib.import_module("lance_partitioned.search.api")
    assert ns.scan("k = 1").to_arrow().num_rows == 10  # oracle: 40 rows, k = i % 4
    ns.append(pa.table({"k": [9], "v": pa.array([0.5], pa.float32())}))
    filled = {n for n, size in caches.sizes().items() if size}
    # the plan, the leaf layouts, the stores: what a scan and a write leave behind
    assert {"snapshot.parsed_metadata", "leaf_schema.layouts", "storage.stores"} <= filled
    lp.clear_caches()
    assert {n: s for n, s in caches.sizes().items() if s} == {}
    assert ns.scan("k = 1").to_arrow().num_rows == 10  # and everything works after


def test_leaf_layouts_stay_bounded():
    for i in range(300):
        schema = Schema.from_arrow(pa.schema([pa.field(f"c{i}", pa.int64())]))
        assert leaf_schema.namespace_layout(schema).arrow.names == [f"c{i}"]
    assert 0 < len(leaf_schema._layouts) <= 256


def test_bounded_cache_evicts_the_least_recently_used_by_count_and_by_bytes():
    cache = BoundedCache(maxsize=3)
    for k in "abc":
        cache.put(k, k.upper())
    assert cache.get("a") == "A"  # a is now the most recently used
    cache.put("d", "D")
    assert [k for k in "abcd" if k in cache] == ["a", "c", "d"]
    sized = BoundedCache(max_bytes=100)
    sized.put("x", 1, 60)
    sized.put("y", 2, 30)
    sized.put("z", 3, 30)  # 120 > 100: x goes
    assert ("x" in sized, sized.nbytes) == (False, 60)
    sized.put("huge", 4, 101)  # alone beyond the bound: not kept
    assert "huge" not in sized
    sized.resize(40)
    assert (len(sized), sized.nbytes) == (1, 30)
    with pytest.raises(ValueError, match="maxsize or max_bytes"):
        BoundedCache()


def test_no_module_reaches_into_a_snapshots_private_cache():
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "snapshot.py" and "._cache" in p.read_text().replace("self._cache", "")
    ]
    assert offenders == []


def test_registering_something_that_cannot_be_cleared_is_refused():
    with pytest.raises(TypeError, match="no clear"):
        caches.register("test.bad", object())
    assert "test.bad" not in caches.registered()
