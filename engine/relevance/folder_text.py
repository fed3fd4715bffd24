"""The searchable text of a stored folder, as the relevance index reads it.

It is what heuristic scoring reads (`engine.scoring.fallback.heuristic_text`): the
readable conversation (user and assistant text, QQ payloads as `sender: text`, tool
output and protocol text left out) without its role tags, else every text of the
folder. Tool output stays out on purpose: a 40 kB JSON dump would drown the turns
that say what was decided.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.relevance.index import RelevanceIndex
from engine.scoring.fallback import heuristic_text
from engine.store import SessionStore, StoreError

__all__ = ["store_text_of", "synced_index"]


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


def synced_index(
    cached: RelevanceIndex | None, store: SessionStore, extra_stopwords: Sequence[str]
) -> RelevanceIndex:
    """`cached` brought to `store`'s current version, synced in place; a new index when
    there is none, or it was built for another store or other `keywords.extraStopwords`.
    Blocking: the first build reads every scored folder's text."""
    extra = tuple(extra_stopwords)
    key = (id(store), store.version, extra)
    if cached is not None and cached.version == key:
        return cached
    if (
        cached is None
        or cached.extra_stopwords != extra
        or not isinstance(cached.version, tuple)
        or cached.version[0] != id(store)
    ):
        cached = RelevanceIndex(store_text_of(store), extra_stopwords=extra)
    cached.sync(store.index, key)
    return cached
