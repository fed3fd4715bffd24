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
    `listener`: a host event the bridge must forward; `initialize` lists it.
    """

    name: str
    params: type[BaseModel]
    handler: Handler
    needs_enabled: bool = True
    debug: bool = False
    listener: bool = False


_METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("initialize", InitializeParams, system.initialize, needs_enabled=False),
        Method("ping", OptionalSessionParams, system.ping, needs_enabled=False),
        Method("status", NoParams, system.status, needs_enabled=False),
        Method("metrics", NoParams, system.metrics, needs_enabled=False),
        Method("config/reload", NoParams, system.config_reload, needs_enabled=False),
        Method("prompt/sections", SessionParams, session_methods.prompt_sections),
        Method("agent/disposed", SessionParams, session_methods.agent_disposed, listener=True),
        Method("agent/inbox/inserted", InboxParams, agent_inbox_inserted, listener=True),
        Method("tools/call", ToolCallParams, tools_call),
        Method("agent/pre-step", pre_step.PreStepParams, pre_step.pre_step, listener=True),
        Method("archive/commit", pre_step.ArchiveCommitParams, pre_step.archive_commit),
        Method("archive/abort", pre_step.ArchiveAbortParams, pre_step.archive_abort),
        Method("session/event", passive.SessionEventParams, passive.session_event, listener=True),
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


def listeners(app: App | None = None) -> list[str]:
    """Host events the bridge must forward to this daemon, in the protocol's order;
    `session/event` only while passive archiving is on (``app.passive_scope``)."""
    order = ["agent/inbox/inserted", "agent/pre-step", "agent/disposed", "session/event"]
    present = {n for n, m in _METHODS.items() if m.listener}
    if app is not None and app.passive_scope == "off":
        present.discard("session/event")
    return [n for n in order if n in present] + sorted(present - set(order))
