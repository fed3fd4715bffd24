"""Metrics through a real daemon: `rofmd metrics` and `GET /metrics` on the metrics
socket give Prometheus text that prometheus_client's parser reads, counting what
happened (requests by method and outcome, archives, folders, tools)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

import orjson
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.harness import running_daemon, short_tmpdir
from tests.e2e.test_archive_prestep import connect, conversation, params, result

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _http(path: Path, request: bytes) -> tuple[str, dict[str, str], bytes]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(request)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines)
    return status, headers, body


def test_metrics_count_what_happened() -> None:
    base = short_tmpdir()
    metrics_sock = base / "metrics" / "m.sock"
    with running_daemon(base=base, env={"ROFMD_METRICS_SOCKET": str(metrics_sock)}) as d:
        c = connect(d)
        sid = "metrics-1"
        answer = result(c.call(1, "agent/pre-step", params(conversation(), sid)))
        comp = answer["compaction"]
        assert comp is not None and comp["folders"]
        folders = comp["folders"]
        assert result(c.call(2, "archive/commit", {"session": {"id": sid}, "token": comp["token"]}))
        update = {"id": folders[0], "alpha": 0.8, "beta": 3, "keywords": ["a1", "b2", "c3"]}
        judge = {
            "session": {"id": sid},
            "turn": 2,
            "callId": "j",
            "name": "memory_judge",
            "arguments": {"updates": [{**update, "reason": "x"}]},
        }
        assert result(c.call(3, "tools/call", judge))["isError"] is False
        assert "error" in c.call(4, "no/such/method", {})

        out = d.cli("metrics", "--socket", str(d.socket_path))
        assert out.returncode == 0, out.stderr
        got = _samples(out.stdout)
        ok = (("outcome", "ok"),)
        assert got[("rofmd_requests_total", (("method", "agent/pre-step"), *ok))] == 1
        assert got[("rofmd_requests_total", (("method", "archive/commit"), *ok))] == 1
        assert got[("rofmd_requests_total", (("method", "other"), ("outcome", "error")))] == 1
        assert got[("rofmd_request_seconds_count", (("method", "agent/pre-step"),))] == 1
        assert got[("rofmd_archives_total", ())] == 1
        assert got[("rofmd_archived_folders_total", ())] == len(folders)
        assert got[("rofmd_tool_calls_total", (("outcome", "ok"), ("tool", "memory_judge")))] == 1
        assert got[("rofmd_judged_folders_total", ())] == 1
        assert got[("rofmd_sessions_loaded", ())] == 1
        assert got[("rofmd_pending_folders", ())] == len(folders) - 1

        counters = result(c.call(5, "status", {}))["counters"]
        assert counters["archives"] == 1 and counters["passiveArchives"] == 0
        assert counters["recalls"] == 0 and counters["requests"] >= 5 and counters["errors"] == 1

        # the same text over HTTP on the metrics socket, private like the main one
        assert stat.S_IMODE(metrics_sock.stat().st_mode) == 0o600
        status, headers, body = _http(metrics_sock, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == "HTTP/1.0 200 OK"
        assert headers["Content-Type"] == "text/plain; version=0.0.4"
        assert int(headers["Content-Length"]) == len(body)
        scraped = _samples(body.decode())
        assert scraped[("rofmd_archives_total", ())] == 1
        # `rofmd metrics` was one more request since
        key = ("rofmd_requests_total", (("method", "metrics"), *ok))
        assert scraped[key] == got.get(key, 0) + 1
        assert _http(metrics_sock, b"GET /nope HTTP/1.0\r\n\r\n")[0] == "HTTP/1.0 404 Not Found"
        assert _http(metrics_sock, b"POST /metrics HTTP/1.0\r\n\r\n")[0].startswith("HTTP/1.0 405")
        as_json = d.cli("metrics", "--socket", str(d.socket_path), "--json")
        doc = orjson.loads(as_json.stdout)
        assert doc["contentType"] == "text/plain; version=0.0.4" and "rofmd_archives" in doc["text"]
        c.close()
    assert not metrics_sock.exists()  # removed at shutdown
