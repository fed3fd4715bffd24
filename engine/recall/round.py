"""One automatic recall round: select, read what is injected, commit, trim, render.

Selection is `engine.recall.select.select_round` (the 「你说过」 reserve, one question or
several, the high-relevance reserve, hops) in every mode but `legacy`, which keeps
v1.3.0's walk (`engine.recall.legacy`).

Before it, in every mode, a message that names known places or people (`recall.
tagMentions`, `engine.recall.tags.mention_filter`) restricts the round's first
generation to the folders carrying them (`Query.allowed`): a hard filter, OR within a
kind, AND across kinds. Without a mention the round is exactly what it was.

`run_round` is synchronous and reads the disk only for the picked folders (G6:
reads = injections). Time comes in as `now_ms`; nothing here reads a clock.

Commit (step 8):

* round budget (`fairness.roundBudget.maxChars`, fair and deterministic): picks past
  the budget are dropped from the tail (lowest priority), keeping at least one;
* additions join the block with `injectedRound` / `injectedTurn`; the ledger records
  each as surfaced (cap `ledger.maxEntries`, overflow policy
  `evict-lowest-alpha-last-seen`, with a warning);
* block trimming (`fair`/`deterministic`: priority key (in C_t, α < θ_H, α asc,
  injectedRound asc, id): what the current query matched goes last — trimming a
  memory picked for this very question would waste it and put it in cooldown —
  and among the rest, with `pinHigh`, high α goes only when no low α is left;
  without `protectCurrentQuery` C_t does not count; `legacy`: createdAt FIFO) down to
  min(`maxRecalledBlocks`, `maxRecalledChars`, window × `maxWindowPercent`%), always
  keeping one entry; trimmed high α → highRecycle, low α → recycle;
* the rotation cursor moves to the last committed rotation pick.

A picked folder that cannot be read is skipped (selection does not change) and
returned in ``RoundOutcome.unreadable``, so the caller can tell the operator; the
engine itself never logs.

The ``recall`` record carries what came back into the context (``addedChars``,
``addedTokens``: the new entries still in the block after trimming, tokens estimated
like the archive path does) for the §1.6 report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.config import MemoryConfig, fingerprint
from engine.config.fingerprint import canonical_json
from engine.recall.assistant_said import current_request
from engine.recall.block import IMAGE_MARK, heading_date, message_text, render_body
from engine.recall.candidates import CandidateIndex, MatchesOnce, index_params
from engine.recall.dates import resolve_timezone
from engine.recall.fair import HIGH_LANES, LANES, Pick, Selection
from engine.recall.hops import HOP_LANE
from engine.recall.legacy import select_legacy
from engine.recall.query import Query, effective_quota, restricted
from engine.recall.ranked import FALLBACK_LANE, RANKED_LANE
from engine.recall.render_cache import RenderCache
from engine.recall.select import ASSISTANT_LANE, RoundSelection, select_round
from engine.recall.state import Addition, Lanes, RecallState
from engine.recall.tags import mention_filter
from engine.relevance.index import RelevanceIndex
from engine.store import CorruptFolder, CorruptFolderError, FolderNotFoundError, SessionStore
from engine.store.folders import CONTEXT_FILE, ReadAhead
from engine.texts import (
    RECALL_WARN_DEGRADED,
    RECALL_WARN_LEDGER_OVERFLOW,
    RECALL_WARN_REGISTER_DROPS,
    RECALL_WARN_ROUND_BUDGET,
)

_EXTRA_LANES = (ASSISTANT_LANE, HOP_LANE)
"""Lanes beyond the reference's seven, counted in `lanesPicked` only when they pick."""

__all__ = [
    "RENDER_READS",
    "Prepared",
    "RoundOutcome",
    "added_record",
    "lanes_fingerprint",
    "load_addition",
    "prepare_state",
    "run_round",
    "trim_block",
    "trim_ranked",
]


@dataclass
class RoundOutcome:
    """What one round did: new ids in the block, telemetry and warnings."""

    ran: bool
    recalled: list[str] = field(default_factory=list)
    changed: bool = False
    recall_record: dict[str, Any] = field(default_factory=dict)
    block_record: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # picks skipped because their folder could not be read, and the picks read fine
    unreadable: list[CorruptFolder] = field(default_factory=list)
    readable: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Prepared:
    """What `prepare_state` did: whether the block changed, and the v1 ids it could not
    rebuild because their folder is unreadable (gone ones are not damage)."""

    changed: bool
    unreadable: list[CorruptFolder] = field(default_factory=list)


def lanes_fingerprint(cfg: MemoryConfig) -> str:
    """What lane state depends on: recall selection settings and matching."""
    import hashlib

    rc = cfg.recall.to_json(include_unknown=False)
    tree = {
        "mode": rc["mode"],
        "fairness": rc["fairness"],
        "categoryMatch": rc["categoryMatch"],
        "index": [list(p) if isinstance(p, tuple) else p for p in index_params(cfg)[:3]],
    }
    return hashlib.sha256(canonical_json(tree)).hexdigest()


def _image_resolver(store: SessionStore) -> Callable[[str], Path | None]:
    def resolve(name: str) -> Path | None:
        try:
            return store.image_path(name)
        except ValueError:
            return None

    return resolve


def _render_settings(cfg: MemoryConfig) -> tuple[Any, ...]:
    """What a rendered entry depends on besides its folder (`engine.recall.render_cache`)."""
    return (
        cfg.time.timezone,
        cfg.time.mode == "off",
        cfg.recall.compute_dates,
        cfg.recall.show_tags,
        cfg.time_tag.week_start,
    )


RENDER_READS = (CONTEXT_FILE,)
"""The files `load_addition` reads of a memory it renders: a read that went fine proves
these readable, and no other (`handlers.damage`)."""


def read_ahead(
    store: SessionStore, fids: list[str], cfg: MemoryConfig, cache: RenderCache | None
) -> ReadAhead:
    """The conversation files of the picks `load_addition` will read (those not rendered
    before), opened and asked of the disk at once, so their fetches overlap instead of
    waiting one after the other (`engine.store.folders.read_ahead`); `load_addition`
    reads them from there. The caller closes it (a context manager)."""
    if cache is not None:
        settings = _render_settings(cfg)
        entry = store.get_entry
        fids = [f for f in fids if f in store and not cache.holds(f, entry(f), settings)]
    return store.read_ahead(fids, RENDER_READS)


def load_picks(
    store: SessionStore | None,
    picks: Sequence[Pick],
    read: Callable[[Pick, ReadAhead], Addition | CorruptFolder | None],
    cfg: MemoryConfig,
    cache: RenderCache | None = None,
) -> tuple[list[tuple[Pick, Addition]], list[CorruptFolder]]:
    """Each pick as `read` makes it (None: gone, left out; a `CorruptFolder`: returned for
    the caller to report), in order; with a `store` the picks' files are asked of the
    disk at once first (`read_ahead`: `read` is handed what it opened)."""
    loaded: list[tuple[Pick, Addition]] = []
    unreadable: list[CorruptFolder] = []
    ahead = ReadAhead() if store is None else read_ahead(store, [p.id for p in picks], cfg, cache)
    with ahead:
        for p in picks:
            add = read(p, ahead)
            if isinstance(add, Addition):
                loaded.append((p, add))
            elif add is not None:
                unreadable.append(add)
    return loaded, unreadable


def load_addition(
    store: SessionStore,
    fid: str,
    cfg: MemoryConfig,
    *,
    generation: int = 1,
    lane: str = "",
    turn: int = 0,
    round_: int = 0,
    cache: RenderCache | None = None,
    ahead: ReadAhead | None = None,
) -> Addition | CorruptFolder | None:
    """Read one folder's conversation and render its entry; None when it is not in the
    index (gone), a `CorruptFolder` when it cannot be read (the caller reports it). Its
    fields (α, β, dates, keywords, labels, time tags) are its index entry's, which every
    write keeps equal to its ``meta.json`` (`engine.store.records.index_row_from_meta`):
    the meta file is not read, one file per memory less on every round (on a disk that
    pages cold files out, a read that could take a millisecond). With a `cache`, a folder
    rendered before from the same index entry is not read again; `ahead`: its
    conversation file as `read_ahead` opened it."""
    settings = _render_settings(cfg)
    try:
        entry = store.get_entry(fid)
    except FolderNotFoundError:
        return None
    if cache is not None:
        kept = cache.get(fid, entry, settings)
        if kept is not None:
            kept.generation, kept.lane = generation, lane
            kept.injected_turn, kept.injected_round = turn, round_
            return kept
    try:
        raw = store.read_context(fid, ahead)
    except FolderNotFoundError:
        return None
    except CorruptFolderError as exc:
        return CorruptFolder(fid, exc.reason)
    except (ValueError, OSError) as exc:
        return CorruptFolder(fid, str(exc))
    tz = resolve_timezone(cfg.time.timezone)
    compute = cfg.recall.compute_dates
    messages: list[dict[str, Any]] = []
    times: list[int] = []
    for m in raw:
        item: dict[str, Any] = {"role": str(m.get("role") or "user"), "content": message_text(m)}
        t = m.get("time")
        if isinstance(t, int | float) and not isinstance(t, bool) and t > 0:
            item["time"] = int(t)
            times.append(int(t))
        messages.append(item)
    tags = {
        "events": entry.events,
        "event": entry.event,
        "locations": entry.locations,
        "persons": entry.persons,
        "timeTags": entry.timeTags,
    }
    body = render_body(
        messages,
        tags,
        show_tags=cfg.recall.show_tags,
        compute_dates=compute,
        fallback_anchor=entry.createdAt,
        tz=tz,
        week_start=cfg.time_tag.week_start,
        image_path=_image_resolver(store),
    )
    if cfg.time.mode == "off":
        # §3.0.6: with time off, an existing eventStart is kept on disk but not used; the
        # heading says only when the memory was archived
        date = heading_date(entry.createdAt, None, None, [], tz, compute)
    else:
        date = heading_date(entry.createdAt, entry.eventStart, entry.eventEnd, times, tz, compute)
    addition = Addition(
        id=fid,
        alpha=float(entry.alpha),
        beta=float(entry.beta),
        created_at_ms=int(entry.createdAt),
        generation=generation,
        injected_turn=turn,
        injected_round=round_,
        lane=lane,
        keywords=list(entry.keywords),
        date=date,
        body=body,
        messages=messages,
    )
    if cache is not None and not any(IMAGE_MARK in m["content"] for m in messages):
        cache.put(fid, entry, settings, addition)
    return addition


def prepare_state(state: RecallState, store: SessionStore, cfg: MemoryConfig) -> Prepared:
    """After loading a file: rebuild v1 (ids only) from the folders still present and
    reset lanes when the lane fingerprint changed."""
    changed = False
    unreadable: list[CorruptFolder] = []
    if state.pending_v1_ids:
        for fid in state.pending_v1_ids:
            add = load_addition(store, fid, cfg)
            if isinstance(add, Addition):
                state.additions.append(add)
            elif add is not None:
                unreadable.append(add)
        state.pending_v1_ids = []
        state.sort = cfg.recall.sort
        state.compute_dates = cfg.recall.compute_dates
        state.render()
        changed = bool(state.block)
    elif state.additions and not state.block:
        state.render()
        changed = True
    fp = lanes_fingerprint(cfg)
    if state.lanes_fingerprint != fp:
        if state.lanes_fingerprint:
            state.lanes = Lanes()
        state.lanes_fingerprint = fp
    state.config_fingerprint = fingerprint(cfg)
    state.persist = cfg.recall.persist_injected
    return Prepared(changed, unreadable)


def _block_char_cap(cfg: MemoryConfig, context_window: int | None) -> int:
    cap = cfg.recall.max_recalled_chars
    if context_window and context_window > 0 and cfg.recall.max_window_percent > 0:
        cap = min(cap, int(context_window * cfg.recall.max_window_percent / 100))
    return cap


def trim_block(
    state: RecallState, cfg: MemoryConfig, context_window: int | None, current: set[str]
) -> tuple[list[Addition], int]:
    """Trim the block to its caps; returns (evicted, pinnedHigh)."""
    rc = cfg.recall
    theta = rc.fairness.theta_high
    bt = rc.fairness.block_trim
    max_blocks = max(1, rc.max_recalled_blocks)
    max_chars = _block_char_cap(cfg, context_window)
    adds = state.additions
    total = sum(a.chars for a in adds)

    def over() -> bool:
        return len(adds) > max_blocks or (total > max_chars and len(adds) > 1)

    if not over():
        return [], 0
    if rc.mode == "legacy":
        order = sorted(adds, key=lambda a: (a.created_at_ms, a.id))
    else:

        def key(a: Addition) -> tuple[Any, ...]:
            high = a.alpha >= theta
            in_c = a.id in current if bt.protect_current_query else False
            return (in_c, high if bt.pin_high else False, high, a.alpha, a.injected_round, a.id)

        order = sorted(adds, key=key)
    evicted: list[Addition] = []
    for a in order:
        if not over():
            break
        adds.remove(a)
        total -= a.chars
        evicted.append(a)
        if a.alpha >= theta:
            state.lanes.high_recycle[a.id] = state.round
        else:
            state.lanes.recycle[a.id] = state.round
    pinned = 0
    if any(a.alpha < theta for a in evicted):
        pinned = sum(1 for a in adds if a.alpha >= theta)
    return evicted, pinned


def trim_ranked(
    state: RecallState, cfg: MemoryConfig, context_window: int | None, needed: dict[str, float]
) -> list[Addition]:
    """The ranked block follows the conversation; returns the evicted entries.

    First every memory that no message needed for more than `recall.ranked.keepRounds`
    rounds leaves (even under the caps: it answers nothing the user is talking about,
    and the next message that needs it brings it back). Then, while the block is over
    `maxRecalledBlocks`, `maxRecalledChars` or `maxWindowPercent` of the window — the
    last measured in estimated tokens, like the host meters the block —, the entries
    go in the order (needed now, relevance now, last needed, injected, id): what the
    current message does not need first, the least relevant of the rest next. At
    least one entry stays.
    """
    rc = cfg.recall
    t = state.round
    keep = max(0, rc.ranked.keep_rounds)
    adds = state.additions
    evicted = [a for a in adds if t - a.needed_round > keep]
    if evicted:
        gone = {a.id for a in evicted}
        adds[:] = [a for a in adds if a.id not in gone]
    max_blocks = max(1, rc.max_recalled_blocks)
    max_chars = rc.max_recalled_chars
    max_tokens = 0
    if context_window and context_window > 0 and rc.max_window_percent > 0:
        max_tokens = int(context_window * rc.max_window_percent / 100)
    chars = sum(a.chars for a in adds)
    tokens = {a.id: a.tokens for a in adds} if max_tokens else {}
    total_tokens = sum(tokens.values())

    def over() -> bool:
        if len(adds) <= 1:
            return False
        return (
            len(adds) > max_blocks
            or chars > max_chars
            or (max_tokens > 0 and total_tokens > max_tokens)
        )

    if over():
        order = sorted(
            adds,
            key=lambda a: (
                a.id in needed,
                needed.get(a.id, 0.0),
                a.needed_round,
                a.injected_round,
                a.id,
            ),
        )
        for a in order:
            if not over():
                break
            adds.remove(a)
            chars -= a.chars
            total_tokens -= tokens.get(a.id, 0)
            evicted.append(a)
    return evicted


def added_record(pick: Pick, addition: Addition) -> dict[str, Any]:
    """One `added` item of a `recall` telemetry record (rounds and memory_recall alike)."""
    return {
        "id": addition.id,
        "alpha": addition.alpha,
        "beta": addition.beta,
        "lane": pick.lane,
        "generation": addition.generation,
        "chars": addition.chars,
    }


def run_round(
    store: SessionStore | None,
    index: CandidateIndex,
    state: RecallState,
    query: Query,
    cfg: MemoryConfig,
    *,
    now_ms: int,
    turn: int,
    session_key: str,
    context_window: int | None = None,
    loader: Callable[[Pick], Addition | None] | None = None,
    relevance: RelevanceIndex | None = None,
) -> RoundOutcome:
    """Run one round for `query` and update `state` (the caller persists it).

    `loader` renders a pick into an addition (default: read the folder from `store`);
    tests and benchmarks pass one to run without folders on disk. `relevance` is the
    session's relevance index, which `ranked` mode needs (synced to the same store
    version as `index`).
    """
    rc = cfg.recall
    k = effective_quota(query, cfg)
    if k <= 0:
        # recall.firstGenMax = 0: recall is off; no lane state is consumed.
        return RoundOutcome(ran=False)
    before_block = state.block
    before_ids = state.ids()
    t = state.round + 1
    allowed, tag_info = mention_filter(query.text, index.tags, cfg)
    tag_filtered = 0
    if allowed is not None:
        wide = index.match(query, min_alpha=rc.min_alpha).candidates
        query = restricted(query, allowed)
    # a ranked round makes the keyword candidates only if it falls back to them
    matches_of = MatchesOnce(index, query, rc.min_alpha)
    if allowed is not None:
        tag_filtered = len(wide) - len(matches_of().candidates)
    ranked = rc.mode == "ranked"
    needed: dict[str, float] = {}
    question: RoundSelection | None = None
    if rc.mode == "legacy":
        sel: Selection = select_legacy(index, matches_of(), state, cfg, k, session_key, query)
    else:
        question = select_round(index, matches_of, query, state, cfg, k, relevance=relevance)
        sel, needed = question.selection, question.needed
    warnings: list[str] = []

    # read what is injected (and nothing else)
    def read(p: Pick, ahead: ReadAhead) -> Addition | CorruptFolder | None:
        if loader is not None:
            add = loader(p)
            if add is not None:
                add.injected_turn, add.injected_round = turn, t
                add.generation, add.lane = p.generation, p.lane
            return add
        if store is None:
            return None
        return load_addition(
            store,
            p.id,
            cfg,
            generation=p.generation,
            lane=p.lane,
            turn=turn,
            round_=t,
            cache=state.render_cache,
            ahead=ahead,
        )

    loaded, unreadable = load_picks(
        store if loader is None else None, sel.picks, read, cfg, state.render_cache
    )

    # round budget (v1.4.1, not in legacy)
    budget = rc.fairness.round_budget.max_chars
    dropped = 0
    chars = sum(a.chars for _, a in loaded)
    if rc.mode != "legacy" and budget > 0 and chars > budget:
        picked = len(loaded)
        while len(loaded) > 1 and chars > budget:
            p, a = loaded.pop()
            chars -= a.chars
            dropped += 1
            if p.lane in HIGH_LANES:
                sel.lanes.register.append(
                    {"id": p.id, "ttl": max(1, rc.fairness.register_.ttl_rounds)}
                )
        warnings.append(
            RECALL_WARN_ROUND_BUDGET.format(
                dropped=dropped, picked=picked, chars=chars + 0, max_chars=budget
            )
        )

    # commit
    state.round = t
    state.lanes = sel.lanes
    committed_ids = {p.id for p, _ in loaded}
    state.lanes.register = [r for r in state.lanes.register if r["id"] not in committed_ids]
    rotation = [p for p, _ in loaded if p.lane == "rotation"]
    if rotation:
        f = index.folders[rotation[-1].n]
        state.lanes.cursor = (f.alpha, f.created_at, f.id)
    evicted_ledger: list[str] = []
    for _, a in loaded:
        a.needed_round = t
        state.additions.append(a)
        if rc.mode not in ("legacy", "ranked"):
            evicted_ledger += state.surface(a.id, a.alpha, rc.fairness.ledger.max_entries)
    if evicted_ledger:
        warnings.append(
            RECALL_WARN_LEDGER_OVERFLOW.format(
                max_entries=rc.fairness.ledger.max_entries, evicted=len(evicted_ledger)
            )
        )
    if sel.register_drops:
        warnings.append(RECALL_WARN_REGISTER_DROPS.format(drops=sel.register_drops))
    if sel.degraded:
        warnings.append(
            RECALL_WARN_DEGRADED.format(arrivals=sel.low_arrivals, slots=sel.rotation_slots)
        )
    if ranked:
        for a in state.additions:
            a.current_query = a.id in needed
            if a.current_query:
                a.needed_round = t
        evicted, pinned = trim_ranked(state, cfg, context_window, needed), 0
    else:
        current = index.ids_among((a.id for a in state.additions), matches_of().candidates)
        for a in state.additions:
            a.current_query = a.id in current
        evicted, pinned = trim_block(state, cfg, context_window, current)
    state.degraded = sel.degraded
    c = state.counters
    c["rounds"] = c.get("rounds", 0) + 1
    c["recalled"] = c.get("recalled", 0) + len(loaded)
    c["reInjections"] = c.get("reInjections", 0) + sel.re_injections
    c["registerDrops"] = c.get("registerDrops", 0) + sel.register_drops
    c["degradedRounds"] = c.get("degradedRounds", 0) + int(sel.degraded)
    c["roundBudgetDropped"] = c.get("roundBudgetDropped", 0) + dropped
    # render
    state.sort = rc.sort
    state.compute_dates = rc.compute_dates
    state.empty_hint = rc.esp_empty_hint and not state.additions
    state.full_quota = (
        (k, dropped + len(evicted)) if len(sel.picks) >= k and state.additions else None
    )
    clauses = question.clauses if question is not None else []
    state.query_info = {
        "clauses": max(1, len(clauses)),
        "quota": k,
        "assistantSaid": current_request(query.assistant if rc.mode != "legacy" else None),
    }
    in_block = set(state.ids())
    for clause in clauses:
        clause.found = len(clause.relevant & in_block)
    state.clause_status = [(cl.text, cl.found) for cl in clauses] or None
    state.render()
    kept = [(p, a) for p, a in loaded if a.id in in_block]
    recalled = [a.id for _, a in kept]

    if ranked:
        lanes_picked = {RANKED_LANE: 0, FALLBACK_LANE: 0}
    else:
        lanes_picked = sel.lanes_picked() if rc.mode != "legacy" else {}
    if rc.mode != "legacy":  # the fair lanes counted themselves; the rest here
        for p in sel.picks:
            if (ranked and p.lane in lanes_picked) or p.lane in _EXTRA_LANES:
                lanes_picked[p.lane] = lanes_picked.get(p.lane, 0) + 1
    hr = sel.high_relevance or {
        "enabled": False,
        "minMatches": rc.high_relevance.min_matches,
        "reserveSlots": rc.high_relevance.reserve_slots,
        "candidates": 0,
        "picks": 0,
        "replaced": 0,
    }
    hr_fields = {
        "highRelevanceEnabled": bool(hr["enabled"]) and rc.mode == "fair",
        "highRelevanceMinMatches": hr["minMatches"],
        "highRelevanceReserveSlots": hr["reserveSlots"],
        "highRelevanceCandidates": hr["candidates"],
        "highRelevancePicks": hr["picks"],
        "highRelevanceReplaced": hr["replaced"],
    }
    recall_record: dict[str, Any] = {
        "type": "recall",
        "time": now_ms,
        "mode": rc.mode,
        "round": t,
        "turn": turn,
        "quota": k,
        "queryKeywords": len(query.keywords),
        "candidates": len(needed) if ranked else len(matches_of().candidates),
        "categorySeeds": index.categories_in(query) if ranked else list(matches_of().categories),
        "lanesPicked": lanes_picked,
        "pops": sel.pops,
        "frontierHits": sel.frontier_hits,
        "registerDrops": sel.register_drops,
        "reInjections": sel.re_injections,
        "degraded": sel.degraded,
        "timeFiltered": 0,
        "offset": 0,
        "limit": k,
        "hasMore": False,
        "missType": None if loaded else ("keyword" if not matches_of().candidates else "excluded"),
        "roundBudget": {"maxChars": budget, "dropped": dropped, "chars": chars},
        "roundBudgetMaxChars": budget,
        "roundBudgetDropped": dropped,
        "roundBudgetChars": chars,
        "added": [added_record(p, a) for p, a in loaded],
        "addedChars": sum(a.chars for _, a in kept),
        "addedTokens": sum(a.tokens for _, a in kept),
        "contextWindow": context_window or None,
        **hr_fields,
        "clauses": max(1, len(clauses)),
        "clauseInfo": [cl.info() for cl in clauses],
        "assistantSaid": query.assistant is not None and rc.mode != "legacy",
        "assistantInfo": question.assistant if question is not None else None,
        "hops": rc.hops if rc.mode != "legacy" else 0,
        "tagInfo": tag_info,
        "tagFiltered": tag_filtered,
    }
    block_record: dict[str, Any] = {
        "type": "recall-block",
        "time": now_ms,
        "round": t,
        "blockBefore": len(before_ids),
        "blockAfter": len(state.additions),
        "evicted": [a.id for a in evicted],
        "pinnedHigh": pinned,
        "lanesPicked": lanes_picked,
        "blockChars": len(state.block),
        **hr_fields,
    }
    assert set(lanes_picked) <= {*LANES, *_EXTRA_LANES, RANKED_LANE, FALLBACK_LANE}
    return RoundOutcome(
        ran=True,
        recalled=recalled,
        changed=state.block != before_block,
        recall_record=recall_record,
        block_record=block_record,
        warnings=warnings,
        unreadable=unreadable,
        readable=[a.id for _, a in loaded],
    )
