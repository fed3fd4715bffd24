"""``images/index.json``: the image file name → memory folder lookup table.

Maintained on every archive commit and rollback (reference §1.7). It is
derived data: folder ``meta.images`` is the truth, so a missing or corrupt
table is rebuilt from the metas the first time it is needed ("旧数据首次查询时
惰性重建"). Loading is lazy because a store with no images never needs it.

File format: ``{"version": 1, "images": [{"name", "folderId", …}]}``; unknown
top-level keys and unknown entry fields are preserved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from engine import jsonio
from engine.jsonio import CorruptJSONError, read_json, write_json_atomic
from engine.store.errors import CorruptFolderError
from engine.store.folders import read_meta
from engine.store.layout import SessionPaths
from engine.store.records import FolderMeta, ImageIndexEntry, to_json_dict

__all__ = ["ImagesIndex", "image_row"]


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


class ImagesIndex:
    """In-memory copy of ``images/index.json`` with explicit writes."""

    def __init__(self, paths: SessionPaths) -> None:
        self._paths = paths
        self._rows: dict[str, dict[str, Any]] | None = None
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
            self._rows = rows
            return
        rebuilt: dict[str, dict[str, Any]] = {}
        for folder_id in folder_ids():
            try:
                meta = read_meta(self._paths, folder_id)
            except CorruptFolderError as exc:
                self.unreadable.append((folder_id, exc.reason))
                continue
            for ref in meta.images or ():
                rebuilt.setdefault(ref.name, image_row(meta, ref.name))
        self._rows = rebuilt
        if rebuilt or self.status == "corrupt":
            self.status = "rebuilt"
            self.write()

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

    def entries(self) -> list[ImageIndexEntry]:
        """All entries, in table order."""
        return [ImageIndexEntry.model_validate(r) for r in self._loaded_rows().values()]

    def get(self, name: str) -> dict[str, Any] | None:
        return self._loaded_rows().get(name)

    def put(self, row: dict[str, Any]) -> None:
        self._loaded_rows()[str(row["name"])] = row

    def remove(self, name: str) -> bool:
        return self._loaded_rows().pop(name, None) is not None

    def write(self) -> None:
        """Atomically rewrite ``images/index.json`` (creating ``images/``)."""
        jsonio.fs.mkdir(self._paths.images_dir)
        doc: dict[str, Any] = {"version": 1}
        doc.update(self._extra)
        doc["images"] = list(self._loaded_rows().values())
        write_json_atomic(self._paths.images_index, doc)
