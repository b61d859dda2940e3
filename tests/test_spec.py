"""Partition spec model: seed 000 JSON in and out, validation, Iceberg-style text."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lance_partitioned import PartitionField, PartitionSpec, Schema, SpecError, parse_spec
from lance_partitioned.format.spec import check_field_ids
from lance_partitioned.format.transforms import Bucket, Identity, Truncate, Year

APPENDIX_A = {
    "partition_spec_v1": {
        "id": 1,
        "fields": [
            {
                "field_id": "event_date",
                "source_ids": [1],
                "transform": {"type": "identity"},
                "result_type": {"type": "date32"},
            }
        ],
    },
    "partition_spec_v2": {
        "id": 2,
        "fields": [
            {
                "field_id": "event_year",
                "source_ids": [1],
                "transform": {"type": "year"},
                "result_type": {"type": "int32"},
            },
            {
                "field_id": "country",
                "source_ids": [2],
                "transform": {"type": "identity"},
                "result_type": {"type": "utf8"},
            },
        ],
    },
    "schema": {
        "fields": [
            {
                "name": "id",
                "nullable": False,
                "type": {"type": "int64"},
                "metadata": {"lance:field_id": "0"},
            },
            {
                "name": "event_date",
                "nullable": True,
                "type": {"type": "date32"},
                "metadata": {"lance:field_id": "1"},
            },
            {
                "name": "country",
                "nullable": True,
                "type": {"type": "utf8"},
                "metadata": {"lance:field_id": "2"},
            },
        ]
    },
}


@pytest.fixture
def schema() -> Schema:
    return Schema.from_arrow(
        pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                pa.field("event_date", pa.date32()),
                pa.field("country", pa.string()),
                pa.field("ts", pa.timestamp("us", tz="UTC")),
                pa.field("name", pa.string()),
                pa.field("amount", pa.decimal128(12, 2)),
                pa.field("tags", pa.list_(pa.string())),
            ]
        )
    )


def test_appendix_a_round_trips_exactly():
    schema = Schema.from_json(APPENDIX_A["schema"])
    for key in ("partition_spec_v1", "partition_spec_v2"):
        spec = PartitionSpec.from_json(json.dumps(APPENDIX_A[key]))
        spec.validate(schema)
        assert spec.to_json() == APPENDIX_A[key]
        assert spec.key == key
    assert schema.to_json()["fields"] == APPENDIX_A["schema"]["fields"]
    v1, v2 = (
        PartitionSpec.from_json(APPENDIX_A[k]) for k in ("partition_spec_v1", "partition_spec_v2")
    )
    check_field_ids([v1, v2])
    assert [f.column for f in v2.fields] == [
        "partition_field_event_year",
        "partition_field_country",
    ]


def test_field_ids_assigned_depth_first():
    s = Schema.from_arrow(
        pa.schema(
            [
                pa.field("a", pa.int32()),
                pa.field("b", pa.int32()),
                pa.field(
                    "c",
                    pa.struct(
                        [
                            pa.field("x", pa.int32()),
                            pa.field("y", pa.int32()),
                            pa.field("z", pa.int32()),
                        ]
                    ),
                ),
                pa.field("d", pa.int32()),
            ]
        )
    )
    ids = {f.name: s.field_id(f.name) for f in s.arrow}
    assert ids == {"a": 0, "b": 1, "c": 2, "d": 6}
    kids = s.arrow.field("c").type
    assert [int(kids.field(i).metadata[b"lance:field_id"]) for i in range(3)] == [3, 4, 5]


def test_iceberg_string_form(schema):
    spec = parse_spec("year(event_date), bucket(16, id), truncate(4, name), country", schema)
    got = [(f.field_id, f.source_ids, f.transform, str(f.result_type)) for f in spec.fields]
    assert got == [
        ("event_date_year", (1,), Year(), "int32"),
        ("id_bucket", (0,), Bucket(16), "int32"),
        ("name_trunc", (4,), Truncate(4), "string"),
        ("country", (2,), Identity(), "string"),
    ]
    # Appendix F writes the column first: bucket(customer_id, 16). Both orders work.
    assert parse_spec("bucket(id, 16)", schema).fields[0].transform == Bucket(16)
    # aliases name the field
    assert parse_spec("year(ts) AS ts_y", schema).fields[0].field_id == "ts_y"
    # multi_bucket over several columns
    mb = parse_spec("multi_bucket(8, country, name)", schema).fields[0]
    assert mb.source_ids == (2, 4) and mb.field_id == "country_name_bucket"


def test_evolution_reuses_field_ids(schema):
    v1 = parse_spec("event_date", schema)
    v2 = parse_spec("year(event_date), country, event_date", schema, spec_id=2, existing=[v1])
    assert v2.fields[2] == v1.fields[0]
    # a new field never takes an id used for something else
    v3 = parse_spec("bucket(4, event_date) AS other", schema, spec_id=3, existing=[v1, v2])
    assert v3.fields[0].field_id == "other"
    with pytest.raises(SpecError, match="already used"):
        parse_spec("bucket(4, id) AS country", schema, spec_id=3, existing=[v1, v2])


def _field(**kw):
    base = {
        "field_id": "f",
        "source_ids": [0],
        "transform": {"type": "identity"},
        "result_type": {"type": "int64"},
    }
    base.update(kw)
    return {k: v for k, v in base.items() if v is not None}


@pytest.mark.parametrize(
    "field, message",
    [
        (_field(expression="col0"), "exactly one of transform or expression"),
        (_field(transform=None), "exactly one of transform or expression"),
        (_field(source_ids=[99]), "source id 99 is not a field id"),
        (
            _field(transform={"type": "bucket", "num_buckets": 0}, result_type={"type": "int32"}),
            "num_buckets must be an integer in",
        ),
        (
            _field(transform={"type": "bucket", "num_buckets": -3}, result_type={"type": "int32"}),
            "num_buckets must be an integer in",
        ),
        (_field(transform={"type": "truncate", "width": 0}), "width must be an integer in"),
        (
            _field(transform={"type": "year"}, source_ids=[1], result_type={"type": "utf8"}),
            "result_type string does not fit year",
        ),
        (
            _field(transform={"type": "bucket", "num_buckets": 4}, result_type={"type": "int64"}),
            "does not fit bucket",
        ),
        (
            _field(transform={"type": "identity"}, result_type={"type": "int32"}),
            "does not fit identity",
        ),
        (
            _field(transform={"type": "hour"}, source_ids=[1], result_type={"type": "int32"}),
            "hour needs a timestamp",
        ),
        (
            _field(transform={"type": "year"}, source_ids=[0], result_type={"type": "int32"}),
            "year needs a date or timestamp",
        ),
        (_field(transform={"type": "zorder"}), "unknown transform type 'zorder'"),
        (_field(transform={"type": "bucket"}, result_type={"type": "int32"}), "needs num_buckets"),
        (_field(field_id="bad id!"), "field_id must be"),
        (_field(result_type={"type": "int128"}), "bad result_type"),
        (_field(source_ids=[6]), "cannot partition by a column of type list"),
    ],
)
def test_field_validation_errors(schema, field, message):
    with pytest.raises(SpecError, match=message):
        PartitionSpec.from_json({"id": 1, "fields": [field]}).validate(schema)


@pytest.mark.parametrize(
    "text, message",
    [
        ("year(nope)", "no column named 'nope'"),
        ("quantize(3, id)", "unknown transform 'quantize'"),
        ("bucket(id)", "exactly one integer parameter"),
        ("year(event_date", "unbalanced"),
        ("id,,country", "empty term"),
        ("year(3, event_date)", "takes no parameters"),
    ],
)
def test_string_form_errors(schema, text, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(text, schema)


def test_string_form_quotes_names_as_filters_do():
    """Spec text lexes identifiers as filters do: a quote inside a quoted name is
    doubled (``"q""t"`` used to fail to parse), and bare names may be non-ASCII."""
    schema = Schema.from_arrow(
        pa.schema([('q"t', pa.int64()), ("a`b c", pa.int64()), ("año", pa.string())])
    )
    spec = parse_spec('"q""t", bucket(4, `a``b c`), truncate(2, año)', schema)
    assert [f.source_ids for f in spec.fields] == [(0,), (1,), (2,)]
    with pytest.raises(SpecError, match="position 7"):
        parse_spec("bucket(1.5, año)", schema)
    with pytest.raises(SpecError, match="unterminated quoted identifier"):
        parse_spec('"q""t', schema)


def test_malformed_json_spec(schema):
    with pytest.raises(SpecError, match="not valid JSON"):
        PartitionSpec.from_json('{"id": 1, "fields": [')
    with pytest.raises(SpecError, match="needs 'id' and 'fields'"):
        PartitionSpec.from_json({"fields": []})
    with pytest.raises(SpecError, match="spec id must be a positive integer"):
        PartitionSpec.from_json({"id": 0, "fields": []})


def test_field_id_never_reused_for_different_definition():
    a = PartitionField("x", (0,), pa.int32(), transform=Bucket(4))
    b = PartitionField("x", (0,), pa.int32(), transform=Bucket(8))
    with pytest.raises(SpecError, match="reused with a different definition"):
        check_field_ids([PartitionSpec(1, (a,)), PartitionSpec(2, (b,))])
    with pytest.raises(SpecError, match="lists field_id 'x' twice"):
        PartitionSpec(1, (a, a))
