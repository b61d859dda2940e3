"""The options of the ``lance_partitioned`` Spark source, parsed once and validated.

Spark hands options over as a case-insensitive mapping of strings. Every option
is documented here; unknown options are ignored (Spark adds some of its own).

Reading and writing:
- ``root`` or ``path``: the namespace root. ``load(root)`` / ``save(root)`` set
  ``path``; SQL views must use ``root`` (``path`` is special in SQL).
- ``storage.<key>``: storage options for object stores, passed to Lance.

Reading:
- ``filter``: a SQL filter that is part of the relation itself: it prunes partitions
  through ``__manifest`` and runs inside Lance (Lance SQL semantics, exact). Always
  safe, because it does not depend on the query.
- ``pushFilters`` (default ``true``): accept Spark's pushed filters (exact
  translations only) for pruning and filtering inside Lance. Accepted only in a
  session started with the extension (``spark.extension``, which ``local_session``
  loads): PySpark 4.3 shares one read plan among every scan of a relation, and
  the extension gives each scan its own. Without it every filter stays with Spark,
  so the default is exact in every session. ``false`` leaves every filter to Spark.
- ``columns``: comma-separated projection (the Python source API cannot prune columns).
- ``version``: read an older ``__manifest`` version (a number or a tag).
- ``timestampAsOf``: read the newest ``__manifest`` version committed at or before
  this instant (ISO 8601; without an offset, local time). Not with ``version``. The
  extension sets it for ``SELECT ... FROM t TIMESTAMP AS OF '...'`` (and ``version``
  for ``VERSION AS OF n``) on a catalog table.
- ``batchSize``: rows per Arrow batch from Lance.
- ``rowsPerPartition`` (default 1,048,576) and ``minPartitions``: how fragments are
  packed into Spark input partitions. By default about 8 tasks, but none below
  524,288 rows (a task costs more than Lance takes to read that); an explicit
  ``minPartitions`` is honoured however small the tasks get.
- ``scanLog``: a file to which every planned scan appends one JSON line (partitions
  scanned / total, pushed filter). The environment variable
  ``LANCE_PARTITIONED_SCAN_LOG`` sets a default; it must be set before Spark starts.
- ``__catalogTable`` (internal, set by the extension's provider): the relation is a
  catalog table's, which reads as empty (its declared columns, no rows) until its
  first write creates the namespace, as a Parquet table does. Any other relation
  over a root without a namespace fails: a mistyped root must not read as empty.
- Streaming reads (``spark.readStream``) also take ``startingVersion``,
  ``readChangeFeed`` and ``maxVersionsPerTrigger``, parsed by ``spark.stream_source``
  (docs/STREAMING.md).

Writing:
- ``spec``: partition spec for a namespace the write creates, Iceberg-like
  (``"year(ts), bucket(16, id), country"``); checked against an existing namespace.
  A write that creates a namespace needs it (or ``partitionBy``); ``""`` asks for an
  unpartitioned namespace.
- ``__partitionBy`` (internal, set by the extension's provider): Spark's partitioning
  of the write (``partitionBy``, a catalog table's ``PARTITIONED BY``), see ``partitioning``.
- ``__overwriteWhere`` (internal, set by the extension's provider): an overwrite
  replaces only the rows matching this SQL condition (``c = 9 AND s = 'a'``, identity
  partition columns), as ``ns.overwrite(rows, where=...)``: a static ``INSERT
  OVERWRITE t PARTITION (c = 9)``.
- ``partitionOverwriteMode``: ``static`` (default; overwrite replaces everything) or
  ``dynamic`` (overwrite replaces only the partitions the data touches).
- ``maxBufferBytes`` (default 128 MiB per task) and ``maxRowsPerFile``.
- ``<column>.arrow.fixed-size-list.size``: store an ``array<float>`` (or
  ``array<double>``) column of a namespace the write creates as a vector,
  ``fixed_size_list<float32, size>``, which vector indexes and search need
  (the lance-spark connector's table property of the same name; a field's Spark
  metadata key ``arrow.fixed-size-list.size`` does the same). Writing into an
  existing vector column needs no option: arrays of that length are cast to it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql.datasource import CaseInsensitiveDict

from lance_partitioned.catalog.storage import SECRET_KEYS
from lance_partitioned.errors import SchemaError, positive_int
from lance_partitioned.spark.partitioning import PARTITION_BY_OPTION, spark_partitioning_to_spec
from lance_partitioned.spark.planning import DEFAULT_ROWS_PER_TASK, parse_version

SCAN_LOG_ENV = "LANCE_PARTITIONED_SCAN_LOG"
# Set by the Spark extension (jvm/Extensions.java) on a relation it gave a read plan
# of its own; internal, never set by users.
ISOLATED_SCAN_OPTION = "__isolatedScan"
# Set by the extension's provider on a catalog table's relations; internal.
CATALOG_TABLE_OPTION = "__catalogTable"
TIMESTAMP_AS_OF_OPTION = "timestampAsOf"
OVERWRITE_WHERE_OPTION = "__overwriteWhere"
VECTOR_SIZE_SUFFIX = ".arrow.fixed-size-list.size"
DEFAULT_MAX_BUFFER_BYTES = 128 << 20
DEFAULT_MAX_ROWS_PER_FILE = 1 << 20


def _int(options: Mapping[str, str], key: str, default: int | None) -> int | None:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError as exc:
        raise SchemaError(f"option {key!r} must be an integer, got {raw!r}") from exc
    return positive_int(f"option {key!r}", value)


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise SchemaError(f"option {key!r} must be true or false, got {raw!r}")
    return text == "true"


def _timestamp_as_of(options: Mapping[str, str]) -> str | None:
    raw = str(options.get(TIMESTAMP_AS_OF_OPTION) or "").strip()
    if not raw:
        return None
    if parse_version(options.get("version")) is not None:
        raise SchemaError(f"give either option 'version' or {TIMESTAMP_AS_OF_OPTION!r}, not both")
    try:
        dt.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise SchemaError(
            f"option {TIMESTAMP_AS_OF_OPTION!r} must be an ISO 8601 time, got {raw!r}"
        ) from exc
    return raw


@dataclass(frozen=True)
class SourceOptions:
    root: str
    storage_options: dict[str, str] | None
    columns: tuple[str, ...] | None
    version: int | str | None
    timestamp_as_of: str | None  # ISO 8601: the newest version committed by then
    batch_size: int | None
    rows_per_partition: int
    min_partitions: int | None  # None: the default, with a floor on rows per task
    scan_log: str | None
    filter: str | None
    push_filters: bool
    isolated_scan: bool  # this relation's read plan serves one scan (the extension's mark)
    catalog_table: bool  # a catalog table's relation: reads empty before its first write
    spec: str | None  # None: not given; "": explicitly unpartitioned
    # Spark's partitioning of the write's table (partitionBy, a catalog table's), as a spec
    partition_by: str | None
    dynamic_overwrite: bool
    overwrite_where: str | None  # an overwrite replaces only the rows matching it
    max_buffer_bytes: int
    max_rows_per_file: int
    # lowercased column name -> vector dimension (``<column>.arrow.fixed-size-list.size``)
    vector_sizes: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        options = CaseInsensitiveDict(options)
        root = options.get("root") or options.get("path")
        if not root:
            raise SchemaError(
                "lance_partitioned needs the namespace root: load(root) / save(root), "
                "or option('root', ...) (in SQL: OPTIONS (root '...'))"
            )
        storage = {
            k[len("storage.") :]: v for k, v in options.items() if k.lower().startswith("storage.")
        }
        columns = None
        if options.get("columns"):
            columns = tuple(c.strip() for c in str(options["columns"]).split(",") if c.strip())
            if not columns:
                raise SchemaError("option 'columns' is empty; omit it to read every column")
        mode = str(options.get("partitionOverwriteMode") or "static").strip().lower()
        if mode not in ("static", "dynamic"):
            raise SchemaError(
                f"option 'partitionOverwriteMode' must be static or dynamic, got {mode!r}"
            )
        return cls(
            root=str(root),
            storage_options=storage or None,
            columns=columns,
            version=parse_version(options.get("version")),
            timestamp_as_of=_timestamp_as_of(options),
            batch_size=_int(options, "batchSize", None),
            rows_per_partition=_int(options, "rowsPerPartition", DEFAULT_ROWS_PER_TASK)
            or DEFAULT_ROWS_PER_TASK,
            min_partitions=_int(options, "minPartitions", None) or None,
            scan_log=options.get("scanLog") or os.environ.get(SCAN_LOG_ENV) or None,
            filter=(options.get("filter") or "").strip() or None,
            push_filters=_bool(options, "pushFilters", True),
            isolated_scan=_bool(options, ISOLATED_SCAN_OPTION, False),
            catalog_table=_bool(options, CATALOG_TABLE_OPTION, False),
            spec=options.get("spec"),
            partition_by=spark_partitioning_to_spec(options[PARTITION_BY_OPTION])
            if options.get(PARTITION_BY_OPTION)
            else None,
            dynamic_overwrite=mode == "dynamic",
            overwrite_where=(options.get(OVERWRITE_WHERE_OPTION) or "").strip() or None,
            max_buffer_bytes=_int(options, "maxBufferBytes", DEFAULT_MAX_BUFFER_BYTES)
            or DEFAULT_MAX_BUFFER_BYTES,
            max_rows_per_file=_int(options, "maxRowsPerFile", DEFAULT_MAX_ROWS_PER_FILE)
            or DEFAULT_MAX_ROWS_PER_FILE,
            vector_sizes={
                k[: -len(VECTOR_SIZE_SUFFIX)].lower(): _int(options, k, None)  # type: ignore[misc]
                for k in options
                if k.lower().endswith(VECTOR_SIZE_SUFFIX)
            },
        )


# py4j logs every command it sends to the JVM at DEBUG, option values included: a
# ``storage.aws_secret_access_key`` option would be printed in clear.
_PY4J_LOGGERS = ("py4j", "py4j.clientserver", "py4j.java_gateway")
_SECRET_MARKERS = tuple(sorted(SECRET_KEYS, key=len, reverse=True))


class SecretRedactingFilter(logging.Filter):
    """Replace a py4j log record that may carry a storage secret by a fixed text.

    py4j's commands are opaque to us (an option key and its value on separate
    lines, or a whole SQL text), so a record naming any secret storage key is
    redacted whole rather than edited.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage().lower()
        except Exception:
            return True
        if any(marker in text for marker in _SECRET_MARKERS):
            record.msg = "py4j command naming a storage secret (redacted by lance_partitioned)"
            record.args = ()
        return True


def install_log_redaction() -> None:
    """Attach ``SecretRedactingFilter`` to py4j's loggers (once per process)."""
    for name in _PY4J_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SecretRedactingFilter) for f in logger.filters):
            logger.addFilter(SecretRedactingFilter())
