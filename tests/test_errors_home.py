"""Every exception the library defines lives in ``errors.py`` and is a ``PartitionedNamespaceError``.

So ``except lp.PartitionedNamespaceError`` catches every error the library raises on
purpose, and a reader finds them all in one file. The walk imports every module of the
package (the Spark ones too when PySpark is installed) and looks at the classes each
module defines itself.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil

import pytest

import lance_partitioned
import lance_partitioned as lp
from lance_partitioned import errors


def _modules() -> list[str]:
    names = [
        m.name for m in pkgutil.walk_packages(lance_partitioned.__path__, "lance_partitioned.")
    ]
    if importlib.util.find_spec("pyspark") is None:  # optional dependency
        names = [n for n in names if not n.startswith("lance_partitioned.spark")]
    return names


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """``module.Class`` → class, for every exception or warning class a module defines."""
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found[f"{name}.{attr}"] = obj
    return found


def test_every_exception_is_defined_in_errors_and_is_ours():
    found = _defined_exceptions()
    assert len(found) >= 20  # the walk reached errors.py
    elsewhere = sorted(n for n, c in found.items() if c.__module__ != errors.__name__)
    assert elsewhere == [], f"exception classes defined outside errors.py: {elsewhere}"
    not_ours = sorted(
        n
        for n, c in found.items()
        if not issubclass(c, Warning) and not issubclass(c, lp.PartitionedNamespaceError)
    )
    assert not_ours == [], f"not a PartitionedNamespaceError: {not_ours}"


@pytest.mark.parametrize(
    "name, builtin",
    [
        ("FilterParseError", ValueError),
        ("AmbiguousTimeError", ValueError),
        ("TypeConversionError", ValueError),
        ("SearchError", ValueError),
        ("FieldIdLayoutError", ValueError),
        ("UnsupportedTypeError", ValueError),
        ("SPJNotPossibleError", RuntimeError),
        ("LeaseLostError", lp.CommitConflictError),
        ("StagedFilesMissingError", lp.CommitConflictError),
    ],
)
def test_moved_errors_keep_their_kind(name, builtin):
    """Code that caught them by their builtin kind (or as a conflict) still does."""
    cls = getattr(errors, name)
    assert issubclass(cls, lp.PartitionedNamespaceError) and issubclass(cls, builtin)


def test_old_import_locations_still_work():
    from lance_partitioned.format.filters.tokens import FilterParseError
    from lance_partitioned.format.type_json import TypeConversionError
    from lance_partitioned.format.zones import AmbiguousTimeError
    from lance_partitioned.operations.leaf.field_ids import FieldIdLayoutError
    from lance_partitioned.operations.txn.leases import LeaseLostError
    from lance_partitioned.operations.txn.staged_check import StagedFilesMissingError
    from lance_partitioned.search.definitions import SearchError

    assert FilterParseError is errors.FilterParseError
    assert TypeConversionError is errors.TypeConversionError
    assert AmbiguousTimeError is errors.AmbiguousTimeError
    assert FieldIdLayoutError is errors.FieldIdLayoutError
    assert LeaseLostError is errors.LeaseLostError is lp.LeaseLostError
    assert StagedFilesMissingError is errors.StagedFilesMissingError
    assert SearchError is errors.SearchError is lp.SearchError


def test_public_errors_are_exported():
    public = {n for n in lp.__all__ if isinstance(getattr(lp, n), type)}
    for name in (
        "SearchError",
        "TypeConversionError",
        "UnsupportedTypeError",
        "SPJNotPossibleError",
    ):
        assert name in public, name


def test_errors_that_were_outside_the_base_are_caught_by_it():
    """Raised by the code itself: ``except lp.PartitionedNamespaceError`` catches them."""
    import datetime as dt

    from lance_partitioned.format import zones
    from lance_partitioned.format.filters.parse import parse_filter

    with pytest.raises(lp.PartitionedNamespaceError, match="position"):
        parse_filter("k = ")
    # 2025-03-09 02:30 does not exist in New York: the clocks jump from 2:00 to 3:00
    wall = zones.to_us(dt.datetime(2025, 3, 9, 2, 30))
    with pytest.raises(lp.PartitionedNamespaceError, match="never"):
        zones.localize("America/New_York", wall)
