"""Reading a seed-003 namespace with the seed-000 scan machinery, read-only.

A :class:`Seed003Snapshot` is a ``Snapshot`` whose ``__manifest`` rows are an
in-memory, seed-000-shaped rebuild of the seed-003 table list: one ``v1$<seed-003
object id>`` table row per leaf, pinned to the leaf's latest version when the
snapshot was taken (so one scan reads one consistent state), with partition
columns only for the identity columns whose table-name values prune exactly
(``catalog.seed003.prunable_columns``). ``Scan``'s pruning, residual filters and
``explain`` then work unchanged; leaves are read by column *name* (seed 003 §4
has no field ids): a namespace column a leaf lacks reads as NULL, a leaf column
the namespace lacks is ignored, another type is cast (an impossible cast raises).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import lance
import pyarrow as pa

from lance_partitioned.catalog.manifest import Manifest, manifest_schema
from lance_partitioned.catalog.snapshot import Leaf, Snapshot
from lance_partitioned.errors import SchemaError, lance_boundaries
from lance_partitioned.format.filters.evaluate import filter_batch
from lance_partitioned.format.schema import Schema
from lance_partitioned.format.spec import PartitionSpec
from lance_partitioned.operations.read.scan import Scan, _threads
from lance_partitioned.seed003 import layout as seed003


@dataclass
class Seed003Snapshot(Snapshot):
    """A seed-003 namespace as a read-only seed-000 snapshot (see the module doc)."""

    layout: seed003.Seed003Layout | None = None

    @property
    def version(self) -> int:
        """The seed-003 ``__manifest`` version this snapshot was read from."""
        assert self.layout is not None
        return self.layout.manifest_version

    @classmethod
    def of(
        cls, layout: seed003.Seed003Layout, storage_options: dict[str, str] | None = None
    ) -> Seed003Snapshot:
        """The snapshot of ``layout``: every leaf pinned at its current latest version."""
        keep = seed003.prunable_columns(layout)
        spec_json = seed003.seed000_spec_json(layout)
        spec = PartitionSpec.from_json({"id": 1, "fields": [spec_json["fields"][i] for i in keep]})
        fields = [pa.field(f.column, f.result_type) for f in spec.fields]
        rows = []
        for leaf in layout.leaves:
            ds = lance.dataset(layout.leaf_uri(leaf), storage_options=storage_options)
            row = {
                "object_id": f"v1${leaf.object_id}",
                "object_type": "table",
                "location": leaf.location,
                "read_version": ds.version,
            }
            for i, f in zip(keep, fields, strict=True):
                row[f.name] = pa.scalar(leaf.values[i]).cast(f.type).as_py()
            rows.append(row)
        table = pa.Table.from_pylist(rows, schema=manifest_schema(fields))
        view = lance.write_dataset(table, f"memory://lp-seed003-{uuid.uuid4().hex}")
        return cls(
            Manifest(layout.root, storage_options),
            view,
            layout.schema,
            {1: spec},
            layout=layout,
        )


def conform_by_name(batch: pa.RecordBatch, schema: pa.Schema, label: str) -> pa.RecordBatch:
    """``batch`` (a leaf's columns) as ``schema`` by name: absent columns NULL, types cast."""
    arrays = []
    for f in schema:
        if f.name not in batch.schema.names:
            arrays.append(pa.nulls(batch.num_rows, f.type))
            continue
        col = batch.column(f.name)
        if col.type != f.type:
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaError(
                    f"{label}: column {f.name!r} of type {col.type} cannot be read as the "
                    f"namespace type {f.type} (seed 003 §4): {exc}"
                ) from exc
        arrays.append(col)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _lance_filters(ds: lance.LanceDataset, schema: Schema, filter_columns: Sequence[str]) -> bool:
    """Whether Lance can run the filter on the leaf itself: every filter column is there,
    under its namespace name and type."""
    names = ds.schema.names
    return all(
        c in names and ds.schema.field(c).type == schema.arrow.field(c).type for c in filter_columns
    )


@lance_boundaries
class Seed003Scan(Scan):
    """A ``Scan`` of a ``Seed003Snapshot``: leaves are read and conformed by column name."""

    def _leaf_batches(self, leaf: Leaf) -> Iterator[pa.RecordBatch]:
        ds = self.snapshot.open_leaf(leaf)
        out = self.output_schema
        sql = self.leaf_filter(leaf)
        present = set(ds.schema.names)
        kwargs = {"batch_size": self.batch_size} if self.batch_size else {}
        if _lance_filters(ds, self.snapshot.schema, self.filter_columns):
            cols = [f.name for f in out if f.name in present]
            for batch in ds.scanner(columns=cols, filter=sql, **kwargs).to_batches():
                yield conform_by_name(batch, out, leaf.object_id)
            return
        wide_names = list(dict.fromkeys([*out.names, *self.filter_columns]))
        wide = pa.schema([self.snapshot.schema.arrow.field(n) for n in wide_names])
        wide = pa.schema([pa.field(f.name, f.type, f.nullable) for f in wide])
        cols = [n for n in wide_names if n in present]
        for batch in ds.scanner(columns=cols, **kwargs).to_batches():
            kept = conform_by_name(batch, wide, leaf.object_id)
            if sql is not None and kept.num_rows:
                kept = filter_batch(kept, sql)
            if kept.num_rows:
                yield kept.select(out.names)

    def _leaf_rows(self, leaf: Leaf, residual: Any = None) -> pa.Table:
        # Leaves are conformed by name here, not by field id as ``Scan`` reads them,
        # and ``_leaf_batches`` derives each leaf's filter itself: ``residual``
        # (what ``Scan.to_arrow`` precomputes for its own reads) is not used.
        return pa.Table.from_batches(list(self._leaf_batches(leaf)), schema=self.output_schema)

    def count(self) -> int:
        """Number of matching rows (counted inside Lance where the leaf allows it)."""

        def one(leaf: Leaf) -> int:
            ds = self.snapshot.open_leaf(leaf)
            if _lance_filters(ds, self.snapshot.schema, self.filter_columns):
                return ds.count_rows(filter=self.leaf_filter(leaf))
            return sum(b.num_rows for b in self._leaf_batches(leaf))

        with ThreadPoolExecutor(_threads()) as pool:
            return sum(pool.map(one, self.leaves))
