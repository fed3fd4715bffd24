"""What one kind of recall constraint (time, event, tags) hands to memory_recall's search.

The reference composes its filters by intersection: C(Q) ∩ W ∩ E ∩ tags (§1.10, §1.12,
§1.13.2: OR within a kind, AND across kinds and with the keywords). Each kind resolves
its own arguments in its own module (`engine.recall.events`, `engine.recall.tags`, the
time module) into one `Constraint`; `engine.recall.search` intersects their `allowed`
sets and, when the keywords matched something that the constraints filtered away
entirely, names the miss after the first constraint (in the order given) that emptied
it, so the model learns which constraint to question and no strike is counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Constraint", "combined_allowed", "filter_counts"]


@dataclass(frozen=True, slots=True)
class Constraint:
    """One kind's resolved constraint and what the answer says about it."""

    kind: str
    """"time", "event", "tag", …: the key of `SearchPage.filtered`."""
    allowed: frozenset[str] | None = None
    """The folder ids it allows; None: it does not restrict this call."""
    miss_type: str = ""
    """The missType of a call whose candidates it filtered away entirely."""
    stop: str | None = None
    """A missType that ends the call before any search (an ambiguous or unknown event:
    the reference returns no memories then, whatever the keywords match)."""
    lines: tuple[str, ...] = ()
    """Answer lines, after the count line (e.g. 本次回忆已约束事件：…)."""
    miss_line: str = ""
    """The line of an answer whose candidates it filtered away (its `miss_type`)."""
    warnings: tuple[str, ...] = ()
    value: Mapping[str, Any] = field(default_factory=dict)
    """Fields of the tool's structured value (`eventInfo`, `tagInfo`, …)."""
    record: Mapping[str, Any] = field(default_factory=dict)
    """Fields of the `recall` telemetry record (`eventStatus`, `eventLabel`, …)."""


def combined_allowed(constraints: Iterable[Constraint]) -> frozenset[str] | None:
    """The intersection of every restricting constraint's set (None: none restricts)."""
    out: frozenset[str] | None = None
    for c in constraints:
        if c.allowed is not None:
            out = c.allowed if out is None else out & c.allowed
    return out


def filter_counts(
    constraints: Sequence[Constraint], candidates: Iterable[str]
) -> tuple[dict[str, int], str | None]:
    """Apply the constraints in order to the keyword candidates: how many each removed
    (by kind), and the missType of the first one that left none (None: some remain, or
    there were none to begin with)."""
    left = set(candidates)
    removed: dict[str, int] = {}
    emptied: str | None = None
    for c in constraints:
        if c.allowed is None:
            continue
        before = len(left)
        left &= c.allowed
        removed[c.kind] = removed.get(c.kind, 0) + before - len(left)
        if before and not left and emptied is None:
            emptied = c.miss_type or c.kind
    return removed, emptied
