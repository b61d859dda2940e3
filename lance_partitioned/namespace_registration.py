"""Registering ``"partitioned"`` with ``lance_namespace.connect``, without importing it.

``import lance_namespace`` costs about a second (the pydantic models of its REST
client), 60% of ``import lance_partitioned`` when it was imported eagerly, and
most programs, every Spark worker and every CLI command never call ``connect``.
So ``import lance_partitioned`` registers our implementation
(``namespace_interface.PartitionedLanceNamespace``) at once when
``lance_namespace`` is already imported, and otherwise the moment anything
imports it, through an import hook that acts once::

    import lance_partitioned
    import lance_namespace            # registered here
    lance_namespace.connect("partitioned", {"root": "/data/events"})
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

REGISTERED_NAME = "partitioned"
CLASS_PATH = "lance_partitioned.namespace_interface.PartitionedLanceNamespace"
_TARGET = "lance_namespace"


def _register(module: ModuleType) -> None:
    module.register_namespace_impl(REGISTERED_NAME, CLASS_PATH)


class _RegisterWhenImported(importlib.abc.MetaPathFinder):
    """Finds ``lance_namespace`` with the other finders and registers us once it has run.

    It stays in ``sys.meta_path`` after acting (removing an entry while the
    import system walks that list could skip the next finder) and does nothing
    more than compare a name from then on.
    """

    def __init__(self) -> None:
        self.done = False

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TARGET or self.done:
            return None
        self.done = True
        spec = importlib.util.find_spec(fullname)  # the other finders: this one is done
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_and_register(module: ModuleType) -> None:
            run(module)
            _register(module)

        spec.loader.exec_module = exec_and_register  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Make ``lance_namespace.connect("partitioned", ...)`` work (idempotent)."""
    module = sys.modules.get(_TARGET)
    if module is not None:
        _register(module)
    elif not any(isinstance(f, _RegisterWhenImported) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterWhenImported())
