"""`tools/call` (PROTOCOL.md §4): the model-facing tools and their schemas.

Each tool lives in its own module (built from `handlers.tool_base`) and is listed in
`TOOLS`. `initialize` lists the schemas of the tools available to the connection (hosts
without the `tools` capability get none, reference §3.1); `tools/call` validates the
envelope, finds the tool and returns its rendered output. A tool refusal is
`isError: true` with readable text, never a JSON-RPC error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from handlers.context import RequestContext
from handlers.errors import HandlerError
from handlers.sections import sections_answer
from handlers.tool_base import Tool, ToolCallParams, ToolRequest
from handlers.tool_control import TOOL as MEMORY_CONTROL
from handlers.tool_forget import TOOL as MEMORY_FORGET
from handlers.tool_group_recall import TOOL as MEMORY_GROUP_RECALL
from handlers.tool_image import TOOL as MEMORY_IMAGE
from handlers.tool_judge import TOOL as MEMORY_JUDGE
from handlers.tool_recall import TOOL as MEMORY_RECALL

if TYPE_CHECKING:
    from handlers.app import App

__all__ = ["TOOLS", "ToolCallParams", "parse_arguments", "tool_schemas", "tools_call"]

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        MEMORY_JUDGE,
        MEMORY_RECALL,
        MEMORY_IMAGE,
        MEMORY_FORGET,
        MEMORY_CONTROL,
        MEMORY_GROUP_RECALL,
    )
}
"""The tool table, in the order `initialize` lists the schemas."""


def tool_schemas(app: App) -> list[dict[str, Any]]:
    """Schemas of the tools this daemon serves now, in a stable order."""
    return [t.schema() for t in TOOLS.values() if t.available(app)]


def parse_arguments(raw: dict[str, Any] | str | None) -> dict[str, Any]:
    """Arguments may be an object or a JSON string (a v4 `tool-call` block)."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise HandlerError(
            -32602,
            "invalid params",
            {"errors": [{"field": "arguments", "message": f"not valid JSON: {exc}"}]},
        ) from None
    if not isinstance(value, dict):
        raise HandlerError(
            -32602,
            "invalid params",
            {"errors": [{"field": "arguments", "message": "arguments must be a JSON object"}]},
        )
    return value


async def tools_call(app: App, params: ToolCallParams, ctx: RequestContext) -> dict[str, Any]:
    """Run one tool call and answer with its rendered output and the current sections."""
    tool = TOOLS.get(params.name)
    if tool is None or not (tool.available(app) or tool.refuses_itself):
        raise HandlerError(-32601, f"unknown tool: {params.name}", {"tool": params.name})
    arguments = parse_arguments(params.arguments)
    state = await app.sessions.get(params.session.id)
    result = await tool.handler(ToolRequest(app, state, arguments, params, ctx))
    app.metrics.count_tool(params.name, result.is_error)
    answer = {
        "value": result.value,
        "content": [{"type": "text", "text": result.text}],
        "isError": result.is_error,
    }
    answer.update(await sections_answer(app, state, ctx))
    return answer
