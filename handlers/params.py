"""Boundary models of the protocol's parameters (PROTOCOL.md §3, §4).

Unknown fields are allowed everywhere: the host may grow its payloads, and a
newer bridge must keep working against this daemon.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engine.store import safe_session_id
from handlers.errors import HandlerError, invalid_params


class Wire(BaseModel):
    """Base of every params model: extra fields kept, camelCase as on the wire."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Session(Wire):
    """`session` of every session-scoped call; only `id` is required."""

    id: str = Field(min_length=1, max_length=4096)
    origin: str | None = None
    delegationDepth: int | None = None
    agentPreset: str | None = None
    cwd: str | None = None

    @field_validator("id")
    @classmethod
    def _memory_key_is_safe(cls, value: str) -> str:
        """Refuse ids that cannot name a memory directory (`.`, `..`, …) up front."""
        safe_session_id(value)
        return value

    @property
    def is_subagent(self) -> bool:
        """PROTOCOL.md §3: origin "subagent" or a positive delegation depth."""
        return self.origin == "subagent" or (self.delegationDepth or 0) > 0


class NoParams(Wire):
    """Methods that take nothing (extra fields ignored)."""


class OptionalSessionParams(Wire):
    """`ping` may name a session: it then queues behind that session's requests."""

    session: Session | None = None


class SessionParams(Wire):
    """Methods that only name a session."""

    session: Session


class Capabilities(Wire):
    """Host capabilities; a missing one is taken as absent (reference §3.1)."""

    tokenMeter: bool = False
    systemPrompt: bool = False
    tools: bool = False
    attachments: bool = False


class InitializeParams(Wire):
    """`initialize` params."""

    protocolVersion: int
    host: dict[str, Any] = Field(default_factory=dict)
    capabilities: Capabilities = Field(default_factory=Capabilities)


class SleepParams(Wire):
    """`debug/sleep` (only with the `debug_methods` setting): a controllable slow request."""

    ms: int = Field(ge=0, le=600_000)
    session: Session | None = None


M = TypeVar("M", bound=BaseModel)


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """One `{field, message, type}` per problem, with dotted field paths."""
    out: list[dict[str, Any]] = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "params"
        out.append({"field": loc, "message": err.get("msg", ""), "type": err.get("type", "")})
    return out


def parse_params(model: type[M], raw: Any) -> M:
    """Validate raw params or raise -32602 listing each field problem."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise HandlerError(
            -32602,
            "invalid params",
            {"errors": [{"field": "params", "message": "params must be an object"}]},
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise invalid_params(field_errors(exc)) from None
