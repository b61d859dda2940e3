"""Index and search methods of ``PartitionedNamespace`` (docs/SEARCH.md).

The search engine sits above the namespace (layering: namespace -> engines),
so each method imports it when called."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lance_partitioned.facade.base import NamespaceHandle, mutator
from lance_partitioned.operations.progress import ProgressLike, reporter
from lance_partitioned.operations.read.scan_filter import FilterLike


class SearchMethods(NamespaceHandle):
    """Index and search methods of ``PartitionedNamespace`` (docs/SEARCH.md)."""

    @mutator
    def create_index(
        self,
        column: str,
        index_type: str,
        *,
        name: str | None = None,
        filter: FilterLike = None,
        accelerator: str | None = None,
        progress: ProgressLike = None,
        **params: Any,
    ) -> Any:
        """Define a Lance index and build it on every partition (or those ``filter`` selects).

        Partitions are built in parallel and published by one ``__manifest`` commit;
        the definition is stored in ``__manifest`` metadata (FORMAT.md §10).

        Parameters:
            column: the column to index (a ``fixed_size_list<float32>`` vector
                column, a scalar column, or a string column for ``INVERTED``).
            index_type: ``IVF_PQ``, ``IVF_HNSW_SQ``, ``IVF_FLAT`` (vectors),
                ``BTREE``, ``BITMAP``, ``LABEL_LIST`` (scalars) or ``INVERTED``
                (full text).
            name: the index name (default ``<column>_<index_type>`` lower-cased).
            filter: build only on the partitions this filter selects (pruned as
                ``scan`` prunes).
            accelerator: ``"cuda"`` trains IVF on a GPU (Lance's ``accelerator``).
            progress: partitions built: a bar on a terminal (None), always (True),
                never (False), or a callable taking ``ProgressEvent``s.
            params: Lance's parameters: ``metric`` (l2, cosine, dot),
                ``num_partitions``, ``num_sub_vectors``, ...; ``min_rows``:
                partitions with fewer rows stay flat (searched exactly); the
                tokenizer settings for ``INVERTED``.

        Returns an ``IndexReport``. A missing column raises ``ColumnNotFoundError``;
        a wrong column type, an unknown index type, metric or parameter raise
        ``SearchError``, before anything is written.

        Example::

            ns.create_index("embedding", "IVF_PQ", num_partitions=16, num_sub_vectors=8,
                            metric="cosine")
            ns.create_index("body", "INVERTED")
        """
        from lance_partitioned.search import build

        with reporter(progress, "create_index", "partitions") as built:
            report = build.create_index(
                self._manifest, column, index_type, name, filter, accelerator, built, **params
            )
        self.refresh()
        return report

    def list_indexes(self) -> list[Any]:
        """Every index definition with its coverage (``IndexInfo``: partitions and rows
        indexed, against the totals), at this handle's version.

        Example::

            for info in ns.list_indexes():
                print(info.name, info.partitions_indexed, "/", info.partitions)
        """
        from lance_partitioned.search import build

        return build.list_indexes(self._snapshot)

    @mutator
    def drop_index(self, name: str) -> Any:
        """Remove index ``name`` from every partition (one commit) and its definition.

        Example::

            ns.drop_index("embedding_ivf_pq")
        """
        from lance_partitioned.search import build

        report = build.drop_index(self._manifest, name)
        self.refresh()
        return report

    @mutator
    def optimize_indexes(
        self, accelerator: str | None = None, progress: ProgressLike = None
    ) -> Any:
        """Index what writes added since the last build: new partitions get every
        definition, partitions with appended rows are rebuilt; one commit.

        ``accelerator``: ``"cuda"`` trains IVF indexes on a GPU (as in ``create_index``);
        ``progress`` counts partitions built (as in ``create_index``).

        Example::

            ns.append(more_rows)
            ns.optimize_indexes()
        """
        from lance_partitioned.search import build

        with reporter(progress, "optimize_indexes", "partitions") as built:
            report = build.optimize_indexes(self._manifest, accelerator, built)
        self.refresh()
        return report

    def search(
        self,
        query: Any,
        k: int = 10,
        *,
        column: str | None = None,
        filter: FilterLike = None,
        columns: Sequence[str] | None = None,
        query_type: str = "auto",
        metric: str | None = None,
        nprobes: int | None = None,
        refine_factor: int | None = None,
        flat_below: int | None = None,
    ) -> pa.Table:
        """Search this handle's snapshot; returns an Arrow table, best first.

        ``query_type="auto"`` (the default, as LanceDB's): text is a full-text
        search, a ``(vector, text)`` pair (or ``{"vector": ..., "text": ...}``)
        hybrid, anything else a vector search. ``query_type="vector"``: ``query``
        is one vector (or a 2-D array: a batch,
        with a ``query_index`` column), the result has ``_distance`` (Lance's:
        squared L2, 1 - cosine, 1 - dot). ``"fts"``: ``query`` is text, searched in
        a column with an INVERTED index, the result has ``_score`` (BM25 with the
        statistics of all searched partitions). ``"hybrid"``: ``query`` is
        ``(vector, text)``, ranked by reciprocal rank fusion (``_score``).
        ``filter`` prunes partitions as ``scan`` does and runs inside Lance as a
        prefilter; ``columns`` selects columns (default: all); ``k`` is the number
        of results per query (``k >= 1``); ``column`` names the vector or text
        column (default: the only indexed one of the right kind); ``metric``
        (l2, cosine, dot) defaults to the index's; ``nprobes`` and
        ``refine_factor`` are Lance's IVF search parameters; a partition of fewer
        than ``flat_below`` rows is searched exactly, by a flat scan, even when
        indexed. Default: a partition read at a pinned version with no residual
        filter is scanned exactly from its vectors held in memory below 50,000
        rows at 128 dimensions (``search.memory``, within a byte budget), any
        other below 10,000 rows at 128 dimensions by Lance
        (``search.api.default_flat_below``), both scaled inversely with the
        dimension; docs/SEARCH.md §3. The partition
        values follow as ``partition_field_<field_id>`` columns. Every partition
        is read at the version this snapshot pins; ties are broken by partition
        order, then row id.

        Example::

            hits = ns.search(vec, k=5, filter="tenant = 'acme'", columns=["id", "text"])
            words = ns.search("refund", k=5)  # full text: a string query
        """
        from lance_partitioned.search import api

        return api.search(
            self._snapshot,
            query,
            k,
            column=column,
            filter=filter,
            columns=columns,
            query_type=query_type,
            metric=metric,
            nprobes=nprobes,
            refine_factor=refine_factor,
            flat_below=flat_below,
        )
