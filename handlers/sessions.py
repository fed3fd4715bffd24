"""Per-session state, loaded on first use and released on `agent/disposed`.

Opening a session runs the store's recovery (stale journals, orphan folders,
index rebuild), which touches the disk, so it happens in a worker thread. The
dispatcher already runs one session's requests strictly in order, so a session
is never opened twice concurrently by its own requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import structlog

from engine.recall_view import RecallBlockView
from engine.store import LoadReport, SessionStore, open_session, safe_session_id
from handlers.archive_state import ArchiveState
from handlers.damage import DamageLedger

log = structlog.get_logger("rofmd.sessions")


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
    # The host's context window (effective: compress.contextWindowTokens wins) and the
    # turn of the last pre-step; both set by handlers.pre_step.
    context_window: int | None = None
    last_turn: int | None = None
    # Scoring use case (handlers.tasks_section / tool_judge / scoring_policy): user turns the
    # task block listed pending folders without a judge call (autoHeuristicAfterRounds),
    # readable texts of archived folders (immutable, so cached by id) and the cached
    # era facts of the session's telemetry (keyed by stats.jsonl size and mtime).
    scoring_rounds_unjudged: int = 0
    scoring_texts: dict[str, Any] = field(default_factory=dict)
    scoring_fake_window: tuple[tuple[int, int], bool] | None = None
    # Damage seen on disk (handlers.damage): pending warnings, repairs, unreadable folders.
    damage: DamageLedger = field(default_factory=DamageLedger)

    def request_new_series(self) -> None:
        """Ask the host, in the next answer with sections, to start a new request series."""
        self.new_series_pending = True

    def consume_new_series(self) -> bool:
        """`startsRequestSeries` for this answer; resets the request."""
        pending, self.new_series_pending = self.new_series_pending, False
        return pending


class SessionRegistry:
    """Loaded sessions by memory key."""

    def __init__(self, root: Callable[[], Path], per_session: Callable[[], bool]) -> None:
        self._root = root
        self._per_session = per_session
        self._sessions: dict[str, SessionState] = {}

    def key_for(self, session_id: str) -> str:
        """The memory directory name of a host session id (injective: distinct ids,
        distinct keys; `engine.store.ids.safe_session_id`)."""
        return safe_session_id(session_id)

    async def get(self, session_id: str) -> SessionState:
        """The loaded state, opening (and recovering) the store on first use."""
        key = self.key_for(session_id)
        state = self._sessions.get(key)
        if state is None:
            root = self._root()
            per_session = self._per_session()
            store = await anyio.to_thread.run_sync(
                lambda: open_session(root, session_id, per_session=per_session)
            )
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
            report = store.load_report
            state = SessionState(key=key, store=store, load_report=report, archive=archive)
            # repairs and unreadable folders: logged, warned and listed in status once each
            state.damage.record_load(key, report)
            self._sessions[key] = state
        return state

    def dispose(self, session_id: str) -> bool:
        """Drop the in-memory state; nothing on disk changes."""
        return self._sessions.pop(self.key_for(session_id), None) is not None

    def loaded(self) -> int:
        """How many sessions are in memory (for `status`)."""
        return len(self._sessions)

    def keys(self) -> list[str]:
        """Loaded session keys, sorted for stable output."""
        return sorted(self._sessions)

    def loaded_states(self) -> list[SessionState]:
        """Loaded sessions in key order (for `status`)."""
        return [self._sessions[k] for k in sorted(self._sessions)]
