"""The searchable text of a stored folder, as the relevance index reads it.

It is what heuristic scoring reads (`engine.scoring.fallback.heuristic_text`): the
readable conversation (user and assistant text, QQ payloads as `sender: text`, tool
output and protocol text left out) without its role tags, else every text of the
folder. Tool output stays out on purpose: a 40 kB JSON dump would drown the turns
that say what was decided.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.scoring.fallback import heuristic_text
from engine.store import SessionStore, StoreError

__all__ = ["store_text_of"]


def store_text_of(store: SessionStore) -> Callable[[str], str]:
    """`text_of(folder_id)` over `store` (blocking: reads `context.json`); a folder that
    cannot be read has no text, so it is found by its keywords and title only."""

    def text_of(folder_id: str) -> str:
        try:
            messages = store.read_context(folder_id)
        except (StoreError, OSError, ValueError):
            return ""
        return heuristic_text(messages)

    return text_of
