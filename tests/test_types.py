"""Arrow <-> JsonArrowDataType conversion (lance_partitioned.format.type_json)."""

from __future__ import annotations

import copy
import io
import json
import re

import pyarrow as pa
import pytest
from lance_namespace_urllib3_client.models import (
    JsonArrowDataType,
    JsonArrowField,
    JsonArrowSchema,
    PartitionField,
)

from lance_partitioned.format.type_json import (
    TypeConversionError,
    arrow_field_to_json,
    arrow_schema_to_json,
    arrow_type_to_json,
    json_to_arrow_field,
    json_to_arrow_schema,
    json_to_arrow_type,
    type_to_string,
)

# -- helpers ------------------------------------------------------------------


def _ipc_bytes(t: pa.DataType) -> bytes:
    return pa.schema([pa.field("x", t)]).serialize().to_pybytes()


def assert_identical(got: pa.DataType, want: pa.DataType) -> None:
    """Exact identity: pyarrow equality with metadata, plus the IPC encoding, which
    also covers child names pyarrow's equality ignores (e.g. map key/value names)."""
    assert got.equals(want, check_metadata=True), f"{got} != {want}"
    assert str(got) == str(want)
    assert _ipc_bytes(got) == _ipc_bytes(want)


def via_json_text(obj: dict) -> dict:
    """What a reader sees after the dict was stored as a JSON string."""
    return json.loads(json.dumps(obj))


EXTRA_KEYS = {"unit", "timezone", "keys_sorted", "view", "dictionary"}


def strip_extras(obj):
    """Our JSON minus our extra keys: what upstream writes for the same type."""
    if isinstance(obj, list):
        return [strip_extras(x) for x in obj]
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "metadata":
                out[k] = v
            elif k not in EXTRA_KEYS:
                out[k] = strip_extras(v)
        return out
    return obj


# -- every type round-trips ---------------------------------------------------

NY = "America/New_York"

SCALARS = [
    pa.null(),
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.utf8(),
    pa.large_utf8(),
    pa.binary(),
    pa.large_binary(),
    pa.binary(0),
    pa.binary(16),
    pa.decimal128(1, 0),
    pa.decimal128(38, 10),
    pa.decimal128(38, 38),
    pa.decimal128(9, -2),
    pa.decimal128(5, 127),
    pa.decimal128(5, -128),
    pa.decimal256(76, 0),
    pa.decimal256(50, -3),
    pa.decimal32(9, 2),
    pa.decimal64(18, -5),
    pa.date32(),
    pa.date64(),
    pa.time32("s"),
    pa.time32("ms"),
    pa.time64("us"),
    pa.time64("ns"),
    *[pa.duration(u) for u in ("s", "ms", "us", "ns")],
    *[pa.timestamp(u) for u in ("s", "ms", "us", "ns")],
    *[pa.timestamp(u, tz="UTC") for u in ("s", "ms", "us", "ns")],
    pa.timestamp("ns", tz=NY),
    pa.timestamp("ms", tz="+05:30"),
    pa.string_view(),
    pa.binary_view(),
]

NESTED = [
    pa.struct([]),
    pa.struct([("a", pa.int32()), ("b", pa.utf8())]),
    pa.struct(
        [
            pa.field("a", pa.int32(), nullable=False, metadata={"k": "v", "lance:field_id": "7"}),
            pa.field("a", pa.float64()),  # duplicate names are legal Arrow
            pa.field("", pa.null()),
        ]
    ),
    pa.list_(pa.int32()),
    pa.list_(pa.field("item", pa.int32(), nullable=False)),
    pa.list_(pa.field("element", pa.utf8(), metadata={"m": "1"})),
    pa.large_list(pa.large_utf8()),
    pa.large_list(pa.field("x", pa.binary(4), nullable=False)),
    pa.list_(pa.float32(), 0),
    pa.list_(pa.float32(), 128),
    pa.list_(pa.field("v", pa.float16(), nullable=False), 3),
    pa.map_(pa.utf8(), pa.int32()),
    pa.map_(pa.utf8(), pa.int32(), keys_sorted=True),
    pa.map_(pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.utf8(), nullable=False)),
    pa.map_(pa.field("key", pa.utf8(), nullable=False, metadata={"a": "b"}), pa.list_(pa.int32())),
    pa.map_(pa.utf8(), pa.list_(pa.int32())),
    *[pa.dictionary(i, pa.utf8()) for i in (pa.int8(), pa.int16(), pa.int32(), pa.int64())],
    *[pa.dictionary(i, pa.utf8()) for i in (pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64())],
    pa.dictionary(pa.int32(), pa.utf8(), ordered=True),
    pa.dictionary(pa.int16(), pa.large_utf8()),
    pa.dictionary(pa.int8(), pa.binary()),
    pa.dictionary(pa.int32(), pa.int64()),
    pa.dictionary(pa.int32(), pa.timestamp("ns", tz=NY), ordered=True),
    pa.dictionary(pa.int32(), pa.decimal128(10, 2)),
    pa.dictionary(pa.int32(), pa.string_view()),
    # the combinations the brief names
    pa.list_(
        pa.struct(
            [
                pa.field("a", pa.timestamp("ns", tz=NY)),
                pa.field("b", pa.decimal128(38, 10)),
            ]
        )
    ),
    pa.map_(pa.utf8(), pa.list_(pa.int32())),
    # deeper nesting
    pa.struct(
        [
            pa.field("tags", pa.list_(pa.dictionary(pa.int16(), pa.utf8()))),
            pa.field(
                "attrs",
                pa.map_(pa.utf8(), pa.struct([("t", pa.time64("ns")), ("d", pa.duration("s"))])),
                nullable=False,
                metadata={"lance:field_id": "3"},
            ),
            pa.field("vec", pa.list_(pa.field("item", pa.float32(), nullable=False), 8)),
            pa.field("nested", pa.large_list(pa.list_(pa.struct([("z", pa.binary_view())])))),
        ]
    ),
]


@pytest.mark.parametrize("t", SCALARS + NESTED, ids=type_to_string)
def test_type_round_trip(t):
    j = arrow_type_to_json(t)
    assert via_json_text(j) == j  # plain JSON values only
    assert_identical(json_to_arrow_type(j), t)
    assert_identical(json_to_arrow_type(via_json_text(j)), t)


@pytest.mark.parametrize("t", SCALARS + NESTED, ids=type_to_string)
def test_json_is_accepted_by_the_upstream_pydantic_model(t):
    j = arrow_type_to_json(t)
    model = JsonArrowDataType.from_dict(j)
    assert model.type == j["type"]
    # Without our extra keys the model reproduces our JSON exactly.
    assert model.to_dict() == strip_extras(j)


def test_pydantic_model_drops_extra_keys():
    """The generated model keeps only type/fields/length: passing our JSON through it
    loses units, time zones, ... so the library must store and parse the raw JSON."""
    j = arrow_type_to_json(pa.timestamp("ns", tz="UTC"))
    assert j == {"type": "timestamp", "unit": "ns", "timezone": "UTC"}
    assert JsonArrowDataType.from_dict(j).to_dict() == {"type": "timestamp"}


def test_partition_field_model_accepts_result_type():
    model = PartitionField.from_dict(
        {
            "field_id": "event_hour",
            "source_ids": [1],
            "expression": "date_trunc('hour', col0)",
            "result_type": arrow_type_to_json(pa.timestamp("us", tz="UTC")),
        }
    )
    assert model.result_type.type == "timestamp"


# -- upstream naming, as literal dicts ----------------------------------------

UPSTREAM_FORMS = [
    (pa.null(), {"type": "null"}),
    (pa.bool_(), {"type": "bool"}),
    (pa.int8(), {"type": "int8"}),
    (pa.int16(), {"type": "int16"}),
    (pa.int32(), {"type": "int32"}),
    (pa.int64(), {"type": "int64"}),
    (pa.uint8(), {"type": "uint8"}),
    (pa.uint16(), {"type": "uint16"}),
    (pa.uint32(), {"type": "uint32"}),
    (pa.uint64(), {"type": "uint64"}),
    (pa.float16(), {"type": "float16"}),
    (pa.float32(), {"type": "float32"}),
    (pa.float64(), {"type": "float64"}),
    (pa.string(), {"type": "utf8"}),
    (pa.large_string(), {"type": "large_utf8"}),
    (pa.binary(), {"type": "binary"}),
    (pa.large_binary(), {"type": "large_binary"}),
    (pa.date32(), {"type": "date32"}),
    (pa.date64(), {"type": "date64"}),
    (pa.binary(16), {"type": "fixed_size_binary", "length": 16}),
    (pa.decimal128(38, 10), {"type": "decimal128", "length": 38010}),
    (pa.decimal128(9, -2), {"type": "decimal128", "length": 8998}),
    (pa.decimal256(50, -3), {"type": "decimal256", "length": 49997}),
    (
        pa.list_(pa.int32()),
        {"type": "list", "fields": [{"name": "item", "nullable": True, "type": {"type": "int32"}}]},
    ),
    (
        pa.large_list(pa.field("item", pa.utf8(), nullable=False)),
        {
            "type": "large_list",
            "fields": [{"name": "item", "nullable": False, "type": {"type": "utf8"}}],
        },
    ),
    (
        pa.list_(pa.float32(), 4),
        {
            "type": "fixed_size_list",
            "fields": [{"name": "item", "nullable": True, "type": {"type": "float32"}}],
            "length": 4,
        },
    ),
    (
        pa.struct([pa.field("a", pa.int8()), pa.field("b", pa.utf8(), nullable=False)]),
        {
            "type": "struct",
            "fields": [
                {"name": "a", "nullable": True, "type": {"type": "int8"}},
                {"name": "b", "nullable": False, "type": {"type": "utf8"}},
            ],
        },
    ),
    (
        pa.map_(pa.utf8(), pa.int32()),
        {
            "type": "map",
            "fields": [
                {
                    "name": "entries",
                    "nullable": False,
                    "type": {
                        "type": "struct",
                        "fields": [
                            {"name": "key", "nullable": False, "type": {"type": "utf8"}},
                            {"name": "value", "nullable": True, "type": {"type": "int32"}},
                        ],
                    },
                }
            ],
        },
    ),
]


@pytest.mark.parametrize(
    ("t", "expected"),
    UPSTREAM_FORMS,
    ids=lambda x: type_to_string(x) if isinstance(x, pa.DataType) else "",
)
def test_upstream_type_names(t, expected):
    assert arrow_type_to_json(t) == expected
    assert_identical(json_to_arrow_type(expected), t)


EXTENDED_FORMS = [
    (pa.timestamp("us"), {"type": "timestamp", "unit": "us"}),
    (pa.timestamp("us", tz="UTC"), {"type": "timestamp", "unit": "us", "timezone": "UTC"}),
    (pa.timestamp("ns", tz=NY), {"type": "timestamp", "unit": "ns", "timezone": NY}),
    (pa.duration("ms"), {"type": "duration", "unit": "ms"}),
    (pa.time32("s"), {"type": "time32", "unit": "s"}),
    (pa.time64("ns"), {"type": "time64", "unit": "ns"}),
    (pa.string_view(), {"type": "utf8", "view": True}),
    (pa.binary_view(), {"type": "binary", "view": True}),
    (
        pa.dictionary(pa.int16(), pa.utf8()),
        {"type": "utf8", "dictionary": {"index_type": {"type": "int16"}, "ordered": False}},
    ),
    (
        pa.dictionary(pa.uint8(), pa.timestamp("s"), ordered=True),
        {
            "type": "timestamp",
            "unit": "s",
            "dictionary": {"index_type": {"type": "uint8"}, "ordered": True},
        },
    ),
]


@pytest.mark.parametrize(
    ("t", "expected"),
    EXTENDED_FORMS,
    ids=lambda x: type_to_string(x) if isinstance(x, pa.DataType) else "",
)
def test_extended_forms(t, expected):
    assert arrow_type_to_json(t) == expected
    assert_identical(json_to_arrow_type(expected), t)


def test_map_keys_sorted_form():
    j = arrow_type_to_json(pa.map_(pa.utf8(), pa.int32(), keys_sorted=True))
    assert j["keys_sorted"] is True
    assert "keys_sorted" not in arrow_type_to_json(pa.map_(pa.utf8(), pa.int32()))


# -- what upstream's reader accepts, we read the same way ---------------------


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        ({"type": "timestamp"}, pa.timestamp("us")),
        ({"type": "timestamp", "timezone": "UTC"}, pa.timestamp("us", tz="UTC")),
        ({"type": "duration"}, pa.duration("us")),
        ({"type": "boolean"}, pa.bool_()),
        ({"type": "INT32"}, pa.int32()),
        ({"type": "Utf8"}, pa.utf8()),
        ({"type": "int64", "fields": None, "length": None}, pa.int64()),
        ({"type": "decimal256", "length": 76000}, pa.decimal256(76, 0)),
        ({"type": "decimal128", "length": 872}, pa.decimal128(1, -128)),
    ],
)
def test_reads_upstream_forms(d, expected):
    assert_identical(json_to_arrow_type(d), expected)


# -- fields and schemas -------------------------------------------------------


@pytest.mark.parametrize("nullable", [True, False])
@pytest.mark.parametrize("metadata", [None, {"lance:field_id": "4", "comment": "héllo ✓"}])
def test_field_round_trip(nullable, metadata):
    f = pa.field(
        "col", pa.list_(pa.field("item", pa.int32(), metadata={"x": "1"})), nullable, metadata
    )
    j = arrow_field_to_json(f)
    assert j["name"] == "col"
    assert j["nullable"] is nullable
    if metadata:
        assert j["metadata"] == metadata
    else:
        assert "metadata" not in j
    assert j["type"]["fields"][0]["metadata"] == {"x": "1"}
    back = json_to_arrow_field(via_json_text(j))
    assert back.equals(f, check_metadata=True)
    JsonArrowField.from_dict(j)


def test_schema_round_trip_with_metadata():
    s = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False, metadata={"lance:field_id": "0"}),
            pa.field("ts", pa.timestamp("ns", tz=NY), metadata={"lance:field_id": "1"}),
            pa.field(
                "m", pa.map_(pa.utf8(), pa.list_(pa.int32())), metadata={"lance:field_id": "2"}
            ),
        ],
        metadata={"owner": "me", "empty": ""},
    )
    j = arrow_schema_to_json(s)
    assert j["metadata"] == {"owner": "me", "empty": ""}
    assert [f["name"] for f in j["fields"]] == ["id", "ts", "m"]
    assert json_to_arrow_schema(via_json_text(j)).equals(s, check_metadata=True)
    model = JsonArrowSchema.from_dict(j)
    assert [f.name for f in model.fields] == ["id", "ts", "m"]


def test_schema_with_every_type_is_accepted_by_the_model():
    s = pa.schema([pa.field(f"c{i}", t) for i, t in enumerate(SCALARS + NESTED)])
    j = arrow_schema_to_json(s)
    assert "metadata" not in j
    model = JsonArrowSchema.from_dict(via_json_text(j))
    assert model.to_dict() == strip_extras(j)
    assert json_to_arrow_schema(via_json_text(j)).equals(s, check_metadata=True)


APPENDIX_A = (
    '{"fields":[{"name":"id","nullable":false,"type":{"type":"int64"},"metadata":{"lance:field_id":"0"}},'
    '{"name":"event_date","nullable":true,"type":{"type":"date32"},"metadata":{"lance:field_id":"1"}},'
    '{"name":"country","nullable":true,"type":{"type":"utf8"},"metadata":{"lance:field_id":"2"}}]}'
)


def test_appendix_a_schema_parses_and_reserialises_identically():
    d = json.loads(APPENDIX_A)
    s = json_to_arrow_schema(copy.deepcopy(d))
    expected = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False, metadata={"lance:field_id": "0"}),
            pa.field("event_date", pa.date32(), metadata={"lance:field_id": "1"}),
            pa.field("country", pa.utf8(), metadata={"lance:field_id": "2"}),
        ]
    )
    assert s.equals(expected, check_metadata=True)
    assert not s.metadata
    # Decision: an empty schema metadata map is omitted, so the spec's example
    # (which has no top-level "metadata") re-serialises to the very same text.
    out = arrow_schema_to_json(s)
    assert out == d
    assert json.dumps(out, separators=(",", ":")) == APPENDIX_A
    JsonArrowSchema.from_dict(out)


@pytest.mark.parametrize("meta", [{}, None])
def test_empty_or_null_schema_metadata_is_accepted_and_omitted(meta):
    d = json.loads(APPENDIX_A)
    d["metadata"] = meta
    s = json_to_arrow_schema(d)
    assert not s.metadata
    assert "metadata" not in arrow_schema_to_json(s)


def test_empty_field_metadata_is_omitted():
    f = pa.field("a", pa.int32(), metadata={})
    assert arrow_field_to_json(f) == {"name": "a", "nullable": True, "type": {"type": "int32"}}
    back = json_to_arrow_field(
        {"name": "a", "nullable": True, "type": {"type": "int32"}, "metadata": {}}
    )
    assert back.equals(pa.field("a", pa.int32()), check_metadata=True)


# -- extension types (via field metadata, like Arrow IPC and upstream) ---------


def test_canonical_extension_types_round_trip_on_fields():
    for t in (pa.uuid(), pa.json_(), pa.bool8(), pa.fixed_shape_tensor(pa.float32(), [2, 3])):
        f = pa.field("e", t, metadata={"keep": "me"})
        j = arrow_field_to_json(f)
        assert j["metadata"]["ARROW:extension:name"] == t.extension_name
        assert j["metadata"]["keep"] == "me"
        assert j["type"] == arrow_type_to_json(t.storage_type)
        assert json_to_arrow_field(via_json_text(j)).equals(f, check_metadata=True)
    tensor = arrow_field_to_json(pa.field("e", pa.fixed_shape_tensor(pa.float32(), [2, 3])))
    assert json.loads(tensor["metadata"]["ARROW:extension:metadata"])["shape"] == [2, 3]


def test_python_extension_type_round_trips_nested():
    from lance.arrow import BFloat16Type

    t = pa.list_(pa.field("item", BFloat16Type()))
    j = arrow_type_to_json(t)
    assert j["fields"][0]["metadata"]["ARROW:extension:name"] == "lance.bfloat16"
    assert j["fields"][0]["type"] == {"type": "fixed_size_binary", "length": 2}
    assert_identical(json_to_arrow_type(j), t)


def test_unregistered_extension_name_stays_plain_metadata():
    f = pa.field("meta", pa.binary(), metadata={"ARROW:extension:name": "lance.json"})
    back = json_to_arrow_field(arrow_field_to_json(f))
    assert back.equals(f, check_metadata=True)


def test_bare_extension_type_is_rejected():
    with pytest.raises(
        TypeConversionError, match=r"extension<arrow\.uuid.*only supported as the type of a field"
    ):
        arrow_type_to_json(pa.uuid())


# -- type_to_string -----------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "s"),
    [
        (pa.int32(), "int32"),
        (pa.utf8(), "utf8"),
        (pa.timestamp("us", tz="UTC"), "timestamp[us, tz=UTC]"),
        (pa.timestamp("ns"), "timestamp[ns]"),
        (pa.time32("ms"), "time32[ms]"),
        (pa.duration("s"), "duration[s]"),
        (pa.decimal128(38, 10), "decimal128(38, 10)"),
        (pa.binary(16), "fixed_size_binary[16]"),
        (pa.list_(pa.int32()), "list<int32>"),
        (
            pa.list_(pa.field("item", pa.int32(), nullable=False), 4),
            "fixed_size_list<int32 not null>[4]",
        ),
        (
            pa.struct([("a", pa.int8()), pa.field("b", pa.utf8(), nullable=False)]),
            "struct<a: int8, b: utf8 not null>",
        ),
        (
            pa.map_(pa.utf8(), pa.int32(), keys_sorted=True),
            "map<utf8 not null, int32, keys_sorted>",
        ),
        (pa.dictionary(pa.int16(), pa.utf8(), ordered=True), "dictionary<int16, utf8, ordered>"),
        (pa.string_view(), "utf8_view"),
        (pa.uuid(), "extension<arrow.uuid: fixed_size_binary[16]>"),
        (pa.run_end_encoded(pa.int32(), pa.utf8()), str(pa.run_end_encoded(pa.int32(), pa.utf8()))),
    ],
)
def test_type_to_string(t, s):
    assert type_to_string(t) == s


# -- bad JSON -----------------------------------------------------------------

BAD_TYPES = [
    ({"type": "int128"}, 'unknown type \'int128\' in JsonArrowDataType {"type": "int128"}'),
    ({"typ": "int32"}, "missing required key 'type' in JsonArrowDataType"),
    ({"type": 32}, "'type' must be a string, got 32"),
    ("int32", 'expected a JSON object, got str in JsonArrowDataType "int32"'),
    ({"type": "union"}, "unsupported type 'union' (written without its parameters"),
    ({"type": "int32", "unit": "s"}, "unexpected key(s) ['unit'] for type 'int32'"),
    ({"type": "utf8", "fields": []}, "unexpected key(s) ['fields'] for type 'utf8'"),
    (
        {"type": "timestamp", "unit": "xs"},
        "'unit' of timestamp must be one of ['s', 'ms', 'us', 'ns'], got \"xs\"",
    ),
    ({"type": "time32", "unit": "us"}, "'unit' of time32 must be one of ['s', 'ms'], got \"us\""),
    ({"type": "time64"}, "missing required key 'unit' for type 'time64'"),
    (
        {"type": "timestamp", "unit": "us", "timezone": ""},
        "'timezone' must be a non-empty string or absent, got \"\"",
    ),
    (
        {"type": "timestamp", "unit": "us", "timezone": 0},
        "'timezone' must be a non-empty string or absent, got 0",
    ),
    ({"type": "fixed_size_binary"}, "missing required key 'length' for type 'fixed_size_binary'"),
    ({"type": "fixed_size_binary", "length": "16"}, "'length' must be an integer, got \"16\""),
    ({"type": "fixed_size_binary", "length": 16.0}, "'length' must be an integer, got 16.0"),
    ({"type": "fixed_size_binary", "length": True}, "'length' must be an integer, got true"),
    (
        {"type": "fixed_size_binary", "length": -1},
        "'length' must be between 0 and 2147483647, got -1",
    ),
    ({"type": "decimal128"}, "missing required key 'length' for type 'decimal128'"),
    (
        {"type": "decimal128", "length": 39000},
        "decimal128 'length' must be precision * 1000 + scale with 1 <= precision <= 38 and -128 <= scale <= 127, got 39000 (precision 39, scale 0)",
    ),
    ({"type": "decimal128", "length": 10}, "got 10 (precision 0, scale 10)"),
    ({"type": "decimal32", "length": 9500}, "got 9500 (precision 9, scale 500)"),
    ({"type": "list"}, "missing required key 'fields' for type 'list'"),
    ({"type": "list", "fields": {"name": "item"}}, "'fields' must be a list"),
    (
        {"type": "list", "fields": [{"name": "a", "nullable": True, "type": {"type": "int8"}}] * 2},
        "type 'list' needs exactly 1 child field in 'fields', got 2",
    ),
    (
        {
            "type": "fixed_size_list",
            "fields": [{"name": "i", "nullable": True, "type": {"type": "int8"}}],
        },
        "missing required key 'length' for type 'fixed_size_list'",
    ),
    ({"type": "struct"}, "missing required key 'fields' for type 'struct'"),
    (
        {
            "type": "map",
            "fields": [{"name": "entries", "nullable": False, "type": {"type": "int32"}}],
        },
        "the map entries field must be a struct of exactly two fields (key, value), got int32",
    ),
    (
        {
            "type": "map",
            "fields": [
                {
                    "name": "entries",
                    "nullable": False,
                    "type": {
                        "type": "struct",
                        "fields": [
                            {"name": "key", "nullable": True, "type": {"type": "utf8"}},
                            {"name": "value", "nullable": True, "type": {"type": "utf8"}},
                        ],
                    },
                }
            ],
        },
        "the map key field 'key' must not be nullable",
    ),
    (
        {
            "type": "map",
            "fields": [
                {"name": "entries", "nullable": True, "type": {"type": "struct", "fields": []}}
            ],
        },
        "the map entries field must be a struct of exactly two fields",
    ),
    ({"type": "map", "keys_sorted": "yes", "fields": []}, "needs exactly 1 child field"),
    ({"type": "utf8", "view": "true"}, "'view' must be true or false, got \"true\""),
    (
        {"type": "utf8", "dictionary": {"index_type": {"type": "utf8"}}},
        "dictionary 'index_type' must be an integer type, got utf8",
    ),
    (
        {"type": "utf8", "dictionary": {"ordered": True}},
        "missing required key 'index_type' in 'dictionary'",
    ),
    (
        {"type": "utf8", "dictionary": {"index_type": {"type": "int8"}, "sorted": True}},
        "unexpected key(s) ['sorted'] in 'dictionary'",
    ),
    (
        {"type": "utf8", "dictionary": {"index_type": {"type": "int8"}, "ordered": 1}},
        "dictionary 'ordered' must be true or false, got 1",
    ),
    ({"type": "utf8", "dictionary": "int8"}, "'dictionary' must be a JSON object, got \"int8\""),
    # errors inside children name the field path
    (
        {
            "type": "list",
            "fields": [
                {
                    "name": "item",
                    "nullable": True,
                    "type": {
                        "type": "struct",
                        "fields": [
                            {
                                "name": "ts",
                                "nullable": True,
                                "type": {"type": "timestamp", "unit": "minutes"},
                            }
                        ],
                    },
                }
            ],
        },
        "'unit' of timestamp must be one of ['s', 'ms', 'us', 'ns'], got \"minutes\" in JsonArrowDataType "
        '{"type": "timestamp", "unit": "minutes"} (at field \'item.ts\')',
    ),
    (
        {"type": "struct", "fields": [{"name": "a", "type": {"type": "int8"}}]},
        "missing required key 'nullable' in JsonArrowField",
    ),
    (
        {"type": "struct", "fields": [{"name": "a", "nullable": "yes", "type": {"type": "int8"}}]},
        "'nullable' must be true or false, got \"yes\"",
    ),
    (
        {"type": "struct", "fields": [{"nullable": True, "type": {"type": "int8"}}]},
        "missing required key 'name' in JsonArrowField",
    ),
    (
        {"type": "struct", "fields": [{"name": 1, "nullable": True, "type": {"type": "int8"}}]},
        "'name' must be a string in JsonArrowField",
    ),
    (
        {"type": "struct", "fields": [{"name": "a", "nullable": True}]},
        "missing required key 'type' in JsonArrowField",
    ),
    (
        {
            "type": "struct",
            "fields": [
                {"name": "a", "nullable": True, "type": {"type": "int8"}, "metadata": {"k": 1}}
            ],
        },
        "metadata value of 'k' must be a string, got 1 in JsonArrowField",
    ),
    (
        {
            "type": "struct",
            "fields": [{"name": "a", "nullable": True, "type": {"type": "int8"}, "doc": "x"}],
        },
        "unexpected key(s) ['doc'] in JsonArrowField",
    ),
    (
        {
            "type": "struct",
            "fields": [
                {
                    "name": "u",
                    "nullable": True,
                    "type": {"type": "int8"},
                    "metadata": {
                        "ARROW:extension:name": "arrow.uuid",
                        "ARROW:extension:metadata": "",
                    },
                }
            ],
        },
        "invalid extension type",
    ),
]


@pytest.mark.parametrize(
    ("d", "message"), BAD_TYPES, ids=lambda x: "" if isinstance(x, str) else None
)
def test_bad_type_json(d, message):
    with pytest.raises(TypeConversionError, match=re.escape(message)):
        json_to_arrow_type(d)


def test_error_is_a_value_error():
    assert issubclass(TypeConversionError, ValueError)


def test_long_json_is_shortened_in_messages():
    d = {"type": "nope", "pad": "x" * 1000}
    with pytest.raises(TypeConversionError) as info:
        json_to_arrow_type(d)
    assert len(str(info.value)) < 400
    assert "unknown type 'nope'" in str(info.value)


@pytest.mark.parametrize(
    ("d", "message"),
    [
        ([], "expected a JsonArrowSchema JSON object, got list"),
        ({}, "missing required key 'fields' in JsonArrowSchema {}"),
        ({"fields": {}}, "'fields' must be a list in JsonArrowSchema"),
        ({"fields": [], "version": 2}, "unexpected key(s) ['version'] in JsonArrowSchema"),
        (
            {"fields": [], "metadata": {"a": None}},
            "metadata value of 'a' must be a string, got null",
        ),
        ({"fields": [], "metadata": ["a"]}, "'metadata' must be a JSON object of strings"),
        (
            {"fields": [{"name": "ts", "nullable": True, "type": {"type": "time32"}}]},
            "missing required key 'unit' for type 'time32' in JsonArrowDataType {\"type\": \"time32\"} (at field 'ts')",
        ),
        (
            {"fields": ["id"]},
            "expected a JSON object, got str in JsonArrowField \"id\" (at field '[0]')",
        ),
    ],
)
def test_bad_schema_json(d, message):
    with pytest.raises(TypeConversionError, match=re.escape(message)):
        json_to_arrow_schema(d)


class _PyExt(pa.ExtensionType):
    def __init__(self):
        super().__init__(pa.int32(), "test.binary_meta")

    def __arrow_ext_serialize__(self):
        return b"\xff\xfe"

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


@pytest.mark.parametrize(
    ("t", "message"),
    [
        (
            pa.run_end_encoded(pa.int32(), pa.utf8()),
            "cannot convert Arrow type run_end_encoded<run_ends: int32, values: string> to JsonArrowDataType: this type is not supported",
        ),
        (pa.month_day_nano_interval(), "cannot convert Arrow type month_day_nano_interval"),
        (pa.sparse_union([pa.field("a", pa.int32())]), "cannot convert Arrow type sparse_union"),
        (pa.list_view(pa.int32()), "cannot convert Arrow type list_view"),
        (pa.large_list_view(pa.int32()), "cannot convert Arrow type large_list_view"),
        (
            pa.dictionary(pa.int8(), pa.dictionary(pa.int8(), pa.utf8())),
            "a dictionary whose values are a dictionary is not supported",
        ),
        (
            pa.decimal128(5, 200),
            "cannot convert Arrow type decimal128(5, 200) to JsonArrowDataType: decimal scale must be between -128 and 127",
        ),
        (
            pa.struct(
                [("ok", pa.int32()), ("bad", pa.list_(pa.run_end_encoded(pa.int32(), pa.utf8())))]
            ),
            "(at field 'bad.item')",
        ),
        (
            pa.struct([("e", _PyExt())]),
            "serialized extension metadata b'\\xff\\xfe' is not valid UTF-8 (at field 'e')",
        ),
    ],
    ids=type_to_string,
)
def test_unsupported_arrow_types(t, message):
    with pytest.raises(TypeConversionError, match=re.escape(message)):
        arrow_type_to_json(t)


def test_non_utf8_metadata_is_rejected():
    f = pa.field("a", pa.int32(), metadata={b"k": b"\xff"})
    with pytest.raises(
        TypeConversionError,
        match=re.escape("field 'a' has metadata b'k': b'\\xff' that is not valid UTF-8"),
    ):
        arrow_field_to_json(f)
    with pytest.raises(TypeConversionError, match="schema has metadata"):
        arrow_schema_to_json(pa.schema([], metadata={b"k": b"\xff"}))


def test_wrong_python_types_are_rejected():
    with pytest.raises(TypeConversionError, match="expected a pyarrow DataType, got str"):
        arrow_type_to_json("int32")  # type: ignore[arg-type]
    with pytest.raises(TypeConversionError, match="expected a pyarrow Field"):
        arrow_field_to_json(pa.int32())  # type: ignore[arg-type]
    with pytest.raises(TypeConversionError, match="expected a pyarrow Schema"):
        arrow_schema_to_json([pa.field("a", pa.int32())])  # type: ignore[arg-type]


# -- cross-check against pylance's own JSON (lance_namespace::schema in Rust) ---

# Types upstream (pylance 14.0.2) writes without loss: our JSON must equal its JSON.
UPSTREAM_LOSSLESS = {
    "nul": pa.null(),
    "b": pa.bool_(),
    "i8": pa.int8(),
    "i16": pa.int16(),
    "i32": pa.int32(),
    "u8": pa.uint8(),
    "u16": pa.uint16(),
    "u32": pa.uint32(),
    "u64": pa.uint64(),
    "f16": pa.float16(),
    "f32": pa.float32(),
    "f64": pa.float64(),
    "s": pa.utf8(),
    "ls": pa.large_utf8(),
    "bin": pa.binary(),
    "lbin": pa.large_binary(),
    "fsb": pa.binary(16),
    "dec": pa.decimal128(38, 10),
    "dec_neg": pa.decimal128(9, -2),
    "dec256": pa.decimal256(50, -3),
    "d32": pa.date32(),
    "d64": pa.date64(),
    "lst": pa.list_(pa.field("item", pa.int32(), nullable=False)),
    "llst": pa.large_list(pa.utf8()),
    "fsl": pa.list_(pa.float32(), 4),
    "st": pa.struct([pa.field("a", pa.int8()), pa.field("b", pa.utf8(), nullable=False)]),
    "m": pa.map_(pa.utf8(), pa.int32()),
    "nested": pa.list_(pa.struct([("a", pa.int64()), ("b", pa.decimal128(38, 10))])),
    "uuid": pa.uuid(),  # both sides: storage type + ARROW:extension:* field metadata
    "uuids": pa.list_(pa.uuid()),
}
# Types upstream writes lossily, and what its JSON means when read back.
UPSTREAM_LOSSY = {
    "ts": (pa.timestamp("ns", tz=NY), pa.timestamp("us")),
    "ts_s": (pa.timestamp("s"), pa.timestamp("us")),
    "dur": (pa.duration("ms"), pa.duration("us")),
    "dict": (pa.dictionary(pa.int16(), pa.utf8()), pa.utf8()),
    "lst_ts": (pa.list_(pa.timestamp("ms", tz="UTC")), pa.list_(pa.timestamp("us"))),
}
# Upstream writes these without a unit and cannot read them back; neither can we.
UPSTREAM_UNREADABLE = {"t32": pa.time32("ms"), "t64": pa.time64("ns")}


@pytest.fixture(scope="module")
def upstream_table(tmp_path_factory):
    lance_ns = pytest.importorskip("lance.namespace")
    from lance_namespace_urllib3_client.models import CreateTableRequest, DescribeTableRequest

    root = tmp_path_factory.mktemp("dirns")
    fields = [pa.field("id", pa.int64(), nullable=False, metadata={"lance:field_id": "0"})]
    fields += [pa.field(n, t) for n, t in UPSTREAM_LOSSLESS.items()]
    fields += [pa.field(n, t) for n, (t, _) in UPSTREAM_LOSSY.items()]
    fields += [pa.field(n, t) for n, t in UPSTREAM_UNREADABLE.items()]
    schema = pa.schema(fields, metadata={"owner": "test"})

    def one_null(t: pa.DataType) -> pa.Array:
        if isinstance(t, pa.BaseExtensionType):
            return pa.ExtensionArray.from_storage(t, pa.nulls(1, t.storage_type))
        return pa.nulls(1, t)

    cols = [pa.array([1], pa.int64())] + [one_null(f.type) for f in fields[1:]]
    table = pa.Table.from_arrays(cols, schema=schema)
    buf = io.BytesIO()
    with pa.ipc.new_stream(buf, schema) as writer:
        writer.write_table(table)

    ns = lance_ns.DirectoryNamespace(root=str(root))
    ns.create_table(CreateTableRequest(id=["t"]), buf.getvalue())
    resp = ns.describe_table(DescribeTableRequest(id=["t"], load_detailed_metadata=True))
    assert resp.var_schema is not None, "describe_table returned no schema"
    import lance

    stored = lance.dataset(resp.location).schema
    return stored, resp.var_schema.to_dict()


def test_upstream_agrees_on_lossless_types(upstream_table):
    stored, upstream = upstream_table
    ours = arrow_schema_to_json(stored)
    by_name = {f["name"]: f for f in upstream["fields"]}
    for name in ["id", *UPSTREAM_LOSSLESS]:
        assert arrow_field_to_json(stored.field(name)) == by_name[name], name
    assert ours["metadata"] == upstream["metadata"] == {"owner": "test"}


def test_upstream_json_is_ours_without_extra_keys(upstream_table):
    stored, upstream = upstream_table
    assert strip_extras(arrow_schema_to_json(stored)) == upstream


def test_we_read_upstream_json(upstream_table):
    stored, upstream = upstream_table
    by_name = {f["name"]: f for f in upstream["fields"]}
    for name in ["id", *UPSTREAM_LOSSLESS]:
        assert json_to_arrow_field(by_name[name]).equals(stored.field(name), check_metadata=True), (
            name
        )
    for name, (_, meaning) in UPSTREAM_LOSSY.items():
        assert_identical(json_to_arrow_field(by_name[name]).type, meaning)
    for name in UPSTREAM_UNREADABLE:
        with pytest.raises(
            TypeConversionError, match=f"missing required key 'unit' .* \\(at field '{name}'\\)"
        ):
            json_to_arrow_field(by_name[name])
