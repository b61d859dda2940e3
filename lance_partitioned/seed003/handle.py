"""``Seed003Namespace``: a read-only handle on a namespace in seed 003's earlier layout.

``lp.open(root)`` returns one when ``root`` is a seed-003 root (its ``__manifest``
metadata has ``lance.partitioning.enabled = "true"`` and no seed-000
``partition_spec_v<N>``). It reads like a ``PartitionedNamespace``: scan, to_arrow,
count, plan, explain, describe, versions and tags. Everything that would change the
namespace, and the reads that need seed 000's metadata (field ids, index
definitions: validate, search, list_indexes, ...), raise ``UnsupportedFeatureError``
pointing to ``lp.convert``, which rewrites it in seed 000's layout. The layout and
its mapping: ``docs/FORMAT.md`` section 11.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import pyarrow as pa

from lance_partitioned.catalog import history
from lance_partitioned.errors import UnsupportedFeatureError, lance_boundaries, positive_int
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionSpec
from lance_partitioned.operations.read.scan import ScanTask
from lance_partitioned.operations.read.scan_filter import FilterLike
from lance_partitioned.seed003 import layout as seed003
from lance_partitioned.seed003 import report
from lance_partitioned.seed003.read import Seed003Scan, Seed003Snapshot

# The public methods and properties of ``PartitionedNamespace``, which the handle
# refuses by name (a property on access). ``lance_partitioned.namespace`` fills them
# when it is imported (it imports this module, so this module does not import it back).
NAMESPACE_METHODS: set[str] = set()
NAMESPACE_PROPERTIES: set[str] = set()
# Of those, the ones that only read but need seed 000's metadata: refused with "needs
# seed 000's metadata" rather than "would change it".
NEEDS_SEED000 = frozenset(
    {
        "validate",
        "search",
        "list_indexes",
        "namespace_properties",
        "manifest",
        "specs",
        "refresh",
    }
)


def detect(root: str, storage_options: dict[str, str] | None = None) -> bool:
    """Whether ``root`` holds a namespace in seed 003's layout (reads only its metadata)."""
    return seed003.is_seed003(seed003.manifest_metadata(str(root), storage_options))


@lance_boundaries
class Seed003Namespace:
    """A seed-003 partitioned namespace, read-only (see the module doc).

    The handle is pinned at open: the seed-003 ``__manifest`` version and every
    leaf's latest version then. ``spec`` is the seed-000 spec ``lp.convert``
    writes; pruning uses the identity columns whose table names give exact
    values (``catalog.seed003.prunable_columns``), and the filter always runs
    inside each leaf, so answers are exact.
    """

    read_only = True

    def __init__(self, snapshot: Seed003Snapshot):
        self._snapshot = snapshot
        assert snapshot.layout is not None
        self.layout = snapshot.layout

    @classmethod
    def open(cls, root: str, storage_options: dict[str, str] | None = None) -> Seed003Namespace:
        """Open the seed-003 namespace at ``root``.

        Raises NotAPartitionedNamespaceError when ``root`` is not one, SpecError or
        SchemaError when its ``lance.partitioning.*`` properties are malformed.

        Example::

            old = Seed003Namespace.open("/data/legacy")
            old.count("country = 'US'")
        """
        layout = seed003.load(str(root), storage_options)
        return cls(Seed003Snapshot.of(layout, storage_options))

    @property
    def root(self) -> str:
        return self.layout.root

    @property
    def schema(self) -> Schema:
        """The namespace schema (``lance.partitioning.schema``; field ids depth-first)."""
        return self.layout.schema

    @property
    def spec(self) -> PartitionSpec:
        """The seed-000 spec this namespace maps to (what ``lp.convert`` writes)."""
        return PartitionSpec.from_json(seed003.seed000_spec_json(self.layout))

    @property
    def version(self) -> int:
        """The seed-003 ``__manifest`` version this handle reads."""
        return self.layout.manifest_version

    @property
    def snapshot(self) -> Seed003Snapshot:
        """The pinned state this handle reads (a ``Snapshot`` of seed-000-shaped rows)."""
        return self._snapshot

    def scan(
        self,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
        batch_size: int | None = None,
    ) -> Seed003Scan:
        """A lazy, pruned read (the same ``Scan`` API: ``to_arrow``, ``to_reader``,
        ``count``, ``plan``, ``explain``, ``to_duckdb``, ``to_polars``).

        Example::

            lp.open("/data/legacy").scan("country = 'US'", columns=["id"]).to_arrow()
        """
        return Seed003Scan(self._snapshot, filter, columns, batch_size)

    def to_arrow(self, filter: FilterLike = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Read the rows matching ``filter`` (all when None), ``columns`` only, as one Arrow table.

        Example::

            lp.open("/data/legacy").to_arrow("country = 'US'", columns=["id"])
        """
        return self.scan(filter, columns).to_arrow()

    def count(self, filter: FilterLike = None) -> int:
        """Number of rows matching ``filter`` (all rows when None).

        Example::

            lp.open("/data/legacy").count("amount > 10")
        """
        return self.scan(filter).count()

    def plan(self, filter: FilterLike = None) -> list[ScanTask]:
        """The leaf tables a scan with ``filter`` reads, each with its residual filter.

        Example::

            [t.location for t in lp.open("/data/legacy").plan("country = 'US'")]
        """
        return self.scan(filter).plan()

    def explain(self, filter: FilterLike = None) -> str:
        """Human-readable pruning summary of a scan with ``filter``."""
        return self.scan(filter).explain()

    def describe(self) -> str:
        """A readable report (``seed003.report.describe``): schema, partition columns,
        partitions with row and file counts and sizes, size on disk, versions and tags.

        Example::

            print(lp.open("/data/legacy").describe())
        """
        return report.describe(self._snapshot)

    def summary(self) -> dict[str, Any]:
        """``describe``'s report as plain data (what ``lance-partitioned describe --json``
        prints; ``seed003.report.summary``)."""
        return report.summary(self._snapshot)

    def versions(self) -> list[dict[str, Any]]:
        """Every ``__manifest`` version, oldest first: ``{"version", "timestamp"}`` each.

        Seed 003 commits each change to ``__manifest``, but pins no leaf version, so
        only the latest state is readable: ``lp.open`` opens that one.
        """
        listed = sorted(self._snapshot.manifest.dataset().versions(), key=lambda v: v["version"])
        return [{"version": v["version"], "timestamp": v["timestamp"]} for v in listed]

    def history(self, limit: int | None = None) -> pa.Table:
        """``versions``, newest first, in ``PartitionedNamespace.history``'s columns: a seed
        003 commit records nothing of what it did, so ``operation`` is ``unknown``,
        ``parameters`` empty and the counts NULL."""
        listed = self.versions()[::-1]
        if limit is not None:
            listed = listed[: positive_int("limit", limit)]
        rows = [
            {
                "version": v["version"],
                "timestamp": history.utc(v["timestamp"]),
                "operation": "unknown",
                "parameters": "{}",
            }
            for v in listed
        ]
        return pa.Table.from_pylist(rows, schema=history.HISTORY_SCHEMA)

    def tags(self) -> dict[str, int]:
        """Tag name → ``__manifest`` version (Lance tags of ``__manifest``, if any)."""
        return history.tags(self._snapshot.manifest)

    def partitions(self) -> pa.Table:
        """One row per leaf table: its object id, location and the text of each level's value."""
        names = [c.level_name for c in self.layout.columns]
        rows = [
            {
                "object_id": leaf.object_id,
                "location": leaf.location,
                **dict(zip(names, leaf.values, strict=True)),
            }
            for leaf in self.layout.leaves
        ]
        return pa.Table.from_pylist(
            rows,
            schema=pa.schema(
                [("object_id", pa.string()), ("location", pa.string())]
                + [(n, pa.string()) for n in names]
            ),
        )

    def _refuse(self, name: str) -> NoReturn:
        what = name if name in NAMESPACE_PROPERTIES else f"{name}()"
        why = (
            f"{what} needs seed 000's metadata (field ids, index definitions)"
            if name in NEEDS_SEED000
            else f"is read-only here; {what} would change it"
        )
        raise UnsupportedFeatureError(
            f"{self.root!r} is a namespace in seed 003's earlier layout and {why}. "
            f"Convert it to seed 000's layout first: lp.convert({self.root!r}, NEW_ROOT) "
            "(or `lance-partitioned convert`), then open NEW_ROOT"
        )

    def __getattr__(self, name: str) -> Any:
        # Every other PartitionedNamespace operation changes the namespace (or needs
        # seed-000 metadata): refuse it by name rather than with an AttributeError.
        if not name.startswith("_") and name in NAMESPACE_PROPERTIES:
            self._refuse(name)
        if not name.startswith("_") and name in NAMESPACE_METHODS:

            def refused(*args: Any, **kwargs: Any) -> NoReturn:
                self._refuse(name)

            return refused
        raise AttributeError(name)

    def __repr__(self) -> str:
        return (
            f"Seed003Namespace({self.root!r}, version={self.version}, "
            f"partitions={len(self.layout.leaves)}, read-only)"
        )
