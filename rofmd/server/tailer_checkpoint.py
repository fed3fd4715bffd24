"""Where the session-log tailer stopped reading each log, kept across restarts.

One small JSON file per log under ``<memory root>/.tailer/`` (named by a digest of the
log's path), written atomically and durably (``engine.jsonio``). It lives beside the
memory it feeds rather than in the state directory: a fresh memory root starts every
log from its first byte again, which is what a fresh memory needs; and the watermark
beside each session's folders (``engine.passive.watermark``) makes a re-read archive
nothing twice, so a checkpoint that lags (it is written at most every
``CHECKPOINT_EVERY_S`` seconds unless an archive was just made) costs time, never a
duplicate.

A checkpoint names the file it belongs to (device and inode, and the id in the log's
header: an inode number can be reused by a new file) and the resume point of
``engine.sessionlog`` (byte offset of the frame or line, lines already taken from a
frame), with the size the file had, so that a file that shrank is known to have been
truncated.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.jsonio import CorruptJSONError, read_json, write_json_atomic
from engine.sessionlog import LogPosition

__all__ = [
    "CHECKPOINT_DIR",
    "Checkpoint",
    "checkpoint_path",
    "load_checkpoint",
    "save_checkpoint",
]

CHECKPOINT_DIR = ".tailer"
VERSION = 1


@dataclass
class Checkpoint:
    """The tailer's position in one log file."""

    path: str
    dev: int = 0
    ino: int = 0
    header_id: str | None = None
    offset: int = 0
    lines: int = 0
    size: int = 0
    zstd: bool | None = None
    session: dict[str, Any] = field(default_factory=dict)
    """The session the header describes (``{"id", "origin"?, …}``, PROTOCOL.md §3)."""

    @property
    def position(self) -> LogPosition:
        return LogPosition(self.offset, self.lines)

    def at(self, position: LogPosition) -> None:
        self.offset, self.lines = position.offset, position.lines_consumed

    def restart(self, dev: int, ino: int) -> None:
        """Another file at this path (rotated, replaced, recreated): read it from 0."""
        self.dev, self.ino = dev, ino
        self.header_id = None
        self.offset = self.lines = self.size = 0
        self.zstd = None
        self.session = {}

    def to_json(self, now_ms: int) -> dict[str, Any]:
        return {
            "version": VERSION,
            "path": self.path,
            "dev": self.dev,
            "ino": self.ino,
            "headerId": self.header_id,
            "offset": self.offset,
            "lines": self.lines,
            "size": self.size,
            "zstd": self.zstd,
            "session": self.session,
            "updatedAt": now_ms,
        }


def checkpoint_path(root: Path, log_path: Path) -> Path:
    """The checkpoint file of ``log_path`` under the memory root ``root``."""
    digest = hashlib.sha256(str(log_path).encode("utf-8", "surrogateescape")).hexdigest()
    return root / CHECKPOINT_DIR / f"{digest[:32]}.json"


def _int(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def load_checkpoint(root: Path, log_path: Path) -> Checkpoint | None:
    """The checkpoint of ``log_path``; None when there is none or it is unreadable (the
    log is then read from its start, which the watermark makes harmless)."""
    try:
        doc = read_json(checkpoint_path(root, log_path))
    except (FileNotFoundError, CorruptJSONError, OSError):
        return None
    if not isinstance(doc, dict) or doc.get("path") != str(log_path):
        return None
    header = doc.get("headerId")
    session = doc.get("session")
    zstd = doc.get("zstd")
    return Checkpoint(
        path=str(log_path),
        dev=_int(doc, "dev"),
        ino=_int(doc, "ino"),
        header_id=header if isinstance(header, str) else None,
        offset=_int(doc, "offset"),
        lines=_int(doc, "lines"),
        size=_int(doc, "size"),
        zstd=zstd if isinstance(zstd, bool) else None,
        session=session if isinstance(session, dict) else {},
    )


def save_checkpoint(root: Path, cp: Checkpoint, now_ms: int) -> None:
    """Write ``cp`` atomically and durably (creating ``.tailer/`` first)."""
    path = checkpoint_path(root, Path(cp.path))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_json_atomic(path, cp.to_json(now_ms))
