"""Session-scoped methods of the platform: prompt/sections and agent/disposed."""

from __future__ import annotations

from typing import Any

from handlers.app import App
from handlers.context import RequestContext
from handlers.params import SessionParams
from handlers.sections import sections_answer


async def prompt_sections(app: App, params: SessionParams, ctx: RequestContext) -> dict[str, Any]:
    """Restore a session's sections after a restart: loads (and recovers) its store."""
    state = await app.sessions.get(params.session.id)
    return await sections_answer(app, state, ctx)


async def agent_disposed(app: App, params: SessionParams, ctx: RequestContext) -> None:
    """Release the session's in-memory state; nothing on disk changes."""
    app.sessions.dispose(params.session.id)
