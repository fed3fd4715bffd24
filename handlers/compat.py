"""The daemon's QQ compat state (reference §3.2.1): detect, patch, and keep it current.

``compat.qqBots`` decides: ``off`` never looks, ``on`` is active whatever is installed,
``auto`` reads the DSH profile (``engine.compat.detect``). Detection runs at start, on
every config reload and when the profile's files change (``poll``, a cheap stat of the
few files detection reads), always off the event loop. Each run yields one immutable
``CompatStatus`` that every compat rule reads; while compat is active the effective
config gains the ``plugin:dsh-onebot`` trigger kind (§3.2.3), and Derpyu's tool
whitelist is patched when the daemon was given the profile it may patch
(``ROFMD_DSH_PROFILE_DIR``; the detection chain alone never licenses a write to a
third-party file). Nothing here fails a request: a broken profile detects nothing and
logs a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog

from engine.compat.derpyu_files import apply_autopatch
from engine.compat.detect import detect, fingerprint, profile_dir
from engine.compat.sender import member_floor, with_floor
from engine.compat.status import INACTIVE, CompatStatus
from engine.config import MemoryConfig

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.compat")

ONEBOT_SOURCE_KIND = "plugin:dsh-onebot"

Patcher = Callable[[Path, Path, bool, int], tuple[bool, str, str | None]]
"""(profile, memory root, enabled, now ms) → (patched, action, warning); blocking."""


def with_compat(cfg: MemoryConfig, status: CompatStatus) -> MemoryConfig:
    """The config as compat sees it: onebot's source kind triggers recall while compat
    is active (§3.2.3, no hand edit needed); unchanged otherwise."""
    kinds = cfg.recall.trigger_source_kinds
    if not status.active or not status.onebot or ONEBOT_SOURCE_KIND in kinds:
        return cfg
    recall = cfg.recall.model_copy(update={"trigger_source_kinds": (*kinds, ONEBOT_SOURCE_KIND)})
    return cfg.model_copy(update={"recall": recall})


def note_sender(app: App, state: SessionState, text: str) -> None:
    """A real user message opens a turn: its sender's α floor (§3.2.3) holds for the
    turn's automatic recall and every memory_recall of the turn (the model cannot
    bypass the gate by asking itself)."""
    cfg = app.config.config
    floor = 0.0
    if app.compat.status.is_channel(state.key):
        floor = member_floor(state.key, text, cfg.compat.owner_ids, cfg.compat.member_min_alpha)
    state.member_floor = floor


def recall_config(app: App, state: SessionState) -> MemoryConfig:
    """The config a recall of this session runs with now: the member gate applied."""
    return with_floor(app.config.config, state.member_floor)


class CompatMonitor:
    """Holds the current ``CompatStatus``; ``refresh`` and ``poll`` replace it."""

    def __init__(
        self,
        environ: Mapping[str, str],
        home: Path,
        explicit_profile: Path | None = None,
        patcher: Patcher | None = None,
    ) -> None:
        self._environ = dict(environ)
        self._home = home
        self._explicit = explicit_profile
        self._patcher = patcher
        self.status: CompatStatus = INACTIVE
        self._key: object = None
        self._lock: anyio.Lock | None = None
        self.on_change: Callable[[CompatStatus], None] | None = None
        """Called with the new status when it changed (the daemon re-derives its config)."""

    def assume(self, cfg: MemoryConfig) -> None:
        """The status before the first detection: ``qqBots: on`` is active at once (a
        forced switch needs no profile), ``auto`` waits for ``refresh``."""
        if cfg.compat.qq_bots == "on":
            self._publish(CompatStatus(mode="on", active=True, onebot=True))
        else:
            self._publish(CompatStatus(mode=cfg.compat.qq_bots))

    def profile(self) -> Path:
        """The profile detection reads."""
        return profile_dir(self._environ, self._home, self._explicit)

    async def refresh(
        self, cfg: MemoryConfig, memory_root: Path, now_ms: int, *, force: bool = False
    ) -> CompatStatus:
        """Re-detect when the mode, the patch switch or the profile's files changed (all
        of them with ``force``); off the event loop."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            status = await anyio.to_thread.run_sync(
                lambda: self._evaluate(cfg, memory_root, now_ms, force)
            )
        if status is not None:
            self._publish(status)
        return self.status

    def _evaluate(
        self, cfg: MemoryConfig, memory_root: Path, now_ms: int, force: bool
    ) -> CompatStatus | None:
        mode = cfg.compat.qq_bots
        if mode == "off":
            key: object = ("off",)
            if key == self._key and not force:
                return None
            self._key = key
            return CompatStatus(mode="off")
        profile = self.profile()
        key = (mode, cfg.compat.auto_patch_derpyu, str(memory_root), fingerprint(profile))
        if key == self._key and not force:
            return None
        self._key = key
        found = detect(profile)
        if found.error is not None and mode == "auto":
            log.warning("compat detection failed", profile=found.profile, error=found.error)
        elif not found.present and mode == "auto":
            log.debug("no DSH profile: no QQ plugin to detect", profile=found.profile)
        active = mode == "on" or found.onebot or found.derpyu
        status = CompatStatus(
            mode=mode,
            active=active,
            onebot=found.onebot or mode == "on",
            derpyu=found.derpyu,
            profile=found.profile,
            error=found.error,
        )
        if active and found.derpyu:
            status = self._patch(status, cfg, memory_root, now_ms)
        return status

    def _patch(
        self,
        status: CompatStatus,
        cfg: MemoryConfig,
        memory_root: Path,
        now_ms: int,
    ) -> CompatStatus:
        """Derpyu's whitelist (§3.2.5): patched only in the profile the daemon was
        given; otherwise its chats are scored heuristically (one warning)."""
        if self._explicit is None or self._patcher is None:
            return replace(status, patch_action="no-profile-setting")
        patched, action, warning = self._patcher(
            self._explicit, memory_root, bool(cfg.compat.auto_patch_derpyu), now_ms
        )
        if warning:
            log.warning("derpyu autopatch", action=action, warning=warning)
        return replace(status, derpyu_patched=patched, patch_action=action)

    def _publish(self, status: CompatStatus) -> None:
        before, self.status = self.status, status
        if status == before:
            return
        if status.active and not before.active:
            for name in status.plugins():
                log.info(f"dsh-rofm: compat enabled ({name})", mode=status.mode)
        elif before.active and not status.active:
            log.info("dsh-rofm: compat disabled", mode=status.mode)
        if status.active and status.derpyu and not status.derpyu_patched:
            log.warning(
                "derpyu tool whitelist not patched: its chats are scored heuristically",
                patch=status.patch_action,
            )
        if self.on_change is not None:
            self.on_change(status)


def derpyu_patcher(
    profile: Path, memory_root: Path, enabled: bool, now_ms: int
) -> tuple[bool, str, str | None]:
    """The autopatch of ``engine.compat.derpyu_files`` as the monitor calls it."""
    outcome = apply_autopatch(profile, memory_root, enabled=enabled, now_ms=now_ms)
    return outcome.active, outcome.action, outcome.warning
