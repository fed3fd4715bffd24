"""`rofmd status` / `rofmd reload`: a short import closure, one blocking request.

A client command costs what it imports (issue 10: `rofmd status` took 302 ms, importing
the engine, pydantic and numpy for one request). These tests run the commands in a
fresh interpreter against a real daemon and fail when their import closure pulls a
heavy module back; and they pin the pieces that made it short (the socket path without
the settings, `rofmd.wire.call_once`) to the behaviour they replace.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from rofmd.server.settings import DaemonSettings
from rofmd.socket_location import client_socket_path
from rofmd.wire import ConnectionLost, RpcError, call_once
from tests.e2e.harness import running_daemon, short_tmpdir

HEAVY = (
    "anyio",
    "asyncio",
    "engine",
    "handlers",
    "importlib.metadata",
    "numpy",
    # orjson brings dataclasses, inspect, uuid and datetime: 40% of a status; the
    # one-shot request and `--json` use the standard library's json
    "orjson",
    "pydantic",
    "pydantic_core",
    "pydantic_settings",
    "rofmd.host.client",
    "rofmd.cli.engine_cli",
    "rofmd.cli.repair_log_cli",
    "rofmd.cli.service_install",
    "rofmd.server.jsonrpc",
    "rofmd.server.settings",
    "rofmd.host.simulate",
    "structlog",
    "typing",  # 6% of a status, for names that are annotations only
    # what xml.sax.saxutils brings (`rofmd install-service`'s plist escaping): 40 ms
    "email",
    "http",
    "ssl",
    "urllib.request",
    "xml",
)
"""Modules (and their submodules) a status or reload command must not import."""

_PROBE = """
import sys
from rofmd.cli.main import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as fh:
    fh.write("\\n".join(sorted(sys.modules)))
sys.exit(code)
"""


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def _run(
    tmp: Path, env: dict[str, str], *args: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    out = tmp / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(out), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    return done, out.read_text().splitlines()


def test_status_and_reload_import_no_heavy_module(tmp_path: Path) -> None:
    with running_daemon() as d:
        sock = str(d.socket_path)
        done, modules = _run(tmp_path, d.env, "status", "--socket", sock, "--json")
        assert done.returncode == 0, done.stderr
        assert orjson.loads(done.stdout)["pid"] == d.proc.pid
        assert _heavy(modules) == []
        assert "rofmd.wire" in modules  # the probe saw the command's own imports
        done, modules = _run(tmp_path, d.env, "status", "--socket", sock)
        assert done.returncode == 0 and f"pid {d.proc.pid}" in done.stdout
        assert _heavy(modules) == []
        done, modules = _run(tmp_path, d.env, "reload", "--socket", sock)
        assert done.returncode == 0 and "config reloaded" in done.stdout
        assert _heavy(modules) == []
        # the socket from the environment, as `rofmd serve` reads it
        env = {**d.env, "ROFMD_SOCKET_PATH": sock}
        done, modules = _run(tmp_path, env, "status", "--json")
        assert done.returncode == 0 and orjson.loads(done.stdout)["pid"] == d.proc.pid
        assert _heavy(modules) == []
    done, modules = _run(tmp_path, d.env, "status", "--socket", sock)
    assert done.returncode == 1 and "cannot reach the daemon" in done.stderr
    assert "hint:" in done.stderr and _heavy(modules) == []


def test_engine_commands_still_get_their_parser(tmp_path: Path) -> None:
    done, modules = _run(
        tmp_path, dict(os.environ), "engine", "list", "--memory-root", str(tmp_path / "mem")
    )
    assert done.returncode == 0, done.stderr
    assert "rofmd.cli.engine_cli" in modules


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"XDG_RUNTIME_DIR": "/run/user/1000"},
        {"XDG_RUNTIME_DIR": "relative/run"},
        {"ROFMD_SOCKET_PATH": "/srv/rofmd.sock"},
        {"ROFMD_SOCKET_PATH": "~/rofmd.sock"},
        {"ROFMD_SOCKET_PATH": "run/rofmd.sock", "XDG_RUNTIME_DIR": "/run/user/7"},
        {"rofmd_socket_path": "/lower/case.sock"},
    ],
)
def test_client_socket_path_is_the_settings_one(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.upper() in ("ROFMD_SOCKET_PATH", "XDG_RUNTIME_DIR")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert client_socket_path() == DaemonSettings().socket_path


@contextlib.contextmanager
def _server(answer: Callable[[socket.socket, bytes], object]) -> Iterator[Path]:
    """A one-connection Unix socket server that reads a request line and calls ``answer``."""
    base = short_tmpdir()
    path = base / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            line = conn.makefile("rb").readline()
            answer(conn, line)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        thread.join(timeout=5)
        listener.close()
        path.unlink(missing_ok=True)
        base.rmdir()


def test_call_once_matches_its_answer_and_maps_failures() -> None:
    def chatty(conn: socket.socket, line: bytes) -> None:
        request = orjson.loads(line)
        assert request == {"jsonrpc": "2.0", "id": 1, "method": "status", "params": {"x": 1}}
        conn.sendall(b'\n{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"p"}}\n')
        conn.sendall(b'{"jsonrpc":"2.0","id":1,"res')  # split across writes
        conn.sendall(b'ult":{"ok":true}}\n')

    with _server(chatty) as path:
        assert call_once(path, "status", {"x": 1}, timeout=5) == {"ok": True}

    def refuses(conn: socket.socket, line: bytes) -> None:
        conn.sendall(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}\n')

    with _server(refuses) as path, pytest.raises(RpcError) as err:
        call_once(path, "nope", timeout=5)
    assert err.value.code == -32601 and err.value.message == "no"

    with _server(lambda conn, line: None) as path, pytest.raises(ConnectionLost):
        call_once(path, "status", timeout=5)

    release = threading.Event()
    with _server(lambda conn, line: release.wait(5)) as path:
        with pytest.raises(TimeoutError):
            call_once(path, "status", timeout=0.2)
        release.set()

    with pytest.raises(FileNotFoundError):
        call_once(f"/tmp/rofmd-missing-{os.getpid()}.sock", "status", timeout=1)
