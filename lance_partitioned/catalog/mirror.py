"""Partition values as text: the Appendix E string form and the ``metadata`` mirror.

A row of ``__manifest`` keeps its partition values twice: typed, in the
``partition_field_<id>`` columns, and as strings in its ``metadata`` JSON under
``partition.<field_id>`` (the mirror), which survives a foreign writer that drops
our columns (``catalog.repair`` rebuilds the columns from it).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pyarrow as pa

MIRROR_PREFIX = "partition."


def format_partition_value(value: Any) -> str | None:
    """The Appendix E string form of a partition value (dates as ISO ``yyyy-mm-dd``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return str(value)


def parse_partition_value(text: str | None, arrow_type: pa.DataType) -> Any:
    """Inverse of ``format_partition_value`` for one Arrow type."""
    if text is None:
        return None
    if (
        pa.types.is_binary(arrow_type)
        or pa.types.is_large_binary(arrow_type)
        or pa.types.is_fixed_size_binary(arrow_type)
    ):
        return bytes.fromhex(text)
    if pa.types.is_boolean(arrow_type):
        return text == "true"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return text
    return pa.scalar(text).cast(arrow_type).as_py()


def mirror_values(values: dict[str, Any]) -> dict[str, Any]:
    """``mirror_metadata`` before JSON encoding: ``{"partition.<field_id>": "<value>"}``."""
    return {
        MIRROR_PREFIX + k: format_partition_value(v) for k, v in values.items() if v is not None
    }


def mirror_metadata(values: dict[str, Any]) -> str:
    """The ``metadata`` JSON of a row: ``{"partition.<field_id>": "<value>"}``.

    A NULL value has no key: DirectoryNamespace reads properties as strings and
    rejects JSON null, and a table row lists every field of its spec, so a
    missing key can only mean NULL.
    """
    return json.dumps(mirror_values(values), separators=(",", ":"), ensure_ascii=False)
