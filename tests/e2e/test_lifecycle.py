"""Daemon lifecycle: single instance, stale sockets, SIGTERM under load, hot reload."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.e2e.harness import DaemonProcess, LineSocket, request_line, running_daemon, short_tmpdir


def _wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def _status(path: Path) -> dict[str, Any]:
    s = LineSocket(path)
    try:
        result: dict[str, Any] = s.call(1, "status")["result"]
        return result
    finally:
        s.close()


def test_second_instance_refuses_and_names_the_pid() -> None:
    with running_daemon() as d:
        out = d.cli("serve", *d.path_args(), "--log-format", "console")
        assert out.returncode == 1
        assert f"pid {d.proc.pid}" in out.stdout + out.stderr
        # the first daemon is untouched
        assert _status(d.socket_path)["pid"] == d.proc.pid


@pytest.mark.skipif(
    not (hasattr(os, "confstr") and os.confstr("CS_GNU_LIBC_VERSION"))
    or "PYTHONMALLOC" in os.environ,
    reason="the re-execution is for glibc, and an explicit PYTHONMALLOC is kept",
)
def test_an_exec_started_daemon_runs_on_the_c_librarys_malloc() -> None:
    """`rofmd serve` re-executes itself on the C library's malloc (rofmd.server.allocator),
    keeping its pid. The harness's forked daemons start on it already, so this one is
    started as a user starts it."""
    with running_daemon(spawn="exec") as d:
        st = _status(d.socket_path)
        assert st["pid"] == d.proc.pid
        assert st["memory"]["allocator"] == "malloc"


def test_stale_socket_is_replaced_and_files_are_private() -> None:
    base = short_tmpdir()
    run = base / "run"
    run.mkdir(mode=0o755)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(run / "rofmd.sock"))
    stale.close()  # the file stays, nobody listens
    with running_daemon(base=base) as d:
        assert _status(d.socket_path)["pid"] == d.proc.pid
        assert os.stat(run).st_mode & 0o777 == 0o700
        assert os.stat(d.socket_path).st_mode & 0o777 == 0o600
    assert not (run / "rofmd.sock").exists()
    assert not (run / "rofmd.sock.lock").exists()


def test_non_socket_file_in_the_way_is_not_removed() -> None:
    base = short_tmpdir()
    run = base / "run"
    run.mkdir(mode=0o700)
    (run / "rofmd.sock").write_text("precious")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "rofmd",
            "serve",
            "--socket",
            str(run / "rofmd.sock"),
            "--config-dir",
            str(base / "cfg"),
            "--memory-root",
            str(base / "mem"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 1
    assert "is not a socket" in out.stdout + out.stderr
    assert (run / "rofmd.sock").read_text() == "precious"


def _sigterm_during(
    d: DaemonProcess,
    worker: Callable[[int, threading.Event], None],
    *,
    threads: int,
    busy: Callable[[], bool],
    timeout: float = 10.0,
) -> str:
    """Run `threads` workers against `d` until `busy()`, SIGTERM the daemon, and check it
    exits 0 with no worker error and no traceback; returns its log."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            worker(n, stop)
        except OSError:
            return  # the daemon closed the connection: expected at shutdown
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    _wait_for(busy, timeout=timeout)
    d.proc.send_signal(signal.SIGTERM)
    code = d.proc.wait(timeout=30)
    stop.set()
    for t in pool:
        t.join(timeout=30)
    log = d.log_text()
    assert code == 0, log[-3000:]
    assert not errors, errors
    assert "Traceback" not in log, log[-3000:]
    return log


def test_sigterm_during_load_exits_cleanly() -> None:
    with running_daemon(env={"ROFMD_SHUTDOWN_DEADLINE": "5"}) as d:
        answered = [0]

        def hammer(n: int, stop: threading.Event) -> None:
            s = LineSocket(d.socket_path, timeout=30)
            i = 0
            while not stop.is_set():
                s.send(request_line(i, "prompt/sections", {"session": {"id": f"load-{n}-{i % 5}"}}))
                s.send(
                    request_line(f"z{i}", "debug/sleep", {"ms": 20, "session": {"id": f"load-{n}"}})
                )
                if s.recv_line() is None or s.recv_line() is None:
                    return
                answered[0] += 2
                i += 1

        log = _sigterm_during(d, hammer, threads=6, busy=lambda: answered[0] > 100)
        assert not d.socket_path.exists()
        assert "shutdown requested" in log and "rofmd stopped" in log, log[-3000:]
        # nothing half-written anywhere in the memory root
        leftovers = [
            p for p in d.memory_root.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"
        ]
        assert leftovers == [], leftovers


def test_hot_reload_good_and_broken_config() -> None:
    with running_daemon(config={"compress": {"triggerPercent": 60}}) as d:
        assert _status(d.socket_path)["config"]["generation"] == 1
        cfg = d.config_dir / "config.json"
        # a good change is picked up by the watcher
        cfg.write_bytes(orjson.dumps({"compress": {"triggerPercent": 70}}))
        _wait_for(lambda: _status(d.socket_path)["config"]["generation"] == 2)
        # a broken file keeps the last good config and says why
        cfg.write_text('{"compress": {"triggerPercent": ')
        _wait_for(lambda: _status(d.socket_path)["config"]["lastReloadError"] is not None)
        st = _status(d.socket_path)
        assert st["config"]["generation"] == 2
        assert "config.json" in st["config"]["lastReloadError"]
        s = LineSocket(d.socket_path)
        answer = s.call(1, "config/reload")["result"]
        assert answer["ok"] is False and answer["generation"] == 2 and answer["errors"]
        cfg.write_text("[1, 2]")  # JSON, but not an object
        answer = s.call(2, "config/reload")["result"]
        assert answer["ok"] is False and "object" in answer["errors"][0]
        # fixing it recovers
        cfg.write_bytes(orjson.dumps({"compress": {"triggerPercent": 75}}))
        answer = s.call(3, "config/reload")["result"]
        assert answer["ok"] is True and answer["generation"] == 3 and answer["errors"] == []
        s.close()
        _wait_for(lambda: _status(d.socket_path)["config"]["lastReloadError"] is None)


def test_sighup_reloads_without_a_watcher() -> None:
    with running_daemon(env={"ROFMD_WATCH_CONFIG": "0"}) as d:
        (d.config_dir / "config.local.json").write_bytes(
            orjson.dumps({"recall": {"mode": "legacy"}})
        )
        time.sleep(0.3)
        assert _status(d.socket_path)["config"]["generation"] == 1
        d.proc.send_signal(signal.SIGHUP)
        _wait_for(lambda: _status(d.socket_path)["config"]["generation"] == 2)


def test_broken_config_at_start_starts_on_defaults() -> None:
    base = short_tmpdir()
    (base / "cfg").mkdir()
    (base / "cfg" / "config.json").write_text("{oops")
    with running_daemon(base=base) as d:
        st = _status(d.socket_path)
        assert st["config"]["lastReloadError"] and "config.json" in st["config"]["lastReloadError"]
        assert st["enabled"] is True


def test_cli_status_reload_and_doctor() -> None:
    with running_daemon() as d:
        # a host's bridge, connected and initialized, is listed by status
        bridge = LineSocket(d.socket_path)
        init = bridge.call(
            0,
            "initialize",
            {
                "protocolVersion": 1,
                "host": {"name": "dsh-rofm", "version": "0.1.0"},
                "capabilities": {"systemPrompt": True, "tokenMeter": True, "tools": False},
            },
        )
        assert "result" in init, init
        out = d.cli("status", "--socket", str(d.socket_path), "--json")
        assert out.returncode == 0, out.stderr
        assert orjson.loads(out.stdout)["pid"] == d.proc.pid
        out = d.cli("status", "--socket", str(d.socket_path))
        assert out.returncode == 0 and f"pid {d.proc.pid}" in out.stdout
        assert "client       dsh-rofm 0.1.0" in out.stdout
        assert "capabilities systemPrompt, tokenMeter)" in out.stdout
        clients = _status(d.socket_path)["clients"]
        assert [(c["host"]["name"], c["capabilities"]) for c in clients] == [
            ("dsh-rofm", ["systemPrompt", "tokenMeter"])
        ]
        bridge.close()
        out = d.cli("reload", "--socket", str(d.socket_path), "--json")
        assert out.returncode == 0 and orjson.loads(out.stdout)["ok"] is True
        out = d.cli("doctor", *d.path_args(), "--json")
        report = orjson.loads(out.stdout)
        assert out.returncode == 0, report
        assert [c["name"] for c in report["checks"]] == [
            "config",
            "inert keys",
            "socket directory",
            "daemon",
            "memory root",
            "QQ compat",  # from the daemon's status: off here (no QQ plugin in its profile)
            "recall loops",
            "surface look-up",
            "store listing",
        ]
        compat = report["checks"][-4]
        assert compat["ok"] and "off" in compat["detail"]
        assert all(c["ok"] for c in report["checks"][-3:])
    # the daemon is gone now: doctor and status fail with a hint
    out = d.cli("doctor", *d.path_args())
    assert out.returncode == 1
    assert "FAIL  daemon" in out.stdout and "fix: start it" in out.stdout
    out = d.cli("status", "--socket", str(d.socket_path))
    assert out.returncode == 1 and "hint:" in out.stderr


def test_sigterm_while_archiving_leaves_every_store_consistent() -> None:
    from engine.store import open_session
    from tests.archive_fixtures import Surface, pre_step_params

    caps = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}
    with running_daemon(env={"ROFMD_SHUTDOWN_DEADLINE": "5"}) as d:
        archived = [0]

        def archiver(n: int, stop: threading.Event) -> None:
            s = LineSocket(d.socket_path, timeout=30)
            s.call(0, "initialize", {"protocolVersion": 1, "capabilities": caps})
            i = 0
            while not stop.is_set():
                surf = Surface()
                surf.system()
                for t in range(26):  # ~19k tokens: 80% of a window above the small-window guard
                    surf.turn_pair(t, 300)
                p = pre_step_params(surf, session=f"arc-{n}-{i}", percent=80)
                s.send(request_line(i + 1, "agent/pre-step", p))
                line = s.recv_line()
                if line is None:
                    return
                if b'"folders"' in line:
                    archived[0] += 1
                i += 1

        _sigterm_during(d, archiver, threads=4, busy=lambda: archived[0] >= 6, timeout=60)
        sessions = sorted((d.memory_root / "sessions").iterdir())
        assert len(sessions) >= 6
        for sdir in sessions:
            store = open_session(d.memory_root, sdir.name)
            report = store.load_report
            # nothing half-written: no incomplete folder removed, no corrupt folder,
            # and the index names exactly the folders on disk
            assert not report.removed_incomplete and not report.corrupt_folders, sdir.name
            on_disk = sorted(p.name for p in sdir.iterdir() if p.name.startswith("mem-"))
            assert sorted(e.id for e in store.index) == on_disk, sdir.name
