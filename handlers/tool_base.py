"""What a model-facing tool is: its schema, its handler, its result, and the
`tools/call` request every handler receives.

The tool modules (`handlers.tool_*`) build their `Tool` from these; the table that
lists them and the `tools/call` use case are `handlers.tools`, which imports the tool
modules, so no tool module imports the table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

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

__all__ = ["EngineAnswer", "Tool", "ToolCallParams", "ToolHandler", "ToolRequest", "ToolResult"]


class EngineAnswer(Protocol):
    """What the engine's tool planners answer with (`SearchAnswer`, `ImageAnswer`,
    `GroupAnswer`, `JudgePlan`): the handler passes it on as it is."""

    @property
    def value(self) -> Any: ...
    @property
    def text(self) -> str: ...
    @property
    def is_error(self) -> bool: ...


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: the structured value and the text the model sees."""

    value: Any
    text: str
    is_error: bool = False

    @classmethod
    def of(cls, answer: EngineAnswer, *, is_error: bool = False) -> ToolResult:
        """The engine's answer as the result; `is_error` marks a refusal whatever the
        answer says."""
        return cls(answer.value, answer.text, is_error=is_error or answer.is_error)


@dataclass(frozen=True)
class ToolRequest:
    """One `tools/call` as its handler receives it: one value rather than five
    parameters, so every handler has the same signature and a new input is added here
    once, not in each tool."""

    app: App
    state: SessionState
    """The calling session: the only store a tool reads or writes (session isolation)."""
    arguments: dict[str, Any]
    """`params.arguments` parsed to an object (`handlers.tools.parse_arguments`)."""
    params: ToolCallParams
    ctx: RequestContext


ToolHandler = Callable[[ToolRequest], Awaitable[ToolResult]]


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
