"""The state every ``PartitionedNamespace`` method shares, and the ``@mutator`` guard.

``PartitionedNamespace`` (``lance_partitioned.namespace``) is a thin facade. Its
methods are grouped by job in this package: ``evolution``, ``maintenance`` and
``search`` each hold one mixin; all of them stand on ``NamespaceHandle``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import pyarrow as pa

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import PinnedSnapshotError, SchemaError
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionField, PartitionSpec
from lance_partitioned.operations.write.partition_writer import WrittenFiles

SchemaLike: TypeAlias = pa.Schema | Schema | str | dict[str, Any]
"""A namespace schema: Arrow, our ``Schema``, or JsonArrowSchema JSON (text or dict)."""
SpecLike: TypeAlias = str | dict[str, Any] | PartitionSpec | Sequence[PartitionField]
"""A partition spec: Iceberg-style text (``"year(d), country"``) or JSON, a JSON dict,
a ``PartitionSpec``, or its fields."""


def to_schema(schema: SchemaLike) -> Schema:
    """Accept an Arrow schema, a Schema, or JsonArrowSchema JSON (str or dict)."""
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, pa.Schema):
        return Schema.from_arrow(schema)
    if isinstance(schema, (str, dict)):
        return Schema.from_json(schema)
    raise SchemaError(
        f"expected a pyarrow Schema or JsonArrowSchema JSON, got {type(schema).__name__}"
    )


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the new ``__manifest`` version and the rows/partitions written."""

    version: int
    rows: int
    partitions: int
    new_partitions: int

    @classmethod
    def of(cls, version: int, written: WrittenFiles) -> WriteResult:
        """The result of a write that wrote ``written`` and left the namespace at ``version``."""
        return cls(
            version,
            written.rows,
            len(written.leaves),
            sum(leaf_write.is_new for leaf_write in written.leaves.values()),
        )


F = TypeVar("F", bound=Callable[..., Any])


def mutator(method: F) -> F:
    """Mark a method that changes the namespace; on a pinned handle it raises PinnedSnapshotError.

    A handle opened at an old version (``lp.open(root, version=...)``) reads
    that one snapshot. Changing the namespace through it would either act on
    the latest version behind the reader's back or silently unpin the handle,
    so every mutator refuses, before it reads or writes anything. (Tagging and
    the housekeeping of ``cleanup``/``vacuum`` do not change what any version
    holds; they stay allowed and keep the handle pinned.)
    """

    @functools.wraps(method)
    def guarded(self: NamespaceHandle, *args: Any, **kwargs: Any) -> Any:
        if self._pinned:
            raise PinnedSnapshotError(
                f"this handle is pinned to __manifest version {self.version} of {self.root!r}; "
                f"{method.__name__}() changes the namespace: use refresh() (or lp.open(root)) "
                "before writing"
            )
        return method(self, *args, **kwargs)

    guarded.changes_namespace = True  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]


class NamespaceHandle:
    """One namespace root and the ``__manifest`` snapshot this handle reads.

    Reads are pinned to one ``__manifest`` version (``version``); writes always
    plan against the latest version and publish with one atomic commit.
    """

    def __init__(self, manifest: Manifest, snapshot: Snapshot, pinned: bool = False):
        self._manifest = manifest
        self._snapshot = snapshot
        self._pinned = pinned

    def refresh(self) -> NamespaceHandle:
        """Move this handle to the latest ``__manifest`` version (and unpin it). Returns self.

        Example::

            ns.refresh().count()
        """
        self._snapshot = Snapshot.load(self._manifest)
        self._pinned = False
        return self

    @property
    def root(self) -> str:
        return self._manifest.root

    @property
    def version(self) -> int:
        """The ``__manifest`` version this handle reads."""
        return self._snapshot.version

    @property
    def schema(self) -> Schema:
        return self._snapshot.schema

    @property
    def spec(self) -> PartitionSpec:
        """The current (newest) partition spec."""
        return self._snapshot.current_spec

    @property
    def specs(self) -> dict[int, PartitionSpec]:
        return dict(self._snapshot.specs)

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def manifest(self) -> Manifest:
        return self._manifest
