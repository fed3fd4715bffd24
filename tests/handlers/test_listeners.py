"""Every listener `initialize` lists is a method the daemon answers."""

from __future__ import annotations

from handlers.listeners import LISTENER_METHODS, listeners
from handlers.registry import lookup, method_names


def test_listeners_are_answered_methods_in_protocol_order() -> None:
    assert set(LISTENER_METHODS) <= set(method_names(debug_methods=False))
    assert all(lookup(n, debug_methods=False).listener for n in LISTENER_METHODS)  # type: ignore[union-attr]
    assert not any(
        lookup(n, debug_methods=True).listener  # type: ignore[union-attr]
        for n in method_names(debug_methods=True)
        if n not in LISTENER_METHODS
    )
    assert listeners() == [
        "agent/inbox/inserted",
        "agent/pre-step",
        "agent/disposed",
        "session/event",
    ]
