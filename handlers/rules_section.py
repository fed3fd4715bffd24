"""Text of the memory-use rules (dsh-rofm:memory-rules), reference §1.13.6; owned by the scoring use case.

Independent of the recall block: it is shown from the first answer on, before any
recall (§1.13.6). `rules.enabled=false` is the rollback (no section, or only the QQ
channel rule in a channel session, §3.2.8).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.scoring.rules import rules_text
from handlers.context import RequestContext

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState


async def rules_section_text(app: App, state: SessionState, ctx: RequestContext) -> str:
    """The section text for this session now; empty renders nothing."""
    cfg = app.config.config
    return rules_text(
        compute_dates=cfg.recall.compute_dates,
        enabled=cfg.rules.enabled,
        channel=app.compat.status.is_channel(state.key),
    )
