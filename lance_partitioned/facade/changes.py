"""Row-level change methods of ``PartitionedNamespace``: merge (upsert) and update.

Each is one transaction (``operations.change``): every partition it changes,
creates or empties is published by one ``__manifest`` commit, planned again on
the latest version after a concurrent commit. Overwrite by predicate is
``overwrite(data, where=...)``, beside the other overwrites.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.facade.base import NamespaceHandle, mutator
from lance_partitioned.operations.change.merge import MergeBuilder, MergeResult
from lance_partitioned.operations.change.predicate import UpdateResult, update_rows
from lance_partitioned.operations.read.scan_filter import FilterLike
from lance_partitioned.operations.write.input import DataLike


class ChangeMethods(NamespaceHandle):
    """Row-level change methods of ``PartitionedNamespace``: merge and update."""

    @mutator
    def merge(self, source: DataLike, on: str | Sequence[str]) -> MergeBuilder:
        """Start a merge of ``source`` (anything ``append`` takes) keyed by the columns ``on``.

        Add clauses, then call ``execute()`` (see ``MergeBuilder`` and docs/CHANGES.md):
        ``when_matched_update_all``, ``when_matched_update(set=, condition=)``,
        ``when_matched_delete``, ``when_not_matched_insert_all`` and
        ``when_not_matched_by_source_delete``. Conditions and ``set`` values are SQL
        over ``source.<column>`` and ``target.<column>``. A NULL key matches
        nothing; a key given twice is refused (DuplicateKeyError). Returns the
        builder; ``execute`` returns a ``MergeResult``.

        Example::

            (ns.merge(changes, on="id")
               .when_matched_update_all()
               .when_not_matched_insert_all()
               .execute())
        """
        return MergeBuilder(self._manifest, lambda: self._snapshot.schema, source, on, self._merged)

    def _merged(self, result: MergeResult) -> None:
        self._snapshot = Snapshot.load(self._manifest, result.version)

    @mutator
    def update(self, set: Mapping[str, str], where: FilterLike, **options: Any) -> UpdateResult:
        """Give the rows matching ``where`` new values, in one transaction.

        ``set`` maps columns to SQL expressions over the row's columns
        (``{"price": "price * 1.1"}``; a literal is SQL too: ``"'shipped'"``).
        ``where`` is required, as for ``delete``: ``"true"`` updates every row.
        A row whose partition columns change moves to its partition. ``options``
        are a write's (``max_buffer_bytes``, ``max_rows_per_file``). Returns an
        ``UpdateResult`` (version, rows_updated, partitions_touched).

        Example::

            ns.update({"status": "'late'"}, where="due < DATE '2025-01-01'")
        """
        result = update_rows(self._manifest, self._snapshot.schema, set, where, **options)
        self._snapshot = Snapshot.load(self._manifest, result.version)
        return result
