"""Start a real `rofmd serve` process on a real socket, for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson


def path_args(socket_path: Path, config_dir: Path, memory_root: Path) -> list[str]:
    """``--socket``, ``--config-dir`` and ``--memory-root``: where a `rofmd` command
    serves or finds a daemon, its config and its memory."""
    where = {"--socket": socket_path, "--config-dir": config_dir, "--memory-root": memory_root}
    return [arg for option, path in where.items() for arg in (option, str(path))]


@dataclass
class DaemonProcess:
    """A running daemon and the directories it uses."""

    proc: subprocess.Popen[bytes]
    socket_path: Path
    config_dir: Path
    memory_root: Path
    log_path: Path
    base: Path
    env: dict[str, str] = field(default_factory=dict)

    def log_text(self) -> str:
        """Everything the daemon logged so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines, parsed."""
        out: list[dict[str, Any]] = []
        for line in self.log_text().splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                rec = orjson.loads(line)
                if isinstance(rec, dict):
                    out.append(rec)
        return out

    def path_args(self) -> list[str]:
        """The options that point a `rofmd` command at this daemon."""
        return path_args(self.socket_path, self.config_dir, self.memory_root)

    def cli(
        self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """`rofmd ARGS` as a user would run it next to this daemon: its environment
        unless `env` is given, output captured as text."""
        return subprocess.run(
            [sys.executable, "-m", "rofmd", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(self.env if env is None else env),
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Signal the daemon and wait for it to exit; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def short_tmpdir() -> Path:
    """A directory short enough for a Unix socket path (108-byte limit)."""
    return Path(tempfile.mkdtemp(prefix="rofmd-t-", dir="/tmp"))


def request_line(id_: Any, method: str, params: Any = None) -> bytes:
    """One NDJSON request line."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return orjson.dumps(msg) + b"\n"


class LineSocket:
    """A blocking NDJSON socket for tests that need byte-level control."""

    def __init__(self, path: Path, timeout: float = 15.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self._buf = b""

    def send(self, data: bytes) -> None:
        """Send raw bytes."""
        self.sock.sendall(data)

    def recv_line(self) -> bytes | None:
        """The next line, or None at EOF."""
        while b"\n" not in self._buf:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line

    def recv_json(self) -> Any:
        """The next line as JSON; fails the test at EOF."""
        line = self.recv_line()
        assert line is not None, "connection closed"
        return orjson.loads(line)

    def call(self, id_: Any, method: str, params: Any = None) -> Any:
        """Send one request and return its answer (expects no interleaving)."""
        self.send(request_line(id_, method, params))
        return self.recv_json()

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def wait_ready(path: Path, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Poll until the daemon answers ping, or fail with its output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited early with {proc.returncode}")
        try:
            s = LineSocket(path, timeout=2)
            try:
                if s.call(0, "ping").get("result") == {"pong": True}:
                    return
            finally:
                s.close()
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError("daemon did not become ready")


@contextlib.contextmanager
def running_daemon(
    *,
    env: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    args: list[str] | None = None,
    base: Path | None = None,
) -> Iterator[DaemonProcess]:
    """Start `python -m rofmd serve` with private directories; stop it afterwards."""
    owned = base is None
    base = base or short_tmpdir()
    sock = base / "run" / "rofmd.sock"
    config_dir = base / "cfg"
    memory_root = base / "mem"
    config_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (config_dir / "config.json").write_bytes(orjson.dumps(config))
    log_path = base / "daemon.log"
    full_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("ROFMD_", "NOTIFY_", "LISTEN_"))
    }
    full_env.update({"ROFMD_DEBUG_METHODS": "1", "PYTHONUNBUFFERED": "1"})
    # a test daemon tails its own (absent) session logs, never the machine user's
    full_env["ROFMD_SESSIONS_DIR"] = str(base / "sessions")
    # nor detects the QQ plugins of the machine user's DSH profile (reference §3.2.1)
    full_env["DSH_PROFILE_DIR"] = str(base / "dsh-profile")
    full_env.update(env or {})
    where = path_args(sock, config_dir, memory_root)
    logging = ["--log-format", "json", "--log-level", "debug"]
    cmd = [sys.executable, "-m", "rofmd", "serve", *where, *logging, *(args or [])]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env)
    handle = DaemonProcess(proc, sock, config_dir, memory_root, log_path, base, full_env)
    try:
        wait_ready(sock, proc)
        yield handle
    except BaseException:
        sys.stderr.write(handle.log_text()[-5000:])
        raise
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if owned:
            shutil.rmtree(base, ignore_errors=True)
