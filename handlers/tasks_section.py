"""Text of the memory task block (dsh-rofm:memory-tasks), reference §1.2; owned by the scoring use case.

Every answer that carries sections renders it from the store as it is now, so a
`memory_judge` call removes what it scored from the very answer it returns. Before
rendering, the heuristic fallback gets its say (`scoring.fallback: "always"`,
`compat.channelScore: "heuristic"`, `autoHeuristicAfterRounds`, backpressure), so the
model never sees folders that are about to be scored without it. A user turn
(`agent/inbox/inserted`) whose block lists pending folders counts one round without
judging; `memory_judge` resets the count.

The window for the budget is the last `contextWindow` the host reported (pre-step, else
inbox), else `compress.contextWindowTokens`, else 128 000 tokens
(`engine.scoring.task_block.DEFAULT_WINDOW_TOKENS`).

The lists are gathered for every answer, the block is laid out again only when what it
shows changed (an item, a text, a waiting time, the budget): while folders wait, the
answers of a session reuse its last block (`_render`).

And when nothing the block or the fallback decision reads can have changed since the
last answer (the store's version and telemetry writes, the config and compat status, the
window, the recall and channel flags, the rounds count: `_Quiet`), an answer that counts no round
(anything but a user turn) takes that block on the event loop, once the waiting times it
shows are checked: no worker hop, which cost more than the gathering itself (about half
a millisecond on every pre-step of a session whose folders wait to be scored). The window
only sizes the block (its budget), which is the same in every window from 80k tokens up
by default (`scoring.taskMaxTokens`): so another window (another model's) takes the block
the same way while its budget is the one the block was laid out in.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio

from engine import texts
from engine.compat.status import CompatStatus
from engine.config import MemoryConfig
from engine.scoring.events import existing_label_list
from engine.scoring.fallback import FallbackDecision
from engine.scoring.task_block import (
    LIST_LIMIT,
    PendingItem,
    ReviewItem,
    TaskBlock,
    TaskBlockInput,
    first_in_order,
    format_age,
    render_task_block,
    task_budget,
)
from engine.store import IndexEntry, SessionStore, StoreError
from handlers.context import RequestContext
from handlers.scoring_policy import (
    apply_fallback,
    fallback_decision,
    listed_pending,
    readable_for,
)

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

USER_TURN_METHOD = "agent/inbox/inserted"


def window_tokens(state: SessionState, cfg: MemoryConfig) -> int | None:
    """The window the budget is computed from (see the module docstring)."""
    return state.context_window or cfg.compress.context_window_tokens or None


def review_item(state: SessionState, e: IndexEntry) -> ReviewItem:
    """Folder `e`, due for review, as the block lists it: with the reason it was judged
    for (none when its meta cannot be read: the block still lists it)."""
    try:
        reason = state.store.get_meta(e.id).reason or ""
    except StoreError:
        reason = ""
    text = readable_for(state, e.id).text
    return ReviewItem(e.id, e.title, e.alpha, e.beta, e.keywords, reason, text)


def block_budget(state: SessionState, cfg: MemoryConfig) -> int:
    """The block's token budget in this session's window."""
    return task_budget(
        window_tokens(state, cfg),
        max_tokens=cfg.scoring.task_max_tokens,
        percent=cfg.scoring.task_budget_percent,
    )


def build_task_block(
    state: SessionState,
    cfg: MemoryConfig,
    now_ms: int,
    *,
    has_recall_block: bool,
    channel: bool = False,
) -> TaskBlock:
    """Gather the lists and render the block. Blocking (reads folder texts).

    The lists come from the store's ordered counters (``engine.store.index_stats``): the
    block costs what it shows, whatever the number of folders."""
    limit = max(1, min(LIST_LIMIT, cfg.scoring.max_items_per_judge))
    store = state.store
    stats = store.index_stats
    listed = listed_pending(state, cfg)
    pending = [store.get_entry(fid) for fid in first_in_order(listed, cfg.scoring.order, limit)]
    review = [store.get_entry(fid) for fid in stats.review[:limit]]
    pending_items = []
    for e in pending:
        text = readable_for(state, e.id)
        pending_items.append(
            PendingItem(e.id, e.title, text.kind, e.pendingSince or e.createdAt, text.text)
        )
    review_items = [review_item(state, e) for e in review]
    # Keep only the texts of listed folders: the cache stays bounded by 2 × LIST_LIMIT.
    keep = {it.id for it in pending_items} | {it.id for it in review_items}
    state.scoring_texts = {k: v for k, v in state.scoring_texts.items() if k in keep}
    labels: list[tuple[str, int]] = []
    if pending_items and cfg.event.show_existing and cfg.event.mode != "off":
        labels = existing_label_list(stats.label_counts(), cfg.event.show_existing_limit)
    return _render(
        state,
        TaskBlockInput(
            pending=pending_items,
            review=review_items,
            labels=labels,
            has_recall_block=has_recall_block,
            now_ms=now_ms,
            budget_tokens=block_budget(state, cfg),
            pending_total=len(listed),
            review_total=len(stats.review),
            channel=channel,
        ),
    )


_RenderKey = tuple[TaskBlockInput, tuple[str, ...]]
_LAST_RENDER: dict[int, tuple[weakref.ref[SessionState], _RenderKey, TaskBlock, _Quiet | None]] = {}
"""The last block rendered per session object (by id, checked through a weak reference;
an entry goes with its session: a disposed or evicted session keeps nothing here), and
what a quiet answer read to get it (`_remember_quiet`; None: no such answer since)."""
_LAST_RENDER_LOCK = threading.Lock()
MAX_REMEMBERED_BLOCKS = 256
"""Sessions whose last block is kept (a block and what it lists: tens of kB)."""


def _forgetting(sid: int) -> Callable[[weakref.ref[SessionState]], None]:
    """The weak reference's callback: the session object ``sid`` is gone. No lock: it may
    run inside any allocation, locked or not (one dict operation, atomic)."""

    def forget(ref: weakref.ref[SessionState]) -> None:
        entry = _LAST_RENDER.get(sid)
        if entry is not None and entry[0] is ref:
            _LAST_RENDER.pop(sid, None)

    return forget


def _ages(pending: Sequence[PendingItem], now_ms: int) -> tuple[str, ...]:
    """The waiting time each listed pending item shows at `now_ms` (its age line)."""
    return tuple(format_age(max(0, now_ms - it.since_ms)) for it in pending[:LIST_LIMIT])


def render_key(inp: TaskBlockInput) -> _RenderKey:
    """What ``render_task_block(inp)`` depends on: the input but the clock, and the clock
    only through the waiting time each pending item shows (its age line)."""
    return replace(inp, now_ms=0), _ages(inp.pending, inp.now_ms)


@dataclass(frozen=True, slots=True, eq=False)
class _Quiet:
    """What the task block of an answer that counts no round, and the fallback decision
    before it, read besides the clock (module docstring): the store as of its version
    (its entries, counters and folder texts only change with it) and of its telemetry
    writes (the era rule reads ``stats.jsonl``: `scoring_policy.session_synthetic`), the
    config (replaced whole on a reload: compared by identity), the compat status, the
    window, and the flags and rounds count the caller passes."""

    store: SessionStore
    version: int
    stats_writes: int
    cfg: MemoryConfig
    compat: CompatStatus
    window: int | None
    has_recall: bool
    channel: bool
    rounds: int

    def same_lists(self, other: _Quiet) -> bool:
        """Whether the fallback decision and the lists the block shows are the same for
        both: everything but the window, which only sizes the block (its budget)."""
        return (
            self.store is other.store
            and self.cfg is other.cfg
            and self._values() == other._values()
        )

    def _values(self) -> tuple[object, ...]:
        return (
            self.version,
            self.stats_writes,
            self.compat,
            self.has_recall,
            self.channel,
            self.rounds,
        )


def _quiet_key(
    state: SessionState, cfg: MemoryConfig, compat: CompatStatus, has_recall: bool, channel: bool
) -> _Quiet:
    """The `_Quiet` of this answer, read on the event loop (attributes and counters)."""
    store = state.store
    return _Quiet(
        store,
        store.version,
        store.stats_writes,
        cfg,
        compat,
        window_tokens(state, cfg),
        has_recall,
        channel,
        state.scoring_rounds_unjudged,
    )


def _quiet_block(
    state: SessionState, quiet: _Quiet, cfg: MemoryConfig, now_ms: int
) -> TaskBlock | None:
    """The session's last block when a quiet answer got it (`_remember_quiet`) from what
    `quiet` names but the window (`_Quiet.same_lists`), the waiting times it shows are
    still those at `now_ms` and, in another window, the budget is still the one it was
    laid out in (any window from 80k tokens up gets `scoring.taskMaxTokens` by default);
    else None. A comparison and at most `LIST_LIMIT` age labels, whatever the number of
    folders: on the event loop."""
    last = _LAST_RENDER.get(id(state))
    if last is None or last[0]() is not state or last[3] is None:
        return None
    if not last[3].same_lists(quiet):
        return None
    inp, ages = last[1]
    if _ages(inp.pending, now_ms) != ages:
        return None
    if quiet.window != last[3].window:
        if block_budget(state, cfg) != inp.budget_tokens:
            return None
        _remember_quiet(state, quiet, last[2])
    return last[2]


def _remember_quiet(state: SessionState, quiet: _Quiet, block: TaskBlock) -> None:
    """`block`, the session's last block, was rendered from what `quiet` names: noted
    beside it, unless the store changed meanwhile (then the next answer gathers again).
    Called in the worker thread right after the render, or on the event loop when a quiet
    answer in another window took the block (`_quiet_block`)."""
    store = state.store
    if not (
        store is quiet.store
        and store.version == quiet.version
        and store.stats_writes == quiet.stats_writes
    ):
        return
    sid = id(state)
    with _LAST_RENDER_LOCK:
        last = _LAST_RENDER.get(sid)
        if last is not None and last[0]() is state and last[2] is block:
            _LAST_RENDER[sid] = (last[0], last[1], block, quiet)


def _render(state: SessionState, inp: TaskBlockInput) -> TaskBlock:
    """``render_task_block(inp)``, or the same block again when nothing it shows changed:
    while folders wait to be scored, every answer of the session lists the same items
    (fitting them to the budget is most of the cost of an answer that carries sections)."""
    key = render_key(inp)
    last = _LAST_RENDER.get(id(state))
    if last is not None and last[0]() is state and last[1] == key:
        return last[2]  # what a quiet answer noted beside it still holds
    block = render_task_block(inp)
    sid = id(state)
    ref = last[0] if last is not None and last[0]() is state else None
    if ref is None:
        ref = weakref.ref(state, _forgetting(sid))
    with _LAST_RENDER_LOCK:  # sessions render in worker threads of their own
        _LAST_RENDER.pop(sid, None)
        _LAST_RENDER[sid] = (ref, key, block, None)
        while len(_LAST_RENDER) > MAX_REMEMBERED_BLOCKS:
            _LAST_RENDER.pop(next(iter(_LAST_RENDER)), None)
    return block


async def tasks_section_text(app: App, state: SessionState, ctx: RequestContext) -> str:
    """The section text for this session now; empty renders nothing."""
    cfg = app.config.config
    recall = state.recall
    has_recall = recall is not None and len(recall.rearchive_candidates()) > 0
    if not state.store.index_stats.waiting:
        # Nothing to list (a counter, no scan): no disk work, no worker thread.
        if ctx.method == USER_TURN_METHOD:
            state.scoring_rounds_unjudged = 0
        return texts.TASKS_EMPTY_WITH_RECALL if has_recall else ""
    compat = app.compat.status
    channel = compat.is_channel(state.key)  # §3.2.3's rubric line
    user_turn = ctx.method == USER_TURN_METHOD
    quiet = None if user_turn else _quiet_key(state, cfg, compat, has_recall, channel)
    if quiet is not None:
        kept = _quiet_block(state, quiet, cfg, ctx.now_ms)
        if kept is not None:
            return kept.text

    def render() -> TaskBlock:
        return build_task_block(
            state, cfg, ctx.now_ms, has_recall_block=has_recall, channel=channel
        )

    def decide_then_render() -> tuple[int, FallbackDecision, TaskBlock | None]:
        # one worker hop for what used to take three: a user turn counts a scoring round
        # while folders are listed, the fallback decides with that count, and the block
        # is rendered right away unless the decision scores folders first
        rounds = state.scoring_rounds_unjudged
        if user_turn:
            rounds = rounds + 1 if listed_pending(state, cfg) else 0
        decision = fallback_decision(state, cfg, compat, False, rounds)
        if decision.heuristic_ids:
            return rounds, decision, None
        block = render()
        if quiet is not None:
            _remember_quiet(state, quiet, block)
        return rounds, decision, block

    rounds, decision, block = await anyio.to_thread.run_sync(decide_then_render)
    state.scoring_rounds_unjudged = rounds
    if block is None:
        await apply_fallback(state, cfg, ctx, decision)
        block = await anyio.to_thread.run_sync(render)
    return block.text
