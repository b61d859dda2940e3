"""The inputs of a storage-partitioned join: join types, sides and key pairs.

Normalises what a caller passes to ``plan_join`` (a ``Side``, a root, a
namespace handle or a ``(source, filter[, columns])`` tuple; ``on`` as names or
pairs; ``how`` in Spark's or pandas' spelling) and says over which input each
join type distributes, which decides what can fall back part by part.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lance_partitioned.catalog.manifest import Manifest
from lance_partitioned.catalog.snapshot import Snapshot
from lance_partitioned.operations.read.scan_filter import FilterLike

JOIN_TYPES = ("inner", "left", "right", "full", "semi", "anti")
_HOW_ALIASES = {
    "inner": "inner",
    "left": "left",
    "leftouter": "left",
    "left_outer": "left",
    "right": "right",
    "rightouter": "right",
    "right_outer": "right",
    "full": "full",
    "outer": "full",
    "fullouter": "full",
    "full_outer": "full",
    "semi": "semi",
    "leftsemi": "semi",
    "left_semi": "semi",
    "anti": "anti",
    "leftanti": "anti",
    "left_anti": "anti",
}


def normalize_how(how: str) -> str:
    """The canonical join type (``inner``, ``left``, ``right``, ``full``, ``semi``, ``anti``)."""
    key = str(how).lower().replace(" ", "_")
    if key not in _HOW_ALIASES:
        raise ValueError(f"unknown join type {how!r}; use one of {list(JOIN_TYPES)}")
    return _HOW_ALIASES[key]


def splits_over_left(how: str) -> bool:
    """True when the join distributes over a split of the left input:
    ``(L1 ∪ L2) op R == (L1 op R) ∪ (L2 op R)`` (each left row's output needs only
    that row and all of R)."""
    return how in ("inner", "left", "semi", "anti")


def splits_over_right(how: str) -> bool:
    """The mirror image of ``splits_over_left``."""
    return how in ("inner", "right")


# -- inputs -------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One input of a join: a namespace (root path or open handle), an optional filter
    (SQL text, pyarrow/DataFusion expression) and the columns to output.

    The filter applies to this input *before* the join (like a subquery), so it
    also prunes partitions. ``columns=None`` outputs every column; join keys are
    always read. An open ``PartitionedNamespace`` is read at its pinned version
    unless ``version`` is given.
    """

    source: Any
    filter: FilterLike = None
    columns: Sequence[str] | None = None
    version: int | str | None = None
    storage_options: dict[str, str] | None = field(default=None, hash=False)

    def snapshot(self) -> Snapshot:
        """Pin the ``__manifest`` version this side reads (done once, at planning)."""
        src = self.source
        if hasattr(src, "snapshot") and hasattr(src, "manifest"):  # a PartitionedNamespace
            if self.version is None:
                return src.snapshot
            return Snapshot.load(src.manifest, self.version)
        return Snapshot.load(Manifest(os.fspath(src), self.storage_options), self.version)


SideLike = Any  # Side | str | os.PathLike | PartitionedNamespace | tuple(source, filter[, columns])


def as_side(obj: SideLike) -> Side:
    """Accept a ``Side``, a root, a namespace handle, or ``(source, filter[, columns])``."""
    if isinstance(obj, Side):
        return obj
    if isinstance(obj, tuple):
        if not 1 <= len(obj) <= 3:
            raise ValueError(f"a side tuple is (source, filter[, columns]), got {obj!r}")
        return Side(*obj)
    return Side(obj)


def normalize_on(on: Any) -> tuple[tuple[str, str], ...]:
    """Join keys as (left column, right column) pairs.

    ``"k"``, ``["a", "b"]`` (same names on both sides), ``[("customer_id", "id")]``,
    or a mix.
    """
    if isinstance(on, str):
        return ((on, on),)
    pairs = []
    for item in on:
        if isinstance(item, str):
            pairs.append((item, item))
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            pairs.append((str(item[0]), str(item[1])))
        else:
            raise ValueError(
                f"join key must be a column name or a (left, right) pair, got {item!r}"
            )
    if not pairs:
        raise ValueError("a join needs at least one key")
    return tuple(pairs)
