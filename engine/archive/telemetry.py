"""``stats.jsonl`` records of the archive path: ``compress-applied`` and ``rearchive``.

Field names are the reference's (§1.1 step 2, §1.4 step 2, §1.6) so its report tools
read our telemetry: tokenMeter before/after tokens and percents, pass, emergency,
source, pending ``folderMetadata`` (with per-folder image counts), the pinned and note
merge counters, and the v1.4.0/v1.4.1 fields (pendingAtArchive … trickleArchive).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from engine.archive.plan import PlannedFolder, PreStepPlan
from engine.config.model import CompressConfig
from engine.store import FolderMeta

__all__ = ["compress_applied_record", "rearchive_record"]


def _round(x: float) -> float:
    return round(x, 2)


def _folder_metadata(
    folder_id: str, f: PlannedFolder, scored: Mapping[str, FolderMeta] | None
) -> dict[str, Any]:
    meta = scored.get(folder_id) if scored is not None else None
    return {
        "id": folder_id,
        "title": f.title,
        "pending": meta is None,
        "scored": meta is not None,
        "alpha": meta.alpha if meta is not None else 0,
        "beta": meta.beta if meta is not None else 0,
        "keywords": list(meta.keywords) if meta is not None else [],
        "messages": len(f.messages),
        "chars": f.chars,
        "images": len(f.images),
    }


def compress_applied_record(
    plan: PreStepPlan,
    *,
    cfg: CompressConfig,
    now_ms: int,
    turn: int,
    step: int | None,
    token: str,
    folders: Sequence[tuple[str, PlannedFolder]],
    committed: int,
    skipped: int,
    rollback: bool,
    pending_at_archive: int,
    pending_count: int,
    score_mode: str,
    archived_by_version: str,
    scored_metas: Mapping[str, FolderMeta] | None = None,
) -> dict[str, Any]:
    """One record per archive (all passes of one pre-step are one archive).

    ``folderMetadata`` describes pending folders, unless ``scored_metas`` gives the metas
    of folders written already scored (engine CLI / simulation: heuristic at creation).
    """
    cut = plan.cut
    passes = cut.passes if cut else []
    sources = Counter("messages" if f.event_range else "none" for _, f in folders)
    parts = plan.note_parts
    return {
        "type": "compress-applied",
        "time": now_ms,
        "source": "pre-step",
        "turn": turn,
        "step": step,
        "token": token,
        "beforeTokens": plan.total_tokens,
        "afterTokens": plan.projected_tokens,
        "beforePercent": _round(plan.percent_before),
        "afterPercent": _round(plan.percent_after),
        "contextWindow": plan.window,
        "pass": passes[-1].index if passes else 0,
        "passes": [
            {
                "pass": p.index,
                "emergency": p.emergency,
                "percentBefore": _round(p.percent_before),
                "targetTokens": p.target_tokens,
                "removedTokens": p.removed_tokens,
            }
            for p in passes
        ],
        "emergency": any(p.emergency for p in passes),
        "shadowedSeqs": len(plan.shadowed_seqs),
        "shadowedTokenCount": plan.shadowed_tokens,
        "archivedMessages": plan.archived_messages,
        "folderMetadata": [
            _folder_metadata(folder_id, f, scored_metas) for folder_id, f in folders
        ],
        "pinnedShadowed": parts.pinned_shadowed,
        "pinnedRecorded": len(parts.appendix),
        "pinnedChars": sum(len(t) for _, t in parts.appendix),
        "mergedCheckpoints": parts.merged_notes,
        "archiveSegments": plan.total_segments,
        "pendingAtArchive": pending_at_archive,
        "pendingCount": pending_count,
        "smallWindow": False,
        "protectedTurn": plan.turn_protected,
        "foldersPlanned": len(folders),
        "foldersCommitted": committed,
        "foldersSkipped": skipped,
        "rollback": rollback,
        "maxFoldersCapped": plan.max_folders_capped,
        "eventTimeSourceCounts": dict(sources),
        "scoreMode": score_mode,
        "archivedByVersion": archived_by_version,
        "releaseCapped": bool(cut and cut.release_capped),
        "releaseFloor": cut.floor_tokens if cut else None,
        "releaseTargetPercent": cfg.release_target_percent if cfg.release_floor_active else None,
        "trickleArchive": bool(
            cut and passes and passes[0].removed_tokens < cut.conversation_target
        ),
        # secret values kept out of the folders (secrets.mode), by kind; never the values
        "secretsRemoved": dict(sorted(plan.secrets.items())),
    }


def rearchive_record(
    *,
    now_ms: int,
    turn: int,
    removed_ids: Sequence[str],
    recycled_high: Sequence[str],
    removed_tokens: int,
    target_tokens: int,
    before_percent: float,
    emergency: bool,
    missing: Sequence[str],
) -> dict[str, Any]:
    """The §1.4 ``rearchive`` record (plus which ids were recycled or had no folder)."""
    return {
        "type": "rearchive",
        "time": now_ms,
        "removedIds": list(removed_ids),
        "removedTokens": removed_tokens,
        "targetTokens": target_tokens,
        "beforePercent": _round(before_percent),
        "turn": turn,
        "recycledHigh": list(recycled_high),
        "emergency": emergency,
        "missingFolders": list(missing),
    }
