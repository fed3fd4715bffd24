"""``images/index.json``: the image file name → memory folder lookup table.

Maintained on every archive commit and rollback (reference §1.7). It is
derived data: folder ``meta.images`` is the truth, so a missing or corrupt
table is rebuilt from the metas the first time it is needed ("旧数据首次查询时
惰性重建"). Loading is lazy because a store with no images never needs it. A
reader (``memory_image``) also has a stale table rebuilt: one whose rows name folders
the index lacks, or that lacks a row for a file in ``images/`` (:func:`is_stale`).

File format: ``{"version": 1, "images": [{"name", "folderId", …}]}``; unknown
top-level keys and unknown entry fields are preserved.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Container, Iterable
from typing import Any

from pydantic import ValidationError

from engine import jsonio
from engine.jsonio import CorruptJSONError, read_json, write_json_atomic
from engine.store.errors import CorruptFolderError
from engine.store.folders import read_meta
from engine.store.ids import is_safe_name
from engine.store.layout import SessionPaths
from engine.store.records import FolderMeta, ImageIndexEntry, to_json_dict

__all__ = ["ImagesIndex", "image_files", "image_row", "is_stale"]


def image_row(meta: FolderMeta, name: str) -> dict[str, Any]:
    """The table row for image ``name`` of folder ``meta`` (from ``meta.images``)."""
    row: dict[str, Any] = {"name": name, "folderId": meta.id}
    for ref in meta.images or ():
        if ref.name == name:
            ref_row = to_json_dict(ref)
            ref_row.pop("name", None)
            row.update(ref_row)
            break
    return row


def image_files(paths: SessionPaths) -> frozenset[str]:
    """Names of the image files in ``images/``: the store's file names (safe names, see
    :mod:`engine.store.ids`), not the table itself, hidden files (``.DS_Store``) or the
    temp files of an interrupted write. Blocking: one directory listing."""
    table = paths.images_index.name
    try:
        with os.scandir(paths.images_dir) as it:
            return frozenset(
                entry.name
                for entry in it
                if entry.name != table
                and not entry.name.startswith(".")
                and is_safe_name(entry.name)
                and entry.is_file(follow_symlinks=False)
            )
    except (FileNotFoundError, NotADirectoryError):
        return frozenset()


def is_stale(
    rows: Iterable[ImageIndexEntry], folder_ids: Container[str], files: Iterable[str]
) -> bool:
    """Whether a loaded table no longer describes the store, by what costs no meta read:
    a row names a folder the index does not have (removed, or rolled back by another
    writer), or an image file has no row (its folder was adopted into the index at load,
    or the table was written by an older version than the folders)."""
    named: set[str] = set()
    for row in rows:
        if row.folderId not in folder_ids:
            return True
        named.add(row.name)
    return any(name not in named for name in files)


class ImagesIndex:
    """In-memory copy of ``images/index.json`` with explicit writes."""

    def __init__(self, paths: SessionPaths) -> None:
        self._paths = paths
        self._rows: dict[str, dict[str, Any]] | None = None
        self._entries: tuple[ImageIndexEntry, ...] | None = None
        """``entries()`` validated once per change of the rows (a lookup reads them all)."""
        self._extra: dict[str, Any] = {}
        self.status = "unloaded"
        """``ok`` / ``missing`` / ``corrupt`` / ``rebuilt`` after loading."""
        self.unreadable: list[tuple[str, str]] = []
        """(folder id, reason) of the metas a rebuild could not read (their images are
        not in the table); the owner reports them."""

    @property
    def loaded(self) -> bool:
        return self._rows is not None

    def ensure_loaded(self, folder_ids: Callable[[], Iterable[str]]) -> None:
        """Load the table; rebuild it from the metas of ``folder_ids()`` if needed.

        A rebuilt table is written back at once so the scan happens only once.
        """
        if self._rows is not None:
            return
        rows = self._read()
        if rows is not None:
            self._set_rows(rows)
            return
        rebuilt = self._from_metas(folder_ids())
        self._set_rows(rebuilt)
        if rebuilt or self.status == "corrupt":
            self.status = "rebuilt"
            self.write()

    def rebuild(self, folder_ids: Iterable[str]) -> bool:
        """Replace the loaded table by what the metas of ``folder_ids`` say (a reader found
        it stale, see :func:`is_stale`); written only when a row changed. A row kept
        keeps its unknown fields. True when the table was rewritten."""
        old = self._loaded_rows()
        rows: dict[str, dict[str, Any]] = {}
        for name, row in self._from_metas(folder_ids).items():
            previous = old.get(name)
            if previous is not None and previous.get("folderId") == row["folderId"]:
                row = {**previous, **row}
            rows[name] = row
        if rows == old:
            return False
        self._set_rows(rows)
        self.status = "rebuilt"
        self.write()
        return True

    def _from_metas(self, folder_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        rows: dict[str, dict[str, Any]] = {}
        for folder_id in folder_ids:
            try:
                meta = read_meta(self._paths, folder_id)
            except CorruptFolderError as exc:
                self.unreadable.append((folder_id, exc.reason))
                continue
            for ref in meta.images or ():
                rows.setdefault(ref.name, image_row(meta, ref.name))
        return rows

    def _read(self) -> dict[str, dict[str, Any]] | None:
        try:
            doc = read_json(self._paths.images_index)
        except FileNotFoundError:
            self.status = "missing"
            return None
        except CorruptJSONError:
            self.status = "corrupt"
            return None
        items = doc.get("images") if isinstance(doc, dict) else doc
        if not isinstance(items, list):
            self.status = "corrupt"
            return None
        if isinstance(doc, dict):
            self._extra = {k: v for k, v in doc.items() if k != "images"}
        rows: dict[str, dict[str, Any]] = {}
        for item in items:
            try:
                entry = ImageIndexEntry.model_validate(item)
            except ValidationError:
                continue
            rows.setdefault(entry.name, dict(item))
        self.status = "ok"
        return rows

    def _loaded_rows(self) -> dict[str, dict[str, Any]]:
        if self._rows is None:
            raise RuntimeError("images index used before ensure_loaded()")
        return self._rows

    def _set_rows(self, rows: dict[str, dict[str, Any]]) -> None:
        self._rows = rows
        self._entries = None

    def entries(self) -> list[ImageIndexEntry]:
        """All entries, in table order."""
        if self._entries is None:
            rows = self._loaded_rows().values()
            self._entries = tuple(ImageIndexEntry.model_validate(r) for r in rows)
        return list(self._entries)

    def get(self, name: str) -> dict[str, Any] | None:
        return self._loaded_rows().get(name)

    def put(self, row: dict[str, Any]) -> None:
        self._loaded_rows()[str(row["name"])] = row
        self._entries = None

    def remove(self, name: str) -> bool:
        self._entries = None
        return self._loaded_rows().pop(name, None) is not None

    def write(self) -> None:
        """Atomically rewrite ``images/index.json`` (creating ``images/``)."""
        jsonio.fs.mkdir(self._paths.images_dir)
        doc: dict[str, Any] = {"version": 1}
        doc.update(self._extra)
        doc["images"] = list(self._loaded_rows().values())
        write_json_atomic(self._paths.images_index, doc)
