"""Load-time recovery of a session directory (reference §1.1 v1.4.1, §6 可恢复).

Runs once when a store is opened and is the only code that scans the
directory. It makes the directory consistent again after any crash:

* temp files of interrupted atomic writes and ``.staging-*`` folders (a folder
  is assembled there and renamed into place only when complete) are removed;
* ``index.json`` missing or corrupt → rebuilt from the folders (reported);
  entries that fail validation or repeat an id are dropped (their folder, if
  present, is re-adopted from its meta);
* ``index.log.jsonl`` (rows changed since ``index.json`` was written, see
  :mod:`engine.store.indexfile`) is replayed over it: each logged row applies over
  the row it replaced and is a no-op over itself; a folder whose row is neither (an
  other writer changed ``index.json``) is re-read from its ``meta.json``, and so are
  the folders of the last record, whose metas are written after it (a crash there
  leaves some of them old). A row that had to change is reported as reindexed, and
  the index is then rewritten, which drops the log; a torn line is skipped;
* journals ``.commit-<txn>.json``:
  ``pending`` (crash mid-commit) → complete folders it lists are adopted,
  incomplete ones removed (they were never answered to the host, nothing is
  lost); ``committed`` → kept data, record finalized; ``aborting`` (crash
  mid-rollback) → the rollback is finished;
* orphan folders (on disk, not indexed) are adopted — deduplicated by folder id
  and ``idempotencyKey`` — so archived text is never lost;
* a folder that cannot be read is reported in :class:`LoadReport`, skipped, and
  **never deleted** (unless a ``pending`` journal proves we half-wrote it); that
  includes an indexed folder whose meta a repair step had to read (the index is not
  re-validated folder by folder at load: it stays in the index, recall reports it
  when it picks it);
* index entries whose folder is gone are dropped (reported).

The last two are passes over every folder id (25–30 ms at 10⁵ folders in a starting
daemon). When the index as loaded named exactly the folders listed and nothing added or
dropped an entry since (no log line, no reindex marker, no journal), neither can find
anything, and they are not made.

Index and image-index writes happen before journals are deleted, so a crash
during recovery is itself recovered by the next load.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from engine import jsonio
from engine.jsonio import CorruptJSONError, is_temp_name, read_json
from engine.store.dir_listing import DIR, FILE, listing
from engine.store.errors import CorruptFolderError
from engine.store.folders import read_meta, validate_folder
from engine.store.ids import folder_ids_among, is_folder_id, is_safe_name
from engine.store.images import ImagesIndex, image_row
from engine.store.index_entry import IndexEntry, first_by_key
from engine.store.index_snapshot import Identity, identity_ahead, load_index_entries
from engine.store.index_stats import StatsSeed
from engine.store.indexfile import (
    IndexStatus,
    file_size,
    remove_index_log,
    write_index,
)
from engine.store.layout import JOURNAL_PREFIX, STAGING_PREFIX, SessionPaths
from engine.store.log_replay import replay_log_over
from engine.store.records import FolderMeta, JournalRecord, index_row_from_meta

__all__ = ["CorruptFolder", "JournalOutcome", "LoadReport", "RecoveredState", "recover"]

_ID = operator.attrgetter("id")


@dataclass(frozen=True, slots=True)
class CorruptFolder:
    """A folder that could not be read; left on disk untouched."""

    folder_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class JournalOutcome:
    """What recovery did with one leftover journal.

    ``action``: ``adopted`` (pending → kept its complete folders), ``finalized``
    (committed), ``rolled-back`` (aborting), ``discarded`` (unreadable).
    """

    txn_id: str
    state: str
    action: str
    folders: tuple[str, ...] = ()


@dataclass(slots=True)
class LoadReport:
    """Everything recovery noticed or changed while opening a store."""

    index_status: IndexStatus = "ok"
    index_rewritten: bool = False
    adopted: list[str] = field(default_factory=list)
    removed_incomplete: list[str] = field(default_factory=list)
    corrupt_folders: list[CorruptFolder] = field(default_factory=list)
    duplicate_folders: list[str] = field(default_factory=list)
    missing_folders: list[str] = field(default_factory=list)
    dropped_entries: list[str] = field(default_factory=list)
    reindexed: list[str] = field(default_factory=list)
    journals: list[JournalOutcome] = field(default_factory=list)
    temp_removed: list[str] = field(default_factory=list)
    log_records: int = 0
    """Records of ``index.log.jsonl`` replayed (normal: judge calls since the last
    index write)."""
    log_skipped: int = 0
    """Lines of ``index.log.jsonl`` that could not be read (a crash tore the last one)."""

    @property
    def clean(self) -> bool:
        """True when the directory needed no repair at all."""
        return (
            self.index_status != "corrupt"
            and not self.index_rewritten
            and not self.corrupt_folders
            and not self.duplicate_folders
            and not self.journals
            and not self.temp_removed
        )


@dataclass(slots=True)
class RecoveredState:
    """The consistent in-memory state a :class:`SessionStore` starts from."""

    entries: dict[str, IndexEntry]
    """Folder id -> its index entry, in index order (each gives its row back exactly)."""
    index_extra: dict[str, Any]
    images: ImagesIndex
    report: LoadReport
    seen_ids: Collection[str]
    """Every folder id on disk or indexed (never handed out again)."""
    index_bytes: int = 0
    """Size of ``index.json`` as left on disk (the log's budget follows it)."""
    log_bytes: int = 0
    """Size of ``index.log.jsonl`` as left on disk (0: none)."""
    source: str | None = None
    """When the entries are exactly the rows of ``index.json`` (recovery changed, replayed
    and rewrote nothing): what they are a function of, the file's bytes and the code
    that read them (`engine.store.index_snapshot.load_index_entries`); else None."""
    stats_seed: StatsSeed | None = None
    """The counters' seed of the entries as loaded (`engine.store.index_stats.StatsSeed`:
    used only if they are still those entries)."""


class _Recovery:
    def __init__(self, paths: SessionPaths) -> None:
        self.paths = paths
        self.report = LoadReport()
        self.entries: dict[str, IndexEntry] = {}
        self._by_key: dict[str, str] | None = {}
        self._loaded: list[IndexEntry] = []
        self.index_changed = False
        self.images = ImagesIndex(paths)
        self.images_changed = False
        self.folder_dirs: set[str] = set()
        self.listed_exactly = False
        """The index as loaded named exactly the listing's folders (:meth:`_take_all`)."""
        self.removed: set[str] = set()
        self.to_unlink: list[Any] = []
        self.log_bytes = 0
        self.source: str | None = None
        self.seed: StatsSeed | None = None

    # -- helpers ---------------------------------------------------------
    @property
    def by_key(self) -> dict[str, str]:
        """Idempotency key -> the first folder loaded or adopted with it. Taken from a
        clean index only when a repair asks (most opens never do)."""
        if self._by_key is None:
            self._by_key = first_by_key(self._loaded)
            self._loaded = []
        return self._by_key

    def _ensure_images(self) -> None:
        self.images.ensure_loaded(lambda: list(self.entries))
        for folder_id, reason in self.images.unreadable:
            self._unreadable(folder_id, reason)
        self.images.unreadable.clear()

    def _unreadable(self, folder_id: str, reason: str) -> None:
        if all(c.folder_id != folder_id for c in self.report.corrupt_folders):
            self.report.corrupt_folders.append(CorruptFolder(folder_id, reason))

    def _add(self, meta: FolderMeta) -> None:
        self.entries[meta.id] = IndexEntry.model_validate(index_row_from_meta(meta))
        if meta.idempotencyKey is not None:
            self.by_key.setdefault(meta.idempotencyKey, meta.id)
        self.index_changed = True

    def _drop(self, folder_id: str) -> None:
        if self.entries.pop(folder_id, None) is not None:
            self.index_changed = True

    # -- phases ----------------------------------------------------------
    def scan(self) -> tuple[list[str], list[str]]:
        journals: list[str] = []
        staging: list[str] = []
        # the folders, then the few other names one by one, in listing order
        self.folder_dirs, others = listing(self.paths.dir)
        for name, kind in others:
            if is_temp_name(name) and kind == FILE:
                jsonio.fs.unlink(self.paths.dir / name)
                self.report.temp_removed.append(name)
            elif name.startswith(JOURNAL_PREFIX) and name.endswith(".json"):
                journals.append(name)
            elif name.startswith(STAGING_PREFIX) and kind == DIR:
                staging.append(name)
        if self.paths.images_dir.is_dir():
            with os.scandir(self.paths.images_dir) as it:
                for entry in it:
                    if is_temp_name(entry.name) and entry.is_file(follow_symlinks=False):
                        jsonio.fs.unlink(self.paths.images_dir / entry.name)
                        self.report.temp_removed.append(f"images/{entry.name}")
        return sorted(journals), sorted(staging)

    def load_index(self, identity: Identity | None = None) -> dict[str, Any]:
        loaded = load_index_entries(self.paths, identity)
        self.source, self.seed = loaded.source, loaded.seed
        self.report.index_status = loaded.status
        self.index_changed = loaded.status == "corrupt"
        if not self._take_all(loaded.entries):
            for entry in loaded.entries:
                self._take(entry)
        return loaded.extra

    def _take_all(self, checked: list[Any]) -> bool:
        """Take every row at once when each is an entry with a folder id of its own (a
        clean index: what :meth:`_take` of each would do); False, nothing taken, else."""
        if self.entries or set(map(type, checked)) - {IndexEntry}:
            return False
        ids = list(map(_ID, checked))
        entries = dict(zip(ids, checked, strict=True))
        if len(entries) != len(ids):
            return False
        # each names a folder on disk (the listing's folder ids, found by the same rule),
        # else each is checked
        listed = entries.keys() <= self.folder_dirs
        if not listed and len(folder_ids_among(ids)) != len(ids):
            return False
        self.entries = entries
        self._by_key, self._loaded = None, checked
        self.listed_exactly = listed and len(entries) == len(self.folder_dirs)
        return True

    def _take(self, entry: Any) -> None:
        if not isinstance(entry, IndexEntry):
            self.report.dropped_entries.append(str(entry))
            self.index_changed = True
            return
        if not is_folder_id(entry.id) or entry.id in self.entries:
            self.report.dropped_entries.append(entry.id)
            self.index_changed = True
            return
        self.entries[entry.id] = entry
        if entry.idempotencyKey is not None:
            self.by_key.setdefault(entry.idempotencyKey, entry.id)

    def replay_log(self) -> None:
        replay = replay_log_over(self.paths, self.entries, self._unreadable)
        self.log_bytes = replay.log.size
        self.report.log_records = len(replay.log.records)
        self.report.log_skipped = replay.log.skipped
        self.report.reindexed.extend(replay.reread)
        if replay.conflicts or replay.invalid or replay.reread:
            self.index_changed = True  # fold the log in now: it disagrees with index.json

    def apply_reindex_marker(self) -> bool:
        """Re-read the metas the marker lists into their entries; whether there was one."""
        marker = self.paths.reindex_marker
        if not marker.exists():
            return False
        try:
            doc = read_json(marker)
            ids = [i for i in doc.get("folders", []) if isinstance(i, str)]
        except (CorruptJSONError, OSError, AttributeError):
            ids = list(self.entries)
        for folder_id in ids:
            entry = self.entries.get(folder_id)
            if entry is None:
                continue
            try:
                meta = read_meta(self.paths, folder_id)
            except CorruptFolderError as exc:
                self._unreadable(folder_id, exc.reason)
                continue
            row = index_row_from_meta(meta, entry.row())
            self.entries[folder_id] = IndexEntry.model_validate(row)
            self.report.reindexed.append(folder_id)
            self.index_changed = True
        self.to_unlink.append(marker)
        return True

    def journal(self, name: str) -> None:
        path = self.paths.dir / name
        txn_id = name[len(JOURNAL_PREFIX) : -len(".json")]
        try:
            rec = JournalRecord.model_validate(read_json(path))
        except (CorruptJSONError, ValidationError, OSError):
            self.report.journals.append(JournalOutcome(txn_id, "corrupt", "discarded"))
            self.to_unlink.append(path)
            return
        folders = [f for f in rec.folders if is_folder_id(f)]
        if rec.state == "aborting":
            self._finish_abort(rec, folders)
            action = "rolled-back"
        else:
            kept = self._keep_complete(rec, folders)
            self._settle_images(rec, kept)
            action = "adopted" if rec.state == "pending" else "finalized"
        self.report.journals.append(JournalOutcome(rec.txnId, rec.state, action, tuple(folders)))
        self.to_unlink.append(path)

    def _finish_abort(self, rec: JournalRecord, folders: list[str]) -> None:
        for folder_id in folders:
            self._drop(folder_id)
            jsonio.fs.rmtree(self.paths.folder(folder_id))
            jsonio.fs.rmtree(self.paths.staging(folder_id))
            self.removed.add(folder_id)
        images = [i for i in rec.images if is_safe_name(i.name)]
        if images:
            self._ensure_images()
            for img in images:
                self.images_changed |= self.images.remove(img.name)
                jsonio.fs.unlink(self.paths.image(img.name))

    def _keep_complete(self, rec: JournalRecord, folders: list[str]) -> set[str]:
        kept: set[str] = set()
        for folder_id in folders:
            jsonio.fs.rmtree(self.paths.staging(folder_id))
            if folder_id in self.entries:
                kept.add(folder_id)
                continue
            if folder_id not in self.folder_dirs:
                continue
            try:
                meta = validate_folder(self.paths, folder_id)
                if rec.state == "pending":
                    self._check_images(rec, folder_id)
            except CorruptFolderError as exc:
                if rec.state == "pending":
                    jsonio.fs.rmtree(self.paths.folder(folder_id))
                    self.removed.add(folder_id)
                    self.report.removed_incomplete.append(folder_id)
                else:
                    self.report.corrupt_folders.append(CorruptFolder(folder_id, exc.reason))
                    self.removed.add(folder_id)
                continue
            owner = self.by_key.get(meta.idempotencyKey) if meta.idempotencyKey else None
            if owner is not None and rec.state == "pending":
                # Same span already archived elsewhere: this copy was never answered.
                jsonio.fs.rmtree(self.paths.folder(folder_id))
                self.removed.add(folder_id)
                self.report.removed_incomplete.append(folder_id)
                continue
            self._add(meta)
            self.report.adopted.append(folder_id)
            kept.add(folder_id)
        return kept

    def _check_images(self, rec: JournalRecord, folder_id: str) -> None:
        """A pending transaction's folder is complete only with all its images."""
        for img in rec.images:
            if img.folderId != folder_id:
                continue
            if not is_safe_name(img.name) or not self.paths.image(img.name).is_file():
                raise CorruptFolderError(folder_id, f"image {img.name} missing")

    def _settle_images(self, rec: JournalRecord, kept: set[str]) -> None:
        images = [i for i in rec.images if is_safe_name(i.name)]
        if not images:
            return
        self._ensure_images()
        for img in images:
            if img.folderId in kept:
                if self.images.get(img.name) is None:
                    try:
                        meta = read_meta(self.paths, img.folderId)
                    except CorruptFolderError as exc:
                        self._unreadable(img.folderId, exc.reason)
                        continue
                    self.images.put(image_row(meta, img.name))
                    self.images_changed = True
            else:
                self.images_changed |= self.images.remove(img.name)
                jsonio.fs.unlink(self.paths.image(img.name))

    def orphans(self) -> None:
        adopted: list[FolderMeta] = []
        for folder_id in sorted(self.folder_dirs - self.entries.keys() - self.removed):
            try:
                meta = validate_folder(self.paths, folder_id)
            except CorruptFolderError as exc:
                self.report.corrupt_folders.append(CorruptFolder(folder_id, exc.reason))
                continue
            if meta.idempotencyKey is not None and meta.idempotencyKey in self.by_key:
                self.report.duplicate_folders.append(folder_id)
                continue
            if meta.idempotencyKey is not None:
                self.by_key[meta.idempotencyKey] = folder_id
            adopted.append(meta)
        for meta in sorted(adopted, key=lambda m: (m.createdAt, m.id)):
            self._add(meta)
            self.report.adopted.append(meta.id)

    def missing(self) -> None:
        if self.entries.keys() <= self.folder_dirs:
            return  # every indexed folder is there (at C speed, and no set is made)
        for folder_id in [f for f in self.entries if f not in self.folder_dirs]:
            self._drop(folder_id)
            if folder_id not in self.removed:
                self.report.missing_folders.append(folder_id)


def recover(paths: SessionPaths) -> RecoveredState:
    """Open-time recovery; see the module docstring for every rule."""
    jsonio.fs.mkdir(paths.dir)
    rec = _Recovery(paths)
    identity = identity_ahead(paths)  # hashed while the directory is listed
    journals, staging = rec.scan()
    extra = rec.load_index(identity)
    rec.replay_log()
    marked = rec.apply_reindex_marker()
    for name in journals:
        rec.journal(name)
    for name in staging:
        jsonio.fs.rmtree(paths.dir / name)
        rec.report.temp_removed.append(name)
    # the index as loaded named exactly the folders listed, and nothing since added or
    # dropped an entry (no log line, no reindex marker, no journal): no folder is an
    # orphan and none is missing, without two more passes over 10^5 ids
    exact = rec.listed_exactly and not rec.report.log_records and not marked and not journals
    if not exact:
        rec.orphans()
        rec.missing()
    index_bytes = file_size(paths.index)
    if rec.index_changed and (rec.entries or rec.report.index_status != "missing"):
        index_bytes = write_index(paths, (e.row() for e in rec.entries.values()), extra)
        rec.report.index_rewritten = True
        rec.log_bytes = _drop_log(paths, rec.log_bytes)
    elif not rec.entries:
        rec.log_bytes = _drop_log(paths, rec.log_bytes)  # nothing it could apply to
    if rec.images_changed:
        rec.images.write()
    for path in rec.to_unlink:
        jsonio.fs.unlink(path)
    if rec.to_unlink or staging:
        jsonio.fs.fsync_dir(paths.dir)
    # every indexed folder is on disk after `missing`: when the listing holds no other
    # folder, the ids seen are the entries' (their strings, which the store keeps; the
    # listing's copies go now)
    dirs = rec.folder_dirs
    seen: Collection[str]
    if exact or (len(dirs) == len(rec.entries) and rec.entries.keys() <= dirs):
        seen = tuple(rec.entries)
    else:
        seen = dirs | rec.entries.keys()
    untouched = not rec.index_changed and not rec.report.log_records
    return RecoveredState(
        entries=rec.entries,
        index_extra=extra,
        images=rec.images,
        report=rec.report,
        seen_ids=seen,
        index_bytes=index_bytes,
        log_bytes=rec.log_bytes,
        source=rec.source if untouched else None,
        stats_seed=rec.seed if untouched else None,
    )


def _drop_log(paths: SessionPaths, size: int) -> int:
    if size or paths.index_log.exists():
        remove_index_log(paths)
    return 0
