"""onebot images from message to archive (reference §3.2.7): the daemon's part.

When a user message of a onebot QQ channel session arrives, the images its
``[图片:<path>]`` annotations name are checked against ``compat.mediaRoots`` and copied
into the staging area (``engine.compat.media``) while the files surely exist; a refused
path is logged at debug with its reason (never anything of the file). The pre-step
archive of that message later takes the copies into the session's ``images/``
(``engine.archive.images.plan_staged_images``).

Staged copies go once their archive is final: a committed or landed archive releases
them at the session's next ``archive/commit`` or pre-step; an aborted one keeps them for
the archive that will take the same messages again. What no report ever settles (a
bridge that crashed, a daemon restarted in between) goes by age: every 64th user
message, the first one after start included, removes staged directories older than
``compat.stagingTtlMs`` at the request's time.

Every other session is untouched: nothing is read, written or logged for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import anyio
import structlog

from engine.compat.chatkey import channel_kind
from engine.compat.media import (
    StageOutcome,
    clean_staging,
    image_paths,
    media_roots,
    release_staged,
    stage_images,
)
from engine.compat.status import CompatStatus

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.media")

__all__ = [
    "CLEAN_EVERY",
    "note_archived",
    "onebot_channel",
    "release_settled",
    "stage_message_images",
    "sweep_staging",
]

CLEAN_EVERY = 64
"""User messages between two age sweeps of the staging area (reference §3.2.7)."""


@dataclass
class _Staging:
    """One daemon's staging bookkeeping."""

    messages: int = 0
    releases: dict[str, dict[str, tuple[Path, ...]]] = field(default_factory=dict)
    """Per session key: archive token → the staged directories its folders took."""


_BY_APP: WeakKeyDictionary[App, _Staging] = WeakKeyDictionary()


def _of(app: App) -> _Staging:
    staging = _BY_APP.get(app)
    if staging is None:
        staging = _BY_APP[app] = _Staging()
    return staging


def onebot_channel(status: CompatStatus, key: str) -> bool:
    """A onebot QQ channel session, the only kind whose messages carry image paths."""
    kind = channel_kind(key)
    return status.is_channel(key) and kind is not None and kind.startswith("onebot")


async def stage_message_images(
    app: App, state: SessionState, message: Mapping[str, Any], text: str, now_ms: int
) -> None:
    """Stage the acceptable images of a user message of a onebot channel session."""
    status = app.compat.status
    if not status.active or message.get("role", "user") != "user":
        return
    cfg = app.config.config.compat
    root = app.memory_root()
    staging = _of(app)
    staging.messages += 1
    if staging.messages % CLEAN_EVERY == 1:
        await sweep_staging(app, now_ms)
    if not onebot_channel(status, state.key):
        return
    paths = image_paths(text)
    if not paths:
        return
    mid = message.get("id")
    if not isinstance(mid, str) or not mid:
        log.debug("onebot images not staged: the message has no id", session_key=state.key)
        return
    home = app.paths.home

    def stage() -> StageOutcome:
        roots = media_roots(cfg.media_roots, home=home, cwd=Path.cwd())
        return stage_images(
            root,
            state.key,
            mid,
            paths,
            roots=roots,
            max_bytes=cfg.max_image_bytes,
            now_ms=now_ms,
        )

    try:
        outcome = await anyio.to_thread.run_sync(stage)
    except OSError as exc:
        log.warning("onebot images not staged", session_key=state.key, error=str(exc))
        return
    for path, reason in outcome.refused:
        log.debug("onebot image refused", session_key=state.key, path=path, reason=reason)
    if outcome.staged is not None:
        log.debug(
            "onebot images staged",
            session_key=state.key,
            message_id=mid,
            images=len(outcome.staged.images),
        )


async def sweep_staging(app: App, now_ms: int) -> None:
    """Remove staged directories older than ``compat.stagingTtlMs`` at ``now_ms`` (the
    daemon may call this at start too; the first user message does anyway)."""
    root, ttl_ms = app.memory_root(), app.config.config.compat.staging_ttl_ms
    try:
        removed = await anyio.to_thread.run_sync(lambda: clean_staging(root, now_ms, ttl_ms))
    except OSError as exc:
        log.warning("staging cleanup failed", error=str(exc))
        return
    if removed:
        log.info("staging cleanup", removed=len(removed))


def note_archived(app: App, key: str, token: str, dirs: tuple[Path, ...]) -> None:
    """An answered archive took images from these staged directories."""
    if dirs:
        _of(app).releases.setdefault(key, {})[token] = dirs


async def release_settled(app: App, state: SessionState) -> None:
    """Remove the staged copies of this session's archives that are final now; forget
    those of archives rolled back (their copies wait for the next archive)."""
    pending = _of(app).releases.get(state.key)
    if not pending:
        return
    ast = state.archive
    done: list[Path] = []
    for token in list(pending):
        if token in ast.pending:
            continue
        dirs = pending.pop(token)
        settled = ast.settled.get(token)
        if settled is not None and settled.kept:
            done.extend(dirs)
    if not pending:
        _of(app).releases.pop(state.key, None)
    if done:
        await anyio.to_thread.run_sync(lambda: release_staged(done))
