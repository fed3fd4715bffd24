"""Errors a handler answers with, as JSON-RPC error objects (PROTOCOL.md §2).

Handlers raise `HandlerError`; the dispatcher turns it into the error object.
Anything else escaping a handler is an internal error (-32603) with an error id
that matches the daemon's log line.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
MEMORY_DISABLED = -32001
OVERLOADED = -32002
REQUEST_CANCELLED = -32800


class HandlerError(Exception):
    """A JSON-RPC error answer with a stable code and optional structured data."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        """The `error` member of a JSON-RPC response."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


def invalid_params(errors: list[dict[str, Any]], message: str = "invalid params") -> HandlerError:
    """-32602 with `data.errors`: one entry per field problem, as PROTOCOL.md §2 asks."""
    return HandlerError(INVALID_PARAMS, message, {"errors": errors})
