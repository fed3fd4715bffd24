"""When sessions' index snapshots are written, and the thread that writes them.

Two derived indexes of a session are kept on disk: the relevance index
(`engine.relevance.snapshot`) and the recall candidate index
(`engine.recall.candidate_snapshot`). Both follow the same rules, below; the relevance
index is what they were made for.

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
lets it go. Reopening a session waits for its pending writes before its store is opened
(whose recovery removes stray temp files) and before loading a snapshot, so it reads the
newest one.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from engine.recall.candidate_snapshot import save_index_snapshot
from engine.recall.candidate_snapshot import snapshot_due as candidates_due
from engine.recall.candidate_snapshot import snapshot_path as candidates_path
from engine.recall.candidate_snapshot import synced_index as synced_candidates
from engine.recall.candidates import CandidateIndex
from engine.recall.hygiene import visible_entries
from engine.relevance.folder_text import (
    SNAPSHOT_MIN_DOCS,
    FolderTexts,
    save_index,
    snapshot_due,
    snapshot_path,
    stamp_source,
)
from engine.relevance.index import RelevanceIndex
from engine.store import SessionStore
from engine.store import index_snapshot as rows_snapshot
from handlers.forget import hygiene_of

if TYPE_CHECKING:
    from handlers.sessions import SessionRegistry, SessionState

__all__ = [
    "WRITER",
    "SnapshotWriter",
    "after_candidates",
    "after_sync",
    "before_load",
    "before_open",
    "candidate_key",
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


Job = Callable[[], int | None]
"""One snapshot write (its size, None when there was nothing to write); blocking."""


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
        self._queue: dict[Path, Job] = {}
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
        if path is not None:
            self.request_job(path, functools.partial(self._save, index), retry=retry)

    def request_job(self, path: Path, job: Job, *, retry: bool = False) -> None:
        """Have `job` write the file at `path` soon (cheap; any thread); it replaces a job
        of the same file still waiting (the newer index wins). Retries as `request`."""
        with self._cond:
            failed = self._failed_at.get(path)
            if not retry and failed is not None and self._clock() - failed < RETRY_AFTER_S:
                return
            self._queue[path] = job
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

    def wait_within(self, directory: Path, timeout: float | None = None) -> bool:
        """Block until no snapshot of a file in `directory` is waiting or being written;
        False when `timeout` passed first."""

        def clear() -> bool:
            running = self._running
            return (running is None or running.parent != directory) and all(
                p.parent != directory for p in self._queue
            )

        with self._cond:
            return self._cond.wait_for(clear, timeout)

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
                job: Job | None = self._queue.pop(path)
                self._running = path
            ok = False
            try:
                assert job is not None
                size = job()
                ok = True
                log.debug("index snapshot written", path=str(path), bytes=size)
            except OSError as exc:  # the disk refused: the old snapshot stays
                log.warning("index snapshot not written", path=str(path), error=str(exc))
            except Exception:  # a thread boundary: logged, never fatal to the daemon
                log.exception("index snapshot failed", path=str(path))
            finally:
                job = None  # an unloaded session's index goes now
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


def before_load(state: SessionState, path: Path | None = None) -> None:
    """Reopening: wait for the session's snapshot at `path` (default: the relevance
    index's) being written, if any (blocking)."""
    path = snapshot_path(state.store) if path is None else path
    if WRITER.pending(path) and not WRITER.wait(path, REOPEN_WAIT_S):
        log.warning("index snapshot still being written", session_key=state.key, path=str(path))


def before_open(directory: Path, key: str) -> None:
    """Reopening a session: wait for every snapshot still being written into its
    `directory` (blocking). Opening runs the store's recovery, which removes the temp files
    it finds there as leftovers of a crash; a write in flight would lose its temp file
    (and the newer snapshot) under it."""
    if not WRITER.wait_within(directory, REOPEN_WAIT_S):
        log.warning("index snapshot still being written", session_key=key, path=str(directory))


def candidate_key(store: SessionStore, params: Any) -> tuple[Any, ...]:
    """What a candidate index is current for: the store (identity, version) and the index
    parameters (`engine.recall.index_params`)."""
    return (id(store), store.version, params)


def after_candidates(state: SessionState, index: CandidateIndex) -> None:
    """After a request made or updated the candidate index: its snapshot if one is due
    (a build, or enough changes since the last)."""
    if candidates_due(index):
        WRITER.request_job(
            candidates_path(state.store),
            functools.partial(save_index_snapshot, state.store, index),
        )


def _save_rows(store: SessionStore) -> int | None:
    """The snapshot of an unloaded store's ``index.json`` (`engine.store.index_snapshot`),
    if it changed since the last one."""
    return rows_snapshot.save_index_snapshot(store.paths, store.index, store.loaded_from)


def _save_current_candidates(state: SessionState, index: CandidateIndex) -> int | None:
    """An unloaded session's candidate index brought to its store first (the store may
    have moved on since the last recall: an archive after it), then its snapshot."""
    store = state.store
    key = candidate_key(store, index.params)
    if index.version != key:
        entries = visible_entries(store.index, hygiene_of(state).hidden())
        index, _ = synced_candidates(index, store, entries, index.cfg, key)
    return save_index_snapshot(store, index) if candidates_due(index, unloading=True) else None


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


def _stamp_due(store: SessionStore, index: RelevanceIndex) -> bool:
    """Whether an unloaded session's relevance snapshot is worth writing only for the
    stamp it lacks: the index holds no unsaved change, but it is synced to the store's
    entries as opened and its snapshot is not stamped with them (written before stamps,
    or over entries a restart changed). Written once, it spares every later restart of
    an unchanged store the comparison of each entry with its stored key
    (`engine.relevance.snapshot.read_snapshot`)."""
    source = stamp_source(store, index)
    return source is not None and index.docs >= SNAPSHOT_MIN_DOCS and index.stamp != source


def on_unload(state: SessionState) -> None:
    """A session is being unloaded (eviction, `agent/disposed`; on the event loop, cheap):
    its indexes' snapshots, if they hold unsaved changes (the candidate index's also when
    the store moved on since it was last brought up to date), and its ``index.json``'s
    when that changed since its last one."""
    index = state.relevance_index
    if isinstance(index, RelevanceIndex) and (
        snapshot_due(index, unloading=True) or _stamp_due(state.store, index)
    ):
        WRITER.request(index, retry=True)
    store = state.store
    if store.materialized and len(store) >= rows_snapshot.SNAPSHOT_MIN_ROWS:
        WRITER.request_job(
            rows_snapshot.snapshot_path(store.paths),
            functools.partial(_save_rows, store),
            retry=True,
        )
    candidates = state.recall_index
    if isinstance(candidates, CandidateIndex) and (
        candidates.unsaved or candidates.version != candidate_key(state.store, candidates.params)
    ):
        WRITER.request_job(
            candidates_path(state.store),
            functools.partial(_save_current_candidates, state, candidates),
            retry=True,
        )


async def save_loaded(sessions: SessionRegistry, timeout: float) -> bool:
    """Shutdown: the snapshots of every loaded session with unsaved changes (both
    indexes, each brought to its store first), waited for
    up to `timeout` seconds (what is not written by then keeps its older snapshot)."""
    for state in sessions.loaded_states():
        on_unload(state)
    return await anyio.to_thread.run_sync(WRITER.flush, timeout)
