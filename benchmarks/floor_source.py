"""The floor of a PySpark 4.3 Python data source: rows from memory-mapped Arrow IPC files.

``spark_sql_bench.py --floor`` measures, beside our views, views served by a Python
source that does no Lance work at all: each of its input partitions is one Arrow
IPC file on local disk, memory-mapped and yielded batch by batch, restricted to the
columns of the schema Spark gives the reader. The files are written once, before
timing, from the namespace itself: one file per input partition of our reader's
full-column plan, holding exactly the batches our reader yields (types conformed to
Spark's), so the floor hands Spark the same rows, in the same batches, over the same
number of tasks as our default views do.

``FloorSource`` is registered under our source's name for the length of a run (and
ours restored after), so the session's extension treats its relations as it treats
ours: per-scan column pruning, a size from the namespace root (``root`` option), an
isolated scan. A relation without the ``floorDir`` option is ours, unchanged
(``super()``). Without ``root`` (the decimal micro-benchmark) the schema is the IPC
files' own.

Ours minus the floor is our own cost (Lance, planning, conforming); the floor minus
Spark on Parquet is PySpark's cost of a Python source on those rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from lance_partitioned.spark.datasource import (
    LancePartitionedDataSource,
    LancePartitionedReader,
)
from lance_partitioned.spark.options import SourceOptions
from lance_partitioned.spark.types import arrow_to_spark

FLOOR_OPTION = "floorDir"
MARKER = ".complete"


def ipc_files(directory: str) -> list[str]:
    """The IPC files of one floor table, in input-partition order."""
    return sorted(os.path.join(directory, f) for f in os.listdir(directory) if f.endswith(".arrow"))


def write_table(root: str, directory: str) -> int:
    """Write ``root``'s rows as our default reader yields them: one IPC file per input
    partition of its full-column plan (kept when a finished copy exists). Returns the
    number of files."""
    if os.path.exists(directory + MARKER):
        return len(ipc_files(directory))
    os.makedirs(directory, exist_ok=True)
    for f in ipc_files(directory):
        os.remove(f)
    options = {"root": root}
    schema = LancePartitionedDataSource(options).schema()
    reader = LancePartitionedReader(SourceOptions.parse(options), schema)
    parts = reader.partitions()
    for i, part in enumerate(parts):
        batches = list(reader.read(part))
        target = batches[0].schema if batches else reader.arrow_schema
        with pa.ipc.new_file(os.path.join(directory, f"{i:05d}.arrow"), target) as out:
            for b in batches:
                out.write_batch(b)
    open(directory + MARKER, "w").close()
    return len(parts)


def write_variant(files: list[str], directory: str, columns: list[str], convert) -> None:
    """Copies of ``files`` restricted to ``columns``, each batch passed through ``convert``
    (the decimal micro-benchmark's float64 and int64 twins of lineitem's Q1 columns)."""
    if os.path.exists(directory + MARKER):
        return
    os.makedirs(directory, exist_ok=True)
    for path in files:
        with pa.memory_map(path) as src:
            reader = pa.ipc.open_file(src)
            batches = [
                convert(reader.get_batch(i).select(columns))
                for i in range(reader.num_record_batches)
            ]
        with pa.ipc.new_file(
            os.path.join(directory, os.path.basename(path)), batches[0].schema
        ) as out:
            for b in batches:
                out.write_batch(b)
    open(directory + MARKER, "w").close()


class FloorPartition(InputPartition):
    def __init__(self, index: int, path: str):
        super().__init__(index)
        self.path = path


class FloorReader(DataSourceReader):
    """Yields the IPC files' batches, only the columns of the schema Spark asks for."""

    def __init__(self, directory: str, schema: StructType):
        self.directory = directory
        self.columns = [f.name for f in schema.fields]

    def partitions(self) -> list[InputPartition]:
        return [FloorPartition(i, p) for i, p in enumerate(ipc_files(self.directory))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, FloorPartition):
            return
        with pa.memory_map(partition.path) as src:
            reader = pa.ipc.open_file(src)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i).select(self.columns)


class FloorSource(LancePartitionedDataSource):
    """Our source, except that a relation with ``floorDir`` reads the floor's IPC files."""

    def schema(self) -> StructType:
        directory = self.options.get(FLOOR_OPTION)
        if directory and not self.options.get("root"):
            with pa.memory_map(ipc_files(directory)[0]) as src:
                return arrow_to_spark(pa.ipc.open_file(src).schema)
        return super().schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        directory = self.options.get(FLOOR_OPTION)
        if directory:
            return FloorReader(directory, schema)
        return super().reader(schema)
