"""Shared builders for the recall tests: scored folders on disk, entries in memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import ENGINE_DEFAULTS, MemoryConfig, deep_merge
from engine.recall import Addition, CandidateIndex, RecallState, analyze_query, run_round
from engine.recall.fair import Pick
from engine.recall.round import RoundOutcome
from engine.store import FolderMeta, SessionStore, open_session

BASE_MS = 1792887420000  # 2026-10-25 08:17 Asia/Shanghai


def config(**recall: Any) -> MemoryConfig:
    """Engine defaults with `recall` overrides (camelCase keys, nested dicts merge)."""
    tree = deep_merge(ENGINE_DEFAULTS, {"recall": recall}) if recall else ENGINE_DEFAULTS
    return MemoryConfig.model_validate(tree)


def with_tz(cfg: MemoryConfig, tz: str) -> MemoryConfig:
    return cfg.model_copy(update={"time": cfg.time.model_copy(update={"timezone": tz})})


def write_folders(
    store: SessionStore, folders: list[dict[str, Any]], txn: str = "arc-t"
) -> list[str]:
    """Write folders through the transaction API, then score them with update_metas.

    Each dict: createdAt, alpha, beta, keywords, messages, and optionally scored (default
    True) and any other meta field.
    """
    ids: list[str] = []
    scores: dict[str, dict[str, Any]] = {}
    with store.transaction(txn) as t:
        for f in folders:
            fid = store.new_folder_id(f["createdAt"])
            extra = {
                k: v
                for k, v in f.items()
                if k not in ("createdAt", "alpha", "beta", "keywords", "messages", "scored")
            }
            meta = FolderMeta(
                id=fid,
                createdAt=f["createdAt"],
                scored=False,
                alpha=0.5,
                keywords=list(f.get("keywords", [])),
                **extra,
            )
            t.add_folder(meta, f.get("messages", [{"role": "user", "content": "x"}]))
            ids.append(fid)
            if f.get("scored", True):
                scores[fid] = {
                    "scored": True,
                    "alpha": f.get("alpha", 0.5),
                    "beta": f.get("beta", 0),
                    "keywords": list(f.get("keywords", [])),
                    "alphaSource": "llm",
                }
    if scores:
        store.update_metas(scores)
    return ids


def new_store(tmp: Path, session: str = "s1") -> SessionStore:
    return open_session(tmp, session)


@dataclass
class Entry:
    """An in-memory index entry (what CandidateIndex reads)."""

    id: str
    alpha: float
    createdAt: int
    keywords: list[str]
    beta: float = 0.0
    scored: bool = True
    title: str = ""
    events: list[str] | None = None
    persons: list[str] | None = None
    locations: list[str] | None = None
    assistantKeywords: list[str] | None = None


@dataclass
class Sim:
    """Selection + commit without disk: folders are index entries, entries render small."""

    entries: list[Entry]
    cfg: MemoryConfig
    state: RecallState = field(default_factory=RecallState)
    index: CandidateIndex | None = None

    def __post_init__(self) -> None:
        self.state.persist = False
        self.reindex()

    def reindex(self) -> None:
        self.index = CandidateIndex(self.entries, self.cfg, len(self.entries))

    def load(self, p: Pick) -> Addition:
        assert self.index is not None
        return addition_of(self.index.folders[self.index.by_id[p.id]])

    def ask(self, text: str, turn: int = 1) -> RoundOutcome:
        assert self.index is not None
        return run_round(
            None,
            self.index,
            self.state,
            analyze_query(text, self.cfg),
            self.cfg,
            now_ms=BASE_MS,
            turn=turn,
            session_key="sim",
            loader=self.load,
        )


def addition_of(f: Any) -> Addition:
    """What a loader reads for candidate folder `f`: its facts and a one-line body."""
    return Addition(
        id=f.id,
        alpha=f.alpha,
        beta=f.beta,
        created_at_ms=f.created_at,
        keywords=list(f.keywords),
        date="d",
        body=f"user: {f.id}",
    )
