"""Leaves brought in line with the namespace schema: names, dropped columns, widened types.

Reads map leaf columns to namespace columns by field id, so a leaf may lag the
namespace schema (seed 003 §4): a column under its old name, a column the
namespace dropped, a type from before a widening. Readers that match by *name*
(seed 003's rules, ``DirectoryNamespace`` clients, plain ``lance.dataset``) must
never read one column's values as another's, so ``drop_column`` and
``rename_column`` align every leaf in the same operation (metadata only), and
``align_leaves`` brings every lagging leaf up, types included, in one
transaction (``operations.txn.restage``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.operations.leaf.leaf_changes import AlignLeaf
from lance_partitioned.operations.txn.restage import restage


@dataclass
class AlignReport:
    """What ``align_leaves`` did: the ``__manifest`` version after it, and the leaves
    (object ids) it republished."""

    version: int
    leaves_aligned: list[str] = field(default_factory=list)


def align_leaves(manifest: Manifest, widen: bool = True) -> AlignReport:
    """Give every leaf the namespace's column names, drop the columns the namespace
    dropped, and with ``widen`` rewrite columns that lag a widening in the namespace
    type (their field ids kept); one ``__manifest`` commit publishes every leaf changed.

    Leaves already aligned are not touched. All or nothing.
    """
    done = restage(
        manifest,
        "align_leaves",
        lambda snapshot, leaf: AlignLeaf(snapshot.schema, widen),
    )
    return AlignReport(done.version, sorted(done.changes))
