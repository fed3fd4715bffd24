"""`rofmd doctor`: the checks a person runs when something seems off.

Each check says what it saw and, when it fails, the one thing to do about it.
The checks only read, except for a probe file in the memory root that is
removed at once.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from engine.config import ConfigFileError, MemoryConfig, load_config, resolve_memory_root
from rofmd.server.settings import DaemonSettings


@dataclass(frozen=True)
class Check:
    """One doctor line."""

    name: str
    ok: bool
    detail: str
    hint: str = ""

    def to_json(self) -> dict[str, Any]:
        """For `--json`."""
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "hint": self.hint}


def check_config(
    settings: DaemonSettings, environ: Mapping[str, str]
) -> tuple[Check, MemoryConfig]:
    """The memory config loads and validates."""
    try:
        build = load_config(settings.config_dir, environ)
    except ConfigFileError as exc:
        fallback = load_config(None, environ).config
        return (
            Check(
                "config",
                False,
                str(exc),
                "fix the file (it must be one JSON object); the daemon keeps its last good "
                "config until then",
            ),
            fallback,
        )
    detail = f"{len(build.sources)} layer(s) from {settings.config_dir}"
    if build.warnings:
        detail += f"; {len(build.warnings)} warning(s): " + "; ".join(build.warnings[:3])
    return Check("config", True, detail), build.config


def check_inert_keys(settings: DaemonSettings, environ: Mapping[str, str]) -> Check:
    """No key the user set is one that has no effect (`rofmd.cli.inert_keys`). Always ok:
    such a key is valid, it only does nothing, so the line warns without failing."""
    from rofmd.cli.inert_keys import inert_keys_set, user_layers

    try:
        found = inert_keys_set(user_layers(settings.config_dir, environ))
    except ConfigFileError:
        return Check("inert keys", True, "not checked: the config does not load (see above)")
    if not found:
        return Check("inert keys", True, "every key set takes effect")
    listed = "; ".join(f"{key} ({why}; set in {source})" for source, key, why in found)
    return Check("inert keys", True, f"warning: {len(found)} key(s) set have no effect: {listed}")


def check_socket_dir(socket_path: Path) -> Check:
    """The socket directory is ours and private; the socket file is 0600."""
    directory = socket_path.parent
    if not directory.exists():
        return Check("socket directory", True, f"{directory} absent; the daemon creates it 0700")
    st = directory.stat()
    if st.st_uid != os.getuid():
        return Check(
            "socket directory",
            False,
            f"{directory} belongs to uid {st.st_uid}",
            "use a directory you own: rofmd serve --socket <dir you own>/rofmd.sock",
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        return Check(
            "socket directory", False, f"{directory} has mode {mode:o}", f"chmod 700 {directory}"
        )
    if socket_path.exists() or socket_path.is_symlink():
        sst = socket_path.lstat()
        if not stat.S_ISSOCK(sst.st_mode):
            return Check(
                "socket directory",
                False,
                f"{socket_path} is not a socket",
                f"move {socket_path} away",
            )
        smode = stat.S_IMODE(sst.st_mode)
        if smode & 0o077:
            return Check(
                "socket directory",
                False,
                f"socket {socket_path} has mode {smode:o}",
                f"chmod 600 {socket_path}",
            )
    return Check("socket directory", True, f"{directory} is 0700 and ours")


async def _status(path: Path) -> dict[str, Any]:
    from rofmd.host.client import RofmdClient

    async with RofmdClient.connect(path) as client:
        result: dict[str, Any] = await client.call("status", timeout=3)
        return result


@dataclass(frozen=True)
class DaemonSeen:
    """What the daemon on the socket answered (`status`), or why it did not."""

    check: Check
    config_dir: Path | None = None
    memory_root: Path | None = None
    compat: dict[str, Any] | None = None


def check_daemon(socket_path: Path) -> DaemonSeen:
    """A daemon answers `status` on the socket; it says which config directory and
    memory root it uses, which the other checks then look at."""
    try:
        status = anyio.run(_status, socket_path)
    except Exception as exc:  # noqa: BLE001 - any failure to talk fails this check
        return DaemonSeen(
            Check(
                "daemon",
                False,
                f"no answer on {socket_path}: {exc}",
                "start it: `rofmd serve` (or `systemctl --user enable --now rofmd.socket`)",
            )
        )
    cfg_dir = (status.get("config") or {}).get("dir")
    root = status.get("memoryRoot")
    detail = f"answers on {socket_path} (pid {status.get('pid')}, version {status.get('version')})"
    compat = status.get("compat")
    return DaemonSeen(
        Check("daemon", True, detail),
        Path(cfg_dir) if isinstance(cfg_dir, str) else None,
        Path(root) if isinstance(root, str) else None,
        compat if isinstance(compat, dict) else None,
    )


_PATCH_HINTS = {
    "no-profile-setting": "set ROFMD_DSH_PROFILE_DIR to the DSH profile rofmd may patch,"
    " then reload (`rofmd reload`)",
    "unknown-structure": "qq-tool-restrict.mjs is not shaped as rofmd knows: add the four"
    " memory tool names to SAFE_EXACT by hand, or leave Derpyu chats on heuristic scoring",
    "read-only": "make qq-tool-restrict.mjs writable for the daemon's user, then reload",
    "rolled-back": "you rolled the patch back; delete its record in"
    " <memory root>/.compat-state.json to have it applied again",
}


def check_compat(compat: Mapping[str, Any]) -> Check:
    """QQ compat as the daemon sees it (reference §3.2): which plugins it detected, and
    whether Derpyu's tool whitelist lets rofmd's tools run. An unpatched whitelist fails:
    the model can never score or search Derpyu chats (they fall back to heuristics)."""
    plugins = ", ".join(compat.get("plugins") or []) or "no QQ plugin"
    mode = compat.get("mode")
    if not compat.get("active"):
        why = f" ({compat['error']})" if mode == "auto" and compat.get("error") else ""
        return Check("QQ compat", True, f"off (compat.qqBots: {mode}; {plugins}{why})")
    detail = f"on (compat.qqBots: {mode}; {plugins})"
    if "derpyu-qq-bridge" not in (compat.get("plugins") or []):
        return Check("QQ compat", True, detail)
    action = str(compat.get("patch"))
    if compat.get("derpyuPatched"):
        return Check("QQ compat", True, f"{detail}; Derpyu whitelist patched ({action})")
    if action == "disabled":
        return Check(
            "QQ compat",
            True,
            f"{detail}; autoPatchDerpyu is false: Derpyu chats scored heuristically",
        )
    return Check(
        "QQ compat",
        False,
        f"{detail}; Derpyu whitelist not patched ({action}): rofmd's tools are refused there",
        _PATCH_HINTS.get(action, "see the daemon log for the autopatch warning"),
    )


def check_memory_root(root: Path) -> Check:
    """The memory root (or the directory that will hold it) is writable."""
    probe_dir = root
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        return Check(
            "memory root", False, f"{probe_dir} is not a directory", f"move {probe_dir} away"
        )
    try:
        fd, name = tempfile.mkstemp(prefix=".rofmd-doctor-", dir=probe_dir)
        os.close(fd)
        Path(name).unlink()
    except OSError as exc:
        return Check(
            "memory root",
            False,
            f"cannot write in {probe_dir}: {exc.strerror}",
            f"chmod -R u+rwX {probe_dir}  (or point --memory-root at a directory you own)",
        )
    where = "exists" if probe_dir == root else f"will be created under {probe_dir}"
    return Check("memory root", True, f"{root} is writable ({where})")


def check_recall_loops(settings: DaemonSettings) -> Check:
    """Whether the ranked recall's compiled loops are built (optional: without them the
    NumPy path serves, the same picks, slower)."""
    from engine.relevance import kernels

    return _compiled_check(
        "recall loops",
        kernels.state(settings.kernels),
        "the ranked recall runs on its NumPy path (the same picks, slower)",
    )


def check_surface_lookup(settings: DaemonSettings) -> Check:
    """Whether the pre-step surface's look-up in its request line is built (optional:
    without it the surface is encoded to be looked up, the same answers, slower)."""
    from engine import json_spans

    return _compiled_check(
        "surface look-up",
        json_spans.state(settings.kernels),
        "a pre-step's surface is encoded to be looked up (the same answers, slower)",
    )


def check_store_listing(settings: DaemonSettings) -> Check:
    """Whether a store directory's compiled listing is built (optional: without it
    `os.scandir` lists it, the same listing, slower)."""
    from engine.store import dir_listing

    return _compiled_check(
        "store listing",
        dir_listing.state(settings.kernels),
        "a store's directory is listed with os.scandir (the same listing, slower)",
    )


def _compiled_check(name: str, state: str, without: str) -> Check:
    """A compiled module's line (`engine.compiled`): never a failure."""
    if state == "not built":
        return Check(
            name,
            True,
            f"not compiled: {without}",
            "install a C compiler and run `make` (or `pip install` rofmd again) to build it",
        )
    if state == "off":
        return Check(name, True, "compiled, turned off by ROFMD_KERNELS=false")
    return Check(name, True, "compiled")


def run_checks(
    overrides: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    daemon_check: Callable[[Path], DaemonSeen] = check_daemon,
) -> list[Check]:
    """All checks, in the order a person would fix them.

    The daemon is asked first: when it answers, the config and memory-root checks look
    at the paths it uses (`make run` serves `.run/`, not `~/.config/rofmd`), unless
    `--config-dir` / `--memory-root` say otherwise."""
    settings = DaemonSettings(**dict(overrides))
    seen = daemon_check(settings.socket_path)
    if seen.config_dir is not None and "config_dir" not in overrides:
        settings = settings.model_copy(update={"config_dir": seen.config_dir})
    config_check, config = check_config(settings, environ)
    if seen.memory_root is not None and "memory_root" not in overrides:
        root = seen.memory_root
    else:
        root = resolve_memory_root(
            config.storage.dir,
            override=settings.memory_root,
            state_dir=settings.state_dir,
            home=Path(environ.get("HOME") or Path.home()),
        )
    checks = [
        config_check,
        check_inert_keys(settings, environ),
        check_socket_dir(settings.socket_path),
        seen.check,
        check_memory_root(root),
    ]
    if seen.compat is not None:
        checks.append(check_compat(seen.compat))
    checks.append(check_recall_loops(settings))  # never failures: last
    checks.append(check_surface_lookup(settings))
    checks.append(check_store_listing(settings))
    return checks
