"""Where the daemon's socket is, for the client commands, without loading the settings.

`DaemonSettings` (pydantic-settings) is the daemon's one source of its settings, but a
client command needs only the socket path, and importing pydantic to find it costs
more than the request it then sends. :func:`client_socket_path` reads the same
variable the same way (the `ROFMD_` prefix matched in any case, `~` expanded, made
absolute); a test holds the two to the same answer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["SOCKET_ENV", "client_socket_path", "default_socket_path"]

SOCKET_ENV = "ROFMD_SOCKET_PATH"


def default_socket_path(environ: Mapping[str, str] | None = None, uid: int | None = None) -> Path:
    """PROTOCOL.md §1: `$XDG_RUNTIME_DIR/rofmd/rofmd.sock`, else `/tmp/rofmd-<uid>/rofmd.sock`."""
    env = os.environ if environ is None else environ
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "rofmd" / "rofmd.sock"
    return Path("/tmp") / f"rofmd-{os.getuid() if uid is None else uid}" / "rofmd.sock"


def client_socket_path(environ: Mapping[str, str] | None = None) -> Path:
    """`DaemonSettings().socket_path` for this environment: `ROFMD_SOCKET_PATH` (any
    case; the last one set wins, as pydantic-settings reads it), else the default."""
    env = os.environ if environ is None else environ
    value: str | None = None
    for key, raw in env.items():
        if key.lower() == SOCKET_ENV.lower():
            value = raw
    path = default_socket_path(env) if value is None else Path(value)
    return path.expanduser().absolute()  # the settings validate their defaults too
