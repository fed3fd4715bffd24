"""An answer JSON cannot hold becomes -32603 with an error id, never a dead daemon."""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from rofmd.server.connection import _unencodable
from rofmd.server.jsonrpc import encode

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _deep(n: int) -> Any:
    out: Any = 1
    for _ in range(n):
        out = [out]
    return out


@pytest.mark.parametrize("value", [2**70, _deep(300)])
def test_unencodable_answers_become_internal_errors(value: Any) -> None:
    message = {"jsonrpc": "2.0", "id": 7, "result": {"x": value}}
    with pytest.raises((TypeError, orjson.JSONEncodeError)):
        encode(message)
    out = orjson.loads(encode(_unencodable(message)))
    assert out["id"] == 7 and out["error"]["code"] == -32603
    assert len(out["error"]["data"]["errorId"]) == 12
    batch = orjson.loads(encode(_unencodable([message, message])))
    assert [a["error"]["code"] for a in batch] == [-32603, -32603]


async def test_send_survives_an_unencodable_answer() -> None:
    from rofmd.server.connection import Connection

    sent: list[bytes] = []

    class _Stream:
        async def send(self, data: bytes) -> None:
            sent.append(data)

    conn = Connection.__new__(Connection)
    conn.closed = False
    conn.stream = _Stream()  # type: ignore[assignment]
    conn._send_lock = anyio.Lock()
    await conn.send({"jsonrpc": "2.0", "id": 1, "result": 2**70})
    assert orjson.loads(sent[0])["error"]["code"] == -32603
