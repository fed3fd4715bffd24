"""What the user asked this session's recall to leave alone: `memory-control.json`.

Beyond the reference (README "Forgetting"). Two facts, both the user's decisions, so both
survive a restart:

* suppressed memories: kept on disk (the reference's "never lose a word" holds), never
  recalled again in this session, by automatic recall, `memory_recall` or hops. Recall
  sees the store through :func:`visible_entries`, the one place the filter lives;
* the pause of recall injection: while set, no round runs and the recall block renders
  to nothing (the block itself is kept and comes back on resume).

Deleted memories need no record here: they are gone from the store.

The file is small and written atomically; a file that cannot be used is moved aside
(``.corrupt-<mtime>``), never silently overwritten, and the state starts empty: the
caller reports it, since the memories it hid are visible again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from engine import jsonio
from engine.jsonio import CorruptJSONError, read_json, write_json_atomic

__all__ = ["HYGIENE_FILE", "Hygiene", "visible_entries"]

HYGIENE_FILE = "memory-control.json"

E = TypeVar("E")


def visible_entries(entries: Sequence[E], hidden: frozenset[str]) -> Sequence[E]:
    """The index entries recall may see: all but the suppressed ones (entries have an
    ``id``). The same object when nothing is hidden, so caches keyed on it hold."""
    if not hidden:
        return entries
    return tuple(e for e in entries if getattr(e, "id", None) not in hidden)


@dataclass
class Hygiene:
    """One session's suppressed memories and recall pause (module docstring)."""

    path: Path | None = None
    suppressed: dict[str, int] = field(default_factory=dict)
    """Folder id -> when it was suppressed (epoch ms)."""
    paused_at: int | None = None
    """When recall injection was paused (epoch ms); None: not paused."""
    discarded: str | None = None
    """Why the file on disk could not be used (it was moved aside), once, for the caller."""

    @property
    def paused(self) -> bool:
        return self.paused_at is not None

    def hidden(self) -> frozenset[str]:
        return frozenset(self.suppressed)

    def suppress(self, folder_ids: Iterable[str], now_ms: int) -> list[str]:
        """Suppress these memories; returns the ones not suppressed before."""
        new = [fid for fid in dict.fromkeys(folder_ids) if fid not in self.suppressed]
        for fid in new:
            self.suppressed[fid] = now_ms
        return new

    def drop(self, folder_ids: Iterable[str]) -> None:
        """Forget the records of memories that no longer exist (deleted)."""
        gone = [fid for fid in folder_ids if fid in self.suppressed]
        for fid in gone:
            del self.suppressed[fid]

    def pause(self, now_ms: int) -> bool:
        """Pause recall injection; False when it already was."""
        if self.paused_at is not None:
            return False
        self.paused_at = now_ms
        return True

    def resume(self) -> bool:
        """Resume recall injection; False when it was not paused."""
        if self.paused_at is None:
            return False
        self.paused_at = None
        return True

    # -- persistence -----------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "suppressed": [{"id": fid, "at": at} for fid, at in self.suppressed.items()],
            "recallPaused": None if self.paused_at is None else {"at": self.paused_at},
        }

    @classmethod
    def from_json(cls, doc: Any, path: Path | None = None) -> Hygiene:
        state = cls(path=path)
        if not isinstance(doc, dict):
            return state
        for row in doc.get("suppressed") or []:
            if isinstance(row, dict) and isinstance(row.get("id"), str):
                at = row.get("at")
                state.suppressed[row["id"]] = at if isinstance(at, int) else 0
        paused = doc.get("recallPaused")
        if isinstance(paused, dict):
            at = paused.get("at")
            state.paused_at = at if isinstance(at, int) else 0
        return state

    @classmethod
    def load(cls, path: Path) -> Hygiene:
        """Read the file (missing: an empty state; unusable: moved aside, see module
        docstring). An unreadable file (permissions, I/O) raises its ``OSError``."""
        try:
            doc = read_json(path)
        except FileNotFoundError:
            return cls(path=path)
        except CorruptJSONError as exc:
            return cls(path=path, discarded=_keep_aside(path, f"not JSON: {exc.reason}"))
        if not isinstance(doc, dict):
            return cls(path=path, discarded=_keep_aside(path, "not a JSON object"))
        return cls.from_json(doc, path)

    def save(self) -> None:
        """Write the file atomically and durably."""
        if self.path is not None:
            write_json_atomic(self.path, self.to_json())


def _keep_aside(path: Path, reason: str) -> str:
    try:
        stamp = datetime.fromtimestamp(path.lstat().st_mtime, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
        target = path.with_name(f"{path.name}.corrupt-{stamp}")
        jsonio.fs.replace(path, target)
        jsonio.fs.fsync_dir(path.parent)
    except OSError as exc:
        return f"{reason} (not moved aside: {exc.strerror or exc})"
    return f"{reason} (kept as {target.name})"
