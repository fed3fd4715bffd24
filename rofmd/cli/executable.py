"""Which `rofmd` to name: in a unit file, and in a hint a person will paste.

`make run` serves from the repository's virtualenv, where `rofmd` is not on PATH; a hint
that says `rofmd status` then fails in the next terminal. The hint names the script
that is running, as short as it can be said from here.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["rofmd_command", "rofmd_executable"]


def rofmd_executable() -> Path:
    """The `rofmd` script of the interpreter running this command (a virtualenv's or
    pipx's bin/), else the one on PATH, else this command's own path."""
    beside = Path(sys.executable).parent / "rofmd"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside.absolute()
    found = shutil.which("rofmd")
    return Path(found).absolute() if found else Path(sys.argv[0]).absolute()


def rofmd_command(cwd: Path | None = None) -> str:
    """How to type this `rofmd` in a shell here: `rofmd` when PATH finds this very
    script, else its path relative to the working directory when it lies below it
    (`.venv/bin/rofmd`), else its absolute path."""
    exe = rofmd_executable()
    found = shutil.which("rofmd")
    if found is not None and Path(found).resolve() == exe.resolve():
        return "rofmd"
    here = (cwd or Path.cwd()).absolute()
    try:
        return str(exe.relative_to(here))
    except ValueError:
        return str(exe)
