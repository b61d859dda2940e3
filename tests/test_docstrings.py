"""``help()`` on every public function shows a real docstring (issue 14 item 3):
what it does, every parameter by name, and a short example.

Public means ``lance_partitioned.__all__``, the public methods of
``PartitionedNamespace``, and the hand-over methods of ``Scan`` (what
``ns.scan(...)`` returns) that pass data to other tools.
"""

from __future__ import annotations

import inspect
import re

import pytest

import lance_partitioned as lp
from lance_partitioned.operations.read.scan import Scan

SCAN_METHODS = {"to_reader", "to_duckdb", "to_polars"}


def public_callables() -> list[tuple[str, object]]:
    out = []
    for name in lp.__all__:
        obj = getattr(lp, name)
        if inspect.isfunction(obj):
            out.append((f"lp.{name}", obj))
    for cls, only in ((lp.PartitionedNamespace, None), (Scan, SCAN_METHODS)):
        # the facade's methods live in mixins (lance_partitioned/facade/): walk the MRO
        members = {}
        for klass in reversed(cls.__mro__):
            members.update(vars(klass))
        for name, member in members.items():
            if name.startswith("_") or (only is not None and name not in only):
                continue
            func = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            if inspect.isfunction(func):
                out.append((f"{cls.__name__}.{name}", func))
    return out


CALLABLES = public_callables()


def test_the_walk_finds_the_api():
    names = {n for n, _ in CALLABLES}
    assert {"lp.create", "lp.open", "PartitionedNamespace.append", "Scan.to_duckdb"} <= names
    assert len(names) >= 35


@pytest.mark.parametrize("name,func", CALLABLES, ids=[n for n, _ in CALLABLES])
def test_docstring_has_parameters_and_an_example(name, func):
    doc = inspect.getdoc(func) or ""
    assert len(doc.split()) >= 8, f"{name}: docstring too short: {doc!r}"
    assert not re.match(r"^\(?see \S+\)?\.?$", doc.strip(), re.I), f"{name}: only a reference"
    assert re.search(r"^Example", doc, re.M), f"{name}: no Example section"
    params = [
        p.name
        for p in inspect.signature(func).parameters.values()
        if p.name not in ("self", "cls") and p.kind is not inspect.Parameter.VAR_POSITIONAL
    ]
    for p in params:
        assert re.search(rf"``{p}``|\b{p}\b", doc), f"{name}: parameter {p!r} not described"


@pytest.mark.parametrize(
    "name", [n for n in lp.__all__ if inspect.isclass(getattr(lp, n))], ids=str
)
def test_public_classes_have_docstrings(name):
    doc = inspect.getdoc(getattr(lp, name)) or ""
    assert len(doc.split()) >= 5, f"{name}: {doc!r}"


def test_help_of_create_is_real():
    doc = inspect.getdoc(lp.create)
    assert "see PartitionedNamespace.create" not in doc
    for word in ("root", "schema", "spec", "storage_options", "Example"):
        assert word in doc
