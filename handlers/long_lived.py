"""What lives as long as its session: made with the cyclic collector paused, then frozen
out of its reach (issue 10).

A loaded session is hundreds of thousands of objects (index entries and their lists, the
recall index) that live until it is unloaded. The collector rescanned every one of them
at each full collection (0.8–2 s with 2×10⁵ folders loaded: every session stalled,
nothing freed), and making them set off full collections over everything loaded before
(5 s of the 26 s twenty 10⁴-folder sessions took to open). So they are made with the
collector paused (reference counting still frees whatever is dropped), and
``gc.freeze()`` then moves every object the collector tracks to the permanent generation,
which no collection scans. What a session drops later is freed by reference counting as
ever. Cycles are another matter: a freeze also takes whatever the requests running at
that moment hold (their frames, closures over a session), and a cycle among frozen
objects is never collected. So unloading a session thaws everything (:func:`thaw`, O(1)):
the next full collection, the one the daemon runs when it gives memory back
(`rofmd.server.memory_release`), finds the unloaded session's cycles with everything else, and
what survives it is frozen again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from engine.relevance.entry_keys import collection_paused

__all__ = ["long_lived", "thaw"]


@contextmanager
def long_lived() -> Iterator[None]:
    """Make a session's long-lived data inside: no collection meanwhile, everything
    tracked frozen afterwards (also when the block raised: what it made stays). Frozen
    before the collector is back: else its first collection, set off by the very next
    allocation, scans everything the block made once (0.1–0.5 s at 10^5 folders)."""
    with collection_paused():
        try:
            yield
        finally:
            gc.freeze()


def thaw() -> None:
    """A session was unloaded: let the collector see everything again (see the module
    docstring; the daemon's memory release collects and freezes again)."""
    gc.unfreeze()
