"""Relevance-first selection, `recall.mode = "ranked"` (the packaged default; beyond the
reference, whose `fair` mode stays as the rollback switch).

Why: FAIR-DRI (`engine.recall.fair`) orders the candidates of a message by α, then age.
When a question's words hit most folders (a speaker's name, a common word), its picks
are simply the highest-α folders left, whatever was asked, and its ledger keeps a memory
that surfaced once away for `cooldownRounds`, so a conversation's block freezes.

One round, no randomness, no clock:

1. The message's search terms (`engine.relevance.analyzer` of `engine.recall.query.
   search_text`: the message without its question words) are scored against every
   scored folder with BM25F (`engine.relevance.index.RelevanceIndex`: text plus boosted
   title, keywords, events, persons, locations). α is a mild prior,
   `score × (1 + alphaPrior × (α − 0.5))` (±10% by default), never the main order,
   so a low-α folder that answers the question beats a high-α one that does not.
   The best of them are then reranked with their best single passage (one message:
   `engine.relevance.passages`), `(1 − w) · folder / best folder + w · passage /
   best passage`, w = `passageWeight`: the folder holding the message that answers
   beats one that mentions the question's words across twenty lines of chatter.
   A sentence that asks is never that passage: a memory of the user asking the same
   thing before holds the question's words, not its answer.
   Folders under `recall.minAlpha` are left out; so is everything scoring under
   `minRelativeScore` × the best score (weak matches would only crowd the block).
2. The relevant folders are walked best first, ties by folder id. One already in the
   block is not re-injected: it counts as served and is marked *needed* this round.
   Every other one is picked, until k folders (the quota of `effective_quota`) are
   served. Nothing is excluded for having surfaced before: a memory evicted when the
   conversation moved on comes back as soon as a message needs it again.
3. When nothing scores (a message whose words are all stopwords, say), the reference's
   keyword and category candidates are used instead, in FAIR-DRI's σ order
   (α desc, createdAt asc, id asc), so category questions ("我喜欢什么") still work.

A query restricted to some folders (`Query.allowed`, the hard filter of a message naming
a known place or person, §1.13.2) ranks only them: the best folders are taken from a
growing pool of the whole ranking until enough of them are allowed (or the ranking is
exhausted, or the pool reaches `RESTRICTED_POOL_MAX`), and `minRelativeScore` is then
measured against the best allowed folder, not against folders the filter excludes.

The block then follows the conversation (`engine.recall.round.trim_ranked`): memories no
message needed for more than `keepRounds` rounds leave first, then, over the caps, the
least relevant to the current message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.config import MemoryConfig
from engine.recall.candidates import CandidateIndex, MatchesOnce
from engine.recall.fair import Pick, Selection, copy_lanes
from engine.recall.query import Query, search_text
from engine.recall.state import RecallState
from engine.relevance.index import RelevanceIndex

__all__ = [
    "FALLBACK_LANE",
    "RANKED_LANE",
    "RankedSelection",
    "Relevant",
    "relevant",
    "select_ranked",
]

RANKED_LANE = "ranked"
FALLBACK_LANE = "keyword"

RESTRICTED_POOL_MIN = 64
RESTRICTED_POOL_MAX = 4096
"""The pool a restricted query's allowed folders are taken from: from max(64, 4 × limit),
four times larger each time too few were allowed, up to 4096 folders."""


@dataclass
class RankedSelection:
    """The picks of one ranked round and how relevant each folder was to the message."""

    selection: Selection
    needed: dict[str, float] = field(default_factory=dict)  # folder id -> score
    terms: int = 0


@dataclass(frozen=True, slots=True)
class Relevant:
    """The folders relevant to one query, best first, and the lane that found them:
    `ranked` (BM25F scores) or `keyword` (the fallback: keyword and category candidates
    in σ order, score 0)."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    lane: str
    terms: int


def relevant(
    relevance: RelevanceIndex,
    index: CandidateIndex,
    matches: MatchesOnce,
    query: Query,
    cfg: MemoryConfig,
    limit: int,
) -> Relevant:
    """Steps 1 and 3: the best `limit` folders for `query` by relevance, or, when nothing
    scores, every keyword / category candidate in σ order (`matches`, made only then)."""
    rc = cfg.recall
    terms = relevance.query_terms(search_text(query.text))
    if query.allowed is None:
        ranked = relevance.rank(
            terms,
            limit=limit,
            alpha_prior=rc.ranked.alpha_prior,
            min_alpha=rc.min_alpha,
            min_relative=rc.ranked.min_relative_score,
            passage_weight=rc.ranked.passage_weight,
        )
        ids, scores = ranked.ids, ranked.scores
    else:
        scored = _rank_within(relevance, terms, cfg, limit, query.allowed)
        ids, scores = tuple(f for f, _ in scored), tuple(s for _, s in scored)
    if ids:
        by_id = index.by_id
        if not all(map(by_id.__contains__, ids)):  # a folder the keyword index lacks
            kept = [(f, s) for f, s in zip(ids, scores, strict=True) if f in by_id]
            ids, scores = tuple(f for f, _ in kept), tuple(s for _, s in kept)
        return Relevant(ids, scores, RANKED_LANE, len(terms))
    folders = index.folders
    pool = sorted(
        matches().candidates,
        key=lambda n: (-folders[n].alpha, folders[n].created_at, folders[n].id),
    )
    ids = tuple(folders[n].id for n in pool)
    return Relevant(ids, (0.0,) * len(ids), FALLBACK_LANE, len(terms))


def _rank_within(
    relevance: RelevanceIndex,
    terms: list[str],
    cfg: MemoryConfig,
    limit: int,
    allowed: frozenset[str],
) -> list[tuple[str, float]]:
    """The best `limit` allowed folders for `terms` (module docstring), best first."""
    if not allowed or limit <= 0:
        return []
    rc = cfg.recall
    pool = max(RESTRICTED_POOL_MIN, 4 * limit)
    while True:
        ranked = relevance.rank(
            terms,
            limit=pool,
            alpha_prior=rc.ranked.alpha_prior,
            min_alpha=rc.min_alpha,
            min_relative=0.0,
            passage_weight=rc.ranked.passage_weight,
        )
        kept = [(f, s) for f, s in zip(ranked.ids, ranked.scores, strict=True) if f in allowed]
        if len(kept) >= limit or len(ranked.ids) < pool or pool >= RESTRICTED_POOL_MAX:
            break
        pool = min(RESTRICTED_POOL_MAX, pool * 4)
    if not kept:
        return []
    cut = kept[0][1] * rc.ranked.min_relative_score
    return [(f, s) for f, s in kept if s >= cut][:limit]


def select_ranked(
    relevance: RelevanceIndex,
    index: CandidateIndex,
    matches: MatchesOnce,
    query: Query,
    state: RecallState,
    cfg: MemoryConfig,
    k: int,
    *,
    skip: Iterable[str] = (),
) -> RankedSelection:
    """Steps 1-3 for round `state.round + 1`; `state` is not changed. `skip`: ids served
    otherwise this round (the 「你说过」 reserve), neither picked nor counted again."""
    sel = Selection(lanes=copy_lanes(state.lanes))
    out = RankedSelection(sel)
    if k <= 0:
        return out
    skipped = set(skip)
    in_block = set(state.ids())
    found = relevant(relevance, index, matches, query, cfg, k + len(in_block) + len(skipped))
    out.terms = found.terms
    by_id = index.by_id
    if found.lane == RANKED_LANE:
        out.needed = dict(zip(found.ids, found.scores, strict=True))
        served = 0
        for fid in found.ids:
            if served >= k:
                break
            if fid in skipped:
                continue
            served += 1
            if fid not in in_block:
                sel.picks.append(Pick(by_id[fid], fid, RANKED_LANE))
    else:
        pool = [f for f in found.ids if f not in in_block and f not in skipped]
        sel.picks = [Pick(by_id[f], f, FALLBACK_LANE) for f in pool[:k]]
        out.needed = dict.fromkeys(found.ids, 0.0)
    sel.pops = len(sel.picks)
    return out
