"""What a ``__manifest`` commit did, recorded in the commit itself (``ns.history()``).

Every commit of ``__manifest`` (``catalog.manifest``) takes a ``CommitInfo``
and writes it as the Lance transaction's properties, so the record is part of
the table's own history: it survives, travels with the table and is readable
by plain Lance (``read_transaction(v).transaction_properties``). This module is
the only one that spells those property keys (docs/TRANSACTIONS.md "History").

A commit written by an earlier release or another implementation has none of
them: ``CommitInfo.read`` returns None and history shows ``unknown``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

# The Lance transaction properties of a commit; ``lp.operation`` is also what
# ``ns.restore`` wrote before the rest existed.
OPERATION_KEY = "lp.operation"
PARAMETERS_KEY = "lp.parameters"
ROWS_ADDED_KEY = "lp.rows_added"
ROWS_REMOVED_KEY = "lp.rows_removed"
PARTITIONS_KEY = "lp.partitions"

UNKNOWN = "unknown"


def _count(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


@dataclass(frozen=True)
class CommitInfo:
    """One commit's record: ``operation`` (``append``, ``delete``, ``merge``, ...), its
    ``parameters`` (JSON-serialisable: filter text, mode, spec, keys), the rows it
    added and removed, and the partitions it touched (None: not known).

    ``partitions`` left None on a commit of rows is filled by ``Manifest.commit``
    from the table rows the commit publishes or removes.
    """

    operation: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    rows_added: int | None = None
    rows_removed: int | None = None
    partitions: int | None = None

    def with_counts(self, **counts: int | None) -> CommitInfo:
        """A copy with the given counts (``rows_added``, ``rows_removed``, ``partitions``)."""
        return replace(self, **counts)

    def parameters_json(self) -> str:
        """The parameters as compact JSON text (keys sorted; other values as strings)."""
        return json.dumps(dict(self.parameters), sort_keys=True, separators=(",", ":"), default=str)

    def properties(self) -> dict[str, str]:
        """The Lance transaction properties that record this commit (NULL counts have no key)."""
        out = {OPERATION_KEY: self.operation, PARAMETERS_KEY: self.parameters_json()}
        counts = {
            ROWS_ADDED_KEY: self.rows_added,
            ROWS_REMOVED_KEY: self.rows_removed,
            PARTITIONS_KEY: self.partitions,
        }
        out.update({k: str(int(v)) for k, v in counts.items() if v is not None})
        return out

    @classmethod
    def read(cls, properties: Mapping[str, str] | None) -> CommitInfo | None:
        """The record in a commit's transaction ``properties``; None when it has none
        (a commit of an earlier release or of another writer)."""
        props = properties or {}
        operation = props.get(OPERATION_KEY)
        if not operation:
            return None
        try:
            parameters = json.loads(props.get(PARAMETERS_KEY) or "{}")
        except ValueError:
            parameters = {}
        return cls(
            operation,
            parameters if isinstance(parameters, dict) else {},
            _count(props.get(ROWS_ADDED_KEY)),
            _count(props.get(ROWS_REMOVED_KEY)),
            _count(props.get(PARTITIONS_KEY)),
        )


def merged(info: CommitInfo | None, properties: Mapping[str, str] | None) -> dict[str, str]:
    """``properties`` (others of the same transaction) with ``info``'s record added."""
    out = dict(properties or {})
    if info is not None:
        out.update(info.properties())
    return out
