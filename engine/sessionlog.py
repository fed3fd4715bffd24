"""Reading DSH v4 session logs (PROTOCOL.md §5), plain or as concatenated zstd frames.

A `session.v4.jsonl.zstd` file is a sequence of independent zstd frames, one
per durable append batch, each holding whole JSON lines; the host appends
frames while we read. So a reader must (1) stop cleanly at a torn final frame,
taking only the complete lines it already holds, and (2) resume later without
duplicating anything. The resume point is the byte offset of the frame being
read plus how many of its lines were already consumed: when the torn frame is
completed, it is decompressed again from its start and the consumed lines are
skipped. Plain `.jsonl` logs use the byte offset of the last complete line.

:class:`LogScanner` streams a log from an open file (or ``io.BytesIO``) one chunk at a
time, so a 1 GB log is read in the memory of a chunk, what it decompresses to and one
partial line; each event comes with the resume points before and after it. The
``read_*`` functions are the same reader over bytes already in memory.

Synchronous and deterministic: a file object in, events out; nothing is written.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class LogPosition:
    """Where reading resumes: a frame (or line) start offset and lines already taken from it."""

    offset: int = 0
    lines_consumed: int = 0


@dataclass
class LogChunk:
    """What one read produced."""

    events: list[dict[str, Any]] = field(default_factory=list)
    position: LogPosition = field(default_factory=LogPosition)
    frames: int = 0
    torn: bool = False
    bad_lines: list[str] = field(default_factory=list)


def is_zstd(data: bytes) -> bool:
    """True when the data starts with a zstd frame."""
    return data[:4] == ZSTD_MAGIC


READ_CHUNK = 64 * 1024
"""Bytes read from the file per step. Memory while streaming is this chunk, what it
decompresses to, and the current partial line: never the file."""


class BinaryReader(Protocol):
    """What the scanner needs of a file: an open binary file, or ``io.BytesIO``."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


@dataclass(frozen=True, slots=True)
class LogItem:
    """One event and where it lies: reading from ``at`` yields it first, reading from
    ``after`` yields what follows it (both are resume points a checkpoint may keep)."""

    event: dict[str, Any]
    at: LogPosition
    after: LogPosition


class LogScanner:
    """Streams the events of a log from ``start``, one file chunk at a time.

    Iterating yields :class:`LogItem` in file order. While it runs, ``position`` is the
    resume point after the last item yielded (a caller may stop anywhere and resume
    there later); at the end it is where the next read starts: after the last whole
    frame or line, or at the start of a torn final frame with its complete lines
    counted (``torn``). A corrupt frame stops the scan there (``error``). ``zstd``:
    the form, or ``None`` to tell it by the magic number at the start of the file.
    ``keep_bad_lines``: how many bad-line descriptions to keep (``bad_line_count``
    counts them all); ``None`` keeps every one.
    """

    def __init__(
        self,
        f: BinaryReader,
        start: LogPosition = LogPosition(),
        *,
        zstd: bool | None = None,
        chunk_size: int = READ_CHUNK,
        keep_bad_lines: int | None = None,
    ) -> None:
        self._f = f
        self.start = start
        self.position = start
        self._zstd = zstd
        self._chunk = max(1, chunk_size)
        self._keep_bad = keep_bad_lines
        self.frames = 0
        self.torn = False
        self.error: str | None = None
        self.bad_lines: list[str] = []
        self.bad_line_count = 0

    def _bad(self, why: str) -> None:
        self.bad_line_count += 1
        if self._keep_bad is None or len(self.bad_lines) < self._keep_bad:
            self.bad_lines.append(why)

    def _parse(self, raw: bytes | bytearray) -> dict[str, Any] | None:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self._bad(f"{exc}: {bytes(raw[:80])!r}")
            return None
        if isinstance(value, dict):
            return value
        self._bad(f"not an object: {bytes(raw[:80])!r}")
        return None

    def is_zstd(self) -> bool:
        """The log's form: by the argument, else by the first bytes (of the file, or at
        the start offset)."""
        if self._zstd is None:
            self._f.seek(0)
            head = self._f.read(4)
            if not is_zstd(head) and self.start.offset:
                self._f.seek(self.start.offset)
                head = self._f.read(4)
            self._zstd = is_zstd(head)
        return self._zstd

    def __iter__(self) -> Iterator[LogItem]:
        return self._frames() if self.is_zstd() else self._lines()

    def _lines(self) -> Iterator[LogItem]:
        f = self._f
        base = self.start.offset
        f.seek(base)
        buf = bytearray()
        while data := f.read(self._chunk):
            buf.extend(data)
            pos = 0
            while (nl := buf.find(b"\n", pos)) >= 0:
                raw = buf[pos:nl]
                at = LogPosition(base + pos, 0)
                pos = nl + 1
                self.position = LogPosition(base + pos, 0)
                if raw.strip() and (event := self._parse(raw)) is not None:
                    yield LogItem(event, at, self.position)
            del buf[:pos]
            base += pos
        self.torn = bool(buf)

    def _frames(self) -> Iterator[LogItem]:
        offset = self.start.offset
        skip = self.start.lines_consumed
        while True:
            taken = 0  # non-blank lines of this frame seen so far
            buf = bytearray()
            end: FrameEnd | None = None
            for piece in frame_output(self._f, offset, self._chunk):
                if isinstance(piece, FrameEnd):
                    end = piece
                    break
                buf.extend(piece)
                pos = 0
                while (nl := buf.find(b"\n", pos)) >= 0:
                    raw = buf[pos:nl]
                    pos = nl + 1
                    if raw.strip():
                        taken += 1
                        if taken > skip:
                            self.position = LogPosition(offset, taken)
                            if (event := self._parse(raw)) is not None:
                                yield LogItem(event, LogPosition(offset, taken - 1), self.position)
                del buf[:pos]
            if end is None:  # the file ends where this frame would start
                return
            if end.end is None:
                # torn (only lines that ended with a newline were whole), or corrupt
                if end.error is not None:
                    self.error = end.error
                    self._bad(end.error)
                self.torn = True
                self.position = LogPosition(offset, max(skip, taken))
                return
            self.frames += 1
            if buf.strip():  # a complete frame's last line needs no newline
                taken += 1
                if taken > skip:
                    self.position = LogPosition(end.end, 0)
                    if (event := self._parse(buf)) is not None:
                        yield LogItem(event, LogPosition(offset, taken - 1), self.position)
            offset, skip = end.end, 0
            self.position = LogPosition(offset, 0)


@dataclass(frozen=True, slots=True)
class FrameEnd:
    """How a frame's output ended: ``end`` is the offset just past it; None when the
    file ends inside it (torn) or it is corrupt (``error``)."""

    end: int | None
    error: str | None = None


def frame_output(
    f: BinaryReader, offset: int, chunk_size: int = READ_CHUNK
) -> Iterator[bytes | FrameEnd]:
    """The decompressed bytes of the zstd frame at ``offset``, piece by piece as the file
    is read, then one :class:`FrameEnd`; nothing when the file ends at ``offset``. The
    file must not be moved while this runs."""
    f.seek(offset)
    data = f.read(chunk_size)
    if not data:
        return
    dobj = zstandard.ZstdDecompressor().decompressobj()
    fed = 0
    while data:
        fed += len(data)
        try:
            out = dobj.decompress(data)
        except zstandard.ZstdError as exc:
            yield FrameEnd(None, f"corrupt zstd frame at byte {offset}: {exc}")
            return
        if out:
            yield out
        if dobj.eof:
            yield FrameEnd(offset + fed - len(dobj.unused_data))
            return
        data = f.read(chunk_size)
    yield FrameEnd(None)


@dataclass(frozen=True, slots=True)
class RawFrame:
    """One whole zstd frame: where it lies and what it decompresses to (``end`` None:
    torn or corrupt, ``data`` then holds what could be decompressed)."""

    start: int
    end: int | None
    data: bytes
    error: str | None = None


def iter_frames(
    f: BinaryReader, start: int = 0, chunk_size: int = READ_CHUNK
) -> Iterator[RawFrame]:
    """The frames of a zstd log from ``start``, each whole (a tool rewriting a log frame
    by frame holds one frame at a time), up to a torn or corrupt one included."""
    offset = start
    while True:
        parts: list[bytes] = []
        end: FrameEnd | None = None
        for piece in frame_output(f, offset, chunk_size):
            if isinstance(piece, FrameEnd):
                end = piece
                break
            parts.append(piece)
        if end is None:
            return
        yield RawFrame(offset, end.end, b"".join(parts), end.error)
        if end.end is None:
            return
        offset = end.end


def _chunk(scanner: LogScanner) -> LogChunk:
    chunk = LogChunk(position=scanner.start)
    chunk.events = [item.event for item in scanner]
    chunk.position = scanner.position
    chunk.frames = scanner.frames
    chunk.torn = scanner.torn
    chunk.bad_lines = scanner.bad_lines
    return chunk


def read_plain(data: bytes, start: LogPosition = LogPosition()) -> LogChunk:
    """Complete lines of a `.jsonl` log from `start.offset`; a partial last line waits."""
    return _chunk(LogScanner(io.BytesIO(data), start, zstd=False))


def read_frames(data: bytes, start: LogPosition = LogPosition()) -> LogChunk:
    """Events of every frame from `start`, stopping at a torn (incomplete) final frame.

    The torn frame's complete lines are returned too, and the position then points
    at that frame's start with the number of lines taken, so nothing is read twice.
    """
    return _chunk(LogScanner(io.BytesIO(data), start, zstd=True))


def read_log(data: bytes, start: LogPosition = LogPosition()) -> LogChunk:
    """Read a log whatever its form (zstd frames or plain lines)."""
    if start.offset == 0 and start.lines_consumed == 0 and not data:
        return LogChunk()
    return _chunk(LogScanner(io.BytesIO(data), start))


def expand_seqs(entries: Sequence[int | Sequence[int]]) -> list[int]:
    """`sourceEventSeqs` on disk may compress runs as `[start, end]` (inclusive)."""
    out: list[int] = []
    for entry in entries:
        if isinstance(entry, int):
            out.append(entry)
        elif len(entry) == 2:
            out.extend(range(int(entry[0]), int(entry[1]) + 1))
    return out


def compress_frames(batches: Sequence[Sequence[dict[str, Any]]], level: int = 3) -> bytes:
    """Write events as one zstd frame per batch (the host's format; used by tools and tests)."""
    cctx = zstandard.ZstdCompressor(level=level)
    return b"".join(cctx.compress(b"".join(orjson.dumps(e) + b"\n" for e in b)) for b in batches)
