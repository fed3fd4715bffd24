"""Load and keep a session's recall state (recall-state.json v3; reference §3.1, §1.4).

The state is loaded once per session, on the first request that needs it (an inbox
message, a `prompt/sections` after a restart, any answer carrying sections), in a
worker thread. A restored non-empty block asks the host for a new request series
once, so the restored block reaches the system prompt head. `SessionState.recall`
is set to it, so re-archive (pass 0) can shrink the block through `RecallBlockView`.

What the loads here skip is handed to the session's damage ledger (`handlers.damage`):
a recall-state file that could not be used (moved aside by the engine), v1 ids whose
folder is unreadable, folders the relevance index could not read.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import anyio
import structlog

from engine.config import MemoryConfig
from engine.recall import (
    RENDER_READS,
    CandidateIndex,
    DiscardedState,
    Prepared,
    RecallState,
    RoundOutcome,
    index_params,
    prepare_state,
    read_state_file,
)
from engine.recall.candidate_snapshot import snapshot_path as candidates_path
from engine.recall.candidate_snapshot import synced_index as synced_candidates
from engine.recall.hygiene import visible_entries
from engine.relevance.folder_text import synced_index
from engine.relevance.index import RelevanceIndex
from engine.timeexpr.index import TimeIndex
from handlers.forget import hygiene_of
from handlers.relevance_snapshots import (
    after_candidates,
    after_sync,
    before_load,
    candidate_key,
    note_loaded,
)

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.recall")


async def ensure_recall_state(app: App, state: SessionState) -> RecallState:
    """The session's recall state, loading (and preparing) it on first use."""
    if isinstance(state.recall, RecallState):
        return state.recall
    cfg = app.config.config
    path = state.store.paths.recall_state

    def load() -> tuple[RecallState, DiscardedState | None, Prepared]:
        discarded = None
        if not cfg.recall.persist_injected:
            rs = RecallState(path=path, persist=False)
        else:
            rs, discarded = read_state_file(path, persist=True)
        return rs, discarded, prepare_state(rs, state.store, cfg)

    rs, discarded, prepared = await anyio.to_thread.run_sync(load)
    if discarded is not None:
        state.damage.note_recall_state_discarded(discarded)
    state.damage.note_unreadable(prepared.unreadable)
    if isinstance(state.recall, RecallState):  # loaded meanwhile by another request
        return state.recall
    state.recall = rs
    if rs.block and not state.recall_reloaded:  # reopened after an eviction: host has it
        state.request_new_series()
    return rs


def candidate_index(state: SessionState, cfg: MemoryConfig) -> CandidateIndex:
    """The in-memory index for the store's current version (blocking; call in a thread).

    Cached per (store identity, store version, index parameters). When only the version
    moved (archive commit, judge, rollback), the cached index is updated in place, which
    gives the index a fresh build would (`CandidateIndex.update`); a large change or
    other parameters rebuild it. A session's first index is its snapshot when that was
    made over the same entries (`engine.recall.candidate_snapshot`: a restart or a
    reopen builds nothing), else a build, whose snapshot is then written.
    """
    store = state.store
    # suppressed memories are never candidates (README "Forgetting"); a suppression drops
    # the cached index (handlers.tool_forget), so the key needs no part of its own
    hidden = hygiene_of(state).hidden()
    key = candidate_key(store, index_params(cfg))
    cached = state.recall_index
    if isinstance(cached, CandidateIndex) and cached.version == key:
        return cached
    # never leave a half-updated index in the cache if the update raises
    state.recall_index = None
    entries = visible_entries(store.index, hidden)
    started = time.monotonic()
    if not isinstance(cached, CandidateIndex):
        cached = None
        before_load(state, candidates_path(store))  # a write of it may still be running
    index, how = synced_candidates(cached, store, entries, cfg, key)
    if cached is None:
        log.debug(
            "recall index loaded",
            session_key=getattr(state, "key", None),  # (a test's stand-in state may lack it)
            how=how,
            folders=len(index),
            seconds=round(time.monotonic() - started, 4),
        )
    state.recall_index = index
    after_candidates(state, index)
    return index


def time_index(state: SessionState, cfg: MemoryConfig) -> TimeIndex | None:
    """The session's time index for the store's current version (blocking; call in a
    thread), or None when `time.mode` and `timeTag.mode` are both off (no index: §3.0.6).

    Built once, then brought up to date in place on every store change (an archive, a
    judge, a rollback: `TimeIndex.update`); a new timezone, the tags switched on or off,
    or another scan limit rebuild it."""
    if cfg.time.mode == "off" and cfg.time_tag.mode == "off":
        state.time_index = None
        return None
    store = state.store
    params = (cfg.time.timezone, cfg.time_tag.mode != "off")
    cached = state.time_index
    state.time_index = None  # never leave a half-updated index in the cache
    key = (id(store), store.version)
    if (
        isinstance(cached, TimeIndex)
        and cached.params == params
        and cached.scan_max == max(1, cfg.time.window_scan_max)
        and cached.version is not None
        and cached.version[0] == key[0]
    ):
        if cached.version != key:
            cached.update(store.index, key)
        index = cached
    else:
        index = TimeIndex(
            store.index,
            params[0],
            with_tags=params[1],
            scan_max=cfg.time.window_scan_max,
            version=key,
        )
    state.time_index = index
    return index


def relevance_index(state: SessionState, cfg: MemoryConfig) -> RelevanceIndex:
    """The session's BM25F index for the store's current version (blocking; call in a
    thread): loaded from its snapshot (else built from the folders) once, then synced in
    place on every store change (`engine.relevance.folder_text.synced_index`); its
    snapshot is rewritten when one is due (`handlers.relevance_snapshots`)."""
    cached = state.relevance_index
    state.relevance_index = None  # never leave a half-synced index in the cache
    started = time.monotonic()
    if not isinstance(cached, RelevanceIndex):
        cached = None
        before_load(state)  # a write of this session's snapshot may still be running
    index, unreadable = synced_index(cached, state.store, cfg.keywords.extra_stopwords)
    if cached is None:
        note_loaded(state, index, time.monotonic() - started)
    state.relevance_index = index
    state.damage.note_unreadable(unreadable)
    after_sync(index)
    return index


def note_round(state: SessionState, outcome: RoundOutcome) -> None:
    """A recall round's reads: the picks it skipped as unreadable, and the ones it read
    fine (fixed, if they were listed). Cheap: touches only the round's picks."""
    state.damage.note_unreadable(outcome.unreadable)
    state.damage.note_readable(outcome.readable, RENDER_READS)


def session_term_stats(state: SessionState, cfg: MemoryConfig) -> RelevanceIndex:
    """Document frequencies of the session's scored folders (heuristic keywords judge a
    term's distinctiveness against them). Blocking."""
    return relevance_index(state, cfg)
