"""Rendered recall entries kept between rounds, so a folder is read and rendered once.

Rendering a pick is most of a round's work (reading ``meta.json`` and
``context.json``, annotating every relative time expression of every message), and
the same folders come back round after round as a conversation returns to them. What
an entry's text depends on is its folder's files, the render settings, and, for an
image placeholder, whether the image file exists now. So a rendered entry is kept:

* keyed by its folder's index entry *object*: the store replaces it whenever the
  folder's meta changes (a judge, a rescore, recovery at open), and a folder's
  ``context.json`` is written once, when it is archived; a kept entry holds that
  object, so a match is an identity check that no other object can pass;
* with the render settings it was made under (timezone, time mode, computeDates,
  showTags, week start): another config renders again;
* never for a folder whose messages carry an image placeholder (whether its file
  exists is checked each time the entry is rendered), nor for a folder that could
  not be read (it is read, and reported, every time);
* at most :data:`MAX_ENTRIES` of them, the least recently used going first.

The cache is filled and read by the round itself, in the worker thread the round
runs in; a lock makes it safe for two threads of one session.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.recall.state import Addition

__all__ = ["MAX_ENTRIES", "RenderCache", "RenderedEntry"]

MAX_ENTRIES = 256
"""Entries kept per session (a block holds at most a few dozen; a few kB each)."""


@dataclass(frozen=True, slots=True)
class RenderedEntry:
    """What a folder rendered to, kept apart from every round that shows it."""

    source: object
    """The index entry it was rendered from (compared by identity)."""
    settings: tuple[Any, ...]
    addition: Addition
    """As rendered; only copies of it leave the cache (:func:`_copy`)."""


def _copy(addition: Addition) -> Addition:
    """A copy whose lists are its own: a round may change what it is handed."""
    return replace(addition, keywords=list(addition.keywords), messages=list(addition.messages))


class RenderCache:
    """Rendered entries by folder id, bounded (module docstring)."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, RenderedEntry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, fid: str, source: object, settings: tuple[Any, ...]) -> Addition | None:
        """A copy of what was rendered from this very index entry under these settings
        (the round's own fields, generation, lane, turn and round, as it was rendered
        with), or None."""
        with self._lock:
            kept = self._entries.get(fid)
            if kept is None or kept.source is not source or kept.settings != settings:
                self.misses += 1
                return None
            self._entries.move_to_end(fid)
            self.hits += 1
            return _copy(kept.addition)

    def holds(self, fid: str, source: object, settings: tuple[Any, ...]) -> bool:
        """Whether :meth:`get` would find it (counted as neither a hit nor a miss)."""
        with self._lock:
            kept = self._entries.get(fid)
            return kept is not None and kept.source is source and kept.settings == settings

    def put(self, fid: str, source: object, settings: tuple[Any, ...], addition: Addition) -> None:
        """Keep a copy of `addition`, rendered from `source` under `settings`."""
        with self._lock:
            self._entries[fid] = RenderedEntry(source, settings, _copy(addition))
            self._entries.move_to_end(fid)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
