"""Durable writes issued together: two fsyncs that wait for one journal commit.

Why: a recall round ends with two durable appends to two files (the recall state's log,
the telemetry) that do not depend on each other. One fsync after the other is two
journal commits; issued at once, the filesystem commits both in one (a warm recall round
at 10⁴ folders: 6.0 → 5.1 ms here).

The pool is its own, apart from `engine.jsonio`'s fsync threads: what runs here may
itself wait on those (an atomic write), and a pool never waits on itself.

Measured and not kept: reading a round's picks ahead in worker threads (their files
asked of the disk at once). Warm, it cost a round 0.8 ms (most likely the threads' turns
at the interpreter lock); cold, it gained nothing measurable. The kernel's own read-ahead
advice does it without threads (`engine.store.folders.read_ahead`).
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["LazyPool", "raise_first_failure", "together"]


class LazyPool:
    """A pool of worker threads made on first use, then shared: a process that never
    needs one (a CLI command, most tests) starts no thread for it."""

    def __init__(self, name: str, threads: int) -> None:
        self.name = name
        self.threads = threads
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __call__(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=self.threads, thread_name_prefix=self.name
                )
            return self._pool


_writers = LazyPool("rofmd-write", 4)


def raise_first_failure(futures: Iterable[concurrent.futures.Future[Any]]) -> None:
    """Raise the failure of the first of `futures` (in their order) that failed, if
    any; the caller has waited for all of them (so nothing is still running when its
    own caller hears of a failure)."""
    for future in futures:
        failed = future.exception()
        if failed is not None:
            raise failed


def together(first: Callable[[], Any], *others: Callable[[], Any]) -> None:
    """Run ``first`` in this thread and each of ``others`` in a worker thread, all at
    once, and return when every one has ended; the first failure (in argument order)
    is raised then, so nothing is still writing when the caller hears of it.

    For writes that must all be durable at the same point and do not depend on each
    other: their fsyncs wait for one journal commit instead of one each. Which of them
    reaches the disk first is not said. Each of ``others`` runs in a copy of the caller's
    context, so what it logs carries the request's bound fields as ``first``'s does."""
    futures = [_writers().submit(contextvars.copy_context().run, call) for call in others]
    try:
        first()
    finally:
        concurrent.futures.wait(futures)
    raise_first_failure(futures)
