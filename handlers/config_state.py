"""The live memory config: one validated snapshot, swapped in a single assignment.

Every reload path (file watcher, SIGHUP, `config/reload`) comes through
`ConfigState.reload`, so "a broken file keeps the last good config" is one rule
in one place. `enabled` is latched at start (reference §3: it is a start-time
switch and does not take part in hot reload).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from engine.config import ConfigBuild, ConfigFileError, MemoryConfig, fingerprint, load_config


@dataclass(frozen=True)
class ReloadResult:
    """The answer of `config/reload` (PROTOCOL.md §4)."""

    generation: int
    ok: bool
    errors: tuple[str, ...]
    changed: bool
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Wire form; `warnings` is extra information a client may ignore."""
        return {
            "generation": self.generation,
            "ok": self.ok,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
        }


class ConfigState:
    """Holds the current config build, its generation and the last reload error."""

    def __init__(
        self,
        config_dir: Path | None,
        environ: Mapping[str, str],
        build: ConfigBuild,
        last_error: str | None = None,
    ) -> None:
        self.config_dir = config_dir
        self._environ = dict(environ)
        self._build = build
        self._fingerprint = fingerprint(build.config)
        self.generation = 1
        self.last_error = last_error
        self.enabled_at_start = bool(build.config.enabled)
        self._lock: anyio.Lock | None = None
        self._overlay: Callable[[MemoryConfig], MemoryConfig] | None = None
        self._effective = build.config

    @classmethod
    def start(cls, config_dir: Path | None, environ: Mapping[str, str]) -> ConfigState:
        """Load at start. A broken user file does not stop the daemon: it starts on the
        packaged defaults (plus environment overrides), reports why, and picks the
        user's file up as soon as it is fixed."""
        try:
            return cls(config_dir, environ, load_config(config_dir, environ))
        except ConfigFileError as exc:
            return cls(config_dir, environ, load_config(None, environ), str(exc))

    @property
    def config(self) -> MemoryConfig:
        """The config in force; callers read it once per request."""
        return self._effective

    @property
    def environ(self) -> Mapping[str, str]:
        """The environment the layers were read with (a copy taken at start)."""
        return self._environ

    def set_overlay(self, overlay: Callable[[MemoryConfig], MemoryConfig] | None) -> None:
        """Derive the config in force from the file layers with ``overlay`` (QQ compat's
        automatic trigger kind, ``handlers.compat``), now and after every reload."""
        self._overlay = overlay
        self._effective = self._derive(self._build.config)

    def _derive(self, config: MemoryConfig) -> MemoryConfig:
        return config if self._overlay is None else self._overlay(config)

    @property
    def build(self) -> ConfigBuild:
        """The whole build: merged raw dict, warnings and sources included."""
        return self._build

    async def reload(self) -> ReloadResult:
        """Re-read every layer off the event loop; keep the last good config on error."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            try:
                build = await anyio.to_thread.run_sync(load_config, self.config_dir, self._environ)
            except ConfigFileError as exc:
                self.last_error = str(exc)
                return ReloadResult(self.generation, False, (str(exc),), False)
            new_fp = fingerprint(build.config)
            changed = new_fp != self._fingerprint
            if changed:
                self._build = build
                self._effective = self._derive(build.config)
                self._fingerprint = new_fp
                self.generation += 1
            self.last_error = None
            return ReloadResult(self.generation, True, (), changed, build.warnings)
