"""Where configuration and memory live on disk (pure path arithmetic).

Nothing here reads the environment: the daemon resolves ``$STATE_DIRECTORY`` /
``$XDG_STATE_HOME`` / ``$HOME`` and passes the results in (testable rules, no process state).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath

import engine
from engine.config.model import StorageConfig

# "~", "~/..." and "~\..." expand to the home directory; "~user" does not (reference).
_HOME_PREFIX = re.compile(r"^~(?:$|[/\\])")


def packaged_config_path() -> Path:
    """The packaged product ``config.json``: the one a wheel force-includes next to the
    engine package (``engine/config.json``) if present, else the repository root file (a
    source checkout or editable install), one level above the package."""
    package_dir = Path(engine.__file__).parent
    bundled = package_dir / "config.json"
    return bundled if bundled.is_file() else package_dir.parent / "config.json"


def resolve_memory_root(
    storage_dir: str, *, override: Path | None, state_dir: Path, home: Path
) -> Path:
    """Resolve ``storage.dir`` to the memory root directory.

    ``override`` (the daemon's ``--memory-root``) wins outright; otherwise
    :func:`resolve_user_path` against ``state_dir``, where the reference used the plugin
    directory (``"memory"`` gives ``<state_dir>/memory``). A blank value (which validation
    never lets through) is read as the default.
    """
    if override is not None:
        return override
    return resolve_user_path(storage_dir.strip() or StorageConfig().dir, base=state_dir, home=home)


def resolve_user_path(text: str, *, base: Path, home: Path) -> Path:
    """A path the user wrote in the config (``storage.dir``, ``compat.mediaRoots``): ``~``,
    ``~/x`` and ``~\\x`` against ``home`` (``~user`` is an ordinary relative name), an
    absolute path (POSIX or Windows form) as it is, anything else against ``base``."""
    if _HOME_PREFIX.match(text):
        rest = [part for part in re.split(r"[/\\]+", text[1:]) if part]
        return home.joinpath(*rest)
    if PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute():
        return Path(text)
    return base / text
