"""The method table: name → params model, handler, and the gates that apply.

The dispatcher in `rofmd` knows nothing about individual methods; it looks them
up here, validates params with the model, and calls the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from handlers import passive, pre_step, session_methods, system
from handlers.app import App
from handlers.context import RequestContext
from handlers.inbox import InboxParams, agent_inbox_inserted
from handlers.listeners import LISTENER_METHODS
from handlers.params import (
    InitializeParams,
    NoParams,
    OptionalSessionParams,
    SessionParams,
    SleepParams,
)
from handlers.tools import ToolCallParams, tools_call

Handler = Callable[[App, Any, RequestContext], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True)
class Method:
    """One protocol method.

    `needs_enabled`: answered -32001 when memory was disabled at start.
    `debug`: exists only with the `debug_methods` setting.
    `listener`: a host event the bridge must forward (`handlers.listeners`, which
    `initialize` lists).
    """

    name: str
    params: type[BaseModel]
    handler: Handler
    needs_enabled: bool = True
    debug: bool = False

    @property
    def listener(self) -> bool:
        """A host event the bridge forwards (`handlers.listeners.LISTENER_METHODS`)."""
        return self.name in LISTENER_METHODS


_METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("initialize", InitializeParams, system.initialize, needs_enabled=False),
        Method("ping", OptionalSessionParams, system.ping, needs_enabled=False),
        Method("status", NoParams, system.status, needs_enabled=False),
        Method("metrics", NoParams, system.metrics, needs_enabled=False),
        Method("config/reload", NoParams, system.config_reload, needs_enabled=False),
        Method("prompt/sections", SessionParams, session_methods.prompt_sections),
        Method("agent/disposed", SessionParams, session_methods.agent_disposed),
        Method("agent/inbox/inserted", InboxParams, agent_inbox_inserted),
        Method("tools/call", ToolCallParams, tools_call),
        Method("agent/pre-step", pre_step.PreStepParams, pre_step.pre_step),
        Method("archive/commit", pre_step.ArchiveCommitParams, pre_step.archive_commit),
        Method("archive/abort", pre_step.ArchiveAbortParams, pre_step.archive_abort),
        Method("session/event", passive.SessionEventParams, passive.session_event),
        Method("debug/sleep", SleepParams, system.debug_sleep, needs_enabled=False, debug=True),
    )
}


def lookup(name: str, *, debug_methods: bool) -> Method | None:
    """The method called `name`, or None (→ -32601)."""
    method = _METHODS.get(name)
    if method is None or (method.debug and not debug_methods):
        return None
    return method


def method_names(*, debug_methods: bool) -> list[str]:
    """Every method this daemon answers, sorted."""
    return sorted(n for n, m in _METHODS.items() if debug_methods or not m.debug)
