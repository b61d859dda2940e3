"""Issue 4 measurements: pruning across spec versions, and expression-field write throughput.

    .venv/bin/python benchmarks/evolution_bench.py [--partitions 10000] [--rows 2000000]
        [--workdir DIR] [--reps 5] [--out benchmarks/results/evolution.md]

1. ``plan()`` at N partitions spread over three spec versions, against the same N
   partitions under one version (goal: < 2x).
2. Writing with a DataFusion ``expression`` field, ``abs(murmur3(col0)) % 16``,
   against the built-in ``bucket(16, ...)`` transform that means the same thing.

Answers are checked (the script exits non-zero otherwise): each selective filter
counts the rows numpy counts on the keys written, in both namespaces; the
expression and the transform compute the same partition values.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault("LANCE_LOG", "error")

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402

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


def filters(n: int) -> dict[str | None, np.ndarray | None]:
    """The filters timed, each with numpy's mask of the keys 0..n-1 it selects.

    At 10,000 partitions: ``k = 1234``, ``k IN (5, 5000, 9990)``, ``k >= 9990``
    and no filter; smaller namespaces get the same shapes within their keys.
    """
    k = np.arange(n)
    one, some, tail = min(1234, n - 1), (5, n // 2, max(n - 10, 0)), max(n - 10, 0)
    return {
        f"k = {one}": k == one,
        f"k IN ({', '.join(map(str, some))})": np.isin(k, some),
        f"k >= {tail}": k >= tail,
        None: None,
    }


def check_answers(ns: lp.PartitionedNamespace, n: int) -> None:
    """Each selective filter reads exactly the rows numpy selects (outside the timings)."""
    for f, mask in filters(n).items():
        if f is None:
            continue
        got, want = lp.open(ns.root).scan(f).count(), int(mask.sum())
        if got != want:
            raise AssertionError(f"{ns.root}: scan({f!r}).count() = {got}, numpy says {want}")


def plan_times(ns: lp.PartitionedNamespace, n: int, reps: int = 5) -> dict[str, float]:
    out = {}
    for f in filters(n):
        out[f or "(no filter)"] = timed(lambda f=f: lp.open(ns.root).plan(f), reps)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each plan (median)")
    parser.add_argument("--workdir", default=None, help="scratch directory (default: a new one)")
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "evolution.md"),
        help="markdown report path ('' to print only)",
    )
    args = parser.parse_args(argv)
    started, load_start, t_start = utc_now(), loadavg(), time.perf_counter()
    workdir = args.workdir or tempfile.mkdtemp(prefix="lp-evolution-")
    os.makedirs(workdir, exist_ok=True)
    for name in ("one", "three"):  # a reused --workdir starts from scratch
        shutil.rmtree(os.path.join(workdir, name), ignore_errors=True)

    t0 = time.perf_counter()
    one = build_one_version(os.path.join(workdir, "one"), args.partitions)
    t1 = time.perf_counter()
    three = build_three_versions(os.path.join(workdir, "three"), args.partitions)
    t2 = time.perf_counter()
    p1 = plan_times(one, args.partitions, args.reps)
    p3 = plan_times(three, args.partitions, args.reps)
    check_answers(one, args.partitions)
    check_answers(three, args.partitions)
    lines = [
        f"Built {args.partitions} partitions: one spec version in {t1 - t0:.1f} s, three versions in {t2 - t1:.1f} s.",
        "",
        f"## plan() latency (median of {args.reps}, cold `lp.open` + `plan`)",
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
    lines += [
        "",
        "Answers checked: the selective filters count the rows numpy selects, in both "
        "namespaces; the expression and the transform agree on every partition value.",
    ]
    head = header_lines(
        "Evolution benchmarks",
        command(__file__, argv),
        started,
        load_start,
        time.perf_counter() - t_start,
    )
    text = "\n".join(head + lines) + "\n"
    print(text)
    write_report(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
