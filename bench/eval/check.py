"""Reading a recall block: is the evidence in it, how many memories does it hold.

Why text matching: the block renders the archived messages verbatim (``user: Mina: …``,
one message a line), so a fact's unique surface string is in the block exactly when its
evidence message was recalled. Whitespace is normalised on both sides, since the
archive may re-flow it; nothing else is, so a near miss does not count.
"""

from __future__ import annotations

ENTRY_HEADING = "### 回忆"
"""Every recalled memory starts with this heading (``### 回忆 N · 归档于 …``)."""


def normalise(text: str) -> str:
    """Collapse every run of whitespace to one space."""
    return " ".join(text.split())


def evidence_found(block: str, surface: str) -> bool:
    """True when ``surface`` occurs in ``block`` (whitespace-normalised)."""
    needle = normalise(surface)
    return bool(needle) and needle in normalise(block)


def block_entries(block: str) -> int:
    """How many memories the block holds (its entry headings)."""
    return sum(1 for line in block.splitlines() if line.startswith(ENTRY_HEADING))


def entry_chars(block: str) -> int:
    """Characters of the block's entries (without the fixed heading and preamble)."""
    at = block.find(ENTRY_HEADING)
    return 0 if at < 0 else len(block) - at
