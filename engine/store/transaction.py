"""Archive commit transactions (reference §1.1 "commit 事务", §6 可恢复).

A transaction writes a set of new memory folders (and their image files)
all-or-nothing, in this order, each step durable before the next:

1. refuse the whole transaction if ``storage.maxFolders`` would be exceeded
   (:class:`MaxFoldersExceededError`, nothing written);
2. journal ``.commit-<txnId>.json`` with ``state:"pending"`` listing every
   folder and image it will write (written before anything else);
3. image files into ``images/`` (before their folders, so a folder that exists
   has its images): bytes are written to temp files beside their targets, a host file
   (a ``Path``) was copied into such a temp file when its folder was planned; all are
   durable before any is renamed into place, and the renames before step 4;
4. each folder is assembled in ``.staging-<id>/`` (``context.json``, ``meta.json``);
   once every staging file and directory is durable, each is renamed to ``<id>/`` and
   the renames are made durable — a ``mem-…`` directory is complete or absent;
5. ``images/index.json``, then ``index.json``;
6. the journal becomes ``state:"committed"`` (or is deleted when the caller
   asked for no record).

Within one step the files are fsynced together (``jsonio.FsOps.fsync_all``): one
archive of 40 folders waits for a handful of journal commits, not for 120 of them.
Across steps the order above holds: nothing of a step is written before the previous
one is durable.

Any exception before the end rolls back exactly what this transaction wrote
(folders, image files, image-index entries, index entries) and re-raises.
Folders whose ``meta.idempotencyKey`` is already archived are *skipped* and
reported in :attr:`Transaction.skipped`; the caller decides (the archive path
refuses to replace the context unless ``skipped`` is empty).

No single image can fail a transaction. An image whose name is unusable or taken, or
whose host file cannot be copied (gone, not a regular file, a FIFO, a device, a symlink
loop, unreadable, not an image by its first bytes, larger than
:data:`~engine.store.image_copy.MAX_IMAGE_BYTES`, growing past it while copied) is
*dropped* when its folder is planned: its ``meta.images`` entry goes, the folder text
keeps its placeholder, and :attr:`Transaction.warnings` says why. A host file is copied
in chunks of :data:`~engine.store.image_copy.COPY_CHUNK`, never read whole. Failures
writing the store itself stay failures of the whole transaction.

The ``committed`` journal is the record that lets ``archive/abort`` undo the
archive after it landed (:meth:`SessionStore.rollback_committed`) until the
caller calls :meth:`SessionStore.finalize`. A crash leaves recovery to decide
(see :mod:`engine.store.recovery`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from engine import jsonio
from engine.jsonio import dumps_json, temp_path, write_json_atomic
from engine.store.errors import MaxFoldersExceededError, TransactionError
from engine.store.folders import context_document
from engine.store.ids import check_safe_name, is_folder_id, is_safe_name
from engine.store.image_copy import ImageRejected, copy_image
from engine.store.images import image_row
from engine.store.records import FolderMeta, JournalImage, JournalRecord, to_json_dict

if TYPE_CHECKING:
    from engine.store.session_store import SessionStore

__all__ = ["CommitResult", "ImageSource", "SkippedFolder", "Transaction"]

MAX_IMAGE_NAME = 200
"""Longest image file name stored (its temp file's name must stay within NAME_MAX)."""

ImageSource = bytes | Path
"""Image content: the bytes, or a host file to copy them from (only if it is an image,
see :mod:`engine.store.image_copy`)."""


@dataclass(frozen=True, slots=True)
class SkippedFolder:
    """A planned folder whose idempotency key is already archived."""

    folder_id: str
    idempotency_key: str
    existing_id: str


@dataclass(frozen=True, slots=True)
class CommitResult:
    """Outcome of :meth:`Transaction.commit`."""

    txn_id: str
    written: tuple[str, ...]
    skipped: tuple[SkippedFolder, ...]
    images: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Image:
    """One image file to publish: ``data`` to write, or the temp copy ``staged``."""

    name: str
    data: bytes | None = None
    staged: Path | None = None


@dataclass(slots=True)
class _Planned:
    meta: FolderMeta
    meta_bytes: bytes
    context_bytes: bytes
    images: list[_Image]


@dataclass(slots=True)
class _Progress:
    journal: bool = False
    folders: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    image_rows: list[str] = field(default_factory=list)
    images_index: bool = False
    rows: list[str] = field(default_factory=list)
    index: bool = False


class Transaction:
    """One archive commit. Use as a context manager or call commit()/rollback().

    ``with store.transaction("arc-1", max_folders=10000) as txn:`` commits on a
    normal exit and rolls back (then re-raises) on an exception.
    """

    def __init__(
        self, store: SessionStore, txn_id: str, max_folders: int | None, keep_record: bool
    ) -> None:
        self.txn_id = check_safe_name(txn_id, "transaction id")
        if max_folders is not None and max_folders < 0:
            raise ValueError("max_folders must be >= 0 (0 or None: unlimited)")
        self._store = store
        self._max_folders = max_folders or None
        self._keep_record = keep_record
        self._planned: list[_Planned] = []
        self._keys: dict[str, str] = {}
        self._image_names: set[str] = set()
        self._staged: list[Path] = []
        self.skipped: list[SkippedFolder] = []
        self.warnings: list[str] = []
        """One line per image dropped (archived as its placeholder only), and why."""
        self.state: Literal["open", "committed", "rolled-back"] = "open"
        self.result: CommitResult | None = None
        self.while_syncing: Callable[[str], None] | None = None
        """Called by :meth:`commit` with each folder's id once its files are handed to the
        disk, while they are being synced: computation the caller needs anyway, done
        while the disk works. It writes nothing; if it raises, the transaction rolls back
        like any failure."""

    # -- planning ----------------------------------------------------------
    @property
    def planned(self) -> tuple[str, ...]:
        """Folder ids this transaction will write (skipped ones excluded)."""
        return tuple(p.meta.id for p in self._planned)

    def add_folder(
        self,
        meta: FolderMeta,
        messages: Sequence[Mapping[str, Any]],
        images: Sequence[tuple[str, ImageSource]] = (),
    ) -> bool:
        """Plan one folder. Returns False when it is skipped as already archived.

        Everything is validated and serialised here, and host image files are copied
        into temp files, so commit cannot fail on bad input half-way. Raises
        ``ValueError`` for an unusable or taken folder id. An image that cannot be
        stored is dropped from the folder instead (see the module docstring).
        """
        self._require_open()
        folder_id = meta.id
        if not is_folder_id(folder_id):
            raise ValueError(f"invalid folder id {folder_id!r} (expected mem-…)")
        key = meta.idempotencyKey
        if key is not None:
            existing = self._store.find_by_idempotency_key(key) or self._keys.get(key)
            if existing is not None:
                self.skipped.append(SkippedFolder(folder_id, key, existing))
                return False
        if folder_id in self._store or folder_id in self.planned:
            raise ValueError(f"folder id {folder_id} is already used")
        if self._store.paths.folder(folder_id).exists():
            raise ValueError(f"folder id {folder_id} exists on disk")
        loaded: list[_Image] = []
        dropped: set[str] = set()
        for name, source in images:
            try:
                loaded.append(self._image(name, source))
            except ImageRejected as exc:
                dropped.add(name)
                self.warnings.append(
                    f"image-placeholder: image {name!r} of folder {folder_id} archived as a"
                    f" placeholder only ({exc.reason})"
                )
                continue
            self._image_names.add(name)
        if dropped and meta.images:
            kept = [ref for ref in meta.images if ref.name not in dropped]
            meta = meta.model_copy(update={"images": kept or None})
        planned = _Planned(
            meta=meta,
            meta_bytes=dumps_json(to_json_dict(meta)),
            context_bytes=dumps_json(context_document([dict(m) for m in messages])),
            images=loaded,
        )
        self._planned.append(planned)
        if key is not None:
            self._keys[key] = folder_id
        self._store._reserve_id(folder_id)
        return True

    def meta_of(self, folder_id: str) -> FolderMeta:
        """The meta a planned folder is written with (without its dropped images)."""
        for p in self._planned:
            if p.meta.id == folder_id:
                return p.meta
        raise KeyError(folder_id)

    def _image(self, name: str, source: ImageSource) -> _Image:
        """Check one image's name and stage a host file; ImageRejected: drop it."""
        paths = self._store.paths
        if not is_safe_name(name) or len(name) > MAX_IMAGE_NAME:
            raise ImageRejected("an unusable file name")
        if name in self._image_names or os.path.lexists(paths.image(name)):
            raise ImageRejected("the file name is already used")
        if not isinstance(source, Path):
            return _Image(name, data=bytes(source))
        jsonio.fs.mkdir(paths.images_dir)
        staged = temp_path(paths.image(name))
        copy_image(source, staged)
        self._staged.append(staged)
        return _Image(name, staged=staged)

    def _discard_staged(self) -> None:
        """Remove the temp copies not published (recovery removes what this cannot)."""
        for path in self._staged:
            with contextlib.suppress(OSError):
                jsonio.fs.unlink(path)
        self._staged.clear()

    # -- context manager ---------------------------------------------------
    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.state != "open":
            return
        if exc_type is None:
            self.commit()
        else:
            self.rollback()

    # -- commit / rollback -------------------------------------------------
    def rollback(self) -> None:
        """Abandon an uncommitted transaction (nothing was written yet but temp copies)."""
        self._require_open()
        self._discard_staged()
        self.state = "rolled-back"
        self._store._end_transaction(self)

    def commit(self) -> CommitResult:
        """Write everything (see the module docstring); all or nothing."""
        self._require_open()
        store = self._store
        limit = self._max_folders
        if limit is not None and len(store) + len(self._planned) > limit:
            self._discard_staged()
            self.state = "rolled-back"
            store._end_transaction(self)
            raise MaxFoldersExceededError(len(store), len(self._planned), limit)
        progress = _Progress()
        try:
            self._write(progress)
        except BaseException:
            self._undo(progress)
            self.state = "rolled-back"
            store._end_transaction(self)
            raise
        self.state = "committed"
        self.result = CommitResult(
            txn_id=self.txn_id,
            written=self.planned,
            skipped=tuple(self.skipped),
            images=tuple(img.name for p in self._planned for img in p.images),
        )
        store._end_transaction(self, self._record("committed") if self._keep_record else None)
        return self.result

    def record(self) -> JournalRecord:
        """What this transaction will write (folders, images), as its journal lists them.

        Known once every folder is planned, before :meth:`commit` writes anything: a
        caller that must be able to undo the archive after a crash stores it durably
        first, and later hands it to :meth:`SessionStore.reinstate`.
        """
        return self._record("committed")

    def _record(self, state: Literal["pending", "committed", "aborting"]) -> JournalRecord:
        return JournalRecord(
            txnId=self.txn_id,
            state=state,
            folders=list(self.planned),
            images=[
                JournalImage(name=img.name, folderId=p.meta.id)
                for p in self._planned
                for img in p.images
            ],
        )

    def _write(self, progress: _Progress) -> None:
        store = self._store
        paths = store.paths
        if not self._planned:
            return
        journal = paths.journal(self.txn_id)
        progress.journal = True
        write_json_atomic(journal, self._record("pending").model_dump(mode="json"))
        has_images = any(p.images for p in self._planned)
        if has_images:
            self._write_images(progress)
        self._write_folders(progress)
        if has_images:
            store._ensure_images()
            for p in self._planned:
                for img in p.images:
                    store._images.put(image_row(p.meta, img.name))
                    progress.image_rows.append(img.name)
            progress.images_index = True
            store._images.write()
        for p in self._planned:
            store._put_meta_row(p.meta)
            progress.rows.append(p.meta.id)
        progress.index = True
        store._write_index()
        if self._keep_record:
            write_json_atomic(journal, self._record("committed").model_dump(mode="json"))
        else:
            jsonio.fs.unlink(journal)
            jsonio.fs.fsync_dir(paths.dir)

    def _write_images(self, progress: _Progress) -> None:
        """Step 3: every image file durable under its name before any folder exists.

        Bytes go to temp files beside their targets (host files were copied into such
        temp files when planned); all are fsynced together, then renamed into place, and
        one fsync of ``images/`` makes the renames durable."""
        paths = self._store.paths
        jsonio.fs.mkdir(paths.images_dir)
        moves: list[tuple[Path, Path]] = []
        written: list[Path] = []
        for p in self._planned:
            for img in p.images:
                progress.images.append(img.name)
                target = paths.image(img.name)
                if img.staged is not None:
                    moves.append((img.staged, target))
                    continue
                tmp = temp_path(target)
                self._staged.append(tmp)  # removed if the transaction fails
                jsonio.fs.create_write(tmp, img.data or b"")
                written.append(tmp)
                moves.append((tmp, target))
        jsonio.fs.fsync_all(written)
        for tmp, target in moves:
            jsonio.fs.replace(tmp, target)
        jsonio.fs.fsync_dir(paths.images_dir)  # one fsync publishes the renames
        self._staged.clear()

    def _write_folders(self, progress: _Progress) -> None:
        """Step 4: every folder complete on disk, then published, before the index.

        A staging directory is invisible until its rename, so its files need no
        temp-and-replace. Each folder's files and directory are handed to the disk to be
        synced as soon as they are written (the next folder is written meanwhile, after
        ``while_syncing`` had its turn); once all are durable, each staging directory is
        renamed to its folder id and one fsync of the session directory makes the
        renames durable."""
        paths = self._store.paths

        def staged() -> Iterator[Path]:
            for p in self._planned:
                progress.folders.append(p.meta.id)
                staging = paths.staging(p.meta.id)
                jsonio.fs.mkdir(staging)
                jsonio.fs.create_write(staging / "context.json", p.context_bytes)
                yield staging / "context.json"
                jsonio.fs.create_write(staging / "meta.json", p.meta_bytes)
                yield staging / "meta.json"
                yield staging
                if self.while_syncing is not None:
                    self.while_syncing(p.meta.id)

        jsonio.fs.fsync_all(staged())
        for p in self._planned:
            jsonio.fs.rename(paths.staging(p.meta.id), paths.folder(p.meta.id))
        jsonio.fs.fsync_dir(paths.dir)

    def _undo(self, progress: _Progress) -> None:
        """Best-effort removal of what :meth:`_write` did; recovery finishes it."""
        store = self._store
        paths = store.paths
        failed = False

        def attempt(step: Any, *args: Any) -> None:
            nonlocal failed
            try:
                step(*args)
            except Exception:  # noqa: BLE001 - keep undoing; recovery handles the rest
                failed = True

        journal = paths.journal(self.txn_id)
        if progress.journal and journal.exists():
            attempt(write_json_atomic, journal, self._record("aborting").model_dump(mode="json"))
        for folder_id in progress.rows:
            store._drop_row(folder_id)
        if progress.index:
            attempt(store._write_index)
        for name in progress.image_rows:
            store._images.remove(name)
        if progress.images_index:
            attempt(store._images.write)
        for name in progress.images:
            attempt(jsonio.fs.unlink, paths.image(name))
        self._discard_staged()
        for folder_id in progress.folders:
            attempt(jsonio.fs.rmtree, paths.folder(folder_id))
            attempt(jsonio.fs.rmtree, paths.staging(folder_id))
        if progress.journal:
            attempt(jsonio.fs.unlink, journal)
            attempt(jsonio.fs.fsync_dir, paths.dir)
        if failed:
            store.needs_recovery = True

    def _require_open(self) -> None:
        if self.state != "open":
            raise TransactionError(f"transaction {self.txn_id} is {self.state}")
