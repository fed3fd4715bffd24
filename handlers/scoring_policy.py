"""How scoring gates archiving: backpressure and the heuristic fallback (reference §3.0.4).

The pre-step use case asks `archive_gate` before it archives. The scoring use
case owns the answer: with `scoring.fallback: "never"` and more than
`scoring.maxPending` folders waiting, archiving pauses (better to keep the
context than to create memories that can never be recalled); with
`onPressure`/`always` pending folders are scored heuristically instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from handlers.context import RequestContext

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState


@dataclass(frozen=True)
class ArchiveGate:
    """Whether this pre-step may archive, and the warnings to report."""

    allowed: bool
    warnings: tuple[str, ...] = ()


async def archive_gate(
    app: App, state: SessionState, ctx: RequestContext, *, under_pressure: bool
) -> ArchiveGate:
    """Decide before archiving; may score pending folders heuristically as a side effect."""
    return ArchiveGate(True)
