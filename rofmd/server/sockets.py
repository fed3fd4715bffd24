"""The listening socket: directory safety, single-instance lock, stale sockets, peers.

PROTOCOL.md §1 is strict here because the socket is the daemon's only door: the
directory is 0700, the socket 0600, a second daemon on the same path refuses to
start and names the pid holding the lock, a stale socket file (nobody answers a
connect) is removed, a live one never, and peers of another uid are closed
before a byte is read (root is also accepted).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

# Linux limits sun_path to 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


class StartupError(Exception):
    """The daemon cannot start; the message is the one line it exits with."""


@dataclass
class InstanceLock:
    """An flock held for the daemon's lifetime; released by closing the fd."""

    path: Path
    fd: int

    def release(self) -> None:
        """Drop the lock and remove the file we own."""
        with contextlib.suppress(OSError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            os.close(self.fd)


def lock_path_for(socket_path: Path) -> Path:
    """The lock file beside the socket."""
    return socket_path.with_name(socket_path.name + ".lock")


def ensure_private_dir(directory: Path) -> None:
    """Create the socket directory 0700, or tighten one we own; refuse anyone else's."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StartupError(f"cannot create socket directory {directory}: {exc.strerror}") from None
    st = directory.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise StartupError(f"socket directory {directory} is not a directory")
    if st.st_uid != os.getuid():
        raise StartupError(
            f"socket directory {directory} belongs to uid {st.st_uid}, not to us ({os.getuid()})"
        )
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(directory, 0o700)


def acquire_instance_lock(socket_path: Path) -> InstanceLock:
    """Take the exclusive lock, or say which pid holds it."""
    path = lock_path_for(socket_path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise StartupError(
                f"another rofmd (pid {holder}) is running on {socket_path} (lock {path})"
            ) from None
        raise StartupError(f"cannot lock {path}: {exc.strerror}") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return InstanceLock(path, fd)


def socket_is_live(path: Path, timeout: float = 1.0) -> bool:
    """True when something accepts a connection on `path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(timeout)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def clear_stale_socket(path: Path) -> None:
    """Remove a dead socket file; refuse a live socket or a non-socket file."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise StartupError(f"{path} exists and is not a socket; move it away")
    if socket_is_live(path):
        raise StartupError(f"a live daemon already answers on {path}")
    path.unlink()


def bind_unix_socket(path: Path, backlog: int = 128) -> socket.socket:
    """Bind and listen with mode 0600 from the first instant (umask), then chmod to be sure."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise StartupError(
            f"socket path is too long ({len(os.fsencode(path))} bytes, max {MAX_SOCKET_PATH}): {path}"
        )
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot bind {path}: {exc.strerror}") from None
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


def peer_credentials(sock: socket.socket) -> tuple[int | None, int | None]:
    """(pid, uid) of the peer: SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS."""
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
        return pid, uid
    if sys.platform == "darwin":  # pragma: no cover - exercised on macOS only
        local_peercred, sol_local = 0x001, 0
        raw = sock.getsockopt(sol_local, local_peercred, 76)
        _version, uid = struct.unpack_from("=Ii", raw)
        return None, uid
    return None, None  # pragma: no cover


def peer_allowed(uid: int | None, own_uid: int) -> bool:
    """Same uid as the daemon, or root; an unknown uid is refused."""
    return uid is not None and (uid == own_uid or uid == 0)
