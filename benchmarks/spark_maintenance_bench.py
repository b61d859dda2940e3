"""Maintenance on Spark's executors against the single-machine calls.

    .venv/bin/python benchmarks/spark_maintenance_bench.py [--partitions 10000]
        [--fragments 10] [--tenants 1000] [--vectors 10000] [--master local[2]]
        [--driver-partitions 0] [--driver-stager spark|threads] [--driver-validate-max 100000]
        [--only compaction,index,driver] [--spark-conf KEY=VALUE ...]
        [--workdir /tmp/lp_spark_maint_bench] [--out benchmarks/results/spark_maintenance.md]

    # the driver section alone, at a million partitions (about an hour on local[2])
    .venv/bin/python benchmarks/spark_maintenance_bench.py --only driver \
        --driver-partitions 1000000 --spark-conf spark.driver.memory=6g \
        --spark-conf spark.driver.maxResultSize=4g --workdir DIR --out FILE

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
3. **The driver** (``--driver-partitions N``; 0, the default, skips it). A namespace
   of N partitions × 2 one-row fragments is bulk-built by ``scale_build.py`` (in a
   subprocess, not measured, resumed when cut short, built afresh after a run since
   the compaction changes it; no copy) under ``--workdir``, then compacted exactly as
   ``lps.compact(spark, root)`` does, with ``compact_manifest=False``, the job's start
   and end timestamped: the report splits plan (lease, snapshot, works), the Spark job,
   commit (check, rows, the one ``__manifest`` commit) and the manifest's compaction,
   with the driver's peak RSS and the pickled size of the works and results. Checks:
   every leaf compacted, ``count() == 2N``, 200 leaves read back with plain Lance (one
   fragment, the build's two rows), ``validate()`` (on 200 sampled leaves above
   ``--driver-validate-max``: the full check opens every leaf). ``--driver-stager
   threads`` stages on this process's threads instead (no Spark started when it runs
   alone). Progress lines are printed (flushed) before and after each phase. Disk at
   a million: about 40 GB on 4 KiB blocks, 10 GB on 1 KiB blocks (10 inodes a leaf
   after the compaction; see ``scale_build.py`` for a loop-mounted file system).

``--only`` runs the named sections (default all three; the driver one only with
``--driver-partitions``).

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
import contextlib  # noqa: E402
import pickle  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import lance  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_env import clocked, command, header_lines, loadavg, utc_now, write_report  # noqa: E402

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


def timed_stager(
    stage_many, spans: list[tuple[float, float]], seen: list | None = None, txs: list | None = None
):
    """``stage_many`` that also records when its job started and ended
    (``time.perf_counter``; the end includes recording each result on the driver)
    and, given ``seen``, keeps the works it was handed, then the pickled size of the
    first ``RESULT_SAMPLE`` results it got back; given ``txs``, the transaction (whose
    ``timings`` split the commit)."""

    def run(tx, works, one, record):
        if txs is not None:
            txs.append(tx)
        if seen is not None:
            seen.append(works)
            record = sized(record, seen)
        t0 = time.perf_counter()
        try:
            return stage_many(tx, works, one, record)
        finally:
            spans.append((t0, time.perf_counter()))

    return run


RESULT_SAMPLE = 100


@contextlib.contextmanager
def timed_upkeep(seconds: list[float]):
    """Within the block, each ``__manifest`` upkeep after a commit
    (``manifest_index.maintain``, inside ``Manifest.commit``) appends its seconds."""
    from lance_partitioned.catalog import manifest_index

    maintain = manifest_index.maintain
    manifest_index.maintain = clocked(maintain, seconds)
    try:
        yield
    finally:
        manifest_index.maintain = maintain


def sized(record, seen: list):
    """``record`` that appends the pickled size of its first ``RESULT_SAMPLE`` results
    (what a task sends back: key, change, why skipped, staged leaf) to ``seen``."""

    def run(work, staged):
        if len(seen) <= RESULT_SAMPLE:
            sent = (work.key, work.change, work.skipped, staged)
            seen.append(len(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL)))
        record(work, staged)

    return run


def threads_stager(tx, works, one, record) -> None:
    """The ``StageMany`` of ``stage_many=None`` (this process's threads), so that the
    driver section can also run without Spark (``--driver-stager threads``)."""
    from lance_partitioned.operations.txn.driver import run_parallel

    txn, opts = tx.staged.txn, tx.manifest.storage_options
    run_parallel(works, lambda w: one(w, txn, opts), record)


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
    jobs: list[tuple[float, float]] = []
    # lps.compact(spark, root) is exactly this call, without the timer around the job
    t0 = time.perf_counter()
    report = maintenance.compact(
        Manifest(a), stage_many=timed_stager(stager(spark, "compact (bench)"), jobs)
    )
    spark_seconds = time.perf_counter() - t0
    assert report.leaves_compacted == single.leaves_compacted == args.partitions
    check_compaction([a, b], args.partitions, args.fragments)
    cores = spark.sparkContext.defaultParallelism
    job = sum(end - start for start, end in jobs)
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


DRIVER_FRAGMENTS = 2  # one-row fragments per leaf: every leaf has something to compact
DRIVER_SAMPLE = 200  # leaves read back with plain Lance after the compaction


def log(line: str) -> None:
    """A progress line, flushed (a run at a million partitions takes about an hour)."""
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


def build_driver(args) -> tuple[Path, float]:
    """The bulk-built namespace of ``--driver-partitions`` leaves × ``DRIVER_FRAGMENTS``
    one-row fragments (``scale_build.py``, in a subprocess so that its memory is not
    the driver's; resumes a build cut short). Its path and the build's seconds."""
    import scale_build

    n = args.driver_partitions
    work = Path(args.workdir) / f"driver_{n}x{DRIVER_FRAGMENTS}"
    root, scratch = work / "root", work / "scratch"
    log(
        f"driver: building {n:,} partitions × {DRIVER_FRAGMENTS} fragments at {root} (not measured)"
    )
    t0 = time.perf_counter()
    cmd = [sys.executable, scale_build.__file__, str(root), str(n), str(scratch)]
    subprocess.run([*cmd, "--fragments", str(DRIVER_FRAGMENTS)], check=True)
    # the compaction below changes the namespace: a later run must build it afresh
    scale_build.discard_state(scratch, n, DRIVER_FRAGMENTS)
    seconds = time.perf_counter() - t0
    log(f"driver: built in {seconds:.0f} s")
    return root, seconds


def _rss_mib() -> float:
    """The process's resident set now (``VmRSS``), MiB; 0 where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            line = next(x for x in f if x.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024
    except (OSError, StopIteration):
        return 0.0


def run_driver(spark, args) -> dict:
    """``lps.compact(spark, root)``'s call on the bulk-built namespace, with the
    driver's phases timed apart: plan, the job, commit, the manifest's compaction."""
    from lance_partitioned.operations.maintain import maintenance
    from lance_partitioned.spark.maintenance import stager

    n = args.driver_partitions
    root, build_seconds = build_driver(args)
    stage = threads_stager if spark is None else stager(spark, "compact (driver bench)")
    spans: list[tuple[float, float]] = []
    seen: list = []
    txs: list = []
    upkeep: list[float] = []
    rss_start = _rss_mib()
    log(f"driver: compaction of {n:,} partitions starts (stager: {args.driver_stager})")
    t0 = time.perf_counter()
    # lps.compact(spark, root) is this call, with compact_manifest=True
    with timed_upkeep(upkeep):
        report = maintenance.compact(
            Manifest(str(root)),
            compact_manifest=False,
            stage_many=timed_stager(stage, spans, seen, txs),
        )
    t1 = time.perf_counter()
    [(job_start, job_end)] = spans
    [tx] = txs
    steps = {**tx.timings, "upkeep": sum(upkeep)}
    steps["commit"] -= steps["upkeep"]  # Manifest.commit's time includes its upkeep
    txs.clear()
    log(f"driver: commit steps {', '.join(f'{k} {v:.1f} s' for k, v in steps.items())}")
    log(f"driver: committed after {t1 - t0:.1f} s; the manifest's compaction starts")
    maintenance._compact_manifest(Manifest(str(root)))  # compact()'s own last step
    t2 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    log(f"driver: manifest compacted in {t2 - t1:.1f} s; checking")
    pickled = len(pickle.dumps(list(seen[0]), protocol=pickle.HIGHEST_PROTOCOL))
    result_bytes = sum(seen[1:]) / max(1, len(seen) - 1)
    seen.clear()
    validated = check_driver(root, n, report, args.driver_validate_max)
    log("driver: checks passed")
    return {
        "n": n,
        "build": build_seconds,
        "plan": job_start - t0,
        "job": job_end - job_start,
        "commit": t1 - job_end,
        "steps": steps,
        "manifest": t2 - t1,
        "rss_start": rss_start,
        "rss_peak": peak,
        "pickled": pickled,
        "result_bytes": result_bytes,
        "validated": validated,
        "root": str(root),
    }


def check_driver(root: Path, n: int, report, validate_max: int) -> str:
    """Every leaf compacted, ``2n`` rows, a sample of leaves read back with plain Lance
    (one fragment, the two rows the build wrote), ``validate()`` (on a sample of leaves
    above ``validate_max`` partitions); says how it validated."""
    assert report.leaves_compacted == n, (report.leaves_compacted, n)
    ns = lp.open(str(root))
    assert ns.count() == DRIVER_FRAGMENTS * n, (ns.count(), n)
    man = lance.dataset(str(root / "__manifest")).to_table(
        columns=["location", "partition_field_k"], filter="object_type = 'table'"
    )
    assert man.num_rows == n, (man.num_rows, n)
    rng = random.Random(2)
    sample = rng.sample(range(n), min(DRIVER_SAMPLE, n))
    for i in sample:
        k = man.column("partition_field_k")[i].as_py()
        ds = lance.dataset(str(root / man.column("location")[i].as_py()))
        rows = sorted(ds.to_table().to_pylist(), key=lambda r: r["v"])
        # scale_build's rows: fragment 0 holds k = v = i, fragment 1 k = i, v = -1
        assert rows == [{"k": k, "v": -1}, {"k": k, "v": k}], (k, rows)
        assert len(ds.get_fragments()) == 1, (k, len(ds.get_fragments()))
    if n <= validate_max:
        assert ns.validate() == [], root
        return f"`validate()` on all {n:,} partitions"
    assert sample_problems(ns, rng) == [], root
    return f"`validate()`'s per-leaf check on {DRIVER_SAMPLE} sampled partitions"


def sample_problems(ns, rng: random.Random) -> list[str]:
    """``validate()``'s per-leaf check (``check_leaf``) on ``DRIVER_SAMPLE`` leaves: the
    full check opens every leaf, too slow to repeat at a million."""
    from lance_partitioned.operations.evolve import evolution
    from lance_partitioned.operations.leaf.leaf_schema import check_leaf

    snap = Snapshot.load(ns.manifest)
    schema = evolution.evolving_schema(snap)
    leaves = rng.sample(snap.leaves(), min(DRIVER_SAMPLE, len(snap.leaves())))
    return [p for leaf in leaves for p in check_leaf(schema, snap.open_leaf(leaf), leaf.object_id)]


SECTIONS = ("compaction", "index", "driver")


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--fragments", type=int, default=10)
    ap.add_argument("--tenants", type=int, default=1000)
    ap.add_argument("--vectors", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--index-type", default="IVF_PQ")
    ap.add_argument("--ivf-partitions", type=int, default=16)
    ap.add_argument("--min-rows", type=int, default=4096)
    ap.add_argument("--driver-partitions", type=int, default=0, help="0: no driver section")
    ap.add_argument("--driver-stager", choices=("spark", "threads"), default="spark")
    ap.add_argument("--driver-validate-max", type=int, default=100_000)
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the session this script starts (repeatable)",
    )
    ap.add_argument("--workdir", default="/tmp/lp_spark_maint_bench")
    default_out = os.path.join(os.path.dirname(__file__), "results", "spark_maintenance.md")
    ap.add_argument("--out", default=default_out)
    args = ap.parse_args(argv)
    args.only = {x.strip() for x in args.only.split(",") if x.strip()}
    if args.only - set(SECTIONS):
        ap.error(
            f"--only: unknown sections {sorted(args.only - set(SECTIONS))}; choose among {SECTIONS}"
        )
    if args.driver_partitions <= 0:
        args.only.discard("driver")
    return args


def run_sections(spark, args) -> tuple[dict | None, dict | None, dict | None]:
    compaction = run_compaction(spark, args) if "compaction" in args.only else None
    index = run_index(spark, args) if "index" in args.only else None
    driver = run_driver(spark, args) if "driver" in args.only else None
    return compaction, index, driver


def main(argv: list[str] | None = None, spark=None) -> int:
    """Run the benchmark; ``spark``: a session to use (and leave running) instead of a new one."""
    args = parse(argv)
    started, load_start, t0 = utc_now(), loadavg(), time.perf_counter()
    from lance_partitioned.spark import local_session, stop_session

    # the driver section with --driver-stager threads is the one that needs no Spark
    needs_spark = bool(args.only - {"driver"}) or args.driver_stager == "spark"
    own = spark is None and needs_spark
    if own:
        conf = dict(kv.split("=", 1) for kv in args.spark_conf)
        spark = local_session(args.master, "spark_maintenance_bench", conf=conf)
    try:
        sections = run_sections(spark if needs_spark else None, args)
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
    report = "\n".join(head) + render(args, *sections)
    write_report(args.out, report)
    print(report)
    return 0


def render(args, c: dict | None, i: dict | None, d: dict | None) -> str:
    parts = [
        render_compaction(args, c) if c else "",
        render_index(args, i) if i else "",
        render_driver(args, d) if d else "",
    ]
    return "".join(parts)


def render_compaction(args, c: dict) -> str:
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

Answers checked: rows and ids of both namespaces equal the source (pyarrow), one fragment
per partition after compaction, `validate()` clean (all passed).
"""


def render_index(args, i: dict) -> str:
    return f"""
## Index build: {args.tenants:,} tenants × {args.vectors:,} vectors (dim {args.dim}, {args.index_type})

| call | seconds |
|---|---:|
| `ns.create_index` | {i["single"]:.2f} |
| `lps.create_index` on `{args.master}` | {i["spark"]:.2f} |

Answers checked: rows of both namespaces equal the source (pyarrow), every fragment of
every partition indexed, `validate()` clean (all passed).
"""


# LeafTransaction.timings' steps, and the upkeep timed apart from "commit"
STEP_NAMES = {
    "rows": "the rows to publish (`republish_rows`)",
    "check": "the check before publishing (a Spark job from 50,000 partitions)",
    "commit": "`merge_insert` and Lance's commit of `__manifest`",
    "upkeep": "`__manifest` upkeep after the commit (`manifest_index.maintain`)",
}


def render_driver(args, d: dict) -> str:
    n = d["n"]
    spark = args.driver_stager == "spark"
    where = f"Spark tasks on `{args.master}`" if spark else "this process's threads"
    stage = "stager(spark, ...)" if spark else "threads_stager"
    rows = [
        ("plan (lease, snapshot of every leaf, the works)", d["plan"]),
        (f"the job ({where} rewrite the leaves; results recorded)", d["job"]),
        ("commit (check before publishing, rows, one `__manifest` commit)", d["commit"]),
        *((f"— of which {STEP_NAMES[k]}", sec) for k, sec in d["steps"].items()),
        (
            "— of which the rest (lease, the report, freeing the job's results)",
            d["commit"] - sum(d["steps"].values()),
        ),
        ("`__manifest`'s own compaction (`compact_manifest=True`'s step)", d["manifest"]),
        ("total", d["plan"] + d["job"] + d["commit"] + d["manifest"]),
    ]
    table = "\n".join(f"| {name} | {sec:.2f} | {sec * 1e6 / n:.1f} |" for name, sec in rows)
    return f"""
## The driver at {n:,} partitions: plan and commit of a compaction that touches every one

A namespace of {n:,} partitions × {DRIVER_FRAGMENTS} one-row fragments, bulk-built by
`benchmarks/scale_build.py` (`{d["root"]}`; {d["build"]:.0f} s, **not measured**: no copy is
made), compacted as `lps.compact(spark, root)` does, with `compact_manifest=False` so that
the manifest's compaction is timed on its own line (`maintenance.compact(Manifest(root),
stage_many={stage})`, the job's start and end timestamped around `stage_many`).

| phase | seconds | per partition (µs) |
|---|---:|---:|
{table}

Driver process: resident set {d["rss_start"]:.0f} MiB when the compaction started, peak
{d["rss_peak"]:.0f} MiB (`getrusage`); the works shipped to the job pickle to
{d["pickled"] / 2**20:.1f} MiB ({d["pickled"] / n:.0f} bytes per partition); what each comes
back as (key, change, why skipped, staged leaf, pickled; mean of the first {RESULT_SAMPLE}) {d["result_bytes"]:.0f} bytes,
≈ {d["result_bytes"] * n / 2**20:.0f} MiB of results for the driver to collect.

Answers checked: every partition compacted (`leaves_compacted` = {n:,}), `ns.count()` =
{DRIVER_FRAGMENTS * n:,}, {min(DRIVER_SAMPLE, n)} sampled leaves read with plain Lance hold one fragment
and the two rows the build wrote, {d["validated"]} clean (all passed).
"""


if __name__ == "__main__":
    sys.exit(main())
