"""Commit a pre-step plan to a session store (reference §1.1 "commit 事务", §6 ①).

The synchronous part of an archive, shared by the daemon's pre-step
(``handlers.pre_step``: pending folders for the model to score) and the engine CLI /
simulation (``rofmd engine compress``, ``rofmd simulate``: no model, so folders are
written ``scored:true`` with heuristic α and keywords, reference "独立运行引擎").

:func:`commit_plan` writes the planned folders in one store transaction, checks
conservation (written + already archived == planned, every folder indexed; otherwise
the transaction is rolled back) and builds the ``compress-applied`` record. It does not
append the record: the daemon undoes its pass-0 re-archive first on a failure, then
appends; the order of ``stats.jsonl`` lines stays what it always was.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.archive.plan import PlannedFolder, PreStepPlan
from engine.archive.telemetry import compress_applied_record
from engine.assistant_keywords import assistant_keywords
from engine.config.model import MemoryConfig
from engine.store import (
    FolderMeta,
    MaxFoldersExceededError,
    SessionStore,
    StoreError,
    Transaction,
    UnknownTransactionError,
)
from engine.timeexpr.tags import time_tag_fields

__all__ = [
    "BeforeWrite",
    "CommitOutcome",
    "archive_token",
    "commit_plan",
    "folder_meta",
    "pending_count",
]

Scorer = Callable[[PlannedFolder], Mapping[str, Any]]
"""Meta fields that score a folder at creation (``engine.scoring.fallback.heuristic_fields``)."""

BeforeWrite = Callable[[Transaction], None]
"""Called with the transaction once every folder is planned, before anything is written."""


def pending_count(store: SessionStore) -> int:
    """Folders still waiting for a score (``scored:false``): a counter the store keeps."""
    return store.index_stats.unscored


def archive_token(
    store: SessionStore, now_ms: int, content_hash: str, issued: int
) -> tuple[str, int]:
    """A transaction id no journal or committed record uses yet, and the new issue count."""
    issued += 1
    token = f"arc-{now_ms:x}-{content_hash[:8]}-{issued}"
    while token in store.committed_transactions() or store.paths.journal(token).exists():
        issued += 1
        token = f"arc-{now_ms:x}-{content_hash[:8]}-{issued}"
    return token, issued


def folder_meta(
    folder_id: str,
    folder: PlannedFolder,
    *,
    turn: int,
    now_ms: int,
    archiver_version: str,
    archived_from: str = "adapter",
    score: Mapping[str, Any] | None = None,
    cfg: MemoryConfig | None = None,
) -> FolderMeta:
    """The ``meta.json`` of a new folder: pending, or scored by ``score`` at creation;
    with ``cfg``, its time tags (``engine.timeexpr.tags``: `timeTag.mode`, `time.timezone`)."""
    data: dict[str, Any] = {
        "id": folder_id,
        "createdAt": now_ms,
        "alpha": 0,
        "beta": 0,
        "scored": False,
        "rescorePending": False,
        "keywords": [],
        "title": folder.title,
        "alphaSource": "pending",
        "betaSource": "pending",
        "keywordsSource": "pending",
        "pendingSince": now_ms,
        "scoreMode": "model",
        "archivedByVersion": archiver_version,
        "archivedFrom": archived_from,
        "idempotencyKey": folder.idempotency_key,
        "messageCount": len(folder.messages),
        "chars": folder.chars,
        "turn": turn,
        "seqStart": folder.messages[0]["seq"] if folder.messages else None,
        "seqEnd": folder.messages[-1]["seq"] if folder.messages else None,
        "assistantKeywords": assistant_keywords(folder.messages),
    }
    if score is not None:
        data.update(score)
        data["pendingSince"] = None
    if folder.event_range is not None:
        data["eventStart"], data["eventEnd"] = folder.event_range
        data["eventTimeSource"] = "messages"
    if cfg is not None:
        data.update(time_tag_fields(folder.messages, cfg, default_anchor_ms=now_ms))
    refs = [img.ref for img in folder.images if img.host_path]
    if refs:
        data["images"] = refs
    return FolderMeta.model_validate({k: v for k, v in data.items() if v is not None})


@dataclass(slots=True)
class CommitOutcome:
    """What :func:`commit_plan` did. ``record`` is the ``compress-applied`` record."""

    ok: bool
    token: str
    folder_ids: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    skipped_ids: list[str] = field(default_factory=list)
    metas: dict[str, FolderMeta] = field(default_factory=dict)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)


def commit_plan(
    store: SessionStore,
    plan: PreStepPlan,
    *,
    cfg: MemoryConfig,
    token: str,
    now_ms: int,
    turn: int,
    step: int | None,
    archiver_version: str,
    archived_from: str = "adapter",
    score_mode: str = "model",
    scorer: Scorer | None = None,
    before_write: BeforeWrite | None = None,
    while_syncing: Callable[[PlannedFolder], None] | None = None,
) -> CommitOutcome:
    """Write ``plan.folders`` in transaction ``token``; all or nothing (see module doc).

    ``scorer`` (engine CLI / simulation): each folder is written already scored with
    the fields it returns; without it folders are pending (``scored:false``).
    ``before_write`` (the daemon): called once the folder ids and images are known
    (``txn.record()``) and before the journal is written, so the caller can record
    durably what a crash from here on may leave behind. If it raises, nothing is
    written (a ``StoreError`` / ``OSError`` / ``ValueError`` gives ``ok=False``).
    ``while_syncing``: called with each folder written, while its files are being synced
    (``Transaction.while_syncing``): pure computation the caller needs anyway.
    """
    out = CommitOutcome(ok=True, token=token)
    pending_before = pending_count(store)
    folders = plan.folders
    if cfg.time.mode == "off":  # §3.0.6: no event time is captured (meta and telemetry)
        folders = [replace(f, event_range=None) for f in folders]
    planned: list[tuple[str, PlannedFolder]] = []
    txn: Transaction | None = None
    try:
        with store.transaction(token, max_folders=cfg.storage.max_folders or None) as txn:
            for folder in folders:
                meta = folder_meta(
                    store.new_folder_id(now_ms),
                    folder,
                    turn=turn,
                    now_ms=now_ms,
                    archiver_version=archiver_version,
                    archived_from=archived_from,
                    score=scorer(folder) if scorer is not None else None,
                    cfg=cfg,
                )
                images = [(img.name, Path(img.host_path)) for img in folder.images if img.host_path]
                if txn.add_folder(meta, folder.messages, images):
                    out.folder_ids.append(meta.id)
                    out.metas[meta.id] = txn.meta_of(meta.id)
                else:
                    existing = txn.skipped[-1].existing_id
                    out.folder_ids.append(existing)
                    out.skipped_ids.append(existing)
                planned.append((out.folder_ids[-1], folder))
            if before_write is not None:
                before_write(txn)
            if while_syncing is not None:
                hook = while_syncing
                by_id = {fid: folder for fid, folder in planned if fid in out.metas}
                txn.while_syncing = lambda fid: hook(by_id[fid])
        result = txn.result
        out.written = list(result.written) if result else []
    except (MaxFoldersExceededError, StoreError, OSError, ValueError) as exc:
        out.ok = False
        out.warnings.append(("commit-failed", f"archive not committed: {exc}"))
    if txn is not None:  # images archived as their placeholder only: why
        out.warnings.extend(("image-placeholder", w) for w in txn.warnings)
    if out.ok:
        # Conservation (§6 ①): every planned folder is on disk and indexed, either written
        # now or already archived under the same idempotency key.
        missing = [fid for fid in out.folder_ids if fid not in store]
        if len(out.written) + len(out.skipped_ids) != len(plan.folders) or missing:
            out.ok = False
            out.warnings.append(
                (
                    "conservation",
                    f"archive rolled back: {len(out.written)} written + {len(out.skipped_ids)}"
                    f" already archived != {len(plan.folders)} planned (missing {missing})",
                )
            )
            with contextlib.suppress(UnknownTransactionError):
                store.rollback_committed(token)
    scores = (
        {fid: out.metas[fid] for fid, _ in planned if fid in out.metas}
        if scorer is not None and out.ok
        else None
    )
    out.record = compress_applied_record(
        plan,
        cfg=cfg.compress,
        now_ms=now_ms,
        turn=turn,
        step=step,
        token=token,
        folders=planned,
        committed=len(out.written) if out.ok else 0,
        skipped=len(out.skipped_ids),
        rollback=not out.ok,
        pending_at_archive=pending_before,
        pending_count=pending_count(store),
        score_mode=score_mode,
        archived_by_version=archiver_version,
        scored_metas=scores,
    )
    return out
