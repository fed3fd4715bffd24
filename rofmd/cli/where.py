"""Where a command works: the config and memory root it resolves, as the daemon would,
and the two errors every command prints as one line (exit 1, or 2 for a bad argument).

Shared by every command family (`rofmd engine …`, `show`, `search`, `audit`, `backup`,
`time-view`, …), so none of them imports another's module for it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.config import ConfigFileError, MemoryConfig, load_config, resolve_memory_root
from engine.store import SessionStore, list_session_dirs, open_session, open_session_dir

if TYPE_CHECKING:
    from rofmd.server.settings import DaemonSettings

__all__ = ["DEFAULT_SESSION", "CliError", "UsageError", "Where", "daemon_settings", "locate"]

DEFAULT_SESSION = "cli"


class CliError(Exception):
    """Unusable input or a failure (a file that cannot be read, a bad config): printed
    as one line, exit 1."""

    exit_code = 1


class UsageError(CliError):
    """A bad argument (a value out of range, an empty id): printed as one line, exit 2,
    as argparse exits for the arguments it checks itself."""

    exit_code = 2


def _warn_stats_once(store: SessionStore) -> Callable[[OSError], None]:
    """A command's telemetry failure: one warning on stderr, the command goes on
    (as in the daemon, `handlers.stats_health`)."""

    def warn(exc: OSError) -> None:
        if store.stats_failures == 1:
            print(f"warning: telemetry not written ({store.paths.stats}): {exc}", file=sys.stderr)

    return warn


@dataclass(frozen=True)
class Where:
    """The config and memory root a command works on."""

    cfg: MemoryConfig
    root: Path

    @property
    def per_session(self) -> bool:
        return bool(self.cfg.storage.per_session)

    def open(self, session: str) -> SessionStore:
        try:
            store = open_session(self.root, session, per_session=self.per_session)
        except ValueError as exc:
            raise UsageError(f"session {session!r}: {exc}") from None
        store.on_stats_error = _warn_stats_once(store)
        return store

    def sessions(self) -> list[tuple[str, str]]:
        """(session id, directory name) of the stores present (the root itself in the
        global layout). The id is the one the directory records, else the one its
        folders name; the directory name when nothing tells (an old, empty store)."""
        if not self.per_session:
            return [(DEFAULT_SESSION, "")] if self.root.is_dir() else []
        return [(d.id or d.name, d.name) for d in list_session_dirs(self.root / "sessions")]

    def open_listed(self, session: str, name: str) -> SessionStore:
        """Open a store found by :meth:`sessions` as it is (nothing claimed or migrated)."""
        if not self.per_session:
            return self.open(session)
        try:
            return open_session_dir(self.root, name)
        except ValueError as exc:
            raise UsageError(f"session {session!r}: {exc}") from None


def daemon_settings(
    args: argparse.Namespace, names: tuple[str, ...], error: type[CliError]
) -> DaemonSettings:
    """The daemon's settings (its environment) with the command line's paths over them:
    the options `names` of `args` that were given.

    A command must see the same places the daemon would, so it reads them through the
    daemon's own model; a bad value is the command's `error`, naming the setting, rather
    than a pydantic trace. Imported here, not at the top: pydantic-settings is slow to
    import and most commands never need it."""
    from pydantic import ValidationError

    from rofmd.server.settings import DaemonSettings

    overrides = {name: value for name in names if (value := getattr(args, name, None)) is not None}
    try:
        return DaemonSettings(**overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise error(f"invalid setting {loc}: {first.get('msg')}") from None


def locate(args: argparse.Namespace, environ: dict[str, str] | None = None) -> Where:
    """Config (the daemon's layering) and memory root (the daemon's resolution)."""
    env = dict(os.environ if environ is None else environ)
    settings = daemon_settings(args, ("config_dir", "memory_root"), CliError)
    try:
        cfg = load_config(settings.config_dir, env).config
    except ConfigFileError as exc:
        raise CliError(f"config: {exc}") from None
    root = resolve_memory_root(
        cfg.storage.dir,
        override=settings.memory_root,
        state_dir=settings.state_dir,
        home=Path(env.get("HOME") or Path.home()),
    )
    return Where(cfg, root.expanduser())
