"""Bulk build of a namespace with many one-row partitions, for ``scale_bench.py``.

Our normal write path creates about a thousand partitions a second; a million
would take a quarter of an hour of both cores. The benchmark measures plans,
commits and counts *on* a big namespace, not the write that made it, so it
builds the namespace with this bulk path instead:

1. ``lp.create`` makes the namespace (schema ``k int64, v int64``, spec ``k``);
2. one ordinary ``ns.append`` of one sentinel row into a scratch namespace gives
   a *template leaf*: a real Lance dataset written by our writer, with the
   namespace's field ids;
3. every partition ``k = i`` gets a directory holding a copy of the template's
   Lance data file with the two 8-byte values patched to ``k = i, v = i``
   (Lance stores a one-row int64 column plainly, and the file keeps its size,
   which the leaf manifest records), and the template's version manifest and
   transaction file (hard links: they are byte-identical for every leaf);
   with ``fragments = F`` the template is F appends (F data files, leaf version
   F) and fragment ``j > 0`` of partition ``i`` is patched to ``k = i, v = -j``
   (a leaf of F one-row fragments for compaction to merge; ``verify`` accepts
   those rows: the same ``k``, a negative ``v``);
4. one Lance append adds every partition's two ``__manifest`` rows (namespace
   and table, with the ``metadata`` mirror and the ``lp.num_rows`` count) in a
   single commit, exactly the rows our writer would have published.

The result is a valid namespace: every leaf opens with plain Lance and holds
its own row (``verify`` reads a sample back), and our reader and writer work on
it unchanged. Building it is not part of any measured figure.

Leaves are made ``CHUNK`` at a time and progress is saved, so a build cut short
(``budget``, a timeout) resumes where it stopped. Disk: about 20 KiB and five
inodes per partition on ext4 with 4 KiB blocks (20 GB at a million), 5 KiB with
1 KiB blocks; a million entries in one directory need ext4's ``large_dir``
feature on 1 KiB blocks. Our measurements used a loop-mounted ext4 image
(``mkfs.ext4 -b 1024 -N 7000000 -O ^has_journal,large_dir``), which also makes
cleaning up a million leaves an unmount instead of an hour of ``rm``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import sys
import time
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.parquet as pq

import lance_partitioned as lp
from lance_partitioned.catalog import manifest_index
from lance_partitioned.catalog.manifest import conform

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])
SPEC = "k"
# Sentinels whose little-endian bytes occur once in a template data file.
_SENTINEL_K = 0x1122334455667788
_SENTINEL_V = 0x0102030405060718
_BASE36 = "abcdefghijklmnopqrstuvwxyz0123456789"


def _template(scratch: Path, fragments: int = 1) -> None:
    """Write the sentinel row with our writer into a scratch namespace, ``fragments``
    times (one append each: one data file per append, leaf version ``fragments``)."""
    if scratch.exists():
        shutil.rmtree(scratch)
    ns = lp.create(str(scratch), SCHEMA, SPEC)
    for _ in range(fragments):
        ns.append(pa.table({"k": [_SENTINEL_K], "v": [_SENTINEL_V]}, schema=SCHEMA))
    (leaf,) = [p for p in scratch.iterdir() if p.name != "__manifest"]
    for data in (leaf / "data").iterdir():
        raw = data.read_bytes()
        for value in (_SENTINEL_K, _SENTINEL_V):
            if raw.count(struct.pack("<q", value)) != 1:
                raise RuntimeError(f"template data file does not hold {value:#x} exactly once")


def _name(rng: random.Random) -> str:
    return "".join(rng.choices(_BASE36, k=16))


CHUNK = 50_000  # leaves per resumable step (also under the hard-link limit)


def _tag(n: int, fragments: int) -> str:
    """The build's name in scratch files: a one-fragment build keeps the names it has
    always had (and resumes from them); others carry ``f<F>`` so no two resume each other."""
    return f"{n}" if fragments == 1 else f"{n}_f{fragments}"


def _state_path(scratch: Path, n: int, fragments: int = 1) -> Path:
    return scratch / f"state_{_tag(n, fragments)}.json"


def build(
    root: Path,
    n: int,
    scratch: Path,
    budget: float | None = None,
    seed: int = 0,
    fragments: int = 1,
    progress: bool = False,
) -> bool:
    """Build (or resume building) ``n`` partitions ``k = 0..n-1`` at ``root``, each leaf
    ``fragments`` one-row fragments (fragment 0 holds ``k = v = i``, fragment ``j > 0``
    ``k = i, v = -j``; leaf version ``fragments``).

    Leaves are made ``CHUNK`` at a time; after each chunk the progress is saved
    under ``scratch``, and the call returns False once ``budget`` seconds are
    spent (call again to resume). When every leaf exists, their rows are
    registered in one ``__manifest`` commit and its indexes are built; returns True.
    ``progress``: print a line (flushed) per chunk.
    """
    if fragments < 1:
        raise ValueError(f"fragments must be >= 1, got {fragments}")
    t0 = time.perf_counter()
    tag = _tag(n, fragments)
    scratch.mkdir(parents=True, exist_ok=True)
    state_file = _state_path(scratch, n, fragments)
    state = json.loads(state_file.read_text()) if state_file.exists() and root.exists() else None
    tpl_root = scratch / f"template_{tag}"
    if state is None:
        if root.exists():
            shutil.rmtree(root)
        _template(tpl_root, fragments)
        lp.create(str(root), SCHEMA, SPEC)
        state = {"n": n, "done": 0, "registered": False}
        state_file.write_text(json.dumps(state))
    if state["registered"]:
        return True
    leaf, files = _read_template(tpl_root)
    while state["done"] < n:
        if budget is not None and time.perf_counter() - t0 > budget:
            return False
        a = state["done"]
        b = min(n, a + CHUNK)
        _make_chunk(root, scratch, tag, leaf, files, a, b, seed)
        state["done"] = b
        state_file.write_text(json.dumps(state))
        if progress:
            print(f"scale_build: {b:,}/{n:,} leaves ({time.perf_counter() - t0:.0f} s)", flush=True)
    if progress:
        print(f"scale_build: registering {n:,} partitions in __manifest", flush=True)
    _register(root, n, scratch, lance.dataset(str(leaf)).version, fragments)
    state["registered"] = True
    state_file.write_text(json.dumps(state))
    return True


# one template data file: its name, its bytes, where its sentinels k and v sit
_DataFile = tuple[str, bytes, int, int]


def _make_chunk(
    root: Path,
    scratch: Path,
    tag: str,
    leaf: Path,
    files: list[_DataFile],
    a: int,
    b: int,
    seed: int,
) -> None:
    """Leaves ``a..b-1``: patched data files, hard links to the template's version
    manifests and transaction files; their ``__manifest`` rows go to a Parquet file."""
    templates = [
        *((v, "_versions") for v in sorted((leaf / "_versions").glob("*.manifest"))),
        *((t, "_transactions") for t in sorted((leaf / "_transactions").iterdir())),
    ]
    links = []  # fresh copies per chunk keep each inode under the hard-link limit
    for src, sub in templates:
        copy = scratch / f"link_{tag}_{a}_{sub}_{src.name}"
        shutil.copyfile(src, copy)
        links.append((copy, Path(sub) / src.name))
    bufs = [bytearray(raw) for _, raw, _, _ in files]
    rng = random.Random(seed * 1_000_003 + a)
    oids, locations = [], []
    for i in range(a, b):
        oid = f"v1${_name(rng)}$dataset"
        location = f"{rng.getrandbits(32):08x}_{oid}"
        d = root / location
        for sub in ("data", "_versions", "_transactions"):
            # a chunk cut short by a timeout is redone: same names, same files
            os.makedirs(d / sub, exist_ok=True)
        for j, ((data_name, _, off_k, off_v), buf) in enumerate(zip(files, bufs, strict=True)):
            struct.pack_into("<q", buf, off_k, i)
            struct.pack_into("<q", buf, off_v, i if j == 0 else -j)
            with open(d / "data" / data_name, "wb") as f:
                f.write(buf)
        for src, rel in links:
            if not (d / rel).exists():
                os.link(src, d / rel)
        oids.append(oid)
        locations.append(location)
    for copy, _ in links:
        copy.unlink()  # the leaves keep their links
    chunk = pa.table({"object_id": oids, "location": locations, "k": range(a, b)})
    pq.write_table(chunk, scratch / f"rows_{tag}_{a}.parquet")


def _read_template(tpl_root: Path) -> tuple[Path, list[_DataFile]]:
    """The template leaf and its data files, in fragment order (fragment 0 first)."""
    (leaf,) = [p for p in tpl_root.iterdir() if p.name != "__manifest"]
    files = []
    for fragment in sorted(lance.dataset(str(leaf)).get_fragments(), key=lambda f: f.fragment_id):
        (data_file,) = fragment.data_files()
        name = os.path.basename(data_file.path)
        raw = (leaf / "data" / name).read_bytes()
        files.append(
            (
                name,
                raw,
                raw.index(struct.pack("<q", _SENTINEL_K)),
                raw.index(struct.pack("<q", _SENTINEL_V)),
            )
        )
    return leaf, files


def _register(root: Path, n: int, scratch: Path, version: int, fragments: int = 1) -> None:
    """One ``__manifest`` commit adding every partition's namespace and table rows."""
    pattern = f"rows_{_tag(n, fragments)}_[0-9]*.parquet"  # not another F's rows
    chunks = sorted(scratch.glob(pattern), key=lambda p: int(p.stem.split("_")[-1]))
    made = pa.concat_tables([pq.read_table(p) for p in chunks])
    assert made.num_rows == n, (made.num_rows, n)
    oids = made.column("object_id").to_pylist()
    ns_ids = [o.rsplit("$", 1)[0] for o in oids]
    keys = [str(k) for k in made.column("k").to_pylist()]
    ns_meta = [f'{{"partition.k":"{key}"}}' for key in keys]
    t_meta = [
        f'{{"partition.k":"{key}","lp.read_version":"{version}","lp.num_rows":"{fragments}"}}'
        for key in keys
    ]
    ks = made.column("k").cast(pa.int64()).combine_chunks()
    rows = pa.table(
        {
            "object_id": pa.array([*ns_ids, *oids]),
            "object_type": pa.array(["namespace"] * n + ["table"] * n),
            "location": pa.concat_arrays(
                [pa.nulls(n, pa.string()), made.column("location").combine_chunks()]
            ),
            "metadata": pa.array([*ns_meta, *t_meta]),
            "read_version": pa.array([None] * n + [version] * n, pa.uint64()),
            "partition_field_k": pa.concat_arrays([ks, ks]),
        }
    )
    uri = str(root / "__manifest")
    ds = lance.dataset(uri)
    # a registration cut short after its commit must not add the rows twice
    if ds.count_rows("object_type = 'table'") == 0:
        lance.write_dataset(conform(rows, ds.schema), uri, mode="append")
    # what our writers would have done by now (catalog.manifest_index)
    manifest_index.refresh(lance.dataset(uri))
    for p in chunks:
        p.unlink()


def verify(root: Path, sample: int = 50, seed: int = 1) -> None:
    """Read a sample of leaves back with plain Lance: each holds exactly its own row."""
    man = lance.dataset(str(root / "__manifest")).to_table(
        columns=["location", "partition_field_k"], filter="object_type = 'table'"
    )
    rng = random.Random(seed)
    for i in rng.sample(range(man.num_rows), min(sample, man.num_rows)):
        loc = man.column("location")[i].as_py()
        k = man.column("partition_field_k")[i].as_py()
        got = lance.dataset(str(root / loc)).to_table().to_pylist()
        # its own row, plus the rows earlier benchmark runs appended (v < 0)
        base = {"k": k, "v": k}
        if got.count(base) != 1 or any(r != base and (r["k"] != k or r["v"] >= 0) for r in got):
            raise AssertionError(f"leaf {loc} holds {got}, expected k = v = {k}")


def disk_usage(root: Path) -> int:
    """Bytes allocated under ``root`` (``du``), hard-linked files counted once."""
    seen: set[int] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        total += os.lstat(dirpath).st_blocks * 512
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_blocks * 512
    return total


def discard_state(scratch: Path, n: int, fragments: int = 1) -> None:
    """Forget a finished build, so that the next ``build`` starts afresh: for callers
    that change the namespace (a compaction) and cannot measure on it twice."""
    _state_path(scratch, n, fragments).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """``scale_build.py ROOT N SCRATCH [--fragments F]``: build (or resume) in one call."""
    ap = argparse.ArgumentParser(description=build.__doc__.split("\n")[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("n", type=int)
    ap.add_argument("scratch", type=Path)
    ap.add_argument("--fragments", type=int, default=1)
    args = ap.parse_args(argv)
    build(args.root, args.n, args.scratch, fragments=args.fragments, progress=True)
    verify(args.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
