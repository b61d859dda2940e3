"""The ``lance_namespace.LanceNamespace`` interface over a partitioned namespace, read-only.

Generic namespace clients browse a partitioned namespace with::

    import lance_namespace
    ns = lance_namespace.connect("partitioned", {"root": "/data/events"})
    # or the class path: "lance_partitioned.namespace_interface.PartitionedLanceNamespace"

``connect`` resolves ``"partitioned"`` through ``lance_namespace``'s plugin
registry (``register_namespace_impl``, arranged when ``lance_partitioned`` is
imported: ``namespace_registration``) and calls the class with the properties
as keyword arguments: ``root``, optionally ``version`` (a ``__manifest``
version number or tag; the view is pinned to it, default the latest at
connect time) and ``storage.<key>`` entries (object-store options).

What it answers, from one pinned ``__manifest`` version:

- ``list_namespaces`` / ``describe_namespace`` / ``namespace_exists``: the root
  (``[]``; its properties are the ``__manifest`` metadata: ``schema`` and
  ``partition_spec_v<N>``), the spec version namespaces ``v<N>`` and the
  partition namespaces, with the runtime properties of Appendix E;
- ``list_tables`` / ``describe_table`` / ``table_exists``: every leaf ``dataset``;
  ``describe_table`` gives its location and the pinned ``read_version`` (seed
  000 Read Behavior), and with ``load_detailed_metadata`` the namespace schema
  (upstream's JsonArrowSchema) and the leaf's row count.

An id is a path of names (``["v1", "k7m2..."]``); a name holding the separator
``$`` names nothing (``NamespaceNotFoundError`` / ``TableNotFoundError``). A
``limit`` must be a positive integer (``InvalidInputError``). Lance's errors
reach clients without Rust source paths (``errors.lance_boundary``).

Every other operation (create, drop, insert, delete, alter, index, tag, ...)
raises ``UnsupportedOperationError`` naming ``lance_partitioned``'s API: a
write must go through one ``__manifest`` commit that a generic client cannot
make.
"""

from __future__ import annotations

from typing import Any

import lance_namespace as ln
from lance_namespace import LanceNamespace, UnsupportedOperationError
from lance_namespace.errors import (
    InvalidInputError,
    NamespaceNotFoundError,
    TableNotFoundError,
)
from lance_namespace_urllib3_client.models import TableBasicStats

from lance_partitioned.catalog import layout, storage
from lance_partitioned.catalog.leaf_open import open_leaf_dataset
from lance_partitioned.catalog.snapshot import Leaf
from lance_partitioned.errors import lance_boundaries
from lance_partitioned.format.namespace_models import schema_to_model
from lance_partitioned.namespace import PartitionedNamespace

# The operations this implementation answers; every other public method of
# LanceNamespace is refused with a message naming our API.
READ_OPERATIONS = frozenset(
    {
        "namespace_id",
        "list_namespaces",
        "describe_namespace",
        "namespace_exists",
        "list_tables",
        "describe_table",
        "table_exists",
    }
)


def _page(names: list[str], token: str | None, limit: int | None) -> tuple[list[str], str | None]:
    """Names after ``token`` (the last name of the previous page), at most ``limit``.

    ``limit`` is None (every name) or a positive integer, else InvalidInputError: with
    ``limit=0`` no page could carry the token that says where the listing goes on.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInputError(f"limit must be a positive integer (or None), got {limit!r}")
    names = sorted(set(names))
    if token:
        names = [n for n in names if n > token]
    if limit is not None and len(names) > limit:
        return names[:limit], names[limit - 1]
    return names, None


def _object_id(path: list[str]) -> str | None:
    """The ``__manifest`` object id of an id path, None when a part holds the separator:
    ``["v1$abc"]`` is one part named ``v1$abc``, which names no object (the partition
    namespace ``v1$abc`` is ``["v1", "abc"]``)."""
    if any(layout.SEPARATOR in part for part in path):
        return None
    return layout.join_id(*path)


@lance_boundaries
class PartitionedLanceNamespace(LanceNamespace):
    """A read-only ``LanceNamespace`` over the partitioned namespace at ``root`` (module doc)."""

    def __init__(self, root: str, version: str | None = None, **properties: str):
        storage = {
            k[len("storage.") :]: v for k, v in properties.items() if k.startswith("storage.")
        }
        unknown = sorted(k for k in properties if not k.startswith("storage."))
        if unknown:
            raise ValueError(
                f"unknown properties {unknown}; expected root, version and storage.<key>"
            )
        pinned: int | str | None = int(version) if version and version.isdigit() else version
        self._ns = PartitionedNamespace.open(root, pinned, storage or None)
        self._storage = storage or None
        # One pinned table of every row: all answers come from the same version.
        rows = self._ns._snapshot.rows_dataset.to_table(
            columns=[
                "object_id",
                "object_type",
                "location",
                "read_version",
                "read_branch",
                "read_tag",
            ]
        ).to_pylist()
        self._rows = {r["object_id"]: r for r in rows}

    # -- identity -------------------------------------------------------------
    def namespace_id(self) -> str:
        return (
            f"PartitionedLanceNamespace {{ root: {self._ns.root!r}, version: {self._ns.version} }}"
        )

    # -- helpers --------------------------------------------------------------
    def _children(self, parent: list[str], kind: str) -> list[str]:
        depth = len(parent)
        prefix = layout.join_id(*parent) + layout.SEPARATOR if parent else ""
        out = []
        for oid, row in self._rows.items():
            parts = layout.split_id(oid)
            if row["object_type"] == kind and len(parts) == depth + 1 and oid.startswith(prefix):
                out.append(parts[-1])
        return out

    def _missing(self, what: str, path: list[str]) -> str:
        """The message for an id ``path`` that names no ``what`` (namespace or table)."""
        shown = f"no {what} {path!r} in {self._ns.root!r} (version {self._ns.version})"
        if _object_id(path) is None:
            return (
                f"{shown}: an id part may not hold {layout.SEPARATOR!r}; pass the path as "
                f"separate parts, e.g. {layout.split_id(layout.join_id(*path))!r}"
            )
        return shown

    def _require_namespace(self, path: list[str]) -> None:
        if not path:
            return
        row = self._rows.get(_object_id(path) or "")
        if row is None or row["object_type"] != "namespace":
            raise NamespaceNotFoundError(self._missing("namespace", path))

    def _table_row(self, path: list[str]) -> dict[str, Any]:
        if len(path) >= 2:
            self._require_namespace(path[:-1])
        row = self._rows.get(_object_id(path) or "") if path else None
        if row is None or row["object_type"] != "table":
            raise TableNotFoundError(self._missing("table", path))
        return row

    # -- namespaces -----------------------------------------------------------
    def list_namespaces(self, request: ln.ListNamespacesRequest) -> ln.ListNamespacesResponse:
        path = list(request.id or [])
        self._require_namespace(path)
        names, token = _page(self._children(path, "namespace"), request.page_token, request.limit)
        return ln.ListNamespacesResponse(namespaces=names, page_token=token)

    def describe_namespace(
        self, request: ln.DescribeNamespaceRequest
    ) -> ln.DescribeNamespaceResponse:
        path = list(request.id or [])
        self._require_namespace(path)
        if not path:  # the root: the __manifest metadata (seed 000 "Metadata Definition")
            meta = self._ns._snapshot.dataset.metadata
            props = {
                k: v for k, v in meta.items() if k == "schema" or k.startswith("partition_spec_v")
            }
            return ln.DescribeNamespaceResponse(properties=props)
        return ln.DescribeNamespaceResponse(properties=self._ns.namespace_properties(path))

    def namespace_exists(self, request: ln.NamespaceExistsRequest) -> Any:
        self._require_namespace(list(request.id or []))
        return None

    # -- tables ---------------------------------------------------------------
    def list_tables(self, request: ln.ListTablesRequest) -> ln.ListTablesResponse:
        path = list(request.id or [])
        self._require_namespace(path)
        names, token = _page(self._children(path, "table"), request.page_token, request.limit)
        return ln.ListTablesResponse(tables=names, page_token=token)

    def describe_table(self, request: ln.DescribeTableRequest) -> ln.DescribeTableResponse:
        path = list(request.id or [])
        row = self._table_row(path)
        if request.version is not None or request.tag is not None or request.branch is not None:
            raise UnsupportedOperationError(
                "describe_table answers the version this namespace version pins (read_version); "
                "version/tag/branch selection is not supported: connect with another "
                "'version' property for another namespace version"
            )
        uri = layout.join_uri(self._ns.root, row["location"])
        out: dict[str, Any] = {
            "location": uri,
            "version": row["read_version"],
            "table": path[-1],
            "namespace": path[:-1],
            "properties": {
                k: str(row[k])
                for k in ("read_version", "read_branch", "read_tag")
                if row[k] is not None
            },
            "storage_options": self._storage,
        }
        if request.with_table_uri:  # a complete URI, also for a local root
            store = storage.resolve(uri)
            out["table_uri"] = "file://" + store.path(uri) if store.is_local else uri
        if request.load_detailed_metadata:
            leaf = Leaf(
                row["object_id"],
                row["location"],
                0,
                (),
                row["read_version"],
                row["read_branch"],
                row["read_tag"],
            )
            ds = open_leaf_dataset(uri, leaf, self._storage)
            out["version"] = ds.version
            out["var_schema"] = schema_to_model(self._ns.schema, exact=False)
            deleted = sum(f.num_deletions for f in ds.get_fragments())
            out["stats"] = TableBasicStats(
                num_deleted_rows=deleted, num_fragments=len(ds.get_fragments())
            )
        return ln.DescribeTableResponse(**{k: v for k, v in out.items() if v is not None})

    def table_exists(self, request: ln.TableExistsRequest) -> Any:
        self._table_row(list(request.id or []))
        return None


_READ_PREFIXES = ("list_", "describe_", "get_", "count_", "query_", "explain_", "analyze_")


def _refusal(name: str):
    def refused(self: PartitionedLanceNamespace, *args: Any, **kwargs: Any) -> Any:
        if name.startswith(_READ_PREFIXES):
            raise UnsupportedOperationError(
                f"{name} is not supported by this lance_namespace view of {self._ns.root!r}; "
                "read the data with lance_partitioned: lp.open(root).scan(filter).to_arrow() "
                "(or count(), search(), the lance-partitioned command)"
            )
        raise UnsupportedOperationError(
            f"{name} is not supported: this lance_namespace view of the partitioned namespace "
            f"{self._ns.root!r} is read-only. Change it with lance_partitioned "
            "(lp.open(root).append / overwrite / delete / evolve_spec / create_index / tag, "
            "or the lance-partitioned command), which publishes with one __manifest commit"
        )

    refused.__name__ = name
    refused.__doc__ = f"Refused: {name} would change the namespace (see the module doc)."
    return refused


for _name in dir(LanceNamespace):
    if (
        not _name.startswith("_")
        and _name not in READ_OPERATIONS
        and callable(getattr(LanceNamespace, _name))
    ):
        setattr(PartitionedLanceNamespace, _name, _refusal(_name))
