"""How scoring gates archiving: backpressure and the heuristic fallback (reference §3.0.4).

The pre-step use case asks `archive_gate` before it archives. The scoring use
case owns the answer: with `scoring.fallback: "never"` and more than
`scoring.maxPending` folders waiting, archiving pauses (better to keep the
context than to create memories that can never be recalled); with
`onPressure`/`always` pending folders are scored heuristically instead.

The policy itself is `engine.scoring.fallback.decide`; this module gathers its inputs
(the listed pending folders, the session kind, the rounds counter) and writes the
heuristic scores. It also holds the helpers the task block and `memory_judge` share:
the readable-text cache, the era facts of the session. The pending
lists and counts come from the store's counters (`engine.store.index_stats`), kept as
the index changes, and the telemetry is followed as it grows: no request scans the
index or re-reads `stats.jsonl`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from engine.assistant_keywords import with_assistant_keywords
from engine.compat.status import CompatStatus
from engine.config import MemoryConfig
from engine.heuristic import with_batch
from engine.relevance.stats import TermStats
from engine.scoring.eras import SessionEraFacts, fake_window
from engine.scoring.fallback import (
    FallbackDecision,
    decide,
    heuristic_fields,
    heuristic_source,
)
from engine.scoring.readable import ReadableText, readable_text
from engine.store import StoreError
from engine.store.stats import read_jsonl_tail
from handlers.context import RequestContext
from handlers.recall_state import session_term_stats

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.scoring")


@dataclass(frozen=True)
class ArchiveGate:
    """Whether this pre-step may archive, and the warnings to report."""

    allowed: bool
    warnings: tuple[str, ...] = ()


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


def _fake_window(state: SessionState) -> bool:
    """fakeWindow of the session's telemetry (``engine.scoring.eras``), following
    ``stats.jsonl`` as it grows: each record is parsed once, and once a record shows a
    fake window the answer stays (the file only grows). A file that shrank or was
    replaced (another inode) is read again from its start. Telemetry that cannot be
    read (missing, or not a file) shows no fake window: like a failed write, it never
    fails the operation that consults it."""
    path = state.store.paths.stats
    try:
        st = path.stat()
        cached = state.scoring_fake_window
        offset, fake = 0, False
        if cached is not None and cached[0][1] == st.st_ino and cached[0][0] <= st.st_size:
            offset, fake = cached[0][0], cached[1]
        if not fake and st.st_size > offset:
            records, offset = read_jsonl_tail(path, offset, st.st_size)
            fake = fake_window(records)
    except OSError:
        state.scoring_fake_window = None
        return False
    state.scoring_fake_window = ((offset, st.st_ino), fake)
    return fake


def session_synthetic(state: SessionState) -> bool:
    """The session-level era rule (fakeWindow and stressBacklog), from the store's
    counters and the followed telemetry."""
    if not _fake_window(state):
        return False
    store = state.store
    return SessionEraFacts(True, len(store), store.index_stats.unscored).synthetic


def listed_pending(state: SessionState, cfg: MemoryConfig) -> Sequence[str]:
    """Ids of the pending folders of the eras the task block lists
    (``scoring.includeLegacy``), oldest first (``engine.store.index_stats.pending_key``):
    a live view of the store's ordered lists, so its length and first items cost no scan.
    """
    stats = state.store.index_stats
    include = bool(cfg.scoring.include_legacy)
    if not stats.unscored or include:
        return stats.pending
    return stats.pending_listed(include_legacy=False, synthetic=session_synthetic(state))


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
    state.store.update_metas(with_assistant_keywords(state.store, changes))
    state.store.append_stats(
        {"type": "heuristic-score", "time": now_ms, "count": len(changes), "reason": reason}
    )
    return list(changes)


def fallback_decision(
    state: SessionState,
    cfg: MemoryConfig,
    compat: CompatStatus,
    under_pressure: bool,
    rounds_unjudged: int | None = None,
) -> FallbackDecision:
    """What the fallback policy decides now (blocking: it lists the pending folders).
    `rounds_unjudged`: the session's count as it is about to be (default: as it is)."""
    channel = compat.is_channel(state.key)
    rounds = cfg.scoring.auto_heuristic_after_rounds
    return decide(
        fallback=cfg.scoring.fallback,
        pending_oldest_first=listed_pending(state, cfg),
        max_pending=cfg.scoring.max_pending,
        under_pressure=under_pressure,
        rounds_unjudged=(
            state.scoring_rounds_unjudged if rounds_unjudged is None else rounds_unjudged
        ),
        rounds_limit=rounds.channel if channel else rounds.plain,
        channel_heuristic=compat.heuristic_scoring(state.key, cfg.compat.channel_score),
    )


async def run_fallback(
    app: App, state: SessionState, ctx: RequestContext, *, under_pressure: bool
) -> FallbackDecision:
    """Decide, and write the heuristic scores the decision asks for."""
    cfg = app.config.config
    compat = app.compat.status
    decision = await anyio.to_thread.run_sync(
        lambda: fallback_decision(state, cfg, compat, under_pressure)
    )
    await apply_fallback(state, cfg, ctx, decision)
    return decision


async def apply_fallback(
    state: SessionState, cfg: MemoryConfig, ctx: RequestContext, decision: FallbackDecision
) -> None:
    """Write the heuristic scores `decision` asks for (nothing when it asks for none)."""
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


async def archive_gate(
    app: App, state: SessionState, ctx: RequestContext, *, under_pressure: bool
) -> ArchiveGate:
    """Decide before archiving; may score pending folders heuristically as a side effect."""
    decision = await run_fallback(app, state, ctx, under_pressure=under_pressure)
    return ArchiveGate(decision.allow_archive, decision.warnings)
