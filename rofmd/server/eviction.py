"""Unload idle sessions, and keep the loaded ones under a cap (issue 21).

Without it a session's state stays in memory until `agent/disposed`, which a crashed
host or a lost connection never sends: a daemon serving many chats grows without
bound. Two rules, both unloading exactly as `agent/disposed` does (the session's next
request reopens it from disk; `handlers.session_residue` keeps what is not on disk):

* idle: no request of the session ended for `session_idle_seconds` (the daemon's
  clock, injectable, so tests decide time);
* cap: more than `max_loaded_sessions` loaded: the least recently used go first.

Only a session with no request queued or running is unloaded (`Dispatcher.lane_busy`).
Every check and unload runs on the event loop without awaiting in between, so no
request of the session can start half-way; the dispatcher queues a session's requests
in its lane, which keeps it busy from arrival to answer. The idle sweep runs every
`interval` seconds in the daemon's task group; the cap is also enforced each time a
session's last queued request ends, so a burst of new sessions never holds more than
the cap plus those in flight.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import structlog

from handlers.sessions import SessionRegistry

log = structlog.get_logger("rofmd.eviction")

IDLE = "idle"
LRU = "lru"
MAX_INTERVAL_S = 30.0
MIN_INTERVAL_S = 0.05


class SessionEviction:
    """The eviction policy over one registry (module docstring)."""

    def __init__(
        self,
        sessions: SessionRegistry,
        busy: Callable[[str], bool],
        clock_ms: Callable[[], int],
        *,
        idle_seconds: float,
        max_loaded: int,
    ) -> None:
        self._sessions = sessions
        self._busy = busy
        self._clock_ms = clock_ms
        self._idle_ms = round(idle_seconds * 1000)
        self._max_loaded = max_loaded

    @property
    def interval(self) -> float:
        """Seconds between idle sweeps: a quarter of the idle time, within bounds, so a
        session goes at most 25 % later than due."""
        return min(MAX_INTERVAL_S, max(MIN_INTERVAL_S, self._idle_ms / 4000))

    def sweep(self) -> int:
        """Unload every idle session due at the clock's now, then enforce the cap; returns
        how many went."""
        evicted = 0
        if self._idle_ms > 0:
            now = self._clock_ms()
            for key in self._sessions.by_recency():
                if self._busy(key):
                    continue
                used = self._sessions.last_used_ms(key)
                if used is None:  # loaded outside a request of its own: idle from now
                    self._sessions.touch(key, now)
                elif now - used >= self._idle_ms and self._sessions.evict(key, IDLE):
                    evicted += 1
        return evicted + self.enforce_cap()

    def enforce_cap(self) -> int:
        """Unload the least recently used idle sessions while more than the cap are
        loaded; returns how many went."""
        if self._max_loaded <= 0:
            return 0
        excess = self._sessions.loaded() - self._max_loaded
        evicted = 0
        if excess <= 0:
            return 0
        for key in self._sessions.by_recency():
            if evicted >= excess:
                break
            if not self._busy(key) and self._sessions.evict(key, LRU):
                evicted += 1
        return evicted

    def lane_idle(self, key: str) -> None:
        """`Dispatcher.on_lane_idle`: a session's last queued request ended."""
        self._guarded(self.enforce_cap)

    async def run(self) -> None:
        """The periodic sweep; runs until cancelled (daemon shutdown)."""
        if self._idle_ms <= 0 and self._max_loaded <= 0:
            return
        while True:
            await anyio.sleep(self.interval)
            self._guarded(self.sweep)

    def _guarded(self, step: Callable[[], int]) -> None:
        # A task boundary, like a handler's: a bug here is logged, never fatal to the daemon.
        try:
            evicted = step()
        except Exception:
            log.exception("session eviction failed")
            return
        if evicted:
            log.debug("sessions evicted", count=evicted, loaded=self._sessions.loaded())
