"""The file side of the Derpyu autopatch (reference §3.2.5): find Derpyu's
``qq-tool-restrict.mjs`` in a profile, back it up, patch it atomically and remember
what was done in ``<memory root>/.compat-state.json``.

Why it is this careful: the file belongs to another package, and a broken guard file
breaks the user's QQ bot. So every failure leaves it byte-identical and is reported as
one readable warning (the caller then scores Derpyu chats heuristically, §3.2.4);
``apply_autopatch`` never raises.

Rules the state makes possible:

- self-heal: the package was updated (the file is new to us and lacks the names) →
  the new file is patched again, ``healed``;
- a rollback stays rolled back: a file whose hash is the recorded *before* (a backup
  copied back) or the patched file with the marked lines deleted (the reference's two
  manual rollbacks) is left as it is, ``rolled-back``, until its record is deleted
  from the state file (the third way, "let rofmd evaluate it again"). Without this,
  the next config reload would undo every rollback.

Backups are ``<file>.bak-rofm-<YYYYMMDDHHmmss>`` (UTC of ``now_ms``; ``-2``, ``-3``…
when one second holds several) beside the real file; at most :data:`MAX_BACKUPS` of
ours are kept, the oldest deleted first, never anyone else's file and never the one
just written.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from engine import jsonio
from engine.compat.derpyu_patch import patch_text, strip_patch
from engine.jsonio import CorruptJSONError, read_json, temp_path, write_json_atomic

__all__ = [
    "MAX_BACKUPS",
    "STATE_KEY",
    "STATE_NAME",
    "TARGET",
    "PatchAction",
    "PatchOutcome",
    "apply_autopatch",
]

TARGET = Path("node_modules/qq-agent-presets/qq-tool-restrict.mjs")
"""Where Derpyu's guard lives, relative to the DSH profile directory."""

STATE_NAME = ".compat-state.json"
STATE_KEY = "derpyuAutopatch"
"""The state file's map of patched files: real path → record."""
STATE_VERSION = 1
MAX_BACKUPS = 5
MAX_BYTES = 1 << 20
"""A guard file larger than this is not the small whitelist module we know."""

PatchAction = Literal[
    "patched",
    "already",
    "healed",
    "rolled-back",
    "disabled",
    "missing",
    "unknown-structure",
    "read-only",
    "error",
]

_BACKUP_INFIX = ".bak-rofm-"
_READ_ONLY_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


@dataclass(frozen=True)
class PatchOutcome:
    """``active``: the four names are in the file now (patched / already / healed), so
    Derpyu's guard lets rofmd's tools run (after DSH reloads the module). ``path``: the
    real file (the profile path when it was not found). ``warning``: one English log
    line when something was not done or not recorded. ``backup``: the copy written
    before patching."""

    active: bool
    action: PatchAction
    path: str | None
    warning: str | None = None
    backup: str | None = None


def apply_autopatch(
    profile_dir: Path, memory_root: Path, *, enabled: bool, now_ms: int
) -> PatchOutcome:
    """Make Derpyu's tool guard let rofmd's tools through, once, safely (module
    docstring). ``enabled`` is ``compat.autoPatchDerpyu``: false touches nothing."""
    if not enabled:
        return PatchOutcome(False, "disabled", None)
    link = profile_dir / TARGET
    real = Path(os.path.realpath(link))
    try:
        return _apply(link, real, memory_root, now_ms)
    except OSError as exc:
        return _failed(real, exc)


def _apply(link: Path, real: Path, memory_root: Path, now_ms: int) -> PatchOutcome:
    try:
        st = real.stat()
    except FileNotFoundError:
        return PatchOutcome(
            False,
            "missing",
            str(link),
            f"Derpyu autopatch: {link} not found (qq-agent-presets not installed in this profile?); nothing patched",
        )
    if not stat.S_ISREG(st.st_mode):
        return PatchOutcome(
            False,
            "error",
            str(real),
            f"Derpyu autopatch: {real} is not a regular file; left untouched",
        )
    if st.st_size > MAX_BYTES:
        return _unknown(real, f"{st.st_size} bytes, more than a whitelist module has")
    data = real.read_bytes()
    try:
        src = data.decode("utf-8")
    except UnicodeDecodeError:
        return _unknown(real, "not UTF-8 text")
    result = patch_text(src)
    if result.status == "already":
        return PatchOutcome(True, "already", str(real))
    if result.status == "unknown":
        return _unknown(real, result.reason or "unrecognised")
    state_path = memory_root / STATE_NAME
    state = _load_state(state_path)
    record = _records(state).get(str(real))
    before = _sha256(data)
    if record is not None and before in (record.get("beforeSha256"), record.get("strippedSha256")):
        return PatchOutcome(
            False,
            "rolled-back",
            str(real),
            f"Derpyu autopatch: {real} is back to its content from before rofmd patched it (a rollback), "
            f"so it is left as it is; delete its entry under {STATE_KEY!r} in {state_path} to have it patched again",
        )
    if stat.S_IMODE(st.st_mode) & 0o222 == 0:
        return PatchOutcome(
            False, "read-only", str(real), f"Derpyu autopatch: {real} is read-only; left untouched"
        )

    new = result.text.encode("utf-8")
    backup = _write_backup(real, data, st, now_ms)
    try:
        if _sha256(real.read_bytes()) != before:
            raise _Changed
        _replace(real, new, st)
    except BaseException:
        with contextlib.suppress(OSError):
            jsonio.fs.unlink(backup)
            jsonio.fs.fsync_dir(real.parent)
        raise
    # The new content is in place from here on: a later failure is a warning, not a failure.
    warnings: list[str] = []
    action: PatchAction = "patched" if record is None else "healed"
    try:
        jsonio.fs.fsync_dir(real.parent)
        _prune_backups(real, keep=backup)
    except OSError as exc:
        warnings.append(f"could not sync or prune the backups beside it ({exc})")
    entry = {
        "path": str(real),
        "profilePath": str(link),
        "beforeSha256": before,
        "afterSha256": _sha256(new),
        "strippedSha256": _sha256(strip_patch(result.text).encode("utf-8")),
        "added": list(result.added),
        "backup": str(backup),
        "action": action,
        "patchedAt": now_ms,
    }
    try:
        _save_record(state_path, state, str(real), entry)
    except OSError as exc:
        warnings.append(
            f"could not record it in {state_path} ({exc}), so a rollback will not be recognised"
        )
    warning = (
        f"Derpyu autopatch: {real} was {action}, but " + "; ".join(warnings) if warnings else None
    )
    return PatchOutcome(True, action, str(real), warning, str(backup))


class _Changed(OSError):
    """The file changed between reading and replacing it (an install under way)."""

    def __init__(self) -> None:
        super().__init__(
            "it changed while being patched; it will be evaluated again at the next detection"
        )


def _unknown(real: Path, reason: str) -> PatchOutcome:
    return PatchOutcome(
        False,
        "unknown-structure",
        str(real),
        f"Derpyu autopatch: {real}: SAFE_EXACT not recognised ({reason}); left untouched",
    )


def _failed(real: Path, exc: OSError) -> PatchOutcome:
    if isinstance(exc, FileNotFoundError):
        return PatchOutcome(False, "missing", str(real), f"Derpyu autopatch: {exc}; left untouched")
    if isinstance(exc, PermissionError) or exc.errno in _READ_ONLY_ERRNOS:
        why = exc.strerror or str(exc)
        return PatchOutcome(
            False,
            "read-only",
            str(real),
            f"Derpyu autopatch: cannot write beside {real} ({why}); left untouched",
        )
    return PatchOutcome(
        False, "error", str(real), f"Derpyu autopatch: {real}: {exc}; left untouched"
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _replace(path: Path, data: bytes, like: os.stat_result) -> None:
    """Atomically replace ``path`` with ``data`` keeping ``like``'s mode (and owner when
    allowed), through :data:`engine.jsonio.fs`'s steps; the caller fsyncs the directory.
    ``write_bytes_atomic`` would create the file 0644 as the daemon's user."""
    tmp = temp_path(path)
    try:
        jsonio.fs.create_write_sync(tmp, data)
        os.chmod(tmp, stat.S_IMODE(like.st_mode))
        if hasattr(os, "chown"):
            with contextlib.suppress(PermissionError):
                os.chown(tmp, like.st_uid, like.st_gid)
        jsonio.fs.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            jsonio.fs.unlink(tmp)
        raise


def _backup_re(real: Path) -> re.Pattern[str]:
    return re.compile(re.escape(real.name + _BACKUP_INFIX) + r"(\d{14})(?:-([1-9]\d*))?")


def _write_backup(real: Path, data: bytes, like: os.stat_result, now_ms: int) -> Path:
    """Write ``data`` durably to a fresh backup name beside ``real``."""
    stamp = datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%Y%m%d%H%M%S")
    base = real.with_name(f"{real.name}{_BACKUP_INFIX}{stamp}")
    backup, n = base, 1
    while os.path.lexists(backup):
        n += 1
        backup = base.with_name(f"{base.name}-{n}")
    _replace(backup, data, like)
    jsonio.fs.fsync_dir(real.parent)
    return backup


def _prune_backups(real: Path, *, keep: Path) -> None:
    """Delete our oldest backups of ``real`` beyond :data:`MAX_BACKUPS`, never ``keep``."""
    pattern = _backup_re(real)
    ours: list[tuple[tuple[str, int], Path]] = []
    with os.scandir(real.parent) as it:
        for entry in it:
            m = pattern.fullmatch(entry.name)
            if m and entry.name != keep.name and entry.is_file(follow_symlinks=False):
                ours.append(((m.group(1), int(m.group(2) or 1)), Path(entry.path)))
    ours.sort(reverse=True)
    doomed = [path for _, path in ours[MAX_BACKUPS - 1 :]]
    for path in doomed:
        jsonio.fs.unlink(path)
    if doomed:
        jsonio.fs.fsync_dir(real.parent)


def _load_state(path: Path) -> dict[str, Any]:
    """The state file; absent or damaged reads as empty (it only tells rollbacks and
    updates apart, and the next patch rewrites it)."""
    try:
        obj = read_json(path)
    except (FileNotFoundError, CorruptJSONError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _records(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    files = state.get(STATE_KEY)
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(v, dict)}


def _save_record(path: Path, state: dict[str, Any], key: str, entry: dict[str, Any]) -> None:
    """Write ``entry`` under ``key``, keeping every other record and top-level key."""
    jsonio.fs.mkdir(path.parent)
    files = _records(state)
    files[key] = entry
    write_json_atomic(
        path, {**state, "version": STATE_VERSION, STATE_KEY: dict(sorted(files.items()))}
    )
