"""The session-log tailer (PROTOCOL.md §5): DSH's own logs feed passive archiving.

``<sessions_dir>/<workspace>/<session>/session.v4.jsonl[.zstd]`` are found with
watchfiles (a changed log, a new directory) and by a scan at start and every
``RESCAN_S`` seconds (a missed notification costs latency, never an event). Each log is
followed by a task of its own, so one session's long catch-up never delays another's
news; every read runs in a worker thread, ``READERS`` at a time, in bounded steps
(``rofmd.server.tailer_log``: at most ``STEP_BYTES`` of the file, frame by frame and chunk by
chunk through ``engine.sessionlog.LogScanner``), so memory stays bounded whatever the
size of a log and a stop waits for one step at most.

For each ``compaction/summary`` of another provider, its shadowed events are read back
from the log (a sparse seq index gives where to start; after a restart it is first
completed from the file's start) and sent as a ``session/event`` through the
dispatcher, in the session's lane, exactly as the bridge sends it: one use case
(``handlers.passive``), one watermark per session, so the socket and the tailer never
archive the same event twice. The checkpoint (``rofmd.server.tailer_checkpoint``) moves past a
compaction only once its archive is durable; one refused for now (storage, overload) is
tried again ``RETRY_S`` later, so nothing is skipped.

A checkpoint names its file by device, inode and header id. Rotation (another file at
the path): the held file is read to its end before the new one is read from its start;
after a restart the rotated file is found in the same directory by its inode.
Truncation (the file shrank): read again from the start. The watermark makes any
re-read harmless.

``sessions_dir`` (``--sessions-dir``, ``ROFMD_SESSIONS_DIR``) defaults to
``$DSH_HOME/sessions``, else ``~/.dsh/sessions``: a DSH on the same machine is tailed
without configuration. While the directory does not exist the tailer waits, checking
every ``DIR_POLL_S`` seconds, and starts once it appears. ``passive_scope: off`` runs
no tailer; so does a daemon started with memory disabled.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import structlog

from engine.jsonio import fs
from handlers.app import App
from handlers.context import ConnectionState
from handlers.errors import INTERNAL_ERROR, OVERLOADED, STORAGE_UNAVAILABLE
from rofmd.cli.progress import Progress
from rofmd.server.dispatcher import Dispatcher
from rofmd.server.jsonrpc import Call
from rofmd.server.tailer_checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from rofmd.server.tailer_log import Found, SeqIndex, Stopped, TailedLog

log = structlog.get_logger("rofmd.tailer")

__all__ = ["LOG_NAMES", "SessionLogTailer", "is_log_path"]

LOG_NAMES = ("session.v4.jsonl.zstd", "session.v4.jsonl")
READERS = 2
"""Read steps running at once, over every log (the machine has few cores)."""
CHECKPOINT_EVERY_S = 1.0
DIR_POLL_S = 1.0
RESCAN_S = 30.0
RETRY_S = 5.0
IDLE_CLOSE_S = 120.0
"""A log untouched this long has its file closed (its checkpoint stays)."""
PROGRESS_MIN_BYTES = 64 * 1024 * 1024
"""A catch-up this long shows a progress bar when stderr is a terminal."""
RETRIED = frozenset({OVERLOADED, STORAGE_UNAVAILABLE})
"""Answers that mean "not now": the compaction is tried again later, however often."""
MAX_INTERNAL_ERRORS = 3
"""Internal errors (-32603: a bug, a timeout) one compaction is tried for."""


def is_log_path(root: Path, path: Path) -> bool:
    """``path`` is ``<root>/<workspace>/<session>/session.v4.jsonl[.zstd]``."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return False
    return len(rel.parts) == 3 and rel.name in LOG_NAMES


@dataclass
class Followed:
    """A log and what the service keeps about it (the reading side is ``log``)."""

    log: TailedLog
    wake: anyio.Event = field(default_factory=anyio.Event)
    last_active: float = field(default_factory=time.monotonic)
    last_read_ms: int | None = None
    saved: tuple[int, int, int, int] | None = None
    """(dev, ino, offset, lines) of the checkpoint last written."""
    saved_at: float = 0.0
    attempts: int = 0
    """Tries of the compaction the log stopped at (internal errors give up after
    ``MAX_INTERNAL_ERRORS``)."""
    compactions: int = 0
    folders: int = 0
    retry_pending: bool = False
    loaded: bool = False

    def status(self) -> dict[str, Any]:
        cp = self.log.cp
        return {
            "path": str(self.log.path),
            "session": cp.session.get("id"),
            "offset": cp.offset,
            "lines": cp.lines,
            "size": cp.size,
            "lag": max(0, cp.size - cp.offset),
            "zstd": cp.zstd,
            "torn": self.log.torn,
            "compactions": self.compactions,
            "folders": self.folders,
            "lastReadAt": self.last_read_ms,
            "lastError": self.log.last_error,
        }


class SessionLogTailer:
    """Follows every session log under ``root`` (module docstring)."""

    def __init__(
        self,
        root: Path,
        app: App,
        dispatcher: Dispatcher,
        *,
        clock_ms: Callable[[], int],
        request_timeout: float,
        progress_stream: Any = None,
    ) -> None:
        self.root = root
        self.app = app
        self.dispatcher = dispatcher
        self.clock_ms = clock_ms
        self.request_timeout = request_timeout
        self.progress_stream = progress_stream if progress_stream is not None else sys.stderr
        self.files: dict[Path, Followed] = {}
        self.last_error: str | None = None
        self.watching = False
        self._stop = anyio.Event()
        self._readers = anyio.CapacityLimiter(READERS)
        self._conn = ConnectionState(conn_id=0)
        self._ids = itertools.count(1)
        self._tg: anyio.abc.TaskGroup | None = None

    # ---- the service --------------------------------------------------------------

    def stop(self) -> None:
        """Stop following; ``run`` returns once the current read steps are done."""
        self._stop.set()

    async def run(self) -> None:
        """Discover and follow logs until :meth:`stop`."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                await self._discover()
                tg.cancel_scope.cancel()
        finally:
            for f in self.files.values():
                f.log.close()

    async def _discover(self) -> None:
        from watchfiles import awatch

        root = self.root
        waiting_logged = False
        while not self._stop.is_set():
            if not await anyio.to_thread.run_sync(root.is_dir):
                if not waiting_logged:
                    log.info("sessions directory absent: waiting for it", dir=str(root))
                    waiting_logged = True
                with anyio.move_on_after(DIR_POLL_S):
                    await self._stop.wait()
                continue
            waiting_logged = False
            log.info("tailing session logs", dir=str(root))
            await self._scan(root)
            self.watching = True
            try:
                async for changes in awatch(
                    root,
                    watch_filter=self._interesting,
                    debounce=200,
                    step=50,
                    stop_event=self._stop,
                    rust_timeout=int(RESCAN_S * 1000),
                    yield_on_timeout=True,
                    ignore_permission_denied=True,
                ):
                    if not changes:  # the periodic rescan
                        await self._scan(root)
                        self._close_idle()
                        continue
                    logs, dirs = await anyio.to_thread.run_sync(self._classify, changes)
                    for path in logs:
                        self._track(path)
                    for path in dirs:
                        await self._scan(path)
            except (FileNotFoundError, RuntimeError, OSError) as exc:
                # the directory went away (or the watcher could not start): wait again
                self.last_error = f"watching {root}: {exc}"
                log.warning("session log watcher stopped", dir=str(root), error=str(exc))
            finally:
                self.watching = False
            if not self._stop.is_set():
                with anyio.move_on_after(DIR_POLL_S):
                    await self._stop.wait()

    def _interesting(self, _change: object, raw: str) -> bool:
        path = Path(raw)
        try:
            depth = len(path.relative_to(self.root).parts)
        except ValueError:
            return False
        return depth < 3 or (depth == 3 and path.name in LOG_NAMES)

    def _classify(self, changes: set[tuple[Any, str]]) -> tuple[list[Path], list[Path]]:
        """Changed logs, and changed directories to scan (worker thread: stats)."""
        logs: list[Path] = []
        dirs: list[Path] = []
        for _change, raw in sorted(changes, key=lambda c: c[1]):
            path = Path(raw)
            if is_log_path(self.root, path):
                logs.append(path)
            elif path.is_dir():
                dirs.append(path)
        return logs, dirs

    async def _scan(self, top: Path) -> None:
        """Track every log under ``top`` (the root, a workspace or a session directory)."""

        def walk() -> list[Path]:
            depth = len(top.relative_to(self.root).parts)
            dirs = [top]
            for _ in range(2 - depth):
                dirs = [d for parent in dirs for d in _subdirs(parent)]
            return [p for d in dirs for name in LOG_NAMES if (p := d / name).is_file()]

        try:
            paths = await anyio.to_thread.run_sync(walk)
        except (OSError, ValueError) as exc:
            self.last_error = f"scanning {top}: {exc}"
            return
        for path in paths:
            self._track(path)

    def _track(self, path: Path) -> None:
        followed = self.files.get(path)
        if followed is None:
            followed = Followed(TailedLog(path, Checkpoint(path=str(path))))
            self.files[path] = followed
            assert self._tg is not None
            self._tg.start_soon(self._follow, followed)
        followed.last_active = time.monotonic()
        followed.wake.set()

    async def _follow(self, f: Followed) -> None:
        while True:
            await f.wake.wait()
            f.wake = anyio.Event()
            if self._stop.is_set():
                return
            try:
                gone = await self._catch_up(f)
            except Stopped:
                return
            except Exception as exc:  # service boundary: one log's failure stops no other
                f.log.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("session log read failed", path=str(f.log.path))
                self._retry(f)
                continue
            if gone and not f.wake.is_set() and self.files.get(f.log.path) is f:
                del self.files[f.log.path]  # a later file at the path starts afresh
                return

    def _retry(self, f: Followed) -> None:
        if f.retry_pending or self._tg is None:
            return
        f.retry_pending = True

        async def later() -> None:
            with anyio.move_on_after(RETRY_S):
                await self._stop.wait()
            f.retry_pending = False
            f.wake.set()

        self._tg.start_soon(later)

    def _close_idle(self) -> None:
        now = time.monotonic()
        for f in self.files.values():
            if now - f.last_active > IDLE_CLOSE_S and not f.retry_pending:
                f.log.close()

    # ---- one log --------------------------------------------------------------------

    async def _catch_up(self, f: Followed) -> bool:
        """Read the log to its end, archiving each foreign compaction on the way; True
        when there is no file at its path any more."""
        root = self.app.memory_root()
        tl = f.log
        if not f.loaded:
            cp = await anyio.to_thread.run_sync(load_checkpoint, root, tl.path)
            if cp is not None:
                tl.cp = cp
                tl.index = SeqIndex(from_start=cp.offset == 0 and cp.lines == 0)
                log.debug("resuming session log", path=str(tl.path), offset=cp.offset)
            f.loaded = True
        progress: Progress | None = None
        gone = False
        try:
            while not self._stop.is_set():
                step = await anyio.to_thread.run_sync(tl.read_step, limiter=self._readers)
                f.last_read_ms = self.clock_ms()
                if step.note:
                    log.info("session log " + step.note, path=str(tl.path))
                cp = tl.cp
                if progress is None and cp.size - cp.offset >= PROGRESS_MIN_BYTES:
                    progress = Progress(self.progress_stream, cp.size, f"tailing {tl.path}")
                if progress is not None:
                    progress.update(cp.offset)
                if step.found is not None:
                    if not await self._archive(f, step.found):
                        self._retry(f)
                        break
                    cp.at(step.found.after)
                    await self._save(f, root, force=True)
                    continue
                await self._save(f, root)
                gone = step.gone
                if not (step.more or step.progressed):
                    break
        finally:
            if progress is not None:
                progress.close()
        await self._save(f, root, force=True)
        return gone

    async def _save(self, f: Followed, root: Path, *, force: bool = False) -> None:
        """Write the checkpoint if it moved: at once with ``force`` (after an archive, at
        the end of a catch-up), else at most every ``CHECKPOINT_EVERY_S``."""
        cp = f.log.cp
        state = (cp.dev, cp.ino, cp.offset, cp.lines)
        now = time.monotonic()
        if f.saved == state or (not force and now - f.saved_at < CHECKPOINT_EVERY_S):
            return
        at = self.clock_ms()
        try:
            await anyio.to_thread.run_sync(lambda: _save_checkpoint(root, cp, at))
        except OSError as exc:
            f.log.last_error = f"checkpoint not written: {exc}"
            return
        f.saved, f.saved_at = state, now

    # ---- a compaction ---------------------------------------------------------------

    async def _archive(self, f: Followed, found: Found) -> bool:
        """Send the compaction through the dispatcher; True once it is settled (archived,
        or refused for good), False to try again later."""
        tl = f.log
        if not tl.cp.session.get("id"):
            tl.last_error = "no v4 session header: its compactions are skipped"
            return True
        shadowed = await anyio.to_thread.run_sync(
            tl.shadowed, found, self._stop.is_set, limiter=self._readers
        )
        answer = await self._call(
            {"session": tl.cp.session, "event": found.event, "shadowed": shadowed}
        )
        error = answer.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            tl.last_error = f"session/event {code}: {error.get('message')}"
            f.attempts += 1
            if code in RETRIED or (code == INTERNAL_ERROR and f.attempts < MAX_INTERNAL_ERRORS):
                return False
            log.warning("compaction skipped", path=str(tl.path), error=tl.last_error)
            f.attempts = 0
            return True
        result = answer.get("result") or {}
        if result.get("outcome") == "failed":
            tl.last_error = "passive archive not committed (see the daemon log): retrying"
            return False
        f.attempts = 0
        f.compactions += 1
        f.folders += len(result.get("folders") or [])
        tl.last_error = None
        return True

    async def _call(self, params: dict[str, Any]) -> dict[str, Any]:
        """One ``session/event`` through the dispatcher (the session's lane), with an id
        so that its answer says when the archive is durable."""
        done = anyio.Event()
        box: dict[str, Any] = {}

        async def reply(response: dict[str, Any]) -> None:
            box.update(response)
            done.set()

        call = Call("session/event", params, f"tailer-{next(self._ids)}", True)
        self.dispatcher.submit(call, self._conn, reply)
        with anyio.move_on_after(self.request_timeout + 5):
            await done.wait()
        if not done.is_set():
            return {"error": {"code": INTERNAL_ERROR, "message": "no answer in time"}}
        return box

    # ---- status ---------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``status.tailer``: the directory, whether it is watched, each log's offset,
        size, lag (bytes not read yet) and last error."""
        files = [f.status() for _, f in sorted(self.files.items())]
        return {
            "enabled": True,
            "dir": str(self.root),
            "watching": self.watching,
            "lag": sum(f["lag"] for f in files),
            "lastError": self.last_error,
            "files": files,
        }


def _subdirs(path: Path) -> list[Path]:
    try:
        with os.scandir(path) as it:
            return [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _save_checkpoint(root: Path, cp: Checkpoint, now_ms: int) -> None:
    """Save, making ``root`` first if the memory root does not exist yet."""
    if not root.is_dir():
        fs.mkdir(root)
    save_checkpoint(root, cp, now_ms)
