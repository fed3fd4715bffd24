"""Reading one memory folder (``meta.json`` + ``context.json``).

Shared by the store, recovery and the image-index rebuild so "is this folder
complete and readable" has exactly one definition.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from engine.jsonio import CorruptJSONError, read_json
from engine.store.errors import CorruptFolderError
from engine.store.layout import SessionPaths
from engine.store.records import FolderMeta

__all__ = ["context_document", "read_context", "read_meta", "validate_folder"]


def read_meta(paths: SessionPaths, folder_id: str) -> FolderMeta:
    """Parse ``<folder>/meta.json``; any problem becomes :class:`CorruptFolderError`."""
    path = paths.folder(folder_id) / "meta.json"
    try:
        meta = FolderMeta.model_validate(read_json(path))
    except FileNotFoundError as exc:
        raise CorruptFolderError(folder_id, "meta.json missing") from exc
    except CorruptJSONError as exc:
        raise CorruptFolderError(folder_id, f"meta.json: {exc.reason}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise CorruptFolderError(folder_id, f"meta.json: {where}: {first['msg']}") from exc
    except OSError as exc:
        raise CorruptFolderError(folder_id, f"meta.json: {exc}") from exc
    if meta.id != folder_id:
        raise CorruptFolderError(folder_id, f"meta.json id {meta.id!r} differs from directory")
    return meta


def read_context(paths: SessionPaths, folder_id: str) -> list[dict[str, Any]]:
    """The archived messages of a folder (``context.json`` ``messages``).

    Accepts the ``{"messages": [...]}`` document and, for old data, a bare list.
    """
    path = paths.folder(folder_id) / "context.json"
    try:
        doc = read_json(path)
    except FileNotFoundError as exc:
        raise CorruptFolderError(folder_id, "context.json missing") from exc
    except CorruptJSONError as exc:
        raise CorruptFolderError(folder_id, f"context.json: {exc.reason}") from exc
    except OSError as exc:
        raise CorruptFolderError(folder_id, f"context.json: {exc}") from exc
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise CorruptFolderError(folder_id, "context.json: messages is not a list of objects")
    return messages


def validate_folder(paths: SessionPaths, folder_id: str) -> FolderMeta:
    """Meta of a folder that is complete on disk, else :class:`CorruptFolderError`."""
    meta = read_meta(paths, folder_id)
    read_context(paths, folder_id)
    return meta


def context_document(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``context.json`` document written for ``messages``."""
    return {"messages": messages}
