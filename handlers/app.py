"""The application object every handler receives.

It joins the live config, the per-session registry and the daemon's own facts
(through the `DaemonInfo` protocol, which `rofmd` implements), so handlers stay
free of sockets and processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio

from engine.config import resolve_memory_root
from handlers.compat import CompatMonitor, derpyu_patcher, with_compat
from handlers.config_state import ConfigState, ReloadResult
from handlers.metrics import Metrics
from handlers.relevance_snapshots import save_loaded
from handlers.sessions import SessionRegistry

WARM_ROUNDS = 2
"""Warm recall rounds that run at once, the others waiting in line (first come, first
served). A round is a few milliseconds of Python, which the interpreter lock runs one
thread at a time: twenty rounds in twenty threads all finish near the end of the twenty
(and thrash the lock), twenty in line finish one after the other, so half are answered
in half the time. Two, not one: a round also waits on its disk (its reads and fsyncs),
and the second runs meanwhile."""


class DaemonInfo(Protocol):
    """What the process knows that handlers report: uptime, connections, counters."""

    def status_snapshot(self) -> dict[str, Any]:
        """The process part of `status` (PROTOCOL.md §4)."""
        ...


@dataclass(frozen=True)
class Paths:
    """Directories fixed at start: the memory root override and the state dir."""

    memory_root_override: Path | None
    state_dir: Path
    home: Path


class App:
    """Handlers' shared state; one per daemon."""

    def __init__(
        self,
        config: ConfigState,
        paths: Paths,
        info: DaemonInfo,
        *,
        debug_methods: bool = False,
        passive_scope: str = "all",
        dsh_profile: Path | None = None,
    ) -> None:
        self.config = config
        self.paths = paths
        self.info = info
        self.debug_methods = debug_methods
        # which sessions `session/event` and the session-log tailer archive passively
        # (handlers.passive): "all", "channel" (QQ channel sessions) or "off"
        self.passive_scope = passive_scope
        self.warm_rounds = anyio.CapacityLimiter(WARM_ROUNDS)
        """The worker threads of warm recall rounds (:data:`WARM_ROUNDS`). A session's
        first round, which may load or build its indexes, has its own thread instead: a
        load of seconds never holds up the others' rounds."""
        self.metrics = Metrics()
        """Request counts and latencies, product events (`handlers.metrics`)."""
        self.compat = CompatMonitor(config.environ, paths.home, dsh_profile, derpyu_patcher)
        """QQ channel compatibility: what was detected, and the rules it turns on."""
        self.compat.on_change = lambda status: config.set_overlay(
            lambda cfg: with_compat(cfg, status)
        )
        self.compat.assume(config.config)
        self.sessions = SessionRegistry(
            self.memory_root,
            lambda: bool(self.config.config.storage.per_session),
            lambda session_id: self.compat.status.chat_key(session_id),
        )

    def memory_root(self) -> Path:
        """Where `storage.dir` points now (it may change on hot reload)."""
        return resolve_memory_root(
            self.config.config.storage.dir,
            override=self.paths.memory_root_override,
            state_dir=self.paths.state_dir,
            home=self.paths.home,
        )

    async def reload_config(self, now_ms: int) -> ReloadResult:
        """Every reload path (file change, SIGHUP, `config/reload`): re-read the layers,
        then re-detect the QQ plugins (§3.2.1: a config save re-checks, and the
        autopatch self-heals then)."""
        result = await self.config.reload()
        if self.enabled:
            cfg = self.config.config
            await self.compat.refresh(cfg, self.memory_root(), now_ms, force=result.ok)
        return result

    async def shutdown(self, timeout: float) -> None:
        """The daemon stops (its requests drained): write the derived data only memory
        holds, the relevance index snapshots with unsaved changes, waiting up to
        `timeout` seconds (shielded: a cancelled shutdown does not abandon them)."""
        with anyio.CancelScope(shield=True):
            await save_loaded(self.sessions, timeout)

    @property
    def enabled(self) -> bool:
        """`enabled` as read at start (reference §3)."""
        return self.config.enabled_at_start
