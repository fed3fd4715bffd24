"""Reading and writing ``index.json``.

Format: ``{"version": 1, "folders": [<index entry>, …]}``. Unknown top-level
keys are preserved. A bare list (hand-made or foreign files) is accepted on
read. The index is derived data (folders are the truth), so a damaged file is
reported and rebuilt rather than trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from engine.jsonio import CorruptJSONError, read_json, write_json_atomic
from engine.store.layout import SessionPaths

__all__ = ["IndexStatus", "read_index", "write_index"]

IndexStatus = Literal["ok", "missing", "corrupt"]


def read_index(paths: SessionPaths) -> tuple[list[Any], dict[str, Any], IndexStatus]:
    """Raw entries, preserved top-level extras and the file's status."""
    try:
        doc = read_json(paths.index)
    except FileNotFoundError:
        return [], {}, "missing"
    except (CorruptJSONError, OSError):
        return [], {}, "corrupt"
    if isinstance(doc, list):
        return doc, {}, "ok"
    if isinstance(doc, dict) and isinstance(doc.get("folders"), list):
        extra = {k: v for k, v in doc.items() if k != "folders"}
        return doc["folders"], extra, "ok"
    return [], {}, "corrupt"


def write_index(paths: SessionPaths, rows: Iterable[dict[str, Any]], extra: dict[str, Any]) -> None:
    """Atomically rewrite ``index.json``."""
    doc: dict[str, Any] = {"version": 1}
    doc.update(extra)
    doc["folders"] = list(rows)
    write_json_atomic(paths.index, doc)
