"""What the relevance index tests index: an index entry with the fields it reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class E:
    """An index entry as the relevance index sees one (`engine.store.IndexEntry` has
    these fields and more)."""

    id: str
    alpha: float = 0.5
    createdAt: int = 0
    keywords: tuple[str, ...] = ()
    title: str = ""
    scored: bool = True
    persons: tuple[str, ...] | None = None
    events: tuple[str, ...] | None = None
    locations: tuple[str, ...] | None = None
