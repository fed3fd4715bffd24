"""Shared builders for the recall tests: scored folders on disk, entries in memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import ENGINE_DEFAULTS, MemoryConfig, deep_merge
from engine.recall import Addition, CandidateIndex, RecallState, analyze_query, run_round
from engine.recall.fair import Pick
from engine.recall.round import RoundOutcome
from engine.recall.search import SearchPage, keyword_query, search
from engine.recall.search_args import SearchArgs
from engine.store import FolderMeta, SessionStore, open_session

BASE_MS = 1792887420000  # 2026-10-25 08:17 Asia/Shanghai

STARPORT: dict[str, Any] = {
    "createdAt": BASE_MS,
    "alpha": 0.85,
    "beta": 8,
    "keywords": ["星港项目", "接口网关 8080"],
    "messages": [
        {"role": "user", "content": "星港项目的接口网关端口是 8080，灰度比例 10%。"},
        {"role": "assistant", "content": "收到，接口网关 8080，灰度 10%。"},
    ],
}
"""A scored folder the recall tests ask about: the 星港项目 gateway port, 8080."""


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


def numbered_store(tmp: Path, alphas: list[float], **meta: Any) -> tuple[SessionStore, list[str]]:
    """Session s1 with one scored folder per alpha, a second apart: 「星港项目第{i}条」,
    keywords 星港项目 and its own 词{i}, so a 星港项目 query matches them all and each
    can be told apart. Returns the store and the folder ids, oldest first."""
    store = new_store(tmp)
    folders = [
        {
            "createdAt": BASE_MS + i * 1000,
            "alpha": alpha,
            **meta,
            "keywords": ["星港项目", f"词{i}"],
            "messages": [{"role": "user", "content": f"星港项目第{i}条"}],
        }
        for i, alpha in enumerate(alphas)
    ]
    return store, write_folders(store, folders)


def ask_round(
    store: SessionStore | None,
    index: CandidateIndex,
    rs: RecallState,
    text: str,
    cfg: MemoryConfig,
    *,
    turn: int = 1,
    now_ms: int = BASE_MS,
    session_key: str = "s1",
    **options: Any,
) -> RoundOutcome:
    """One automatic recall round for the user message `text`, at the tests' clock."""
    return run_round(
        store,
        index,
        rs,
        analyze_query(text, cfg),
        cfg,
        now_ms=now_ms,
        turn=turn,
        session_key=session_key,
        **options,
    )


def disk_round(
    store: SessionStore, rs: RecallState, text: str, cfg: MemoryConfig, **kw: Any
) -> RoundOutcome:
    """`ask_round` over the store's own index on disk, as the inbox runs it."""
    return ask_round(store, CandidateIndex(store.index, cfg), rs, text, cfg, **kw)


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
        return ask_round(
            None,
            self.index,
            self.state,
            text,
            self.cfg,
            turn=turn,
            session_key="sim",
            loader=self.load,
        )


def tool_search(
    index: CandidateIndex, args: SearchArgs, cfg: MemoryConfig, **options: Any
) -> SearchPage:
    """The search one memory_recall call runs, engine only, on a fresh recall state: its
    keywords, limit and offset; `options` as `search` takes them (a limit or offset
    there replaces the call's)."""
    query = keyword_query(args.keywords, cfg)
    kw: dict[str, Any] = {"limit": args.limit, "offset": args.offset, **options}
    return search(index, RecallState(persist=False), query, cfg, **kw)


def nickname_folders(names: list[str]) -> list[dict[str, Any]]:
    """Old folders (unscored, no 「你说过」 phrases yet), a millisecond apart, in each of
    which the assistant promised to call the user by one of `names`."""
    return [
        {
            "createdAt": BASE_MS + i,
            "keywords": ["起外号"],
            "messages": [
                {"role": "user", "content": "给我起个外号吧"},
                {"role": "assistant", "content": f"好呀，以后我就叫你{name}。"},
            ],
        }
        for i, name in enumerate(names)
    ]


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
