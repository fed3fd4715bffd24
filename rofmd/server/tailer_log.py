"""One followed session log: its file, its checkpoint, and the reading itself.

Everything here runs in a worker thread (``rofmd.server.tailer`` calls it through
``anyio.to_thread``), one call at a time per log, and every call is bounded: a read step
covers at most ``STEP_BYTES`` of the file, and the longer scans (rebuilding the seq index
after a restart) stop as soon as the tailer is stopped.

What a step reads: the header (the session), the seq of each event (:class:`SeqIndex`)
and the first ``compaction/summary`` of another provider, where it stops. The
checkpoint then points at that compaction until the tailer says its archive is
durable. Rotation and truncation are reconciled when the file is opened and at its end
(see ``rofmd.server.tailer``'s docstring).
"""

from __future__ import annotations

import bisect
import contextlib
import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from engine.passive import compaction_of
from engine.passive.events import ARCHIVED_TYPES
from engine.sessionlog import LogPosition, LogScanner, is_zstd
from rofmd.server.tailer_checkpoint import Checkpoint

__all__ = ["INDEX_STRIDE", "STEP_BYTES", "Found", "SeqIndex", "Step", "Stopped", "TailedLog"]

STEP_BYTES = 4 * 1024 * 1024
"""File bytes one read step covers at most."""
INDEX_STRIDE = 256 * 1024
"""File bytes between two resume points of the seq index."""
STOP_CHECK_EVERY = 1024
"""Events between two looks at the stop flag in a long scan."""


class Stopped(Exception):
    """The tailer stopped during a long scan (nothing was changed)."""


def before(a: LogPosition, b: LogPosition) -> bool:
    """``a`` is an earlier resume point than ``b``."""
    return (a.offset, a.lines_consumed) < (b.offset, b.lines_consumed)


def _seq(event: dict[str, Any]) -> int | None:
    seq = event.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


class SeqIndex:
    """Sparse resume points by seq: where to start reading to meet a given seq.

    One entry per ``INDEX_STRIDE`` bytes of the file (a 1 GB log: ~4,000 entries). Seqs
    grow with the file; in a log where they do not, every lookup starts at the file's
    start. ``from_start``: the entries cover the file from its first byte (else from
    where this run began reading it)."""

    def __init__(self, *, from_start: bool) -> None:
        self.seqs = array("q")
        self.offsets = array("q")
        self.lines = array("q")
        self.from_start = from_start
        self.monotonic = True
        self._last_seq = -1

    def note(self, seq: int, at: LogPosition) -> None:
        if seq <= self._last_seq:
            self.monotonic = False
        self._last_seq = max(self._last_seq, seq)
        if not self.offsets or at.offset - self.offsets[-1] >= INDEX_STRIDE:
            self.seqs.append(seq)
            self.offsets.append(at.offset)
            self.lines.append(at.lines_consumed)

    def covers(self, seq: int) -> bool:
        return self.from_start or (bool(self.seqs) and self.seqs[0] <= seq)

    def first(self) -> LogPosition | None:
        return LogPosition(self.offsets[0], self.lines[0]) if self.offsets else None

    def start_for(self, seq: int) -> LogPosition:
        if not self.monotonic:
            return LogPosition()
        i = bisect.bisect_right(self.seqs, seq) - 1
        return LogPosition(self.offsets[i], self.lines[i]) if i >= 0 else LogPosition()

    def prepend(self, head: SeqIndex) -> None:
        """``head`` indexes the part of the file before this index's first entry."""
        self.seqs = head.seqs + self.seqs
        self.offsets = head.offsets + self.offsets
        self.lines = head.lines + self.lines
        self.monotonic = self.monotonic and head.monotonic
        self.from_start = True


@dataclass
class Found:
    """A foreign compaction met while reading, and where it lies."""

    event: dict[str, Any]
    at: LogPosition
    after: LogPosition


@dataclass
class Step:
    """What one read step did."""

    found: Found | None = None
    progressed: bool = False
    more: bool = False
    """Stopped at ``STEP_BYTES``: read on."""
    gone: bool = False
    """No file at the path, none held."""
    note: str | None = None


def foreign_compaction(event: dict[str, Any]) -> bool:
    """A ``compaction/summary`` of another provider that names shadowed seqs."""
    if event.get("type") != "compaction/summary":
        return False
    c = compaction_of(event)
    return c is not None and not c.own and bool(c.seqs)


@dataclass
class TailedLog:
    """One followed log: the reading side (worker threads) and its counters."""

    path: Path
    cp: Checkpoint
    fh: BinaryIO | None = None
    index: SeqIndex = field(default_factory=lambda: SeqIndex(from_start=True))
    torn: bool = False
    frames: int = 0
    last_error: str | None = None

    def read_step(self) -> Step:
        """Read on from the checkpoint, up to a foreign compaction or ``STEP_BYTES``."""
        cp = self.cp
        step = Step(note=self._ensure_open())
        if self.fh is None:
            step.gone = True
            return step
        fh = self.fh
        size = os.fstat(fh.fileno()).st_size
        if size < cp.size:
            step.note = f"truncated ({cp.size} -> {size} bytes): read again from the start"
            self._restart(cp.dev, cp.ino)
        if cp.zstd is None and size >= 4:
            fh.seek(0)
            cp.zstd = is_zstd(fh.read(4))
        start = cp.position
        scanner = LogScanner(fh, start, zstd=cp.zstd, keep_bad_lines=5)
        for item in scanner:
            event = item.event
            if event.get("type") == "session" and item.at == LogPosition():
                self._header(event)
                continue
            seq = _seq(event)
            if seq is not None:
                self.index.note(seq, item.at)
            if foreign_compaction(event):
                step.found = Found(event, item.at, item.after)
                break
            if scanner.position.offset - start.offset >= STEP_BYTES:
                step.more = True
                break
        cp.at(step.found.at if step.found is not None else scanner.position)
        cp.size = size
        self.torn = scanner.torn
        self.frames += scanner.frames
        if scanner.error:
            self.last_error = scanner.error
        elif scanner.bad_line_count:
            self.last_error = f"{scanner.bad_line_count} bad line(s): {scanner.bad_lines[0]}"
        step.progressed = before(start, cp.position) or step.found is not None
        if not step.progressed and not step.more:
            rotated = self._rotated()
            if rotated is not None:
                step.note, step.progressed = rotated, True
        return step

    def shadowed(self, found: Found, stopped: Callable[[], bool]) -> list[dict[str, Any]]:
        """The user and assistant events ``found`` shadowed, read back from the log.
        Memory: those events and one read chunk. After a restart the index is first
        completed from the file's start (once per log and run)."""
        c = compaction_of(found.event)
        assert c is not None and self.fh is not None
        wanted = set(c.seqs)
        low, high = c.seqs[0], c.seqs[-1]
        if not self.index.covers(low):
            head = SeqIndex(from_start=True)
            end = self.index.first()
            for n, item in enumerate(LogScanner(self.fh, LogPosition(), zstd=self.cp.zstd)):
                if end is not None and not before(item.at, end):
                    break
                if n % STOP_CHECK_EVERY == 0 and stopped():
                    raise Stopped
                if (seq := _seq(item.event)) is not None:
                    head.note(seq, item.at)
            self.index.prepend(head)
        out: list[dict[str, Any]] = []
        scanner = LogScanner(self.fh, self.index.start_for(low), zstd=self.cp.zstd)
        for n, item in enumerate(scanner):
            if not before(item.at, found.at):
                break
            if n % STOP_CHECK_EVERY == 0 and stopped():
                raise Stopped
            event = item.event
            seq = _seq(event)
            if seq is None:
                continue
            if self.index.monotonic and seq > high:
                break
            if seq in wanted and event.get("type") in ARCHIVED_TYPES:
                out.append(event)
        return out

    def close(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()
            self.fh = None

    # ---- reconciling the file with the checkpoint ------------------------------------

    def _restart(self, dev: int, ino: int) -> None:
        self.cp.restart(dev, ino)
        self.index = SeqIndex(from_start=True)

    def _header(self, event: dict[str, Any]) -> None:
        cp = self.cp
        sid = event.get("id")
        cp.header_id = sid if isinstance(sid, str) and sid else None
        session: dict[str, Any] = {"id": cp.header_id} if cp.header_id else {}
        for key in ("origin", "delegationDepth", "agentPreset", "cwd"):
            if event.get(key) is not None:
                session[key] = event[key]
        cp.session = session

    def _ensure_open(self) -> str | None:
        """Open the log if it is not, reconciling it with the checkpoint; why it reads
        from somewhere else than the checkpoint says, if it does."""
        if self.fh is not None:
            return None
        cp = self.cp
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return None
        st = os.fstat(fh.fileno())
        if not cp.ino:
            cp.restart(st.st_dev, st.st_ino)
            self.fh = fh
            return None
        if (cp.dev, cp.ino) != (st.st_dev, st.st_ino):
            old = _same_inode(self.path.parent, cp.dev, cp.ino)
            if old is not None:
                # rotated while we were not holding it: finish the old file first
                fh.close()
                self.fh = old
                return "rotated: reading the rest of the previous file first"
            self._restart(st.st_dev, st.st_ino)
            self.fh = fh
            return "replaced by another file: read from the start"
        if cp.header_id is not None and _header_id(fh) not in (cp.header_id, None):
            self._restart(st.st_dev, st.st_ino)
            self.fh = fh
            return "recreated (another session header): read from the start"
        self.fh = fh
        return None

    def _rotated(self) -> str | None:
        """At the end of the held file: another file at the path now? Then switch."""
        assert self.fh is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        held = os.fstat(self.fh.fileno())
        if (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino):
            return None
        self.close()
        self._restart(st.st_dev, st.st_ino)
        return "rotated: following the new file from its start"


def _same_inode(directory: Path, dev: int, ino: int) -> BinaryIO | None:
    """The file of ``directory`` with that device and inode (a rotated log), opened."""
    try:
        with os.scandir(directory) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (dev, ino) and entry.is_file(follow_symlinks=False):
                    return open(entry.path, "rb")
    except OSError:
        return None
    return None


def _header_id(fh: BinaryIO) -> str | None:
    """The id in the log's header line (None: no header readable yet)."""
    for item in LogScanner(fh, LogPosition(), chunk_size=16 * 1024):
        event = item.event
        sid = event.get("id")
        return sid if event.get("type") == "session" and isinstance(sid, str) else None
    return None
