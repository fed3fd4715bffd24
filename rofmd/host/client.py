"""A typed async client for the rofmd protocol (PROTOCOL.md), used by the CLI and tests.

One connection, pipelined: every call gets a fresh id and waits for its own
answer, so many tasks may share a client. A background task reads answers and
hands each to the waiting call. A command that sends one request and exits
(`rofmd status`) uses :func:`rofmd.wire.call_once` instead: no event loop to start.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
from anyio.abc import ByteStream, TaskGroup

from rofmd.wire import CANCEL_METHOD, encode, unwrap
from rofmd.wire import ConnectionLost as ConnectionLost
from rofmd.wire import RpcError as RpcError


class DaemonUnreachable(OSError):
    """No daemon answers at ``path``: the socket is missing, refused, or not ours to
    open. Raised by :meth:`RofmdClient.connect` so a command can say so in one line; an
    OSError with the connect's errno, so code waiting for a daemon to come up still
    catches it as one."""

    def __init__(self, path: Path | str, cause: OSError) -> None:
        self.reason = cause.strerror or str(cause)
        super().__init__(cause.errno, f"cannot reach the daemon at {path}: {self.reason}")
        self.path = path


class _Waiter:
    def __init__(self) -> None:
        self.event = anyio.Event()
        self.message: Any = None


class RofmdClient:
    """Speak to a daemon over one Unix socket connection."""

    def __init__(self, stream: ByteStream, tg: TaskGroup) -> None:
        self._stream = stream
        self._tg = tg
        self._ids = itertools.count(1)
        self._waiters: dict[Any, _Waiter] = {}
        self._send_lock = anyio.Lock()
        self._closed = False

    @classmethod
    @asynccontextmanager
    async def connect(cls, path: Path | str) -> AsyncIterator[RofmdClient]:
        """Open a connection; closes it (and fails pending calls) on exit."""
        try:
            stream = await anyio.connect_unix(str(path))
        except OSError as exc:
            raise DaemonUnreachable(path, exc) from exc
        async with anyio.create_task_group() as tg:
            client = cls(stream, tg)
            tg.start_soon(client._read_loop)
            try:
                yield client
            finally:
                await client.aclose()
                tg.cancel_scope.cancel()

    async def aclose(self) -> None:
        """Close the connection."""
        self._closed = True
        await self._stream.aclose()
        self._fail_all()

    def _fail_all(self) -> None:
        for waiter in self._waiters.values():
            waiter.event.set()

    async def _read_loop(self) -> None:
        buf = b""
        try:
            while True:
                chunk = await self._stream.receive(256 * 1024)
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        self._deliver(orjson.loads(line))
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            self._closed = True
            self._fail_all()

    def _deliver(self, message: Any) -> None:
        if isinstance(message, list):
            key = tuple(sorted(str(m.get("id")) for m in message if isinstance(m, dict)))
            waiter = self._waiters.get(("batch", key))
        else:
            waiter = self._waiters.get(message.get("id"))
            if waiter is None and message.get("id") is None:
                waiter = self._waiters.get(("null",))
        if waiter is not None:
            waiter.message = message
            waiter.event.set()

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (tests use this for malformed input)."""
        async with self._send_lock:
            await self._stream.send(data)

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Send a request and return its `result`, raising `RpcError` on an error answer."""
        answer = await self.request(method, params, timeout=timeout)
        return unwrap(answer)

    async def request(
        self, method: str, params: Any = None, *, timeout: float | None = None, id_: Any = None
    ) -> dict[str, Any]:
        """Send a request and return the whole response object."""
        rid = next(self._ids) if id_ is None else id_
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        result: dict[str, Any] | None = await self._exchange(rid, encode(message), timeout)
        if result is None:
            raise ConnectionLost(f"connection closed before the answer to {method}")
        return result

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (no answer, ever)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send_raw(encode(message))

    async def cancel(self, request_id: Any) -> None:
        """Ask the daemon to abandon request `request_id` (`$/cancelRequest`)."""
        await self.notify(CANCEL_METHOD, {"id": request_id})

    async def batch(
        self, calls: Sequence[tuple[str, Any]], *, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Send a batch of requests; answers come back as one array, sorted by our ids."""
        ids = [next(self._ids) for _ in calls]
        body = [
            {"jsonrpc": "2.0", "id": i, "method": m, **({"params": p} if p is not None else {})}
            for i, (m, p) in zip(ids, calls, strict=True)
        ]
        key = ("batch", tuple(sorted(str(i) for i in ids)))
        message = await self._exchange(key, encode(body), timeout)
        if message is None:
            raise ConnectionLost("connection closed before the batch answer")
        order = {i: n for n, i in enumerate(ids)}
        answers: list[dict[str, Any]] = sorted(message, key=lambda m: order[m["id"]])
        return answers

    async def expect_unsolicited(self, *, timeout: float | None = None) -> dict[str, Any] | None:
        """Wait for an answer with `id: null` (parse errors, over-long lines)."""
        message: dict[str, Any] | None = await self._exchange(("null",), None, timeout)
        return message

    async def _exchange(self, key: Any, data: bytes | None, timeout: float | None) -> Any:
        """Register a waiter under `key`, send `data`, and wait for the matching answer
        (None if the connection closed first; no timeout when `timeout` is None or 0)."""
        waiter = _Waiter()
        self._waiters[key] = waiter
        try:
            if data is not None:
                await self.send_raw(data)
            with anyio.fail_after(timeout or None):
                await waiter.event.wait()
        finally:
            self._waiters.pop(key, None)
        return waiter.message

    # ---- typed helpers ----------------------------------------------------------

    async def initialize(
        self,
        capabilities: dict[str, bool] | None = None,
        host: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`initialize` with protocol version 1."""
        caps = capabilities or {
            "tokenMeter": True,
            "systemPrompt": True,
            "tools": True,
            "attachments": True,
        }
        result: dict[str, Any] = await self.call(
            "initialize",
            {"protocolVersion": 1, "host": host or {"name": "rofmd-client"}, "capabilities": caps},
        )
        return result

    async def ping(self, session_id: str | None = None) -> bool:
        """True when the daemon answers `{"pong": true}`."""
        params = {"session": {"id": session_id}} if session_id else None
        result = await self.call("ping", params)
        return bool(result.get("pong"))

    async def status(self) -> dict[str, Any]:
        """The daemon's `status`."""
        result: dict[str, Any] = await self.call("status")
        return result

    async def reload(self) -> dict[str, Any]:
        """`config/reload`: `{generation, ok, errors}`."""
        result: dict[str, Any] = await self.call("config/reload")
        return result

    async def prompt_sections(self, session_id: str) -> dict[str, Any]:
        """`prompt/sections` for a session."""
        result: dict[str, Any] = await self.call("prompt/sections", {"session": {"id": session_id}})
        return result
