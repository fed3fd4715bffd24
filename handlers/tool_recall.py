"""`memory_recall` over `tools/call` (reference §1.3 "工具 memory_recall").

The model searches its own session's memory by keywords, and with `assistantSaid` (or
when the current user message quotes the assistant, its quote phrase kept in the recall
state's `queryInfo`) the 「你说过」 channel too: the engine checks the
arguments (`engine.recall.search_args`), selects in the configured recall mode over the
session's candidate and relevance indexes (`engine.recall.search`: the same indexes the
inbox's automatic recall uses), reads only the folders it returns and renders them as
the recall block renders its entries (`engine.recall.search_answer`).

Constraints: `event` / `events` (`engine.recall.events`) and `locations` / `persons`
(`engine.recall.tags`) are resolved against the session's tag index (kept inside the
candidate index, so it is current for the same store version) and handed to the search,
which intersects them with the keywords' candidates. A call with constraints that
restrict it and no keywords lists what they allow (`engine.recall.browse`).

Writes: an unpaginated call in `fair` / `deterministic` mode records what it showed in
the recall state (ledger, rotation cursor) and saves `recall-state.json`; a paginated
call, and every call in `ranked` / `legacy` mode, leaves it untouched. Each call that
searched appends a `recall` telemetry record (`trigger: "tool"`). Both happen inside the
commit guard. The block itself never changes, so no new request series is asked for.
The tool may open a session lazily (`handlers.session_access`): the recall state is only
saved after a call returned folders, which live in the session's directory, so it never
writes into a directory the store has not made.

Strikes (`engine.recall.strikes`): consecutive keyword misses in the turn, kept on the
session (`SessionState.recall_strikes`, carried across an eviction) and reset by the
next real user message (`handlers.inbox`) or a hit; from the sixth the tool answers
isError until then.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio
import structlog

from engine import texts
from engine.config import MemoryConfig
from engine.recall import RENDER_READS, CandidateIndex, RecallState
from engine.recall.assistant_said import AssistantQuery, channel_enabled, tool_assistant_query
from engine.recall.browse import browse
from engine.recall.constraint import Constraint
from engine.recall.events import resolve_events
from engine.recall.fair import Pick
from engine.recall.search import SearchPage, commit_search, keyword_query, load_entries, search
from engine.recall.search_answer import (
    SearchAnswer,
    answer_miss_type,
    refused_answer,
    render_answer,
    search_record,
)
from engine.recall.search_args import SearchArgs, parse_search_args
from engine.recall.state import Addition
from engine.recall.tags import resolve_tags
from engine.recall.time_filter import plan_time, widen
from engine.store import CorruptFolder
from handlers.compat import recall_config
from handlers.recall_state import (
    candidate_index,
    ensure_recall_state,
    relevance_index,
    time_index,
)
from handlers.tool_base import Tool, ToolRequest, ToolResult
from handlers.tool_schema import integer_schema, object_schema, string_list_schema, string_schema

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.recall")

NAME = "memory_recall"


PARAMETERS = object_schema(
    {
        "keywords": string_schema(texts.RECALL_PARAM_KEYWORDS),
        "limit": integer_schema(texts.RECALL_PARAM_LIMIT, minimum=1, maximum=20),
        "offset": integer_schema(texts.RECALL_PARAM_OFFSET, minimum=0, maximum=10000),
        "timeFrom": string_schema(texts.RECALL_PARAM_TIME),
        "timeTo": string_schema(texts.RECALL_PARAM_TIME),
        "granularity": string_schema(texts.RECALL_PARAM_GRANULARITY, enum=("day", "month", "year")),
        "event": string_schema(texts.RECALL_PARAM_EVENT),
        "events": string_list_schema(texts.RECALL_PARAM_EVENTS),
        "locations": string_list_schema(texts.RECALL_PARAM_LOCATIONS),
        "persons": string_list_schema(texts.RECALL_PARAM_PERSONS),
        "timeText": string_schema(texts.RECALL_PARAM_TIME_TEXT),
        "assistantSaid": {"type": "boolean", "description": texts.RECALL_PARAM_ASSISTANT_SAID},
    }
)
"""No `required`: keywords may be left out when a filter is given (the reference's
"有任一过滤器时可省"); a call with neither is refused with a readable text."""


@dataclass
class _Searched:
    page: SearchPage | None
    index: CandidateIndex | None = None
    entries: list[tuple[Pick, Addition]] = field(default_factory=list)
    unreadable: list[CorruptFolder] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)


def _assistant(rs: RecallState, args: SearchArgs, cfg: MemoryConfig) -> AssistantQuery | None:
    """The call's 「你说过」 request: its `assistantSaid`, else the current user message's."""
    current = (rs.query_info or {}).get("assistantSaid")
    return tool_assistant_query(
        args.keywords, args.assistant_said, current if isinstance(current, dict) else None, cfg
    )


def _search(
    app: App,
    state: SessionState,
    rs: RecallState,
    args: SearchArgs,
    assistant: AssistantQuery | None,
    now_ms: int,
) -> _Searched:
    """Select and read (blocking; in a worker thread). Changes nothing."""
    cfg = recall_config(app, state)  # the turn's member gate (QQ groups, §3.2.3)
    index = candidate_index(state, cfg)
    constraints = constraints_of(args, index, cfg)
    keywordless = not args.keywords and (assistant is None or not assistant.keys)
    restricting = any(c.allowed is not None or c.stop for c in constraints)
    timed = None
    if args.has_time:  # the window's levels are tried in turn (engine.recall.time_filter)
        timed = plan_time(
            args,
            time_index(state, cfg),
            cfg,
            now_ms=now_ms,
            keywordless=keywordless,
            restricted=restricting,
        )
    if keywordless:
        if timed is not None and not timed.browse_refused:
            listed, kept = widen(
                timed,
                lambda cs: browse(
                    index, [*cs, *constraints], cfg, limit=args.limit, offset=args.offset
                ),
                browse=True,
            )
            constraints = [*kept, *constraints]
        elif not restricting:
            # filters that restrict nothing: nothing to search with
            kept = timed.constraints(0 if timed.levels else None) if timed is not None else []
            return _Searched(None, constraints=[*kept, *constraints])
        else:
            if timed is not None:
                constraints = [*timed.constraints(0 if timed.levels else None), *constraints]
            listed = browse(index, constraints, cfg, limit=args.limit, offset=args.offset)
        entries, unreadable = load_entries(state.store, listed.picks, cfg)
        return _Searched(listed, index, entries, unreadable, constraints)
    relevance = relevance_index(state, cfg) if cfg.recall.mode == "ranked" else None
    query = keyword_query(args.keywords, cfg, assistant=assistant)

    def run(time_constraints: Sequence[Constraint]) -> SearchPage:
        return search(
            index,
            rs,
            query,
            cfg,
            limit=args.limit,
            offset=args.offset,
            relevance=relevance,
            session_key=state.key,
            constraints=[*time_constraints, *constraints],
        )

    if timed is not None:
        page, kept = widen(timed, run)
        constraints = [*kept, *constraints]
    else:
        page = run(())
    entries, unreadable = load_entries(state.store, page.picks, cfg)
    return _Searched(page, index, entries, unreadable, constraints)


def constraints_of(args: SearchArgs, index: CandidateIndex, cfg: MemoryConfig) -> list[Constraint]:
    """The call's constraints, in the order the search applies them (event, then
    tags: the reference filters the event after the time)."""
    tags = {"location": args.locations, "person": args.persons}
    return [resolve_events(args.events, index.tags, cfg), resolve_tags(tags, index.tags, cfg)]


async def recall_tool(request: ToolRequest) -> ToolResult:
    """Run one memory_recall call."""
    app, state, ctx = request.app, request.state, request.ctx
    strikes = state.recall_strikes
    cfg = recall_config(app, state)
    if strikes.disabled:
        refused = refused_answer(strikes, cfg)
        return ToolResult.of(refused, is_error=True)
    args = parse_search_args(request.arguments, cfg)
    if args.error is not None:
        bad = render_answer(args, None, [], cfg)
        return ToolResult.of(bad, is_error=True)
    if args.assistant_said and not channel_enabled(cfg):
        args = replace(args, warnings=(*args.warnings, texts.RECALL_TOOL_WARN_ASSISTANT_OFF))
    started = time.monotonic()
    rs = await ensure_recall_state(app, state)
    assistant = _assistant(rs, args, cfg)
    if not args.keywords and args.assistant_said and (assistant is None or not assistant.keys):
        need = render_answer(replace(args, error=texts.RECALL_TOOL_NEED_KEYWORDS), None, [], cfg)
        return ToolResult.of(need, is_error=True)
    found = await anyio.to_thread.run_sync(
        lambda: _search(app, state, rs, args, assistant, ctx.now_ms)
    )
    state.damage.note_unreadable(found.unreadable)
    state.damage.note_readable([a.id for _, a in found.entries], RENDER_READS)
    miss_type = None
    if found.page is not None:
        miss_type = answer_miss_type(found.page, len(found.entries), len(found.unreadable))
        strikes.record(cfg.recall.mode, len(found.entries), miss_type)
    answer: SearchAnswer = render_answer(
        args,
        found.page,
        found.entries,
        cfg,
        unreadable=len(found.unreadable),
        strikes=strikes,
        constraints=found.constraints,
    )
    if found.page is not None:
        record = search_record(
            args,
            found.page,
            found.entries,
            now_ms=ctx.now_ms,
            turn=request.params.turn,
            round_=rs.round,
            miss_type=miss_type,
            strikes=strikes.misses,
        )
        record["elapsedMs"] = round((time.monotonic() - started) * 1000, 1)
        page = found.page
        picks = [p for p, _ in found.entries]
        index = found.index

        def write() -> None:
            if index is not None and commit_search(rs, page, picks, index, cfg):
                rs.save()
            state.store.append_stats(record)

        with ctx.commit_guard():
            await anyio.to_thread.run_sync(write)
        log.info(
            "memory_recall",
            session_key=state.key,
            mode=page.mode,
            found=len(found.entries),
            paginated=page.paginated,
            miss_type=miss_type,
            strikes=strikes.misses,
        )
    return ToolResult.of(answer)


TOOL = Tool(
    name=NAME,
    description=texts.RECALL_TOOL_DESCRIPTION,
    parameters=PARAMETERS,
    handler=recall_tool,
)
