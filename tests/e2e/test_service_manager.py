"""The daemon under a service manager: sd_notify messages and socket activation."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.harness import LineSocket, running_daemon, short_tmpdir, wait_ready


class _NotifyListener:
    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[str] = []

    def collect(self, until: str, timeout: float = 15.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue
            if any(until in m for m in self.messages):
                return self.messages
        raise AssertionError(f"{until!r} not received; got {self.messages}")


def test_notify_ready_reloading_watchdog_stopping() -> None:
    base = short_tmpdir()
    listener = _NotifyListener(base / "notify")
    env = {"NOTIFY_SOCKET": str(base / "notify"), "WATCHDOG_USEC": "400000"}
    with running_daemon(base=base, env=env) as d:
        msgs = listener.collect("READY=1")
        ready = next(m for m in msgs if "READY=1" in m)
        assert "STATUS=serving on" in ready
        listener.collect("WATCHDOG=1")
        listener.messages.clear()
        d.proc.send_signal(signal.SIGHUP)
        msgs = listener.collect("READY=1")
        reloading = next(m for m in msgs if "RELOADING=1" in m)
        usec = int(reloading.split("MONOTONIC_USEC=")[1].split("\n")[0])
        assert abs(usec - time.monotonic_ns() // 1000) < 60_000_000  # CLOCK_MONOTONIC
        assert msgs.index(reloading) < next(i for i, m in enumerate(msgs) if "READY=1" in m)
        listener.messages.clear()
        assert d.stop() == 0
        listener.collect("STOPPING=1")


def test_socket_activation_uses_the_inherited_socket() -> None:
    base = short_tmpdir()
    run = base / "run"
    run.mkdir(mode=0o700)
    path = run / "rofmd.sock"
    listen = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listen.bind(str(path))
    listen.listen(16)
    # Like systemd: the socket is fd 3, LISTEN_PID is the daemon's own pid (exec keeps it).
    launcher = (
        "import os, sys\n"
        f"os.dup2({listen.fileno()}, 3)\n"
        "os.environ['LISTEN_PID'] = str(os.getpid()); os.environ['LISTEN_FDS'] = '1'\n"
        "os.execv(sys.executable, [sys.executable, '-m', 'rofmd', 'serve', '--socket', "
        f"{str(base / 'unused.sock')!r}, '--config-dir', {str(base / 'cfg')!r}, "
        f"'--memory-root', {str(base / 'mem')!r}, '--log-format', 'json'])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROFMD_", "LISTEN_"))}
    with (base / "log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", launcher],
            pass_fds=(listen.fileno(),),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    listen.close()  # the daemon holds its own copy now
    try:
        wait_ready(path, proc)
        s = LineSocket(path)
        assert s.call(1, "status")["result"]["pid"] == proc.pid
        s.close()
        assert not (base / "unused.sock").exists()
        assert "handed over by systemd" in (base / "log").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    # an inherited socket belongs to the manager: the daemon leaves the file alone
    assert path.exists()
