"""A streaming write holds about ``max_buffer_bytes`` of Arrow memory, never a multiple of it.

Measured without timing or sampling threads: the Arrow bytes allocated (in every
pool a write uses, ``split.write_memory_pools``) are read each time Lance is
handed data to write (the call to ``write_fragments`` and every batch Lance
pulls from what it was given). The input is a generator
of fresh batches, so what is allocated beyond the starting point is what the
write itself holds: its buffers, the batches in flight and any copy it makes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lance_partitioned as lp
from lance_partitioned.operations.write import partition_writer
from lance_partitioned.operations.write.split import write_memory_pool, write_memory_pools

MIB = 1 << 20
SCHEMA = pa.schema([pa.field("k", pa.int64()), pa.field("payload", pa.string())])
BATCH_ROWS = 2048
PAYLOAD = 240  # bytes per row: a batch is about 0.5 MiB


def batches(n: int, partitions: int) -> Iterator[pa.RecordBatch]:
    """``n`` fresh batches; row i of batch b has k = (b * BATCH_ROWS + i) % partitions."""
    for b in range(n):
        ids = pa.array(range(b * BATCH_ROWS, (b + 1) * BATCH_ROWS), pa.int64())
        keys = pc.remainder(ids, partitions)
        payload = pa.array([f"{b:08d}".ljust(PAYLOAD, "x")] * BATCH_ROWS, pa.string())
        yield pa.RecordBatch.from_arrays([keys, payload], schema=SCHEMA)


def arrow_bytes() -> int:
    """Arrow memory allocated now, in every pool a write allocates from."""
    return sum(pool.bytes_allocated() for pool in write_memory_pools())


@pytest.fixture
def peak(monkeypatch) -> dict[str, int]:
    """Records the Arrow bytes allocated whenever Lance takes data from the writer."""
    seen = {"peak": 0}
    real = partition_writer.write_fragments

    def note() -> None:
        seen["peak"] = max(seen["peak"], arrow_bytes())

    def watched(data, *args, **kwargs):
        note()
        if isinstance(data, pa.Table):
            data = data.to_reader()

        def pulled() -> Iterator[pa.RecordBatch]:
            for batch in data:
                note()
                yield batch

        return real(pa.RecordBatchReader.from_batches(data.schema, pulled()), *args, **kwargs)

    monkeypatch.setattr(partition_writer, "write_fragments", watched)
    return seen


@pytest.mark.parametrize("partitions", [1, 6])
def test_streaming_write_holds_about_the_buffer(tmp_path, peak, partitions):
    budget = 16 * MIB
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    start = arrow_bytes()
    n = 96  # about 48 MiB of input: three times the budget
    result = ns.append(batches(n, partitions), max_buffer_bytes=budget, progress=False)
    assert result.rows == n * BATCH_ROWS
    held = peak["peak"] - start
    # The budget, plus what is in flight: two input batches being split (each
    # coalesced up to a 1 MiB chunk, and its split copy) and one 1 MiB chunk per
    # leaf being written (4 at once): about 8 MiB. A write that copies a whole
    # partition when it flushes, or splits 32 MiB batches, holds ~2x the budget.
    assert held <= budget + 10 * MIB, (
        f"the write held {held / MIB:.1f} MiB for a {budget / MIB:.0f} MiB budget"
    )
    # everything arrived, in the right partitions (pyarrow is the oracle)
    got = ns.scan().to_arrow()
    assert got.num_rows == n * BATCH_ROWS
    want = pa.concat_batches(list(batches(n, partitions)))
    assert sorted(got["k"].value_counts().to_pylist(), key=lambda d: d["values"]) == sorted(
        want["k"].value_counts().to_pylist(), key=lambda d: d["values"]
    )


def test_partition_ranges_group_rows_in_input_order():
    """Each partition's rows are one contiguous range of the reordered batch, in input order."""
    from lance_partitioned.operations.write.split import partition_ranges

    batch = next(batches(1, 6))
    ordered, ranges = partition_ranges(batch, [batch.column("k")])
    assert len(ranges) == 6
    assert sum(length for _, _, length in ranges) == batch.num_rows
    for key, start, length in ranges:
        # pyarrow is the oracle: the rows of this key, in input order
        want = batch.filter(pc.equal(batch.column("k"), key[0]))
        assert ordered.slice(start, length).equals(want)


def test_a_flush_round_frees_what_it_wrote(tmp_path, monkeypatch):
    """Partitions left buffered after a round share input batches with the rows just
    written; they are copied out, so the budget's count falls by what was written
    and the memory really is freed (Arrow's allocated bytes fall with it)."""
    monkeypatch.setattr(partition_writer.resident, "resident_bytes", lambda: None)
    after: list[tuple[int, int, int]] = []
    real_flush = partition_writer.PartitionWriter._flush_many

    def flush_many(self, keys, last=False):
        real_flush(self, keys, last)
        if not last:
            left = self.buffers.keys()
            buffered = sum(p.length for k in left for p in self.buffers._pieces[k])
            after.append((self.buffers.total_bytes, buffered, len(left)))

    real_compact = partition_writer.PartitionBuffers.compact
    counted: list[int] = []

    def compact(self):
        real_compact(self)
        counted.append(self.total_bytes)
        # every batch still held is held whole by what is buffered: no written rows kept
        held = {id(p.shared): p.shared for k in self.keys() for p in self._pieces[k]}
        for shared in held.values():
            rows = sum(p.length for k in self.keys() for p in self._pieces[k] if p.shared is shared)
            assert rows == shared.batch.num_rows

    monkeypatch.setattr(partition_writer.PartitionWriter, "_flush_many", flush_many)
    monkeypatch.setattr(partition_writer.PartitionBuffers, "compact", compact)
    budget = 8 * MIB
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    n = 48  # 24 MiB through an 8 MiB budget, 6 partitions in every batch
    ns.append(batches(n, 6), max_buffer_bytes=budget, progress=False)
    assert after, "no flush round before the end"
    assert all(left > 0 for _, _, left in after), after  # halving leaves partitions buffered
    assert all(total <= budget for total in counted), counted
    got = ns.scan().to_arrow()
    assert got.num_rows == n * BATCH_ROWS
    want = pa.concat_batches(list(batches(n, 6)))
    assert pc.sum(got["k"]).as_py() == pc.sum(want["k"]).as_py()


def _count_flush_rounds(monkeypatch) -> list[str]:
    """Records, in order, each flush round during the stream ("flush") and each heap trim."""
    events: list[str] = []
    real_flush = partition_writer.PartitionWriter._flush_many

    def flush_many(self, keys, last=False):
        events.append("finish" if last else "flush")
        return real_flush(self, keys, last)

    monkeypatch.setattr(partition_writer.PartitionWriter, "_flush_many", flush_many)
    monkeypatch.setattr(partition_writer.resident, "trim_heap", lambda: events.append("trim"))
    return events


def test_heap_trimmed_after_every_flush_round(tmp_path, monkeypatch):
    """glibc keeps the heap Lance's threads freed unless asked: each round ends with a trim."""
    events = _count_flush_rounds(monkeypatch)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(batches(48, 3), max_buffer_bytes=4 * MIB, progress=False)
    rounds = events.count("flush")
    assert rounds >= 3, events  # 24 MiB of input through a 4 MiB budget
    assert events.count("trim") == rounds + 1, events  # each round, and the finish
    for i, event in enumerate(events):
        if event in ("flush", "finish"):
            assert events[i + 1] == "trim", events


def test_trim_heap_is_safe_to_call():
    """On glibc it calls malloc_trim; elsewhere it does nothing. Never raises."""
    import platform

    from lance_partitioned.operations.write import resident

    ran = resident.trim_heap()
    assert ran == (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
    now = resident.resident_bytes()
    if platform.system() == "Linux":
        assert now is not None and now > 0


@pytest.mark.parametrize(
    ("growth", "flushes_midway"),
    [
        (None, False),  # resident memory unknown (not Linux): the Arrow count only
        (0, False),  # nothing grew: the rows fit the budget, written once at the end
        (10 * 64 * MIB, True),  # grown past the budget: flush though the rows fit
    ],
)
def test_resident_growth_past_the_budget_flushes(tmp_path, monkeypatch, growth, flushes_midway):
    """Memory the Arrow count misses (allocator overhead, the reader, Lance's heap) counts.

    The resident memory is simulated: the process's real one moves with whatever
    else pytest does. 24 MiB of rows under a 64 MiB budget never exceed the Arrow
    count, so only the resident rule can flush before the end.
    """
    base = 1 << 30
    readings = iter([base] + [None if growth is None else base + growth] * 10_000)
    if growth is None:
        readings = iter([None] * 10_000)
    monkeypatch.setattr(partition_writer.resident, "resident_bytes", lambda: next(readings))
    events = _count_flush_rounds(monkeypatch)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    n = 48
    result = ns.append(batches(n, 2), max_buffer_bytes=64 * MIB, progress=False)
    assert ("flush" in events) == flushes_midway, events
    assert result.rows == n * BATCH_ROWS
    got = ns.scan().to_arrow()  # every row arrived once (pyarrow is the oracle)
    assert got.num_rows == n * BATCH_ROWS
    assert pc.sum(got["k"]).as_py() == pc.sum(pa.concat_batches(list(batches(n, 2)))["k"]).as_py()


def test_resident_rule_keeps_a_floor_of_buffered_rows(tmp_path, monkeypatch):
    """Memory the writer cannot free (someone else's) does not shrink its flushes to a trickle.

    Resident memory stays over the budget throughout; the writer still waits for a
    quarter of the budget of rows before each flush round, and then flushes them all.
    """
    base = 1 << 30
    readings = iter([base] + [base + (1 << 40)] * 10_000)
    monkeypatch.setattr(partition_writer.resident, "resident_bytes", lambda: next(readings))
    sizes: list[int] = []
    whole: list[bool] = []
    real_flush = partition_writer.PartitionWriter._flush_many

    def flush_many(self, keys, last=False):
        if not last:
            sizes.append(self.buffers.total_bytes)
            whole.append(set(keys) == set(self.buffers.keys()))
        return real_flush(self, keys, last)

    monkeypatch.setattr(partition_writer.PartitionWriter, "_flush_many", flush_many)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    budget = 16 * MIB
    ns.append(batches(48, 6), max_buffer_bytes=budget, progress=False)
    assert sizes, "the resident rule never flushed"
    assert min(sizes) >= budget // partition_writer.RESIDENT_MIN_SHARE
    # resident pressure flushes every buffer: pieces left behind keep pages resident
    assert all(whole), whole


def test_a_slice_written_whole_counts_the_rows_it_spans(tmp_path, monkeypatch):
    """An input batch that goes to one partition whole is not copied: it may be a
    slice of the caller's far larger buffers. It counts the bytes it spans, so a
    budget several times one slice's rows is not "full" after every batch.
    """
    monkeypatch.setattr(partition_writer.resident, "resident_bytes", lambda: None)
    events = _count_flush_rounds(monkeypatch)
    n = 400_000
    payload = pa.array([f"{i:012d}".ljust(48, "y") for i in range(n)], pa.string())
    table = pa.table({"k": pa.array([7] * n, pa.int64()), "payload": payload}, schema=SCHEMA)
    slices = table.to_batches(max_chunksize=50_000)  # zero-copy views of one chunk
    spanned = slices[0].nbytes
    assert slices[0].get_total_buffer_size() > 5 * spanned  # each reports all the buffers
    budget = 4 * spanned  # 8 slices of rows: about 2 flush rounds
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(iter(slices), max_buffer_bytes=budget, progress=False)
    assert 1 <= events.count("flush") <= 3, events  # counted as whole buffers: 8 rounds
    got = ns.scan().to_arrow()
    assert got.num_rows == n and pc.sum(got["k"]).as_py() == 7 * n


def test_write_buffers_come_from_jemalloc_when_pyarrow_has_it():
    """jemalloc at decay 0 returns what a flush frees at once: a Spark task at a
    128 MiB budget peaked at 448 MiB with it and 608 MiB with Arrow's default pool
    (goal 640). Without jemalloc in this pyarrow, the default pool is used."""
    try:
        pa.jemalloc_memory_pool()
    except (NotImplementedError, pa.ArrowNotImplementedError):
        assert write_memory_pool().backend_name == pa.default_memory_pool().backend_name
        return
    assert write_memory_pool().backend_name == "jemalloc"


def test_chunks_for_lance_are_copied_through_the_chunk_pool(tmp_path, monkeypatch):
    """A flush copies the chunks it hands Lance through ``chunk_memory_pool`` (glibc's
    malloc keeps a freed chunk's pages for the next one), not the bounded pool, whose
    decay 0 faults every chunk's pages in afresh; and those bytes are counted."""
    seen: list[str] = []
    real = partition_writer.chunks_for_lance

    def spy(pieces, max_rows, max_bytes, pass_rows, memory_pool=None):
        seen.append(memory_pool.backend_name)
        yield from real(pieces, max_rows, max_bytes, pass_rows, memory_pool)

    monkeypatch.setattr(partition_writer, "chunks_for_lance", spy)
    ns = lp.create(str(tmp_path / "ns"), SCHEMA, "k")
    ns.append(batches(4, 3), progress=False)
    assert seen == ["system"] * 3
    assert "system" in {pool.backend_name for pool in write_memory_pools()}


@pytest.mark.parametrize(
    ("columns", "dictionary_coded"),
    [
        # year and month: both offset-coded
        ({"y": pa.array([1998, 1992, None]), "m": pa.array([12, 1, 5])}, []),
        # two values 40,000 apart: offsets would leave the radix sort, so a dictionary
        ({"k": pa.array([0, 40_000, 0], pa.int32())}, ["k"]),
        # spans of 200 and 201: the product passes 2**15, so the second is a dictionary
        ({"g": pa.array(range(200)), "h": pa.array(range(201, 401)[:200])}, ["h"]),
        # not integers: dictionaries
        ({"s": pa.array(["a", "b", None]), "d": pa.array([1.5, 2.5, 1.5])}, ["s", "d"]),
    ],
    ids=["year-month", "sparse", "past-radix", "not-integers"],
)
def test_integer_keys_are_offset_coded_while_radix_sortable(columns, dictionary_coded, monkeypatch):
    """Offset codes (cheap, not dense) only while the combined codes stay below
    2**15; past that, dense dictionary codes keep the radix sort where they can."""
    from lance_partitioned.operations.write import split

    encoded: list[pa.Array] = []
    real = split.pc.dictionary_encode

    def spy(arr, *args, **kwargs):
        encoded.append(arr)
        return real(arr, *args, **kwargs)

    monkeypatch.setattr(split.pc, "dictionary_encode", spy)
    batch = pa.record_batch(columns)
    split.partition_ranges(batch, [batch.column(n) for n in columns])
    assert [n for n in columns if any(a.equals(batch.column(n)) for a in encoded)] == (
        dictionary_coded
    )


def _rows_of_key(batch: pa.RecordBatch, names: list[str], key: tuple) -> pa.RecordBatch:
    """pyarrow's own filter is the oracle: the rows whose columns equal ``key`` (NULL
    matching NULL), in input order."""
    mask = pa.array([True] * batch.num_rows)
    for name, value in zip(names, key, strict=True):
        col = batch.column(name)
        if value is None:
            mask = pc.and_(mask, pc.is_null(col))
        else:
            mask = pc.and_(mask, pc.fill_null(pc.equal(col, pa.scalar(value, col.type)), False))
    return batch.filter(mask)


PRIMES = (3, 7, 11, 13, 17, 19, 21)  # coprime with 1,000: each column takes 1,000 values


@pytest.mark.parametrize(
    "columns",
    [
        {"y": pa.array([1998, 1992, 1998, 1995, 1992] * 40, pa.int64())},
        {"y": pa.array([3, 1, 2] * 50, pa.int32()), "m": pa.array([12, 1] * 75, pa.int8())},
        # the extremes of the integer types
        {"u": pa.array([2**64 - 1, 2**64 - 3, 2**64 - 1, 0] * 10, pa.uint64())},
        {"i": pa.array([-(2**63), -(2**63) + 5, 2**63 - 1] * 10, pa.int64())},
        # NULLs (a code of their own), strings, a wide span
        {"n": pa.array([1, None, 1, 2, None] * 20, pa.int64())},
        # offsets past the type (int8 -100..100: 0..200) as the second key, where a
        # wrapped offset would collide with another first-key value's codes
        {
            "c": pa.array([0, 1] * 201, pa.int16()),
            "b": pa.array([*range(-100, 101), *range(100, -101, -1)], pa.int8()),
        },
        {
            "b": pa.array([*range(-128, 128), None, None], pa.int8()),
            "c": pa.array([0, 1] * 129, pa.int16()),
        },
        # offset-coded keys at the 64-bit extremes, with NULLs
        {
            "u": pa.array([2**64 - 1, 2**64 - 3, None] * 10, pa.uint64()),
            "i": pa.array([-(2**63), -(2**63) + 5, None, -(2**63) + 5, None] * 6, pa.int64()),
        },
        # a sparse key (dictionary-coded) after an offset-coded one, and two keys
        # whose spans multiply past the radix-sort limit (the second one dictionary)
        {
            "y": pa.array([3, 1, None] * 10, pa.uint16()),
            "f": pa.array([0, 40_000, 0, None, 7] * 6, pa.int32()),
        },
        {
            "g": pa.array([i % 200 for i in range(400)], pa.int32()),
            "h": pa.array([(i * 7) % 201 for i in range(400)], pa.int64()),
        },
        {"s": pa.array(["b", None, "a", "b"] * 25), "w": pa.array([0, 10**12] * 50)},
        # seven keys of 1,000 distinct values each over 1,000 rows: the codes' product
        # (1,001 ** 7) passes 2**62, so the combined code is re-densified on the way
        {f"k{m}": pa.array([i * m % 1000 for i in range(1000)], pa.int64()) for m in PRIMES},
    ],
    ids=[
        "year",
        "two-ints",
        "uint64-top",
        "int64-extremes",
        "nulls",
        "int8-offsets",
        "int8-full-range",
        "64-bit-offsets",
        "sparse-key",
        "past-radix",
        "strings",
        "overflow",
    ],
)
def test_partition_ranges_match_pyarrow_filters(columns, monkeypatch):
    from lance_partitioned.operations.write import split
    from lance_partitioned.operations.write.split import partition_ranges

    densified = []
    real_unique = split.np.unique

    def unique(*args, **kwargs):
        densified.append(1)
        return real_unique(*args, **kwargs)

    monkeypatch.setattr(split.np, "unique", unique)

    batch = pa.record_batch({**columns, "row": pa.array(range(len(next(iter(columns.values())))))})
    names = list(columns)
    ordered, ranges = partition_ranges(batch, [batch.column(n) for n in names])
    assert sum(length for _, _, length in ranges) == batch.num_rows
    # the distinct keys, from pyarrow's group_by (an independent oracle)
    groups = pa.table(batch).group_by(names).aggregate([]).to_pylist()
    assert sorted(map(repr, (tuple(g[n] for n in names) for g in groups))) == sorted(
        repr(key) for key, _, _ in ranges
    )
    for key, start, length in ranges:
        assert ordered.slice(start, length).equals(_rows_of_key(batch, names, key)), key
    # the case meant to reach the re-densifying branch reaches it
    assert bool(densified) == (len(names) == len(PRIMES))
