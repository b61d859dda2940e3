"""lance-partitioned: the Lance Partitioned Namespace format (seed 000) in Python.

import lance_partitioned as lp
ns = lp.create("/data/events", schema, "year(event_date), country")
ns.append(table)
ns.scan("event_date >= '2025-03-01' AND country = 'US'").to_arrow()
"""

from lance_partitioned.errors import (
    ColumnNotFoundError,
    CommitConflictError,
    CorruptNamespaceError,
    CyclicPartitionWarning,
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
    RetentionError,
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
from lance_partitioned.namespace_registration import install as _register_namespace_impl
from lance_partitioned.operations.change.merge import MergeBuilder, MergeResult
from lance_partitioned.operations.change.predicate import OverwriteResult, UpdateResult
from lance_partitioned.operations.maintain.maintenance import MaintenanceReport
from lance_partitioned.operations.write.delete import DeleteResult
from lance_partitioned.seed003 import Seed003Namespace
from lance_partitioned.seed003.convert import ConvertResult, convert

__version__ = "0.1.0"

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
    "RetentionError",
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
