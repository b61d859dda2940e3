"""Rows waiting to be written, per partition, counted against a memory budget.

``split.partition_ranges`` reorders each input batch once so that every
partition's rows are one contiguous range of it. The buffers keep those ranges
as slices of the shared reordered batch instead of copying each partition's
rows out (one copy fewer per row; the copy Lance is handed is made when a
partition is written, ``chunks_for_lance``, on the flush threads beside Lance's
one encoding thread).

The budget counts each shared batch once, for as long as any partition still
holds rows of it, so ``total_bytes`` is what the buffers really keep alive.
Writing some partitions frees nothing while others hold rows of the same
batches; ``compact`` then copies the rows that remain into batches of their own,
one shared batch at a time (the extra memory at any moment is one batch's
remaining rows), after which the written rows' memory is free.

Thread safety: ``pop`` and ``release`` may run on flush threads; ``add`` and
``compact`` run on the writer's own thread while no flush is under way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

Key = tuple[Any, ...]


class SharedRows:
    """One reordered input batch and how many buffered pieces still point into it."""

    __slots__ = ("batch", "nbytes", "pieces")

    def __init__(self, batch: pa.RecordBatch, nbytes: int, pieces: int):
        self.batch = batch
        self.nbytes = nbytes
        self.pieces = pieces


class Piece:
    """One partition's rows of one shared batch: ``batch[start : start + length]``."""

    __slots__ = ("shared", "start", "length")

    def __init__(self, shared: SharedRows, start: int, length: int):
        self.shared = shared
        self.start = start
        self.length = length

    @property
    def whole(self) -> bool:
        """The piece is its shared batch entire (no slice, nothing else held)."""
        return self.start == 0 and self.length == self.shared.batch.num_rows

    @property
    def nbytes(self) -> int:
        """Its share of the shared batch's bytes (by rows)."""
        return self.shared.nbytes * self.length // max(1, self.shared.batch.num_rows)

    def rows(self) -> pa.RecordBatch:
        return self.shared.batch if self.whole else self.shared.batch.slice(self.start, self.length)


class PartitionBuffers:
    """Buffered rows per partition key, as pieces of shared batches.

    >>> b = pa.record_batch({"k": [1, 1, 2]})
    >>> bufs = PartitionBuffers()
    >>> bufs.add(b, [((1,), 0, 2), ((2,), 2, 1)], b.nbytes)
    >>> bufs.rows((1,)), bufs.total_bytes == b.nbytes
    (2, True)
    >>> bufs.release(bufs.pop((1,)))  # (2,) still holds rows of the batch
    >>> bufs.total_bytes == b.nbytes
    True
    >>> bufs.compact()  # (2,)'s row copied out: the batch is freed
    >>> bufs.total_bytes < b.nbytes
    True
    """

    def __init__(self, memory_pool: pa.MemoryPool | None = None):
        self._pieces: dict[Key, list[Piece]] = {}
        self._rows: dict[Key, int] = {}
        self._bytes: dict[Key, int] = {}
        self._pool = memory_pool
        self.total_bytes = 0
        self._lock = threading.Lock()

    def __contains__(self, key: Key) -> bool:
        return key in self._pieces

    def __len__(self) -> int:
        return len(self._pieces)

    def keys(self) -> list[Key]:
        return list(self._pieces)

    def rows(self, key: Key) -> int:
        return self._rows.get(key, 0)

    def largest_first(self) -> list[tuple[Key, int]]:
        """``(key, bytes)`` of every buffered partition, most bytes first."""
        return sorted(self._bytes.items(), key=lambda kv: kv[1], reverse=True)

    def add(self, batch: pa.RecordBatch, ranges: list[tuple[Key, int, int]], nbytes: int) -> None:
        """Buffer ``batch``'s ranges (``partition_ranges``); the batch counts ``nbytes``."""
        if not ranges:
            return
        shared = SharedRows(batch, nbytes, len(ranges))
        with self._lock:
            self.total_bytes += nbytes
            for key, start, length in ranges:
                piece = Piece(shared, start, length)
                self._pieces.setdefault(key, []).append(piece)
                self._rows[key] = self._rows.get(key, 0) + length
                self._bytes[key] = self._bytes.get(key, 0) + piece.nbytes

    def pop(self, key: Key) -> list[Piece]:
        """Take ``key``'s pieces out of the buffers; they stay counted until ``release``."""
        with self._lock:
            self._rows.pop(key, None)
            self._bytes.pop(key, None)
            return self._pieces.pop(key, [])

    def release(self, pieces: list[Piece]) -> None:
        """Written (or abandoned): a shared batch no piece points into stops counting."""
        with self._lock:
            for piece in pieces:
                piece.shared.pieces -= 1
                if piece.shared.pieces == 0:
                    self.total_bytes -= piece.shared.nbytes

    def compact(self) -> None:
        """Copy the buffered rows of every batch that other partitions' rows were
        written from into one compact batch per shared batch, freeing the old one.

        A shared batch that only buffered pieces point into (none written yet) is
        left alone: copying it would free nothing.
        """
        by_shared: dict[int, list[Piece]] = {}
        for pieces in self._pieces.values():
            for piece in pieces:
                by_shared.setdefault(id(piece.shared), []).append(piece)
        for held in by_shared.values():
            old = held[0].shared
            if len(held) == old.pieces and sum(p.length for p in held) == old.batch.num_rows:
                continue
            held.sort(key=lambda p: p.start)
            batch = pa.concat_batches([p.rows() for p in held], memory_pool=self._pool)
            shared = SharedRows(batch, batch.get_total_buffer_size(), len(held))
            start = 0
            for piece in held:
                piece.shared, piece.start = shared, start
                start += piece.length
            self.total_bytes += shared.nbytes - old.nbytes
            old.pieces = 0
        self._bytes = {key: sum(p.nbytes for p in ps) for key, ps in self._pieces.items()}


def chunks_for_lance(
    pieces: list[Piece],
    max_rows: int,
    max_bytes: int,
    pass_rows: int,
    memory_pool: pa.MemoryPool | None = None,
) -> Iterator[pa.RecordBatch]:
    """Consume ``pieces`` (emptying the list) as batches of at most ``max_rows`` rows
    and ``max_bytes`` bytes (or one piece, when that alone is larger).

    A whole batch of ``pass_rows`` rows or more goes to Lance as it is; slices and
    runs of smaller pieces are copied into compact batches first (Lance encodes a
    slice of a larger batch far slower, and pays per batch on its one encoding
    thread). Each piece is dropped from the list as it is used.
    """
    pieces.reverse()  # pop from the end: O(1) per piece
    while pieces:
        run = [pieces.pop()]
        if run[0].whole and run[0].length >= pass_rows:
            yield run.pop().rows()
            continue
        rows, size = run[0].length, run[0].nbytes
        while (
            pieces
            and not (pieces[-1].whole and pieces[-1].length >= pass_rows)
            and rows + pieces[-1].length <= max_rows
            and size + pieces[-1].nbytes <= max_bytes
        ):
            rows += pieces[-1].length
            size += pieces[-1].nbytes
            run.append(pieces.pop())
        yield pa.concat_batches([p.rows() for p in run], memory_pool=memory_pool)
        del run
