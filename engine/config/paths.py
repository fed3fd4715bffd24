"""Where configuration and memory live on disk (pure path arithmetic).

Nothing here reads the environment: the daemon resolves ``$STATE_DIRECTORY`` /
``$XDG_STATE_HOME`` / ``$HOME`` itself and passes the results in, which keeps the
rules testable and the engine free of process state.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath, PureWindowsPath

import engine

#: ``storage.dir`` default (reference §3.0.5): relative, so it lands under the state dir.
DEFAULT_STORAGE_DIR = "memory"

# "~", "~/..." and "~\..." expand to the home directory; "~user" does not (reference).
_HOME_PREFIX = re.compile(r"^~(?:$|[/\\])")


def packaged_config_path() -> Path:
    """The packaged product ``config.json``.

    A wheel force-includes it next to the engine package (``engine/config.json``);
    in a source checkout or editable install it is the repository root file, one level
    above the package. The wheel location wins when it exists.
    """
    package_dir = Path(engine.__file__).parent
    bundled = package_dir / "config.json"
    if bundled.is_file():
        return bundled
    return package_dir.parent / "config.json"


def resolve_memory_root(
    storage_dir: str, *, override: Path | None, state_dir: Path, home: Path
) -> Path:
    """Resolve ``storage.dir`` to the memory root directory.

    ``override`` (the daemon's ``--memory-root``) wins outright; otherwise the rules of
    :func:`resolve_user_path` apply with ``state_dir`` as the base, where the reference
    resolved against the plugin directory (the default ``"memory"`` gives
    ``<state_dir>/memory``). A blank value (which validation never lets through) is read
    as the default.
    """
    if override is not None:
        return override
    return resolve_user_path(storage_dir.strip() or DEFAULT_STORAGE_DIR, base=state_dir, home=home)


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
