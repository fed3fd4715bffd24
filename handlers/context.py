"""Per-request context handed to every handler.

The one non-obvious part is `commit_guard`: PROTOCOL.md §2 says a cancelled
request that "has not committed anything" is abandoned. A handler enters the
guard right before it writes durable state; from then on the request can no
longer be cancelled (by `$/cancelRequest`, its deadline or shutdown), so a
store transaction is either never started or always finished.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio


@dataclass
class ConnectionState:
    """What the protocol scopes to one connection: its capabilities (PROTOCOL.md §4)."""

    conn_id: int
    peer_pid: int | None = None
    peer_uid: int | None = None
    initialized: bool = False
    capabilities: dict[str, bool] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)

    def capability(self, name: str) -> bool:
        """Before `initialize` a connection is assumed capable (a bare client, a CLI)."""
        if not self.initialized:
            return True
        return bool(self.capabilities.get(name, False))


@dataclass
class RequestContext:
    """Identity and cancellation state of one request."""

    request_id: str
    method: str
    session_id: str | None
    connection: ConnectionState
    now_ms: int
    scope: anyio.CancelScope | None = None
    committed: bool = False

    @contextmanager
    def commit_guard(self) -> Iterator[None]:
        """Make the rest of the request uncancellable before the first durable write."""
        self.committed = True
        if self.scope is not None:
            self.scope.deadline = math.inf
        with anyio.CancelScope(shield=True):
            yield
