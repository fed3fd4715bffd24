"""The daemon's version, from the installed distribution metadata."""

from __future__ import annotations

from importlib import metadata


def version() -> str:
    """Installed version, or `0+unknown` when run from a bare source tree."""
    try:
        return metadata.version("rofmd")
    except metadata.PackageNotFoundError:
        return "0+unknown"
