"""Requests, not just time: what each operation sends to an S3 server, and S3 vs local disk.

    .venv/bin/python benchmarks/s3_bench.py [--sf 0.1] [--workdir /tmp/lpbench]

Runs against moto's S3 server on 127.0.0.1 (``demo/s3_server.py``, started and
stopped here). Requests are counted by a proxy in front of it (``Proxy``), by
kind: LIST, GET (including ranged reads), HEAD, PUT, DELETE, POST.

1. ``lp.open(root)`` then ``plan("k = 0")`` and ``plan()`` on namespaces of 1, 100 and
   10,000 partitions (``id int64, k int32, v float64``, identity on ``k``). Goal:
   planning reads only ``__manifest``, with a request count independent of the
   number of partitions.
2. One append touching 1, 100 and 1,000 existing partitions of a 1,000-partition
   namespace. Goal: O(touched partitions) writes and no listing of the root.
3. Writing TPC-H ``lineitem`` by ``year(l_shipdate), month(l_shipdate)`` and Q6 through
   ``scan``, on S3 (loopback, no proxy) vs local disk, as ratios, with the request
   counts of one more run through the proxy beside them.

Setup goes straight to the server, uncounted: the namespaces of 1 and 2 are
written on local disk and uploaded object by object (creating 10,000 Lance
datasets on moto itself is quadratic: moto scans the bucket for every LIST). Every
handle is fresh (``lp.open``), as a new process would have it. Prints a markdown
report and writes it to ``benchmarks/results/s3.md`` (``--out``).
"""

from __future__ import annotations

import os

os.environ.setdefault("LANCE_LOG", "error")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import datetime as dt  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from urllib.parse import parse_qs, unquote, urlsplit  # noqa: E402

import pyarrow as pa  # noqa: E402

# the repository root (demo: TPC-H, the S3 server) and this directory (core_bench helpers)
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from bench_env import loadavg, machine_info  # noqa: E402
from bench_measure import measure  # noqa: E402
from core_bench import Q6_COLUMNS, Q6_FILTER, SPEC, q6_mask, q6_revenue  # noqa: E402

import lance_partitioned as lp  # noqa: E402
from demo import tpch  # noqa: E402
from demo.s3_server import MotoServer, Proxy  # noqa: E402

DEFAULT_OUT = HERE / "results" / "s3.md"
KINDS = ("LIST", "GET", "HEAD", "PUT", "DELETE", "POST")
PLAN_SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("v", pa.float64())])


def fmt_counts(c: Counter[str]) -> str:
    total = sum(c.values())
    parts = [f"{k} {c[k]}" for k in KINDS if c.get(k)]
    return f"{total} ({', '.join(parts)})" if parts else "0"


def list_prefixes(proxy: Proxy) -> list[str]:
    """The ``prefix`` of every LIST request so far (decoded)."""
    out = []
    for target in proxy.targets("LIST"):
        q = parse_qs(urlsplit(target).query, keep_blank_values=True)
        out.append(unquote(q.get("prefix", [""])[0]))
    return out


@dataclass
class Report:
    sections: dict[str, list[str]] = field(default_factory=dict)
    goals: list[tuple[str, str, str]] = field(default_factory=list)
    data: dict[str, object] = field(default_factory=dict)  # machine-readable
    checks: dict[str, bool] = field(default_factory=dict)  # answers checked

    def table(self, section: str, header: list[str], rows: list[list[str]]) -> None:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        self.sections.setdefault(section, []).extend(lines + [""])
        print("\n".join(lines), flush=True)

    def note(self, section: str, text: str) -> None:
        self.sections.setdefault(section, []).append(f"- {text}")
        print(f"  note: {text}", flush=True)

    def goal(self, goal: str, measured: str, met: bool) -> None:
        self.goals.append((goal, measured, "met" if met else "**NOT met**"))


class Bench:
    def __init__(self, server: MotoServer, proxy: Proxy):
        self.server = server
        self.proxy = proxy
        self.direct = server.options()
        self.via = server.options(aws_endpoint=proxy.endpoint)

    def root(self, name: str) -> str:
        """``s3://lp-<name>/ns`` in a bucket of its own: moto scans a whole bucket for every
        LIST, so namespaces sharing one would slow each other down. The conditional-write
        check of a new bucket (once per bucket) runs here, uncounted."""
        from lance_partitioned.catalog import commit_safety, storage

        bucket = self.server.new_bucket(f"lp-{name}")
        root = f"s3://{bucket}/ns"
        for opts in (self.direct, self.via):
            commit_safety.check(root, storage.resolve(root, opts))
        return root

    def counted(self, fn) -> tuple[Counter[str], object]:  # type: ignore[no-untyped-def]
        self.proxy.reset()
        out = fn()
        return self.proxy.counts(), out


def plan_table(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": pa.array(range(n), pa.int32()),
            "v": pa.array([float(i) for i in range(n)]),
        },
        schema=PLAN_SCHEMA,
    )


def upload(b: Bench, local_root: Path, root: str) -> int:
    """Copy a namespace written on local disk to ``root`` on the server, object by object.

    Every path inside a namespace is relative to its root, so the copy is the same
    namespace. Used for the large setup namespaces: creating 10,000 Lance datasets
    on moto directly is quadratic (moto scans the whole bucket for every LIST).
    """
    from concurrent.futures import ThreadPoolExecutor

    bucket, _, prefix = root[len("s3://") :].partition("/")
    files = [p for p in local_root.rglob("*") if p.is_file()]
    client = b.server.client()

    def put(path: Path) -> None:
        key = f"{prefix}/{path.relative_to(local_root).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files))
    return len(files)


def setup_namespace(b: Bench, work: Path, name: str, n: int) -> str:
    """``root`` holding ``plan_table(n)`` by identity on ``k`` (n partitions), uncounted."""
    import shutil

    local = work / "s3bench_setup" / name
    shutil.rmtree(local, ignore_errors=True)
    t0 = time.perf_counter()
    lp.create(str(local), PLAN_SCHEMA, "k").append(plan_table(n))
    root = b.root(name)
    files = upload(b, local, root)
    shutil.rmtree(local, ignore_errors=True)
    took = time.perf_counter() - t0
    print(f"  {name}: {n} partitions, {files} objects uploaded in {took:.1f} s", flush=True)
    return root


def bench_open_plan(rep: Report, b: Bench, sizes: list[int], work: Path) -> None:
    rows, per_size = [], {}
    for n in sizes:
        root = setup_namespace(b, work, f"plan{n}", n)
        assert lp.open(root, storage_options=b.direct).count() == n
        c_open, ns = b.counted(lambda root=root: lp.open(root, storage_options=b.via))
        c_one, one = b.counted(lambda ns=ns: ns.plan("k = 0"))
        c_all, every = b.counted(lambda ns=ns: ns.plan())
        assert len(one) == 1 and len(every) == n
        timing, _ = measure(
            lambda root=root: lp.open(root, storage_options=b.direct).plan("k = 0"), reps=3
        )
        per_size[n] = {
            "open": dict(c_open),
            "plan_one": dict(c_one),
            "plan_all": dict(c_all),
            "lists": list_prefixes(b.proxy),
        }
        rows.append(
            [f"{n:,}", fmt_counts(c_open), fmt_counts(c_one), fmt_counts(c_all), timing.fmt()]
        )
    rep.data["open_plan"] = per_size
    rep.table(
        "1. open + plan",
        [
            "partitions",
            "`lp.open` requests",
            "`plan('k = 0')` requests",
            "`plan()` requests",
            "open + plan('k = 0') time (direct)",
        ],
        rows,
    )
    totals = {
        n: sum(v["open"].values()) + sum(v["plan_one"].values()) + sum(v["plan_all"].values())
        for n, v in per_size.items()
    }
    rep.goal(
        "open + plan: request count independent of the number of partitions",
        ", ".join(f"{n:,}: {t}" for n, t in totals.items()),
        len(set(totals.values())) == 1,
    )


def bench_commit(rep: Report, b: Bench, touched: list[int], work: Path) -> None:
    base = max(touched)
    root = setup_namespace(b, work, f"commit{base}", base)
    key = urlsplit(root).path.lstrip("/")
    rows, per = [], {}
    for t in touched:
        ns = lp.open(root, storage_options=b.via)
        new = plan_table(t)
        c, _ = b.counted(lambda ns=ns, new=new: ns.append(new))
        prefixes = list_prefixes(b.proxy)
        root_lists = [p for p in prefixes if p.rstrip("/") in (key, "")]
        timing, _ = measure(
            lambda new=new: lp.open(root, storage_options=b.direct).append(new), reps=1
        )
        per[t] = {"counts": dict(c), "root_lists": len(root_lists), "lists": prefixes}
        rows.append(
            [
                f"{t:,}",
                fmt_counts(c),
                f"{c.get('PUT', 0) / t:.1f}",
                str(len(root_lists)),
                timing.fmt(),
            ]
        )
    rep.data["commit"] = per
    rep.table(
        "2. commit",
        [
            "partitions touched",
            "requests",
            "PUTs per touched partition",
            "listings of the root",
            "time (direct)",
        ],
        rows,
    )
    small, large = min(touched), max(touched)
    fixed = sum(per[small]["counts"].values()) / small
    per_large = sum(per[large]["counts"].values()) / large
    rep.goal(
        "commit: O(touched) requests",
        f"{fixed:.1f} requests per touched partition at {small}, {per_large:.1f} at {large:,}",
        per_large <= fixed,
    )
    rep.goal(
        "commit: no listing of the root",
        ", ".join(f"{t:,}: {v['root_lists']}" for t, v in per.items()),
        all(v["root_lists"] == 0 for v in per.values()),
    )


def bench_write_q6(rep: Report, b: Bench, args: argparse.Namespace, work: Path) -> None:
    data = work / f"tpch_sf{args.sf:g}"
    table = tpch.read(tpch.generate(args.sf, str(data), tables=("lineitem",))["lineitem"])
    print(f"  lineitem SF{args.sf:g}: {table.num_rows:,} rows", flush=True)
    local = work / "s3bench_local"
    n = {"i": 0}

    def fresh_local() -> str:
        n["i"] += 1
        import shutil

        shutil.rmtree(local, ignore_errors=True)
        return str(local / "lineitem")

    def fresh_s3() -> str:
        n["i"] += 1
        return b.root(f"lineitem{n['i']}")

    def write(root_fn, opts):  # type: ignore[no-untyped-def]
        root = root_fn()
        lp.create(root, table.schema, SPEC, opts).append(table)
        return root

    t_lw, local_root = measure(lambda: write(fresh_local, None), reps=args.write_reps)
    t_sw, s3_root = measure(lambda: write(fresh_s3, b.direct), reps=args.write_reps)
    c_w, _ = b.counted(lambda: write(fresh_s3, b.via))

    def q6(root, opts):  # type: ignore[no-untyped-def]
        return lp.open(root, storage_options=opts).scan(Q6_FILTER, columns=Q6_COLUMNS).to_arrow()

    t_lq, want = measure(lambda: q6(local_root, None), reps=args.reps, warmup=1)
    t_sq, got = measure(lambda: q6(s3_root, b.direct), reps=args.reps, warmup=1)
    c_q, _ = b.counted(lambda: q6(s3_root, b.via))
    # answers: every row written, and Q6 on S3 equals Q6 on disk equals pyarrow on the input
    mask = q6_mask(table)
    ref = table.filter(mask).select(list(Q6_COLUMNS))
    written = lp.open(s3_root, storage_options=b.direct).count()
    checks = {
        "rows written to S3 = input rows": written == table.num_rows,
        "Q6 rows on S3 = on disk = pyarrow on the input": got.num_rows
        == want.num_rows
        == ref.num_rows,
        "Q6 revenue on S3 = on disk = pyarrow on the input": q6_revenue(got)
        == q6_revenue(want)
        == q6_revenue(ref),
    }
    rep.checks.update(checks)
    partitions = len(lp.open(local_root).plan())
    rep.data["write_q6"] = {"write": dict(c_w), "q6": dict(c_q), "partitions": partitions}
    rep.table(
        "3. write and Q6",
        ["operation", "local disk", "S3 (moto, loopback)", "S3 / local", "S3 requests"],
        [
            [
                f"write lineitem ({table.num_rows:,} rows, {partitions} partitions)",
                t_lw.fmt(),
                t_sw.fmt(),
                f"{t_sw.best / t_lw.best:.1f}×",
                fmt_counts(c_w),
            ],
            [
                f"Q6 through `scan` ({want.num_rows:,} rows)",
                t_lq.fmt(),
                t_sq.fmt(),
                f"{t_sq.best / t_lq.best:.1f}×",
                fmt_counts(c_q),
            ],
        ],
    )


def render(rep: Report, command: str, info: list[str], started: str, loads, elapsed) -> str:  # type: ignore[no-untyped-def]
    lines = [
        "# S3 request counts and S3 vs local disk",
        "",
        f"- date: {started} (UTC); total run time {elapsed:.0f} s",
        f"- command: `{command}`",
        *info,
        f"- load average (1, 5, 15 min) at start: {loads[0]}; at end: {loads[1]}",
        "- server: moto's standalone S3 server on 127.0.0.1; requests counted by a proxy in "
        "front of it (`demo/s3_server.py`); times are best (median, n) wall clock, straight "
        "to the server",
        "",
    ]
    for title, body in rep.sections.items():
        lines += [f"## {title}", "", *body, ""]
    lines += ["## Goals", "", "| Goal | Measured | Verdict |", "|---|---|---|"]
    lines += [f"| {g} | {m} | {v} |" for g, m, v in rep.goals]
    if rep.checks:
        verdict = "all passed" if all(rep.checks.values()) else "**FAILED**"
        lines += ["", f"Answers checked ({verdict}):", ""]
        lines += [f"- {k}: {'ok' if v else '**WRONG**'}" for k, v in rep.checks.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> Report:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sf", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    p.add_argument("--workdir", default="/tmp/lpbench", help="scratch directory")
    p.add_argument("--partitions", default="1,100,10000", help="namespace sizes for open + plan")
    p.add_argument("--touched", default="1,100,1000", help="partitions touched by a commit")
    p.add_argument("--reps", type=int, default=5, help="repetitions of Q6 (default 5)")
    p.add_argument("--write-reps", type=int, default=2, help="repetitions of the write")
    p.add_argument("--only", default="1,2,3", help="comma-separated sections to run")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="markdown report ('' to skip)")
    args = p.parse_args(argv)
    sections = {s.strip() for s in args.only.split(",") if s.strip()}
    exe = sys.executable
    with contextlib.suppress(ValueError):
        if Path(exe).is_relative_to(Path.cwd()):
            exe = os.path.relpath(exe, os.getcwd())
    command = shlex.join([exe, *sys.argv]) if argv is None else shlex.join([exe, __file__, *argv])
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    load_start, t_start = loadavg(), time.perf_counter()
    info = machine_info()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    rep = Report()
    with MotoServer() as server:
        proxy = Proxy(server)
        try:
            b = Bench(server, proxy)
            # the first write to a store checks conditional PUTs once: keep it out of the counts
            lp.create(b.root("warmup"), PLAN_SCHEMA, "k", b.via).append(plan_table(2))
            if "1" in sections:
                bench_open_plan(rep, b, [int(x) for x in args.partitions.split(",")], work)
            if "2" in sections:
                bench_commit(rep, b, [int(x) for x in args.touched.split(",")], work)
            if "3" in sections:
                bench_write_q6(rep, b, args, work)
        finally:
            proxy.stop()
    text = render(
        rep, command, info, started, (load_start, loadavg()), time.perf_counter() - t_start
    )
    print("\n" + text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return rep


if __name__ == "__main__":
    report = main()
    sys.exit(0 if all(report.checks.values()) else 1)
