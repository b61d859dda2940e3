"""lance-partitioned: the Lance Partitioned Namespace format (seed 000) in Python.

import lance_partitioned as lp
ns = lp.create("/data/events", schema, "year(event_date), country")
ns.append(table)
ns.scan("event_date >= '2025-03-01' AND country = 'US'").to_arrow()
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# Lance's Rust log reads LANCE_LOG once, when lance is imported, and by default prints
# its WARN lines (IVF training on few vectors, deprecations) to stderr during normal
# calls. Unless the user chose a level, errors only: set LANCE_LOG=warn (or info, debug)
# to see the rest. Set here, before any of our modules imports lance, and inherited by
# every child process (Spark's Python workers). A program that imports lance before
# lance_partitioned keeps Lance's own default. README "Logging"; tests/test_quiet.py.
os.environ.setdefault("LANCE_LOG", "error")

from lance_partitioned.errors import (
    ColumnNotFoundError,
    CommitConflictError,
    CorruptNamespaceError,
    CyclicPartitionWarning,
    DistributedTaskError,
    DuplicateKeyError,
    FilterError,
    ForeignChangeError,
    InvalidArgumentError,
    LanceError,
    LeaseLostError,
    NamespaceDamagedError,
    NamespaceExistsError,
    NotAPartitionedNamespaceError,
    PartitionedNamespaceError,
    PinnedSnapshotError,
    RestoreError,
    RetentionError,
    RowsRemovedError,
    SchemaError,
    SearchError,
    SpecError,
    SPJNotPossibleError,
    StagedFilesMissingError,
    StorageError,
    TypeConversionError,
    UnfinishedNamespaceError,
    UnknownStorageOptionWarning,
    UnsafeStoreError,
    UnsupportedFeatureError,
    UnsupportedTypeError,
    VersionNotFoundError,
)
from lance_partitioned.namespace_registration import install as _register_namespace_impl

__version__ = "0.1.0"

# Everything but the errors (cheap, and a user's ``except lp.SchemaError`` needs them)
# loads on first use (PEP 562): ``import lance_partitioned`` does not load Lance, a
# Spark worker importing one module loads only what that module needs, and
# ``lance-partitioned --help`` starts at once (docs/ARCHITECTURE.md, "Start-up"). Each
# name -> the module that holds it; the TYPE_CHECKING block below names the same for
# type checkers (tests/test_startup.py checks that they agree).
_LAZY = {
    "Schema": "lance_partitioned.format.schema",
    "PartitionField": "lance_partitioned.format.spec",
    "PartitionSpec": "lance_partitioned.format.spec",
    "parse_spec": "lance_partitioned.format.spec",
    "PartitionedNamespace": "lance_partitioned.namespace",
    "WriteResult": "lance_partitioned.namespace",
    "clear_caches": "lance_partitioned.namespace",
    "create": "lance_partitioned.namespace",
    "open": "lance_partitioned.namespace",
    "repair": "lance_partitioned.namespace",
    "MergeBuilder": "lance_partitioned.operations.change.merge",
    "MergeResult": "lance_partitioned.operations.change.merge",
    "OverwriteResult": "lance_partitioned.operations.change.predicate",
    "UpdateResult": "lance_partitioned.operations.change.predicate",
    "MaintenanceReport": "lance_partitioned.operations.maintain.maintenance",
    "RestoreResult": "lance_partitioned.operations.maintain.restore",
    "DeleteResult": "lance_partitioned.operations.write.delete",
    "Seed003Namespace": "lance_partitioned.seed003",
    "ConvertResult": "lance_partitioned.seed003.convert",
    "convert": "lance_partitioned.seed003.convert",
}

if TYPE_CHECKING:
    from lance_partitioned.format.schema import Schema
    from lance_partitioned.format.spec import PartitionField, PartitionSpec, parse_spec
    from lance_partitioned.namespace import (
        PartitionedNamespace,
        WriteResult,
        clear_caches,
        create,
        open,
        repair,
    )
    from lance_partitioned.operations.change.merge import MergeBuilder, MergeResult
    from lance_partitioned.operations.change.predicate import OverwriteResult, UpdateResult
    from lance_partitioned.operations.maintain.maintenance import MaintenanceReport
    from lance_partitioned.operations.maintain.restore import RestoreResult
    from lance_partitioned.operations.write.delete import DeleteResult
    from lance_partitioned.seed003 import Seed003Namespace
    from lance_partitioned.seed003.convert import ConvertResult, convert


def __getattr__(name: str) -> Any:
    """Load ``name`` from its module on first use, then keep it as a module attribute."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lance_partitioned' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# lance_namespace.connect("partitioned", {"root": ...}) finds our read-only LanceNamespace
# (registered when lance_namespace is imported: importing it costs about a second)
_register_namespace_impl()

__all__ = [
    "clear_caches",
    "ColumnNotFoundError",
    "CommitConflictError",
    "ConvertResult",
    "CorruptNamespaceError",
    "CyclicPartitionWarning",
    "DeleteResult",
    "DistributedTaskError",
    "DuplicateKeyError",
    "ForeignChangeError",
    "InvalidArgumentError",
    "LanceError",
    "MaintenanceReport",
    "MergeBuilder",
    "MergeResult",
    "OverwriteResult",
    "FilterError",
    "NamespaceDamagedError",
    "LeaseLostError",
    "NamespaceExistsError",
    "NotAPartitionedNamespaceError",
    "PartitionField",
    "PartitionSpec",
    "PartitionedNamespace",
    "PartitionedNamespaceError",
    "PinnedSnapshotError",
    "RestoreError",
    "RestoreResult",
    "RetentionError",
    "RowsRemovedError",
    "Schema",
    "SchemaError",
    "SearchError",
    "Seed003Namespace",
    "SpecError",
    "SPJNotPossibleError",
    "StagedFilesMissingError",
    "StorageError",
    "TypeConversionError",
    "UnfinishedNamespaceError",
    "UnknownStorageOptionWarning",
    "UnsafeStoreError",
    "UnsupportedFeatureError",
    "UnsupportedTypeError",
    "UpdateResult",
    "VersionNotFoundError",
    "WriteResult",
    "convert",
    "create",
    "open",
    "repair",
    "parse_spec",
]
