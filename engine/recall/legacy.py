"""`recall.mode = legacy`: the v1.3.0 probability path (reference §1.3.1), kept as is.

* Generation 1 (the user's message): each candidate is tried once, in index order,
  and added with probability α × probabilityScale, until `firstGenMax` are added.
* Generation n > 1 (keywords of the memories added or already in the block at
  generation n−1 trigger again): probability α × p(n) × probabilityScale with
  p(n) = (1 − erf((n−μ)/(σ√2))) / (1 − erf((1−μ)/(σ√2))); no count limit.
* Folders already in the block never compete for generation-1 slots and are never
  added again, but they still bridge into the next generation.
* A folder is tried at most once per round; `maxGeneration = 0` means unlimited (the
  walk ends when a generation adds nothing new to try).
* Dice come from :class:`engine.recall.prng.Mulberry32` (see there for `seed = 0`).
"""

from __future__ import annotations

import math

from engine.config import MemoryConfig
from engine.keywords import match_keys
from engine.recall.candidates import CandidateIndex, Matches
from engine.recall.fair import Pick, Selection
from engine.recall.prng import Mulberry32, derive_seed
from engine.recall.query import Query
from engine.recall.state import RecallState

__all__ = ["generation_factor", "select_legacy"]


def generation_factor(n: int, mu: float, sigma: float) -> float:
    """p(n); p(1) = 1. A non-positive σ is a step at μ."""
    if n <= 1:
        return 1.0
    if sigma <= 0:
        return 1.0 if n <= mu else 0.0
    root = sigma * math.sqrt(2)
    den = 1 - math.erf((1 - mu) / root)
    if den <= 0:
        return 0.0
    return max(0.0, (1 - math.erf((n - mu) / root)) / den)


def select_legacy(
    index: CandidateIndex,
    matches: Matches,
    state: RecallState,
    cfg: MemoryConfig,
    k: int,
    session_key: str,
    query: Query,
) -> Selection:
    """The v1.3.0 walk for round `state.round + 1`; `state` is not changed."""
    rc = cfg.recall
    sel = Selection()
    if k <= 0:
        return sel
    seed = rc.seed if rc.seed > 0 else derive_seed(session_key, state.round + 1, query.keys)
    rng = Mulberry32(seed)
    folders = index.folders
    block = set(state.ids())
    scale = rc.probability_scale
    fold = cfg.match.expand_latin_case
    tried: set[int] = set()
    added: set[int] = set()
    first = 0
    bridges: list[int] = []
    for n in sorted(matches.candidates):
        if folders[n].id in block:
            bridges.append(n)
            continue
        if first >= k:
            break
        tried.add(n)
        if rng.next_float() < folders[n].alpha * scale:
            sel.picks.append(Pick(n, folders[n].id, "legacy", generation=1))
            added.add(n)
            bridges.append(n)
            first += 1
    gen = 2
    while bridges and (rc.max_generation <= 0 or gen <= rc.max_generation):
        keys = match_keys(
            (kw for n in bridges for kw in folders[n].keywords), expand_latin_case=fold
        )
        sub = Query("", "", tuple(keys), tuple(keys), 1, 0)
        found = index.match(sub, min_alpha=rc.min_alpha).candidates
        p_gen = generation_factor(gen, rc.mu, rc.sigma)
        nxt: list[int] = []
        for n in sorted(found):
            if n in tried or n in added:
                continue
            if folders[n].id in block:
                tried.add(n)
                nxt.append(n)
                continue
            tried.add(n)
            if rng.next_float() < folders[n].alpha * p_gen * scale:
                sel.picks.append(Pick(n, folders[n].id, "legacy", generation=gen))
                added.add(n)
                nxt.append(n)
        bridges = nxt
        gen += 1
    return sel
