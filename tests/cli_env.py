"""A `rofmd` command run in-process, as on a machine with no daemon settings: nothing
from the caller's environment decides where it reads."""

from __future__ import annotations

from pathlib import Path

import pytest


def isolate_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Unset ROFMD_MEMORY_ROOT, ROFMD_CONFIG_DIR and STATE_DIRECTORY and point the XDG
    state and config homes into `tmp_path`; the memory root to use, ``tmp_path/mem``."""
    for name in ("ROFMD_MEMORY_ROOT", "ROFMD_CONFIG_DIR", "STATE_DIRECTORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "mem"
