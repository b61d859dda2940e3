"""Realigning leaves whose Lance field ids drifted from the namespace's (seed 000).

Versions of this library before field ids were aligned created leaves with Lance's own
numbering, so after a column was dropped a new leaf's ids were ``0, 1, 2, …``
while the namespace said ``0, 2, 3, …``. They recorded the namespace ids under
``lance-partitioned:field_id`` and read correctly, but a reader that matches
by Lance field id (as seed 000 allows) would read one column as another.

``realign_field_ids`` fixes every such leaf in one transaction: each drifted
leaf gets a new version with the namespace's ids, and one ``__manifest``
commit publishes them all. Data is not rewritten: the new version reuses the
data files, with ``DataFile.fields`` mapped to the new ids. Only fragments
with deleted rows are rewritten (Lance's ``Overwrite`` takes no deletion
files), and columns the namespace dropped are left out of the new version.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import lance
from lance.fragment import write_fragments

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import SchemaError
from lance_partitioned.format.schema import Schema
from lance_partitioned.operations.leaf.field_ids import FieldIdLayoutError, remap_fragments
from lance_partitioned.operations.leaf.leaf_changes import LeafChange
from lance_partitioned.operations.leaf.leaf_schema import field_id_drift, realigned_layout
from lance_partitioned.operations.txn.restage import restage

log = logging.getLogger(__name__)


@dataclass
class RealignReport:
    """What ``realign_field_ids`` did."""

    version: int  # __manifest version after the call
    leaves_realigned: list[str] = field(default_factory=list)  # object ids
    fragments_rewritten: int = 0  # fragments with deleted rows, rewritten without them


@dataclass
class RealignFieldIds(LeafChange):
    """Give a leaf's columns the namespace's field ids, reusing its data files."""

    schema: Schema
    label: str
    storage_options: dict[str, str] | None = None
    rewritten: int = 0

    def operation(self, base: lance.LanceDataset) -> Any | None:
        if not field_id_drift(self.schema, base):
            return None
        if base.describe_indices():
            raise SchemaError(
                f"partition {self.label}: its indices refer to the old field ids; drop them "
                "(LanceDataset.drop_index), realign, then create them again"
            )
        try:
            layout, mapping = realigned_layout(self.schema, base)
            target = layout.lance_schema
        except FieldIdLayoutError as exc:
            raise SchemaError(f"partition {self.label}: cannot realign field ids: {exc}") from exc
        fragments = []
        self.rewritten = 0
        for frag in base.get_fragments():
            if frag.metadata.deletion_file is None:
                fragments.extend(remap_fragments([frag.metadata], mapping))
                continue
            rows = base.scanner(columns=layout.arrow.names, fragments=[frag]).to_table()
            if rows.num_rows == 0:
                continue
            written = write_fragments(
                rows,
                base.uri,
                schema=layout.arrow,
                mode="overwrite",
                max_rows_per_file=max(rows.num_rows, 1),
                data_storage_version=base.data_storage_version,
                storage_options=self.storage_options,
            )
            fragments.extend(layout.remap(written))
            self.rewritten += 1
        return lance.LanceOperation.Overwrite(target, fragments)


def drifted_leaves(snapshot: Snapshot) -> list[Leaf]:
    """Published leaves with at least one column whose Lance ids drift."""
    return [
        leaf
        for leaf in snapshot.leaves()
        if field_id_drift(snapshot.schema, snapshot.open_leaf(leaf))
    ]


def realign_field_ids(manifest: Manifest) -> RealignReport:
    """Give every drifted leaf the namespace's field ids, published by one ``__manifest`` commit.

    All or nothing (``operations.txn.restage``): if any drifted leaf cannot be
    realigned, or ``__manifest`` changed those leaves meanwhile, nothing is
    published (CommitConflictError is retryable). Leaves already aligned are
    not touched.
    """
    opts = manifest.storage_options
    done = restage(
        manifest,
        "realign_field_ids",
        lambda snapshot, leaf: RealignFieldIds(snapshot.schema, leaf.object_id, opts),
        leaves_of=drifted_leaves,
    )
    log.info("realigned field ids of %d partitions", len(done.changes))
    rewritten = sum(c.rewritten for c in done.changes.values())  # type: ignore[attr-defined]
    return RealignReport(done.version, sorted(done.changes), rewritten)
