"""Search inside and across partitions: index definitions, per-leaf builds, exact merges.

An engine beside ``spark``: it uses ``operations`` (pruning, staging, the one
publish step) and the catalog, and ``PartitionedNamespace`` exposes it
through thin methods (``create_index``, ``list_indexes``, ``drop_index``,
``optimize_indexes``, ``search``). See docs/SEARCH.md.
"""

from lance_partitioned.search.api import search
from lance_partitioned.search.build import (
    IndexInfo,
    IndexReport,
    create_index,
    drop_index,
    list_indexes,
    optimize_indexes,
)
from lance_partitioned.search.definitions import (
    INDEX_TYPES,
    INDEXES_KEY,
    IndexDefinition,
    SearchError,
    load_definitions,
)

__all__ = [
    "INDEXES_KEY",
    "INDEX_TYPES",
    "IndexDefinition",
    "IndexInfo",
    "IndexReport",
    "SearchError",
    "create_index",
    "drop_index",
    "list_indexes",
    "load_definitions",
    "optimize_indexes",
    "search",
]
