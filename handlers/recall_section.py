"""Text of the recall block (dsh-rofm:recall), reference §1.3 step 4; owned by the recall use case."""

from __future__ import annotations

from typing import TYPE_CHECKING

from handlers.context import RequestContext

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState


async def recall_section_text(app: App, state: SessionState, ctx: RequestContext) -> str:
    """The section text for this session now; empty renders nothing."""
    return ""
