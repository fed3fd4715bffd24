"""Pending folders written exactly as archiving writes them (store transaction API)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.store import FolderMeta, SessionStore, open_session

BASE_MS = 1_795_000_000_000
"""2026-11-18T…Z: after the v1.2.0 era boundary (current era)."""


def user(text: str, time: int | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {
        "id": f"u-{abs(hash(text)) % 10**8}",
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    if time is not None:
        msg["time"] = time
    return msg


def assistant(text: str) -> dict[str, Any]:
    return {
        "id": f"a-{abs(hash(text)) % 10**8}",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "model"},
    }


def tool_result(text: str) -> dict[str, Any]:
    return {
        "id": "t-1",
        "role": "tool",
        "toolCallId": "call-1",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "tool"},
    }


def pending_meta(folder_id: str, created_at: int, title: str, **extra: Any) -> FolderMeta:
    """A folder meta as the archiver writes it: pending, α 0, β 0, no keywords."""
    data: dict[str, Any] = {
        "id": folder_id,
        "createdAt": created_at,
        "alpha": 0,
        "beta": 0,
        "scored": False,
        "rescorePending": False,
        "keywords": [],
        "title": title,
        "alphaSource": "pending",
        "betaSource": "pending",
        "keywordsSource": "pending",
        "pendingSince": created_at,
        "scoreMode": "model",
        "archivedByVersion": "0.1.0",
        "archivedFrom": "adapter",
        "pendingEra": "current",
    }
    data.update(extra)
    return FolderMeta.model_validate(data)


def write_pending(
    store: SessionStore,
    folders: Sequence[tuple[str, Sequence[Mapping[str, Any]]]],
    *,
    start_ms: int = BASE_MS,
    step_ms: int = 60_000,
    txn: str = "arc-test",
    extra: Mapping[str, Any] | None = None,
) -> list[str]:
    """Archive ``(title, messages)`` folders in one transaction; returns their ids."""
    ids: list[str] = []
    with store.transaction(txn, keep_record=False) as t:
        for i, (title, messages) in enumerate(folders):
            created = start_ms + i * step_ms
            folder_id = store.new_folder_id(created)
            t.add_folder(pending_meta(folder_id, created, title, **dict(extra or {})), messages)
            ids.append(folder_id)
    return ids


def open_store(root: Path, session_id: str = "session-test") -> SessionStore:
    return open_session(root, session_id)
