"""Which QQ plugins the DSH profile has installed (§3.2.1).

``compat.qqBots: auto`` looks at the profile: its ``package.json`` (dependencies and
bundles), ``node_modules/`` and ``cordis.patch.yml``. Nothing here raises: a missing or
broken profile detects nothing and says why, so a bad profile can never stop the daemon
(the reference: detection failures only warn). The fingerprint (mtimes and sizes of the
files read) lets the caller re-detect only when the profile changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ONEBOT_PACKAGE = "dsh-onebot-qq"
DERPYU_PACKAGES = ("qq-agent-presets", "qq-mode-console")
DERPYU_PATCH_MARKERS = ("mcp-snowluma", "preset-qq-chat")
_DEPENDENCY_KEYS = (
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
    "bundledDependencies",
    "bundleDependencies",
    "bundles",
)
_PROBED = (
    "package.json",
    "cordis.patch.yml",
    "node_modules",
    f"node_modules/{ONEBOT_PACKAGE}",
    "node_modules/qq-agent-presets",
)


@dataclass(frozen=True)
class Detection:
    """What the profile shows. ``present``: the directory exists (most machines have
    no DSH profile: that is no failure). ``error``: why an existing one could not be
    read."""

    profile: str | None
    onebot: bool = False
    derpyu: bool = False
    error: str | None = None
    present: bool = True


def profile_dir(environ: Mapping[str, str], home: Path, explicit: Path | None = None) -> Path:
    """The DSH profile to look at: the daemon's setting, else ``DSH_PROFILE_DIR``, else
    ``$DSH_HOME/profiles/$DSH_PROFILE``, else ``~/.dsh/profiles/desktop``."""
    if explicit is not None:
        return explicit
    direct = environ.get("DSH_PROFILE_DIR")
    if direct:
        return Path(direct).expanduser()
    dsh_home = Path(environ["DSH_HOME"]).expanduser() if environ.get("DSH_HOME") else None
    base = dsh_home if dsh_home is not None else home / ".dsh"
    return base / "profiles" / (environ.get("DSH_PROFILE") or "desktop")


def fingerprint(profile: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime ns, size) of every path detection reads; a change re-detects."""
    out = []
    for name in _PROBED:
        try:
            st = (profile / name).stat()
        except OSError:
            continue
        out.append((name, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _names(value: Any) -> set[str]:
    if isinstance(value, Mapping):
        return {str(k) for k in value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, str)}
    return set()


def _has_package(names: set[str], package: str) -> bool:
    """``package`` or any scoped ``@scope/package``."""
    return any(n == package or n.endswith("/" + package) for n in names)


def detect(profile: Path) -> Detection:
    """Look for dsh-onebot-qq and Derpyu's qq-bridge in ``profile``."""
    where = str(profile)
    if not profile.is_dir():
        return Detection(where, present=False)
    names: set[str] = set()
    error: str | None = None
    manifest = profile / "package.json"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        if isinstance(data, Mapping):
            for key in _DEPENDENCY_KEYS:
                names |= _names(data.get(key))
        else:
            error = f"{manifest} is not a JSON object"
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        error = f"{manifest} unreadable: {exc}"
    try:
        patch = (profile / "cordis.patch.yml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        patch = ""
    modules = profile / "node_modules"
    onebot = (
        _has_package(names, ONEBOT_PACKAGE)
        or (modules / ONEBOT_PACKAGE).exists()
        or ONEBOT_PACKAGE in patch
    )
    derpyu = (
        any(_has_package(names, p) for p in DERPYU_PACKAGES)
        or any(marker in patch for marker in DERPYU_PATCH_MARKERS)
        or (modules / "qq-agent-presets").exists()
    )
    return Detection(where, onebot=onebot, derpyu=derpyu, error=error)
