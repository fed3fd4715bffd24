"""Text of the memory task block (dsh-rofm:memory-tasks), reference §1.2; owned by the scoring use case."""

from __future__ import annotations

from typing import TYPE_CHECKING

from handlers.context import RequestContext

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState


async def tasks_section_text(app: App, state: SessionState, ctx: RequestContext) -> str:
    """The section text for this session now; empty renders nothing."""
    return ""
