"""The metrics endpoint: `GET /metrics` for a Prometheus scraper, opt-in.

The protocol socket already answers `metrics`, but a scraper speaks HTTP. So, when
configured, the daemon also listens on a second Unix socket (`ROFMD_METRICS_SOCKET`,
0600 like the main one, its peers checked the same way) and/or a loopback TCP port
(`ROFMD_METRICS_PORT`; 127.0.0.1 only, since any local user may connect to it: metrics
hold counts and latencies, never conversation text). Both are off by default, and the
shipped units allow only AF_UNIX, so a port needs `RestrictAddressFamilies=` widened.

The server is deliberately small: one request per connection (HTTP/1.0 semantics,
`Connection: close`), a request head of at most 8 KiB read within 5 s, `GET` or `HEAD`
of `/metrics` (or `/`); anything else is a 404 / 405. No keep-alive, no chunking, no
third-party server.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import structlog
from anyio.abc import ByteStream, SocketAttribute, SocketListener, TaskGroup

from rofmd.server.sockets import (
    bind_unix_socket,
    clear_stale_socket,
    ensure_private_dir,
    peer_allowed,
    peer_credentials,
)

__all__ = ["HEAD_LIMIT", "MAX_CLIENTS", "metrics_listeners", "serve_metrics"]

log = structlog.get_logger("rofmd.metrics")

HEAD_LIMIT = 8192
READ_TIMEOUT = 5.0

Render = Callable[[], Awaitable[dict[str, Any]]]


def _response(status: str, body: bytes, content_type: str, *, head_only: bool) -> bytes:
    head = (
        f"HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode("ascii")
    return head if head_only else head + body


async def _read_head(stream: ByteStream) -> bytes | None:
    data = b""
    with anyio.move_on_after(READ_TIMEOUT):
        while b"\r\n\r\n" not in data and b"\n\n" not in data:
            if len(data) > HEAD_LIMIT:
                return None
            try:
                chunk = await stream.receive(4096)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return None
            data += chunk
        return data
    return None


async def _handle(stream: ByteStream, render: Render) -> None:
    async with stream:
        raw = stream.extra(SocketAttribute.raw_socket, None)
        if raw is not None and raw.family == socket.AF_UNIX:
            try:
                _, uid = peer_credentials(raw)
            except OSError:
                uid = None
            if not peer_allowed(uid, os.getuid()):
                return  # another user's process: closed before a byte is read
        head = await _read_head(stream)
        if head is None:
            return
        request_line = head.split(b"\n", 1)[0].decode("latin-1").strip()
        parts = request_line.split()
        method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
        text = "text/plain; charset=utf-8"
        if method not in ("GET", "HEAD"):
            answer = _response("405 Method Not Allowed", b"GET /metrics\n", text, head_only=False)
        elif target.split("?", 1)[0] not in ("/metrics", "/"):
            answer = _response("404 Not Found", b"GET /metrics\n", text, head_only=False)
        else:
            result = await render()
            body = str(result["text"]).encode("utf-8")
            answer = _response(
                "200 OK", body, str(result["contentType"]), head_only=method == "HEAD"
            )
        try:
            await stream.send(answer)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return


def metrics_listeners(unix_path: Path | None, port: int) -> list[socket.socket]:
    """The sockets to serve metrics on (none when neither is configured)."""
    socks: list[socket.socket] = []
    if unix_path is not None:
        ensure_private_dir(unix_path.parent)
        clear_stale_socket(unix_path)
        socks.append(bind_unix_socket(unix_path))
    if port > 0:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind(("127.0.0.1", port))
        tcp.listen(64)
        socks.append(tcp)
    return socks


MAX_CLIENTS = 16
"""Scrapes served at once; more wait in the listen backlog."""


async def serve_metrics(socks: list[socket.socket], render: Render) -> None:
    """Serve `GET /metrics` on ``socks`` until cancelled."""
    limiter = anyio.CapacityLimiter(MAX_CLIENTS)

    async def one(stream: ByteStream) -> None:
        async with limiter:
            await _handle(stream, render)

    async def accept_loop(listener: SocketListener, tg: TaskGroup) -> None:
        while True:
            try:
                stream = await listener.accept()
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError as exc:  # out of descriptors and the like: wait, go on
                log.warning("metrics accept failed", error=str(exc))
                await anyio.sleep(0.05)
                continue
            tg.start_soon(one, stream)

    listeners = [await SocketListener.from_socket(s) for s in socks]
    async with anyio.create_task_group() as tg:
        for sock, listener in zip(socks, listeners, strict=True):
            log.info("metrics endpoint serving", address=str(sock.getsockname()))
            tg.start_soon(accept_loop, listener, tg)
