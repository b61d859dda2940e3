"""Where does an exact (flat) search of one partition get slower than its IVF index?

    .venv/bin/python benchmarks/search_flat_bench.py [--sizes 1000,5000,10000,20000,50000]

For each size, one Lance dataset of that many clustered 128-d float32 vectors
(the data of ``search_bench.py``: one tenant, 8 clusters) gets the vector index
the namespace would build (``--index``, about ``--rows-per-list`` rows per IVF
list, as ``search_bench.py``). Each query is then searched both ways, back to
back so the machine's load hits both alike: through the index with our default
parameters (Lance's nprobes, ``refine_factor`` = ``DEFAULT_REFINE_FACTOR`` for a
quantized index) and flat (``use_index=False``: an exact scan). Latency is the
median over the queries after a warm-up pass; recall@10 is against numpy brute
force. Flat is exact (recall 1.0); the index is approximate. The crossover is
the smallest size where the index is faster: below it, a flat search is both
exact and faster (``search.api.default_flat_below``, docs/SEARCH.md §3).

Writes a markdown report to ``benchmarks/results/search_flat.md`` (``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCE_LOG", "error")

import argparse  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import lance  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_env  # noqa: E402
import search_bench as sb  # noqa: E402

from lance_partitioned.search import memory  # noqa: E402
from lance_partitioned.search.api import DEFAULT_REFINE_FACTOR, default_flat_below  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "search_flat.md"
K = sb.K


def measure(ds: lance.LanceDataset, data: sb.Data, queries: np.ndarray, quantized: bool, reps: int):
    """(index ms, index recall, flat ms, flat recall, memory ms, memory recall): medians,
    interleaved per query. "memory" is what ``search.memory`` does for a partition it
    holds: numpy distances over the held vectors, then Lance's take of the k rows."""
    truth = [sb.exact_top_k(data, q, None) for q in queries]
    indexed = {"column": "vec", "k": K}
    if quantized:
        indexed["refine_factor"] = DEFAULT_REFINE_FACTOR
    flat = {"column": "vec", "k": K, "use_index": False}
    key = ("search_flat_bench", ds.uri, ds.version)

    def run(spec, q):
        if spec is None:  # from memory
            entry = memory.vectors(key, ds, "vec")
            pos, _ = memory.top_k(entry, q, K, "l2")
            ids = pa.array(entry.row_ids[pos], pa.uint64())
            return ds._take_rows(ids, columns=["id"])["id"].to_pylist()
        return ds.to_table(nearest=dict(spec, q=q), columns=["id"])["id"].to_pylist()

    contenders = (("index", indexed), ("flat", flat), ("memory", None))
    for q in queries:  # warm-up: index and data caches, the held vectors
        for _, spec in contenders:
            run(spec, q)
    lat: dict[str, list[float]] = {name: [] for name, _ in contenders}
    hits = dict.fromkeys(lat, 0)
    for rep in range(reps):
        for i, (q, want) in enumerate(zip(queries, truth, strict=True)):
            # rotate which goes first, so none always follows another
            shift = (i + rep) % len(contenders)
            for name, spec in contenders[shift:] + contenders[:shift]:
                t0 = time.perf_counter()
                got = run(spec, q)
                lat[name].append(time.perf_counter() - t0)
                if rep == 0:
                    hits[name] += len(want & set(got))
    memory.clear()
    n = K * len(queries)
    return tuple(x for name in lat for x in (statistics.median(lat[name]) * 1000, hits[name] / n))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", default="1000,2000,5000,10000,20000,50000")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--clusters", type=int, default=8)
    p.add_argument("--index", default="IVF_HNSW_SQ", choices=["IVF_HNSW_SQ", "IVF_PQ", "IVF_FLAT"])
    p.add_argument("--rows-per-list", type=int, default=1250)
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--reps", type=int, default=3, help="timed passes over the queries")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", default="/tmp/lp_search_flat_bench")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="'' to skip writing")
    args = p.parse_args(argv)
    command = bench_env.command(__file__, argv)
    load_start, t_start, started = bench_env.loadavg(), time.perf_counter(), bench_env.utc_now()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    params = {"num_sub_vectors": max(1, args.dim // 8)} if args.index == "IVF_PQ" else {}
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        data = sb.make_data(size, 1, args.dim, args.clusters, args.seed)
        lists = max(1, round(size / args.rows_per_list))
        ds = lance.write_dataset(data.table(), str(work / f"n{size}"))
        ds.create_index("vec", args.index, num_partitions=lists, **params)
        ds = lance.dataset(str(work / f"n{size}"))
        queries, _ = sb.make_queries(data, args.queries, None, args.seed + 1)
        r = measure(ds, data, queries, args.index != "IVF_FLAT", args.reps)
        rows.append((size, lists, *r, bench_env.loadavg()))
        print(
            f"{size}: index {r[0]:.2f} ms (recall {r[1]:.3f}), flat {r[2]:.2f} ms, "
            f"memory {r[4]:.2f} ms (recall {r[5]:.3f})",
            flush=True,
        )
    shutil.rmtree(work, ignore_errors=True)
    header = bench_env.header_lines(
        "Flat vs indexed search of one partition",
        command,
        started,
        load_start,
        time.perf_counter() - t_start,
    )
    text = report(args, header, rows)
    print("\n" + text)
    bench_env.write_report(args.out, text)
    return 0


def report(args, header: list[str], rows: list[tuple]) -> str:
    faster = [r[0] for r in rows if r[4] <= r[2]]
    mem_faster = [r[0] for r in rows if r[6] <= r[2]]
    lines = [
        *header,
        f"One partition of N clustered {args.dim}-d float32 vectors ({args.clusters} clusters), "
        f"{args.index} index with about {args.rows_per_list} rows per IVF list, searched "
        f"with our defaults (Lance's nprobes"
        + (f", refine_factor {DEFAULT_REFINE_FACTOR}" if args.index != "IVF_FLAT" else "")
        + ") and flat (`use_index=False`, exact), and from memory (`search.memory`: the "
        "partition's vectors held in the process, numpy distances, then Lance's take of the "
        f"k rows; exact), back to back per query in a rotating order; {args.queries} "
        f"queries × {args.reps} passes, k = {K}, median latency.",
        "",
        "| rows | IVF lists | index: latency | index: recall@10 | flat: latency | flat: recall@10 "
        "| memory: latency | memory: recall@10 | flat / index | memory / index | load average |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, lists, ims, irec, fms, frec, mms, mrec, load in rows:
        lines.append(
            f"| {size:,} | {lists} | {ims:.2f} ms | {irec:.3f} | {fms:.2f} ms | {frec:.3f} | "
            f"{mms:.2f} ms | {mrec:.3f} | {fms / ims:.2f}× | {mms / ims:.2f}× | {load} |"
        )
    lines += [
        "",
        f"Flat was at least as fast at: {', '.join(f'{s:,}' for s in faster) or 'no size'} rows; "
        f"memory at: {', '.join(f'{s:,}' for s in mem_faster) or 'no size'} rows. "
        f"The search defaults at {args.dim}-d: `default_flat_below({args.dim})` (Lance's flat "
        f"scan) is {default_flat_below(args.dim):,} rows, "
        f"`memory.default_memory_flat_below({args.dim})` (from memory) is "
        f"{memory.default_memory_flat_below(args.dim):,} rows.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
