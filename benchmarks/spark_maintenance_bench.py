"""Maintenance on Spark's executors against the single-machine calls.

    .venv/bin/python benchmarks/spark_maintenance_bench.py [--partitions 10000]
        [--fragments 10] [--tenants 1000] [--vectors 10000] [--master local[2]]
        [--workdir /tmp/lp_spark_maint_bench] [--out benchmarks/results/spark_maintenance.md]

1. **Compaction.** A namespace of ``--partitions`` partitions (identity on ``p``)
   with ``--fragments`` fragments each (one append per fragment) is copied; the copy
   is compacted by ``ns.compact()``, the original by ``lps.compact(spark, root)``.
   The driver's share of ``lps.compact`` (planning, the one ``__manifest`` commit,
   the manifest's own compaction) is the total minus the Spark job, timed around
   the staging job. From the job's per-partition cost in executor core-seconds the
   report *projects* the time for 1,000,000 partitions on 100 executors (a linear
   projection, not a measurement).
2. **Index build.** ``--tenants`` tenants × ``--vectors`` vectors (``--dim``
   float32), identity on ``tenant``; ``ns.create_index`` on a copy against
   ``lps.create_index``.

Answers are checked against pyarrow over the source tables (rows and ids of both
namespaces after each call), Lance's own fragment counts (one per partition after
compaction) and index coverage (every fragment of every partition), and
``validate()``; the script exits non-zero when one is wrong. The report is headed by
the command, the machine and the load average.
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCE_LOG", "error")

import argparse  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_env import command, header_lines, loadavg, utc_now, write_report  # noqa: E402

import lance_partitioned as lp  # noqa: E402
from lance_partitioned.catalog.manifest import Manifest  # noqa: E402
from lance_partitioned.catalog.snapshot import Snapshot  # noqa: E402

PROJECTED_PARTITIONS = 1_000_000
PROJECTED_EXECUTORS = 100


def fragment_table(partitions: int, fragment: int) -> pa.Table:
    """One row per partition: the rows of fragment ``fragment`` of every partition."""
    ids = np.arange(partitions, dtype=np.int64) + fragment * partitions
    return pa.table({"p": pa.array(np.arange(partitions, dtype=np.int32)), "id": ids})


def build_compaction(root: str, partitions: int, fragments: int) -> float:
    started = time.perf_counter()
    schema = fragment_table(1, 0).schema
    ns = lp.create(root, schema, "p")
    for f in range(fragments):
        ns.append(fragment_table(partitions, f))
    return time.perf_counter() - started


def vector_table(tenants: int, vectors: int, dim: int) -> pa.Table:
    rng = np.random.default_rng(7)
    n = tenants * vectors
    flat = rng.standard_normal(n * dim).astype(np.float32)
    return pa.table(
        {
            "tenant": pa.array([f"t{i % tenants:05d}" for i in range(n)]),
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(flat), dim),
        }
    )


def timed_stager(stage_many, times: list[float]):
    """``stage_many`` that also records how long its Spark job took."""

    def run(*args):
        t0 = time.perf_counter()
        try:
            return stage_many(*args)
        finally:
            times.append(time.perf_counter() - t0)

    return run


def check_compaction(roots: list[str], partitions: int, fragments: int) -> None:
    want = np.arange(partitions * fragments, dtype=np.int64)
    for root in roots:
        ns = lp.open(root)
        got = np.sort(ns.to_arrow(columns=["id"])["id"].to_numpy())
        assert np.array_equal(got, want), f"{root}: rows differ from the source"
        snap = Snapshot.load(ns.manifest)
        counts = {len(snap.open_leaf(leaf).get_fragments()) for leaf in snap.leaves()}
        assert counts == {1} and len(snap.leaves()) == partitions, (root, counts)
        assert ns.validate() == [], root


def empty_pair(workdir: str, name: str) -> tuple[str, str]:
    """Two fresh paths under ``workdir``: the namespace the Spark call works on and its
    copy for the single-machine call."""
    base = os.path.join(workdir, name)
    pair = (base + "_spark", base + "_single")
    for path in pair:
        shutil.rmtree(path, ignore_errors=True)
    return pair


def run_compaction(spark, args) -> dict:
    from lance_partitioned.operations.maintain import maintenance
    from lance_partitioned.spark.maintenance import stager

    a, b = empty_pair(args.workdir, f"compact_{args.partitions}x{args.fragments}")
    build_seconds = build_compaction(a, args.partitions, args.fragments)
    shutil.copytree(a, b)
    t0 = time.perf_counter()
    single = lp.open(b).compact()
    single_seconds = time.perf_counter() - t0
    jobs: list[float] = []
    # lps.compact(spark, root) is exactly this call, without the timer around the job
    t0 = time.perf_counter()
    report = maintenance.compact(
        Manifest(a), stage_many=timed_stager(stager(spark, "compact (bench)"), jobs)
    )
    spark_seconds = time.perf_counter() - t0
    assert report.leaves_compacted == single.leaves_compacted == args.partitions
    check_compaction([a, b], args.partitions, args.fragments)
    cores = spark.sparkContext.defaultParallelism
    job = sum(jobs)
    per_partition_core = job * cores / args.partitions
    driver = spark_seconds - job
    projected_exec = PROJECTED_PARTITIONS * per_partition_core / PROJECTED_EXECUTORS
    projected_driver = driver * PROJECTED_PARTITIONS / args.partitions
    return {
        "build": build_seconds,
        "single": single_seconds,
        "spark": spark_seconds,
        "job": job,
        "driver": driver,
        "cores": cores,
        "per_partition_core_ms": per_partition_core * 1000,
        "projected": projected_exec + projected_driver,
        "projected_exec": projected_exec,
        "projected_driver": projected_driver,
    }


def check_index(roots: list[str], rows: int, name: str) -> None:
    for root in roots:
        ns = lp.open(root)
        assert ns.count() == rows, root
        snap = Snapshot.load(ns.manifest)
        for leaf in snap.leaves():
            ds = snap.open_leaf(leaf)
            [index] = [d for d in ds.describe_indices() if d.name == name]
            covered = {int(i) for s in index.segments for i in s.fragment_ids}
            assert covered == {f.fragment_id for f in ds.get_fragments()}, (root, leaf.values)
        assert ns.validate() == [], root


def run_index(spark, args) -> dict:
    from lance_partitioned import spark as lps

    a, b = empty_pair(args.workdir, f"index_{args.tenants}x{args.vectors}")
    table = vector_table(args.tenants, args.vectors, args.dim)
    lp.create(a, table.schema, "tenant").append(table)
    shutil.copytree(a, b)
    params = dict(metric="l2", num_partitions=args.ivf_partitions, min_rows=args.min_rows)
    if args.index_type == "IVF_PQ":
        params["num_sub_vectors"] = args.dim // 4
    t0 = time.perf_counter()
    single = lp.open(b).create_index("emb", args.index_type, **params)
    single_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = lps.create_index(spark, a, "emb", args.index_type, **params)
    spark_seconds = time.perf_counter() - t0
    assert len(report.partitions) == len(single.partitions) == args.tenants
    check_index([a, b], table.num_rows, f"emb_{args.index_type.lower()}")
    return {"single": single_seconds, "spark": spark_seconds}


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the benchmark; ``spark``: a session to use (and leave running) instead of a new one."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--fragments", type=int, default=10)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--vectors", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--index-type", default="IVF_PQ")
    ap.add_argument("--ivf-partitions", type=int, default=16)
    ap.add_argument("--min-rows", type=int, default=4096)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", default="/tmp/lp_spark_maint_bench")
    default_out = os.path.join(os.path.dirname(__file__), "results", "spark_maintenance.md")
    ap.add_argument("--out", default=default_out)
    args = ap.parse_args(argv)
    started, load_start, t0 = utc_now(), loadavg(), time.perf_counter()
    from lance_partitioned.spark import local_session, stop_session

    own = spark is None
    if own:
        spark = local_session(args.master, "spark_maintenance_bench")
    try:
        compaction = run_compaction(spark, args)
        index = run_index(spark, args)
    finally:
        if own:
            stop_session(spark)
    head = header_lines(
        "Maintenance on Spark's executors against the single-machine calls",
        command(__file__, argv),
        started,
        load_start,
        time.perf_counter() - t0,
    )
    report = "\n".join(head) + render(args, compaction, index)
    write_report(args.out, report)
    print(report)
    return 0


def render(args, c: dict, i: dict) -> str:
    n, f = args.partitions, args.fragments
    return f"""
## Compaction: {n:,} partitions × {f} fragments (built in {c["build"]:.1f} s)

| call | seconds | per partition (ms) |
|---|---:|---:|
| `ns.compact()` (one process, {c["cores"]} cores) | {c["single"]:.2f} | {c["single"] * 1000 / n:.2f} |
| `lps.compact(spark, root)` on `{args.master}` | {c["spark"]:.2f} | {c["spark"] * 1000 / n:.2f} |
| of which the Spark job (tasks rewrite the leaves) | {c["job"]:.2f} | {c["job"] * 1000 / n:.2f} |
| of which the driver (plan, one `__manifest` commit, manifest compaction) | {c["driver"]:.2f} | {c["driver"] * 1000 / n:.2f} |

Executor cost per partition: {c["per_partition_core_ms"]:.1f} ms of executor core time
(the job's wall time × {c["cores"]} cores / {n:,} partitions).

**Projection** (arithmetic, not a measurement): {PROJECTED_PARTITIONS:,} partitions on
{PROJECTED_EXECUTORS} single-core executors ≈ {c["projected_exec"]:.0f} s of executor work
plus {c["projected_driver"]:.0f} s on the driver (its share here scaled linearly) ≈
{c["projected"] / 60:.1f} min, assuming the per-partition cost above, storage that keeps up,
and a driver cost linear in the partitions.

## Index build: {args.tenants:,} tenants × {args.vectors:,} vectors (dim {args.dim}, {args.index_type})

| call | seconds |
|---|---:|
| `ns.create_index` | {i["single"]:.2f} |
| `lps.create_index` on `{args.master}` | {i["spark"]:.2f} |

Answers checked: rows and ids of both namespaces equal the source (pyarrow), one fragment
per partition after compaction, every fragment of every partition indexed, `validate()`
clean (all passed).
"""


if __name__ == "__main__":
    sys.exit(main())
