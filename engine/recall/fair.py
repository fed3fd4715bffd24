"""FAIR-DRI selection, `recall.mode = fair` (reference §1.3 step 3, §1.17).

One round, eight steps in a fixed order, no randomness, no clock:

1. rareHigh   high-α (α ≥ θ_H) hits of rare seeds (posting ≤ τ), by Σ 1/ln(2+df), ≤ k_H
2. queryBoost high-α trimmed earlier (highRecycle) that this query hits again, after
              the cooldown
3. register   high-α deferred in earlier rounds (TTL `ttlRounds`), σ order
4. hi         remaining high-α candidates in σ = (α desc, createdAt asc, id asc); the
              next `lookahead × k_H` go to the register (capacity `capFactor × k_H`;
              overflow and expiry count as `registerDrops`)
5. lowProbe   low-α hits of rare seeds (explicit references), `specificProbeSlots`
6. rotation   low-α candidates in the query-independent global order (α asc,
              createdAt desc, id desc) from the persistent cursor, wrapping; r slots
              plus the high lane's unused slots
7. recycle    low-α trimmed from the block, after the cooldown, `maxPerRound`
8. commit     (in `engine.recall.round`: round budget, block trimming, ledger)

The high lanes share k_H = k − r slots; the low lanes get what the high lanes left.
Lanes 1, 3, 4, 5, 6 exclude block ∪ ledger; only queryBoost and recycle re-inject an
id, and only after `cooldownRounds` since it last surfaced (G4).

Reading of the reference where it is terse: the rotation lane walks the low-α
members of the current candidate set C(Q) (a memory unrelated to the query is never
injected by rotation); its order and cursor are global, so repeated queries sharing a
large low-α set progress through it (G2). Register entries and recycled ids do not
need to match the current query (they are promises from earlier rounds).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.config import MemoryConfig
from engine.recall.candidates import CandidateIndex, Matches
from engine.recall.state import Lanes, RecallState

__all__ = [
    "LANES",
    "Pick",
    "Selection",
    "copy_lanes",
    "global_low_key",
    "lane_split",
    "rare_scores",
    "rotation_key",
    "select_deterministic",
    "select_fair",
]

LANES = ("rareHigh", "queryBoost", "register", "hi", "lowProbe", "rotation", "recycle")
_REPLACEABLE = ("recycle", "rotation", "lowProbe", "hi")


@dataclass(slots=True)
class Pick:
    """One selected folder and the lane that selected it."""

    n: int
    id: str
    lane: str
    generation: int = 1
    high_relevance: bool = False


@dataclass
class Selection:
    """The outcome of the selection steps (before commit)."""

    picks: list[Pick] = field(default_factory=list)
    lanes: Lanes = field(default_factory=Lanes)
    pops: int = 0
    frontier_hits: int = 0
    register_drops: int = 0
    re_injections: int = 0
    low_arrivals: int = 0
    degraded: bool = False
    rotation_slots: int = 0
    high_relevance: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def lanes_picked(self) -> dict[str, int]:
        counts = dict.fromkeys(LANES, 0)
        for p in self.picks:
            if p.lane in counts:
                counts[p.lane] += 1
        return counts


def lane_split(k: int, explore_ratio: float) -> tuple[int, int]:
    """(k_H, r): r = max(1, min(k−1, round(k × exploreRatio))), k_H = k − r (k ≥ 1)."""
    r = max(1, min(k - 1, math.floor(k * explore_ratio + 0.5)))
    return k - r, r


def global_low_key(alpha: float, created_at: int, fid: str) -> tuple[Any, ...]:
    """The rotation order (α asc, createdAt desc, id desc) as an ascending key."""
    return (alpha, -created_at, tuple(-ord(c) for c in fid))


def rare_scores(index: CandidateIndex, matches: Matches, cfg: MemoryConfig) -> dict[int, float]:
    """Σ 1/ln(2+df) over the rare seeds (posting ≤ τ, first `scanCap` seeds) hitting each
    folder: what orders the rareHigh and lowProbe lanes."""
    rt = cfg.recall.fairness.rare_term
    tau = index.rare_threshold(rt.ratio, rt.min_posting)
    scores: dict[int, float] = {}
    for s in matches.seeds[: max(0, rt.scan_cap)]:
        if 0 < len(s.posting) <= tau:
            w = 1.0 / math.log(2 + len(s.posting))
            for n in s.posting:
                scores[n] = scores.get(n, 0.0) + w
    return scores


def rotation_key(
    cursor: tuple[float, int, str] | None,
) -> Callable[[tuple[float, int, str]], tuple[Any, ...]]:
    """The rotation lane's order from `cursor`: the global low order, the folders after
    the cursor first, wrapping round to the ones at or before it."""
    ck = global_low_key(*cursor) if cursor is not None else None

    def key(folder: tuple[float, int, str]) -> tuple[Any, ...]:
        k = global_low_key(*folder)
        return (0 if ck is None or k > ck else 1, k)

    return key


def copy_lanes(lanes: Lanes) -> Lanes:
    return Lanes(
        lanes.cursor,
        [dict(r) for r in lanes.register],
        dict(lanes.high_recycle),
        dict(lanes.recycle),
        lanes.low_watermark,
    )


def select_fair(
    index: CandidateIndex, matches: Matches, state: RecallState, cfg: MemoryConfig, k: int
) -> Selection:
    """Steps 1-7 for round `state.round + 1`; `state` is not changed."""
    fair = cfg.recall.fairness
    sel = Selection(lanes=copy_lanes(state.lanes))
    if k <= 0:
        return sel
    lanes = sel.lanes
    t = state.round + 1
    k_high, r = lane_split(k, fair.explore_ratio)
    theta = fair.theta_high
    min_alpha = cfg.recall.min_alpha
    cooldown = fair.recycle.cooldown_rounds
    folders = index.folders
    block = set(state.ids())
    exclude = block | state.ledger.keys()
    used: set[str] = set()
    cands = matches.candidates

    def sigma(n: int) -> tuple[float, int, str]:
        f = folders[n]
        return (-f.alpha, f.created_at, f.id)

    def free(n: int) -> bool:
        fid = folders[n].id
        return fid not in exclude and fid not in used

    def cooled(fid: str) -> bool:
        last = state.last_surfaced(fid)
        return last is None or t - last >= cooldown

    def take(n: int, lane: str) -> None:
        fid = folders[n].id
        used.add(fid)
        if fid in state.ledger:
            sel.re_injections += 1
        sel.picks.append(Pick(n, fid, lane))

    high_taken = 0

    # 1 rareHigh
    rare_score = rare_scores(index, matches, cfg)
    rare_high = sorted(
        (n for n in rare_score if folders[n].alpha >= theta and free(n)),
        key=lambda n: (-rare_score[n], sigma(n)),
    )
    for n in rare_high[:k_high]:
        take(n, "rareHigh")
        high_taken += 1

    # 2 queryBoost (cooldown applies, v1.4.1)
    if fair.query_boost and high_taken < k_high:
        boost = []
        for fid in lanes.high_recycle:
            hn = index.by_id.get(fid)
            if hn is None:
                continue
            n = hn
            if n not in cands or fid in block or fid in used:
                continue
            if folders[n].alpha < theta or not cooled(fid):
                continue
            boost.append(n)
        for n in sorted(boost, key=sigma)[: k_high - high_taken]:
            take(n, "queryBoost")
            lanes.high_recycle.pop(folders[n].id, None)
            high_taken += 1

    # 3 register
    kept: list[dict[str, Any]] = []
    reg_rows = []
    for row in lanes.register:
        rn = index.by_id.get(row["id"])
        if rn is None:
            continue
        n = rn
        if folders[n].alpha < max(theta, min_alpha) or not free(n):
            continue  # gone, no longer high, or surfaced meanwhile
        reg_rows.append((n, row))
    for n, row in sorted(reg_rows, key=lambda x: sigma(x[0])):
        if high_taken < k_high and free(n):
            take(n, "register")
            high_taken += 1
        elif row["ttl"] - 1 > 0:
            kept.append({"id": row["id"], "ttl": row["ttl"] - 1})
        else:
            sel.register_drops += 1
    lanes.register = kept

    # 4 hi: σ merge over the remaining high candidates
    remaining = k_high - high_taken
    look = max(0, fair.register_.lookahead) * k_high
    high_pool = [n for n in cands if folders[n].alpha >= theta and free(n)]
    frontier = heapq.nsmallest(remaining + look, high_pool, key=sigma)
    sel.pops = len(frontier)
    in_register = {row["id"] for row in lanes.register}
    for n in frontier[:remaining]:
        take(n, "hi")
        high_taken += 1
    sel.frontier_hits = min(remaining, len(frontier))
    ttl = max(1, fair.register_.ttl_rounds)
    for n in frontier[remaining:]:
        fid = folders[n].id
        if fid not in in_register:
            lanes.register.append({"id": fid, "ttl": ttl})
            in_register.add(fid)
    cap = max(0, fair.register_.cap_factor) * k_high
    if len(lanes.register) > cap:
        lanes.register.sort(
            key=lambda row: sigma(index.by_id[row["id"]]) if row["id"] in index.by_id else ()
        )
        sel.register_drops += len(lanes.register) - cap
        del lanes.register[cap:]

    # 5 lowProbe
    low_budget = k - high_taken
    probe_pool = sorted(
        (n for n in rare_score if folders[n].alpha < theta and free(n)),
        key=lambda n: (-rare_score[n], global_low_key(*_gk(folders[n]))),
    )
    probes = probe_pool[: min(max(0, fair.specific_probe_slots), low_budget)]
    for n in probes:
        take(n, "lowProbe")
    low_budget -= len(probes)

    # 6 rotation
    low_pool = [n for n in cands if folders[n].alpha < theta]
    new_mark = lanes.low_watermark
    arrivals = 0
    for n in low_pool:
        f = folders[n]
        if f.created_at > lanes.low_watermark and f.id not in exclude:
            arrivals += 1
        new_mark = max(new_mark, f.created_at)
    sel.low_arrivals = arrivals if lanes.low_watermark else 0
    sel.degraded = lanes.low_watermark > 0 and arrivals >= r
    lanes.low_watermark = new_mark
    sel.rotation_slots = low_budget
    if low_budget > 0:
        by_cursor = rotation_key(lanes.cursor)

        def rot_key(n: int) -> tuple[Any, ...]:
            return by_cursor(_gk(folders[n]))

        ordered = heapq.nsmallest(low_budget, (n for n in low_pool if free(n)), key=rot_key)
        for n in ordered:
            take(n, "rotation")
        low_budget -= len(ordered)

    # 7 recycle
    if fair.recycle.enabled and low_budget > 0:
        rec = []
        for fid, trimmed in lanes.recycle.items():
            cn = index.by_id.get(fid)
            if cn is None:
                continue
            n = cn
            if fid in block or fid in used or folders[n].alpha < min_alpha:
                continue
            if cooled(fid):
                rec.append((trimmed, fid, n))
        for _, fid, n in sorted(rec)[: min(low_budget, max(0, fair.recycle.max_per_round))]:
            take(n, "recycle")
            lanes.recycle.pop(fid, None)

    # v1.5.5 high-relevance reserve (fair only)
    _high_relevance(index, matches, sel, cfg, k, free, sigma)
    return sel


def _gk(f: Any) -> tuple[float, int, str]:
    return (f.alpha, f.created_at, f.id)


def _high_relevance(
    index: CandidateIndex,
    matches: Matches,
    sel: Selection,
    cfg: MemoryConfig,
    k: int,
    free: Any,
    sigma: Any,
) -> None:
    hr = cfg.recall.high_relevance
    info = {"enabled": hr.enabled, "minMatches": hr.min_matches, "reserveSlots": hr.reserve_slots}
    info.update(candidates=0, picks=0, replaced=0)
    sel.high_relevance = info
    if not hr.enabled or hr.reserve_slots <= 0:
        return
    need = max(1, hr.min_matches)
    pool = [n for n, c in matches.hits.items() if c >= need]
    info["candidates"] = len(pool)
    picked = {p.n for p in sel.picks}
    for p in sel.picks:
        if p.n in pool:
            p.high_relevance = True
    have = sum(1 for p in sel.picks if p.high_relevance)
    extra = sorted(
        (n for n in pool if n not in picked and free(n)), key=lambda n: (-matches.hits[n], sigma(n))
    )
    for n in extra:
        if have >= hr.reserve_slots:
            break
        fid = index.folders[n].id
        if len(sel.picks) < k:
            sel.picks.append(Pick(n, fid, "highRelevance", high_relevance=True))
        else:
            victim = next(
                (
                    i
                    for i in range(len(sel.picks) - 1, -1, -1)
                    if sel.picks[i].lane in _REPLACEABLE and not sel.picks[i].high_relevance
                ),
                None,
            )
            if victim is None:
                break
            old = sel.picks.pop(victim)
            if old.lane == "hi":
                sel.lanes.register.insert(
                    0, {"id": old.id, "ttl": max(1, cfg.recall.fairness.register_.ttl_rounds)}
                )
            elif old.lane == "recycle":
                sel.lanes.recycle[old.id] = 0
            sel.picks.append(Pick(n, fid, "highRelevance", high_relevance=True))
            info["replaced"] += 1
        info["picks"] += 1
        have += 1


def select_deterministic(
    index: CandidateIndex, matches: Matches, state: RecallState, k: int
) -> Selection:
    """Plain DRI (`recall.mode = deterministic`): C(Q) minus block ∪ ledger, σ order, k."""
    sel = Selection(lanes=copy_lanes(state.lanes))
    if k <= 0:
        return sel
    folders = index.folders
    exclude = set(state.ids()) | state.ledger.keys()
    pool = [n for n in matches.candidates if folders[n].id not in exclude]
    best = heapq.nsmallest(
        k, pool, key=lambda n: (-folders[n].alpha, folders[n].created_at, folders[n].id)
    )
    sel.pops = len(best)
    sel.picks = [Pick(n, folders[n].id, "hi") for n in best]
    return sel
