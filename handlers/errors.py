"""Errors a handler answers with, as JSON-RPC error objects (PROTOCOL.md §2).

Handlers raise `HandlerError`; the dispatcher turns it into the error object.
Anything else escaping a handler is an internal error (-32603) with an error id
that matches the daemon's log line.
"""

from __future__ import annotations

import errno
from typing import Any

from engine.jsonio import temp_target
from engine.store.errors import StoreUnavailableError
from engine.store.session_dirs import SessionDirError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
MEMORY_DISABLED = -32001
OVERLOADED = -32002
STORAGE_UNAVAILABLE = -32003
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


#: errno values that mean "the store cannot be used as it is" (the environment, not a
#: bug): a full or read-only disk, a permission, a file where a directory should be
#: or the other way round, a symlink loop. Anything else stays an internal error.
STORAGE_ERRNOS: dict[int, str] = {
    code: name
    for name in (
        "ENOSPC",
        "EDQUOT",
        "EACCES",
        "EPERM",
        "EROFS",
        "ENOTDIR",
        "EISDIR",
        "ELOOP",
        "EEXIST",
        "ENAMETOOLONG",
        "EMFILE",
        "ENFILE",
        "EIO",
    )
    if (code := getattr(errno, name, None)) is not None
}


def storage_failure(exc: BaseException) -> HandlerError | None:
    """-32003 (PROTOCOL.md §2) for an exception caused by the environment's storage:
    an `OSError` with one of :data:`STORAGE_ERRNOS`, raised directly or as the cause
    or context of what the handler raised; None for anything else.

    `data.path` is the file the operating system named (a rename's target, an atomic
    write's target rather than its temp file; else ""), `data.reason` the errno name. The store's transactions roll back on any failure, so nothing was
    committed when this is answered.
    """
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, StoreUnavailableError):
            return HandlerError(
                STORAGE_UNAVAILABLE,
                f"storage unavailable: {cur}",
                {"path": cur.path, "reason": cur.reason},
            )
        if isinstance(cur, SessionDirError):
            return HandlerError(
                STORAGE_UNAVAILABLE,
                f"storage unavailable: {cur}",
                {"path": str(cur.path), "reason": "SESSION_MISMATCH"},
            )
        if isinstance(cur, OSError) and cur.errno in STORAGE_ERRNOS:
            reason = STORAGE_ERRNOS[cur.errno]
            # a rename names its target second; an atomic writer's temp file, its target
            named = cur.filename2 if isinstance(cur.filename2, str) else cur.filename
            path = temp_target(named) if isinstance(named, str) else ""
            return HandlerError(
                STORAGE_UNAVAILABLE,
                f"storage unavailable: {reason} {path}".rstrip(),
                {"path": path, "reason": reason},
            )
        cur = cur.__cause__ or cur.__context__
    return None
