"""Per-session state, loaded on first use and released on `agent/disposed` or when
the daemon evicts it (idle, or the least recently used over the cap; `rofmd.server.eviction`).

Opening a session runs the store's recovery (stale journals, orphan folders,
index rebuild), which touches the disk, so it happens in a worker thread. The
dispatcher already runs one session's requests strictly in order, so a session
is never opened twice concurrently by its own requests, and an eviction, which the
daemon makes only while the session has no request queued or running, never races
one.

A request that only reads (`handlers.session_access`) opens a session that has no
directory yet without creating one (`open_session(create=False)`); the directory is
made by the first durable write: through the store itself, or when a request that
may write outside the store (recall state, archive record) gets the session.

An evicted session leaves a small residue (`handlers.session_residue`) that reopening
puts back, so its answers are those it would have given had it stayed loaded.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog

from engine.recall.strikes import RecallStrikes
from engine.recall_view import RecallBlockView
from engine.store import LoadReport, SessionStore, open_session, safe_session_id, session_paths
from handlers.archive_state import ArchiveState
from handlers.damage import DamageLedger
from handlers.long_lived import long_lived, thaw
from handlers.relevance_snapshots import before_open, on_unload
from handlers.session_residue import Residue, capture, releasable, restore
from handlers.stats_health import StatsHealth

log = structlog.get_logger("rofmd.sessions")

MAX_RESIDUES = 50_000
"""Residues of evicted sessions kept (about 250 bytes each with the key, 12 MiB at the
limit); past it the oldest is dropped, and that session reopens as after
`agent/disposed`."""

_READ_ONLY: ContextVar[bool] = ContextVar("rofmd_session_read_only", default=False)


@contextmanager
def session_access(*, read_only: bool) -> Iterator[None]:
    """Scope a request's session opens: `read_only` opens a session without a directory
    lazily (see the module docstring). Without it, opening creates the directory."""
    token = _READ_ONLY.set(read_only)
    try:
        yield
    finally:
        _READ_ONLY.reset(token)


@dataclass
class SessionState:
    """Everything the daemon holds in memory for one session.

    Feature state (archive guards, recall state, scoring counters) hangs off this
    object as fields with defaults, each owned by its use case module.
    """

    key: str
    store: SessionStore
    load_report: LoadReport
    # PROTOCOL.md §3: set when the system prompt changed in a way the host must
    # pick up with a new request series; the next answer carrying sections takes it.
    new_series_pending: bool = False
    # The recall block state (set by the recall use case when it loads the session).
    recall: RecallBlockView | None = None
    # Archive guards and unreported archives (owned by handlers.pre_step).
    archive: ArchiveState = field(default_factory=ArchiveState)
    # Recall use case: its in-memory candidate index (rebuilt per index version) and the
    # last context window the host reported (caps the block at recall.maxWindowPercent).
    recall_index: Any = None
    relevance_index: Any = None
    # memory_recall's time index (handlers.recall_state.time_index; per store version and
    # timezone, engine.timeexpr.index)
    time_index: Any = None
    # The host's context window (effective: compress.contextWindowTokens wins) and the
    # turn of the last pre-step; both set by handlers.pre_step.
    context_window: int | None = None
    last_turn: int | None = None
    # Scoring use case (handlers.tasks_section / tool_judge / scoring_policy): user turns the
    # task block listed pending folders without a judge call (autoHeuristicAfterRounds),
    # readable texts of archived folders (immutable, so cached by id) and the cached
    # era facts of the session's telemetry (followed by stats.jsonl offset and inode).
    scoring_rounds_unjudged: int = 0
    scoring_texts: dict[str, Any] = field(default_factory=dict)
    scoring_fake_window: tuple[tuple[int, int], bool] | None = None
    # Damage seen on disk (handlers.damage): pending warnings, repairs, unreadable folders.
    damage: DamageLedger = field(default_factory=DamageLedger)
    # Reopened after an eviction with its recall block loaded before: the host still shows
    # that block, so loading it again is no restore to announce (handlers.recall_state).
    recall_reloaded: bool = False
    # memory_recall's consecutive keyword misses in the current turn (handlers.tool_recall;
    # reset by the next real user message in handlers.inbox, carried across an eviction).
    recall_strikes: RecallStrikes = field(default_factory=RecallStrikes)
    # The α floor of the current turn's sender (QQ member gating, handlers.compat): set
    # by every real user message, read by automatic recall and memory_recall.
    member_floor: float = 0.0
    # memory-control.json: suppressed memories and the recall pause (handlers.forget).
    hygiene: Any = None
    # What of the session's long-lived data a request has made so far (the store, its
    # recall index, its relevance index): each new part asks for the load's peak to be
    # given back (`SessionRegistry.touch`).
    loaded_parts: int = 0

    def request_new_series(self) -> None:
        """Ask the host, in the next answer with sections, to start a new request series."""
        self.new_series_pending = True

    def consume_new_series(self) -> bool:
        """`startsRequestSeries` for this answer; resets the request."""
        pending, self.new_series_pending = self.new_series_pending, False
        return pending


class SessionRegistry:
    """Loaded sessions by memory key."""

    def __init__(
        self,
        root: Callable[[], Path],
        per_session: Callable[[], bool],
        chat_key: Callable[[str], str] = lambda session_id: session_id,
    ) -> None:
        self._root = root
        self._per_session = per_session
        # QQ rebuild suffixes folded away while compat is active (handlers.compat)
        self._chat_key = chat_key
        # least recently used first (`touch` moves a session to the end)
        self._sessions: dict[str, SessionState] = {}
        self._used_ms: dict[str, int] = {}
        self._residues: dict[str, Residue] = {}
        self.released: Counter[str] = Counter()
        """Sessions unloaded: `disposed`, `idle`, `lru` (for `status`)."""
        self.on_release: Callable[[], None] | None = None
        """Called after a session was unloaded (the daemon returns memory to the OS)."""
        self.on_loaded: Callable[[], None] | None = None
        """Called after a request that loaded part of a session (its store, its recall
        or relevance index) ended: what loading freed (files read whole, parsed rows,
        a snapshot's arrays) is still held by the allocator at its peak, and the daemon
        hands those pages back (`rofmd.server.memory_release`)."""
        self.stats_health = StatsHealth()
        """Telemetry writes that failed, in every session opened (for `status`)."""

    def chat_key(self, session_id: str) -> str:
        """The id the memory directory is named after: the host's id, or its QQ chat key
        while compat is active (reference §3.2.2: a rebuilt QQ session keeps its memory)."""
        return self._chat_key(session_id)

    def key_for(self, session_id: str) -> str:
        """The memory directory name of a host session id (injective on chat keys:
        distinct keys, distinct directories; `engine.store.ids.safe_session_id`)."""
        return safe_session_id(self._chat_key(session_id))

    async def get(self, session_id: str) -> SessionState:
        """The loaded state, opening (and recovering) the store on first use.

        Outside a read-only request (`session_access`) the session's directory exists
        when this returns: a session opened lazily before gets it now.
        """
        chat_key = self._chat_key(session_id)
        key = safe_session_id(chat_key)
        read_only = _READ_ONLY.get()
        state = self._sessions.get(key)
        if state is not None and not read_only and not state.store.materialized:
            created = await anyio.to_thread.run_sync(state.store.materialize)
            if created:
                log.debug("session directory created", session_key=key)
        if state is None:
            root = self._root()
            per_session = self._per_session()

            def opened() -> SessionStore:
                before_open(session_paths(root, chat_key, per_session=per_session).dir, key)
                with long_lived():  # the index lives as long as the session
                    return open_session(
                        root, chat_key, per_session=per_session, create=not read_only
                    )

            store = await anyio.to_thread.run_sync(opened)
            # unreported archives: reinstated, or rolled back if never answered, before
            # any request of the session sees the store
            archive = await anyio.to_thread.run_sync(lambda: ArchiveState.load(store))
            moved = store.dir_outcome
            if moved is not None and (moved.action in ("adopted", "migrated") or moved.moved_away):
                log.info(
                    "session directory migrated",
                    session_key=key,
                    action=moved.action,
                    migrated_from=moved.migrated_from,
                    owner=moved.owner,
                    shared_with=list(moved.shared_with),
                    moved_away=[name for _, name in moved.moved_away],
                )
            store.on_stats_error = functools.partial(self.stats_health.failed, key)
            report = store.load_report
            state = SessionState(key=key, store=store, load_report=report, archive=archive)
            residue = self._residues.pop(key, None)
            if residue is not None:
                restore(state, residue)
            # repairs and unreadable folders: logged, warned and listed in status once each
            state.damage.record_load(key, report)
            self._sessions[key] = state
        return state

    def dispose(self, session_id: str) -> bool:
        """Drop the in-memory state; nothing on disk changes but the relevance index's
        snapshot (derived data, `handlers.relevance_snapshots`). No residue is kept: a
        later request loads the session afresh, as after a restart."""
        key = self.key_for(session_id)
        self._residues.pop(key, None)
        state = self._sessions.pop(key, None)
        if state is None:
            return False
        on_unload(state)
        self._unloaded(key, "disposed")
        return True

    def evict(self, key: str, reason: str) -> bool:
        """Unload an idle session as `agent/disposed` would, keeping its residue; False
        (nothing done) when it is not loaded or holds what a reload would not give back
        (`handlers.session_residue.releasable`). The caller guarantees that no request of
        the session is queued or running."""
        state = self._sessions.get(key)
        if state is None or not releasable(state):
            return False
        residue = capture(state)
        del self._sessions[key]
        on_unload(state)
        if residue is not None:
            self._residues[key] = residue
            while len(self._residues) > MAX_RESIDUES:
                del self._residues[next(iter(self._residues))]
        self._unloaded(key, reason)
        return True

    def _unloaded(self, key: str, reason: str) -> None:
        thaw()  # its cycles, if any, were frozen with it
        self._used_ms.pop(key, None)
        self.released[reason] += 1
        if self.on_release is not None:
            self.on_release()

    def touch(self, key: str, now_ms: int) -> None:
        """A request of the session just ended: most recently used, idle from now."""
        state = self._sessions.pop(key, None)
        if state is not None:
            self._sessions[key] = state
            self._used_ms[key] = now_ms
            parts = 1 + (state.recall_index is not None) + (state.relevance_index is not None)
            if parts > state.loaded_parts:
                state.loaded_parts = parts
                if self.on_loaded is not None:
                    self.on_loaded()

    def last_used_ms(self, key: str) -> int | None:
        """When a request of the session last ended (None: not since it was loaded)."""
        return self._used_ms.get(key)

    def by_recency(self) -> list[str]:
        """Loaded session keys, least recently used first."""
        return list(self._sessions)

    def residues(self) -> int:
        """Evicted sessions whose residue is kept (for `status`)."""
        return len(self._residues)

    def loaded(self) -> int:
        """How many sessions are in memory (for `status`)."""
        return len(self._sessions)

    def keys(self) -> list[str]:
        """Loaded session keys, sorted for stable output."""
        return sorted(self._sessions)

    def loaded_states(self) -> list[SessionState]:
        """Loaded sessions in key order (for `status`)."""
        return [self._sessions[k] for k in sorted(self._sessions)]
