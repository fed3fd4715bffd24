"""memory_recall without keywords: list what the constraints allow (reference §1.10
"纯时间浏览", §1.3 "有任一过滤器时可省").

Every scored folder that all restricting constraints allow (time window, event, tags)
and that reaches `recall.minAlpha`, in event order: `eventStart` ascending, the archive
time when a folder has no event time, then the id. It is a lookup, not a recall
decision: nothing is excluded (the block, the ledger), no lane state is read or
written, and pages are cut from that one order (`limit` / `offset`, `hasMore`,
`nextOffset`), the same for the same store. A constraint with a `stop` (an ambiguous or
unknown event) ends it as it ends a search.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.config import MemoryConfig
from engine.recall.candidates import CandidateIndex
from engine.recall.constraint import Constraint, combined_allowed, filter_counts
from engine.recall.fair import Pick
from engine.recall.search import PAGE_WINDOW, SearchPage, open_page

__all__ = ["BROWSE_LANE", "BROWSE_MODE", "browse", "event_start"]

BROWSE_MODE = "browse"
BROWSE_LANE = "browse"


def event_start(index: CandidateIndex, n: int) -> int:
    """When folder `n`'s content happened: its `eventStart`, else its archive time."""
    start = getattr(index.entry(n), "eventStart", None)
    if isinstance(start, int) and not isinstance(start, bool) and start > 0:
        return start
    return index.folders[n].created_at


def browse(
    index: CandidateIndex,
    constraints: Sequence[Constraint],
    cfg: MemoryConfig,
    *,
    limit: int,
    offset: int | None,
) -> SearchPage:
    """One page of what `constraints` allow (module docstring)."""
    rc = cfg.recall
    page = open_page(BROWSE_MODE, cfg, limit, offset, constraints)
    if page.miss_type is not None:
        return page
    allowed = combined_allowed(constraints)
    if allowed is None:
        raise ValueError("browse needs a constraint that restricts the call")
    folders = index.folders
    ns = [n for n in index.numbers(allowed) if folders[n].alpha >= rc.min_alpha]
    ns.sort(key=lambda n: (event_start(index, n), folders[n].created_at, folders[n].id))
    order = [Pick(n, folders[n].id, BROWSE_LANE) for n in ns[:PAGE_WINDOW]]
    page.candidates = len(ns)
    page.window = len(order)
    page.picks = order[page.offset : page.offset + limit]
    rest = len(order) - page.offset - len(page.picks)
    page.has_more = rest > 0
    if page.has_more:
        page.next_offset = page.offset + len(page.picks)
    if not ns:
        scored = [f.id for f in folders if f.alpha >= rc.min_alpha]
        page.filtered, emptied = filter_counts(constraints, scored)
        page.miss_type = emptied or "empty"
    elif not page.picks:
        page.miss_type = "offset"
    return page
