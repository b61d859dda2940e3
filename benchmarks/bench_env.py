"""What every benchmark report records: the machine, the load, the exact command.

A figure is only comparable with another taken on the same machine under the
same load, so each results file starts with ``header_lines(...)``: the date, the
command that produced it (runnable from the repository root), the CPU model and
core count, memory, OS, Python and package versions, and the load average at
the start and at the end of the run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata as md
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

PACKAGES = (
    "lance-partitioned",
    "pylance",
    "pyarrow",
    "numpy",
    "mmh3",
    "datafusion",
    "pyiceberg",
    "pyiceberg-core",
    "deltalake",
    "SQLAlchemy",
    "pyspark",
    "tpchgen-cli",
)


def cpu_model() -> str:
    """The CPU model name (``/proc/cpuinfo``), or the platform's processor string."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def cores() -> int:
    """The cores this process may run on (its affinity), else ``os.cpu_count()``."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def machine_info(packages: Sequence[str] = PACKAGES) -> list[str]:
    """Markdown bullet lines: cores and CPU model, memory, OS, Python, package versions."""

    def version(dist: str) -> str:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "not installed"

    mem = "?"
    with contextlib.suppress(OSError, ValueError, IndexError), open("/proc/meminfo") as f:
        mem = f"{int(f.readline().split()[1]) / 2**20:.1f} GiB"
    return [
        f"- nproc: {cores()} (os.cpu_count {os.cpu_count()}), CPU: {cpu_model()}",
        f"- memory: {mem}",
        f"- OS: {platform.platform()}",
        f"- python: {platform.python_version()} ({sys.executable})",
        "- packages: " + ", ".join(f"{p} {version(p)}" for p in packages),
    ]


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``"0.21, 1.68, 2.26"``."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def command(script: str, argv: Sequence[str] | None = None) -> str:
    """The command line that ran ``script`` (``argv``: its arguments; None: ``sys.argv``).

    The interpreter is shown relative to the working directory when it lies
    below it (``.venv/bin/python``), so the line can be pasted from the
    repository root.
    """
    exe = sys.executable
    with contextlib.suppress(ValueError):
        if Path(exe).is_relative_to(Path.cwd()):
            exe = os.path.relpath(exe)
    if argv is None:
        return shlex.join([exe, *sys.argv])
    with contextlib.suppress(ValueError):
        script = os.path.relpath(script) if Path(script).is_relative_to(Path.cwd()) else script
    return shlex.join([exe, script, *argv])


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def header_lines(
    title: str, cmd: str, started: str, load_start: str, elapsed: float | None = None
) -> list[str]:
    """The head of a results file: title, date, command, machine and load (start and now)."""
    total = f"; total run time {elapsed:.0f} s" if elapsed is not None else ""
    return [
        f"# {title}",
        "",
        f"- date: {started} (UTC){total}",
        f"- command: `{cmd}`",
        *machine_info(),
        f"- load average (1, 5, 15 min) at start: {load_start}; at end: {loadavg()} "
        f"(above {cores()}, other processes shared the machine: compare ratios measured "
        "in the same run, not absolute times)",
        "",
    ]


def write_report(path: str | os.PathLike[str] | None, text: str) -> None:
    """Write ``text`` to ``path`` (parents created); ``None`` or ``""``: print only."""
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"written to {out}", file=sys.stderr)


def file_system(path: Path) -> str:
    """The type of the file system holding ``path`` (Linux's /proc/mounts), e.g. ``ext4``.

    Worth recording: creating a dataset costs far more CPU on ext4 shortly after
    many files were deleted there than on tmpfs (the kernel's inode allocator
    skips recently deleted inodes), which moves the floor between runs.
    """
    where = str(path.resolve())
    best, kind = "", "an unknown file system"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                _, point, fs_type = line.split()[:3]
                inside = where == point or where.startswith(point.rstrip("/") + "/")
                if inside and len(point) > len(best):
                    best, kind = point, fs_type
    except OSError:
        pass
    return kind


def clocked(fn: Callable[..., Any], seconds: list[float]) -> Callable[..., Any]:
    """``fn`` that also appends the seconds each call takes to ``seconds`` (to time a
    step of the library from outside, by putting this in its place for a run)."""

    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - start)

    return run
