"""Protocol messages as bytes (PROTOCOL.md §2), and one request without an event loop.

Why a module of its own: a one-shot command (`rofmd status`, `rofmd reload`) sends one
request and prints one answer, and starting asyncio and anyio, or importing the
daemon's request models, costs several times that. What the daemon and every client
share lives here: the NDJSON encoding (integer ids beyond 64 bits written digit for
digit), the error types of an answer, and :func:`call_once`, one request over a
blocking Unix socket.

Importing this module imports nothing beyond the standard library's `socket` and `json`
(not even `typing`, whose names here are annotations only):
:func:`encode` (the daemon's and the async client's, once per message) binds orjson when
first called, and :func:`call_once` uses the standard library's `json`, whose import is
a tenth of orjson's (orjson brings dataclasses, inspect, uuid, datetime: about 40 ms of a
`rofmd status` that takes 100). Its one request is a few dozen bytes and its one answer a
few kilobytes, so the slower codec costs microseconds there.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # not imported at run time: see the module docstring
    from typing import Any, Final

__all__ = [
    "CANCEL_METHOD",
    "I64_MIN",
    "U64_MAX",
    "ConnectionLost",
    "RpcError",
    "call_once",
    "encode",
    "unwrap",
]

CANCEL_METHOD: Final = "$/cancelRequest"
I64_MIN: Final = -(2**63)
U64_MAX: Final = 2**64 - 1
"""The integers orjson writes and reads as integers."""

_CHUNK = 256 * 1024


class RpcError(Exception):
    """An error answer: `code`, `message` and `data` as the daemon sent them."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class ConnectionLost(Exception):
    """The daemon closed the connection before answering."""


def _wire_id(message: Any) -> Any:
    """A message whose integer id orjson cannot write (beyond 64 bits) carries it as a
    fragment: the other side gets exactly the digits that were sent."""
    if isinstance(message, list):
        return [_wire_id(m) for m in message]
    if isinstance(message, dict):
        rid = message.get("id")
        if type(rid) is int and not I64_MIN <= rid <= U64_MAX:
            import orjson  # here, not at the top: see the module docstring

            return {**message, "id": orjson.Fragment(str(rid).encode())}
    return message


def encode(message: Any) -> bytes:
    """One NDJSON line. Non-JSON values (a stray object in a result) become strings."""
    import orjson  # a lookup in sys.modules after the first call

    return orjson.dumps(_wire_id(message), default=str) + b"\n"


def _encode_once(message: dict[str, Any]) -> bytes:
    """:func:`encode`'s line for :func:`call_once`, with the standard library: the same
    JSON (compact, UTF-8, non-JSON values as strings; any integer written digit for
    digit, which json does natively)."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.encode() + b"\n"


def unwrap(answer: dict[str, Any]) -> Any:
    """The `result` of an answer; an error answer raises :class:`RpcError`."""
    if "error" in answer:
        err = answer["error"]
        raise RpcError(int(err.get("code", 0)), str(err.get("message", "")), err.get("data"))
    return answer.get("result")


def call_once(path: Path | str, method: str, params: Any = None, *, timeout: float) -> Any:
    """Send one request on a fresh connection and return its `result`.

    Raises ``OSError`` when the daemon cannot be reached, ``TimeoutError`` when no
    answer comes within ``timeout`` seconds, :class:`ConnectionLost` when the
    connection ends (or breaks) before the answer, :class:`RpcError` for an error
    answer.
    """
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        message["params"] = params
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        try:
            sock.sendall(_encode_once(message))
            answer = _answer(sock)
        except TimeoutError:
            raise
        except OSError as exc:
            raise ConnectionLost(f"connection lost before the answer to {method}: {exc}") from exc
    if answer is None:
        raise ConnectionLost(f"connection closed before the answer to {method}")
    return unwrap(answer)


def _answer(sock: socket.socket) -> dict[str, Any] | None:
    """The answer with id 1 (lines for anything else are skipped); None at EOF first."""
    buf = b""
    while True:
        chunk = sock.recv(_CHUNK)
        if not chunk:
            return None
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            message = json.loads(line)
            if isinstance(message, dict) and message.get("id") == 1:
                return message
