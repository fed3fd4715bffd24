"""The checkpoint note: merging our earlier notes, and the pinned appendix (§1.1, §1.8).

The replacement span starts at the first archived message and extends backwards over
our own earlier notes (their N is added up, their text dropped), over pinned context
and nodes that render to nothing; it stops at a foreign checkpoint, at conversation
and at the system-prompt head node. Inside the final span every non-conversation node
is classified: host re-injected context is dropped silently, one-shot notices, unknown
pinned kinds and (should one fall inside) a foreign checkpoint's text are copied into
the appendix so nothing is lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from engine import texts
from engine.archive.surface import REINJECTED_KINDS, Node

__all__ = ["NoteParts", "classify_span", "extend_backwards", "render_note"]

_REINJECTED_TYPES = frozenset({"system/message", "developer/message"})


def _is_head(node: Node) -> bool:
    return node.pos == 0 and node.type == "system/message"


def extend_backwards(nodes: Sequence[Node], start_pos: int) -> int:
    """The earliest position the span may start at to swallow our notes before it."""
    earliest = start_pos
    i = start_pos - 1
    while i >= 0:
        node = nodes[i]
        if _is_head(node) or node.cls in ("conversation", "foreign-checkpoint"):
            break
        if node.cls == "own-note":
            earliest = i
        i -= 1
    return earliest


@dataclass(slots=True)
class NoteParts:
    """What the non-conversation nodes of a span contribute to the note."""

    merged_segments: int = 0
    merged_notes: int = 0
    appendix: list[tuple[str, str]] = field(default_factory=list)
    pinned_shadowed: int = 0
    dropped: int = 0


def classify_span(nodes: Sequence[Node], start_pos: int, end_pos: int) -> NoteParts:
    """Classify every non-conversation node in ``nodes[start_pos..end_pos]``."""
    parts = NoteParts()
    for node in nodes[start_pos : end_pos + 1]:
        if node.cls == "conversation":
            continue
        if node.cls == "own-note":
            parts.merged_notes += 1
            parts.merged_segments += node.note_count
        elif node.cls == "empty":
            parts.dropped += 1
        elif node.cls == "foreign-checkpoint":
            parts.appendix.append((node.kind or "checkpoint", node.text()))
        else:
            parts.pinned_shadowed += 1
            if node.kind in REINJECTED_KINDS or node.type in _REINJECTED_TYPES:
                parts.dropped += 1
            else:
                parts.appendix.append((node.kind or node.type or "unknown", node.text()))
    return parts


def render_note(total_segments: int, appendix: Sequence[tuple[str, str]]) -> str:
    """The note text: the fixed line, then the appendix of copied notices if any."""
    text = texts.ARCHIVE_NOTE.format(n=total_segments)
    if not appendix:
        return text
    lines = [texts.ARCHIVE_PINNED_APPENDIX.format(n=len(appendix))]
    lines.extend(texts.ARCHIVE_PINNED_ITEM.format(kind=k, text=t) for k, t in appendix)
    return text + "\n\n" + "\n".join(lines)
