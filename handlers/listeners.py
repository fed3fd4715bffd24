"""The host events the bridge forwards (PROTOCOL.md §4 `initialize.listeners`).

One list, in the protocol's order: the method table (`handlers.registry`) marks these
methods as listeners from it, and `initialize` lists them, so the two cannot disagree
and neither module has to import the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from handlers.app import App

LISTENER_METHODS = ("agent/inbox/inserted", "agent/pre-step", "agent/disposed", "session/event")
"""Every method that is a host event, in the order `initialize` lists them."""


def listeners(app: App | None = None) -> list[str]:
    """Host events the bridge must forward to this daemon; `session/event` only while
    passive archiving is on (``app.passive_scope``)."""
    if app is not None and app.passive_scope == "off":
        return [n for n in LISTENER_METHODS if n != "session/event"]
    return list(LISTENER_METHODS)
