"""`agent/inbox/inserted` (PROTOCOL.md §4): automatic recall before the host thinks.

Reference §1.3: only a real user message triggers recall — its source kind must be
in `recall.triggerSourceKinds` (default `["user"]`; a QQ bridge's
`plugin:dsh-onebot` or `agent-message` can be added), it must carry text, the session
must be allowed (`recall.applyToSubagents` / `recall.applyToMainSessions`), and the
same message id is handled once (a bridge retry or a replay after a restart does not
run a second round). Hosts without the `systemPrompt` capability get no recall block
(reference §3.1). Every real user message, recalled on or not, opens a new turn for
`memory_recall`: its consecutive-miss strikes reset (§1.3 "下一条真实用户消息恢复工具").

The round runs in a worker thread (index build on a new index version, selection,
reading the picked folders (each rendered once: `engine.recall.render_cache`), the
recall state committed (a line of its log: `engine.recall.state_log`), telemetry)
inside the commit guard: once it starts it finishes. A changed block asks for a new request series.

Answer: `{"recalled": ["mem-…"], "sections": Sections, "startsRequestSeries": bool,
"warnings": []}`.

Optional params beyond the protocol's: `turn` (the turn the message opens; stored as
`injectedTurn` for re-archive protection, else the last turn the session reported)
and `contextWindow` (caps the block at `recall.maxWindowPercent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from engine.concurrent_io import together
from engine.config import MemoryConfig
from engine.content import message_text
from engine.recall import RecallState, RoundOutcome, analyze_query, run_round
from engine.recall.assistant_said import message_query_info
from engine.secrets.redact import query_text
from handlers.compat import note_sender, recall_config
from handlers.context import RequestContext
from handlers.forget import ensure_hygiene
from handlers.long_lived import long_lived
from handlers.media_staging import stage_message_images
from handlers.params import Message, Millis, SafeInt, Session, TokenCount, Wire
from handlers.recall_state import (
    candidate_index,
    ensure_recall_state,
    note_round,
    relevance_index,
)
from handlers.sections import sections_answer

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.recall")

# Source forms that mark host-generated copies rather than something the user said.
_NON_USER_FORMS = frozenset({"instructions", "catalog", "snapshot", "notice", "recall"})


class InboxParams(Wire):
    """`agent/inbox/inserted` params."""

    session: Session
    message: Message
    time: Millis | None = None
    turn: SafeInt | None = None
    contextWindow: TokenCount | None = None


def source_kind(message: Mapping[str, Any]) -> str | None:
    """The v4 source kind; old `{"kind": "plugin", "plugin": X}` reads as `plugin:X`;
    a message without a source is `user` when its role is `user`."""
    source = message.get("source")
    if isinstance(source, Mapping):
        kind = source.get("kind")
        if kind == "plugin" and isinstance(source.get("plugin"), str):
            return f"plugin:{source['plugin']}"
        return kind if isinstance(kind, str) else None
    return "user" if message.get("role") == "user" else None


def is_user_message(message: Mapping[str, Any], cfg: MemoryConfig) -> bool:
    """A real user message (reference §1.3): role user, a source kind of
    `recall.triggerSourceKinds`, not a host-generated copy. It opens a new turn."""
    if message.get("role", "user") != "user":
        return False
    kind = source_kind(message)
    if kind is None or kind not in cfg.recall.trigger_source_kinds:
        return False
    source = message.get("source")
    return not (isinstance(source, Mapping) and source.get("form") in _NON_USER_FORMS)


def trigger_text(message: Mapping[str, Any], session: Session, cfg: MemoryConfig) -> str | None:
    """The text to recall on, or None when this message does not trigger recall."""
    rc = cfg.recall
    if not rc.enabled:
        return None
    if session.is_subagent and not rc.apply_to_subagents:
        return None
    if not session.is_subagent and not rc.apply_to_main_sessions:
        return None
    if not is_user_message(message, cfg):
        return None
    # nobody looks a memory up by a secret's value, nor shows it in the block
    text = query_text(message_text(message), cfg.secrets.mode).strip()
    return text or None


async def agent_inbox_inserted(
    app: App, params: InboxParams, ctx: RequestContext
) -> dict[str, Any]:
    """Run automatic recall for a real user message and answer the sections."""
    state = await app.sessions.get(params.session.id)
    # QQ onebot images are copied while their files surely exist (§3.2.7)
    await stage_message_images(app, state, params.message, message_text(params.message), ctx.now_ms)
    cfg = app.config.config
    rs = await ensure_recall_state(app, state)
    if params.contextWindow:
        state.context_window = params.contextWindow
    recalled: list[str] = []
    warnings: list[str] = []
    text = trigger_text(params.message, params.session, cfg)
    if is_user_message(params.message, cfg):
        state.recall_strikes.reset()  # a new turn: memory_recall starts afresh
        note_sender(app, state, message_text(params.message))
        cfg = recall_config(app, state)  # a gated group member recalls α ≥ memberMinAlpha
        # what memory_recall's automatic assistantSaid reads (a round refines it)
        rs.query_info = message_query_info(text, cfg)
    mid = params.message.get("id")
    message_id = mid if isinstance(mid, str) and mid else None
    if (
        text is not None
        and ctx.connection.capability("systemPrompt")
        and not rs.seen_message(message_id)
        and not (await ensure_hygiene(state)).paused  # memory_control: injection paused
    ):
        outcome = await _recall(app, state, rs, cfg, text, params, message_id, ctx)
        recalled = outcome.recalled
        warnings = outcome.warnings
        if outcome.changed:
            state.request_new_series()
    answer = await sections_answer(app, state, ctx)
    return {
        "recalled": recalled,
        "sections": answer["sections"],
        "startsRequestSeries": answer["startsRequestSeries"],
        "warnings": [*warnings, *state.damage.take_warnings()],
    }


async def _recall(
    app: App,
    state: SessionState,
    rs: RecallState,
    cfg: MemoryConfig,
    text: str,
    params: InboxParams,
    message_id: str | None,
    ctx: RequestContext,
) -> RoundOutcome:
    now_ms = params.time if params.time and params.time > 0 else ctx.now_ms
    turn = params.turn if params.turn is not None else _turn_hint(state, rs)

    ranked = cfg.recall.mode == "ranked"
    # the first round of a session builds its indexes, which live as long as it
    first = state.recall_index is None or (ranked and state.relevance_index is None)

    def work() -> RoundOutcome:
        with long_lived() if first else nullcontext():
            index = candidate_index(state, cfg)
            relevance = relevance_index(state, cfg) if ranked else None
        query = analyze_query(text, cfg)
        outcome = run_round(
            state.store,
            index,
            rs,
            query,
            cfg,
            now_ms=now_ms,
            turn=turn,
            session_key=state.key,
            context_window=state.context_window,
            relevance=relevance,
        )
        note_round(state, outcome)
        rs.remember_message(message_id)
        if outcome.ran:  # the state and the round's two records, durable together
            records = (outcome.recall_record, outcome.block_record)
            together(rs.save, lambda: state.store.append_stats(*records))
        else:
            rs.save()
        return outcome

    with ctx.commit_guard():
        outcome = await anyio.to_thread.run_sync(work, limiter=None if first else app.warm_rounds)
    if outcome.recalled:
        app.metrics.count("recalls")
        app.metrics.count("recalled_memories", len(outcome.recalled))
    if outcome.ran:
        log.info(
            "recall",
            session_key=state.key,
            mode=cfg.recall.mode,
            recalled=len(outcome.recalled),
            candidates=outcome.recall_record.get("candidates"),
        )
    return outcome


def _turn_hint(state: SessionState, rs: RecallState) -> int:
    """Without a `turn` param: the turn this message opens, one past the last turn a
    pre-step reported (or past the newest injected turn when none has)."""
    newest = max((a.injected_turn for a in rs.additions), default=0)
    return max(newest, state.last_turn or 0) + 1
