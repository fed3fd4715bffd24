"""One round's selection in `ranked`, `fair` and `deterministic` (reference §1.13.4,
§1.13.5, §1.17, §3.0.2 hops); `legacy` keeps v1.3.0's walk (`engine.recall.legacy`).

In this order, over the round's quota k:

1. the 「你说过」 reserve: when the message quotes the assistant (or memory_recall asks),
   up to `assistantSaid.reserveSlots` folders whose assistant phrases it meets
   (`CandidateIndex.match_assistant`), best channel score first (then σ), before any
   normal ranking; in `fair` / `deterministic` the channel's other hits join the
   candidates (the reference's "不足则回落到并入正常候选"); in `ranked` a hit already in
   the block serves without being injected again;
2. the normal selection over the slots left: the mode's own (`select_fair`,
   `select_deterministic`, `select_ranked`) for one clause, the clauses' shared
   allocation (`engine.recall.clauses`) for two or more;
3. `fair`: the v1.5.5 high-relevance reserve, which never replaces a protected pick
   (the 「你说过」 reserve and the clauses' protected slots);
4. `recall.hops` descendants (`engine.recall.hops`), after everything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.config import MemoryConfig
from engine.recall.candidates import CandidateIndex, Matches, MatchesOnce
from engine.recall.clauses import ClauseResult, allocate
from engine.recall.fair import (
    Pick,
    Selection,
    apply_high_relevance,
    copy_lanes,
    lane_order,
    return_picks,
    select_deterministic,
    select_fair,
    sigma_key,
)
from engine.recall.hops import expand_hops
from engine.recall.query import Query
from engine.recall.ranked import relevant, select_ranked
from engine.recall.state import RecallState
from engine.relevance.index import RelevanceIndex

__all__ = [
    "ASSISTANT_LANE",
    "RoundSelection",
    "assistant_reserve",
    "select_round",
    "with_candidates",
]

ASSISTANT_LANE = "assistantSaid"
ASSISTANT_SCORE = 1.0
"""How relevant a 「你说过」 pick counts in `ranked` block trimming: as the best match."""


@dataclass
class RoundSelection:
    """The selection of one round, and what it tells about the question."""

    selection: Selection
    needed: dict[str, float] = field(default_factory=dict)  # ranked: folder id -> score
    clauses: list[ClauseResult] = field(default_factory=list)
    assistant: dict[str, Any] = field(default_factory=dict)
    served: list[str] = field(default_factory=list)
    """ranked: block entries that served this round without being injected again."""


def _assistant_info(cfg: MemoryConfig, query: Query) -> dict[str, Any]:
    ask = query.assistant
    return {
        "enabled": bool(cfg.recall.assistant_said.enabled),
        "requested": ask is not None,
        "source": ask.source if ask is not None else None,
        "phrase": ask.phrase if ask is not None else None,
        "keys": list(ask.keys) if ask is not None else [],
        "reserveSlots": cfg.recall.assistant_said.reserve_slots,
        "candidates": 0,
        "picks": [],
        "served": [],
    }


def assistant_reserve(
    index: CandidateIndex,
    query: Query,
    state: RecallState,
    cfg: MemoryConfig,
    k: int,
    exclude: set[str],
    *,
    serve_from_block: bool,
) -> tuple[list[Pick], list[str], set[int], dict[str, Any]]:
    """Step 1: (picks, ids served from the block, every channel hit, `assistantInfo`).
    `exclude` may not be picked; with `serve_from_block` a hit in the block takes a slot
    without a pick (ranked)."""
    info = _assistant_info(cfg, query)
    ask = query.assistant
    if ask is None or k <= 0:
        return [], [], set(), info
    am = index.match_assistant(ask, min_alpha=cfg.recall.min_alpha, allowed=query.allowed)
    info["terms"] = list(am.terms)
    info["candidates"] = len(am.hits)
    if not am.hits:
        return [], [], set(), info
    sigma = sigma_key(index)
    folders = index.folders
    block = set(state.ids())
    order = sorted(am.hits, key=lambda n: (-am.score[n], -am.hits[n], sigma(n)))
    slots = min(max(0, cfg.recall.assistant_said.reserve_slots), k)
    picks: list[Pick] = []
    served: list[str] = []
    for n in order:
        if len(picks) + len(served) >= slots:
            break
        fid = folders[n].id
        if serve_from_block and fid in block:
            served.append(fid)
        elif fid not in exclude:
            picks.append(Pick(n, fid, ASSISTANT_LANE, protected=True))
    info["picks"] = [p.id for p in picks]
    info["served"] = served
    return picks, served, set(am.hits), info


def with_candidates(matches: Matches, extra: set[int]) -> Matches:
    """`matches` with the 「你说过」 channel's other hits among its candidates."""
    if not extra or extra <= matches.candidates:
        return matches
    return Matches(matches.seeds, matches.candidates | extra, matches.hits, matches.categories)


def _lane_clauses(
    index: CandidateIndex,
    matches: Matches,
    query: Query,
    state: RecallState,
    cfg: MemoryConfig,
    k: int,
    reserved: list[Pick],
) -> tuple[Selection, list[ClauseResult]]:
    """Step 2 with clauses, `fair` / `deterministic` (`engine.recall.clauses`)."""
    rc = cfg.recall
    used = [p.id for p in reserved]
    fair = rc.mode == "fair"
    if fair:
        sel = select_fair(index, matches, state, cfg, k, used=used, high_relevance=False)
    else:
        sel = select_deterministic(index, matches, state, k, used=used)
    exclude = set(state.ids()) | state.ledger.keys() | set(used)
    folders = index.folders
    sigma = sigma_key(index)
    queues: list[list[Pick]] = []
    results: list[ClauseResult] = []
    covered: set[int] = set()
    lane_ids = {p.id for p in sel.picks}
    for part in query.parts:
        pm = index.match(part, min_alpha=rc.min_alpha)
        covered |= pm.candidates
        own = [p for p in sel.picks if p.n in pm.candidates]
        if fair:
            rest = lane_order(index, pm, state, cfg, exclude)
        else:
            pool = sorted((n for n in pm.candidates if folders[n].id not in exclude), key=sigma)
            rest = [Pick(n, folders[n].id, "hi") for n in pool]
        queues.append(own + [p for p in rest if p.id not in lane_ids])
        results.append(
            ClauseResult(part.text, len(part.keywords), {folders[n].id for n in pm.candidates})
        )
    queues.append([p for p in sel.picks if p.n not in covered])
    alloc = allocate(queues, k, protect=len(query.parts))
    for result, got in zip(results, alloc.got, strict=False):
        result.picks = list(got)
        result.protected = got[0] if got else None
    chosen = {p.id for p in alloc.picks}
    if fair:
        return_picks(sel, state, [p for p in sel.picks if p.id not in chosen], cfg)
    sel.picks = alloc.picks
    sel.pops = max(sel.pops, len(sel.picks))
    return sel, results


def _ranked_clauses(
    relevance: RelevanceIndex,
    index: CandidateIndex,
    query: Query,
    state: RecallState,
    cfg: MemoryConfig,
    k: int,
    skip: set[str],
) -> tuple[Selection, dict[str, float], list[ClauseResult], list[str]]:
    """Step 2 with clauses, `ranked`: each clause's own ranking, shared."""
    rc = cfg.recall
    sel = Selection(lanes=copy_lanes(state.lanes))
    in_block = set(state.ids())
    by_id = index.by_id
    needed: dict[str, float] = {}
    queues: list[list[Pick]] = []
    results: list[ClauseResult] = []
    for part in query.parts:
        pm = MatchesOnce(index, part, rc.min_alpha)
        found = relevant(relevance, index, pm, part, cfg, k + len(in_block) + len(skip))
        for fid, score in zip(found.ids, found.scores, strict=True):
            needed[fid] = max(needed.get(fid, 0.0), score)
        queues.append([Pick(by_id[f], f, found.lane) for f in found.ids if f not in skip])
        results.append(ClauseResult(part.text, len(part.keywords), set(found.ids)))
    alloc = allocate(queues, k, in_block=in_block)
    for result, got in zip(results, alloc.got, strict=True):
        result.picks = list(got)
        result.protected = got[0] if got else None
    sel.picks = alloc.picks
    sel.pops = len(sel.picks)
    return sel, needed, results, alloc.served


def select_round(
    index: CandidateIndex,
    matches_of: MatchesOnce,
    query: Query,
    state: RecallState,
    cfg: MemoryConfig,
    k: int,
    *,
    relevance: RelevanceIndex | None = None,
) -> RoundSelection:
    """Steps 1-4 (module docstring) for round `state.round + 1`; `state` is not changed.
    `matches_of`: the keyword candidates of `query`, made when a step needs them (every
    mode but `ranked` at once; `ranked` only for its fallback)."""
    rc = cfg.recall
    mode = rc.mode
    ranked = mode == "ranked"
    if ranked and relevance is None:
        raise ValueError("recall.mode ranked needs the session's relevance index")
    block = set(state.ids())
    exclude = block if ranked else block | state.ledger.keys()
    reserved, served, hits, info = assistant_reserve(
        index, query, state, cfg, k, exclude, serve_from_block=ranked
    )
    rest = k - len(reserved) - len(served)
    skip = {p.id for p in reserved} | set(served)
    out = RoundSelection(Selection(lanes=copy_lanes(state.lanes)), assistant=info)
    if ranked:
        assert relevance is not None
        if query.parts:
            sel, needed, clauses, more = _ranked_clauses(
                relevance, index, query, state, cfg, rest, skip
            )
            out.clauses, served = clauses, served + more
        else:
            rsel = select_ranked(relevance, index, matches_of, query, state, cfg, rest, skip=skip)
            sel, needed = rsel.selection, rsel.needed
        for fid in skip:
            needed[fid] = max(needed.get(fid, 0.0), ASSISTANT_SCORE)
        out.needed = needed
    else:
        matches = with_candidates(matches_of(), hits)
        if query.parts:
            sel, out.clauses = _lane_clauses(index, matches, query, state, cfg, rest, reserved)
        elif mode == "fair":
            sel = select_fair(
                index, matches, state, cfg, rest, used=skip, high_relevance=not reserved
            )
        else:
            sel = select_deterministic(index, matches, state, rest, used=skip)
    sel.picks[:0] = reserved
    if mode == "fair" and (reserved or query.parts):
        apply_high_relevance(index, matches, sel, state, cfg, k)
    out.selection = sel
    out.served = served
    if rc.hops > 0:
        picked = {p.id for p in sel.picks}
        sel.picks += expand_hops(index, list(sel.picks), exclude | picked | set(served), cfg, k)
    return out
