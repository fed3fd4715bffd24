"""The searchable text of a stored folder, as the relevance index reads it.

It is what heuristic scoring reads (`engine.scoring.fallback.heuristic_text`): the
readable conversation (user and assistant text, QQ payloads as `sender: text`, tool
output and protocol text left out) without its role tags, else every text of the
folder. Tool output stays out on purpose: a 40 kB JSON dump would drown the turns
that say what was decided.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.relevance.index import RelevanceIndex
from engine.scoring.fallback import heuristic_text
from engine.store import CorruptFolder, CorruptFolderError, SessionStore, StoreError

__all__ = ["FolderTexts", "synced_index"]


class FolderTexts:
    """`text_of(folder_id)` over `store` (blocking: reads `context.json`).

    A folder that cannot be read has no text, so it is found by its keywords and title
    only; it is remembered until `take_unreadable`, so the caller can report it (the
    index reads each folder once, so each is reported once per index).
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._unreadable: list[CorruptFolder] = []

    def __call__(self, folder_id: str) -> str:
        try:
            messages = self.store.read_context(folder_id)
        except CorruptFolderError as exc:
            self._unreadable.append(CorruptFolder(folder_id, exc.reason))
            return ""
        except (StoreError, OSError, ValueError):
            return ""
        return heuristic_text(messages)

    def take_unreadable(self) -> list[CorruptFolder]:
        """The folders found unreadable since the last call."""
        out, self._unreadable = self._unreadable, []
        return out


def synced_index(
    cached: RelevanceIndex | None, store: SessionStore, extra_stopwords: Sequence[str]
) -> tuple[RelevanceIndex, list[CorruptFolder]]:
    """`cached` brought to `store`'s current version, synced in place; a new index when
    there is none, or it was built for another store or other `keywords.extraStopwords`.
    Also returns the folders this sync could not read. Blocking: the first build reads
    every scored folder's text."""
    extra = tuple(extra_stopwords)
    key = (id(store), store.version, extra)
    if cached is not None and cached.version == key:
        return cached, []
    if (
        cached is None
        or cached.extra_stopwords != extra
        or not isinstance(cached.version, tuple)
        or cached.version[0] != id(store)
        or not isinstance(cached.text_of, FolderTexts)
    ):
        cached = RelevanceIndex(FolderTexts(store), extra_stopwords=extra)
    cached.sync(store.index, key)
    texts = cached.text_of
    return cached, texts.take_unreadable() if isinstance(texts, FolderTexts) else []
