"""How scoring gates archiving: backpressure and the heuristic fallback (reference §3.0.4).

The pre-step use case asks `archive_gate` before it archives. The scoring use
case owns the answer: with `scoring.fallback: "never"` and more than
`scoring.maxPending` folders waiting, archiving pauses (better to keep the
context than to create memories that can never be recalled); with
`onPressure`/`always` pending folders are scored heuristically instead.

The policy itself is `engine.scoring.fallback.decide`; this module gathers its inputs
(the listed pending folders, the session kind, the rounds counter) and writes the
heuristic scores. It also holds the helpers the task block and `memory_judge` share:
the readable-text cache, the era facts of the session and the channel test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from engine.config import MemoryConfig
from engine.heuristic import with_batch
from engine.relevance.stats import TermStats
from engine.scoring.eras import SessionEraFacts, fake_window, folder_era, listed
from engine.scoring.fallback import (
    FallbackDecision,
    decide,
    heuristic_fields,
    heuristic_source,
)
from engine.scoring.readable import ReadableText, readable_text
from engine.store import IndexEntry, StoreError, read_jsonl
from handlers.context import RequestContext
from handlers.recall_state import session_term_stats

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.scoring")

_CHANNEL_KEY = re.compile(r"^(?:onebot-|qqb-[gp]-)")


@dataclass(frozen=True)
class ArchiveGate:
    """Whether this pre-step may archive, and the warnings to report."""

    allowed: bool
    warnings: tuple[str, ...] = ()


def is_channel_session(cfg: MemoryConfig, key: str) -> bool:
    """A QQ channel session (reference §3.2): chat-key prefix, compat not switched off."""
    return cfg.compat.qq_bots != "off" and _CHANNEL_KEY.match(key) is not None


def readable_for(state: SessionState, folder_id: str) -> ReadableText:
    """The readable archived text of a folder (cached: a folder's text never changes)."""
    cached = state.scoring_texts.get(folder_id)
    if isinstance(cached, ReadableText):
        return cached
    try:
        messages = state.store.read_context(folder_id)
    except StoreError:
        return ReadableText("", "tool")
    text = readable_text(messages)
    state.scoring_texts[folder_id] = text
    return text


def heuristic_text(state: SessionState, folder_id: str) -> str:
    """What heuristic scoring reads (``engine.scoring.fallback.heuristic_source``)."""

    def messages() -> list[dict[str, Any]]:
        try:
            return state.store.read_context(folder_id)
        except StoreError:
            return []

    return heuristic_source(readable_for(state, folder_id), messages)


def session_synthetic(state: SessionState, index: tuple[IndexEntry, ...]) -> bool:
    """The session-level era rule (fakeWindow and stressBacklog), telemetry cached."""
    path = state.store.paths.stats
    try:
        st = path.stat()
        key = (st.st_size, st.st_mtime_ns)
    except FileNotFoundError:
        key = (0, 0)
    cached = state.scoring_fake_window
    if cached is not None and cached[0] == key:
        fake = cached[1]
    else:
        fake = fake_window(read_jsonl(path)) if key != (0, 0) else False
        state.scoring_fake_window = (key, fake)
    if not fake:
        return False
    pending = sum(1 for e in index if not e.scored)
    return SessionEraFacts(fake, len(index), pending).synthetic


def listed_pending(state: SessionState, cfg: MemoryConfig) -> list[IndexEntry]:
    """Pending folders of the eras the task block lists (``scoring.includeLegacy``)."""
    index = state.store.index
    pending = [e for e in index if not e.scored]
    if not pending:
        return []
    synthetic = session_synthetic(state, index)
    include = cfg.scoring.include_legacy
    return [
        e
        for e in pending
        if listed(
            folder_era(
                created_at=e.createdAt, pending_era=e.pendingEra, session_synthetic=synthetic
            ),
            include_legacy=include,
        )
    ]


def since_key(entry: IndexEntry) -> tuple[int, str]:
    """Sort key of a pending folder: ``pendingSince`` (else ``createdAt``), then id."""
    return (entry.pendingSince or entry.createdAt, entry.id)


def _session_stats(state: SessionState, cfg: MemoryConfig) -> TermStats | None:
    """Document frequencies of the session's folders outside the batch being scored:
    the scored folders, as the session's relevance index counts them (the batch is
    pending, so the two never overlap). Blocking: the first call builds the index."""
    return session_term_stats(state, cfg)


def apply_heuristic(
    state: SessionState, cfg: MemoryConfig, ids: list[str], now_ms: int, reason: str
) -> list[str]:
    """Score ``ids`` heuristically and write them (one atomic index update). Blocking.

    Keywords are judged against the session: the document frequencies of this batch's
    texts, plus the session's other folders when :func:`_session_stats` knows them."""
    texts = {fid: heuristic_text(state, fid) for fid in dict.fromkeys(ids) if fid in state.store}
    if not texts:
        return []
    stats = with_batch(_session_stats(state, cfg), texts.values(), cfg.keywords.extra_stopwords)
    changes: dict[str, dict[str, Any]] = {
        fid: heuristic_fields(text, cfg, now_ms, stats) for fid, text in texts.items()
    }
    state.store.update_metas(changes)
    state.store.append_stats(
        {"type": "heuristic-score", "time": now_ms, "count": len(changes), "reason": reason}
    )
    return list(changes)


def _decision(state: SessionState, cfg: MemoryConfig, under_pressure: bool) -> FallbackDecision:
    pending = sorted(listed_pending(state, cfg), key=since_key)
    channel = is_channel_session(cfg, state.key)
    rounds = cfg.scoring.auto_heuristic_after_rounds
    return decide(
        fallback=cfg.scoring.fallback,
        pending_oldest_first=[e.id for e in pending],
        max_pending=cfg.scoring.max_pending,
        under_pressure=under_pressure,
        rounds_unjudged=state.scoring_rounds_unjudged,
        rounds_limit=rounds.channel if channel else rounds.plain,
        channel_heuristic=channel and cfg.compat.channel_score == "heuristic",
    )


async def run_fallback(
    app: App, state: SessionState, ctx: RequestContext, *, under_pressure: bool
) -> FallbackDecision:
    """Decide, and write the heuristic scores the decision asks for."""
    cfg = app.config.config
    decision = await anyio.to_thread.run_sync(lambda: _decision(state, cfg, under_pressure))
    if decision.heuristic_ids:
        ids = list(decision.heuristic_ids)
        with ctx.commit_guard():
            done = await anyio.to_thread.run_sync(
                lambda: apply_heuristic(state, cfg, ids, ctx.now_ms, decision.reason)
            )
        if done:
            log.info(
                "heuristic scoring", session_key=state.key, count=len(done), reason=decision.reason
            )
            state.scoring_rounds_unjudged = 0
            state.request_new_series()
    return decision


async def archive_gate(
    app: App, state: SessionState, ctx: RequestContext, *, under_pressure: bool
) -> ArchiveGate:
    """Decide before archiving; may score pending folders heuristically as a side effect."""
    decision = await run_fallback(app, state, ctx, under_pressure=under_pressure)
    return ArchiveGate(decision.allow_archive, decision.warnings)
