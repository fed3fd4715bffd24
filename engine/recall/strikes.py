"""memory_recall's consecutive misses within one turn (reference §1.3 "连续未命中升级").

The model may keep guessing keywords for a memory that is not there (or whose α is too
low). The third consecutive miss of a turn adds a warning to the result; the sixth
disables the tool for the rest of the turn: that call and every later one in the turn
are errors. The next real user message (a new turn) restores the tool, and any call
that finds something clears the count.

What counts is a keyword miss: the keywords matched nothing. A page past the end, a
search whose matches are all in the block already, a call that only carried filters
this version does not support, a miss caused by time / event / tag constraints: none
of them say the keywords were wrong, so none of them count. `recall.mode = legacy`
keeps v1.3.0's rule: every search that returns nothing counts (its dice can miss).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CONSTRAINT_MISSES",
    "STRIKES_DISABLE",
    "STRIKES_WARN",
    "RecallStrikes",
    "counts_as_strike",
]

STRIKES_WARN = 3
STRIKES_DISABLE = 6

_LEGACY_STRIKES = frozenset({"keyword", "excluded", "chance"})
"""legacy: every search that came back empty (recall off, a bad page or unreadable
folders are not searches that missed)."""


CONSTRAINT_MISSES = frozenset({"time", "time-tag", "event", "event-ambiguous", "tag"})
"""Misses of a constraint, never strikes in any mode (§1.3: "都不计 strike"): the keywords
matched, or the call asked something only the model or the user can settle."""


def counts_as_strike(mode: str, found: int, miss_type: str | None) -> bool:
    """Whether a search that found `found` entries (miss `miss_type`) is a strike."""
    if found > 0 or miss_type in CONSTRAINT_MISSES:
        return False
    if mode == "legacy":
        return miss_type in _LEGACY_STRIKES
    return miss_type == "keyword"


@dataclass
class RecallStrikes:
    """The consecutive misses of the current turn and whether the tool is off for it."""

    misses: int = 0
    disabled: bool = False

    def reset(self) -> None:
        """A real user message (a new turn) or a hit."""
        self.misses = 0
        self.disabled = False

    def record(self, mode: str, found: int, miss_type: str | None) -> int:
        """Count one search: a hit clears, a strike adds one (the sixth disables).
        Returns the consecutive misses after it."""
        if found > 0:
            self.reset()
        elif counts_as_strike(mode, found, miss_type):
            self.misses += 1
            if self.misses >= STRIKES_DISABLE:
                self.disabled = True
        return self.misses

    @property
    def warn(self) -> bool:
        """The result carries the third-miss warning (3rd to 5th miss)."""
        return STRIKES_WARN <= self.misses < STRIKES_DISABLE
