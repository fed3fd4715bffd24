"""`memory_control` over `tools/call` (beyond the reference; README "Forgetting").

A per-session pause of recall injection, asked for by the user ("先别用记忆"): while
paused, no automatic recall round runs and the recall block renders to nothing
(`handlers.inbox`, `handlers.recall_section`); archiving goes on and `memory_recall`
still answers an explicit search. Why a tool and not a config key: the config is one
for every session and is edited by the operator, while the pause is the user's wish in
one conversation, said to the model; it is kept in `memory-control.json`, so it
survives a restart, and `status` lists the paused sessions.
"""

from __future__ import annotations

import anyio
import structlog

from engine import texts
from engine.recall.forget import parse_control_arguments
from handlers.forget import ensure_hygiene
from handlers.tool_base import Tool, ToolRequest, ToolResult
from handlers.tool_schema import object_schema, string_schema

log = structlog.get_logger("rofmd.forget")

NAME = "memory_control"

PARAMETERS = object_schema(
    {"recall": string_schema(texts.CONTROL_PARAM_RECALL, enum=("pause", "resume"))},
    required=("recall",),
)


async def memory_control(request: ToolRequest) -> ToolResult:
    """Pause or resume this session's recall injection."""
    state, ctx = request.state, request.ctx
    call = parse_control_arguments(request.arguments)
    if call.recall is None:
        return ToolResult(
            {"error": "recall must be pause or resume"}, texts.CONTROL_NEED, is_error=True
        )
    hygiene = await ensure_hygiene(state)
    now = ctx.now_ms
    pausing = call.recall == "pause"

    def apply() -> bool:
        before = hygiene.paused_at
        changed = hygiene.pause(now) if pausing else hygiene.resume()
        if changed:
            try:
                hygiene.save()
            except BaseException:
                hygiene.paused_at = before
                raise
        return changed

    with ctx.commit_guard():
        changed = await anyio.to_thread.run_sync(apply)
    if changed:
        state.request_new_series()  # the block leaves (or comes back to) the system prompt
        log.info("memory_control", session_key=state.key, recall=call.recall)
    if pausing:
        text = texts.CONTROL_PAUSED if changed else texts.CONTROL_ALREADY_PAUSED
    else:
        text = texts.CONTROL_RESUMED if changed else texts.CONTROL_ALREADY_ON
    value = {"recallPaused": hygiene.paused, "pausedAt": hygiene.paused_at, "changed": changed}
    return ToolResult(value, text)


TOOL = Tool(
    name=NAME, description=texts.CONTROL_DESCRIPTION, parameters=PARAMETERS, handler=memory_control
)
