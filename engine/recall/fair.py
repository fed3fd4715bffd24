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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.config import MemoryConfig
from engine.recall.candidates import CandidateIndex, Matches
from engine.recall.state import Lanes, RecallState

__all__ = [
    "HIGH_LANES",
    "LANES",
    "Pick",
    "Selection",
    "apply_high_relevance",
    "copy_lanes",
    "descending",
    "global_low_key",
    "lane_order",
    "lane_split",
    "rare_scores",
    "return_picks",
    "rotation_firsts",
    "rotation_key",
    "select_deterministic",
    "select_fair",
    "sigma_key",
]

LANES = ("rareHigh", "queryBoost", "register", "hi", "lowProbe", "rotation", "recycle")
HIGH_LANES = ("hi", "register", "rareHigh", "queryBoost")
_REPLACEABLE = ("recycle", "rotation", "lowProbe", "hi")


@dataclass(slots=True)
class Pick:
    """One selected folder and the lane that selected it."""

    n: int
    id: str
    lane: str
    generation: int = 1
    high_relevance: bool = False
    protected: bool = False
    """A clause's protected slot or a 「你说过」 reserved slot: never replaced (§1.17)."""


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


_INVERTED = bytes(range(255, -1, -1))
"""Each byte b as 255 − b: what reverses the order of byte strings of one width."""


def descending(fid: str) -> bytes:
    """An ascending key for `fid` that orders ids descending: its code points, four
    big-endian bytes each, every byte inverted. Two ids differ first at a code point,
    where the inverted bytes compare the other way round, or one is a prefix of the
    other and its key is a prefix of the other's: the order of the tuple of negated
    code points (what this key replaced, property-tested) at C speed, where that tuple
    took a generator step per character of every candidate (a tenth of a second for a
    round whose question hit 15,000 low-α folders)."""
    return fid.encode("utf-32-be", "surrogatepass").translate(_INVERTED)


def global_low_key(alpha: float, created_at: int, fid: str) -> tuple[Any, ...]:
    """The rotation order (α asc, createdAt desc, id desc) as an ascending key."""
    return (alpha, -created_at, descending(fid))


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


def rotation_firsts(
    folders: Sequence[Any], pool: list[int], cursor: tuple[float, int, str] | None, m: int
) -> list[int]:
    """The first `m` of the folder numbers `pool` in the rotation lane's order from
    `cursor` (`rotation_key`): ``heapq.nsmallest(m, pool, key=...)`` exactly, ties in
    `pool`'s order, but the id part of the key is made only where α and createdAt tie.

    Each candidate gets the key's first part, (after the cursor?, (α, −createdAt)): it
    orders the folders as the whole key does except within a tie, and whether a folder
    comes after the cursor is known from it unless its α and createdAt are the cursor's
    (then the whole key says). The `m` smallest of those, plus every candidate tied with
    the last of them, hold the `m` smallest by the whole key, which sorts just those. A
    question that hits fifteen thousand low-α folders made as many whole keys."""
    if m <= 0 or not pool:
        return []
    whole = rotation_key(cursor)
    shown = list(map(folders.__getitem__, pool))
    first: list[tuple[int, tuple[float, int]]]
    if cursor is None:
        first = [(0, (f.alpha, -f.created_at)) for f in shown]
    else:
        at = (cursor[0], -cursor[1])
        first = [
            (0 if p > at else 1 if p < at else whole(_gk(f))[0], p)
            for f, p in zip(shown, [(f.alpha, -f.created_at) for f in shown], strict=True)
        ]
    smallest = heapq.nsmallest(m, range(len(pool)), key=first.__getitem__)
    last = first[smallest[-1]]
    held = [i for i in smallest if first[i] < last]
    held += [i for i, key in enumerate(first) if key == last]
    held.sort(key=lambda i: whole(_gk(shown[i])))
    return [pool[i] for i in held[:m]]


def copy_lanes(lanes: Lanes) -> Lanes:
    return Lanes(
        lanes.cursor,
        [dict(r) for r in lanes.register],
        dict(lanes.high_recycle),
        dict(lanes.recycle),
        lanes.low_watermark,
    )


def sigma_key(index: CandidateIndex) -> Callable[[int], tuple[float, int, str]]:
    """σ = (α desc, createdAt asc, id asc) as an ascending key of folder numbers."""
    folders = index.folders

    def sigma(n: int) -> tuple[float, int, str]:
        f = folders[n]
        return (-f.alpha, f.created_at, f.id)

    return sigma


def select_fair(
    index: CandidateIndex,
    matches: Matches,
    state: RecallState,
    cfg: MemoryConfig,
    k: int,
    *,
    used: Iterable[str] = (),
    high_relevance: bool = True,
) -> Selection:
    """Steps 1-7 for round `state.round + 1`; `state` is not changed. `used`: ids taken
    already this round (the 「你说过」 reserve), which no lane picks again;
    `high_relevance=False` leaves the v1.5.5 reserve to the caller
    (:func:`apply_high_relevance`, after the clauses' protected slots)."""
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
    reserved = set(used)
    exclude = block | state.ledger.keys() | reserved
    taken: set[str] = set()
    cands = matches.candidates
    sigma = sigma_key(index)

    def free(n: int) -> bool:
        fid = folders[n].id
        return fid not in exclude and fid not in taken

    def cooled(fid: str) -> bool:
        last = state.last_surfaced(fid)
        return last is None or t - last >= cooldown

    def take(n: int, lane: str) -> None:
        fid = folders[n].id
        taken.add(fid)
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
            if n not in cands or fid in block or fid in reserved or fid in taken:
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
    high_pool = [  # `free` written out: a call per candidate of tens of thousands
        n
        for n in cands
        if (f := folders[n]).alpha >= theta and f.id not in exclude and f.id not in taken
    ]
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
    mark = lanes.low_watermark
    created = [folders[n].created_at for n in low_pool]
    arrivals = 0
    if mark:  # arrivals count only once there is a watermark
        arrivals = sum(
            1
            for n, c in zip(low_pool, created, strict=True)
            if c > mark and folders[n].id not in exclude
        )
    sel.low_arrivals = arrivals
    sel.degraded = mark > 0 and arrivals >= r
    lanes.low_watermark = max(mark, max(created, default=mark))
    sel.rotation_slots = low_budget
    if low_budget > 0:
        pool = [n for n in low_pool if (fid := folders[n].id) not in exclude and fid not in taken]
        ordered = rotation_firsts(folders, pool, lanes.cursor, low_budget)
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
            if fid in block or fid in reserved or fid in taken or folders[n].alpha < min_alpha:
                continue
            if cooled(fid):
                rec.append((trimmed, fid, n))
        for _, fid, n in sorted(rec)[: min(low_budget, max(0, fair.recycle.max_per_round))]:
            take(n, "recycle")
            lanes.recycle.pop(fid, None)

    # v1.5.5 high-relevance reserve (fair only)
    if high_relevance:
        _high_relevance(index, matches, sel, cfg, k, free, sigma)
    return sel


def _gk(f: Any) -> tuple[float, int, str]:
    return (f.alpha, f.created_at, f.id)


def apply_high_relevance(
    index: CandidateIndex,
    matches: Matches,
    sel: Selection,
    state: RecallState,
    cfg: MemoryConfig,
    k: int,
    *,
    taken: Iterable[str] = (),
) -> None:
    """The v1.5.5 reserve over a finished selection of `k` slots: `sel.picks` and `taken`
    (ids served otherwise this round) are not picked again, protected picks are never
    the ones replaced."""
    folders = index.folders
    exclude = set(state.ids()) | state.ledger.keys() | set(taken)

    def free(n: int) -> bool:
        return folders[n].id not in exclude and all(p.n != n for p in sel.picks)

    _high_relevance(index, matches, sel, cfg, k, free, sigma_key(index))


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
                    if sel.picks[i].lane in _REPLACEABLE
                    and not sel.picks[i].high_relevance
                    and not sel.picks[i].protected
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


def lane_order(
    index: CandidateIndex,
    matches: Matches,
    state: RecallState,
    cfg: MemoryConfig,
    exclude: set[str],
) -> list[Pick]:
    """The lanes' order over the candidates of `matches` minus `exclude`, without a
    quota: rareHigh (rare-seed score), the other high α in σ, lowProbe, then the other
    low α in the rotation order from the persistent cursor (memory_recall's order, and
    a clause's own order in `engine.recall.clauses`)."""
    folders = index.folders
    theta = cfg.recall.fairness.theta_high
    rare = rare_scores(index, matches, cfg)
    pool = [n for n in matches.candidates if folders[n].id not in exclude]
    high = [n for n in pool if folders[n].alpha >= theta]
    low = [n for n in pool if folders[n].alpha < theta]
    sigma = sigma_key(index)

    def low_key(n: int) -> tuple[Any, ...]:
        f = folders[n]
        return global_low_key(f.alpha, f.created_at, f.id)

    by_cursor = rotation_key(state.lanes.cursor)
    parts = (
        ("rareHigh", sorted((n for n in high if n in rare), key=lambda n: (-rare[n], sigma(n)))),
        ("hi", sorted((n for n in high if n not in rare), key=sigma)),
        ("lowProbe", sorted((n for n in low if n in rare), key=lambda n: (-rare[n], low_key(n)))),
        (
            "rotation",
            sorted((n for n in low if n not in rare), key=lambda n: by_cursor(_gk(folders[n]))),
        ),
    )
    return [Pick(n, folders[n].id, lane) for lane, ns in parts for n in ns]


def return_picks(
    sel: Selection, state: RecallState, dropped: Iterable[Pick], cfg: MemoryConfig
) -> None:
    """Give picks a selection made but will not commit back to the lanes they came from:
    a high lane's to the register (front), a queryBoost's and a recycle's to their
    recycle queue with the round they were trimmed in."""
    ttl = max(1, cfg.recall.fairness.register_.ttl_rounds)
    lanes = sel.lanes
    for p in dropped:
        if p.lane == "queryBoost" and p.id in state.lanes.high_recycle:
            lanes.high_recycle[p.id] = state.lanes.high_recycle[p.id]
        elif p.lane in HIGH_LANES:
            if all(r["id"] != p.id for r in lanes.register):
                lanes.register.insert(0, {"id": p.id, "ttl": ttl})
        elif p.lane == "recycle" and p.id in state.lanes.recycle:
            lanes.recycle[p.id] = state.lanes.recycle[p.id]


def select_deterministic(
    index: CandidateIndex,
    matches: Matches,
    state: RecallState,
    k: int,
    *,
    used: Iterable[str] = (),
) -> Selection:
    """Plain DRI (`recall.mode = deterministic`): C(Q) minus block ∪ ledger (and `used`),
    σ order, k."""
    sel = Selection(lanes=copy_lanes(state.lanes))
    if k <= 0:
        return sel
    folders = index.folders
    exclude = set(state.ids()) | state.ledger.keys() | set(used)
    pool = [n for n in matches.candidates if folders[n].id not in exclude]
    best = heapq.nsmallest(
        k, pool, key=lambda n: (-folders[n].alpha, folders[n].created_at, folders[n].id)
    )
    sel.pops = len(best)
    sel.picks = [Pick(n, folders[n].id, "hi") for n in best]
    return sel
