"""`memory_group_recall` over `tools/call` (reference §3.2.10, v1.4.2).

The QQ owner, in a private chat, reads what the groups' memories hold. Listed by
`initialize` only while QQ compatibility is active and `compat.crossChat.enabled` is not
false; a call still runs the handler when that changed since (the bridge registered the
tool at `initialize`), and it is refused as disabled.

Authorise first, then read: the config and the live compat status are read once, here,
and `engine.recall.group_recall.authorize` decides from them, the caller's chat key and
the connection before any memory file is opened; a refusal is `isError` with a text
that holds no memory and no path. An authorised call reads the group stores in a worker
thread (`engine.recall.group_stores`) and writes nothing: no telemetry record, no recall
state, no directory (the caller's session opens lazily, `handlers.session_access`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import structlog

from engine import texts
from engine.recall.group_recall import (
    DEFAULT_LIMIT,
    LIMIT_MAX,
    OFFSET_MAX,
    authorize,
    parse_group_call,
    refusal_answer,
)
from engine.recall.group_stores import query_groups
from handlers.tool_base import Tool, ToolRequest, ToolResult
from handlers.tool_schema import integer_schema, object_schema, string_schema

if TYPE_CHECKING:
    from handlers.app import App

log = structlog.get_logger("rofmd.group_recall")

NAME = "memory_group_recall"

_TIME = {"type": ["string", "number"], "description": texts.GROUP_RECALL_PARAM_TIME}

PARAMETERS = object_schema(
    {
        "query": string_schema(texts.GROUP_RECALL_PARAM_QUERY),
        "group": {"type": ["string", "number"], "description": texts.GROUP_RECALL_PARAM_GROUP},
        "limit": integer_schema(
            texts.GROUP_RECALL_PARAM_LIMIT, minimum=1, maximum=LIMIT_MAX, default=DEFAULT_LIMIT
        ),
        "offset": integer_schema(
            texts.GROUP_RECALL_PARAM_OFFSET, minimum=0, maximum=OFFSET_MAX, default=0
        ),
        "timeFrom": _TIME,
        "timeTo": _TIME,
        "listGroups": {"type": "boolean", "description": texts.GROUP_RECALL_PARAM_LIST_GROUPS},
    },
    closed=True,
)


def listed(app: App) -> bool:
    """Whether `initialize` lists the tool (§3.2.10 注册条件)."""
    return app.compat.status.active and app.config.config.compat.cross_chat.enabled is not False


async def group_recall_tool(request: ToolRequest) -> ToolResult:
    """Run one memory_group_recall call."""
    app, state = request.app, request.state
    cfg = app.config.config
    status = app.compat.status
    session = request.params.session
    refusal = authorize(
        cfg,
        status,
        app.sessions.chat_key(session.id),
        subagent=session.is_subagent,
        tools_enabled=request.ctx.connection.capability("tools"),
    )
    if refusal is not None:
        log.info("memory_group_recall refused", session_key=state.key, reason=refusal.reason)
        answer = refusal_answer(refusal)
        return ToolResult.of(answer, is_error=True)
    call = parse_group_call(request.arguments, cfg)
    if call.error is not None:
        return ToolResult({"error": "secret-query"}, call.error, is_error=True)
    root = app.memory_root()
    answer = await anyio.to_thread.run_sync(lambda: query_groups(root, call, cfg))
    log.info(
        "memory_group_recall",
        session_key=state.key,
        groups=len(answer.value.get("groups", ())),
        total=answer.value.get("total"),
        list_groups=call.list_groups,
    )
    return ToolResult.of(answer)


TOOL = Tool(
    name=NAME,
    description=texts.GROUP_RECALL_DESCRIPTION,
    parameters=PARAMETERS,
    handler=group_recall_tool,
    available=listed,
    refuses_itself=True,
)
