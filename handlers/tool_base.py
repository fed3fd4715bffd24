"""What a model-facing tool is: its schema, its handler, its result, and the
`tools/call` params every handler receives.

The tool modules (`handlers.tool_*`) build their `Tool` from these; the table that
lists them and the `tools/call` use case are `handlers.tools`, which imports the tool
modules, so no tool module imports the table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, model_validator

from handlers.context import RequestContext
from handlers.errors import invalid_params
from handlers.params import (
    IdStr,
    NameStr,
    SafeInt,
    Session,
    ToolArguments,
    Wire,
    tool_arguments_errors,
)

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

__all__ = ["Tool", "ToolCallParams", "ToolHandler", "ToolResult", "string_list_schema"]


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
