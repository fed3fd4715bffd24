"""Request ids over a real socket come back exactly as sent (issue 21), including
integers beyond 64 bits, which orjson alone would have answered as `1e+23`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.e2e.harness import DaemonProcess, LineSocket, running_daemon

BIG = "100000000000000000000000"


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


def ping(id_text: str) -> bytes:
    return f'{{"jsonrpc":"2.0","id":{id_text},"method":"ping"}}'.encode()


def test_a_big_integer_id_is_echoed_exactly(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    s.send(ping(BIG) + b"\n")
    raw = s.recv_line()
    assert raw is not None
    assert raw == f'{{"jsonrpc":"2.0","id":{BIG},"result":{{"pong":true}}}}'.encode()
    assert json.loads(raw)["id"] == 10**23  # a lossless reader gets the very integer back
    s.send(ping("-" + BIG) + b"\n")
    assert f'"id":-{BIG},'.encode() in (s.recv_line() or b"")
    s.close()


def test_a_batch_with_big_ids_and_odd_ids(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    batch = b"[" + b",".join([ping(BIG), ping("1.0"), ping("-0"), ping("1e400")]) + b"]\n"
    s.send(batch)
    raw = s.recv_line()
    assert raw is not None
    answers = json.loads(raw)
    assert [a.get("id") for a in answers] == [10**23, 1.0, 0, None]
    assert f'"id":{BIG},'.encode() in raw and b'"id":1.0,' in raw
    assert answers[3]["error"]["code"] == -32600
    # the connection goes on
    assert s.call(9, "ping")["result"] == {"pong": True}
    s.close()


def test_an_overlong_numeric_id_is_refused_not_converted(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    s.send(ping("9" * 5000) + b"\n")
    answer = s.recv_json()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert "id longer than" in answer["error"]["message"]
    assert s.call(10, "ping")["result"] == {"pong": True}
    s.close()


def test_a_cancel_finds_the_request_by_its_big_id(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    first, second = BIG + "1", BIG + "2"  # one float to orjson: 1e+24
    assert float(first) == float(second)

    def sleep(id_text: str, ms: int) -> bytes:
        params = f'{{"ms":{ms},"session":{{"id":"ids-cancel"}}}}'
        return f'{{"jsonrpc":"2.0","id":{id_text},"method":"debug/sleep","params":{params}}}\n'.encode()

    s.send(sleep("1", 400))
    # queued behind the sleep in the same session; one is cancelled by its exact id
    s.send(sleep(first, 0) + sleep(second, 0))
    s.send(f'{{"jsonrpc":"2.0","method":"$/cancelRequest","params":{{"id":{first}}}}}\n'.encode())
    raws = [s.recv_line() or b"" for _ in range(3)]
    by_id = {json.loads(r)["id"]: json.loads(r) for r in raws}
    assert by_id[int(first)]["error"]["code"] == -32800, raws
    assert "result" in by_id[int(second)] and "result" in by_id[1], raws
    assert any(f'"id":{first},'.encode() in r for r in raws)
    assert any(f'"id":{second},'.encode() in r for r in raws)
    s.close()
