"""Index definitions: what the namespace promises to index, stored in ``__manifest`` metadata.

A definition names one Lance index that every leaf (or every leaf a filter
selects) should carry under the same name: the column (by field id, so a
rename keeps it), the Lance index type and its parameters. The definitions of
a namespace are one JSON array in the ``__manifest`` table metadata under
``lance-partitioned:indexes`` (docs/FORMAT.md §10), so another implementation
can read them. They are changed by one compare-and-swap ``UpdateConfig``
commit on ``__manifest`` (``commit_definitions``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import lance
import numpy as np
import pyarrow as pa

from lance_partitioned.catalog.commit_info import CommitInfo
from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.errors import (
    ColumnNotFoundError,
    PartitionedNamespaceError,
    SearchError,
)
from lance_partitioned.format.schema import Schema

INDEXES_KEY = "lance-partitioned:indexes"

VECTOR_TYPES = ("IVF_PQ", "IVF_HNSW_SQ", "IVF_FLAT")
SCALAR_TYPES = ("BTREE", "BITMAP", "LABEL_LIST")
TEXT_TYPES = ("INVERTED",)
INDEX_TYPES = VECTOR_TYPES + SCALAR_TYPES + TEXT_TYPES

# Lance's metric names; "euclidean" is Lance's alias of "l2".
METRICS = ("l2", "cosine", "dot")
METRIC_ALIASES = {"euclidean": "l2"}

# A partition with fewer rows than this is not given a vector index: it is
# searched exactly (flat). IVF training needs rows (PQ needs 256 for its
# codebooks, k-means needs several per list), and a flat scan of a few
# thousand vectors costs about as much as probing an index.
DEFAULT_MIN_ROWS = 4096
PQ_MIN_ROWS = 256

_VECTOR_COMMON = ("num_partitions", "target_partition_size", "sample_rate", "max_iters")
# The Lance parameters accepted per index type (passed through unchanged).
PARAMS: dict[str, tuple[str, ...]] = {
    "IVF_PQ": (*_VECTOR_COMMON, "num_sub_vectors", "num_bits"),
    "IVF_HNSW_SQ": (*_VECTOR_COMMON, "num_bits", "m", "ef_construction", "max_level"),
    "IVF_FLAT": _VECTOR_COMMON,
    "BTREE": (),
    "BITMAP": (),
    "LABEL_LIST": (),
    "INVERTED": (
        "base_tokenizer",
        "language",
        "with_position",
        "max_token_length",
        "lower_case",
        "stem",
        "remove_stop_words",
        "custom_stop_words",
        "ascii_folding",
    ),
}
# The tokenizer settings an INVERTED definition records, so that search re-scores
# BM25 with exactly the tokens the leaf indexes hold (``search.bm25``).
TOKENIZER_PARAMS = tuple(p for p in PARAMS["INVERTED"] if p != "with_position")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class IndexDefinition:
    """One namespace index: a Lance index of ``index_type`` on ``column``, in every leaf
    the ``filter`` selects (all leaves when None), named ``name`` in each.

    ``field_id`` identifies the column (``column`` is its name when the index was
    defined, kept for readers); ``params`` are Lance's parameters, ``metric``
    for vector indexes; ``min_rows`` is the flat threshold of vector indexes.
    """

    name: str
    field_id: int
    column: str
    index_type: str
    params: dict[str, Any] = field(default_factory=dict)
    filter: str | None = None
    min_rows: int | None = None

    @property
    def is_vector(self) -> bool:
        return self.index_type in VECTOR_TYPES

    @property
    def metric(self) -> str | None:
        return self.params.get("metric") if self.is_vector else None

    def column_in(self, schema: Schema) -> str | None:
        """The column's current name in ``schema`` (None: the column was dropped)."""
        try:
            return schema.field_by_id(self.field_id).name
        except (KeyError, ValueError, PartitionedNamespaceError):
            return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "field_id": self.field_id,
            "column": self.column,
            "index_type": self.index_type,
            "params": dict(sorted(self.params.items())),
        }
        if self.filter is not None:
            out["filter"] = self.filter
        if self.min_rows is not None:
            out["min_rows"] = self.min_rows
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> IndexDefinition:
        unknown = set(obj) - {
            "name",
            "field_id",
            "column",
            "index_type",
            "params",
            "filter",
            "min_rows",
        }
        if unknown:
            raise SearchError(f"index definition {obj.get('name')!r} has unknown keys {unknown}")
        return cls(
            obj["name"],
            int(obj["field_id"]),
            obj["column"],
            obj["index_type"],
            dict(obj.get("params") or {}),
            obj.get("filter"),
            obj.get("min_rows"),
        )


def load_definitions(snapshot: Snapshot) -> dict[str, IndexDefinition]:
    """The index definitions of ``snapshot`` by name (empty when the key is absent)."""
    raw = snapshot.dataset.metadata.get(INDEXES_KEY)
    if not raw:
        return {}
    try:
        items = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SearchError(f"__manifest metadata {INDEXES_KEY} is not JSON: {exc}") from exc
    if not isinstance(items, list):
        raise SearchError(f"__manifest metadata {INDEXES_KEY} must be a JSON array")
    defs = [IndexDefinition.from_json(o) for o in items]
    return {d.name: d for d in defs}


def encode_definitions(defs: dict[str, IndexDefinition]) -> str:
    """The metadata value: a compact JSON array sorted by name."""
    return json.dumps(
        [defs[n].to_json() for n in sorted(defs)], separators=(",", ":"), ensure_ascii=False
    )


def commit_definitions(
    manifest: Manifest, base: lance.LanceDataset, defs: dict[str, IndexDefinition]
) -> lance.LanceDataset:
    """Set the definitions with one commit on top of ``base`` (compare-and-swap).

    Raises CommitConflictError when ``__manifest`` moved on since ``base`` in a
    way Lance cannot rebase over (another change of the same metadata key).
    """
    op = lance.LanceOperation.UpdateConfig(
        table_metadata_updates=lance.LanceOperation.UpdateMap(
            {INDEXES_KEY: encode_definitions(defs) if defs else None}, replace=False
        )
    )
    info = CommitInfo("set_index_definitions", {"indexes": sorted(defs)}, 0, 0, 0)
    return manifest.commit_operation(
        base, op, what="the change of the index definitions", info=info
    )


def normalize_metric(metric: str) -> str:
    """Lance's metric name for ``metric`` (case-insensitive); SearchError if unknown."""
    if not isinstance(metric, str):
        raise SearchError(f"metric must be a string, one of {METRICS}; got {metric!r}")
    m = METRIC_ALIASES.get(metric.lower(), metric.lower())
    if m not in METRICS:
        raise SearchError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")
    return m


def query_problem(queries: np.ndarray, metric: str) -> tuple[int, str] | None:
    """The first row of ``queries`` (2-D) a ``metric`` search cannot answer, and why:
    NaN or infinite values, or for cosine the zero vector, whose cosine distance to
    any vector is undefined (Lance would silently return no rows). None: all fine."""
    bad = ~np.isfinite(queries).all(axis=1)
    if bad.any():
        return int(np.argmax(bad)), "the query vector holds NaN or infinite values"
    zero = ~queries.any(axis=1)
    if metric == "cosine" and zero.any():
        return int(np.argmax(zero)), (
            "the query vector is all zeros, and its cosine distance to any vector is "
            "undefined; search with a non-zero vector, or with metric 'l2' or 'dot'"
        )
    return None


def vector_dimension(t: pa.DataType) -> int | None:
    """The dimension of a vector column type (fixed-size list of floats), else None."""
    if pa.types.is_fixed_size_list(t) and pa.types.is_floating(t.value_type):
        return t.list_size
    return None


def _check_column_type(column: str, t: pa.DataType, index_type: str) -> None:
    ok: bool
    if index_type in VECTOR_TYPES:
        ok = vector_dimension(t) is not None
        want = "a vector column: fixed_size_list<float16|float32|float64>"
    elif index_type == "LABEL_LIST":
        ok = (pa.types.is_list(t) or pa.types.is_large_list(t)) and _is_scalar(t.value_type)
        want = "a list of scalars"
    elif index_type == "INVERTED":
        ok = pa.types.is_string(t) or pa.types.is_large_string(t)
        want = "a string column"
    else:
        ok = _is_scalar(t)
        want = "a scalar column (number, string, boolean, date, time, timestamp, binary)"
    if not ok:
        raise SearchError(
            f"cannot build a {index_type} index on column {column!r} of type {t}: "
            f"{index_type} needs {want}"
        )


def _is_scalar(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_temporal(t)
        or pa.types.is_decimal(t)
        or pa.types.is_fixed_size_binary(t)
    )


def make_definition(
    schema: Schema,
    column: str,
    index_type: str,
    name: str | None,
    filter_sql: str | None,
    params: dict[str, Any],
) -> IndexDefinition:
    """Validate a ``create_index`` request and turn it into a definition.

    Raises ColumnNotFoundError for a missing column and SearchError for an
    unknown index type, metric or parameter, or a column of the wrong type,
    before anything is read or written.
    """
    if not isinstance(index_type, str) or index_type.upper() not in INDEX_TYPES:
        raise SearchError(f"unknown index type {index_type!r}; use one of {', '.join(INDEX_TYPES)}")
    index_type = index_type.upper()
    if not isinstance(column, str) or not schema.has_field(column):
        raise ColumnNotFoundError(
            f"cannot index unknown column {column!r}; columns are {schema.names}", (str(column),)
        )
    _check_column_type(column, schema.field(column).type, index_type)
    params = dict(params)
    min_rows = params.pop("min_rows", None)
    metric = params.pop("metric", None)
    allowed = PARAMS[index_type]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise SearchError(
            f"unknown parameter(s) {unknown} for a {index_type} index; "
            f"accepted: {', '.join(allowed) or 'none'}"
            + (", metric, min_rows" if index_type in VECTOR_TYPES else "")
        )
    if index_type in VECTOR_TYPES:
        params["metric"] = normalize_metric(metric if metric is not None else "l2")
        floor = PQ_MIN_ROWS if index_type == "IVF_PQ" else 1
        min_rows = DEFAULT_MIN_ROWS if min_rows is None else min_rows
        if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < floor:
            raise SearchError(
                f"min_rows must be an integer >= {floor} for {index_type}; got {min_rows!r}"
            )
        dim = vector_dimension(schema.field(column).type)
        nsub = params.get("num_sub_vectors")
        if nsub is not None and (not isinstance(nsub, int) or nsub <= 0 or dim % nsub):
            raise SearchError(
                f"num_sub_vectors={nsub!r} must be a positive divisor of the dimension {dim}"
            )
    elif metric is not None or min_rows is not None:
        raise SearchError(f"metric and min_rows apply to vector indexes only, not {index_type}")
    if index_type == "INVERTED":
        # Recorded explicitly (Lance's defaults filled in), so the tokens search
        # re-scores with never depend on a library default that may change.
        params = {**INVERTED_DEFAULTS, **params}
    if name is None:
        name = f"{column}_{index_type.lower()}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise SearchError(
            f"index name {name!r} must be 1-128 characters of letters, digits, '_', '.', '-'"
        )
    return IndexDefinition(
        name, schema.field_id(column), column, index_type, params, filter_sql, min_rows
    )


# Lance 14.0.2's defaults for the INVERTED tokenizer (create_scalar_index docs).
INVERTED_DEFAULTS: dict[str, Any] = {
    "base_tokenizer": "simple",
    "language": "English",
    "max_token_length": 40,
    "lower_case": True,
    "stem": True,
    "remove_stop_words": True,
    "ascii_folding": True,
}
