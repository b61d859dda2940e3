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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_env  # noqa: E402
import search_bench as sb  # noqa: E402

from lance_partitioned.search.api import DEFAULT_REFINE_FACTOR, default_flat_below  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "benchmarks" / "results" / "search_flat.md"
K = sb.K


def measure(ds: lance.LanceDataset, data: sb.Data, queries: np.ndarray, quantized: bool, reps: int):
    """(index ms, index recall, flat ms, flat recall): medians, interleaved per query."""
    truth = [sb.exact_top_k(data, q, None) for q in queries]
    indexed = {"column": "vec", "k": K}
    if quantized:
        indexed["refine_factor"] = DEFAULT_REFINE_FACTOR
    flat = {"column": "vec", "k": K, "use_index": False}

    def run(spec, q):
        return ds.to_table(nearest=dict(spec, q=q), columns=["id"])["id"].to_pylist()

    for q in queries:  # warm-up: index and data caches
        run(indexed, q)
        run(flat, q)
    lat: dict[str, list[float]] = {"index": [], "flat": []}
    hits = {"index": 0, "flat": 0}
    for rep in range(reps):
        for q, want in zip(queries, truth, strict=True):
            # alternate which goes first, so neither always follows the other
            order = (("index", indexed), ("flat", flat))
            for name, spec in order if rep % 2 == 0 else order[::-1]:
                t0 = time.perf_counter()
                got = run(spec, q)
                lat[name].append(time.perf_counter() - t0)
                if rep == 0:
                    hits[name] += len(want & set(got))
    n = K * len(queries)
    return (
        statistics.median(lat["index"]) * 1000,
        hits["index"] / n,
        statistics.median(lat["flat"]) * 1000,
        hits["flat"] / n,
    )


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
        print(f"{size}: index {r[0]:.2f} ms (recall {r[1]:.3f}), flat {r[2]:.2f} ms", flush=True)
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
    faster = [size for size, _, ims, _, fms, _, _ in rows if fms <= ims]
    lines = [
        *header,
        f"One partition of N clustered {args.dim}-d float32 vectors ({args.clusters} clusters), "
        f"{args.index} index with about {args.rows_per_list} rows per IVF list, searched "
        f"with our defaults (Lance's nprobes"
        + (f", refine_factor {DEFAULT_REFINE_FACTOR}" if args.index != "IVF_FLAT" else "")
        + f") and flat (`use_index=False`, exact), back to back per query; {args.queries} "
        f"queries × {args.reps} passes, k = {K}, median latency.",
        "",
        "| rows | IVF lists | index: latency | index: recall@10 | flat: latency | flat: recall@10 "
        "| flat / index | load average |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, lists, ims, irec, fms, frec, load in rows:
        lines.append(
            f"| {size:,} | {lists} | {ims:.2f} ms | {irec:.3f} | {fms:.2f} ms | {frec:.3f} | "
            f"{fms / ims:.2f}× | {load} |"
        )
    lines += [
        "",
        f"Flat was at least as fast at: {', '.join(f'{s:,}' for s in faster) or 'no size'} rows. "
        f"The search default at {args.dim}-d, `default_flat_below({args.dim})`, is "
        f"{default_flat_below(args.dim):,} rows.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
