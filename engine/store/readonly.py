"""A session store as its files say, read without recovery: for tools that must write
nothing (selfcheck, show, search, audit's figures).

Why not :func:`~engine.store.session_store.open_session`: opening a store runs recovery,
which repairs what it finds (removes temp files and staging folders, settles journals,
adopts orphans, rewrites ``index.json``, drops the index log, rebuilds the image table).
That is right for the process that owns the directory and wrong for a tool that looks at
it, perhaps while a daemon serves it: a check must not change what it checks.

:func:`read_store` reads ``index.json`` and replays ``index.log.jsonl`` over it as
recovery does (:mod:`engine.store.indexfile`), including the rule that the rows of the
log's last record, and rows another writer changed under the log, are what their
``meta.json`` says (the metas are written after the log line). The entries are what the
next open would load from the index. What recovery would still have to repair is
reported, not done: unusable or unsafe rows, rows the log leaves at odds with their
meta, journals and staging folders in the directory, temp files, folders on disk that
are not indexed and indexed folders that are gone.

Folders are read through the same parsers the store uses (:mod:`engine.store.folders`);
``get_meta`` / ``read_context`` have the store's names so readers written for a store
(the relevance index's text source) can read through this one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.jsonio import CorruptJSONError, is_temp_name, read_json
from engine.store.errors import CorruptFolderError, FolderNotFoundError
from engine.store.folders import FOLDER_FILES, ReadAhead, read_ahead, read_context, read_meta
from engine.store.ids import is_folder_id, is_safe_name
from engine.store.index_entry import IndexEntry
from engine.store.indexfile import IndexStatus, read_index
from engine.store.layout import JOURNAL_PREFIX, STAGING_PREFIX, SessionPaths
from engine.store.log_replay import replay_log_over
from engine.store.records import FolderMeta, ImageIndexEntry

__all__ = [
    "BadRow",
    "ImageTable",
    "ReadonlyStore",
    "iter_metas",
    "read_image_table",
    "read_store",
]


@dataclass(frozen=True, slots=True)
class BadRow:
    """An ``index.json`` row recovery would drop: its id (None: it names none) and why."""

    folder_id: str | None
    reason: str


@dataclass(frozen=True, slots=True)
class ImageTable:
    """``images/index.json`` as it is: ``missing`` / ``corrupt`` / ``ok``, its valid rows,
    and how many rows were not valid."""

    status: str
    entries: tuple[ImageIndexEntry, ...] = ()
    invalid: int = 0


@dataclass
class ReadonlyStore:
    """What a session directory holds, as read (module docstring)."""

    paths: SessionPaths
    session_id: str
    index_status: IndexStatus = "missing"
    entries: dict[str, IndexEntry] = field(default_factory=dict)
    """Folder id -> its entry, in index order: what the next open would load from the
    index (before adopting orphans or dropping missing folders)."""
    bad_rows: list[BadRow] = field(default_factory=list)
    log_records: int = 0
    log_skipped: int = 0
    """Lines of ``index.log.jsonl`` that could not be read (a crash tore the last one)."""
    log_reread: list[str] = field(default_factory=list)
    """Folders whose logged row differs from what their meta says: the next open
    re-reads them from the meta (what ``entries`` already holds for them)."""
    log_unreadable: list[tuple[str, str]] = field(default_factory=list)
    """(folder, reason) of rows the log names whose meta could not be read."""
    log_conflicts: dict[str, IndexEntry] = field(default_factory=dict)
    """Folders whose ``index.json`` row is not the row the log recorded as its base
    (another writer changed ``index.json``), with that row: the next open re-reads them
    from their meta, while a reader of ``index.json`` alone sees the row."""
    folder_dirs: list[str] = field(default_factory=list)
    """``mem-…`` directories on disk, sorted."""
    journals: list[str] = field(default_factory=list)
    staging: list[str] = field(default_factory=list)
    temp_files: list[str] = field(default_factory=list)

    @property
    def dir(self) -> Path:
        return self.paths.dir

    @property
    def index(self) -> tuple[IndexEntry, ...]:
        """The entries in index order (the store's ``index``)."""
        return tuple(self.entries.values())

    def __len__(self) -> int:
        return len(self.entries)

    def get_meta(self, folder_id: str) -> FolderMeta:
        """``meta.json`` of an indexed folder (:class:`FolderNotFoundError` /
        :class:`CorruptFolderError`, as the store raises)."""
        if folder_id not in self.entries:
            raise FolderNotFoundError(folder_id)
        return read_meta(self.paths, folder_id)

    def read_context(self, folder_id: str, ahead: ReadAhead | None = None) -> list[dict[str, Any]]:
        """The archived messages of an indexed folder (from the file `ahead` opened, if
        it did: `engine.store.folders.read_ahead`)."""
        if folder_id not in self.entries:
            raise FolderNotFoundError(folder_id)
        return read_context(self.paths, folder_id, ahead)

    def read_ahead(
        self, folder_ids: Iterable[str], names: Sequence[str] = FOLDER_FILES
    ) -> ReadAhead:
        """These indexed folders' files (`names`), opened and asked of the disk at once
        (the store's `read_ahead`)."""
        return read_ahead(self.paths, (f for f in folder_ids if f in self.entries), names)

    def orphans(self) -> list[str]:
        """Folders on disk that the index does not name (the next open adopts them, or
        keeps them aside as duplicates of an indexed folder's span)."""
        return [f for f in self.folder_dirs if f not in self.entries]

    def missing(self) -> list[str]:
        """Indexed folders whose directory is gone (the next open drops their rows)."""
        on_disk = set(self.folder_dirs)
        return [f for f in self.entries if f not in on_disk]

    def journal_folders(self) -> set[str]:
        """Folders the journals in the directory name: an archive or a rollback under
        way (or interrupted), whose folders may be on disk and not yet indexed."""
        out: set[str] = set()
        for name in self.journals:
            try:
                doc = read_json(self.paths.dir / name)
            except (CorruptJSONError, OSError):
                continue
            folders = doc.get("folders") if isinstance(doc, dict) else None
            if isinstance(folders, list):
                out.update(f for f in folders if isinstance(f, str))
        return out


def _scan(store: ReadonlyStore) -> None:
    try:
        it = os.scandir(store.paths.dir)
    except FileNotFoundError:
        return
    folders: list[str] = []
    with it:
        for entry in it:
            name = entry.name
            if is_temp_name(name) and entry.is_file(follow_symlinks=False):
                store.temp_files.append(name)
            elif name.startswith(JOURNAL_PREFIX) and name.endswith(".json"):
                store.journals.append(name)
            elif name.startswith(STAGING_PREFIX) and entry.is_dir(follow_symlinks=False):
                store.staging.append(name)
            elif is_folder_id(name) and entry.is_dir(follow_symlinks=False):
                folders.append(name)
    store.folder_dirs = sorted(folders)
    store.journals.sort()
    store.staging.sort()
    store.temp_files.sort()


def _load_index(store: ReadonlyStore) -> None:
    raw, _, status = read_index(store.paths)
    store.index_status = status
    for item in raw:
        item_id = item.get("id") if isinstance(item, dict) else None
        shown = item_id if isinstance(item_id, str) else None
        try:
            entry = IndexEntry.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "row"
            store.bad_rows.append(BadRow(shown, f"{where}: {first['msg']}"))
            continue
        if not is_folder_id(entry.id):
            store.bad_rows.append(BadRow(entry.id, "not a safe folder id"))
            continue
        if entry.id in store.entries:
            store.bad_rows.append(BadRow(entry.id, "indexed twice"))
            continue
        store.entries[entry.id] = entry


def _replay_log(store: ReadonlyStore) -> None:
    """Recovery's replay (`engine.store.log_replay`), in memory."""
    replay = replay_log_over(
        store.paths, store.entries, lambda fid, reason: store.log_unreadable.append((fid, reason))
    )
    store.log_records = len(replay.log.records)
    store.log_skipped = replay.log.skipped
    store.log_conflicts.update(replay.conflicts)
    store.log_reread.extend(replay.reread)


def read_store(paths: SessionPaths, session_id: str) -> ReadonlyStore:
    """Read the store at ``paths`` (module docstring). Opens no file for writing; an
    absent directory reads as an empty store. Raises ``OSError`` for what the file
    system refuses (a directory that cannot be listed)."""
    store = ReadonlyStore(paths, session_id)
    _scan(store)
    _load_index(store)
    _replay_log(store)
    return store


def read_image_table(paths: SessionPaths) -> ImageTable:
    """``images/index.json`` as it is (the store rebuilds a missing or corrupt one when
    it first needs it; this only reads)."""
    try:
        doc = read_json(paths.images_index)
    except FileNotFoundError:
        return ImageTable("missing")
    except (CorruptJSONError, OSError):
        return ImageTable("corrupt")
    rows = doc.get("images") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        return ImageTable("corrupt")
    entries: list[ImageIndexEntry] = []
    invalid = 0
    for row in rows:
        try:
            entry = ImageIndexEntry.model_validate(row)
        except ValidationError:
            invalid += 1
            continue
        if not is_safe_name(entry.name):
            invalid += 1
            continue
        entries.append(entry)
    return ImageTable("ok", tuple(entries), invalid)


def iter_metas(store: ReadonlyStore) -> Iterator[tuple[str, FolderMeta | CorruptFolderError]]:
    """Every folder on disk with its meta, or why it cannot be read."""
    for fid in store.folder_dirs:
        try:
            yield fid, read_meta(store.paths, fid)
        except CorruptFolderError as exc:
            yield fid, exc
