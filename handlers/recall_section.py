"""Text of the recall block (dsh-rofm:recall), reference §1.3 step 4; owned by the recall use case.

The text is the recall state's `block`: exactly what the last change rendered, so it
is identical after a restart (restored from recall-state.json v3) even when the
folders it shows were deleted since.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from handlers.context import RequestContext
from handlers.forget import ensure_hygiene
from handlers.recall_state import ensure_recall_state

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState


async def recall_section_text(app: App, state: SessionState, ctx: RequestContext) -> str:
    """The section text for this session now; empty renders nothing."""
    if not app.config.config.recall.enabled:
        return ""
    if (await ensure_hygiene(state)).paused:  # memory_control: the block is kept, not shown
        return ""
    rs = await ensure_recall_state(app, state)
    return rs.block
