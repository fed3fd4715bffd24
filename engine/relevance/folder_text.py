"""The searchable text of a stored folder, as the relevance index reads it, and the
session's index kept in step with its store (and on disk, as a snapshot).

The text is what heuristic scoring reads (`engine.scoring.fallback.heuristic_text`): the
readable conversation (user and assistant text, QQ payloads as `sender: text`, tool
output and protocol text left out) without its role tags, else every text of the
folder. Tool output stays out on purpose: a 40 kB JSON dump would drown the turns
that say what was decided.

The snapshot (`engine.relevance.snapshot`) lives in the session directory as
:data:`SNAPSHOT_NAME`, a dot-file: the store, its recovery and every listing take only
`mem-…` directories for folders and leave dot-files alone, and recovery removes the
temp file a crashed write leaves (`engine.jsonio.is_temp_name`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from engine.relevance.index import RelevanceIndex
from engine.relevance.snapshot import SnapshotError, read_snapshot, write_snapshot
from engine.scoring.fallback import heuristic_text
from engine.store import CorruptFolder, CorruptFolderError, SessionStore, StoreError

__all__ = [
    "SNAPSHOT_NAME",
    "FolderTexts",
    "restored_index",
    "save_index",
    "snapshot_due",
    "snapshot_path",
    "stamp_source",
    "synced_index",
    "text_version",
]

SNAPSHOT_NAME = ".relevance-index.snapshot"
SNAPSHOT_MIN_DOCS = 256
"""Below this many folders no snapshot is written: a build reads them in well under the
time a restart may take (about 0.4 ms a folder), and a small session leaves no file."""
SNAPSHOT_MIN_CHANGES = 512
SNAPSHOT_CHANGE_SHARE = 32
"""While a session is loaded, its snapshot is rewritten once this many changes (and a
1/32 of its folders) piled up since the last: a crash then costs at most that many
re-reads on the next start, and archiving never rewrites it on every archive."""

_PROBE_MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "星港项目的网关端口是多少？"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Port 8080, decided."},
            {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": "{}"},
        ],
    },
    {"role": "tool", "toolCallId": "c1", "content": [{"type": "text", "text": '{"a": 1}'}]},
]


@functools.cache
def text_version() -> str:
    """What a folder's text is made of, by example: the text of a probe folder (a
    snapshot made from texts made otherwise is another version's)."""
    return heuristic_text(_PROBE_MESSAGES)


class FolderTexts:
    """`text_of(folder_id)` over `store` (blocking: reads `context.json`).

    A folder that cannot be read has no text (None), so it is found by its keywords and
    title only; it is remembered until `take_unreadable`, so the caller can report it
    (the index reads each folder once, so each is reported once per index).
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.reads = 0
        """Folders read (a restored index reads only those that changed)."""
        self._unreadable: list[CorruptFolder] = []

    def __call__(self, folder_id: str) -> str | None:
        self.reads += 1
        try:
            messages = self.store.read_context(folder_id)
        except CorruptFolderError as exc:
            self._unreadable.append(CorruptFolder(folder_id, exc.reason))
            return None
        except (StoreError, OSError, ValueError):
            return None
        return heuristic_text(messages)

    def take_unreadable(self) -> list[CorruptFolder]:
        """The folders found unreadable since the last call."""
        out, self._unreadable = self._unreadable, []
        return out


def snapshot_path(store: SessionStore) -> Path:
    """Where the snapshot of `store`'s index lives."""
    return store.dir / SNAPSHOT_NAME


def _owner(store: SessionStore) -> str:
    """The store a snapshot belongs to: its directory (a copy in another session's
    directory is another store's; sessions sharing the global layout share one)."""
    return str(store.dir)


def restored_index(
    store: SessionStore, extra_stopwords: Sequence[str]
) -> tuple[RelevanceIndex | None, str | None]:
    """The index of `store`'s snapshot, to be synced before use, or None and why not
    (None and None: there is none). Blocking."""
    try:
        index = read_snapshot(
            snapshot_path(store),
            FolderTexts(store),
            owner=_owner(store),
            extra_stopwords=extra_stopwords,
            text_version=text_version(),
            source=store.loaded_from,
        )
    except FileNotFoundError:
        return None, None
    except (SnapshotError, OSError) as exc:
        return None, str(exc)
    return index, None


def save_index(index: RelevanceIndex) -> int | None:
    """Write the snapshot of an index kept over a store's folders (`synced_index`);
    returns its size, None when it is not one or its store has no directory. Blocking;
    raises OSError when the disk refuses."""
    texts = index.text_of
    if not isinstance(texts, FolderTexts) or not texts.store.materialized:
        return None
    store = texts.store
    return write_snapshot(
        snapshot_path(store),
        index,
        owner=_owner(store),
        text_version=text_version(),
        source=functools.partial(stamp_source, store),
    )


def stamp_source(store: SessionStore, index: RelevanceIndex) -> str | None:
    """`store.loaded_from` when `index` is synced to the store's entries as opened (the
    store's stamp of them: `engine.relevance.snapshot.write_snapshot`); else None. Its
    version is read first: a store still as opened after that was so at that version."""
    version = store.version
    source = store.loaded_from
    if source is None or index.version != (id(store), version, index.extra_stopwords):
        return None
    return source


def snapshot_due(index: RelevanceIndex, *, unloading: bool = False) -> bool:
    """Whether a snapshot of `index` is worth writing now: it is large enough and holds
    unsaved changes, and it never had one, or is being unloaded (eviction,
    `agent/disposed`, shutdown), or enough changes piled up."""
    if index.docs < SNAPSHOT_MIN_DOCS or not index.unsaved:
        return False
    if unloading or not index.saved:
        return True
    return index.unsaved >= max(SNAPSHOT_MIN_CHANGES, index.docs // SNAPSHOT_CHANGE_SHARE)


def synced_index(
    cached: RelevanceIndex | None, store: SessionStore, extra_stopwords: Sequence[str]
) -> tuple[RelevanceIndex, list[CorruptFolder]]:
    """`cached` brought to `store`'s current version, synced in place; when there is
    none, or it was built for another store or other `keywords.extraStopwords`, the
    store's snapshot synced (reading only the folders that changed since it was written),
    else a new index. Also returns the folders this sync could not read. Blocking: a
    build without a snapshot reads every scored folder's text."""
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
        restored, _ = restored_index(store, extra)
        if restored is not None:
            try:
                restored.sync(store.index, key)
            except ValueError:  # its stored keys did not fit its documents after all
                restored = None
        if restored is None:
            restored = RelevanceIndex(FolderTexts(store), extra_stopwords=extra)
        cached = restored
    if cached.version != key:
        cached.sync(store.index, key)
    texts = cached.text_of
    return cached, texts.take_unreadable() if isinstance(texts, FolderTexts) else []
