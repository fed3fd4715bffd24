"""The engine's memo caches, emptied in one call.

Several pure functions cache their results with `functools.lru_cache` (term keys,
stems, stopword tables, session directory names). The caches are bounded, but the
entries a busy hour adds are allocated among that hour's session data, and each one
keeps a block of the allocator's memory in use after those sessions are gone: 50 busy
sessions, disposed, left the daemon 17 % above its start with the caches kept and 10 %
with them emptied (glibc malloc; the type attribute cache does the rest, see
`rofmd.server.memory_release`). The daemon empties them when it gives memory back to the OS.
They refill on demand: results never change, only the first call is slower.

Found by looking, not listed: every module-level cache of a loaded `engine` module,
so a cache added later is included without anyone remembering to.
"""

from __future__ import annotations

import sys

__all__ = ["clear_memo_caches"]


def clear_memo_caches() -> int:
    """Empty every module-level memo cache of the loaded engine modules; returns how many
    entries were dropped."""
    dropped = 0
    for name, module in list(sys.modules.items()):
        if module is None or (name != "engine" and not name.startswith("engine.")):
            continue
        for value in list(vars(module).values()):
            info = getattr(value, "cache_info", None)
            clear = getattr(value, "cache_clear", None)
            if not (callable(info) and callable(clear)):
                continue
            if getattr(value, "__module__", None) != name:
                continue  # imported from elsewhere: cleared with its own module
            dropped += info().currsize
            clear()
    return dropped
