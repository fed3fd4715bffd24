"""memory_recall's search (reference §1.3 "工具 memory_recall", pagination v1.4.1, G4).

The candidates are those of automatic recall for the keywords (`CandidateIndex.match`:
both matching directions, category classes; `recall.minAlpha` applies), in the order
of the configured `recall.mode`:

* `ranked`: relevance (`RelevanceIndex.rank`, BM25F with the passage rerank and the α
  prior of automatic recall); when nothing scores, the keyword candidates in σ order,
  as `select_ranked` falls back. Every folder the index scores is reachable (no
  `minRelativeScore` cut: a search pages on to weaker matches, automatic recall does
  not need to);
* `fair`: the lanes' order with an unbounded quota: rareHigh (rare-seed score), the
  other high α in σ = (α desc, createdAt asc, id asc), lowProbe, then the other low α
  in the rotation order from the persistent cursor;
* `deterministic`: σ;
* `legacy`: v1.3.0's probability walk (`select_legacy`, quota = limit), unpaginated.

Two kinds of call (G4):

* *unpaginated* (no `offset`): like automatic recall, it excludes block ∪ ledger, and
  in `fair` it runs the lanes themselves (`select_fair` with k = max(limit, 2), cut to
  limit in lane order: at k = 1 the lane split would leave the high lanes no slot; only
  picks the keywords match are kept, the lanes' promises to earlier rounds stay theirs;
  slots the lanes leave free are filled from the rest of the order). The caller commits it (`commit_search`): the returned
  memories are surfaced in the ledger, the rotation cursor moves past what was shown,
  and a recycled or registered id that was shown is settled. `ranked` has no lane state
  and ignores the ledger, as its automatic recall does; `legacy` has none either.
* *paginated* (`offset` given): a slice of the order above over a fixed window of
  min(candidates, 10000), excluding only the block; nothing is advanced or written, so
  the same state and keywords give the same pages, disjoint and complete, with an exact
  `hasMore` / `nextOffset`.

The 「你说过」 channel (§1.13.5): when the call asks it (`assistantSaid`, or the current
user message's quote phrase), up to `assistantSaid.reserveSlots` of the channel's hits
come first (`engine.recall.select.assistant_reserve`), the order above after them; in
`fair` / `deterministic` its other hits join the candidates.

`recall.enabled = false` or `recall.firstGenMax = 0` turns recall off: an empty page,
`hasMore` false, no state consumed.

Constraints (`engine.recall.constraint`: time, event, tags): the candidates are the
keywords' candidates within every constraint's allowed set (C(Q) ∩ W ∩ E ∩ tags, in all
modes, the 「你说过」 channel's hits too); the order and exclusions above then apply to
what is left. A constraint with a `stop` (an ambiguous or unknown event) ends the call
before any search. When the keywords matched something and the constraints left
nothing, the miss is the first constraint's (in their order) that emptied it, not a
keyword miss; `filtered` counts what each kind removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.config import MemoryConfig
from engine.keywords import match_keys, match_text
from engine.recall.assistant_said import AssistantQuery
from engine.recall.candidates import CandidateIndex, Matches, MatchesOnce
from engine.recall.constraint import Constraint, combined_allowed, filter_counts
from engine.recall.fair import Pick, Selection, lane_order, select_fair
from engine.recall.legacy import select_legacy
from engine.recall.query import Query, restricted
from engine.recall.ranked import FALLBACK_LANE, RANKED_LANE
from engine.recall.round import load_addition, load_picks
from engine.recall.select import assistant_reserve, with_candidates
from engine.recall.state import Addition, RecallState
from engine.relevance.index import RelevanceIndex
from engine.store import CorruptFolder, SessionStore
from engine.store.folders import ReadAhead
from engine.texts import RECALL_TOOL_WARN_LEGACY_OFFSET
from engine.tokenizer import normalize_text

__all__ = [
    "PAGE_WINDOW",
    "SearchPage",
    "commit_search",
    "entry_config",
    "keyword_query",
    "load_entries",
    "search",
]

PAGE_WINDOW = 10_000
"""The paginated order is cut to its first min(candidates, PAGE_WINDOW) folders."""

Loader = Callable[[Pick], Addition | CorruptFolder | None]


@dataclass
class SearchPage:
    """The folders one call selected, and what the answer says about the rest."""

    mode: str
    paginated: bool
    offset: int
    limit: int
    picks: list[Pick] = field(default_factory=list)
    candidates: int = 0
    """The keywords' candidate set (|C(Q)|; in ranked mode the folders that scored)."""
    window: int = 0
    """Length of the order the page was cut from (after the exclusions)."""
    has_more: bool = False
    next_offset: int | None = None
    miss_type: str | None = None
    """keyword (nothing matched), excluded (all matched are in the block / ledger),
    offset (a page past the end), chance (legacy's dice), off (recall is off)."""
    in_block: int = 0
    surfaced: int = 0
    """Candidates left out for being in the block, and (unpaginated) in the ledger."""
    selection: Selection | None = None
    warnings: list[str] = field(default_factory=list)
    assistant: dict[str, Any] = field(default_factory=dict)
    """`assistantInfo`: the 「你说过」 channel's request and what it found."""
    constraints: tuple[Constraint, ...] = ()
    filtered: dict[str, int] = field(default_factory=dict)
    """Keyword candidates each constraint kind removed (kinds that restricted)."""

    def lanes_picked(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for p in self.picks:
            counts[p.lane] = counts.get(p.lane, 0) + 1
        return counts


def open_page(
    mode: str, cfg: MemoryConfig, limit: int, offset: int | None, constraints: Sequence[Constraint]
) -> SearchPage:
    """A call's page before any selection, already answered (`miss_type` set) when recall
    is off or a constraint stops the call (an ambiguous event, an unknown tag, …)."""
    rc = cfg.recall
    page = SearchPage(mode, offset is not None, offset or 0, limit)
    page.constraints = tuple(constraints)
    if not rc.enabled or rc.first_gen_max <= 0:
        page.miss_type = "off"
        return page
    stop = next((c.stop for c in constraints if c.stop), None)
    if stop is not None:
        page.miss_type = stop
    return page


def keyword_query(
    keywords: Iterable[str], cfg: MemoryConfig, *, assistant: AssistantQuery | None = None
) -> Query:
    """The keywords as a query: each is one match key (no tokenising: the model gave the
    terms), their text joined for relevance and category classes; `assistant`: its
    「你说过」 channel request."""
    words = tuple(keywords)
    fold = cfg.match.expand_latin_case
    keys = match_keys(words, expand_latin_case=fold)
    text = " ".join(words)
    return Query(
        text=text,
        normalized=match_text(normalize_text(text), expand_latin_case=fold),
        keywords=words,
        keys=tuple(keys),
        clauses=1,
        chars=len(text),
        assistant=assistant,
    )


def _sigma_order(index: CandidateIndex, ns: Iterable[int]) -> list[int]:
    folders = index.folders
    return sorted(ns, key=lambda n: (-folders[n].alpha, folders[n].created_at, folders[n].id))


def _ranked_order(
    relevance: RelevanceIndex | None,
    index: CandidateIndex,
    matches: Callable[[], Matches],
    query: Query,
    cfg: MemoryConfig,
    block: set[str],
    base: list[str] | None = None,
) -> tuple[list[Pick], int]:
    """(the order excluding the block, how many folders scored or matched); only the
    folders `query.allowed` allows; `base` receives every scored id before that."""
    if relevance is None:
        raise ValueError("recall.mode ranked needs the session's relevance index")
    rc = cfg.recall
    ranked = relevance.rank(
        relevance.query_terms(query.text),
        limit=PAGE_WINDOW + len(block),
        alpha_prior=rc.ranked.alpha_prior,
        min_alpha=rc.min_alpha,
        min_relative=0.0,
        passage_weight=rc.ranked.passage_weight,
    )
    by_id = index.by_id
    scored = [(by_id[fid], fid) for fid in ranked.ids if fid in by_id]
    if base is not None:
        base += [fid for _, fid in scored]
    allowed = query.allowed
    if allowed is not None:
        scored = [(n, fid) for n, fid in scored if fid in allowed]
    if scored:
        order = [Pick(n, fid, RANKED_LANE) for n, fid in scored if fid not in block]
        return order, len(scored)
    folders = index.folders
    candidates = matches().candidates  # made only now: the fallback
    fallback = _sigma_order(index, (n for n in candidates if folders[n].id not in block))
    return [Pick(n, folders[n].id, FALLBACK_LANE) for n in fallback], len(candidates)


def _order(
    relevance: RelevanceIndex | None,
    index: CandidateIndex,
    matches_of: Callable[[], Matches],
    query: Query,
    state: RecallState,
    cfg: MemoryConfig,
    exclude: set[str],
    base: list[str] | None = None,
) -> tuple[list[Pick], int]:
    mode = cfg.recall.mode
    if mode == "ranked":
        return _ranked_order(relevance, index, matches_of, query, cfg, exclude, base)
    matches = matches_of()
    if mode == "fair":
        return lane_order(index, matches, state, cfg, exclude), len(matches.candidates)
    folders = index.folders
    pool = (n for n in matches.candidates if folders[n].id not in exclude)
    return [Pick(n, folders[n].id, "hi") for n in _sigma_order(index, pool)], len(
        matches.candidates
    )


def _matched_ids(
    relevance: RelevanceIndex | None,
    index: CandidateIndex,
    matches: Callable[[], Matches],
    query: Query,
    state: RecallState,
    cfg: MemoryConfig,
) -> list[str]:
    """Every candidate id before any exclusion (for the `excluded` miss counts)."""
    order, _ = _order(relevance, index, matches, query, state, cfg, set())
    return [p.id for p in order]


def search(
    index: CandidateIndex,
    state: RecallState,
    query: Query,
    cfg: MemoryConfig,
    *,
    limit: int,
    offset: int | None,
    relevance: RelevanceIndex | None = None,
    session_key: str = "",
    constraints: Sequence[Constraint] = (),
) -> SearchPage:
    """Select one call's folders (module docstring); `state` is not changed."""
    rc = cfg.recall
    mode = rc.mode
    page = open_page(mode, cfg, limit, offset, constraints)
    if page.miss_type is not None:
        return page
    unrestricted = query
    query = restricted(query, combined_allowed(constraints))
    # ranked: made only if nothing scores (the fallback); every other mode: at once
    matches_of = MatchesOnce(index, query, rc.min_alpha)
    # the keyword candidates before the constraints (ranked: what scored, collected by
    # the ranking below; else, or when nothing scores, the keyword candidates)
    base: list[str] | None = None
    wide: list[str] = []
    if query.allowed is not None:
        base = []
        found = index.match(unrestricted, min_alpha=rc.min_alpha).candidates
        wide = [index.folders[n].id for n in found]
        if mode != "ranked":
            base = wide
    block = set(state.ids())
    emptied: str | None = None
    if mode == "legacy":
        _legacy(page, index, matches_of(), state, cfg, query, session_key, block)
        if base is not None:
            page.filtered, emptied = filter_counts(constraints, base)
            if page.miss_type == "keyword" and emptied:
                page.miss_type = emptied
        return page
    if page.paginated:
        exclude = block
    else:
        exclude = block if mode == "ranked" else block | state.ledger.keys()
    # the 「你说过」 reserve first (§1.13.5); a page of a paginated call is cut from the same
    # order every time: the reserve, then the rest
    slots = cfg.recall.assistant_said.reserve_slots if page.paginated else limit
    reserved, _, hits, page.assistant = assistant_reserve(
        index, query, state, cfg, slots, exclude, serve_from_block=False
    )
    reserved_ids = {p.id for p in reserved}
    matches: Callable[[], Matches] = matches_of
    if mode != "ranked":
        widened = with_candidates(matches_of(), hits)

        def matches() -> Matches:
            return widened

    order, page.candidates = _order(
        relevance, index, matches, query, state, cfg, exclude, base if mode == "ranked" else None
    )
    if base is not None and not base:
        base = wide  # ranked, nothing scored: the keyword candidates
    if mode == "ranked" and hits:
        folders = index.folders
        page.candidates += len({folders[n].id for n in hits} - {p.id for p in order})
    if not page.paginated and mode == "fair":
        # k >= 2: at k = 1 the lane split leaves the high lanes no slot (k_H = 0)
        fair = matches()
        page.selection = select_fair(index, fair, state, cfg, max(2, limit), used=reserved_ids)
        own = [p for p in page.selection.picks if p.n in fair.candidates][:limit]
        taken = {p.id for p in own}
        order = own + [p for p in order if p.id not in taken]
    order = (reserved + [p for p in order if p.id not in reserved_ids])[:PAGE_WINDOW]
    if page.paginated:
        page.picks = order[page.offset : page.offset + limit]
        rest = len(order) - page.offset - len(page.picks)
    else:
        page.picks = order[:limit]
        rest = len(order) - len(page.picks)
    page.window = len(order)
    page.has_more = rest > 0
    if page.has_more:
        page.next_offset = page.offset + len(page.picks)
    emptied = None
    if base is not None:
        page.filtered, emptied = filter_counts(constraints, base)
    if page.candidates == 0:
        page.miss_type = emptied or "keyword"
    elif page.window == 0:
        page.miss_type = "excluded"
        matched = _matched_ids(relevance, index, matches, query, state, cfg)
        page.in_block = sum(1 for fid in matched if fid in block)
        page.surfaced = len(matched) - page.in_block
    elif not page.picks:
        page.miss_type = "offset"
    return page


def _legacy(
    page: SearchPage,
    index: CandidateIndex,
    matches: Matches,
    state: RecallState,
    cfg: MemoryConfig,
    query: Query,
    session_key: str,
    block: set[str],
) -> SearchPage:
    """v1.3.0's walk with quota = limit; no pagination (§1.3 "legacy 路径不参与该分页语义")."""
    if page.paginated:
        page.warnings.append(RECALL_TOOL_WARN_LEGACY_OFFSET)
        page.paginated, page.offset = False, 0
    sel = select_legacy(index, matches, state, cfg, page.limit, session_key, query)
    page.selection = sel
    page.picks = sel.picks[: page.limit]
    page.candidates = len(matches.candidates)
    page.window = len(page.picks)
    folders = index.folders
    page.in_block = sum(1 for n in matches.candidates if folders[n].id in block)
    if not page.candidates:
        page.miss_type = "keyword"
    elif page.in_block == page.candidates:
        page.miss_type = "excluded"
    elif not page.picks:
        page.miss_type = "chance"
    return page


def entry_config(cfg: MemoryConfig) -> MemoryConfig:
    """The config entries are rendered with: the block's, except that `legacy` keeps the
    bare archive date in tool results (§1.15 "legacy 保持裸日期")."""
    rc = cfg.recall
    if rc.mode != "legacy" or not rc.compute_dates:
        return cfg
    return cfg.model_copy(update={"recall": rc.model_copy(update={"compute_dates": False})})


def load_entries(
    store: SessionStore | None,
    picks: Iterable[Pick],
    cfg: MemoryConfig,
    loader: Loader | None = None,
) -> tuple[list[tuple[Pick, Addition]], list[CorruptFolder]]:
    """Read and render the picked folders as the block renders its entries (heading date,
    tags line, images expanded to their paths); a folder gone meanwhile is skipped, an
    unreadable one is returned for the caller to report. Reads only these folders."""
    render_cfg = entry_config(cfg)

    def read(p: Pick, ahead: ReadAhead) -> Addition | CorruptFolder | None:
        if loader is not None:
            return loader(p)
        if store is None:
            return None
        return load_addition(
            store, p.id, render_cfg, generation=p.generation, lane=p.lane, ahead=ahead
        )

    return load_picks(store if loader is None else None, list(picks), read, render_cfg)


def commit_search(
    state: RecallState,
    page: SearchPage,
    shown: Iterable[Pick],
    index: CandidateIndex,
    cfg: MemoryConfig,
) -> bool:
    """Record an unpaginated call's results in the lane state (module docstring); True
    when the state changed (the caller saves it). Paginated, ranked and legacy calls
    change nothing. `shown` are the picks whose entries were read (what the model saw)."""
    if page.paginated or page.mode not in ("fair", "deterministic"):
        return False
    picks = list(shown)
    if not picks:
        return False
    folders = index.folders
    max_entries = cfg.recall.fairness.ledger.max_entries
    for p in picks:
        state.surface(p.id, folders[p.n].alpha, max_entries)
    if page.mode == "fair":
        lanes = state.lanes
        ids = {p.id for p in picks}
        lanes.register = [r for r in lanes.register if r["id"] not in ids]
        for fid in ids:
            lanes.high_recycle.pop(fid, None)
            lanes.recycle.pop(fid, None)
        rotation = [p for p in picks if p.lane == "rotation"]
        if rotation:
            f = folders[rotation[-1].n]
            lanes.cursor = (f.alpha, f.created_at, f.id)
    return True
