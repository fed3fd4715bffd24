"""An existing store's secrets: which folders hold some, and what their redacted form is.

For `rofmd scan-secrets` (a store archived before redaction, or with ``secrets.mode``
off). A folder's secrets may be in its text (``context.json``) and in the meta fields
made from text or by the model (title, keywords, 你说过 phrases, event / person /
location labels, the judge's reason); both are scanned and both are rewritten. The
session's other files that repeat folder text are redacted as whole JSON documents
(:func:`redact_json`): the recall state (the block, its entries) and the telemetry
lines. Reports name kinds and counts, never a value.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from engine.secrets.redact import Mode, redact_text
from engine.store import CorruptFolderError, SessionStore
from engine.store.records import to_json_dict

__all__ = ["META_TEXT_FIELDS", "FolderScan", "redact_json", "scan_folder"]

META_TEXT_FIELDS = (
    "title",
    "keywords",
    "assistantKeywords",
    "event",
    "events",
    "persons",
    "locations",
    "reason",
)
"""Meta fields holding text of the conversation or of the model's reading of it."""


def redact_json(value: Any, mode: Mode, kinds: Counter[str]) -> Any:
    """Every string inside a JSON value under ``mode``; ``kinds`` counts what went."""
    if isinstance(value, str):
        out = redact_text(value, mode)
        kinds.update(out.kinds)
        return out.text
    if isinstance(value, list):
        return [redact_json(v, mode, kinds) for v in value]
    if isinstance(value, dict):
        return {k: redact_json(v, mode, kinds) for k, v in value.items()}
    return value


@dataclass(slots=True)
class FolderScan:
    """One folder: the kinds of secret it holds and, when any, its redacted files."""

    folder_id: str
    kinds: Counter[str] = field(default_factory=Counter)
    messages: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None
    unreadable: str | None = None

    @property
    def has_secrets(self) -> bool:
        return bool(self.kinds)


def scan_folder(store: SessionStore, folder_id: str, mode: Mode = "redact") -> FolderScan:
    """Scan one folder (blocking: reads its two files). ``mode`` is what the rewrite
    will apply (``off`` would change nothing: it is treated as ``redact`` for a scan)."""
    if mode == "off":
        mode = "redact"
    out = FolderScan(folder_id)
    try:
        meta = to_json_dict(store.get_meta(folder_id))
        messages = store.read_context(folder_id)
    except (CorruptFolderError, OSError) as exc:
        out.unreadable = str(exc)
        return out
    kinds: Counter[str] = Counter()
    new_messages = [
        {**m, "content": redact_json(m["content"], mode, kinds)} if "content" in m else m
        for m in messages
    ]
    new_meta = dict(meta)
    for key in META_TEXT_FIELDS:
        if key in new_meta:
            new_meta[key] = redact_json(new_meta[key], mode, kinds)
    if kinds:
        out.kinds = kinds
        out.messages = new_messages
        out.meta = new_meta
    return out
