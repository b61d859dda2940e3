"""TPC-H data for the demo pipeline, tests and benchmarks, generated with ``tpchgen-cli``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq


def _tpchgen() -> str:
    exe = os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
    if os.path.exists(exe):
        return exe
    found = shutil.which("tpchgen-cli")
    if not found:
        raise RuntimeError("tpchgen-cli is not installed: pip install tpchgen-cli")
    return found


def generate(
    scale_factor: float, out_dir: str, tables: Sequence[str] = ("lineitem", "orders")
) -> dict[str, str]:
    """Write TPC-H tables as Parquet into ``out_dir`` (skipped when present); returns paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {t: os.path.join(out_dir, f"{t}.parquet") for t in tables}
    missing = [t for t, p in paths.items() if not os.path.exists(p)]
    if missing:
        subprocess.run(
            [
                _tpchgen(),
                "parquet",
                "-s",
                str(scale_factor),
                f"--tables={','.join(missing)}",
                f"--output-dir={out_dir}",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return paths


def normalize_schema(schema: pa.Schema) -> pa.Schema:
    """Plain types that Lance, Spark and pyiceberg all accept (string_view → string), no metadata."""

    def plain(t: pa.DataType) -> pa.DataType:
        if pa.types.is_string_view(t):
            return pa.string()
        if pa.types.is_binary_view(t):
            return pa.binary()
        return t

    return pa.schema([pa.field(f.name, plain(f.type), f.nullable) for f in schema])


def read(path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Read a generated table with normalised types."""
    table = pq.read_table(path, columns=list(columns) if columns else None)
    return table.cast(normalize_schema(table.schema))


def table_schema(path: str) -> pa.Schema:
    """The normalised schema of a generated table (``read``'s and ``batches``' schema)."""
    return normalize_schema(pq.ParquetFile(path).schema_arrow)


def batches(path: str, batch_size: int = 1 << 17):
    """Stream a generated table as normalised record batches (for larger-than-memory writes)."""
    pf = pq.ParquetFile(path)
    schema = normalize_schema(pf.schema_arrow)
    for b in pf.iter_batches(batch_size=batch_size):
        yield b.cast(schema)
