"""`recall.hops`: descendant expansion (reference §3.0.2, §1.10 "只约束第一代").

The first generation is what the user's message found. With `hops` = h > 0, the
keywords of each generation's new memories are a query of their own, and what they
find (not in the block, not surfaced before in `fair` / `deterministic`, not picked this
round) is generation 2, then 3, up to generation h + 1 — the reference's "后代扩展轮数".
The default 0 has no descendants. Descendants are chosen in σ (α desc, createdAt asc, id
asc) and come after every first-generation pick, so the round budget and the block
trimming drop them first; each generation takes at most the round's quota k (our reading
where the reference only warns that hops > 0 breaks the bounds: "不承诺保证", not an
unbounded flood of folders read from disk). Time and tag constraints, which only apply
to the first generation, do not apply to descendants. `legacy` keeps its own
generations (`engine.recall.legacy`) and ignores `hops`.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.config import MemoryConfig
from engine.keywords import match_keys
from engine.recall.candidates import CandidateIndex
from engine.recall.fair import Pick, sigma_key
from engine.recall.query import Query

__all__ = ["HOP_LANE", "expand_hops"]

HOP_LANE = "hop"


def expand_hops(
    index: CandidateIndex,
    parents: Iterable[Pick],
    exclude: set[str],
    cfg: MemoryConfig,
    k: int,
) -> list[Pick]:
    """Generations 2..hops+1 from `parents` (module docstring); `exclude`: ids that may
    not be picked (block, ledger, this round's picks)."""
    hops = cfg.recall.hops
    if hops <= 0 or k <= 0:
        return []
    folders = index.folders
    fold = cfg.match.expand_latin_case
    sigma = sigma_key(index)
    taken = set(exclude)
    out: list[Pick] = []
    generation = [p.n for p in parents]
    for gen in range(2, hops + 2):
        keys = match_keys(
            (kw for n in generation for kw in folders[n].keywords), expand_latin_case=fold
        )
        if not keys:
            break
        found = index.match(
            Query("", "", tuple(keys), tuple(keys), 1, 0), min_alpha=cfg.recall.min_alpha
        ).candidates
        fresh = sorted((n for n in found if folders[n].id not in taken), key=sigma)[:k]
        if not fresh:
            break
        for n in fresh:
            taken.add(folders[n].id)
            out.append(Pick(n, folders[n].id, HOP_LANE, generation=gen))
        generation = fresh
    return out
