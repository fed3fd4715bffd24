"""Service-manager integration: systemd notify / watchdog / socket activation, launchd sockets.

Pure Python on purpose: linking libsystemd would add a C dependency for what is a handful of
datagrams and environment variables, and the protocol is small and stable (see
``sd_notify(3)``, ``sd_listen_fds(3)``, ``sd_watchdog_enabled(3)``).

Everything here is defensive in one direction: a daemon must never die because its service
manager went away, sent a malformed variable, or is not there at all. Notifications report
failure by returning ``False``; socket activation returns an empty list and the caller binds
its own socket. Nothing in this module logs: the caller has structlog configured and decides
what is worth a log line (``inspect_listen_fds`` returns the reasons for skipped descriptors).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import socket
import stat
import sys
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "LAUNCHD_SOCKET_NAME",
    "LISTEN_ENV_VARS",
    "SD_LISTEN_FDS_START",
    "ListenFds",
    "Notifier",
    "SkippedFd",
    "inspect_listen_fds",
    "launchd_sockets",
    "listen_fds",
    "unset_listen_env",
    "watchdog_interval",
]

SD_LISTEN_FDS_START: Final = 3
"""First inherited descriptor under systemd socket activation (after stdin/stdout/stderr)."""

LISTEN_ENV_VARS: Final = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")
"""Variables that describe passed descriptors; children must not inherit them."""

LAUNCHD_SOCKET_NAME: Final = "Listeners"
"""Key of the socket entry in the ``Sockets`` dict of ``systemd/com.rofmd.daemon.plist``."""


def _notify_address(value: str | None) -> str | bytes | None:
    """Turn ``$NOTIFY_SOCKET`` into a ``sendto`` address, or None when it is unusable.

    ``@name`` is a Linux abstract socket (leading NUL byte, no file); ``/path`` a filesystem
    socket. Anything else (empty, relative, ``vsock:`` which needs AF_VSOCK) disables
    notification rather than guessing, as ``sd_notify`` does for unknown forms.
    """
    if not value:
        return None
    if value.startswith("@"):
        return b"\0" + os.fsencode(value[1:])
    if value.startswith("/"):
        return value
    return None


def _one_line(text: str) -> str:
    """Keep a value on one line: a newline would start a new ``KEY=`` assignment."""
    return " ".join(text.splitlines())


class Notifier:
    """Sends ``sd_notify`` messages to the service manager named by ``$NOTIFY_SOCKET``.

    Built from an environ mapping (usually ``os.environ``) rather than reading it on each
    call, so tests can point it at their own socket and so that the daemon keeps notifying
    even after it scrubs its environment for children. Without a usable ``NOTIFY_SOCKET``
    every method is a cheap no-op that returns False.

    Each message is one datagram, sent with a single non-blocking ``sendto`` on a fresh
    ``AF_UNIX``/``SOCK_DGRAM`` socket: a fresh socket keeps the object fork-safe and free of
    state to clean up, and non-blocking means a stuck manager can never stall the event loop.
    """

    __slots__ = ("_address",)

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._address = _notify_address(environ.get("NOTIFY_SOCKET"))

    @property
    def enabled(self) -> bool:
        """True when a notification socket is configured (not whether anyone listens)."""
        return self._address is not None

    @property
    def address(self) -> str | bytes | None:
        """The resolved ``sendto`` address (bytes with a leading NUL for abstract sockets)."""
        return self._address

    def notify(self, message: str) -> bool:
        """Send one raw ``KEY=VALUE\\n…`` message; True only if the datagram was accepted.

        Every error (manager gone: ECONNREFUSED/ENOENT, queue full: EAGAIN, permission) is
        swallowed: notification is advisory and must never take the daemon down.
        """
        if self._address is None:
            return False
        try:
            with socket.socket(
                socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
            ) as sock:
                sock.sendto(message.encode("utf-8"), self._address)
        except (OSError, ValueError):
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """Report start-up (or a reload) finished: ``READY=1``, plus ``STATUS=`` when given.

        Under ``Type=notify-reload`` this must also be sent after every reload, or systemd
        considers the reload still running.
        """
        lines = ["READY=1"]
        if status is not None:
            lines.append(f"STATUS={_one_line(status)}")
        return self.notify("\n".join(lines))

    def status(self, text: str) -> bool:
        """Set the one-line free-form status shown by ``systemctl status``."""
        return self.notify(f"STATUS={_one_line(text)}")

    def stopping(self) -> bool:
        """Report that a graceful shutdown began, so the manager does not think we hung."""
        return self.notify("STOPPING=1")

    def reloading(self, monotonic_usec: int) -> bool:
        """Report that a reload began (``Type=notify-reload``, systemd ≥ 253).

        ``monotonic_usec`` is CLOCK_MONOTONIC in microseconds, i.e.
        ``time.monotonic_ns() // 1000``; systemd uses it to tell this reload apart from an
        earlier one. Follow with ``ready()`` once the new configuration is in place.
        """
        return self.notify(f"RELOADING=1\nMONOTONIC_USEC={int(monotonic_usec)}")

    def watchdog(self) -> bool:
        """Ping the watchdog (``WATCHDOG=1``); see ``watchdog_interval`` for how often."""
        return self.notify("WATCHDOG=1")

    def errno(self, n: int) -> bool:
        """Report why the service failed as an errno number (shown by ``systemctl status``)."""
        return self.notify(f"ERRNO={int(n)}")


def _parse_positive_int(value: str | None) -> int | None:
    """Parse a decimal variable the way libsystemd does: junk or non-positive means absent."""
    if value is None:
        return None
    try:
        number = int(value.strip(), 10)
    except ValueError:
        return None
    return number if number > 0 else None


def watchdog_interval(environ: Mapping[str, str], pid: int) -> float | None:
    """Seconds between watchdog pings, or None when the watchdog is not enabled for us.

    ``WATCHDOG_USEC`` is the manager's timeout; pinging at half of it (as
    ``sd_watchdog_enabled(3)`` recommends) leaves room for a late event loop. When
    ``WATCHDOG_PID`` is set it must equal ``pid``: otherwise the variables were inherited
    from a parent process and the watchdog is someone else's.
    """
    usec = _parse_positive_int(environ.get("WATCHDOG_USEC"))
    if usec is None:
        return None
    watchdog_pid = environ.get("WATCHDOG_PID")
    if watchdog_pid is not None and _parse_positive_int(watchdog_pid) != pid:
        return None
    return usec / 2 / 1_000_000


@dataclass(frozen=True, slots=True)
class SkippedFd:
    """A passed descriptor that was not usable as the daemon's listening socket, and why."""

    fd: int
    name: str
    reason: str


@dataclass(slots=True)
class ListenFds:
    """Outcome of socket activation: usable listeners (with their names) and skipped fds."""

    sockets: list[socket.socket] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    skipped: list[SkippedFd] = field(default_factory=list)


def _enum_name(value: int) -> str:
    """Name of a socket family/type; Python returns a bare int for values it does not know."""
    return getattr(value, "name", None) or str(int(value))


def _check_listener(fd: int) -> tuple[socket.socket | None, str]:
    """Wrap ``fd`` if it is a listening AF_UNIX stream socket; else explain why not.

    A skipped descriptor is left open (it is not ours to close: the manager may have passed
    it for another purpose) but detached from any Python object so garbage collection cannot
    close it behind the caller's back.
    """
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        return None, f"not an open descriptor ({exc.strerror or exc})"
    if not stat.S_ISSOCK(mode):
        return None, "not a socket"
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        return None, f"cannot inspect socket ({exc.strerror or exc})"
    try:
        if sock.family != socket.AF_UNIX:
            reason = f"address family {_enum_name(sock.family)}, expected AF_UNIX"
        elif sock.type != socket.SOCK_STREAM:
            reason = f"socket type {_enum_name(sock.type)}, expected SOCK_STREAM"
        elif not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            reason = "not listening (Accept=yes or a connected socket?)"
        else:
            return sock, ""
    except OSError as exc:
        reason = f"cannot inspect socket ({exc.strerror or exc})"
    sock.detach()
    return None, reason


def inspect_listen_fds(
    environ: Mapping[str, str], pid: int, *, start_fd: int = SD_LISTEN_FDS_START
) -> ListenFds:
    """Take the sockets systemd passed (``LISTEN_PID``/``LISTEN_FDS``/``LISTEN_FDNAMES``).

    Returns the listening AF_UNIX stream sockets, in order, and the reasons for any other
    descriptor. Nothing is passed unless ``LISTEN_PID`` equals ``pid`` (the variables may
    have leaked from a parent). Every passed descriptor, used or not, is made close-on-exec
    so it cannot leak into child processes. ``start_fd`` exists for tests; systemd always
    starts at 3. The sockets keep the blocking mode they were passed with; the server sets
    what its event loop needs.
    """
    result = ListenFds()
    if _parse_positive_int(environ.get("LISTEN_PID")) != pid:
        return result
    count = _parse_positive_int(environ.get("LISTEN_FDS"))
    if count is None:
        return result
    raw_names = environ.get("LISTEN_FDNAMES")
    names = raw_names.split(":") if raw_names else []
    for index, fd in enumerate(range(start_fd, start_fd + count)):
        name = names[index] if index < len(names) else "unknown"
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)
        sock, reason = _check_listener(fd)
        if sock is None:
            result.skipped.append(SkippedFd(fd=fd, name=name, reason=reason))
        else:
            result.sockets.append(sock)
            result.names.append(name)
    return result


def listen_fds(
    environ: Mapping[str, str], pid: int, *, start_fd: int = SD_LISTEN_FDS_START
) -> list[socket.socket]:
    """The listening sockets from systemd socket activation; empty when not activated.

    Shorthand for ``inspect_listen_fds(...).sockets`` for callers that do not report
    skipped descriptors. Call ``unset_listen_env`` afterwards.
    """
    return inspect_listen_fds(environ, pid, start_fd=start_fd).sockets


def unset_listen_env(environ: MutableMapping[str, str]) -> None:
    """Remove the socket-activation variables once the descriptors have been taken.

    Otherwise a child process (or a re-exec) would believe the descriptors were meant for it;
    ``sd_listen_fds(unset_environment=1)`` does the same.
    """
    for name in LISTEN_ENV_VARS:
        environ.pop(name, None)


# launchd -----------------------------------------------------------------------------------

# (name, byref(int *), byref(size_t)) -> errno; the ctypes argument types are not expressible.
_ActivateFn = Callable[[bytes, Any, Any], int]
_FreeFn = Callable[[Any], None]


def _current_platform() -> str:
    """``sys.platform``, behind a call so tests can pretend to be macOS."""
    return sys.platform


def _load_launchd_api() -> tuple[_ActivateFn, _FreeFn] | None:
    """Bind ``launch_activate_socket(3)`` and ``free(3)`` from libSystem, or None.

    ``int launch_activate_socket(const char *name, int **fds, size_t *cnt)`` returns 0 or
    an errno value and hands back a malloc'ed array the caller must free().
    """
    path = ctypes.util.find_library("System") or "/usr/lib/libSystem.B.dylib"
    try:
        lib = ctypes.CDLL(path, use_errno=True)
        activate = lib.launch_activate_socket
        free = lib.free
    except (OSError, AttributeError):
        return None
    activate.argtypes = [
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_int)),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    activate.restype = ctypes.c_int
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    return activate, free


def launchd_sockets(name: str = LAUNCHD_SOCKET_NAME) -> list[socket.socket]:
    """Sockets that launchd created for this job under ``Sockets`` → ``name`` (macOS only).

    Uses ``launch_activate_socket`` from libSystem through ctypes (no PyObjC). Returns [] on
    any other platform, when the process was not started by launchd (ESRCH), when the plist
    has no socket of that name (ENOENT), when the sockets were already taken (EALREADY), or
    when libSystem cannot be loaded; the caller then binds its own socket. Returned sockets
    were checked to be listening AF_UNIX stream sockets and are close-on-exec; any other
    descriptor is left open, unused.
    """
    if _current_platform() != "darwin":
        return []
    api = _load_launchd_api()
    if api is None:
        return []
    activate, free = api
    fds = ctypes.POINTER(ctypes.c_int)()
    count = ctypes.c_size_t(0)
    try:
        rc = activate(name.encode("utf-8"), ctypes.byref(fds), ctypes.byref(count))
    except (OSError, ctypes.ArgumentError):
        return []
    if rc != 0 or not fds:
        return []
    try:
        numbers = [int(fds[i]) for i in range(count.value)]
    finally:
        free(fds)
    sockets: list[socket.socket] = []
    for fd in numbers:
        with contextlib.suppress(OSError):
            os.set_inheritable(fd, False)
        sock, _reason = _check_listener(fd)
        if sock is not None:
            sockets.append(sock)
    return sockets
