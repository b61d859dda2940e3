"""Namespaces in seed 003's earlier layout, built by hand with plain pylance.

Nothing here imports ``lance_partitioned``. Per seed 003 (§2.1, §2.2, §3):

- the directory is a V2 directory namespace, made with pylance's own
  ``DirectoryNamespace`` (``create_namespace`` / ``create_table``): every
  partition level is a namespace ``<name>=<value>`` and the last a table, in a
  directory ``<8 hex>_<level1>$<level2>``;
- the root properties ``lance.partitioning.enabled``, ``.partition-columns`` and
  ``.schema`` are the ``__manifest`` table metadata, as JSON text; the schema is
  written the Java way (``"fields": []``, ``"length": null``, ``"metadata": {}``)
  without field ids, as in the draft's example;
- level names follow seed 003's "Write Path" lines: ``col=value`` (identity),
  ``col_year=2025``, ``col_bucket=N`` (``murmur3_32(value) mod N``),
  ``col_hash=<hex>``; the hash is the scalar reference in ``hashing_reference``.

Leaves differ from the namespace schema as seed 003 §4 allows (another column
order, a missing column, an extra column, a narrower type), so readers must map
columns by name.
"""

from __future__ import annotations

import datetime as dt
import io
import json

import lance
import pyarrow as pa
from lance_namespace import CreateNamespaceRequest, CreateTableRequest, connect

from tests.hashing_reference import murmur3_32_bytes


def _type(name: str) -> dict:
    return {"fields": [], "length": None, "type": name}


def _field(name: str, type_name: str, nullable: bool = True) -> dict:
    return {"metadata": {}, "name": name, "nullable": nullable, "type": _type(type_name)}


IDENTITY_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("event_date", pa.date32()),
        pa.field("country", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
IDENTITY_SCHEMA_JSON = {
    "fields": [
        _field("id", "int64", False),
        _field("event_date", "date32"),
        _field("country", "utf8"),
        _field("amount", "float64"),
    ],
    "metadata": {},
}
IDENTITY_COLUMNS = [
    {"name": "event_date", "function": "identity", "properties": {}},
    {"name": "country", "function": "identity", "properties": {}},
]


def _ipc(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    with pa.ipc.new_stream(buf, table.schema) as writer:
        writer.write_table(table)
    return buf.getvalue()


def _write(root: str, tables: dict[tuple[str, ...], pa.Table], properties: dict) -> None:
    """Create the namespaces and tables with pylance's DirectoryNamespace, then set the
    root properties on ``__manifest``."""
    ns = connect("dir", {"root": root})
    made: set[tuple[str, ...]] = set()
    for levels, table in tables.items():
        for depth in range(1, len(levels)):
            parent = levels[:depth]
            if parent not in made:
                ns.create_namespace(CreateNamespaceRequest(id=list(parent)))
                made.add(parent)
        ns.create_table(CreateTableRequest(id=list(levels)), _ipc(table))
    manifest = lance.dataset(f"{root}/__manifest")
    manifest.update_metadata(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in properties.items()}
    )


def build_identity(root: str) -> None:
    """Two identity levels (event_date, country), four tables; §4 differences in three."""
    d10, d11 = dt.date(2025, 12, 10), dt.date(2025, 12, 11)
    tables = {
        ("event_date=2025-12-10", "country=US"): pa.table(
            {
                "id": pa.array([0, 1, 2], pa.int64()),
                "event_date": pa.array([d10] * 3, pa.date32()),
                "country": ["US"] * 3,
                "amount": [1.5, 2.5, None],
            }
        ),
        # another column order
        ("event_date=2025-12-10", "country=CN"): pa.table(
            {
                "amount": [10.0, 20.0],
                "country": ["CN", "CN"],
                "id": pa.array([3, 4], pa.int64()),
                "event_date": pa.array([d10] * 2, pa.date32()),
            }
        ),
        # no amount column (reads as NULL), an extra column the namespace lacks
        ("event_date=2025-12-11", "country=US"): pa.table(
            {
                "id": pa.array([5, 6], pa.int64()),
                "event_date": pa.array([d11] * 2, pa.date32()),
                "country": ["US", "US"],
                "note": ["x", "y"],
            }
        ),
        # a narrower type (int32 amount, read as float64)
        ("event_date=2025-12-11", "country=FR"): pa.table(
            {
                "id": pa.array([7, 8, 9], pa.int64()),
                "event_date": pa.array([d11] * 3, pa.date32()),
                "country": ["FR"] * 3,
                "amount": pa.array([3, 4, 5], pa.int32()),
            }
        ),
    }
    _write(
        root,
        tables,
        {
            "lance.partitioning.enabled": "true",
            "lance.partitioning.partition-columns": IDENTITY_COLUMNS,
            "lance.partitioning.schema": IDENTITY_SCHEMA_JSON,
        },
    )


TRANSFORM_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("city", pa.string()),
        pa.field("name", pa.string()),
    ]
)
TRANSFORM_COLUMNS = [
    {"name": "ts", "function": "year", "properties": {}},
    {"name": "city", "function": "bucket", "properties": {"num-buckets": "4"}},
    # named by source id (depth-first position: id 0, ts 1, city 2, name 3)
    {"source-id": 3, "function": "hash", "properties": {}},
]


def _transform_rows() -> list[dict]:
    cities = ["Paris", "Lyon", "Oslo", "Rome", "Kyiv", "Lima"]
    names = ["ann", "bob", "cy"]
    base = dt.datetime(2023, 11, 30, 22, 0, tzinfo=dt.timezone.utc)
    return [
        {
            "id": i,
            "ts": base + dt.timedelta(days=17 * i, hours=i),
            "city": cities[i % len(cities)],
            "name": names[i % len(names)],
        }
        for i in range(40)
    ]


def build_transforms(root: str) -> None:
    """Three levels: year(ts), bucket(city, 4) and hash(name), one table per combination."""
    groups: dict[tuple[str, ...], list[dict]] = {}
    for row in _transform_rows():
        h = murmur3_32_bytes(row["name"].encode())
        levels = (
            f"ts_year={row['ts'].year}",
            f"city_bucket={murmur3_32_bytes(row['city'].encode()) % 4}",
            f"name_hash={h & 0xFFFFFFFF:08x}",
        )
        groups.setdefault(levels, []).append(row)
    tables = {k: pa.Table.from_pylist(v, schema=TRANSFORM_SCHEMA) for k, v in groups.items()}
    schema_json = {
        "fields": [
            _field("id", "int64", False),
            {
                "metadata": {},
                "name": "ts",
                "nullable": True,
                "type": {
                    "fields": [],
                    "length": None,
                    "type": "timestamp",
                    "unit": "us",
                    "timezone": "UTC",
                },
            },
            _field("city", "utf8"),
            _field("name", "utf8"),
        ],
        "metadata": {},
    }
    _write(
        root,
        tables,
        {
            "lance.partitioning.enabled": "true",
            "lance.partitioning.partition-columns": TRANSFORM_COLUMNS,
            "lance.partitioning.schema": schema_json,
        },
    )


def read_all(root: str, schema: pa.Schema) -> pa.Table:
    """Every source row, read with plain pylance and conformed to ``schema`` by name with
    pyarrow (seed 003 §4): the oracle conversions and reads are compared with."""
    rows = lance.dataset(f"{root}/__manifest").to_table().to_pylist()
    parts = []
    for row in rows:
        if row["object_type"] != "table":
            continue
        t = lance.dataset(f"{root}/{row['location']}").to_table()
        cols = [
            t[f.name].cast(f.type) if f.name in t.schema.names else pa.nulls(t.num_rows, f.type)
            for f in schema
        ]
        parts.append(pa.table(cols, schema=pa.schema([pa.field(f.name, f.type) for f in schema])))
    return pa.concat_tables(parts).sort_by("id")


def read_all_locations(root: str) -> list[str]:
    """The ``location`` of every table row of ``__manifest`` (plain pylance)."""
    rows = lance.dataset(f"{root}/__manifest").to_table().to_pylist()
    return [r["location"] for r in rows if r["object_type"] == "table"]
