"""The process's resident memory, and handing freed heap memory back to the OS.

A streaming write's memory budget (``max_buffer_bytes``) is promised in resident
memory, not only in the Arrow bytes the writer counts: allocator overhead
(size classes, pages kept by a pool), the reader's buffers and the heap of
Lance's Rust threads are resident too, and they grow with what the write has
held (``benchmarks/results/memory.md``). ``resident_bytes`` lets the writer see
that total; ``trim_heap`` returns what glibc's heap keeps after a flush.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Callable

from lance_partitioned.format import caches

_STATM = "/proc/self/statm"


@caches.memoize("resident.page_size", maxsize=1)
def _page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int | None:
    """This process's resident memory now (Linux ``/proc/self/statm``); None where unknown.

    Cheap (one small read of a kernel file), so a writer can ask once per batch.
    """
    try:
        with open(_STATM, "rb") as f:
            return int(f.read().split()[1]) * _page_size()
    except (OSError, ValueError, IndexError):
        return None


@caches.memoize("resident.malloc_trim", maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None on any other C library (musl, macOS, Windows)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def trim_heap() -> bool:
    """Return the free memory of glibc's heap to the OS (``malloc_trim(0)``); no-op elsewhere.

    Lance's Rust code allocates through the C library's ``malloc`` (its extension
    links no allocator of its own), from one glibc arena per thread that meets
    it. glibc only gives back memory at the top of a heap, so after a flush the
    pages its writes freed stay resident, and a long write's resident memory
    ratchets up round after round (SF3: 1,948 → 1,773 MiB peak with this call
    after each flush round). ``malloc_trim`` releases every whole free page of
    every arena; it changes no allocator setting. Returns whether it ran.
    """
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True
