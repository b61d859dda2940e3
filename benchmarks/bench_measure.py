"""Timing and memory helpers shared by the benchmarks: best and median of
repetitions, competitors interleaved, peak RSS per run, sizes on disk."""

from __future__ import annotations

import contextlib
import gc
import os
import random
import resource
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lance_partitioned.operations.write.partition_writer import release_freed_memory


@dataclass
class Timing:
    times: list[float]
    cpu: list[float] = field(default_factory=list)  # process user+sys seconds, all threads

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def best_cpu(self) -> float | None:
        return self.cpu[self.times.index(self.best)] if self.cpu else None

    def fmt(self) -> str:
        cpu = (
            f"; cpu {secs(self.best_cpu)}"
            if self.best_cpu is not None and self.best >= 0.05
            else ""
        )
        if len(self.times) == 1:
            return f"{secs(self.best)} (1 run{cpu})"
        return f"{secs(self.best)} (median {secs(self.median)}, n={len(self.times)}{cpu})"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def tree_cpu_seconds(root: int | None = None) -> float:
    """CPU seconds (user + system, reaped children included) of ``root`` (this process)
    and every process below it: the JVM, its Python daemon and workers.

    On a shared machine the wall time of a CPU-bound local[2] job depends on what
    else runs; the CPU it spends does far less, so writes report both. Linux only
    (``/proc``); elsewhere 0.
    """
    if not os.path.isdir("/proc"):
        return 0.0
    root = root or os.getpid()
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    spent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                text = fh.read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        parent[int(entry)] = int(fields[1])
        spent[int(entry)] = sum(int(x) for x in fields[11:15])
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += spent.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / tick


def secs(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def measure(
    fn: Callable[[], Any],
    reps: int,
    setup: Callable[[], Any] | None = None,
    warmup: int = 0,
) -> tuple[Timing, Any]:
    """Run ``setup`` (untimed) then ``fn`` (timed) ``warmup + reps`` times."""
    times: list[float] = []
    cpus: list[float] = []
    result = None
    for i in range(warmup + reps):
        if setup is not None:
            setup()
        gc.collect()
        c0 = _cpu()
        t0 = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - t0
        used = _cpu() - c0
        if i >= warmup:
            times.append(elapsed)
            cpus.append(used)
    return Timing(times, cpus), result


def measure_interleaved(
    cases: dict[str, tuple[Callable[[], Any], Callable[[], Any] | None]],
    reps: int,
    warmup: int = 0,
    release_memory: bool = False,
    cpu: Callable[[], float] | None = None,
) -> dict[str, tuple[Timing, Any, float | None]]:
    """Like ``measure`` for several competitors, alternating them every repetition so
    that background load hits all alike. Returns (timing, last result, peak RSS MiB).

    Each repetition runs the competitors in a new order (shuffled, seeded by the
    repetition), so that none keeps running right after the same other: on a VM
    that hands freed memory back to its host (free page reporting), memory
    touched afresh costs far more than pages another run freed a moment ago (here
    0.5-0.9 s per GiB against ~0.1 s), so a fixed order favours whoever follows
    the biggest allocator.

    ``release_memory`` (for the writes, which allocate GiBs): before each run,
    hand the memory the run before freed back to the OS
    (``partition_writer.release_freed_memory``), so each starts alike and peak
    RSS counts its own. Not for the reads: there it would only add page faults
    to every query (Q6 projected: the plain-Lance floor 35 ms instead of 28).

    ``cpu``: the CPU clock (default: this process's; ``tree_cpu_seconds`` also counts
    a Spark JVM and its workers)."""
    cpu = cpu or _cpu
    times: dict[str, list[float]] = {k: [] for k in cases}
    cpus: dict[str, list[float]] = {k: [] for k in cases}
    results: dict[str, Any] = {}
    peaks: dict[str, float | None] = {k: None for k in cases}
    for i in range(warmup + reps):
        order = list(cases)
        random.Random(i).shuffle(order)
        for name in order:
            fn, setup = cases[name]
            if setup is not None:
                setup()
            gc.collect()
            if release_memory:
                release_freed_memory()
            reset_peak_rss()
            c0 = cpu()
            t0 = time.perf_counter()
            results[name] = fn()
            elapsed = time.perf_counter() - t0
            used = cpu() - c0
            peak = rss_mib()
            if peak is not None:
                peaks[name] = max(peaks[name] or 0.0, peak)
            if i >= warmup:
                times[name].append(elapsed)
                cpus[name].append(used)
    return {k: (Timing(times[k], cpus[k]), results[k], peaks[k]) for k in cases}


def reset_peak_rss(pid: int | str = "self") -> None:
    """Reset the kernel's high-water mark of process ``pid`` (default this one; Linux
    ``clear_refs``)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def rss_mib(key: str = "VmHWM", pid: int | str = "self") -> float | None:
    """``key`` of process ``pid``'s status (default: this one's peak RSS), in MiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def du_mib(path: str | Path) -> float:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(dirpath, name))
    return total / 2**20


def rmtree(path: str | Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
