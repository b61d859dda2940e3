"""Leaf tables as Arrow columns: a plan of a million partitions without a million objects.

``Snapshot.leaf_table`` reads the ``__manifest`` table rows a query selects and
keeps them as one Arrow table, with each row's spec version computed column-wise.
A ``LeafTable`` is a read-only ``Sequence[Leaf]``: ``len`` is free, and ``Leaf``
tuples are built only for the rows a consumer indexes or iterates (iteration
converts a block of rows at a time). Consumers that can work on columns (counts,
residual filters: ``operations.read.scan``) read ``rows`` and ``spec_ids`` directly.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_partitioned.catalog.layout import join_id, spec_namespace

# What a ``Leaf`` is made of, besides the partition columns of every spec.
LEAF_COLUMNS = ("object_id", "location", "read_version", "read_branch", "read_tag")
# Rows converted to Python objects at a time while iterating.
BLOCK = 8192
# A table row belongs to spec version N when its object id's first level is ``v<N>``
# (``layout.spec_id_of_namespace``); anything else is another tool's table.
_SPEC_HEAD = r"^v(?P<sid>[0-9]{1,9})(?:\$|$)"


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building many small objects.

    A plan of a million partitions creates millions of tuples; each allocation
    burst triggers collections that re-scan every live object, which made up
    two thirds of the cost at 100,000 partitions. The objects built (tuples of
    strings and numbers) cannot form cycles, so nothing is lost by collecting
    after. Re-enabled on exit only if it was enabled on entry.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Leaf(NamedTuple):
    """One partition table as the manifest lists it (a tuple: plans build thousands)."""

    object_id: str
    location: str
    spec_id: int
    values: tuple[Any, ...]  # partition values in spec field order
    read_version: int | None = None
    read_branch: str | None = None
    read_tag: str | None = None

    def version_ref(self) -> int | str | tuple[str, int] | None:
        """The row's read columns as Lance names a version (what ``checkout_version``
        takes): a tag, ``(branch, version or None)``, a main version, or None (latest
        main). ``catalog.leaf_open`` opens and resolves leaves by it."""
        if self.read_tag is not None:
            return self.read_tag
        if self.read_branch is not None:
            return (
                (self.read_branch, self.read_version)
                if self.read_version is not None
                else (self.read_branch, None)
            )
        return self.read_version


def spec_ids_of(object_ids: pa.ChunkedArray | pa.Array, known: Sequence[int] = ()) -> pa.Array:
    """Each object id's spec version (int64), null for ids outside every ``v<N>`` namespace.

    Ids starting ``v<N>$`` for a spec id in ``known`` are matched by prefix (a
    byte comparison); only the rest go through the regular expression.
    """
    if len(object_ids) == 0:
        return pa.array([], pa.int64())
    if isinstance(object_ids, pa.ChunkedArray):
        object_ids = object_ids.combine_chunks()
    out = pa.nulls(len(object_ids), pa.int64())
    for sid in known:
        hit = pc.starts_with(object_ids, join_id(spec_namespace(sid), ""))
        out = pc.if_else(hit, pa.scalar(sid, pa.int64()), out)
    rest = pc.is_null(out)
    if pc.any(rest).as_py():
        heads = pc.struct_field(pc.extract_regex(object_ids, _SPEC_HEAD), [0])
        out = pc.if_else(rest, pc.cast(heads, pa.int64()), out)
    return out


class LeafTable(Sequence[Leaf]):
    """The leaf rows of one ``__manifest`` query, in manifest order, as columns.

    ``rows`` holds ``LEAF_COLUMNS``, the partition columns of ``fields`` (spec id
    -> its partition column names, in field order) and any extra column the
    query asked for; ``spec_ids`` (numpy int64) gives each row's spec version.
    Behaves as a list of ``Leaf`` for ``len``, indexing, slicing (a list),
    iteration and ``==``.
    """

    def __init__(self, rows: pa.Table, spec_ids: np.ndarray, fields: Mapping[int, Sequence[str]]):
        self.rows = rows
        self.spec_ids = spec_ids
        self.fields = {sid: tuple(cols) for sid, cols in fields.items()}

    def __len__(self) -> int:
        return self.rows.num_rows

    @overload
    def __getitem__(self, index: int) -> Leaf: ...
    @overload
    def __getitem__(self, index: slice) -> list[Leaf]: ...
    def __getitem__(self, index: int | slice) -> Leaf | list[Leaf]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self._block(start, stop - start) if stop > start else []
            return [self._block(i, 1)[0] for i in range(start, stop, step)]
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"leaf index {index} out of range ({n} leaves)")
        return self._block(index % n, 1)[0]

    def __iter__(self) -> Iterator[Leaf]:
        for start in range(0, len(self), BLOCK):
            yield from self._block(start, BLOCK)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable-list semantics: unhashable

    def __repr__(self) -> str:
        return f"LeafTable({len(self)} leaves)"

    def take(self, indices: Sequence[int] | np.ndarray) -> list[Leaf]:
        """The leaves at ``indices`` (row positions), in that order."""
        idx = np.asarray(indices, dtype=np.int64)
        if len(idx) == 0:
            return []
        sub = LeafTable(self.rows.take(pa.array(idx)), self.spec_ids[idx], self.fields)
        return list(sub)

    def _block(self, start: int, length: int) -> list[Leaf]:
        """``Leaf`` tuples of rows ``start .. start + length``."""
        with paused_gc():
            # Leaf._make is tuple.__new__ on each zipped row (no per-row Python call)
            return list(map(Leaf._make, zip(*self.block_columns(start, length), strict=True)))

    def block_columns(self, start: int, length: int) -> tuple[Any, ...]:
        """Rows ``start .. start + length`` as ``Leaf``'s fields, column by column: Python
        lists (``values``: an iterable of per-row tuples), for building tuples fast."""
        part = self.rows.slice(start, length)
        sids = self.spec_ids[start : start + part.num_rows].tolist()
        present = set(sids)
        values: Any
        if len(present) <= 1:  # one spec version (the usual case): its values, row by row
            cols = [part.column(c).to_pylist() for c in self.fields[sids[0]]] if sids else []
            values = zip(*cols, strict=True) if cols else itertools.repeat((), len(sids))
        else:
            by_spec = {}
            for sid in present:
                cols = [part.column(c).to_pylist() for c in self.fields[sid]]
                by_spec[sid] = list(zip(*cols, strict=True)) if cols else [()] * len(sids)
            values = (by_spec[sid][i] for i, sid in enumerate(sids))
        return (
            part.column("object_id").to_pylist(),
            part.column("location").to_pylist(),
            sids,
            values,
            part.column("read_version").to_pylist(),
            part.column("read_branch").to_pylist(),
            part.column("read_tag").to_pylist(),
        )
