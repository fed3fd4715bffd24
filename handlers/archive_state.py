"""Per-session archive state kept in memory (reference §1.1 step 3, §1.1.1).

What survives between pre-steps of one session: the pressure-episode counter and the
hard-limit stop, the warn-once flags (small / fake window), and the archives whose
replacement the host has not reported yet (by token), with what ``archive/abort``
needs to undo them. Lost on restart by design: an unreported archive is then simply
kept ("data is never dropped on a maybe"), its journal finalized by store recovery.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_UNREPORTED", "ArchiveState", "PendingArchive"]

MAX_UNREPORTED = 16
"""Unreported archives remembered per session; older ones are kept and finalized."""


@dataclass
class PendingArchive:
    """An archive answered to the host but not yet committed or aborted."""

    token: str
    folders: list[str]
    written: list[str]
    shadowed_seqs: frozenset[int]
    compaction: dict[str, Any]
    recall_snapshot: object | None = None
    recall: Any = None
    """The recall state object the snapshot was taken from (restored into that one)."""
    rescore_marked: list[str] = field(default_factory=list)


@dataclass
class ArchiveState:
    """Archive guards and unreported archives of one session."""

    pressure_failures: int = 0
    hard_stopped: bool = False
    warned: set[str] = field(default_factory=set)
    pending: dict[str, PendingArchive] = field(default_factory=dict)
    tokens_issued: int = 0

    def warn_once(self, key: str) -> bool:
        """True the first time ``key`` is warned in this session."""
        if key in self.warned:
            return False
        self.warned.add(key)
        return True

    def unlanded(self, surface_seqs: set[int]) -> PendingArchive | None:
        """An unreported archive whose span is still on the surface (its replacement has
        not landed): a replayed pre-step gets the same compaction again."""
        for pend in self.pending.values():
            if pend.shadowed_seqs and pend.shadowed_seqs <= surface_seqs:
                return pend
        return None

    def remember(self, pend: PendingArchive) -> list[PendingArchive]:
        """Track ``pend``; returns the oldest archives dropped to stay under the cap."""
        self.pending[pend.token] = pend
        dropped: list[PendingArchive] = []
        while len(self.pending) > MAX_UNREPORTED:
            oldest = next(iter(self.pending))
            dropped.append(self.pending.pop(oldest))
        return dropped
