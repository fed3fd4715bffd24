"""Every error code of PROTOCOL.md §2, against a real daemon on a real socket."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import orjson
import pytest

from tests.e2e.harness import DaemonProcess, LineSocket, request_line, running_daemon


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    """One default daemon for the module's tests that need nothing else: each uses its
    own connections and sessions, and none changes the config (the tests with another
    config or a broken memory root start their own)."""
    with running_daemon() as d:
        yield d


def test_ping_initialize_status(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    assert s.call(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {"pong": True}}
    init = s.call(
        2,
        "initialize",
        {
            "protocolVersion": 1,
            "host": {"name": "dsh", "version": "0.2.1"},
            "capabilities": {"tokenMeter": True, "systemPrompt": True, "tools": True},
        },
    )["result"]
    assert init["protocolVersion"] == 1
    assert init["server"]["name"] == "rofmd"
    assert init["enabled"] is True
    assert [x["name"] for x in init["sections"]] == [
        "dsh-rofm:recall",
        "dsh-rofm:memory-tasks",
        "dsh-rofm:memory-rules",
    ]
    status = s.call(3, "status")["result"]
    for key in (
        "version",
        "pid",
        "uptimeSeconds",
        "config",
        "memoryRoot",
        "sessionsLoaded",
        "connections",
        "counters",
        "queueDepths",
        "tailer",
        "kernels",
        "compiled",
    ):
        assert key in status, key
    assert status["kernels"] in ("on", "not built")
    assert set(status["compiled"]) == {"recallLoops", "surfaceLookup", "storeListing"}
    assert status["pid"] == daemon.proc.pid
    assert status["memoryRoot"] == str(daemon.memory_root)
    assert status["config"]["generation"] == 1
    s.close()


def test_initialize_without_system_prompt_lists_no_sections(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    init = s.call(1, "initialize", {"protocolVersion": 1, "capabilities": {"tools": True}})
    assert init["result"]["sections"] == []
    sections = s.call(2, "prompt/sections", {"session": {"id": "s1"}})["result"]
    assert sections == {"sections": [], "startsRequestSeries": False}
    s.close()


def test_parse_error_keeps_connection_open(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    s.send(b"{not json\n")
    err = s.recv_json()
    assert err["id"] is None and err["error"]["code"] == -32700
    s.send(b"\xff\xfe\x00garbage\x80\x81 bytes\n")
    assert s.recv_json()["error"]["code"] == -32700
    assert s.call(5, "ping")["result"] == {"pong": True}
    s.close()


def test_invalid_requests(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    for bad in (
        b'"a string"',
        b"42",
        b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":3}',
        b'{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}',
        b"[]",
    ):
        s.send(bad + b"\n")
        answer = s.recv_json()
        assert answer["error"]["code"] == -32600, (bad, answer)
    assert s.call(9, "ping")["result"] == {"pong": True}
    s.close()


def test_method_not_found_and_invalid_params(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    answer = s.call(1, "no/such/method", {})
    assert answer["error"]["code"] == -32601
    answer = s.call(2, "prompt/sections", {"session": {}})
    assert answer["error"]["code"] == -32602
    fields = [e["field"] for e in answer["error"]["data"]["errors"]]
    assert fields == ["session.id"]
    answer = s.call(3, "prompt/sections", {"session": {"id": 5}, "x": 1})
    assert answer["error"]["code"] == -32602
    answer = s.call(4, "initialize", {"protocolVersion": 2})
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["supported"] == [1]
    answer = s.call(5, "prompt/sections", [1, 2])
    assert answer["error"]["code"] == -32602
    answer = s.call(6, "prompt/sections", {"session": {"id": ".."}})
    assert answer["error"]["code"] == -32602
    s.close()


def test_storage_error_is_answered_and_logged_once() -> None:
    # A memory root that is a file: the environment, not a bug, so -32003 with the
    # path and the errno (internal errors keep -32603 and their id: test_dispatcher).
    with running_daemon() as d:
        d.memory_root.parent.mkdir(parents=True, exist_ok=True)
        d.memory_root.write_text("not a directory")
        s = LineSocket(d.socket_path)
        for i in (1, 2):
            answer = s.call(i, "prompt/sections", {"session": {"id": "s1"}})
            assert answer["error"]["code"] == -32003, answer
            assert answer["error"]["data"]["reason"] in {"ENOTDIR", "EEXIST"}
            assert answer["error"]["data"]["path"].startswith(str(d.memory_root))
        assert s.call(3, "ping")["result"] == {"pong": True}
        s.close()
        deadline = time.monotonic() + 5
        records: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            records = [r for r in d.log_records() if r.get("event") == "storage unavailable"]
            if records:
                break
            time.sleep(0.05)
        errors = [r for r in records if r["level"] == "error"]
        assert len(errors) == 1, records
        assert errors[0]["method"] == "prompt/sections"
        assert errors[0]["session_id"] == "s1"
        assert "request_id" in errors[0]


def test_memory_disabled() -> None:
    with running_daemon(config={"enabled": False}) as d:
        s = LineSocket(d.socket_path)
        init = s.call(
            1,
            "initialize",
            {"protocolVersion": 1, "capabilities": {"tools": True, "systemPrompt": True}},
        )
        assert init["result"]["enabled"] is False
        assert init["result"]["tools"] == [] and init["result"]["sections"] == []
        assert init["result"]["listeners"] == []
        answer = s.call(2, "prompt/sections", {"session": {"id": "s"}})
        assert answer["error"]["code"] == -32001
        assert s.call(3, "ping")["result"] == {"pong": True}
        s.close()


def test_overloaded_queue() -> None:
    with running_daemon(env={"ROFMD_MAX_PENDING_PER_SESSION": "2"}) as d:
        s = LineSocket(d.socket_path)
        sess = {"id": "busy"}
        s.send(
            b"".join(request_line(i, "debug/sleep", {"ms": 300, "session": sess}) for i in range(6))
        )
        answers = {a["id"]: a for a in (s.recv_json() for _ in range(6))}
        codes = [answers[i].get("error", {}).get("code") for i in range(6)]
        # the first runs, two wait, the other three find the queue full
        assert codes.count(-32002) == 3, codes
        assert answers[0]["result"] == {"slept": 300}
        full = next(a for a in answers.values() if "error" in a)
        assert full["error"]["data"]["limit"] == 2
        # another session is not affected
        assert s.call(99, "debug/sleep", {"ms": 1, "session": {"id": "other"}})["result"]
        s.close()


def test_cancel_running_and_queued_request(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    sess = {"id": "c"}
    t0 = time.monotonic()
    s.send(request_line(1, "debug/sleep", {"ms": 20_000, "session": sess}))
    s.send(request_line(2, "debug/sleep", {"ms": 20_000, "session": sess}))
    s.send(request_line(3, "debug/sleep", {"ms": 10, "session": sess}))
    time.sleep(0.2)
    s.send(
        orjson.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}}) + b"\n"
    )
    queued = s.recv_json()
    assert queued["id"] == 2 and queued["error"]["code"] == -32800
    s.send(
        orjson.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}}) + b"\n"
    )
    running = s.recv_json()
    assert running["id"] == 1 and running["error"]["code"] == -32800
    assert s.recv_json() == {"jsonrpc": "2.0", "id": 3, "result": {"slept": 10}}
    assert time.monotonic() - t0 < 10
    # cancelling an unknown or finished id is harmless
    s.send(
        orjson.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 77}}) + b"\n"
    )
    assert s.call(4, "ping")["result"] == {"pong": True}
    s.close()


def test_request_timeout() -> None:
    with running_daemon(env={"ROFMD_REQUEST_TIMEOUT": "0.3"}) as d:
        s = LineSocket(d.socket_path)
        answer = s.call(1, "debug/sleep", {"ms": 5000})
        assert answer["error"]["code"] == -32603
        assert answer["error"]["data"]["reason"] == "timeout"
        assert answer["error"]["data"]["errorId"]
        s.close()


def test_line_too_long_closes_connection(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    payload = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * (
        10 * 1024 * 1024
    )
    s.send(payload + b'"}}\n')
    answer = s.recv_json()
    assert answer["error"]["code"] == -32600
    assert answer["error"]["data"]["limit"] == 8 * 1024 * 1024
    assert s.recv_line() is None  # closed
    s.close()
    s2 = LineSocket(daemon.socket_path)
    assert s2.call(1, "ping")["result"] == {"pong": True}
    s2.close()


def test_line_just_under_the_limit_is_served() -> None:
    with running_daemon(env={"ROFMD_MAX_MESSAGE_BYTES": "65536"}) as d:
        s = LineSocket(d.socket_path)
        head = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
        tail = b'"}}'
        pad = 65536 - len(head) - len(tail)
        s.send(head + b"y" * pad + tail + b"\n")
        assert s.recv_json()["result"] == {"pong": True}
        s.close()


def test_notifications_are_never_answered(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    s.send(orjson.dumps({"jsonrpc": "2.0", "method": "ping"}) + b"\n")
    s.send(orjson.dumps({"jsonrpc": "2.0", "method": "no/such"}) + b"\n")
    s.send(orjson.dumps({"jsonrpc": "2.0", "method": "prompt/sections", "params": {}}) + b"\n")
    assert s.call(7, "ping") == {"jsonrpc": "2.0", "id": 7, "result": {"pong": True}}
    s.close()


def test_batches(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path)
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "ping"},
        {"jsonrpc": "2.0", "method": "ping"},
        {"jsonrpc": "2.0", "id": "b", "method": "nope"},
        7,
        {
            "jsonrpc": "2.0",
            "id": "c",
            "method": "prompt/sections",
            "params": {"session": {"id": "b"}},
        },
    ]
    s.send(orjson.dumps(batch) + b"\n")
    answer = s.recv_json()
    assert isinstance(answer, list) and len(answer) == 4
    by_id = {a["id"]: a for a in answer if a["id"] is not None}
    assert by_id["a"]["result"] == {"pong": True}
    assert by_id["b"]["error"]["code"] == -32601
    assert by_id["c"]["result"]["startsRequestSeries"] is False
    assert next(a for a in answer if a["id"] is None)["error"]["code"] == -32600
    # a batch of notifications only is not answered at all
    s.send(orjson.dumps([{"jsonrpc": "2.0", "method": "ping"}]) + b"\n")
    assert s.call(8, "ping")["id"] == 8
    s.close()


def test_pipelined_burst_keeps_per_session_order(daemon: DaemonProcess) -> None:
    s = LineSocket(daemon.socket_path, timeout=60)
    lines = []
    for i in range(1000):
        session = {"id": f"sess-{i % 20}"}
        if i % 7 == 0:
            lines.append(request_line(i, "debug/sleep", {"ms": (i * 13) % 4, "session": session}))
        else:
            lines.append(request_line(i, "ping", {"session": session}))
    s.send(b"".join(lines))
    seen: dict[int, list[int]] = {}
    for _ in range(1000):
        answer = s.recv_json()
        assert "result" in answer, answer
        seen.setdefault(answer["id"] % 20, []).append(answer["id"])
    assert sorted(seen) == list(range(20))
    for ids in seen.values():
        assert ids == sorted(ids)
        assert len(ids) == 50
    status = s.call("st", "status")["result"]
    assert status["counters"]["requests"] >= 1000
    s.close()


def test_peer_with_another_uid_is_refused(daemon: DaemonProcess) -> None:
    if os.getuid() != 0:
        pytest.skip("needs root to connect as another uid")
    import subprocess
    import sys

    # Open the door on purpose: the uid check must hold even when permissions do not.
    os.chmod(daemon.base, 0o755)
    os.chmod(daemon.socket_path.parent, 0o755)
    os.chmod(daemon.socket_path, 0o666)
    script = (
        "import os, socket, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(10)\n"
        f"s.connect({str(daemon.socket_path)!r})\n"
        "try:\n"
        '    s.sendall(b\'{"jsonrpc":"2.0","id":1,"method":"ping"}\\n\')\n'
        "except OSError:\n"
        "    pass\n"
        "data = b''\n"
        "try:\n"
        "    data = s.recv(100)\n"
        "except OSError:\n"
        "    pass\n"
        "sys.stdout.write(repr(data))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "b''"
    s = LineSocket(daemon.socket_path)
    status = s.call(1, "status")["result"]
    assert status["refusedPeers"] == 1
    s.close()
