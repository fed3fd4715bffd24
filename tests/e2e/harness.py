"""Start a real `rofmd serve` process on a real socket, for end-to-end tests."""

from __future__ import annotations

import atexit
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
from typing import Any, Protocol

import orjson


def path_args(socket_path: Path, config_dir: Path, memory_root: Path) -> list[str]:
    """``--socket``, ``--config-dir`` and ``--memory-root``: where a `rofmd` command
    serves or finds a daemon, its config and its memory."""
    where = {"--socket": socket_path, "--config-dir": config_dir, "--memory-root": memory_root}
    return [arg for option, path in where.items() for arg in (option, str(path))]


SPAWN_ENV = "ROFMD_TEST_SPAWN"
"""``exec`` starts every harness daemon as ``python -m rofmd serve`` (the check that the
forked daemons behave as exec'd ones do); ``fork``, the default, forks them (`Zygote`)."""


class Process(Protocol):
    """What the tests use of a daemon's process: a `subprocess.Popen`, or a `Forked`."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


_ZYGOTE = r"""
import os, select, signal, sys, traceback
import orjson
# everything `rofmd serve` imports, once (rofmd.cli.main.cmd_serve imports them lazily)
import pydantic, rofmd.cli.main, rofmd.server.allocator, rofmd.server.daemon
import rofmd.server.logs, rofmd.server.settings
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
status_of = {}
def reap():
    while status_of:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        path = status_of.pop(pid, None)
        if path is not None:
            with open(path + ".tmp", "w") as f:
                f.write(str(os.waitstatus_to_exitcode(status)))
            os.replace(path + ".tmp", path)
def serve_one(req):
    code = 70
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(wake_r)
        os.close(wake_w)
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        code = rofmd.cli.main.main(req["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
pending = b""
while True:
    try:
        ready, _, _ = select.select([0, wake_r], [], [])
    except InterruptedError:
        continue
    if wake_r in ready:
        os.read(wake_r, 4096)
        reap()
    if 0 not in ready:
        continue
    chunk = os.read(0, 1 << 16)
    if not chunk:
        break
    pending += chunk
    while b"\n" in pending:
        line, pending = pending.split(b"\n", 1)
        req = orjson.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            serve_one(req)
        status_of[pid] = req["status"]
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()
    reap()
"""


class Zygote:
    """An interpreter that has imported what `rofmd serve` imports and forks a daemon
    on request: a real, separate `rofmd serve` process (its own pid, signals, socket,
    exit code) started without the ~1.3 s of CPU its imports cost each time. It runs on
    the C library's malloc, as `rofmd serve` re-executes itself to (rofmd.server.allocator),
    with one BLAS thread (no thread pool to fork). One per test process, on first use."""

    _current: Zygote | None = None

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DAEMON_ENV_PREFIXES)}
        env.update(_ZYGOTE_ENV)
        self.startup_env = _startup_env(env)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )

    @classmethod
    def shared(cls) -> Zygote:
        if cls._current is None or cls._current.proc.poll() is not None:
            cls._current = cls()
            atexit.register(cls._current.close)
        return cls._current

    def fork(self, args: list[str], env: Mapping[str, str], log_path: Path) -> Forked:
        """Fork `rofmd ARGS` with environment `env`, its output appended to `log_path`."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        status = Path(tempfile.mkdtemp(prefix="rofmd-z-", dir="/tmp")) / "exit"
        req = {
            "args": args,
            "env": dict(env),
            "log": str(log_path),
            "cwd": os.getcwd(),
            "status": str(status),
        }
        self.proc.stdin.write(orjson.dumps(req) + b"\n")
        self.proc.stdin.flush()
        return Forked(int(self.proc.stdout.readline()), status)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


class Forked:
    """A daemon forked by the `Zygote` (not a child of this process): its exit code is
    the one the zygote reaped and wrote to `status`."""

    def __init__(self, pid: int, status: Path) -> None:
        self.pid = pid
        self.status = status
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self.status.exists():
            self.returncode = int(self.status.read_text())
            shutil.rmtree(self.status.parent, ignore_errors=True)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"rofmd serve (pid {self.pid})", timeout or 0)
            time.sleep(0.002)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_DAEMON_ENV_PREFIXES = ("ROFMD_", "NOTIFY_", "LISTEN_")
_ZYGOTE_ENV = {"PYTHONMALLOC": "malloc", "PYTHONUNBUFFERED": "1", "OPENBLAS_NUM_THREADS": "1"}
"""The interpreter settings a forked daemon has from its zygote."""

_STARTUP_PREFIXES = ("PYTHON", "LD_", "MALLOC", "OPENBLAS", "OMP_", "MKL_")
"""Variables read when an interpreter (or the C library under it) starts, not later: a
forked daemon has its zygote's, so a test that sets another (a sitecustomize on
PYTHONPATH, another allocator) gets an exec'd daemon."""


def _startup_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(_STARTUP_PREFIXES)}


def start_rofmd(
    args: list[str], env: Mapping[str, str], log_path: Path, spawn: str | None = None
) -> Process:
    """``rofmd ARGS`` with environment `env`, its output appended to `log_path`: forked
    from the `Zygote` (``spawn`` ``fork``, the default unless $ROFMD_TEST_SPAWN says
    ``exec``, and `env` asks for no other interpreter start-up), else ``python -m rofmd``."""
    spawn = spawn or os.environ.get(SPAWN_ENV) or "fork"
    forked_env = {**env, **_ZYGOTE_ENV}
    kept = all(env.get(k, v) == v for k, v in _ZYGOTE_ENV.items())
    if spawn == "fork" and kept and Zygote.shared().startup_env == _startup_env(forked_env):
        return Zygote.shared().fork(args, forked_env, log_path)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "rofmd", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
        )


@dataclass
class DaemonProcess:
    """A running daemon and the directories it uses."""

    proc: Process
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


def wait_ready(path: Path, proc: Process, timeout: float = 20.0) -> None:
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
    spawn: str | None = None,
) -> Iterator[DaemonProcess]:
    """Start `rofmd serve` with private directories; stop it afterwards. ``spawn``:
    ``fork`` from the `Zygote` (the default, unless $ROFMD_TEST_SPAWN says ``exec``) or
    ``exec`` `python -m rofmd serve`, for a test where the new interpreter is the point."""
    owned = base is None
    base = base or short_tmpdir()
    sock = base / "run" / "rofmd.sock"
    config_dir = base / "cfg"
    memory_root = base / "mem"
    config_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (config_dir / "config.json").write_bytes(orjson.dumps(config))
    log_path = base / "daemon.log"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(_DAEMON_ENV_PREFIXES)}
    full_env.update({"ROFMD_DEBUG_METHODS": "1", "PYTHONUNBUFFERED": "1"})
    # a test daemon tails its own (absent) session logs, never the machine user's
    full_env["ROFMD_SESSIONS_DIR"] = str(base / "sessions")
    # nor detects the QQ plugins of the machine user's DSH profile (reference §3.2.1)
    full_env["DSH_PROFILE_DIR"] = str(base / "dsh-profile")
    full_env.update(env or {})
    where = path_args(sock, config_dir, memory_root)
    logging = ["--log-format", "json", "--log-level", "debug"]
    proc = start_rofmd(["serve", *where, *logging, *(args or [])], full_env, log_path, spawn)
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
