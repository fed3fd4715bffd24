"""Daemon settings: where the daemon lives and how hard it may be pushed.

These are process settings (socket, directories, limits, logging), distinct from
the memory config (`engine.config`), which is hot-reloaded and governs
behaviour. Every field is also an environment variable with the `ROFMD_` prefix,
and the CLI flags of `rofmd serve` override both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rofmd.socket_location import default_socket_path as default_socket_path

MIB = 1024 * 1024


def default_config_dir(environ: dict[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/rofmd`, the XDG default being `~/.config`."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rofmd"


def default_state_dir(environ: dict[str, str] | None = None) -> Path:
    """`$STATE_DIRECTORY` under systemd, else `$XDG_STATE_HOME/rofmd` (`~/.local/state`).

    Relative `storage.dir` values resolve against this directory, so the engine
    default `memory` lands in `<state>/memory`.
    """
    env = os.environ if environ is None else environ
    state = env.get("STATE_DIRECTORY")
    if state:
        # systemd may pass several colon-separated directories; the first is ours.
        return Path(state.split(":")[0])
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rofmd"


def default_sessions_dir(environ: dict[str, str] | None = None) -> Path:
    """PROTOCOL.md §5: `$DSH_HOME/sessions`, else `~/.dsh/sessions`."""
    env = os.environ if environ is None else environ
    home = env.get("DSH_HOME")
    return Path(home) / "sessions" if home else Path.home() / ".dsh" / "sessions"


class DaemonSettings(BaseSettings):
    """Process settings; see DESIGN.md "Running it" for the meaning of each path."""

    model_config = SettingsConfigDict(env_prefix="ROFMD_", extra="ignore", frozen=True)

    socket_path: Path = Field(default_factory=default_socket_path)
    config_dir: Path = Field(default_factory=default_config_dir)
    memory_root: Path | None = None
    state_dir: Path = Field(default_factory=default_state_dir)
    sessions_dir: Path = Field(default_factory=default_sessions_dir)
    # Passive archiving (`session/event` and the tailer of `sessions_dir`): every session,
    # QQ channel sessions only (the reference's behaviour), or off (no tailer either).
    passive_scope: Literal["all", "channel", "off"] = "all"
    log_format: Literal["json", "console", "auto"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    max_message_bytes: int = Field(default=8 * MIB, ge=1024)
    max_pending_per_session: int = Field(default=128, ge=1)
    max_connections: int = Field(default=256, ge=1)
    request_timeout: float = Field(default=60.0, gt=0)
    shutdown_deadline: float = Field(default=10.0, ge=0)
    # Sessions held in memory (rofmd.server.eviction): one idle this long (no request queued or
    # running) is unloaded as `agent/disposed` would, and reopened from disk by its next
    # request; past the cap the least recently used idle session goes. 0 turns either off.
    session_idle_seconds: float = Field(default=300.0, ge=0)
    max_loaded_sessions: int = Field(default=256, ge=0)
    watch_config: bool = True
    debug_methods: bool = False
    # The compiled modules (engine.compiled: the ranked recall's loops, the surface's
    # look-up in its request line, a store directory's listing), when they were built:
    # false runs every caller on its Python path (the same answers, slower), as without
    # a C compiler.
    kernels: bool = True
    # The metrics endpoint (rofmd.server.metrics_http): `GET /metrics` on a second Unix socket
    # and/or a loopback TCP port; both off by default (the protocol's `metrics` request
    # and `rofmd metrics` need neither).
    metrics_socket: Path | None = None
    metrics_port: int = Field(default=0, ge=0, le=65535)
    # QQ compat (reference §3.2): the DSH profile whose plugins `compat.qqBots: auto`
    # detects, and the only one whose Derpyu tool whitelist the daemon may patch. Unset:
    # detection reads DSH_PROFILE_DIR, $DSH_HOME/profiles/$DSH_PROFILE or
    # ~/.dsh/profiles/desktop, and patches nothing.
    dsh_profile_dir: Path | None = None

    @field_validator(
        "socket_path", "config_dir", "memory_root", "state_dir", "sessions_dir", "metrics_socket"
    )
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        """Paths are fixed at start (`~` expanded, made absolute): the daemon's behaviour
        and `status` must not depend on a working directory."""
        return None if value is None else value.expanduser().absolute()
