"""When sessions' relevance index snapshots are written, and the thread that writes them.

A snapshot (`engine.relevance.snapshot`, kept by `engine.relevance.folder_text`) spares a
restart or a reopen after an eviction the re-reading of every folder. Writing one is a
large write (about 2 kB a folder), so it is written at a few moments only
(`engine.relevance.folder_text.snapshot_due`): after an index was built from the folders,
once enough changes piled up, when the session is unloaded (eviction, `agent/disposed`)
and at shutdown; never on every archive.

One background thread writes them, one at a time, so a burst of unloads does not write
twenty 100 MB files at once and no request thread waits on a disk write. A request for
a snapshot already waiting replaces it (the newer index wins). The thread copies the
index under its lock (a request of that session that syncs meanwhile waits for the
copy, not for the write) and holds an unloaded session's index until it is written, then
lets it go. Reopening a session waits for its pending write before loading the file, so
it reads the newest one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from engine.relevance.folder_text import FolderTexts, save_index, snapshot_due, snapshot_path
from engine.relevance.index import RelevanceIndex

if TYPE_CHECKING:
    from handlers.sessions import SessionRegistry, SessionState

__all__ = [
    "WRITER",
    "SnapshotWriter",
    "after_sync",
    "before_load",
    "note_loaded",
    "on_unload",
    "save_loaded",
]

log = structlog.get_logger("rofmd.snapshots")

RETRY_AFTER_S = 60.0
"""After a write failed (disk full, read-only), a loaded session's snapshot is not tried
again for this long: every request would otherwise start another large write."""

REOPEN_WAIT_S = 30.0
"""How long reopening a session waits for its snapshot being written (then it loads the
file there is: an older snapshot is as valid, only more to sync)."""


def _path_of(index: RelevanceIndex) -> Path | None:
    texts = index.text_of
    return snapshot_path(texts.store) if isinstance(texts, FolderTexts) else None


class SnapshotWriter:
    """Writes snapshots in one daemon thread, in request order, newest index per file."""

    def __init__(
        self,
        save: Callable[[RelevanceIndex], int | None] = save_index,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._save = save
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: dict[Path, RelevanceIndex] = {}
        self._running: Path | None = None
        self._thread: threading.Thread | None = None
        self._failed_at: dict[Path, float] = {}
        self.written = 0
        self.failed = 0

    def request(self, index: RelevanceIndex, *, retry: bool = False) -> None:
        """Have `index`'s snapshot written soon (cheap; any thread). A file whose last
        write failed is tried again only after :data:`RETRY_AFTER_S`, or with `retry`
        (the index is about to leave memory: its last chance)."""
        path = _path_of(index)
        if path is None:
            return
        with self._cond:
            failed = self._failed_at.get(path)
            if not retry and failed is not None and self._clock() - failed < RETRY_AFTER_S:
                return
            self._queue[path] = index
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="rofmd-snapshots", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def pending(self, path: Path) -> bool:
        """A snapshot of `path` is waiting or being written."""
        with self._cond:
            return path in self._queue or self._running == path

    def wait(self, path: Path, timeout: float | None = None) -> bool:
        """Block until no snapshot of `path` is waiting or being written; False when
        `timeout` passed first."""
        with self._cond:
            return self._cond.wait_for(
                lambda: path not in self._queue and self._running != path, timeout
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every requested snapshot is written (or failed); False when
        `timeout` passed first."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and self._running is None, timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue))
                path = next(iter(self._queue))
                index: RelevanceIndex | None = self._queue.pop(path)
                self._running = path
            ok = False
            try:
                assert index is not None
                size = self._save(index)
                ok = True
                log.debug("relevance snapshot written", path=str(path), bytes=size)
            except OSError as exc:  # the disk refused: the old snapshot stays
                log.warning("relevance snapshot not written", path=str(path), error=str(exc))
            except Exception:  # a thread boundary: logged, never fatal to the daemon
                log.exception("relevance snapshot failed", path=str(path))
            finally:
                index = None  # an unloaded session's index goes now
                with self._cond:
                    if ok:
                        self.written += 1
                        self._failed_at.pop(path, None)
                    else:
                        self.failed += 1
                        self._failed_at[path] = self._clock()
                    self._running = None
                    self._cond.notify_all()


WRITER = SnapshotWriter()


def before_load(state: SessionState) -> None:
    """Reopening: wait for the session's snapshot being written, if any (blocking)."""
    path = snapshot_path(state.store)
    if WRITER.pending(path) and not WRITER.wait(path, REOPEN_WAIT_S):
        log.warning("relevance snapshot still being written", session_key=state.key)


def note_loaded(state: SessionState, index: RelevanceIndex, seconds: float) -> None:
    """A session's index was made (restored from its snapshot, or built): how, and what it
    read, in the debug log."""
    texts = index.text_of
    log.debug(
        "relevance index loaded",
        session_key=state.key,
        restored=index.saved,
        folders=len(index),
        read=texts.reads if isinstance(texts, FolderTexts) else None,
        seconds=round(seconds, 4),
    )


def after_sync(index: RelevanceIndex) -> None:
    """After a request synced the index: a snapshot if one is due (built from the
    folders, or enough changes since the last)."""
    if snapshot_due(index):
        WRITER.request(index)


def on_unload(state: SessionState) -> None:
    """A session is being unloaded (eviction, `agent/disposed`; on the event loop, cheap):
    its index's snapshot, if it holds unsaved changes."""
    index = state.relevance_index
    if isinstance(index, RelevanceIndex) and snapshot_due(index, unloading=True):
        WRITER.request(index, retry=True)


async def save_loaded(sessions: SessionRegistry, timeout: float) -> bool:
    """Shutdown: the snapshots of every loaded session with unsaved changes, waited for
    up to `timeout` seconds (what is not written by then keeps its older snapshot)."""
    for state in sessions.loaded_states():
        on_unload(state)
    return await anyio.to_thread.run_sync(WRITER.flush, timeout)
