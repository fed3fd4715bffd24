"""Which requests may open a session that has no directory yet without creating one.

A request naming a new session id used to create `sessions/<id>/` whatever it did, so
a host that only asks (sections after a restart, a search, a status-like probe) for
ids that never write filled the memory root with empty directories. Such a request now
opens the session lazily (`handlers.sessions.session_access`): the store is empty, as a
fresh directory would be, so the answer is the same, and the directory is made by the
first durable write.

The store makes its directory itself before any write of its own (folders, index,
telemetry, metas). The other files of a session directory, `recall-state.json` and
`archives-unreported.json`, are written by the handlers into it and need it to exist.
So a request may open lazily exactly when it can write only through the store:

* `prompt/sections`: renders; writes nothing for a session with no memory;
* `tools/call` of the tools in :data:`STORE_ONLY_TOOLS` (a `memory_judge` of unknown ids
  refuses; its telemetry is a store write);
* `agent/inbox/inserted` when no recall round runs (not a real user message, recall off
  for the session, no system prompt): a round remembers the message in
  `recall-state.json`, so that a retry of it never runs twice.

Everything else (`agent/pre-step`, `archive/commit`, `archive/abort`, any method added
later) gets a session with its directory, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from handlers.context import ConnectionState
from handlers.inbox import InboxParams, trigger_text
from handlers.tool_base import ToolCallParams

if TYPE_CHECKING:
    from handlers.app import App

__all__ = ["STORE_ONLY_TOOLS", "opens_lazily"]

STORE_ONLY_TOOLS = frozenset(
    {"memory_judge", "memory_recall", "memory_image", "memory_group_recall"}
)
"""Tools whose every durable write goes through the session's store (a tool added here
must keep it that way)."""


def opens_lazily(app: App, method: str, params: BaseModel, conn: ConnectionState) -> bool:
    """True when this request may open its session without creating its directory."""
    if method == "prompt/sections":
        return True
    if method == "tools/call":
        return isinstance(params, ToolCallParams) and params.name in STORE_ONLY_TOOLS
    if method == "agent/inbox/inserted" and isinstance(params, InboxParams):
        cfg = app.config.config
        runs_round = conn.capability("systemPrompt") and (
            trigger_text(params.message, params.session, cfg) is not None
        )
        return not runs_round
    return False
