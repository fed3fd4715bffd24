"""Suite-wide test plumbing: one bytecode cache for the processes the tests start."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _bytecode_cache() -> None:
    """The daemons and CLI commands the e2e tests start are new interpreters: with
    PYTHONDONTWRITEBYTECODE set (as some images do) each would compile every module of
    rofmd, handlers and engine from source again (about 0.3 s of CPU a start). They
    share one bytecode cache outside the work tree instead."""
    if os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    prefix = Path(tempfile.gettempdir()) / f"rofmd-test-pycache-{os.getuid()}"
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


_bytecode_cache()
