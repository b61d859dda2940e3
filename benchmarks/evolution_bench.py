"""Issue 4 measurements: pruning across spec versions, and expression-field write throughput.

    .venv/bin/python benchmarks/evolution_bench.py [--partitions 10000] [--rows 2000000]

1. ``plan()`` at N partitions spread over three spec versions, against the same N
   partitions under one version (goal: < 2x).
2. Writing with a DataFusion ``expression`` field, ``abs(murmur3(col0)) % 16``,
   against the built-in ``bucket(16, ...)`` transform that means the same thing.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("LANCE_LOG", "error")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import lance_partitioned as lp  # noqa: E402
from lance_partitioned import PartitionField, PartitionSpec  # noqa: E402

SCHEMA = pa.schema([pa.field("k", pa.int64()), pa.field("v", pa.float64())])


def timed(fn, repeat: int = 5) -> float:
    """Median wall time of ``fn`` in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def keys(lo: int, hi: int) -> pa.Table:
    k = np.arange(lo, hi, dtype=np.int64)
    return pa.table({"k": k, "v": k.astype(np.float64)}, schema=SCHEMA)


def build_one_version(root: str, n: int) -> lp.PartitionedNamespace:
    ns = lp.create(root, SCHEMA, "k")
    ns.append(keys(0, n))
    return ns


def build_three_versions(root: str, n: int) -> lp.PartitionedNamespace:
    ns = lp.create(root, SCHEMA, "k")
    third = n // 3
    ns.append(keys(0, third))
    ns.evolve_spec("truncate(1, k)")
    ns.append(keys(third, 2 * third))
    ns.evolve_spec("bucket(1000003, k)")
    ns.append(keys(2 * third, n))
    return ns


FILTERS = ["k = 1234", "k IN (5, 5000, 9990)", "k >= 9990", None]


def plan_times(ns: lp.PartitionedNamespace) -> dict[str, float]:
    out = {}
    for f in FILTERS:
        out[f or "(no filter)"] = timed(lambda f=f: lp.open(ns.root).plan(f))
    return out


def expression_vs_transform(rows: int, workdir: str) -> dict[str, float]:
    data = pa.table(
        {"k": np.random.default_rng(0).integers(0, 10**12, rows), "v": np.zeros(rows)},
        schema=SCHEMA,
    )
    builtin = PartitionSpec(
        1, (PartitionField("kb", (0,), pa.int32(), transform=lp.format.transforms.Bucket(16)),)
    )
    expression = PartitionSpec(
        1, (PartitionField("kb", (0,), pa.int32(), expression="abs(murmur3(col0)) % 16"),)
    )
    out = {}
    schema = lp.Schema.from_arrow(SCHEMA)
    for name, spec in (("bucket transform", builtin), ("expression", expression)):
        field = spec.fields[0]
        out[f"{name}: partition values, rows/s"] = rows / timed(
            lambda field=field: field.values(data, schema), 3
        )

        def write(spec=spec, name=name):
            root = tempfile.mkdtemp(dir=workdir)
            ns = lp.create(os.path.join(root, "ns"), SCHEMA, spec)
            ns.append(data)

        out[f"{name}: append, rows/s"] = rows / timed(write, 3)
    first = builtin.fields[0].values(data, schema)
    second = expression.fields[0].values(data, schema)
    assert first.equals(second), "the expression and the transform must agree"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="lp-evolution-")
    os.makedirs(workdir, exist_ok=True)

    t0 = time.perf_counter()
    one = build_one_version(os.path.join(workdir, "one"), args.partitions)
    t1 = time.perf_counter()
    three = build_three_versions(os.path.join(workdir, "three"), args.partitions)
    t2 = time.perf_counter()
    p1, p3 = plan_times(one), plan_times(three)
    lines = [
        "# Evolution benchmarks",
        "",
        f"Command: `.venv/bin/python benchmarks/evolution_bench.py --partitions {args.partitions} --rows {args.rows}`",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}",
        "",
        f"Built {args.partitions} partitions: one spec version in {t1 - t0:.1f} s, three versions in {t2 - t1:.1f} s.",
        "",
        "## plan() latency (median of 5, cold `lp.open` + `plan`)",
        "",
        "| filter | 1 version (ms) | 3 versions (ms) | ratio (goal < 2x) |",
        "|---|---|---|---|",
    ]
    for f in p1:
        lines.append(f"| `{f}` | {p1[f] * 1000:.1f} | {p3[f] * 1000:.1f} | {p3[f] / p1[f]:.2f}x |")
    ex = expression_vs_transform(args.rows, workdir)
    lines += [
        "",
        f"## Expression field vs built-in transform ({args.rows:,} int64 rows, 16 buckets)",
        "",
    ]
    lines += ["| measure | rows/s |", "|---|---|"]
    lines += [f"| {k} | {v:,.0f} |" for k, v in ex.items()]
    ratio = ex["expression: append, rows/s"] / ex["bucket transform: append, rows/s"]
    vratio = (
        ex["expression: partition values, rows/s"]
        / ex["bucket transform: partition values, rows/s"]
    )
    lines += [
        "",
        f"Expression / transform throughput: {vratio:.2f}x for computing values, {ratio:.2f}x for the whole append.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    out = os.path.join(os.path.dirname(__file__), "results", "evolution.md")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        fh.write(text)
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
