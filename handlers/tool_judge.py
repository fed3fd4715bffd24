"""`memory_judge` over `tools/call` (reference §1.2 "工具 memory_judge").

The engine plans the whole call (`engine.scoring.judge.plan_judge`: validation,
clamping, cleaning, tags, merge approval, warnings, output text); this handler reads
the folders it names, then writes every change with one `update_metas` (the changed
index rows appended to `index.log.jsonl`, then each meta.json; bytes in proportion to
the folders judged, not to the index) after entering the commit guard, appends the `judge`
telemetry record (`scoring.judgeTelemetry`), and, when the task list changed, asks the
host for a new request series (the task block shrinks; §1.2 "提交评分后会重写头节点")
and resets the rounds-without-judging counter. The tool only ever touches the calling
session's store (session isolation): an id of another session is an unknown id.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from engine import texts
from engine.assistant_keywords import with_assistant_keywords
from engine.scoring.judge import (
    FolderFacts,
    FolderUnreadable,
    JudgePlan,
    facts_from_meta,
    plan_judge,
)
from engine.store import SessionStore, StoreError
from handlers.scoring_policy import heuristic_text
from handlers.tool_base import Tool, ToolRequest, ToolResult
from handlers.tool_schema import object_schema, string_list_schema, string_schema

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

NAME = "memory_judge"


_UPDATE = object_schema(
    {
        "id": string_schema(texts.JUDGE_PARAM_ID),
        "alpha": {"type": "number", "description": texts.JUDGE_PARAM_ALPHA},
        "beta": {"type": "number", "description": texts.JUDGE_PARAM_BETA},
        "keywords": string_list_schema(texts.JUDGE_PARAM_KEYWORDS),
        "events": string_list_schema(texts.JUDGE_PARAM_EVENTS),
        "event": string_schema(texts.JUDGE_PARAM_EVENT),
        "locations": string_list_schema(texts.JUDGE_PARAM_LOCATIONS),
        "persons": string_list_schema(texts.JUDGE_PARAM_PERSONS),
        "keep": {"type": "boolean", "description": texts.JUDGE_PARAM_KEEP},
        "reason": string_schema(texts.JUDGE_PARAM_REASON),
    },
    required=("id",),
)

PARAMETERS = object_schema(
    {"updates": {"type": "array", "description": texts.JUDGE_PARAM_UPDATES, "items": _UPDATE}},
    required=("updates",),
)

DESCRIPTION = texts.JUDGE_DESCRIPTION + texts.JUDGE_DESCRIPTION_KEYWORD_RULES


def folder_facts(store: SessionStore, folder_id: str) -> FolderFacts | None:
    """What the plan needs of folder `folder_id`: None when the store has no such folder
    (an unknown id); a folder whose meta cannot be read is `FolderUnreadable`."""
    if folder_id not in store:
        return None
    try:
        meta = store.get_meta(folder_id)
    except StoreError as exc:
        raise FolderUnreadable(folder_id) from exc
    return facts_from_meta(
        folder_id,
        scored=meta.scored,
        rescore_pending=meta.rescorePending,
        events=meta.events,
        event=meta.event,
        locations=meta.locations,
        persons=meta.persons,
    )


def _plan(state: SessionState, arguments: dict[str, Any], app: App, now_ms: int) -> JudgePlan:
    store = state.store
    return plan_judge(
        arguments,
        folder=lambda folder_id: folder_facts(store, folder_id),
        text_of=lambda folder_id: heuristic_text(state, folder_id),
        label_counts=store.index_stats.label_counts(),
        cfg=app.config.config,
        now_ms=now_ms,
    )


def write_plan(store: SessionStore, plan: JudgePlan, telemetry: bool) -> None:
    """The plan's writes: metas and index rows in one `update_metas` (an old folder
    judged again gets its 「你说过」 phrases), then the `judge` telemetry record."""
    if plan.changes:
        store.update_metas(with_assistant_keywords(store, plan.changes))
    if telemetry and plan.telemetry is not None:
        store.append_stats(plan.telemetry)


async def judge(request: ToolRequest) -> ToolResult:
    """Run one memory_judge call."""
    app, state, ctx = request.app, request.state, request.ctx
    started = time.monotonic()
    plan = await anyio.to_thread.run_sync(lambda: _plan(state, request.arguments, app, ctx.now_ms))
    if plan.is_error:
        return ToolResult.of(plan, is_error=True)
    if plan.telemetry is not None:
        plan.telemetry["elapsedMs"] = round((time.monotonic() - started) * 1000, 1)
    write_stats = bool(app.config.config.scoring.judge_telemetry)
    if plan.changes or (write_stats and plan.telemetry is not None):
        with ctx.commit_guard():
            await anyio.to_thread.run_sync(lambda: write_plan(state.store, plan, write_stats))
    if plan.touched:
        state.scoring_rounds_unjudged = 0
        state.request_new_series()
    app.metrics.count("judged_folders", len(plan.changes))
    return ToolResult.of(plan)


TOOL = Tool(name=NAME, description=DESCRIPTION, parameters=PARAMETERS, handler=judge)
