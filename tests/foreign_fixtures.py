"""Namespaces "written by another implementation", built by hand with plain pylance.

Nothing here imports ``lance_partitioned``: every byte follows seed 000 as a
second implementation would write it, so tests that read or write these
namespaces with our library check interoperability, not our writer against
itself.

What another implementation writes (seed 000, Appendices A-C):

- ``__manifest``: the ``DirectoryNamespace`` base columns, ``read_version`` /
  ``read_branch`` / ``read_tag``, one ``partition_field_<field_id>`` column per
  partition field; its table metadata holds ``schema`` (JsonArrowSchema with
  ``lance:field_id``) and ``partition_spec_v1``;
- rows: ``v1``, one namespace row per partition level (values inherited from
  the ancestors), one table row per leaf; **``metadata`` is ``{}``** (seed 000
  does not ask for our ``partition.*`` mirror);
- leaves: plain Lance datasets in ``<8 hex>_<object_id>`` directories.

``build`` makes four leaves, each pinned in one of the Read Behavior ways, and
``add_unpublished`` adds a version to a leaf that the manifest does not
publish (another writer's in-flight or abandoned version).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass, field

import lance
import pyarrow as pa

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("event_date", pa.date32()),
        pa.field("country", pa.string()),
        pa.field("value", pa.float64()),
    ]
)

SCHEMA_JSON = {
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
        {
            "name": "value",
            "nullable": True,
            "type": {"type": "float64"},
            "metadata": {"lance:field_id": "3"},
        },
    ]
}

SPEC_V1 = {
    "id": 1,
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
}

MANIFEST_SCHEMA = pa.schema(
    [
        pa.field(
            "object_id",
            pa.string(),
            nullable=False,
            metadata={"lance-schema:unenforced-primary-key:position": "0"},
        ),
        pa.field("object_type", pa.string(), nullable=False),
        pa.field("location", pa.string()),
        pa.field("metadata", pa.string()),
        pa.field("base_objects", pa.list_(pa.field("object_id", pa.string()))),
        pa.field("read_version", pa.uint64()),
        pa.field("read_branch", pa.string()),
        pa.field("read_tag", pa.string()),
        pa.field("partition_field_event_year", pa.int32()),
        pa.field("partition_field_country", pa.string()),
    ]
)


def events(ids: list[int], year: int, country: str | None) -> pa.Table:
    """Rows with the given ids, all in partition (year, country)."""
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "event_date": pa.array([dt.date(year, 1 + i % 12, 1 + i % 28) for i in ids]),
            "country": pa.array([country] * len(ids), pa.string()),
            "value": pa.array([float(i) / 2 for i in ids]),
        },
        schema=SCHEMA,
    )


@dataclass
class ForeignLeaf:
    """One partition table as the foreign writer left it."""

    name: str  # a label for tests: "main", "tag", "branch", "null"
    object_id: str
    location: str
    uri: str
    year: int
    country: str | None
    published_ids: list[int]
    read_version: int | None = None
    read_branch: str | None = None
    read_tag: str | None = None
    level_ids: tuple[str, str] = ("", "")  # namespace object ids of levels 1 and 2


@dataclass
class ForeignNamespace:
    root: str
    leaves: dict[str, ForeignLeaf] = field(default_factory=dict)

    @property
    def manifest_uri(self) -> str:
        return os.path.join(self.root, "__manifest")

    def published_ids(self) -> list[int]:
        return sorted(i for leaf in self.leaves.values() for i in leaf.published_ids)


# Fixed random-looking names (16 base36 characters), as another implementation
# would have drawn them.
_LEVEL1 = {2017: "k7m2n9p4q8r5s3t6", 2018: "e9f0g1h2i3j4k5l6"}
_LEVEL2 = {
    (2017, "US"): "w1x2y3z4a5b6c7d8",
    (2018, "US"): "m7n8o9p0q1r2s3t4",
    (2018, "FR"): "a1b2c3d4e5f6g7h8",
    (2018, None): "z9y8x7w6v5u4t3s2",
}
_HEX = {
    (2017, "US"): "b4a3c2d1",
    (2018, "US"): "aabbccdd",
    (2018, "FR"): "55667788",
    (2018, None): "0f1e2d3c",
}


def build(root: str) -> ForeignNamespace:
    """A seed-000 namespace with four leaves, one per Read Behavior case.

    - ``main`` (2017, US): ``read_version`` only; published = version 2 of 2.
    - ``tag`` (2018, US): ``read_tag = "published"`` only, the tag on version 1.
    - ``branch`` (2018, FR): ``read_branch = "staging"`` + ``read_version``; the
      branch forks main version 1 and adds one version; main moves on without
      being published.
    - ``null`` (2018, NULL country): ``read_version`` only, a NULL partition value.
    """
    os.makedirs(root, exist_ok=True)
    ns = ForeignNamespace(root)
    specs = {
        "main": ((2017, "US"), [[0, 1, 2], [3, 4]]),
        "tag": ((2018, "US"), [[10, 11, 12]]),
        "branch": ((2018, "FR"), [[20, 21]]),
        "null": ((2018, None), [[30]]),
    }
    rows: list[dict] = [
        {"object_id": "v1", "object_type": "namespace", "metadata": "{}"},
    ]
    seen_ns: set[str] = set()
    for name, ((year, country), batches) in specs.items():
        l1 = f"v1${_LEVEL1[year]}"
        l2 = f"{l1}${_LEVEL2[(year, country)]}"
        oid = f"{l2}$dataset"
        location = f"{_HEX[(year, country)]}_{oid}"
        uri = os.path.join(root, location)
        ds = None
        for i, ids in enumerate(batches):
            ds = lance.write_dataset(
                events(ids, year, country), uri, mode="create" if i == 0 else "append"
            )
        assert ds is not None
        leaf = ForeignLeaf(
            name,
            oid,
            location,
            uri,
            year,
            country,
            [i for ids in batches for i in ids],
            level_ids=(l1, l2),
        )
        if name == "tag":
            ds.tags.create("published", ds.version)
            leaf.read_tag = "published"
        elif name == "branch":
            branch = ds.create_branch("staging", ds.version)
            moved = lance.write_dataset(events([22, 23], year, country), branch, mode="append")
            leaf.published_ids += [22, 23]
            leaf.read_branch, leaf.read_version = "staging", moved.version
            # main moves on: never published
            lance.write_dataset(events([920], year, country), uri, mode="append")
        else:
            leaf.read_version = ds.version
        ns.leaves[name] = leaf
        if l1 not in seen_ns:
            seen_ns.add(l1)
            rows.append(
                {
                    "object_id": l1,
                    "object_type": "namespace",
                    "metadata": "{}",
                    "partition_field_event_year": year,
                }
            )
        rows.append(
            {
                "object_id": l2,
                "object_type": "namespace",
                "metadata": "{}",
                "partition_field_event_year": year,
                "partition_field_country": country,
            }
        )
        rows.append(
            {
                "object_id": oid,
                "object_type": "table",
                "location": location,
                "metadata": "{}",
                "read_version": leaf.read_version,
                "read_branch": leaf.read_branch,
                "read_tag": leaf.read_tag,
                "partition_field_event_year": year,
                "partition_field_country": country,
            }
        )
    manifest = lance.write_dataset(
        pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA),
        ns.manifest_uri,
        schema=MANIFEST_SCHEMA,
        mode="create",
    )
    manifest.update_metadata(
        {
            "schema": json.dumps(SCHEMA_JSON),
            "partition_spec_v1": json.dumps(SPEC_V1),
        }
    )
    return ns


def add_unpublished(leaf: ForeignLeaf, ids: list[int], on_branch: bool = True) -> int:
    """A plain-Lance append the manifest does not publish; returns its version.

    For a branch-pinned leaf it lands on that branch (``on_branch``), else on main.
    """
    rows = events(ids, leaf.year, leaf.country)
    if leaf.read_branch is not None and on_branch:
        target = lance.dataset(leaf.uri).checkout_version((leaf.read_branch, None))
        uri = os.path.join(leaf.uri, "tree", leaf.read_branch)
        assert lance.dataset(uri).version == target.version
        return lance.write_dataset(rows, uri, mode="append").version
    return lance.write_dataset(rows, leaf.uri, mode="append").version


def manifest_version(ns: ForeignNamespace) -> int:
    return lance.dataset(ns.manifest_uri).version


def tree(root: str) -> dict[str, tuple[int, int]]:
    """Every file under ``root``: relative path -> (size, mtime_ns). Equal trees = nothing written."""
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            st = os.stat(path)
            out[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return out


# A spec v2 naming a source field id no schema has: a current spec that fails validation.
SPEC_V2_UNKNOWN_SOURCE = {
    "id": 2,
    "fields": [
        {
            "field_id": "ghost",
            "source_ids": [99],
            "transform": {"type": "identity"},
            "result_type": {"type": "int64"},
        }
    ],
}
