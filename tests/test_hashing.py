"""Tests for lance_partitioned.format.hashing (murmur3 over canonical bytes, buckets).

The test vectors in VECTORS are the single source of truth for the table in
docs/FORMAT.md ("Hashing"); ``python tests/test_hashing.py`` prints that table.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
import re
import struct
import uuid
from pathlib import Path

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hashing_reference import bucket_scalar, canonical_bytes, murmur3_32_bytes, murmur3_scalar

from lance_partitioned.format.hashing import (
    bucket,
    bucket_of_hashes,
    multi_bucket,
    murmur3,
    murmur3_multi,
)

D = decimal.Decimal
I32_MIN = -(2**31)
I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1
PST = dt.timezone(dt.timedelta(hours=-8))
UUID = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
INT_TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
]

# --------------------------------------------------------------------------------------
# Test vectors (also published in docs/FORMAT.md)
# --------------------------------------------------------------------------------------

# (id, type label, value label, ((python value, arrow type), ...), murmur3, bucket(16))
# One (value, type) pair is murmur3; several are murmur3_multi. None = NULL.
VECTORS: list[
    tuple[str, str, str, tuple[tuple[object, pa.DataType], ...], int | None, int | None]
] = [
    # Apache Iceberg's published vectors (spec, Appendix B)
    ("I1", "int32", "34", ((34, pa.int32()),), 2017239379, 3),
    ("I2", "int64", "34", ((34, pa.int64()),), 2017239379, 3),
    ("I3", "date32", "2017-11-16", ((dt.date(2017, 11, 16), pa.date32()),), -653330422, 6),
    ("I4", "time64[us]", "22:31:08", ((dt.time(22, 31, 8), pa.time64("us")),), -662762989, 13),
    (
        "I5",
        "timestamp[us]",
        "2017-11-16T22:31:08",
        ((dt.datetime(2017, 11, 16, 22, 31, 8), pa.timestamp("us")),),
        -2047944441,
        9,
    ),
    (
        "I6",
        "timestamp[us, tz=UTC]",
        "2017-11-16T14:31:08-08:00",
        ((dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=PST), pa.timestamp("us", tz="UTC")),),
        -2047944441,
        9,
    ),
    ("I7", "float32", "1.0", ((1.0, pa.float32()),), -142385009, 1),
    ("I8", "float64", "1.0", ((1.0, pa.float64()),), -142385009, 1),
    ("I9", "decimal128(4, 2)", "14.20", ((D("14.20"), pa.decimal128(4, 2)),), -500754589, 13),
    ("I10", "utf8", '"iceberg"', (("iceberg", pa.utf8()),), 1210000089, 9),
    ("I11", "arrow.uuid", str(UUID), ((UUID, pa.uuid()),), 1488055340, 12),
    ("I12", "binary", "00 01 02 03", ((b"\x00\x01\x02\x03", pa.binary()),), -188683207, 7),
    # Type promotion: 5 in every integer type (and bool true = 1)
    *[(f"P{i + 1}", str(t), "5", ((5, t),), 1740791543, 7) for i, t in enumerate(INT_TYPES)],
    ("P9", "bool", "true", ((True, pa.bool_()),), 1392991556, 4),
    (
        "P10",
        "timestamp[s]",
        "2017-11-16T22:31:08",
        ((1510871468, pa.timestamp("s")),),
        -2047944441,
        9,
    ),
    (
        "P11",
        "timestamp[ns, tz=UTC]",
        "2017-11-16T22:31:08.000000999Z",
        ((1510871468000000999, pa.timestamp("ns", tz="UTC")),),
        -2047944441,
        9,
    ),
    ("P12", "date64", "2017-11-16", ((dt.date(2017, 11, 16), pa.date64()),), -653330422, 6),
    ("P13", "time32[s]", "22:31:08", ((dt.time(22, 31, 8), pa.time32("s")),), -662762989, 13),
    ("P14", "float16", "1.0", ((1.0, pa.float16()),), -142385009, 1),
    ("P15", "decimal128(10, 2)", "14.20", ((D("14.20"), pa.decimal128(10, 2)),), -500754589, 13),
    ("P16", "large_utf8", '"iceberg"', (("iceberg", pa.large_utf8()),), 1210000089, 9),
    ("P17", "fixed_size_binary(16)", str(UUID), ((UUID.bytes, pa.binary(16)),), 1488055340, 12),
    # Edge cases
    ("E1", "utf8", '"" (empty)', (("", pa.utf8()),), 0, 0),
    ("E2", "utf8", '"é" (U+00E9)', (("é", pa.utf8()),), 269551495, 7),
    ("E3", "float64", "0.0", ((0.0, pa.float64()),), 1669671676, 12),
    ("E4", "float64", "-0.0", ((-0.0, pa.float64()),), 1669671676, 12),
    ("E5", "float64", "NaN", ((float("nan"), pa.float64()),), 1428788237, 13),
    ("E6", "int32", "-2147483648", ((I32_MIN, pa.int32()),), -2073034792, 8),
    ("E7", "int64", "-9223372036854775808", ((I64_MIN, pa.int64()),), 1366273829, 5),
    ("E8", "int64", "-1", ((-1, pa.int64()),), 1651860712, 8),
    ("E9", "uint64", "18446744073709551615", ((U64_MAX, pa.uint64()),), 1651860712, 8),
    (
        "E10",
        "timestamp[ns]",
        "1969-12-31T23:59:59.999999999 (-1 ns)",
        ((-1, pa.timestamp("ns")),),
        1651860712,
        8,
    ),
    ("E11", "decimal128(5, 2)", "0.00", ((D("0.00"), pa.decimal128(5, 2)),), 1364076727, 7),
    ("E12", "decimal128(5, 2)", "-0.01", ((D("-0.01"), pa.decimal128(5, 2)),), -43192051, 3),
    ("E13", "decimal128(5, 2)", "1.28", ((D("1.28"), pa.decimal128(5, 2)),), 1544076949, 5),
    ("E14", "utf8", "NULL", ((None, pa.utf8()),), None, None),
    # murmur3_multi
    (
        "M1",
        "(int64, utf8)",
        '(34, "iceberg")',
        ((34, pa.int64()), ("iceberg", pa.utf8())),
        875336289,
        1,
    ),
    ("M2", "(utf8, int64)", "(NULL, 34)", ((None, pa.utf8()), (34, pa.int64())), 2017239379, 3),
    ("M3", "(int32, int64)", "(34, NULL)", ((34, pa.int32()), (None, pa.int64())), 2017239379, 3),
    ("M4", "(utf8, int64)", "(NULL, NULL)", ((None, pa.utf8()), (None, pa.int64())), None, None),
    ("M5", "(utf8, int64)", '("", NULL)', (("", pa.utf8()), (None, pa.int64())), 0, 0),
    ("M6", "(utf8, utf8)", '("ab", "c")', (("ab", pa.utf8()), ("c", pa.utf8())), -1277324294, 6),
    ("M7", "(utf8, utf8)", '("a", "bc")', (("a", pa.utf8()), ("bc", pa.utf8())), -1277324294, 6),
]


def _vector_bytes(values: tuple[tuple[object, pa.DataType], ...]) -> bytes | None:
    parts = [canonical_bytes(v, t) for v, t in values]
    present = [p for p in parts if p is not None]
    return b"".join(present) if present else None


def render_vector_table() -> str:
    """The markdown table of VECTORS, exactly as it appears in docs/FORMAT.md."""
    lines = [
        "| # | Arrow type | Value | Canonical bytes (hex) | murmur3 | bucket(16) |",
        "|---|---|---|---|---:|---:|",
    ]
    for vid, type_label, value_label, values, h, b in VECTORS:
        data = _vector_bytes(values)
        hexed = "NULL" if data is None else ("(empty)" if not data else data.hex(" "))
        lines.append(
            f"| {vid} | `{type_label}` | {value_label} | {hexed} | "
            f"{'NULL' if h is None else h} | {'NULL' if b is None else b} |"
        )
    return "\n".join(lines)


@pytest.mark.parametrize("vector", VECTORS, ids=[v[0] for v in VECTORS])
def test_vector_scalar_and_vectorised(vector):
    _, _, _, values, expected_hash, expected_bucket = vector
    data = _vector_bytes(values)
    # scalar path
    if len(values) == 1:
        (value, arrow_type) = values[0]
        assert murmur3_scalar(value, arrow_type) == expected_hash
        assert bucket_scalar(value, arrow_type, 16) == expected_bucket
    assert (None if data is None else murmur3_32_bytes(data)) == expected_hash
    assert (None if data is None else mmh3.hash(data, 0, signed=True)) == expected_hash
    # vectorised path (value between two other rows, so offsets and padding matter)
    arrays = []
    for value, arrow_type in values:
        arr = pa.array([value, value, value], type=arrow_type)
        arrays.append(arr.slice(1, 1))
    if len(values) == 1:
        assert murmur3(arrays[0]).to_pylist() == [expected_hash]
        assert bucket(arrays[0], 16).to_pylist() == [expected_bucket]
    assert murmur3_multi(arrays).to_pylist() == [expected_hash]
    assert multi_bucket(arrays, 16).to_pylist() == [expected_bucket]
    if expected_hash is not None:
        assert expected_bucket == abs(expected_hash) % 16


def _doc_text() -> str:
    docs = Path(__file__).resolve().parent.parent / "docs"
    for name in ("FORMAT.md",):
        path = docs / name
        if path.exists() and "hashing-test-vectors:begin" in path.read_text(encoding="utf-8"):
            return path.read_text(encoding="utf-8")
    raise AssertionError("no hashing test-vector table found in docs/FORMAT*.md")


def test_doc_table_matches_vectors():
    text = _doc_text()
    m = re.search(
        r"<!-- hashing-test-vectors:begin -->\n(.*?)\n<!-- hashing-test-vectors:end -->",
        text,
        re.S,
    )
    assert m, "test-vector markers missing"
    assert m.group(1).strip() == render_vector_table(), (
        "docs table is stale; regenerate it with `python tests/test_hashing.py`"
    )


# --------------------------------------------------------------------------------------
# Byte-level murmur3
# --------------------------------------------------------------------------------------


def test_murmur3_32_bytes_matches_mmh3():
    rng = random.Random(0)
    for length in list(range(0, 41)) + [63, 64, 65, 127, 1000]:
        for _ in range(5):
            data = bytes(rng.randrange(256) for _ in range(length))
            assert murmur3_32_bytes(data) == mmh3.hash(data, 0, signed=True)
            seed = rng.randrange(2**32)
            assert murmur3_32_bytes(data, seed) == mmh3.hash(data, seed, signed=True)


def test_murmur3_32_bytes_known_values():
    assert murmur3_32_bytes(b"") == 0
    assert murmur3_32_bytes(b"", 1) == 0x514E28B7
    assert murmur3_32_bytes(b"iceberg") == 1210000089
    assert murmur3_32_bytes(struct.pack("<q", 34)) == 2017239379


# --------------------------------------------------------------------------------------
# Vectorised == scalar reference, for every supported type
# --------------------------------------------------------------------------------------


def _reference(arr: pa.Array | pa.ChunkedArray) -> list[int | None]:
    """murmur3_32_bytes(canonical_bytes(v)) value by value, via Arrow scalars."""
    t = arr.type
    out = []
    for s in arr:
        data = canonical_bytes(s, t)
        out.append(None if data is None else murmur3_32_bytes(data))
    return out


def _with_nulls(rng: random.Random, values: list, p: float = 0.15) -> list:
    return [None if rng.random() < p else v for v in values]


def _random_str(rng: random.Random) -> str:
    alphabet = "abcXYZ09 é€😀\u0000ß"
    length = rng.choice([0, 0, 1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 31, 64, 65, 100])
    return "".join(rng.choice(alphabet) for _ in range(length))


def _random_bytes(rng: random.Random, length: int | None = None) -> bytes:
    if length is None:
        length = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 16, 33, 64, 65, 200])
    return bytes(rng.randrange(256) for _ in range(length))


def _random_ints(rng: random.Random, lo: int, hi: int, n: int) -> list[int]:
    edges = [lo, hi, 0, 1, -1, 5, 127, 128, -128, -129, 255, 256, 2**31 - 1, -(2**31)]
    edges = [e for e in edges if lo <= e <= hi]
    return [rng.choice(edges) if rng.random() < 0.2 else rng.randint(lo, hi) for _ in range(n)]


def _random_unscaled(rng: random.Random, precision: int, n: int) -> list[int]:
    top = 10**precision - 1
    edges = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769, top, -top]
    edges = [e for e in edges if -top <= e <= top]
    out = []
    for _ in range(n):
        if rng.random() < 0.3:
            out.append(rng.choice(edges))
        else:
            digits = rng.randint(1, precision)
            out.append(rng.randint(-(10**digits) + 1, 10**digits - 1))
    return out


N = 240


def _cases() -> list[tuple[str, pa.Array]]:
    rng = random.Random(42)
    cases: list[tuple[str, pa.Array]] = []
    for t in INT_TYPES:
        info = np.iinfo(t.to_pandas_dtype())
        vals = _random_ints(rng, int(info.min), int(info.max), N)
        cases.append((str(t), pa.array(_with_nulls(rng, vals), type=t)))
    cases.append(("bool", pa.array(_with_nulls(rng, [rng.random() < 0.5 for _ in range(N)]))))
    days = _random_ints(rng, -(2**31), 2**31 - 1, N)
    cases.append(("date32", pa.array(_with_nulls(rng, days), type=pa.int32()).cast(pa.date32())))
    ms = _random_ints(rng, -(10**15), 10**15, N)
    cases.append(("date64", pa.array(_with_nulls(rng, ms), type=pa.int64()).cast(pa.date64())))
    for unit in ("s", "ms", "us", "ns"):
        for tz in (None, "UTC", "America/New_York", "+05:30"):
            vals = _random_ints(rng, I64_MIN, I64_MAX, N)
            storage = pa.array(_with_nulls(rng, vals), type=pa.int64())
            cases.append((f"timestamp[{unit},{tz}]", storage.cast(pa.timestamp(unit, tz=tz))))
    per_day = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}
    for unit, storage_type, time_type in (
        ("s", pa.int32(), pa.time32("s")),
        ("ms", pa.int32(), pa.time32("ms")),
        ("us", pa.int64(), pa.time64("us")),
        ("ns", pa.int64(), pa.time64("ns")),
    ):
        vals = [rng.randrange(per_day[unit]) for _ in range(N)]
        cases.append(
            (str(time_type), pa.array(_with_nulls(rng, vals), storage_type).cast(time_type))
        )
    specials = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 5e-324, -1.5, 1e308]
    floats = [
        rng.choice(specials) if rng.random() < 0.3 else rng.uniform(-1e6, 1e6) for _ in range(N)
    ]
    cases.append(("float64", pa.array(_with_nulls(rng, floats), pa.float64())))
    cases.append(("float32", pa.array(_with_nulls(rng, floats), pa.float64()).cast(pa.float32())))
    f16 = np.array([f if abs(f) < 60000 or f != f else 1.0 for f in floats], dtype=np.float16)
    mask = np.array([rng.random() < 0.15 for _ in range(N)])
    cases.append(("float16", pa.array(f16, mask=mask)))
    # a NaN with a non-canonical payload and sign
    odd_nan = np.array([0xFFF0000000000001, 0x7FF8000000000000], dtype=np.uint64).view(np.float64)
    cases.append(("float64 NaN payloads", pa.array(odd_nan)))
    strs = _with_nulls(rng, [_random_str(rng) for _ in range(N)])
    cases.append(("utf8", pa.array(strs, pa.utf8())))
    cases.append(("large_utf8", pa.array(strs, pa.large_utf8())))
    cases.append(("string_view", pa.array(strs, pa.utf8()).cast(pa.string_view())))
    bins = _with_nulls(rng, [_random_bytes(rng) for _ in range(N)])
    cases.append(("binary", pa.array(bins, pa.binary())))
    cases.append(("large_binary", pa.array(bins, pa.large_binary())))
    cases.append(("binary_view", pa.array(bins, pa.binary()).cast(pa.binary_view())))
    for width in (1, 3, 8, 16, 70):
        fsb = _with_nulls(rng, [_random_bytes(rng, width) for _ in range(N)])
        cases.append((f"fixed_size_binary({width})", pa.array(fsb, pa.binary(width))))
    uuids = _with_nulls(rng, [uuid.UUID(int=rng.getrandbits(128)).bytes for _ in range(N)])
    cases.append(("uuid", pa.array(uuids, pa.uuid())))
    for make, precision, scale in (
        (pa.decimal32, 9, 2),
        (pa.decimal64, 18, 3),
        (pa.decimal128, 38, 10),
        (pa.decimal128, 4, 2),
        (pa.decimal256, 76, 0),
        (pa.decimal256, 40, 39),
    ):
        unscaled = _random_unscaled(rng, precision, N)
        vals = [D(u).scaleb(-scale, decimal.Context(prec=100)) for u in unscaled]
        t = make(precision, scale)
        cases.append((str(t), pa.array(_with_nulls(rng, vals), t)))
    dict_strs = pa.array(["x", "", "é", None, "a much longer value than sixty-four bytes" * 3])
    idx = _with_nulls(rng, [rng.randrange(len(dict_strs)) for _ in range(N)])
    for index_type in (pa.int8(), pa.int32(), pa.uint16()):
        cases.append(
            (
                f"dictionary<{index_type}, utf8>",
                pa.DictionaryArray.from_arrays(pa.array(idx, index_type), dict_strs),
            )
        )
    dict_ints = pa.array([7, I64_MIN, None, 34], pa.int64())
    idx = _with_nulls(rng, [rng.randrange(len(dict_ints)) for _ in range(N)])
    cases.append(
        (
            "dictionary<int32, int64>",
            pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), dict_ints),
        )
    )
    cases.append(("dictionary-encoded utf8", pa.array(strs, pa.utf8()).dictionary_encode()))
    cases.append(("all-null int64", pa.array([None] * 5, pa.int64())))
    cases.append(("empty utf8", pa.array([], pa.utf8())))
    return cases


CASES = _cases()


@pytest.mark.parametrize("name,arr", CASES, ids=[c[0] for c in CASES])
def test_vectorised_matches_reference(name, arr):
    expected = _reference(arr)
    got = murmur3(arr)
    assert got.type == pa.int32()
    assert got.to_pylist() == expected
    # sliced (offset != 0, and not at a byte boundary of the validity bitmap)
    for start, length in ((3, None), (7, 50), (len(arr), 0)):
        sliced = arr.slice(start, length)
        assert (
            murmur3(sliced).to_pylist()
            == expected[start : None if length is None else start + length]
        )
    # chunked, with an empty chunk
    if len(arr) > 10:
        chunked = pa.chunked_array(
            [arr.slice(0, 10), arr.slice(10, 0), arr.slice(10)], type=arr.type
        )
        assert murmur3(chunked).to_pylist() == expected
    # single-column murmur3_multi is murmur3
    assert murmur3_multi([arr]).to_pylist() == expected
    # buckets
    for n in (1, 16, 7, 2**31 - 1):
        assert bucket(arr, n).to_pylist() == [None if h is None else abs(h) % n for h in expected]


def test_null_type():
    arr = pa.nulls(4)
    assert murmur3(arr).to_pylist() == [None] * 4
    assert murmur3(arr).type == pa.int32()
    assert murmur3_multi([arr, pa.array([1, None, 2, None])]).to_pylist() == [
        murmur3_scalar(1, pa.int64()),
        None,
        murmur3_scalar(2, pa.int64()),
        None,
    ]


def test_empty_chunked_array():
    assert murmur3(pa.chunked_array([], pa.utf8())).to_pylist() == []
    assert murmur3(pa.chunked_array([], pa.utf8())).type == pa.int32()
    with pytest.raises(TypeError):
        murmur3(pa.chunked_array([], pa.list_(pa.int32())))


def test_dictionary_chunks_with_different_dictionaries():
    c1 = pa.array(["a", "b", None, "a"]).dictionary_encode()
    c2 = pa.array(["zz", "b", "b"]).dictionary_encode()
    chunked = pa.chunked_array([c1, c2])
    expected = [murmur3_scalar(v, pa.utf8()) for v in ["a", "b", None, "a", "zz", "b", "b"]]
    assert murmur3(chunked).to_pylist() == expected
    other = pa.chunked_array([pa.array([1, 2, 3]), pa.array([4, 5, 6, 7])])
    assert murmur3_multi([chunked, other]).to_pylist() == _multi_reference([chunked, other])


def test_dictionary_larger_than_array():
    dictionary = pa.array([f"value {i}" for i in range(1000)] + [None])
    indices = pa.array([5, None, 1000, 999, 5, 0], pa.int16())
    arr = pa.DictionaryArray.from_arrays(indices, dictionary)
    expected = _reference(arr)
    assert expected[1] is None and expected[2] is None
    assert murmur3(arr).to_pylist() == expected
    assert murmur3(arr.slice(2, 3)).to_pylist() == expected[2:5]
    ints = pa.array([1, 2, None, None, 5, 6])
    assert murmur3_multi([arr, ints]).to_pylist() == _multi_reference([arr, ints])
    assert murmur3_multi([ints, arr]).to_pylist() == _multi_reference([ints, arr])


def test_large_arrays_cross_slice_boundaries():
    """Arrays longer than the internal slice/chunk sizes, checked with mmh3 directly."""
    rng = np.random.default_rng(7)
    n = 150_001
    ints = rng.integers(I64_MIN, I64_MAX, n, dtype=np.int64, endpoint=True)
    mask = rng.random(n) < 0.1
    arr = pa.array(ints, mask=mask)
    expected = [
        None if m else mmh3.hash(struct.pack("<q", int(v)), 0, signed=True)
        for v, m in zip(ints.tolist(), mask.tolist(), strict=True)
    ]
    assert murmur3(arr).to_pylist() == expected
    assert murmur3(arr.slice(5)).to_pylist() == expected[5:]
    lengths = rng.integers(0, 90, 70_003)
    strs = ["".join("abcdé"[(i + j) % 5] for j in range(ln)) for i, ln in enumerate(lengths)]
    sarr = pa.array(strs)
    assert murmur3(sarr).to_pylist() == [mmh3.hash(s, 0, signed=True) for s in strs]
    both = murmur3_multi([arr.slice(0, len(strs)), sarr]).to_pylist()
    exp_both = []
    for v, m, s in zip(ints.tolist(), mask.tolist(), strs, strict=False):
        data = (b"" if m else struct.pack("<q", v)) + s.encode()
        exp_both.append(mmh3.hash(data, 0, signed=True))
    assert both == exp_both


# --------------------------------------------------------------------------------------
# Scalars
# --------------------------------------------------------------------------------------


def test_scalar_null():
    for t in (pa.int64(), pa.utf8(), pa.decimal128(5, 2), pa.timestamp("ns")):
        assert canonical_bytes(None, t) is None
        assert murmur3_scalar(None, t) is None
        assert bucket_scalar(None, t, 8) is None
        assert canonical_bytes(pa.scalar(None, t), t) is None


def test_canonical_bytes_examples():
    assert canonical_bytes(5, pa.int8()) == struct.pack("<q", 5)
    assert canonical_bytes(U64_MAX, pa.uint64()) == b"\xff" * 8
    assert canonical_bytes(True, pa.bool_()) == struct.pack("<q", 1)
    assert canonical_bytes(False, pa.bool_()) == struct.pack("<q", 0)
    assert canonical_bytes(-0.0, pa.float64()) == b"\x00" * 8
    assert canonical_bytes(float("nan"), pa.float32()) == struct.pack("<Q", 0x7FF8000000000000)
    assert canonical_bytes("é", pa.utf8()) == b"\xc3\xa9"
    assert canonical_bytes(b"\x00", pa.binary()) == b"\x00"
    # decimals: minimal big-endian two's complement of the unscaled value
    t = pa.decimal128(10, 0)
    for unscaled, expected in [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x00\x80"),
        (-1, b"\xff"),
        (-128, b"\x80"),
        (-129, b"\xff\x7f"),
        (255, b"\x00\xff"),
        (256, b"\x01\x00"),
        (32767, b"\x7f\xff"),
        (32768, b"\x00\x80\x00"),
    ]:
        assert canonical_bytes(D(unscaled), t) == expected
        assert canonical_bytes(unscaled, t) == expected
    assert canonical_bytes(D("14.2"), pa.decimal128(4, 2)) == (1420).to_bytes(2, "big")
    assert canonical_bytes(D("1.4E+1"), pa.decimal128(4, 2)) == (1400).to_bytes(2, "big")
    # temporal values also accepted as integers in the storage unit
    assert canonical_bytes(17486, pa.date32()) == struct.pack("<q", 17486)
    assert canonical_bytes(17486 * 86_400_000 + 5, pa.date64()) == struct.pack("<q", 17486)
    assert canonical_bytes(-1, pa.timestamp("ns")) == struct.pack("<q", -1)
    assert canonical_bytes(-1001, pa.timestamp("ns")) == struct.pack("<q", -2)
    assert canonical_bytes(3, pa.time32("s")) == struct.pack("<q", 3_000_000)
    assert canonical_bytes(1999, pa.time64("ns")) == struct.pack("<q", 1)
    assert canonical_bytes(UUID, pa.uuid()) == UUID.bytes
    # Arrow scalars
    assert canonical_bytes(pa.scalar(-1001, pa.timestamp("ns")), pa.timestamp("us")) == struct.pack(
        "<q", -2
    )
    assert canonical_bytes(pa.scalar(34, pa.int32()), pa.int64()) == struct.pack("<q", 34)


def test_scalar_datetimes():
    us = pa.timestamp("us")
    naive = dt.datetime(2017, 11, 16, 22, 31, 8)
    aware_utc = naive.replace(tzinfo=dt.timezone.utc)
    aware_pst = dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=PST)
    expected = -2047944441
    for t in (
        us,
        pa.timestamp("s"),
        pa.timestamp("ns", tz="UTC"),
        pa.timestamp("ms", tz="Asia/Tokyo"),
    ):
        assert murmur3_scalar(naive, t) == expected
        assert murmur3_scalar(aware_utc, t) == expected
        assert murmur3_scalar(aware_pst, t) == expected
    # before the epoch, with microseconds
    v = dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)
    assert canonical_bytes(v, us) == struct.pack("<q", -1)
    assert canonical_bytes(dt.date(1970, 1, 2), us) == struct.pack("<q", 86_400_000_000)
    assert canonical_bytes(dt.datetime(2017, 11, 16, 23, 0), pa.date32()) == struct.pack(
        "<q", 17486
    )
    assert canonical_bytes(dt.time(0, 0, 0, 1), pa.time64("ns")) == struct.pack("<q", 1)


def test_scalar_errors():
    with pytest.raises(ValueError):
        canonical_bytes(D("14.205"), pa.decimal128(5, 2))
    with pytest.raises(ValueError):
        canonical_bytes(D("NaN"), pa.decimal128(5, 2))
    with pytest.raises(TypeError):
        canonical_bytes("5", pa.int64())
    with pytest.raises(TypeError):
        canonical_bytes(5.0, pa.int64())
    with pytest.raises(OverflowError):
        canonical_bytes(2**64, pa.uint64())
    with pytest.raises(TypeError):
        canonical_bytes(5, pa.utf8())
    with pytest.raises(TypeError):
        canonical_bytes([1], pa.list_(pa.int64()))
    # the type is checked even for NULL (used to validate bucket specs)
    for t in (pa.list_(pa.int64()), pa.struct([("a", pa.int64())]), pa.duration("s")):
        with pytest.raises(TypeError):
            canonical_bytes(None, t)
    for t in (pa.null(), pa.dictionary(pa.int8(), pa.utf8()), pa.uuid(), pa.string_view()):
        assert canonical_bytes(None, t) is None
    with pytest.raises(TypeError):
        canonical_bytes(1, pa.null())
    with pytest.raises(ValueError):
        bucket_scalar(5, pa.int64(), 0)


def test_unsupported_types_raise():
    for arr in (
        pa.array([[1]], pa.list_(pa.int64())),
        pa.array([{"a": 1}]),
        pa.array([1], pa.duration("s")),
    ):
        with pytest.raises(TypeError):
            murmur3(arr)
        with pytest.raises(TypeError):
            murmur3_multi([pa.array([1]), arr])


# --------------------------------------------------------------------------------------
# Type promotion
# --------------------------------------------------------------------------------------


def test_promotion_integers():
    hashes = {tuple(murmur3(pa.array([5, None, 0, 100], t)).to_pylist()) for t in INT_TYPES}
    assert len(hashes) == 1
    buckets = {tuple(bucket(pa.array([5, None, 0, 100], t), 16).to_pylist()) for t in INT_TYPES}
    assert len(buckets) == 1
    assert {murmur3_scalar(5, t) for t in INT_TYPES} == {murmur3_scalar(5, pa.int64())}
    # bool 1 == integer 1; date32 days == int days
    assert murmur3(pa.array([True])).to_pylist() == murmur3(pa.array([1], pa.int8())).to_pylist()
    assert murmur3(pa.array([17486], pa.int32()).cast(pa.date32())).to_pylist() == [-653330422]


def test_promotion_floats():
    vals = [1.5, -0.0, None, float("inf"), float("nan")]
    h16 = murmur3(
        pa.array(
            np.array([1.5, -0.0, 0.0, np.inf, np.nan], dtype=np.float16),
            mask=np.array([0, 0, 1, 0, 0], bool),
        )
    )
    h32 = murmur3(pa.array(vals, pa.float32()))
    h64 = murmur3(pa.array(vals, pa.float64()))
    assert h16.to_pylist() == h32.to_pylist() == h64.to_pylist()
    assert murmur3(pa.array([0.0])).to_pylist() == murmur3(pa.array([-0.0])).to_pylist()
    assert murmur3_scalar(1.5, pa.float32()) == murmur3_scalar(1.5, pa.float64())


def test_promotion_timestamps():
    instant = dt.datetime(2017, 11, 16, 22, 31, 8, tzinfo=dt.timezone.utc)
    seconds = int(instant.timestamp())
    arrays = [
        pa.array([seconds], pa.timestamp("s")),
        pa.array([seconds * 1000], pa.timestamp("ms")),
        pa.array([seconds * 10**6], pa.timestamp("us")),
        pa.array([seconds * 10**9], pa.timestamp("ns")),
        pa.array([seconds * 10**6], pa.timestamp("us", tz="UTC")),
        pa.array([instant], pa.timestamp("us", tz="America/Los_Angeles")),
        pa.array([instant], pa.timestamp("ms", tz="Asia/Kolkata")),
    ]
    assert {murmur3(a).to_pylist()[0] for a in arrays} == {-2047944441}
    # the same instant given in different zones
    t = pa.timestamp("us", tz="UTC")
    zones = [dt.timezone.utc, PST, dt.timezone(dt.timedelta(hours=5, minutes=30))]
    assert {murmur3(pa.array([instant.astimezone(z)], t)).to_pylist()[0] for z in zones} == {
        -2047944441
    }
    # time32 / time64
    tod = 22 * 3600 + 31 * 60 + 8
    times = [
        pa.array([tod], pa.time32("s")),
        pa.array([tod * 1000], pa.time32("ms")),
        pa.array([tod * 10**6], pa.time64("us")),
        pa.array([tod * 10**9], pa.time64("ns")),
    ]
    assert {murmur3(a).to_pylist()[0] for a in times} == {-662762989}
    # date32 / date64
    dates = [
        pa.array([dt.date(2017, 11, 16)], pa.date32()),
        pa.array([dt.date(2017, 11, 16)], pa.date64()),
    ]
    assert {murmur3(a).to_pylist()[0] for a in dates} == {-653330422}


def test_negative_ns_timestamps_floor():
    arr = pa.array([-1, -999, -1000, -1001, 999, 1000, I64_MIN], pa.timestamp("ns"))
    micros = [-1, -1, -1, -2, 0, 1, I64_MIN // 1000]
    expected = [mmh3.hash(struct.pack("<q", m), 0, signed=True) for m in micros]
    assert murmur3(arr).to_pylist() == expected
    assert [murmur3_scalar(v, arr.type) for v in arr] == expected
    date64 = pa.array([-1, -86_400_000, -86_400_001], pa.date64())
    days = [-1, -1, -2]
    assert murmur3(date64).to_pylist() == [
        mmh3.hash(struct.pack("<q", d), 0, signed=True) for d in days
    ]


def test_promotion_strings_and_decimals():
    strs = ["iceberg", "", None, "é😀"]
    ref = murmur3(pa.array(strs, pa.utf8())).to_pylist()
    assert murmur3(pa.array(strs, pa.large_utf8())).to_pylist() == ref
    assert murmur3(pa.array(strs).cast(pa.string_view())).to_pylist() == ref
    assert (
        murmur3(
            pa.array([s.encode() if s is not None else None for s in strs], pa.binary())
        ).to_pylist()
        == ref
    )
    decs = [D("14.20"), D("-0.01"), None, D("0")]
    ref = murmur3(pa.array(decs, pa.decimal128(4, 2))).to_pylist()
    assert ref[0] == -500754589
    for t in (pa.decimal32(9, 2), pa.decimal64(10, 2), pa.decimal128(38, 2), pa.decimal256(50, 2)):
        assert murmur3(pa.array(decs, t)).to_pylist() == ref
        assert [murmur3_scalar(d, t) for d in decs] == ref


# --------------------------------------------------------------------------------------
# Buckets
# --------------------------------------------------------------------------------------


def test_bucket_of_hashes_abs_in_int64():
    raw = [I32_MIN, 2**31 - 1, -1, 0, None, 5, -17, I32_MIN + 1]
    hashes = pa.array([0] + raw, pa.int32()).slice(1)  # offset != 0
    for n in (1, 2, 3, 7, 16, 1000, 2**31 - 1):
        got = bucket_of_hashes(hashes, n)
        assert got.type == pa.int32()
        assert got.to_pylist() == [None if h is None else abs(h) % n for h in raw]
    # i32::MIN: abs is 2**31, not negative and not a wrap to i32::MIN
    assert bucket_of_hashes(pa.array([I32_MIN], pa.int32()), 7).to_pylist() == [2**31 % 7]
    assert bucket_of_hashes(pa.chunked_array([hashes], pa.int32()), 16).to_pylist() == [
        None if h is None else abs(h) % 16 for h in raw
    ]


def test_bucket_range_type_and_nulls():
    rng = np.random.default_rng(3)
    vals = rng.integers(-(10**12), 10**12, 5000)
    mask = rng.random(5000) < 0.2
    arr = pa.array(vals, mask=mask)
    for n in (1, 3, 16, 1024):
        b = bucket(arr, n)
        assert b.type == pa.int32()
        assert b.null_count == int(mask.sum())
        assert b.is_null().to_pylist() == mask.tolist()
        got = np.array(b.fill_null(0).to_numpy())
        assert got.min() >= 0 and got.max() < n
    # all buckets of 16 are used by 5000 values
    assert set(bucket(arr, 16).drop_null().to_pylist()) == set(range(16))


def test_bucket_num_buckets_validation():
    arr = pa.array([1, 2])
    for bad in (0, -1, 2**31):
        with pytest.raises(ValueError):
            bucket(arr, bad)
        with pytest.raises(ValueError):
            multi_bucket([arr], bad)
    with pytest.raises(TypeError):
        bucket(arr, 1.5)


# --------------------------------------------------------------------------------------
# murmur3_multi
# --------------------------------------------------------------------------------------


def _multi_reference(arrays: list[pa.Array | pa.ChunkedArray]) -> list[int | None]:
    out = []
    for row in range(len(arrays[0])):
        parts = [canonical_bytes(a[row], a.type) for a in arrays]
        present = [p for p in parts if p is not None]
        out.append(murmur3_32_bytes(b"".join(present)) if present else None)
    return out


def test_multi_null_skipping():
    five_i64 = murmur3_scalar(5, pa.int64())
    a = pa.array([None, 5, None, None], pa.int32())
    b = pa.array([5, None, None, 5], pa.int64())
    assert murmur3_multi([a, b]).to_pylist() == [five_i64, five_i64, None, five_i64]
    s = pa.array([None, "x", "", None])
    assert murmur3_multi([s, b]).to_pylist() == [
        five_i64,
        murmur3_scalar("x", pa.utf8()),
        0,  # "" is not NULL: murmur3 of zero bytes
        five_i64,
    ]
    assert murmur3_multi([pa.array([None, None], pa.utf8())] * 3).to_pylist() == [None, None]


def test_multi_concatenation_not_per_column():
    # ("ab","c") and ("a","bc") concatenate to the same bytes: documented behaviour
    x = murmur3_multi([pa.array(["ab", "a"]), pa.array(["c", "bc"])]).to_pylist()
    assert x[0] == x[1] == murmur3_32_bytes(b"abc")
    two = murmur3_multi([pa.array([34]), pa.array(["iceberg"])]).to_pylist()[0]
    assert two == murmur3_32_bytes(struct.pack("<q", 34) + b"iceberg")


def _multi_columns(rng: random.Random, n: int) -> list[pa.Array]:
    def nulls(vals, p=0.25):
        return _with_nulls(rng, vals, p)

    return [
        pa.array(nulls(_random_ints(rng, I64_MIN, I64_MAX, n)), pa.int64()),
        pa.array(nulls(_random_ints(rng, -128, 127, n)), pa.int8()),
        pa.array(nulls([rng.uniform(-5, 5) for _ in range(n)]), pa.float32()),
        pa.array(nulls(_random_ints(rng, -(10**17), 10**17, n)), pa.int64()).cast(
            pa.timestamp("ns")
        ),
        pa.array(nulls([_random_str(rng) for _ in range(n)]), pa.utf8()),
        pa.array(
            nulls([_random_bytes(rng, rng.choice([0, 1, 2, 3, 5, 70])) for _ in range(n)]),
            pa.large_binary(),
        ),
        pa.array(
            nulls([D(u).scaleb(-2) for u in _random_unscaled(rng, 20, n)]), pa.decimal128(22, 2)
        ),
        pa.array(nulls([rng.choice(["a", "bb", "ccc"]) for _ in range(n)])).dictionary_encode(),
        pa.array(nulls([rng.random() < 0.5 for _ in range(n)]), pa.bool_()),
    ]


def test_multi_matches_reference_random():
    rng = random.Random(11)
    cols = _multi_columns(rng, 200)
    fixed_idx = [0, 1, 2, 3, 8]
    combos = [
        [0, 1],
        [1, 0, 2],
        fixed_idx,
        [0, 4],
        [4, 0],
        [4, 5, 6],
        [6, 1],
        [7, 0, 4],
        list(range(len(cols))),
        [5, 5, 5],
    ]
    for _ in range(10):
        combos.append(rng.sample(range(len(cols)), rng.randint(1, 5)))
    for combo in combos:
        arrays = [cols[i] for i in combo]
        expected = _multi_reference(arrays)
        assert murmur3_multi(arrays).to_pylist() == expected, combo
        sliced = [a.slice(13, 150) for a in arrays]
        assert murmur3_multi(sliced).to_pylist() == expected[13:163], combo
        # chunk boundaries differing between columns
        chunked = [
            pa.chunked_array([a.slice(0, 17 + 9 * k), a.slice(17 + 9 * k)], type=a.type)
            for k, a in enumerate(arrays)
        ]
        assert murmur3_multi(chunked).to_pylist() == expected, combo
        assert multi_bucket(arrays, 16).to_pylist() == [
            None if h is None else abs(h) % 16 for h in expected
        ]


def test_multi_errors():
    with pytest.raises(ValueError):
        murmur3_multi([])
    with pytest.raises(ValueError):
        murmur3_multi([pa.array([1, 2]), pa.array([1])])
    with pytest.raises(TypeError):
        murmur3_multi([[1, 2]])


# --------------------------------------------------------------------------------------
# Cross-check with pyiceberg's bucket hash (optional dependency)
# --------------------------------------------------------------------------------------


def test_matches_pyiceberg_hash():
    transforms = pytest.importorskip("pyiceberg.transforms")
    it = pytest.importorskip("pyiceberg.types")
    rng = random.Random(5)
    bt = transforms.BucketTransform(16)

    def iceberg_hash(iceberg_type, value):
        return bt.transform(iceberg_type, bucket=False)(value)

    for _ in range(200):
        v = rng.randint(I64_MIN, I64_MAX)
        assert murmur3_scalar(v, pa.int64()) == iceberg_hash(it.LongType(), v)
        s = _random_str(rng)
        assert murmur3_scalar(s, pa.utf8()) == iceberg_hash(it.StringType(), s)
        b = _random_bytes(rng)
        assert murmur3_scalar(b, pa.binary()) == iceberg_hash(it.BinaryType(), b)
        d = D(rng.randint(-(10**30), 10**30)).scaleb(-4, decimal.Context(prec=100))
        assert murmur3_scalar(d, pa.decimal128(38, 4)) == iceberg_hash(it.DecimalType(38, 4), d)
        days = rng.randint(-(10**6), 10**6)
        assert murmur3_scalar(days, pa.date32()) == iceberg_hash(it.DateType(), days)
        micros = rng.randint(-(10**17), 10**17)
        assert murmur3_scalar(micros, pa.timestamp("us")) == iceberg_hash(
            it.TimestampType(), micros
        )
        nanos = rng.randint(-(10**18), 10**18)
        assert murmur3_scalar(nanos, pa.timestamp("ns")) == iceberg_hash(
            it.TimestampNanoType(), nanos
        )
        u = uuid.UUID(int=rng.getrandbits(128))
        assert murmur3_scalar(u, pa.uuid()) == iceberg_hash(it.UUIDType(), u)
    # vectorised, on the same kind of data
    longs = [rng.randint(I64_MIN, I64_MAX) for _ in range(300)]
    assert murmur3(pa.array(longs, pa.int64())).to_pylist() == [
        iceberg_hash(it.LongType(), v) for v in longs
    ]


if __name__ == "__main__":
    print(render_vector_table())
