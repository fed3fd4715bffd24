"""`rofmd serve` runs on the C library's malloc, so unloaded sessions give memory back.

Python's own small-object allocator (pymalloc) takes memory from the OS in 1 MiB
arenas and returns an arena only when every object in it is gone. A daemon keeps
making a few small objects that live on (counters, cache entries, the loop's
bookkeeping), and after a busy hour they sit scattered across the arenas the
sessions' data filled: measured on 50 busy sessions (150 folders each, an archive
and two recalls apiece, then `agent/disposed`), pymalloc kept about a third of the
peak (+31 % over the start) even after `rofmd.server.memory_release`; on glibc's malloc,
which returns free pages one by one (`malloc_trim`), the same run came back to +2 %.
The price is speed: the engine's hot paths ran 20-50 % slower in `make bench` (a
recall round over 10,000 folders: 2.3 → 2.7-3.6 ms), well below what a host waiting
for a model notices.

So on glibc, `rofmd serve` re-executes itself once, first thing, with
`PYTHONMALLOC=malloc`, unless `PYTHONMALLOC` is set already: an operator who prefers
the speed sets `PYTHONMALLOC=pymalloc` (or anything else) and keeps it. The process
stays the same (same pid, file descriptors, environment otherwise), so systemd's
`LISTEN_FDS` / `NOTIFY_SOCKET` work as before. Only a process started as the `rofmd`
command does it, never a caller of the CLI code in-process (tests).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["ENV", "SYSTEM_MALLOC", "allocator_name", "reexec_argv", "use_system_malloc"]

ENV = "PYTHONMALLOC"
SYSTEM_MALLOC = "malloc"


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError, AttributeError):
        return False


def _started_as_rofmd(argv0: str) -> bool:
    """The console script `rofmd`, or `python -m rofmd`."""
    path = Path(argv0)
    return path.name == "rofmd" or (path.name == "__main__.py" and path.parent.name == "rofmd")


def reexec_argv(
    environ: Mapping[str, str], argv: list[str], orig_argv: list[str], executable: str
) -> list[str] | None:
    """The command line to re-execute under the C library's malloc, or None to stay."""
    if environ.get(ENV) or not executable or not argv or not _started_as_rofmd(argv[0]):
        return None
    if not _glibc():
        return None
    return [executable, *orig_argv[1:]]


def use_system_malloc() -> None:
    """Re-execute this `rofmd serve` with `PYTHONMALLOC=malloc` (module docstring); returns
    only when it stays as it is."""
    argv = reexec_argv(os.environ, sys.argv, sys.orig_argv, sys.executable)
    if argv is None:
        return
    env = dict(os.environ)
    env[ENV] = SYSTEM_MALLOC
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(argv[0], argv, env)
    except OSError:
        return  # cannot re-execute (interpreter gone?): serve on pymalloc


def allocator_name(environ: Mapping[str, str] | None = None) -> str:
    """The allocator this process runs on, for `status` (`PYTHONMALLOC`, else pymalloc)."""
    env = os.environ if environ is None else environ
    return env.get(ENV) or "pymalloc"
