"""`session/event` (PROTOCOL.md §4): passive archiving of other compressors' work
(reference §3.2.6).

The bridge forwards each ``compaction/summary`` written by another compressor with the
original events it shadowed; the daemon's session-log tailer (``rofmd.server.tailer``) feeds
the same events read from the session logs through this same use case, in the session's
lane of the dispatcher, so the two paths share one watermark and never race each other.

Which sessions: every one by default (this daemon exists to keep what would be lost);
the daemon setting ``passive_scope`` limits it to QQ channel sessions (``channel``, the
reference's behaviour: a session-id pattern, ``handlers.scoring_policy``) or turns it
off (``off``; ``initialize`` then does not list ``session/event``). The memory config's
own switches for which sessions are archived at all apply as they do to the pre-step:
``compress.enabled``, ``applyToSubagents``, ``applyToMainSessions``.

Score mode: heuristic at creation when the session's folders are scored so anyway
(``scoring.fallback: "always"``, or a channel session with ``compat.channelScore:
"heuristic"``), else pending for the model, as the pre-step would write them.

A notification gets no answer; the result (``outcome``, ``folders``) is for the tailer,
which calls with an id so it knows when the archive is durable.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
import structlog
from pydantic import Field, with_config
from pydantic.config import ConfigDict
from typing_extensions import TypedDict

from engine.compat.status import CompatStatus
from engine.config.model import MemoryConfig
from engine.passive import PassiveInput, PassiveOutcome, archive_passive, compaction_of
from handlers.app import App
from handlers.context import RequestContext
from handlers.media_staging import onebot_channel
from handlers.params import (
    MAX_NODES,
    IdStr,
    MessageShape,
    Millis,
    NameStr,
    SafeInt,
    Session,
    Wire,
    shaped,
)
from handlers.pre_step import ARCHIVER_VERSION
from handlers.recall_state import session_term_stats

log = structlog.get_logger("rofmd.passive")

__all__ = [
    "PASSIVE_SCOPES",
    "PassiveScope",
    "SessionEventParams",
    "passive_off_reason",
    "passive_score_mode",
    "session_event",
]

PassiveScope = Literal["all", "channel", "off"]
PASSIVE_SCOPES: tuple[PassiveScope, ...] = ("all", "channel", "off")


@with_config(ConfigDict(extra="allow"))
class ShadowedRangeShape(TypedDict, total=False):
    """`shadowedRange {start, end}` (inclusive)."""

    start: SafeInt | None
    end: SafeInt | None


@with_config(ConfigDict(extra="allow"))
class SummaryShape(TypedDict, total=False):
    """`compaction/summary` data (PROTOCOL.md §6); runs of seqs may be `[start, end]`."""

    compactionId: IdStr | None
    provider: NameStr | None
    model: NameStr | None
    turn: SafeInt | None
    shadowedSeqs: Annotated[list[SafeInt | list[SafeInt]], Field(max_length=MAX_NODES)] | None
    shadowedRange: ShadowedRangeShape | None
    shadowedTokenCount: SafeInt | None


@with_config(ConfigDict(extra="allow"))
class _EventShape(TypedDict, total=False):
    """A session-log event's envelope, `{type, seq, time, data}`: one shape for the
    summary event and the events it shadows, which differ only in their `data`."""

    type: NameStr | None
    seq: SafeInt | None
    time: Millis | None


class SummaryEventShape(_EventShape, total=False):
    """The `compaction/summary` event."""

    data: SummaryShape | None


class ShadowedEventShape(_EventShape, total=False):
    """A shadowed event: `data` is the message (`user/message`) or holds it."""

    data: MessageShape | None


class SessionEventParams(Wire):
    """`session/event` params: `{session, event, shadowed}`."""

    session: Session
    event: Annotated[dict[str, Any], shaped(SummaryEventShape)]
    shadowed: list[Annotated[dict[str, Any], shaped(ShadowedEventShape)]] = Field(
        default_factory=list, max_length=MAX_NODES
    )


def passive_off_reason(
    scope: str, cfg: MemoryConfig, compat: CompatStatus, session: Session, key: str
) -> str | None:
    """Why passive archiving does not apply to this session (None: it does)."""
    if scope == "off":
        return "passive_scope is off"
    if scope == "channel" and not compat.is_channel(key):
        return "not a QQ channel session (passive_scope channel)"
    if not cfg.compress.enabled:
        return "compress.enabled is false"
    if session.is_subagent and not cfg.compress.apply_to_subagents:
        return "subagent session (compress.applyToSubagents is false)"
    if not session.is_subagent and not cfg.compress.apply_to_main_sessions:
        return "main session (compress.applyToMainSessions is false)"
    return None


def passive_score_mode(
    cfg: MemoryConfig, compat: CompatStatus, key: str
) -> Literal["model", "heuristic"]:
    """How this session's new folders are scored (``engine.scoring.fallback.decide``'s
    two unconditional branches): heuristic at creation, or pending for the model."""
    if cfg.scoring.fallback == "always":
        return "heuristic"
    if compat.heuristic_scoring(key, cfg.compat.channel_score):
        return "heuristic"
    return "model"


def _answer(out: PassiveOutcome | None, outcome: str) -> dict[str, Any]:
    return {
        "outcome": out.outcome if out is not None else outcome,
        "folders": list(out.folder_ids) if out is not None else [],
        "messages": out.messages if out is not None else 0,
    }


async def session_event(
    app: App, params: SessionEventParams, ctx: RequestContext
) -> dict[str, Any]:
    """Archive the originals a foreign compaction shadowed (module docstring)."""
    compaction = compaction_of(params.event)
    if compaction is None:
        log.debug("session event ignored: not a compaction/summary", type=params.event.get("type"))
        return _answer(None, "not-a-compaction")
    if compaction.own:
        log.debug("session event ignored: our own compaction", compaction=compaction.compaction_id)
        return _answer(None, "own-provider")
    cfg = app.config.config
    key = app.sessions.key_for(params.session.id)
    why = passive_off_reason(app.passive_scope, cfg, app.compat.status, params.session, key)
    if why is not None:
        log.debug("passive archiving off for this session", session_key=key, reason=why)
        return _answer(None, "off")
    state = await app.sessions.get(params.session.id)
    mode = passive_score_mode(cfg, app.compat.status, state.key)
    inp = PassiveInput(
        session_id=params.session.id,
        event=params.event,
        shadowed=params.shadowed,
        now_ms=ctx.now_ms,
        cfg=cfg,
        archiver_version=ARCHIVER_VERSION,
        score_mode=mode,
        session_stats=lambda: session_term_stats(state, cfg),
        channel=onebot_channel(app.compat.status, state.key),  # §3.2.7 images, voice notes
    )
    with ctx.commit_guard():
        out = await anyio.to_thread.run_sync(lambda: archive_passive(state.store, inp))
    for kind, message in out.warnings:
        log.warning("passive archive warning", session_key=state.key, kind=kind, detail=message)
    if out.outcome == "archived":
        app.metrics.count("passive_archives")
        app.metrics.count("archived_folders", len(out.written))
        log.info(
            "passive archive",
            session_key=state.key,
            compaction=compaction.compaction_id,
            provider=compaction.provider,
            folders=len(out.folder_ids),
            written=len(out.written),
            messages=out.messages,
            score_mode=mode,
            already_archived=out.already_archived,
        )
    else:
        log.debug(
            "passive archive: nothing written",
            session_key=state.key,
            outcome=out.outcome,
            already_handled=out.already_handled,
        )
    return _answer(out, out.outcome)
