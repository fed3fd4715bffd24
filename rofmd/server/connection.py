"""One client connection: NDJSON framing, batches, and answer writing.

Lines are split by hand rather than with a buffered text reader so the size
limit is enforced before a whole over-long line is held in memory twice, and so
invalid UTF-8 reaches the JSON parser (→ -32700) instead of killing the reader.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import anyio
import orjson
import structlog
from anyio.abc import ByteStream

from handlers.context import ConnectionState
from handlers.errors import INTERNAL_ERROR, INVALID_REQUEST
from rofmd.server.dispatcher import Dispatcher, Reply
from rofmd.server.jsonrpc import Call, encode, error_response, parse_line

log = structlog.get_logger("rofmd.conn")
_READ_CHUNK = 256 * 1024
# how long an over-long line's sender may keep writing before we hang up
_DISCARD_SECONDS = 5.0


class _Batch:
    """Collects the answers of one batch; the last one in sends them as one array."""

    def __init__(self, conn: Connection, size: int, expected: int) -> None:
        self._conn = conn
        self._slots: list[dict[str, Any] | None] = [None] * size
        self._missing = expected

    def slot(self, index: int) -> Reply:
        """The reply callback of the member at `index`."""

        async def reply(response: dict[str, Any]) -> None:
            self._slots[index] = response
            self._missing -= 1
            if self._missing == 0:
                await self._conn.answer([s for s in self._slots if s is not None])

        return reply


class Connection:
    """Reads calls from a stream, hands them to the dispatcher, writes the answers."""

    def __init__(
        self,
        stream: ByteStream,
        state: ConnectionState,
        dispatcher: Dispatcher,
        *,
        max_message_bytes: int,
    ) -> None:
        self.stream = stream
        self.state = state
        self._dispatcher = dispatcher
        self._max = max_message_bytes
        self._send_lock = anyio.Lock()
        self._outstanding = 0
        self._drained = anyio.Event()
        self._drained.set()
        self.closed = False
        self.read_scope: anyio.CancelScope | None = None

    async def send(self, message: Any) -> None:
        """Write one answer line; a vanished peer is not an error of ours."""
        if self.closed:
            return
        try:
            data = encode(message)
        except (TypeError, orjson.JSONEncodeError):
            # validation keeps unwritable values out; if one slips through, answer each
            # request with an internal error instead of letting the daemon die
            data = encode(_unencodable(message))
        async with self._send_lock:
            try:
                await self.stream.send(data)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self.closed = True

    async def answer(self, message: Any) -> None:
        """Send one expected answer (an object, or a batch's array) and count it done."""
        try:
            await self.send(message)
        finally:
            self._outstanding -= 1
            if self._outstanding == 0:
                self._drained.set()

    def _expect(self) -> None:
        self._outstanding += 1
        if self._drained.is_set():
            self._drained = anyio.Event()

    async def serve(self) -> None:
        """Read until EOF (or the line limit), then wait for this connection's answers."""
        with anyio.CancelScope() as scope:
            self.read_scope = scope
            await self._read_loop()
        while self._outstanding:
            await self._drained.wait()

    async def _read_loop(self) -> None:
        buf = bytearray()
        scan_from = 0
        while True:
            try:
                chunk = await self.stream.receive(_READ_CHUNK)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            except OSError:
                return
            buf += chunk
            while True:
                nl = buf.find(b"\n", scan_from)
                if nl < 0:
                    scan_from = len(buf)
                    if len(buf) > self._max:
                        await self._too_long()
                        return
                    break
                if nl > self._max:
                    await self._too_long()
                    return
                with memoryview(buf) as view, view[:nl] as head:
                    line = head.tobytes()  # one copy (`bytes(buf[:nl])` made two)
                del buf[: nl + 1]
                scan_from = 0
                self._handle_line(line)

    async def _too_long(self) -> None:
        """Answer -32600 and close. The peer may still be writing the rest of its line:
        we half-close (it reads our answer, then EOF) and discard its remaining bytes
        for a moment, so it sees the error instead of a broken pipe."""
        log.warning("line over the size limit; closing", limit=self._max)
        await self.send(
            error_response(
                None,
                INVALID_REQUEST,
                f"invalid request: line longer than {self._max} bytes",
                {"limit": self._max},
            )
        )
        self.closed = True
        send_eof = getattr(self.stream, "send_eof", None)
        if send_eof is not None:
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await send_eof()
        with anyio.move_on_after(_DISCARD_SECONDS):
            with contextlib.suppress(
                anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError
            ):
                while await self.stream.receive(_READ_CHUNK):
                    pass

    def _handle_line(self, line: bytes) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return
        parsed = parse_line(line)
        size = len(line)
        if not parsed.is_batch:
            item = parsed.calls[0]
            if isinstance(item, Call):
                if item.has_id:
                    self._expect()
                    self._dispatcher.submit(item, self.state, self.answer, size=size)
                else:
                    self._dispatcher.submit(item, self.state, _discard, size=size)
            else:
                self._expect()
                self._dispatcher.spawn(self.answer, item)
            return
        expected = sum(1 for c in parsed.calls if not isinstance(c, Call) or c.has_id)
        batch: _Batch | None = None
        if expected:
            self._expect()  # the whole batch is one answer
            batch = _Batch(self, len(parsed.calls), expected)
        for index, item in enumerate(parsed.calls):
            if isinstance(item, Call):
                reply = batch.slot(index) if batch is not None and item.has_id else _discard
                self._dispatcher.submit(item, self.state, reply, size=size)
            elif batch is not None:
                self._dispatcher.spawn(batch.slot(index), item)


async def _discard(response: dict[str, Any]) -> None:
    """Notifications are never answered (PROTOCOL.md §2)."""


def _unencodable(message: Any) -> Any:
    """-32603 with an error id in place of an answer JSON cannot hold (an integer beyond
    64 bits, nesting deeper than orjson writes); a batch keeps one answer per request."""
    if isinstance(message, list):
        return [_unencodable(m) for m in message]
    error_id = uuid.uuid4().hex[:12]
    log.error("answer not encodable", error_id=error_id)
    rid = message.get("id") if isinstance(message, dict) else None
    if not isinstance(rid, str | int) or isinstance(rid, bool):
        rid = None
    return error_response(rid, INTERNAL_ERROR, "internal error", {"errorId": error_id})
