"""Reading DSH v4 session logs (PROTOCOL.md §5), plain or as concatenated zstd frames.

A `session.v4.jsonl.zstd` file is a sequence of independent zstd frames, one
per durable append batch, each holding whole JSON lines; the host appends
frames while we read. So a reader must (1) stop cleanly at a torn final frame,
taking only the complete lines it already holds, and (2) resume later without
duplicating anything. The resume point is the byte offset of the frame being
read plus how many of its lines were already consumed: when the torn frame is
completed, it is decompressed again from its start and the consumed lines are
skipped. Plain `.jsonl` logs use the byte offset of the last complete line.

Pure and synchronous: bytes in, events out; the caller reads the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

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


def _parse_lines(lines: Iterable[bytes], chunk: LogChunk) -> None:
    for raw in lines:
        if not raw.strip():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            chunk.bad_lines.append(f"{exc}: {raw[:80]!r}")
            continue
        if isinstance(value, dict):
            chunk.events.append(value)
        else:
            chunk.bad_lines.append(f"not an object: {raw[:80]!r}")


def read_plain(data: bytes, start: LogPosition = LogPosition()) -> LogChunk:
    """Complete lines of a `.jsonl` log from `start.offset`; a partial last line waits."""
    chunk = LogChunk(position=start)
    end = data.rfind(b"\n")
    if end < start.offset:
        chunk.torn = len(data) > start.offset
        return chunk
    body = data[start.offset : end + 1]
    _parse_lines(body.split(b"\n"), chunk)
    chunk.position = LogPosition(end + 1, 0)
    chunk.torn = end + 1 < len(data)
    return chunk


def read_frames(data: bytes, start: LogPosition = LogPosition()) -> LogChunk:
    """Events of every frame from `start`, stopping at a torn (incomplete) final frame.

    The torn frame's complete lines are returned too, and the position then points
    at that frame's start with the number of lines taken, so nothing is read twice.
    """
    chunk = LogChunk(position=start)
    offset = start.offset
    skip = start.lines_consumed
    while offset < len(data):
        dobj = zstandard.ZstdDecompressor().decompressobj()
        try:
            out = dobj.decompress(data[offset:])
        except zstandard.ZstdError as exc:
            chunk.bad_lines.append(f"corrupt zstd frame at byte {offset}: {exc}")
            chunk.torn = True
            break
        complete = dobj.eof
        lines = out.split(b"\n")
        if not complete:
            # torn: only lines that end with a newline are whole
            lines = lines[:-1]
        whole = [ln for ln in lines if ln.strip()]
        _parse_lines(whole[skip:], chunk)
        if not complete:
            chunk.torn = True
            chunk.position = LogPosition(offset, max(skip, len(whole)))
            return chunk
        chunk.frames += 1
        offset = len(data) - len(dobj.unused_data)
        skip = 0
        chunk.position = LogPosition(offset, 0)
    return chunk


def read_log(data: bytes, start: LogPosition = LogPosition()) -> LogChunk:
    """Read a log whatever its form (zstd frames or plain lines)."""
    if start.offset == 0 and start.lines_consumed == 0 and not data:
        return LogChunk()
    if is_zstd(data[:4]) or (start.offset and is_zstd(data[start.offset : start.offset + 4])):
        return read_frames(data, start)
    return read_plain(data, start)


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
