"""A session's `memory-control.json` (`engine.recall.hygiene`): loaded once, kept on the
session, read by every recall path.

Loading touches the disk, so :func:`hygiene_of` is for code already in a worker thread
(the candidate index, which every recall path builds) and :func:`ensure_hygiene` for the
event loop. A file that could not be used was moved aside by the engine; that is logged
here once, as a warning: the memories it suppressed are visible again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
import structlog

from engine.recall.hygiene import HYGIENE_FILE, Hygiene

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

__all__ = ["ensure_hygiene", "hygiene_of", "memory_control_status"]

log = structlog.get_logger("rofmd.forget")


def hygiene_of(state: SessionState) -> Hygiene:
    """The session's suppressions and pause, loaded on first use (blocking)."""
    cached = getattr(state, "hygiene", None)  # (a test's stand-in state may lack it)
    if isinstance(cached, Hygiene):
        return cached
    loaded = Hygiene.load(state.store.paths.dir / HYGIENE_FILE)
    if loaded.discarded is not None:
        log.warning(
            "memory-control.json unusable: suppressed memories are visible again",
            session_key=state.key,
            reason=loaded.discarded,
        )
        loaded.discarded = None
    if not isinstance(getattr(state, "hygiene", None), Hygiene):
        state.hygiene = loaded
    hygiene: Hygiene = state.hygiene
    return hygiene


async def ensure_hygiene(state: SessionState) -> Hygiene:
    """:func:`hygiene_of` from the event loop (the first load runs in a worker thread)."""
    if isinstance(state.hygiene, Hygiene):
        return state.hygiene
    return await anyio.to_thread.run_sync(lambda: hygiene_of(state))


def memory_control_status(app: App) -> dict[str, Any]:
    """`status` `memoryControl`: loaded sessions whose recall is paused or that suppress
    memories (a session's file is read when its recall first runs or its sections are
    rendered, so every session that answered a request with sections is known)."""
    out: dict[str, Any] = {}
    for state in app.sessions.loaded_states():
        hygiene = state.hygiene
        if isinstance(hygiene, Hygiene) and (hygiene.paused or hygiene.suppressed):
            out[state.key] = {
                "recallPaused": hygiene.paused,
                "pausedAt": hygiene.paused_at,
                "suppressed": len(hygiene.suppressed),
            }
    return out
