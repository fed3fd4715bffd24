"""Session-scoped methods of the platform: prompt/sections and agent/disposed."""

from __future__ import annotations

from typing import Any

from handlers.app import App
from handlers.context import RequestContext
from handlers.params import SessionParams
from handlers.sections import render_sections


async def prompt_sections(app: App, params: SessionParams, ctx: RequestContext) -> dict[str, Any]:
    """Restore a session's sections after a restart: loads (and recovers) its store."""
    await app.sessions.get(params.session.id)
    return {"sections": render_sections({}, ctx.connection), "startsRequestSeries": False}


async def agent_disposed(app: App, params: SessionParams, ctx: RequestContext) -> None:
    """Release the session's in-memory state; nothing on disk changes."""
    app.sessions.dispose(params.session.id)
