"""`tools/call` (PROTOCOL.md §4): the model-facing tools and their schemas.

Each tool lives in its own module and is listed in `TOOLS`. `initialize` lists
the schemas of the tools available to the connection (hosts without the `tools`
capability get none, reference §3.1); `tools/call` validates the envelope,
finds the tool and returns its rendered output. A tool refusal is
`isError: true` with readable text, never a JSON-RPC error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import Field, model_validator

from handlers.context import RequestContext
from handlers.errors import HandlerError, invalid_params
from handlers.params import (
    IdStr,
    NameStr,
    SafeInt,
    Session,
    ToolArguments,
    Wire,
    tool_arguments_errors,
)
from handlers.sections import sections_answer

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: the structured value and the text the model sees."""

    value: Any
    text: str
    is_error: bool = False


ToolHandler = Callable[
    ["App", "SessionState", dict[str, Any], "ToolCallParams", RequestContext], Awaitable[ToolResult]
]


@dataclass(frozen=True)
class Tool:
    """A model-facing tool: JSON schema for the bridge, and its handler."""

    name: str
    description: str
    parameters: dict[str, Any]
    handler: ToolHandler
    available: Callable[[App], bool] = lambda app: True
    refuses_itself: bool = False
    """Called even while not `available`: the handler answers with its own refusal
    (a tool the bridge registered before a hot switch-off)."""

    def schema(self) -> dict[str, Any]:
        """`ToolSchema` as `initialize` lists it."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def string_list_schema(description: str) -> dict[str, Any]:
    """The JSON schema of a parameter that is a list of strings (labels, keywords)."""
    return {"type": "array", "items": {"type": "string"}, "description": description}


class ToolCallParams(Wire):
    """`tools/call` params. A JSON-string `arguments` is parsed here (orjson), so the
    tool sees an object whose numbers, strings and nesting are within the limits."""

    session: Session
    turn: SafeInt | None = None
    callId: IdStr | None = None
    name: NameStr = Field(min_length=1)
    arguments: ToolArguments = None

    @model_validator(mode="after")
    def _arguments_shape(self) -> ToolCallParams:
        if isinstance(self.arguments, dict):
            errors = tool_arguments_errors(self.name, self.arguments)
            if errors:
                raise invalid_params(errors)  # not a ValueError: pydantic lets it through
        return self


def _tools() -> dict[str, Tool]:
    """The tool table; tool modules are imported here so each stays self-contained."""
    from handlers.tool_control import TOOL as MEMORY_CONTROL
    from handlers.tool_forget import TOOL as MEMORY_FORGET
    from handlers.tool_group_recall import TOOL as MEMORY_GROUP_RECALL
    from handlers.tool_image import TOOL as MEMORY_IMAGE
    from handlers.tool_judge import TOOL as MEMORY_JUDGE
    from handlers.tool_recall import TOOL as MEMORY_RECALL

    tools: list[Tool] = [
        MEMORY_JUDGE,
        MEMORY_RECALL,
        MEMORY_IMAGE,
        MEMORY_FORGET,
        MEMORY_CONTROL,
        MEMORY_GROUP_RECALL,
    ]
    return {t.name: t for t in tools}


def tool_schemas(app: App) -> list[dict[str, Any]]:
    """Schemas of the tools this daemon serves now, in a stable order."""
    return [t.schema() for t in _tools().values() if t.available(app)]


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
    tool = _tools().get(params.name)
    if tool is None or not (tool.available(app) or tool.refuses_itself):
        raise HandlerError(-32601, f"unknown tool: {params.name}", {"tool": params.name})
    arguments = parse_arguments(params.arguments)
    state = await app.sessions.get(params.session.id)
    result = await tool.handler(app, state, arguments, params, ctx)
    app.metrics.count_tool(params.name, result.is_error)
    answer = {
        "value": result.value,
        "content": [{"type": "text", "text": result.text}],
        "isError": result.is_error,
    }
    answer.update(await sections_answer(app, state, ctx))
    return answer
