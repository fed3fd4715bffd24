"""Checkpoint notes on the final surface of a DSH session log (reference §7, selfcheck
"session logs"; §1.8 note merging).

Why replay the surface: a log keeps every note ever written, while the model sees only
the surface the log's ``surfaceOp`` s leave (``"append"``, or ``{"op": "replace",
"startSeq", "endSeq"}``, whose event takes the place of the nodes it shadows). Each
archive of ours merges the earlier notes of ours into one, so the final surface should
hold at most one note of ours (``engine.texts.ARCHIVE_NOTE_PATTERN``), its N a positive
count, and an appendix (one-shot pinned notices, §1.8 B) free of what the host injects
again anyway. Other compressors' checkpoints are counted and left alone.

Only what the check needs is kept per surface node (its seq, and the text of a
checkpoint), so a long log is replayed in little memory. Pure: events in, findings out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from engine.content import message_text
from engine.passive.events import message_of
from engine.texts import ARCHIVE_NOTE_PATTERN, ARCHIVE_PINNED_APPENDIX

__all__ = ["REINJECTED_MARKERS", "SurfaceNotes", "surface_notes"]

REINJECTED_MARKERS: Final = (
    "Current runtime context",
    "Time sampled",
    "A skill is a reusable set of",
    "## 记忆回忆",
    "<system-reminder>",
)
"""Text the host puts back into every request itself (runtime context, time, the skill
catalog, our recall block, reminders): a note's appendix must never carry it."""

_NOTE = re.compile(ARCHIVE_NOTE_PATTERN)
_APPENDIX_HEAD = ARCHIVE_PINNED_APPENDIX.split("{n}")[0]
CHECKPOINT_KIND = "compact-checkpoint"


@dataclass
class SurfaceNotes:
    """What the final surface of one log holds."""

    session: str | None = None
    """The id the log's header names."""
    events: int = 0
    nodes: int = 0
    own_notes: list[tuple[int, int]] = field(default_factory=list)
    """(seq, N) of each note of ours on the final surface."""
    foreign_checkpoints: int = 0
    bad_counts: list[int] = field(default_factory=list)
    """Seqs of notes of ours whose N is not a positive count."""
    reinjected: list[tuple[int, str]] = field(default_factory=list)
    """(seq, marker) of notes whose appendix carries re-injected host text."""


def _checkpoint_text(event: Mapping[str, Any]) -> str | None:
    if event.get("type") != "user/message":
        return None
    message = message_of(event)
    if message is None:
        return None
    source = message.get("source")
    if not isinstance(source, Mapping) or source.get("kind") != CHECKPOINT_KIND:
        return None
    return message_text(message)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def surface_notes(events: Iterable[Mapping[str, Any]]) -> SurfaceNotes:
    """Replay ``events`` (a log in order, header first) and look at the notes left."""
    out = SurfaceNotes()
    surface: list[tuple[int, str | None]] = []  # (seq, checkpoint text or None)
    for event in events:
        out.events += 1
        if event.get("type") == "session" and out.session is None:
            sid = event.get("id")
            out.session = sid if isinstance(sid, str) else None
            continue
        op = event.get("surfaceOp")
        seq = _int(event.get("seq"))
        if op is None or seq is None:
            continue
        node = (seq, _checkpoint_text(event))
        if isinstance(op, Mapping) and op.get("op") == "replace":
            start, end = _int(op.get("startSeq")), _int(op.get("endSeq"))
            if start is None or end is None:
                surface.append(node)
                continue
            at = next((i for i, (s, _) in enumerate(surface) if s >= start), len(surface))
            surface[:] = [n for n in surface if not start <= n[0] <= end]
            surface.insert(min(at, len(surface)), node)
        else:
            surface.append(node)
    out.nodes = len(surface)
    for seq, text in surface:
        if text is None:
            continue
        m = _NOTE.match(text)
        if m is None:
            out.foreign_checkpoints += 1
            continue
        n = int(m.group(1))
        out.own_notes.append((seq, n))
        if n <= 0:
            out.bad_counts.append(seq)
        _, sep, appendix = text.partition(_APPENDIX_HEAD)
        if sep:
            for marker in REINJECTED_MARKERS:
                if marker in appendix:
                    out.reinjected.append((seq, marker))
    return out
