"""Arrow ↔ Spark type mapping, and making Arrow batches exactly what Spark expects.

Reading: every Arrow type a namespace may hold maps to the Spark type that holds
all its values unchanged (``arrow_to_spark``). Spark has nothing for ``uint64``,
decimals wider than 38 digits, month intervals, unions and the like; those raise
``UnsupportedTypeError`` naming the column, so a user can project it away with the
``columns`` option.

Spark's Python data source checks every batch against
``to_arrow_schema(schema, timezone="UTC")`` (names, types *and* nullability), so
``BatchConformer`` casts leaf batches to that schema: timestamps become
``timestamp[us, UTC]``, unsigned ints widen, nested field names follow Spark's
(``element``, ``key``/``value``). Casts are *safe*: a nanosecond timestamp that
is not a whole microsecond raises instead of being silently truncated.

Writing: ``spark_to_arrow`` gives the Arrow schema a new namespace is created
with from a DataFrame schema (plain, interoperable types: ``string`` not
``large_string``, timestamps in microseconds, UTC for ``TimestampType``).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    TimeType,
)

from lance_partitioned.errors import SchemaError, UnsupportedTypeError

SPARK_MAX_DECIMAL_PRECISION = 38


def _unsupported(path: str, t: object, why: str) -> UnsupportedTypeError:
    return UnsupportedTypeError(f"column {path!r} has type {t}, which {why}")


# -- Arrow → Spark (reading) --------------------------------------------------

_SIMPLE: list[tuple[object, DataType]] = [
    (pa.types.is_boolean, BooleanType()),
    (pa.types.is_int8, ByteType()),
    (pa.types.is_int16, ShortType()),
    (pa.types.is_int32, IntegerType()),
    (pa.types.is_int64, LongType()),
    # Unsigned ints widen to the next signed type: every value fits exactly.
    (pa.types.is_uint8, ShortType()),
    (pa.types.is_uint16, IntegerType()),
    (pa.types.is_uint32, LongType()),
    # Every float16 value is exactly a float32.
    (pa.types.is_float16, FloatType()),
    (pa.types.is_float32, FloatType()),
    (pa.types.is_float64, DoubleType()),
    (pa.types.is_string, StringType()),
    (pa.types.is_large_string, StringType()),
    (pa.types.is_string_view, StringType()),
    (pa.types.is_binary, BinaryType()),
    (pa.types.is_large_binary, BinaryType()),
    (pa.types.is_binary_view, BinaryType()),
    (pa.types.is_fixed_size_binary, BinaryType()),
    (pa.types.is_date32, DateType()),
    (pa.types.is_date64, DateType()),
    (pa.types.is_null, NullType()),
]


def arrow_type_to_spark(t: pa.DataType, path: str) -> DataType:
    """The Spark type holding every value of Arrow type ``t``; ``path`` names the column in errors."""
    for check, spark_type in _SIMPLE:
        if check(t):  # type: ignore[operator]
            return spark_type
    if pa.types.is_uint64(t):
        raise _unsupported(
            path, t, "Spark cannot hold (its largest integer is a signed 64-bit long)"
        )
    if pa.types.is_decimal(t):
        if t.precision > SPARK_MAX_DECIMAL_PRECISION:
            raise _unsupported(path, t, "Spark cannot hold (decimals have at most 38 digits)")
        return DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        # An instant when a time zone is set; a wall-clock value otherwise.
        return TimestampType() if t.tz is not None else TimestampNTZType()
    if pa.types.is_time(t):
        return TimeType(6)
    if pa.types.is_duration(t):
        return DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND)
    if pa.types.is_dictionary(t):
        return arrow_type_to_spark(t.value_type, path)
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        elem = t.value_field
        return ArrayType(arrow_type_to_spark(elem.type, f"{path}.{elem.name}"), elem.nullable)
    if pa.types.is_map(t):
        return MapType(
            arrow_type_to_spark(t.key_type, f"{path}.key"),
            arrow_type_to_spark(t.item_type, f"{path}.value"),
            t.item_field.nullable,
        )
    if pa.types.is_struct(t):
        return StructType(
            [
                StructField(f.name, arrow_type_to_spark(f.type, f"{path}.{f.name}"), f.nullable)
                for f in (t.field(i) for i in range(t.num_fields))
            ]
        )
    raise _unsupported(path, t, "Spark cannot hold")


def arrow_to_spark(schema: pa.Schema) -> StructType:
    """Spark schema of a namespace schema (nullability kept; field-id metadata dropped)."""
    return StructType(
        [StructField(f.name, arrow_type_to_spark(f.type, f.name), f.nullable) for f in schema]
    )


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark's Python data source expects batches in."""
    return to_arrow_schema(schema, timezone="UTC")


# -- conforming batches -------------------------------------------------------


def _cast(arr: pa.Array, target: pa.DataType, path: str) -> pa.Array:
    if arr.type.equals(target):
        return arr
    src = arr.type
    if pa.types.is_dictionary(src):
        return _cast(arr.dictionary_decode(), target, path)
    try:
        if pa.types.is_time(src) and pa.types.is_time64(target):
            # Spark's TIME(6) holds microseconds: refuse to drop nanoseconds silently.
            return pc.cast(pc.cast(arr, pa.time64("us"), safe=True), target)
        if pa.types.is_duration(src) and pa.types.is_duration(target):
            return pc.cast(arr, target, safe=True)
        return pc.cast(arr, target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(
            f"column {path!r}: cannot convert {src} to Spark's {target}: {exc}"
        ) from exc


class BatchConformer:
    """Casts batches (by column name) to exactly ``target``; columns absent from a batch read as NULL."""

    def __init__(self, target: pa.Schema):
        self.target = target

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if batch.schema.equals(self.target):
            return batch
        names = set(batch.schema.names)
        arrays = []
        for f in self.target:
            if f.name in names:
                arrays.append(_cast(batch.column(f.name), f.type, f.name))
            else:
                arrays.append(pa.nulls(batch.num_rows, type=f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)


# -- Spark → Arrow (creating a namespace from a DataFrame) --------------------


def spark_type_to_arrow(t: DataType, path: str) -> pa.DataType:
    """The Arrow type a new namespace stores Spark type ``t`` as."""
    simple: list[tuple[type, pa.DataType]] = [
        (BooleanType, pa.bool_()),
        (ByteType, pa.int8()),
        (ShortType, pa.int16()),
        (IntegerType, pa.int32()),
        (LongType, pa.int64()),
        (FloatType, pa.float32()),
        (DoubleType, pa.float64()),
        (StringType, pa.string()),
        (BinaryType, pa.binary()),
        (DateType, pa.date32()),
        (TimestampNTZType, pa.timestamp("us")),
        (TimestampType, pa.timestamp("us", tz="UTC")),
        (TimeType, pa.time64("us")),
    ]
    for cls, arrow in simple:
        if type(t) is cls:
            return arrow
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, DayTimeIntervalType):
        if (t.startField, t.endField) != (DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND):
            # Arrow's duration cannot record the narrower interval qualifier.
            raise _unsupported(
                path,
                t.simpleString(),
                "cannot be stored without losing its qualifier; cast it to INTERVAL DAY TO SECOND",
            )
        return pa.duration("us")
    if isinstance(t, ArrayType):
        return pa.list_(
            pa.field("item", spark_type_to_arrow(t.elementType, f"{path}.element"), t.containsNull)
        )
    if isinstance(t, MapType):
        return pa.map_(
            pa.field("key", spark_type_to_arrow(t.keyType, f"{path}.key"), nullable=False),
            pa.field(
                "value", spark_type_to_arrow(t.valueType, f"{path}.value"), t.valueContainsNull
            ),
        )
    if isinstance(t, StructType):
        return pa.struct(
            [
                pa.field(f.name, spark_type_to_arrow(f.dataType, f"{path}.{f.name}"), f.nullable)
                for f in t
            ]
        )
    raise _unsupported(
        path,
        t.simpleString(),
        "a namespace cannot store (supported: numbers, strings, binary, dates, timestamps, time, day-time intervals, arrays, maps, structs)",
    )


VECTOR_SIZE_KEY = "arrow.fixed-size-list.size"


def _vector_type(f: StructField, size: object) -> pa.DataType:
    """``fixed_size_list<float, size>`` for an ``array<float|double>`` field asked to be a vector."""
    t = f.dataType
    if not isinstance(t, ArrayType) or not isinstance(t.elementType, (FloatType, DoubleType)):
        raise _unsupported(
            f.name,
            t.simpleString(),
            f"cannot be stored as a vector ({VECTOR_SIZE_KEY} needs array<float> or array<double>)",
        )
    try:
        n = int(str(size))
    except ValueError:
        n = 0
    if n <= 0:
        raise SchemaError(
            f"column {f.name!r}: {VECTOR_SIZE_KEY} must be a positive integer, got {size!r}"
        )
    item = pa.float32() if isinstance(t.elementType, FloatType) else pa.float64()
    return pa.list_(pa.field("item", item, t.containsNull), n)


def spark_to_arrow(schema: StructType, vector_sizes: dict[str, int] | None = None) -> pa.Schema:
    """Arrow schema for creating a namespace from a DataFrame schema.

    A column named in ``vector_sizes`` (lowercased name -> dimension) or whose
    Spark metadata has ``arrow.fixed-size-list.size`` becomes a vector,
    ``fixed_size_list<float32|float64, size>`` (Spark has no fixed-size array);
    the rest map by ``spark_type_to_arrow``.
    """
    sizes = dict(vector_sizes or {})
    unknown = sorted(set(sizes) - {f.name.lower() for f in schema})
    if unknown:
        raise SchemaError(
            f"option {unknown[0]}.{VECTOR_SIZE_KEY} names no column; columns are {schema.names}"
        )
    fields = []
    for f in schema:
        size = sizes.get(f.name.lower(), (f.metadata or {}).get(VECTOR_SIZE_KEY))
        t = spark_type_to_arrow(f.dataType, f.name) if size is None else _vector_type(f, size)
        fields.append(pa.field(f.name, t, f.nullable))
    return pa.schema(fields)
