"""Give memory back to the OS after sessions were unloaded (issue 21).

Dropping a session's state frees its objects, but the process keeps the pages: the
allocator holds freed memory for reuse, so the resident size stays at its peak. After
an unload (dispose or eviction) this empties what keeps blocks of that memory in use
although the sessions are gone: the engine's memo caches (`engine.memo`), the validated
surface nodes (`handlers.validated_once`) and CPython's type attribute cache (attribute
names looked up lately), all refilled on demand; then it runs a full garbage collection
(cycles, and the interpreter's free lists), freezes what survived it (`gc.freeze()`:
live data, which no later collection needs to scan; see `handlers.long_lived`) and, on
glibc, `malloc_trim(0)`, which hands free pages back. How much comes back depends on the
allocator, which is why `rofmd serve` runs on glibc's malloc (`rofmd.server.allocator`).

It runs in a worker thread (`malloc_trim` releases the interpreter lock; the collection
holds it for tens of milliseconds, `lastRelease.seconds` says how long), at most once
per `min_interval` seconds and only after something was unloaded: a burst of disposes
costs one release, a daemon that unloads nothing never pays for it. The resident size
(Linux: `/proc/self/statm`) before and after the last release is in `status.memory`.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from engine.memo import clear_memo_caches
from handlers.validated_once import forget_all
from rofmd.server.allocator import allocator_name

log = structlog.get_logger("rofmd.memory")

STATM = "/proc/self/statm"


def resident_bytes() -> int | None:
    """The process's resident set size now; None where `/proc` does not tell (macOS)."""
    try:
        with open(STATM, "rb") as f:
            fields = f.read().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None (musl, macOS: nothing to call)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


@dataclass(frozen=True, slots=True)
class Release:
    """One release: resident bytes before and after, memo entries dropped, objects the
    collection freed, whether malloc was trimmed, and how long it all took (the
    collection holds the interpreter lock, so that is how long requests waited)."""

    rss_before: int | None
    rss_after: int | None
    memo_entries: int
    collected: int
    trimmed: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "rssBeforeBytes": self.rss_before,
            "rssAfterBytes": self.rss_after,
            "memoEntries": self.memo_entries,
            "collected": self.collected,
            "trimmed": self.trimmed,
            "seconds": round(self.seconds, 4),
        }


def release_memory(trim: Callable[[int], int] | None) -> Release:
    """Collect garbage and trim malloc's free pages. Blocking (call in a worker thread)."""
    started = time.monotonic()
    before = resident_bytes()
    memo = clear_memo_caches() + forget_all()
    # the type attribute cache holds the attribute names looked up lately, made among the
    # sessions' data as well (CPython; refills on demand)
    clear_type_cache = getattr(sys, "_clear_type_cache", None)
    if clear_type_cache is not None:
        clear_type_cache()
    collected = gc.collect()
    # what survived a full collection is live: out of the collector's reach again
    # (handlers.long_lived; unloading a session thawed everything)
    gc.freeze()
    trimmed = False
    if trim is not None:
        trim(0)
        trimmed = True
    after = resident_bytes()
    return Release(before, after, memo, collected, trimmed, time.monotonic() - started)


class MemoryRelease:
    """Runs :func:`release_memory` after unloads, debounced and rate-limited."""

    def __init__(self, *, min_interval: float = 5.0, settle: float = 0.2) -> None:
        self._min_interval = min_interval
        self._settle = settle
        self._trim = _malloc_trim()
        self._wanted = False
        self._trim_wanted = False
        self._wake: anyio.Event | None = None
        self.runs = 0
        self.trims = 0
        """Trims alone, after loads (`request_trim`)."""
        self.last: Release | None = None

    def request(self) -> None:
        """Something was unloaded (called on the event loop, cheap)."""
        self._wanted = True
        if self._wake is not None:
            self._wake.set()

    def request_trim(self) -> None:
        """A session's data was loaded (called on the event loop, cheap): what loading
        freed is handed back with `malloc_trim` alone (nothing was unloaded, so there is
        nothing to collect), at most once a second; not counted as a release."""
        if self._trim is None:
            return
        self._trim_wanted = True
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Release after unloads (and trim after loads) until cancelled (shutdown)."""
        while True:
            self._wake = anyio.Event()
            if not self._wanted and not self._trim_wanted:
                await self._wake.wait()
            # let a burst of unloads finish first: one release for all of them
            await anyio.sleep(self._settle)
            if not self._wanted and self._trim is not None:
                self._trim_wanted = False
                await anyio.to_thread.run_sync(self._trim, 0)
                self.trims += 1
                await anyio.sleep(1.0)
                continue
            self._wanted = self._trim_wanted = False
            self.last = await anyio.to_thread.run_sync(release_memory, self._trim)
            self.runs += 1
            log.debug("memory released", **self.last.to_json())
            await anyio.sleep(self._min_interval)

    def status(self) -> dict[str, Any]:
        """`status.memory`."""
        return {
            "allocator": allocator_name(),
            "rssBytes": resident_bytes(),
            "releases": self.runs,
            "trims": self.trims,
            "lastRelease": self.last.to_json() if self.last is not None else None,
        }
