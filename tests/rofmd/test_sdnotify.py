"""Tests for rofmd.server.sdnotify and the shipped unit files, against real sockets and descriptors.

Notifications go to a real AF_UNIX datagram socket (as systemd's would); socket activation
is exercised with real listening sockets placed on free descriptor numbers (``start_fd``)
so the test process's fd 3 is never clobbered.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import os
import plistlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rofmd.server import sdnotify
from rofmd.server.sdnotify import (
    LAUNCHD_SOCKET_NAME,
    Notifier,
    inspect_listen_fds,
    launchd_sockets,
    listen_fds,
    unset_listen_env,
    watchdog_interval,
)

REPO = Path(__file__).resolve().parents[2]
UNITS = REPO / "systemd"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


# -- helpers ---------------------------------------------------------------------------------


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory with a short path: sun_path holds only 108 bytes (104 on macOS)."""
    path = Path(tempfile.mkdtemp(prefix="sdn-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def manager(short_dir: Path) -> Iterator[tuple[socket.socket, str]]:
    """A stand-in for the service manager's notification socket."""
    path = str(short_dir / "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    try:
        yield sock, path
    finally:
        sock.close()


def receive(sock: socket.socket) -> str:
    return sock.recv(65536).decode("utf-8")


def listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen()
    return sock


def free_fd_range(count: int) -> int:
    """First of ``count`` consecutive descriptor numbers that are not open."""
    base = 100
    while True:
        if all(not _is_open(fd) for fd in range(base, base + count)):
            return base
        base += count


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@pytest.fixture
def place_fds() -> Iterator[Callable[[list[int | None]], int]]:
    """Duplicate descriptors onto consecutive free numbers, as systemd lays them out.

    ``None`` leaves a hole (a number that is not open). The copies are inheritable, like
    descriptors inherited across exec, so the tests can see CLOEXEC being set.
    """
    placed: list[int] = []

    def place(fds: list[int | None]) -> int:
        base = free_fd_range(len(fds))
        for offset, fd in enumerate(fds):
            if fd is not None:
                os.dup2(fd, base + offset, inheritable=True)
                placed.append(base + offset)
        return base

    yield place
    for fd in placed:
        with contextlib.suppress(OSError):
            os.close(fd)


def activation_env(count: int, pid: int | None = None, names: str | None = None) -> dict[str, str]:
    env = {"LISTEN_PID": str(os.getpid() if pid is None else pid), "LISTEN_FDS": str(count)}
    if names is not None:
        env["LISTEN_FDNAMES"] = names
    return env


# -- Notifier ---------------------------------------------------------------------------------


def test_notifier_sends_each_message(manager: tuple[socket.socket, str]) -> None:
    sock, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path})
    assert notifier.enabled
    assert notifier.address == path

    assert notifier.ready()
    assert receive(sock) == "READY=1"
    assert notifier.ready("serving /run/user/1000/rofmd/rofmd.sock")
    assert receive(sock) == "READY=1\nSTATUS=serving /run/user/1000/rofmd/rofmd.sock"
    assert notifier.status("recalling 3 folders")
    assert receive(sock) == "STATUS=recalling 3 folders"
    assert notifier.reloading(123_456_789)
    assert receive(sock) == "RELOADING=1\nMONOTONIC_USEC=123456789"
    assert notifier.watchdog()
    assert receive(sock) == "WATCHDOG=1"
    assert notifier.stopping()
    assert receive(sock) == "STOPPING=1"
    assert notifier.errno(errno.EADDRINUSE)
    assert receive(sock) == f"ERRNO={errno.EADDRINUSE}"
    assert notifier.notify("EXTEND_TIMEOUT_USEC=5000000")
    assert receive(sock) == "EXTEND_TIMEOUT_USEC=5000000"


def test_status_text_cannot_inject_assignments(manager: tuple[socket.socket, str]) -> None:
    sock, path = manager
    assert Notifier({"NOTIFY_SOCKET": path}).status("bad\nREADY=1\r\nmore")
    assert receive(sock) == "STATUS=bad READY=1 more"


def test_reloading_uses_the_monotonic_clock_value(manager: tuple[socket.socket, str]) -> None:
    import time

    sock, path = manager
    before = time.monotonic_ns() // 1000
    assert Notifier({"NOTIFY_SOCKET": path}).reloading(time.monotonic_ns() // 1000)
    lines = receive(sock).split("\n")
    assert lines[0] == "RELOADING=1"
    key, value = lines[1].split("=")
    assert key == "MONOTONIC_USEC"
    assert before <= int(value) <= time.monotonic_ns() // 1000


@linux_only
def test_abstract_socket() -> None:
    name = f"rofmd-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(5)
        notifier = Notifier({"NOTIFY_SOCKET": f"@{name}"})
        assert notifier.address == b"\0" + name.encode()
        assert notifier.ready("ok")
        assert receive(sock) == "READY=1\nSTATUS=ok"
        assert notifier.watchdog()
        assert receive(sock) == "WATCHDOG=1"


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"NOTIFY_SOCKET": ""},
        {"NOTIFY_SOCKET": "relative/notify"},
        {"NOTIFY_SOCKET": "vsock:2:1"},
    ],
)
def test_without_a_usable_notify_socket_everything_is_a_no_op(environ: dict[str, str]) -> None:
    notifier = Notifier(environ)
    assert not notifier.enabled
    assert notifier.address is None
    results = [
        notifier.ready(),
        notifier.ready("x"),
        notifier.status("x"),
        notifier.stopping(),
        notifier.reloading(1),
        notifier.watchdog(),
        notifier.errno(1),
        notifier.notify("READY=1"),
    ]
    assert results == [False] * len(results)


def test_manager_gone_returns_false(short_dir: Path) -> None:
    path = short_dir / "notify"
    # Never existed: ENOENT.
    assert Notifier({"NOTIFY_SOCKET": str(path)}).ready() is False
    # Existed, manager went away (the file stays behind): ECONNREFUSED.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.close()
    notifier = Notifier({"NOTIFY_SOCKET": str(path)})
    assert notifier.watchdog() is False
    assert notifier.stopping() is False
    # Abstract name nobody listens on.
    assert Notifier({"NOTIFY_SOCKET": f"@rofmd-nobody-{uuid.uuid4().hex}"}).ready() is False


def test_a_path_too_long_for_sun_path_returns_false() -> None:
    assert Notifier({"NOTIFY_SOCKET": "/" + "x" * 200}).ready() is False


@linux_only
def test_full_manager_queue_does_not_block(manager: tuple[socket.socket, str]) -> None:
    """A manager that stops reading makes sendto fail with EAGAIN instead of blocking."""
    sock, path = manager
    notifier = Notifier({"NOTIFY_SOCKET": path})
    results = [notifier.status("x" * 1024) for _ in range(10_000)]
    assert results[0] is True
    assert False in results
    assert receive(sock).startswith("STATUS=")


# -- watchdog -----------------------------------------------------------------------------------


def test_watchdog_interval_is_half_the_timeout() -> None:
    assert watchdog_interval({"WATCHDOG_USEC": "30000000"}, 1234) == 15.0
    assert watchdog_interval({"WATCHDOG_USEC": "1000"}, 1234) == 0.0005


def test_watchdog_interval_checks_watchdog_pid() -> None:
    env = {"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1234"}
    assert watchdog_interval(env, 1234) == 15.0
    assert watchdog_interval(env, 4321) is None
    assert watchdog_interval({**env, "WATCHDOG_PID": "junk"}, 1234) is None


@pytest.mark.parametrize("value", [None, "", "0", "-5", "abc", "1.5"])
def test_watchdog_interval_disabled(value: str | None) -> None:
    env = {} if value is None else {"WATCHDOG_USEC": value}
    assert watchdog_interval(env, os.getpid()) is None


# -- socket activation --------------------------------------------------------------------------


def test_listen_fds_takes_listening_unix_sockets(
    short_dir: Path, place_fds: Callable[[list[int | None]], int]
) -> None:
    first = listener(short_dir / "a.sock")
    second = listener(short_dir / "b.sock")
    with first, second:
        base = place_fds([first.fileno(), second.fileno()])
        sockets = listen_fds(activation_env(2), os.getpid(), start_fd=base)
        assert [s.fileno() for s in sockets] == [base, base + 1]
        for sock in sockets:
            assert sock.family == socket.AF_UNIX
            assert sock.type == socket.SOCK_STREAM
            assert not os.get_inheritable(sock.fileno()), "passed fds must be close-on-exec"
        # The wrapped descriptor really is the listener: a client connects through it.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(short_dir / "b.sock"))
            sockets[1].settimeout(5)
            conn, _ = sockets[1].accept()
            with conn:
                client.sendall(b"ping\n")
                assert conn.recv(16) == b"ping\n"
        for sock in sockets:
            sock.detach()  # the place_fds fixture closes the numbers


def test_listen_fds_skips_unusable_descriptors_with_reasons(
    short_dir: Path, place_fds: Callable[[list[int | None]], int]
) -> None:
    good = listener(short_dir / "good.sock")
    dgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # neither bound nor listening
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    file_fd = os.open(short_dir / "plain.txt", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fds: list[int | None] = [
            file_fd,
            dgram.fileno(),
            good.fileno(),
            idle.fileno(),
            tcp.fileno(),
            None,
        ]
        base = place_fds(fds)
        env = activation_env(len(fds), names="file:dgram:rofmd:idle:tcp:hole")
        result = inspect_listen_fds(env, os.getpid(), start_fd=base)

        assert [s.fileno() for s in result.sockets] == [base + 2]
        assert result.names == ["rofmd"]
        skipped = {s.name: (s.fd, s.reason) for s in result.skipped}
        assert list(skipped) == ["file", "dgram", "idle", "tcp", "hole"]
        assert skipped["file"] == (base, "not a socket")
        assert "SOCK_DGRAM" in skipped["dgram"][1]
        assert "not listening" in skipped["idle"][1]
        assert "AF_INET" in skipped["tcp"][1]
        assert skipped["hole"][0] == base + 5
        assert "not an open descriptor" in skipped["hole"][1]

        # Skipped descriptors stay open (not ours to close), even after garbage collection,
        # and are close-on-exec like the used one.
        gc.collect()
        for offset in range(5):
            assert _is_open(base + offset)
            assert not os.get_inheritable(base + offset)
        for sock in result.sockets:
            sock.detach()
    finally:
        os.close(file_fd)
        for sock in (good, dgram, idle, tcp):
            sock.close()


def test_listen_fds_names_default_to_unknown(
    short_dir: Path, place_fds: Callable[[list[int | None]], int]
) -> None:
    with listener(short_dir / "a.sock") as sock:
        base = place_fds([sock.fileno()])
        result = inspect_listen_fds(activation_env(1), os.getpid(), start_fd=base)
        assert result.names == ["unknown"]
        for taken in result.sockets:
            taken.detach()


def test_listen_pid_mismatch_passes_nothing(
    short_dir: Path, place_fds: Callable[[list[int | None]], int]
) -> None:
    with listener(short_dir / "a.sock") as sock:
        base = place_fds([sock.fileno()])
        assert listen_fds(activation_env(1, pid=os.getpid() + 1), os.getpid(), start_fd=base) == []
        # Not ours: left exactly as inherited.
        assert os.get_inheritable(base)


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"LISTEN_FDS": "1"},
        {"LISTEN_PID": "PID"},
        {"LISTEN_PID": "PID", "LISTEN_FDS": "0"},
        {"LISTEN_PID": "PID", "LISTEN_FDS": "many"},
        {"LISTEN_PID": "junk", "LISTEN_FDS": "1"},
    ],
)
def test_not_activated(environ: dict[str, str]) -> None:
    env = {k: v.replace("PID", str(os.getpid())) for k, v in environ.items()}
    result = inspect_listen_fds(env, os.getpid(), start_fd=free_fd_range(1))
    assert result.sockets == []
    assert result.skipped == []


def test_default_start_fd_is_three() -> None:
    assert sdnotify.SD_LISTEN_FDS_START == 3
    # Not activated, so fd 3 (whatever the test runner has there) is not touched.
    assert listen_fds({}, os.getpid()) == []


def test_unset_listen_env() -> None:
    env = {
        "LISTEN_PID": "1",
        "LISTEN_FDS": "1",
        "LISTEN_FDNAMES": "rofmd",
        "NOTIFY_SOCKET": "/run/x",
        "HOME": "/home/u",
    }
    unset_listen_env(env)
    assert env == {"NOTIFY_SOCKET": "/run/x", "HOME": "/home/u"}
    unset_listen_env(env)  # idempotent
    assert env == {"NOTIFY_SOCKET": "/run/x", "HOME": "/home/u"}


# -- launchd ---------------------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the non-macOS path")
def test_launchd_sockets_elsewhere_is_empty() -> None:
    assert launchd_sockets() == []
    assert launchd_sockets("other") == []


def test_launchd_sockets_without_libsystem_is_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdnotify, "_current_platform", lambda: "darwin")
    monkeypatch.setattr(sdnotify, "_load_launchd_api", lambda: None)
    assert launchd_sockets() == []


_ACTIVATE_PROTO = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.POINTER(ctypes.POINTER(ctypes.c_int)),
    ctypes.POINTER(ctypes.c_size_t),
)


@linux_only
@pytest.mark.parametrize("rc", [0, errno.ESRCH, errno.ENOENT])
def test_launchd_sockets_with_a_fake_launch_activate_socket(
    monkeypatch: pytest.MonkeyPatch, short_dir: Path, rc: int
) -> None:
    """Drive the real ctypes calling convention: a C-callable fake fills a malloc'ed array."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free.restype = None

    good = listener(short_dir / "l.sock")
    file_fd = os.open(short_dir / "f.txt", os.O_RDWR | os.O_CREAT, 0o600)
    passed = [os.dup(good.fileno()), file_fd]
    seen: dict[str, Any] = {}

    def fake(name: bytes, fds_out: Any, count_out: Any) -> int:
        seen["name"] = name
        if rc:
            return rc
        array = ctypes.cast(
            libc.malloc(ctypes.sizeof(ctypes.c_int) * len(passed)), ctypes.POINTER(ctypes.c_int)
        )
        for i, fd in enumerate(passed):
            array[i] = fd
        fds_out[0] = array
        count_out[0] = len(passed)
        return 0

    callback = _ACTIVATE_PROTO(fake)

    def free(pointer: Any) -> None:
        seen["freed"] = True
        libc.free(pointer)

    monkeypatch.setattr(sdnotify, "_current_platform", lambda: "darwin")
    monkeypatch.setattr(sdnotify, "_load_launchd_api", lambda: (callback, free))
    try:
        sockets = launchd_sockets()
        assert seen["name"] == LAUNCHD_SOCKET_NAME.encode()
        if rc:
            assert sockets == []
            assert "freed" not in seen
        else:
            assert [s.fileno() for s in sockets] == [passed[0]]
            assert not os.get_inheritable(passed[0])
            assert seen["freed"]
            assert _is_open(file_fd)  # the non-socket is left alone
            for sock in sockets:
                sock.close()
    finally:
        good.close()
        for fd in passed:
            with contextlib.suppress(OSError):
                os.close(fd)


# -- shipped unit files -----------------------------------------------------------------------------

Unit = dict[str, dict[str, list[str]]]
_LINE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9]*)=(?P<value>.*)$")


def parse_unit(path: Path) -> Unit:
    """A strict little parser for the unit-file subset we ship (repeated keys kept in order)."""
    unit: Unit = {}
    section: str | None = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            assert section not in unit, f"{path}:{number}: duplicate section"
            unit[section] = {}
            continue
        match = _LINE.match(line)
        assert match and section is not None, f"{path}:{number}: not a Key=Value line: {raw!r}"
        assert not raw.endswith("\\"), f"{path}:{number}: continuation lines not expected"
        unit[section].setdefault(match["key"], []).append(match["value"])
    return unit


def last(unit: Unit, section: str, key: str) -> str:
    return unit[section][key][-1]


@pytest.mark.parametrize("variant", ["user", "system"])
def test_service_units(variant: str) -> None:
    path = UNITS / "rofmd.service" if variant == "user" else UNITS / "system" / "rofmd.service"
    unit = parse_unit(path)
    svc = unit["Service"]
    assert last(unit, "Service", "Type") == "notify-reload"
    assert last(unit, "Service", "ExecStart").endswith("/rofmd serve")
    assert last(unit, "Service", "Restart") == "on-failure"
    assert last(unit, "Service", "WatchdogSec") == "30"
    assert last(unit, "Service", "TimeoutStopSec") == "20"
    assert last(unit, "Service", "StateDirectory") == "rofmd"
    assert last(unit, "Service", "UMask") == "0077"
    assert "ROFMD_LOG_FORMAT=json" in svc["Environment"]
    for key, value in {
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "read-only",
        "LockPersonality": "yes",
        "RestrictRealtime": "yes",
        "RestrictSUIDSGID": "yes",
        "SystemCallArchitectures": "native",
        "MemoryDenyWriteExecute": "yes",
        "RestrictAddressFamilies": "AF_UNIX",
    }.items():
        assert last(unit, "Service", key) == value, key
    assert "rofmd.socket" in unit["Unit"]["Requires"]
    assert unit["Install"]["Also"] == ["rofmd.socket"]
    assert "DynamicUser" not in svc, "a transient uid would fail rofmd's peer-uid check"
    if variant == "user":
        assert last(unit, "Service", "ExecStart") == "%h/.local/bin/rofmd serve"
        assert "%S/rofmd" in svc["ReadWritePaths"]
        assert "-%t/rofmd" in svc["ReadWritePaths"]
        # An empty bounding set makes user units fail with 218/CAPABILITIES.
        assert "CapabilityBoundingSet" not in svc
        assert "User" not in svc
    else:
        assert svc["CapabilityBoundingSet"] == [""]
        assert last(unit, "Service", "User") == "rofmd"
        assert "/run/rofmd" in svc["ReadWritePaths"]
        assert "ROFMD_SOCKET_PATH=/run/rofmd/rofmd.sock" in svc["Environment"]


@pytest.mark.parametrize("variant", ["user", "system"])
def test_socket_units(variant: str) -> None:
    path = UNITS / "rofmd.socket" if variant == "user" else UNITS / "system" / "rofmd.socket"
    unit = parse_unit(path)
    expected = "%t/rofmd/rofmd.sock" if variant == "user" else "/run/rofmd/rofmd.sock"
    assert unit["Socket"]["ListenStream"] == [expected]
    assert last(unit, "Socket", "SocketMode") == "0600"
    assert last(unit, "Socket", "DirectoryMode") == "0700"
    assert last(unit, "Socket", "Accept") == "no"
    assert last(unit, "Install", "WantedBy") == "sockets.target"
    if variant == "system":
        assert last(unit, "Socket", "SocketUser") == "rofmd"


def test_user_unit_mentions_linger_and_older_systemd() -> None:
    socket_text = (UNITS / "rofmd.socket").read_text(encoding="utf-8")
    service_text = (UNITS / "rofmd.service").read_text(encoding="utf-8")
    assert "loginctl enable-linger" in socket_text
    assert "ExecReload=/bin/kill -HUP $MAINPID" in service_text
    readme = (UNITS / "README.md").read_text(encoding="utf-8")
    for needle in (
        "systemctl --user daemon-reload",
        "systemctl --user enable --now rofmd.socket",
        "loginctl enable-linger",
        "launchctl bootstrap gui/$(id -u)",
    ):
        assert needle in readme


def test_launchd_plist() -> None:
    path = UNITS / "com.rofmd.daemon.plist"
    with path.open("rb") as fh:
        plist = plistlib.load(fh)
    assert plist["Label"] == "com.rofmd.daemon"
    assert path.name == plist["Label"] + ".plist"
    program = plist["ProgramArguments"]
    assert program[0].startswith("/") and program[0].endswith("/rofmd")
    assert program[1:] == ["serve"]
    sockets = plist["Sockets"]
    assert list(sockets) == [LAUNCHD_SOCKET_NAME]
    spec = sockets[LAUNCHD_SOCKET_NAME]
    assert spec["SockPathMode"] == 0o600 == 384
    assert spec["SockPathName"] == plist["EnvironmentVariables"]["ROFMD_SOCKET_PATH"]
    assert len(spec["SockPathName"].encode()) < 104 - 20, "leave room for long user names"
    assert plist["EnvironmentVariables"]["ROFMD_LOG_FORMAT"] == "json"
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["StandardOutPath"].startswith("/")
    assert plist["StandardErrorPath"].startswith("/")
    assert plist["Umask"] == 0o077
    text = path.read_text(encoding="utf-8")
    assert "launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/com.rofmd.daemon.plist" in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
@pytest.mark.parametrize("variant", ["user", "system"])
def test_systemd_analyze_verify(variant: str, short_dir: Path) -> None:
    """The units load without warnings (the executable is swapped for one that exists)."""
    source = UNITS if variant == "user" else UNITS / "system"
    for name in ("rofmd.socket", "rofmd.service"):
        text = (source / name).read_text(encoding="utf-8")
        text = re.sub(r"^ExecStart=\S+", f"ExecStart={sys.executable}", text, flags=re.M)
        (short_dir / name).write_text(text, encoding="utf-8")
    runtime = short_dir / "rt"
    runtime.mkdir(mode=0o700)
    args = ["systemd-analyze", *(["--user"] if variant == "user" else []), "verify", "--man=no"]
    proc = subprocess.run(
        [*args, "rofmd.socket", "rofmd.service"],
        cwd=short_dir,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_COLOR": "0"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = (proc.stdout + proc.stderr).splitlines()
    if any("Failed to initialize manager" in line for line in output):
        pytest.skip(f"systemd-analyze cannot run here: {output}")
    # systemd < 253 does not know Type=notify-reload yet (the unit comments say what to do).
    problems = [line for line in output if "notify-reload" not in line]
    assert proc.returncode == 0, output
    assert problems == []
