"""`agent/pre-step`, `archive/commit`, `archive/abort` (PROTOCOL.md §4; reference §1.1,
§1.1.1, §1.4, §1.7, §1.8, §6 "可恢复").

Order of a pre-step, and why:

1. switches and capabilities (no `tokenMeter` / `tools`: no automatic archiving);
2. an unreported archive whose whole span (seqs and message ids) is still on the
   surface is answered again as it is, same token and folders, even if the surface grew
   or a fresh plan would cut deeper: the host replays a pre-step whose answer it never
   got, and one archive never becomes two sets of folders (``handlers.archive_state``:
   the record survives restarts; an archive certainly never answered is rolled back at
   load instead, and the replay plans afresh). Answered archives whose span is gone
   from the surface have landed: final;
3. the pure plan (`engine.archive.plan`): guards, pass-0 re-archive of the recall
   block, passes, chunks, note; the scoring gate (`archive_gate`) may veto;
4. `commit_guard`, then in a worker thread: the durable ``planned`` record (span,
   folders and images to write, what undoes pass 0), re-archive (recall state,
   rescorePending), the store transaction (journal, folders, images, index; idempotency
   keys), the conservation check (written + already-archived == planned, else
   everything of this archive is rolled back and nothing is replaced), telemetry, the
   record turned ``answered``.

Everything before step 4 is cancellable and writes nothing. The answer is sent only
after the folders and the index are durable. Whatever reads the whole surface (its ids
for step 2, the plan of step 3 with its image checks) runs in a worker thread as well:
the event loop only awaits, so one session's 400-message pre-step never holds up
another session's answer.

A pre-step does only what its answer needs: below the trigger (most of them) nothing
reads the surface; the surface ids are taken only when an unreported archive could be
replayed (or for the record of a new one); image files are checked only when the plan
archives images. The task block of an archive's answer lists the new folders: their
readable texts are computed from the plan's messages while the store makes each folder
durable (``Transaction.while_syncing``), not read back from disk afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, ClassVar

import anyio
import structlog
from pydantic import Field, WrapValidator

from engine.archive import (
    PlannedFolder,
    PreStepInput,
    PreStepPlan,
    Switches,
    below_trigger,
    plan_pre_step,
    switch_off_reason,
)
from engine.archive.commit import archive_token, commit_plan
from engine.archive.image_check import image_kind
from engine.archive.telemetry import rearchive_record
from engine.compat.media import StagedMessage, staged_messages
from engine.config.model import MemoryConfig
from engine.content import image_blocks
from engine.recall_view import RecallBlockView
from engine.scoring.readable import ReadableText, readable_text
from engine.store import FolderNotFoundError, Transaction
from handlers.app import App
from handlers.archive_state import MAX_SETTLED, Outcome, PendingArchive, span_of, surface_ids
from handlers.context import RequestContext
from handlers.errors import INVALID_PARAMS, HandlerError, invalid_params
from handlers.media_staging import note_archived, onebot_channel, release_settled
from handlers.node_tokens import NodeTokenCounts
from handlers.params import (
    MAX_NODES,
    MAX_REASON_CHARS,
    SafeInt,
    Session,
    SurfaceNode,
    TokenCount,
    Wire,
)
from handlers.recall_state import ensure_recall_state
from handlers.scoring_policy import archive_gate
from handlers.sections import sections_answer
from handlers.sessions import SessionState
from handlers.validated_once import ValidatedOnce

log = structlog.get_logger("rofmd.archive")

__all__ = [
    "ArchiveAbortParams",
    "ArchiveCommitParams",
    "PreStepParams",
    "archive_abort",
    "archive_commit",
    "pre_step",
]

ONCE_PER_SESSION = frozenset(
    {"small-window", "fake-window", "hard-limit-stop", "capability", "release-floor-disabled"}
)
"""Warnings the reference says are given once per session (§1.1.1)."""


class ContextInfo(Wire):
    """`context` of a pre-step: the host token meter's view (``nodes``: seq -> tokens,
    ``handlers.node_tokens``)."""

    totalTokens: TokenCount
    contextWindow: TokenCount = 0
    nodes: NodeTokenCounts = Field(default_factory=dict)


KNOWN_SURFACE_NODES = ValidatedOnce()
"""Surface nodes already validated (``handlers.validated_once``): the host re-sends them
with every pre-step. Used by `PreStepParams.surface` alone: a node it remembers passed the
shape check at that very place, which is why ``parse_params`` skips it there."""


class PreStepParams(Wire):
    """`agent/pre-step` params; each surface node is checked against `SurfaceNodeShape`
    (once per distinct node: ``KNOWN_SURFACE_NODES``; the surface is looked up there as
    a whole, ``ValidatedOnce.each``)."""

    session: Session
    turn: SafeInt = 0
    step: SafeInt | None = None
    messages: list[Any] = Field(default_factory=list, max_length=MAX_NODES)
    context: ContextInfo | None = None
    surface: Annotated[
        list[Annotated[SurfaceNode, WrapValidator(KNOWN_SURFACE_NODES)]],
        WrapValidator(KNOWN_SURFACE_NODES.each(MAX_NODES)),
    ] = Field(default_factory=list, max_length=MAX_NODES)

    remembered: ClassVar[Mapping[str, ValidatedOnce]] = {"surface": KNOWN_SURFACE_NODES}
    """Lists looked up in their memory once per request (``handlers.params.parse_params``)."""


class ArchiveCommitParams(Wire):
    """`archive/commit` params."""

    session: Session
    token: str = Field(min_length=1, max_length=256)


class ArchiveAbortParams(ArchiveCommitParams):
    """`archive/abort` params."""

    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)


def _archiver_version() -> str:
    try:
        return f"rofmd-{metadata.version('rofmd')}"
    except metadata.PackageNotFoundError:
        return "rofmd-0+unknown"


ARCHIVER_VERSION = _archiver_version()


# ---- agent/pre-step ------------------------------------------------------------------


async def pre_step(app: App, params: PreStepParams, ctx: RequestContext) -> dict[str, Any]:
    """Archive when the context is over the trigger; answer the compaction and sections."""
    state = await app.sessions.get(params.session.id)
    await release_settled(app, state)  # onebot images staged for archives now final
    # pass 0 shrinks the recall block: make sure a block persisted before a restart is
    # loaded before the plan looks at it
    if state.recall is None:
        await ensure_recall_state(app, state)
    state.last_turn = params.turn
    if params.context is not None and params.context.contextWindow:
        # the window the recall caps and the task budget are sized by
        state.context_window = (
            app.config.config.compress.context_window_tokens or params.context.contextWindow
        )
    warnings: list[str] = []
    compaction = await _maybe_archive(app, state, params, ctx, warnings)
    answer: dict[str, Any] = {"compaction": compaction}
    answer.update(await sections_answer(app, state, ctx))
    answer["warnings"] = [*warnings, *state.damage.take_warnings()]  # handlers.damage
    return answer


def _warn(state: SessionState, warnings: list[str], key: str, message: str) -> None:
    if key in ONCE_PER_SESSION and not state.archive.warn_once(key):
        return
    warnings.append(message)
    log.warning("archive warning", session_key=state.key, kind=key, detail=message)


async def _maybe_archive(
    app: App,
    state: SessionState,
    params: PreStepParams,
    ctx: RequestContext,
    warnings: list[str],
) -> dict[str, Any] | None:
    cfg = app.config.config
    conn = ctx.connection
    reason = switch_off_reason(
        Switches(
            compress_enabled=cfg.compress.enabled,
            pre_step_enabled=cfg.compress.pre_step_enabled,
            is_subagent=params.session.is_subagent,
            apply_to_subagents=cfg.compress.apply_to_subagents,
            apply_to_main_sessions=cfg.compress.apply_to_main_sessions,
            token_meter=conn.capability("tokenMeter"),
            tools=conn.capability("tools"),
        )
    )
    if reason is not None:
        if "capability" in reason:
            _warn(state, warnings, "capability", f"automatic archiving off: {reason}")
        return None
    if params.context is None:
        return None
    ids: dict[int, str | None] | None = None
    if any(pend.phase == "answered" for pend in state.archive.pending.values()):
        # only an answered, unreported archive can be replayed or have landed
        ids = await anyio.to_thread.run_sync(surface_ids, params.surface)
        replay = await _replayed(state, ids, ctx)
        if replay is not None:
            log.info("pre-step replayed: same compaction answered", token=replay.token)
            return replay.compaction

    context = params.context
    if below_trigger(context.totalTokens, context.contextWindow, cfg):
        return None  # what the plan would say, known without reading the surface
    attachments = conn.capability("attachments")
    recall = state.recall
    candidates = list(recall.rearchive_candidates()) if recall is not None else None
    hard_stopped = state.archive.hard_stopped
    channel = onebot_channel(app.compat.status, state.key)  # §3.2.7 images and voice notes
    memory_root = app.memory_root()

    def plan_with(readable_images: dict[str, str], staged: dict[str, StagedMessage]) -> PreStepPlan:
        return plan_pre_step(
            PreStepInput(
                session_id=params.session.id,
                turn=params.turn,
                surface=params.surface,
                node_tokens=context.nodes,
                total_tokens=context.totalTokens,
                host_window=context.contextWindow,
                now_ms=ctx.now_ms,
                cfg=cfg,
                recall=candidates,
                readable_images=readable_images,
                attachments=attachments,
                hard_stopped=hard_stopped,
                channel=channel,
                staged_images=staged,
            )
        )

    def plan_it() -> PreStepPlan:
        # The plan reads image files' first bytes only for the images it archives: most
        # pre-steps archive none, and those pay for no file check (and no surface scan).
        plan = plan_with({}, {})
        readable: dict[str, str] = {}
        if attachments and plan.image_paths:
            found = _readable_images(params.surface)
            if any(path in found for path in plan.image_paths):
                readable = found
        staged: dict[str, StagedMessage] = {}
        if plan.image_message_ids:  # onebot images staged when their messages came
            staged = staged_messages(memory_root, state.key, plan.image_message_ids)
        if readable or staged:
            plan = plan_with(readable, staged)
        return plan

    plan = await anyio.to_thread.run_sync(plan_it)
    for key, message in plan.warnings:
        _warn(state, warnings, key, message)
    if plan.outcome == "below-trigger":
        return None
    if plan.outcome in ("archive", "rearchive-only"):
        gate = await archive_gate(app, state, ctx, under_pressure=plan.emergency)
        for w in gate.warnings:
            _warn(state, warnings, "scoring-gate", w)
        if not gate.allowed:
            return None
        listed = conn.capability("systemPrompt")  # this answer's task block lists them
        with ctx.commit_guard():
            compaction = await anyio.to_thread.run_sync(
                lambda: _commit(state, plan, params, ids, ctx.now_ms, cfg, warnings, listed)
            )
        if compaction is not None:
            note_archived(app, state.key, compaction["token"], plan.staged_dirs)
            app.metrics.count("archives")
            app.metrics.count("archived_folders", len(compaction.get("folders") or ()))
    else:
        compaction = None
    if not plan.guarded:
        _track_pressure(state, plan, compaction is not None, cfg, warnings)
    return compaction


async def _replayed(
    state: SessionState, ids: dict[int, str | None], ctx: RequestContext
) -> PendingArchive | None:
    """The unreported archive this pre-step replays, if any; archives whose span has left
    the surface are final (their replacement landed, the commit was lost)."""
    ast = state.archive
    live, gone = ast.classify(ids)
    if gone:
        store = state.store

        def settle() -> None:
            for pend, status in gone:
                store.finalize(pend.token)
                ast.settle(pend.token, "landed")
                if status == "partial":
                    log.warning(
                        "unreported archive partly gone from the surface: kept",
                        session_key=state.key,
                        token=pend.token,
                    )

        with ctx.commit_guard():
            await anyio.to_thread.run_sync(settle)
    return live


def _track_pressure(
    state: SessionState,
    plan: PreStepPlan,
    archived: bool,
    cfg: MemoryConfig,
    warnings: list[str],
) -> None:
    """Hard-limit stop: two pressure episodes in a row still above hardLimitPercent."""
    after = plan.percent_after if archived else plan.percent_before
    if plan.outcome == "rearchive-only":
        after = plan.percent_after
    ast = state.archive
    if after > cfg.compress.hard_limit_percent:
        ast.pressure_failures += 1
    else:
        ast.pressure_failures = 0
    if cfg.compress.hard_limit_stop and ast.pressure_failures >= 2 and not ast.hard_stopped:
        ast.hard_stopped = True
        _warn(
            state,
            warnings,
            "hard-limit-stop",
            f"automatic archiving stopped for this session: the context stayed above"
            f" compress.hardLimitPercent {cfg.compress.hard_limit_percent:g}% for two pressure"
            " episodes (compress.hardLimitStop)",
        )


def _readable_images(surface: list[dict[str, Any]]) -> dict[str, str]:
    """Host paths of the surface's images that are images by their first bytes, within
    the size limit (only those are copied). Blocking: reads their first bytes."""
    paths: set[str] = set()
    for node in surface:
        msg = node.get("message")
        content = msg.get("content") if isinstance(msg, Mapping) else None
        for image in image_blocks(content):
            path = image.host_path
            if path is not None and os.path.isabs(path):
                paths.add(path)
    kinds = {p: image_kind(Path(p)) for p in paths}
    return {p: kind for p, kind in kinds.items() if kind is not None}


# ---- the commit (worker thread) ------------------------------------------------------


def _commit(
    state: SessionState,
    plan: PreStepPlan,
    params: PreStepParams,
    ids: dict[int, str | None] | None,
    now_ms: int,
    cfg: MemoryConfig,
    warnings: list[str],
    listed: bool = False,
) -> dict[str, Any] | None:
    """Write the plan; ``listed``: the answer will list the new folders in its task block,
    whose readable texts are then computed while the folders are being made durable."""
    store = state.store
    rearchive = plan.rearchive
    recall = state.recall
    rearchiving = rearchive is not None and rearchive.any and recall is not None
    if not plan.archives:
        if rearchiving:
            to_mark, missing = _rearchive_marks(state, plan)
            _apply_rearchive(state, plan, params.turn, now_ms, warnings, to_mark, missing)
        return None
    ast = state.archive
    token, ast.tokens_issued = archive_token(store, now_ms, plan.content_hash, ast.tokens_issued)
    while token in ast.pending or token in ast.settled:  # never a token the host saw
        token, ast.tokens_issued = archive_token(
            store, now_ms, plan.content_hash, ast.tokens_issued
        )
    snapshot: object | None = None
    marked: list[str] = []
    applied = False

    def before_write(txn: Transaction) -> None:
        # durable before anything else: a crash from here on is undone at load
        nonlocal snapshot, marked, applied
        missing: list[str] = []
        if rearchiving:
            assert recall is not None
            snapshot = recall.snapshot()
            marked, missing = _rearchive_marks(state, plan)
        ast.begin(
            PendingArchive(
                token=token,
                span=span_of(
                    plan.shadowed_seqs, ids if ids is not None else surface_ids(params.surface)
                ),
                journal=txn.record(),
                recall_snapshot=snapshot,
                recall=recall if rearchiving else None,
                rescore_marked=marked,
                turn=params.turn,
            )
        )
        if rearchiving:
            applied = True
            _apply_rearchive(state, plan, params.turn, now_ms, warnings, marked, missing)

    texts: dict[int, ReadableText] = {}

    def readable_text_of(folder: PlannedFolder) -> None:
        texts[folder.ordinal] = readable_text(folder.messages)

    try:
        out = commit_plan(
            store,
            plan,
            cfg=cfg,
            token=token,
            now_ms=now_ms,
            turn=params.turn,
            step=params.step,
            archiver_version=ARCHIVER_VERSION,
            before_write=before_write,
            while_syncing=readable_text_of if listed else None,
        )
        for key, message in out.warnings:
            _warn(state, warnings, key, message)
        if not out.ok:
            _abandon(state, token, snapshot if applied else None, marked)
            store.append_stats(out.record)
            return None
        store.append_stats(out.record)
        folder_ids, written = out.folder_ids, out.written
        # what readable_for would read back from each new folder's context.json
        fresh = set(written)
        for fid, folder in zip(folder_ids, plan.folders, strict=True):
            text = texts.get(folder.ordinal)
            if fid in fresh and text is not None:
                state.scoring_texts[fid] = text
        compaction: dict[str, Any] = {
            "token": token,
            "replace": {"startSeq": plan.start_seq, "endSeq": plan.end_seq},
            "shadowedSeqs": plan.shadowed_seqs,
            "shadowedTokenCount": plan.shadowed_tokens,
            "checkpoint": {"content": [{"type": "text", "text": plan.note}]},
            "folders": folder_ids,
        }
        # from here the answer may reach the host: the record says so first
        dropped = ast.answered(token, folder_ids, compaction)
    except BaseException:
        # not answered (a failed write, a bug): nothing of it may stay, or a replay would
        # archive the same messages again
        pend = ast.pending.get(token)
        if pend is not None and pend.phase == "planned":
            _abandon(state, token, snapshot if applied else None, marked)
        raise
    for old in dropped:
        store.finalize(old.token)
    log.info(
        "archived",
        session_key=state.key,
        token=token,
        folders=len(folder_ids),
        written=len(written),
        already=len(out.skipped_ids),
        before_percent=round(plan.percent_before, 1),
        after_percent=round(plan.percent_after, 1),
    )
    return compaction


def _abandon(state: SessionState, token: str, snapshot: object | None, marked: list[str]) -> None:
    """A planned archive that will not be answered: undo pass 0, forget the record."""
    ast = state.archive
    if token in state.store.committed_transactions():
        state.store.rollback_committed(token)
    if snapshot is not None:
        _undo_rearchive(state, state.recall, snapshot, marked)
    ast.discard(token)


def _rearchive_marks(state: SessionState, plan: PreStepPlan) -> tuple[list[str], list[str]]:
    """Pass 0: (recalled folders to mark rescorePending, ids with no folder any more)."""
    assert plan.rearchive is not None
    store = state.store
    rescore = plan.rearchive.rescore
    missing = [fid for fid in rescore if fid not in store]
    to_mark = [fid for fid in rescore if fid in store and not store.get_entry(fid).rescorePending]
    return to_mark, missing


def _apply_rearchive(
    state: SessionState,
    plan: PreStepPlan,
    turn: int,
    now_ms: int,
    warnings: list[str],
    to_mark: list[str],
    missing: list[str],
) -> None:
    """Pass 0 on the recall block: shrink it, mark ``to_mark`` rescorePending."""
    recall = state.recall
    assert recall is not None and plan.rearchive is not None
    rp = plan.rearchive
    recall.remove_for_rearchive(rp.removed, rp.recycle_high, turn)
    store = state.store
    if to_mark:
        store.update_metas({fid: {"rescorePending": True} for fid in to_mark})
    for fid in missing:
        _warn(
            state,
            warnings,
            "rearchive-missing",
            f"re-archived recall {fid} has no folder any more: removed from the block only",
        )
    store.append_stats(
        rearchive_record(
            now_ms=now_ms,
            turn=turn,
            removed_ids=rp.removed,
            recycled_high=rp.recycle_high,
            removed_tokens=rp.removed_tokens,
            target_tokens=rp.target_tokens,
            before_percent=plan.percent_before,
            emergency=plan.emergency,
            missing=missing,
        )
    )
    state.request_new_series()


def _undo_rearchive(
    state: SessionState, recall: RecallBlockView | None, snapshot: object, marked: list[str]
) -> None:
    if recall is not None:
        recall.restore(snapshot)
        state.request_new_series()
    present = [fid for fid in marked if fid in state.store]
    if present:
        state.store.update_metas({fid: {"rescorePending": None} for fid in present})


# ---- archive/commit, archive/abort ---------------------------------------------------
# Both answer from the durable record (handlers.archive_state), so a report re-sent after
# a lost answer or a restart gets the answer the first one got or would have got.

_REFUSED: dict[tuple[str, Outcome], tuple[str, str]] = {
    ("archive/commit", "aborted"): (
        "archive token already aborted",
        "its folders were rolled back; nothing of it is kept",
    ),
    ("archive/commit", "unanswered"): (
        "archive token never answered",
        "the daemon stopped before answering the pre-step and rolled the archive back;"
        " nothing of it is kept",
    ),
    ("archive/abort", "committed"): (
        "archive token already committed",
        "the archive is final and its folders are kept",
    ),
    ("archive/abort", "landed"): (
        "archive token already committed",
        "its span left the surface (the replacement landed): the archive is final",
    ),
    ("archive/abort", "kept"): (
        "archive token already committed",
        "the archive was finalized and its folders are kept",
    ),
}
"""Reports a settled archive refuses (-32602), by method and outcome; ``data.outcome``
tells the host a settled token from a wrong one."""


def _unknown_token(token: str) -> HandlerError:
    why = "unknown archive token"
    return invalid_params(
        [
            {
                "field": "token",
                "message": f"{why} {token!r}: never issued for this session, or settled"
                f" longer ago than the last {MAX_SETTLED} archives",
            }
        ],
        message=why,
    )


def _refused(method: str, token: str, outcome: Outcome) -> HandlerError:
    why, detail = _REFUSED[(method, outcome)]
    return HandlerError(
        INVALID_PARAMS,
        why,
        {
            "errors": [{"field": "token", "message": f"{why} {token!r}: {detail}"}],
            "outcome": outcome,
        },
    )


async def archive_commit(
    app: App, params: ArchiveCommitParams, ctx: RequestContext
) -> dict[str, Any]:
    """The host's replacement landed: the archive is final. A re-sent commit (its answer
    was lost, before a restart or after one) is answered again."""
    state = await app.sessions.get(params.session.id)
    ast = state.archive
    store = state.store
    token = params.token
    pend = ast.pending.get(token)
    if pend is not None and pend.phase != "answered":
        # an abort cut short (finished by a re-sent abort or at load), or an archive
        # whose answer never left: what the record becomes after a restart
        raise _refused(
            "archive/commit", token, "aborted" if pend.phase == "aborting" else "unanswered"
        )
    if pend is None:
        # the record decides, as it does after a restart
        done = ast.settled.get(token)
        if done is not None:
            if not done.kept:
                raise _refused("archive/commit", token, done.outcome)
            return {"ok": True}
        if token not in store.committed_transactions():
            raise _unknown_token(token)

    def commit() -> None:
        store.finalize(token)
        ast.settle(token, "committed")

    with ctx.commit_guard():
        await anyio.to_thread.run_sync(commit)
    await release_settled(app, state)
    return {"ok": True}


async def archive_abort(
    app: App, params: ArchiveAbortParams, ctx: RequestContext
) -> dict[str, Any]:
    """The host could not apply the replacement: remove exactly what the archive wrote,
    whenever it was written (before a restart too); ``rolledBack`` lists it. A re-sent
    abort, or one of an archive already rolled back (an abort finished at load, an
    archive never answered), answers the same folders with ``alreadyRolledBack``."""
    state = await app.sessions.get(params.session.id)
    ast = state.archive
    token = params.token
    pend = ast.pending.get(token)
    store = state.store
    if pend is None:
        # the record decides, as it does after a restart
        done = ast.settled.get(token)
        if done is not None:
            if done.kept:
                raise _refused("archive/abort", token, done.outcome)
            return {"ok": True, "rolledBack": list(done.rolled_back), "alreadyRolledBack": True}
        if token not in store.committed_transactions():
            raise _unknown_token(token)
    recall = pend.recall if pend is not None else None
    if pend is not None and pend.recall_snapshot is not None and recall is None:
        # reinstated after a restart: restore into the session's recall state
        recall = await ensure_recall_state(app, state)

    def rollback() -> list[str]:
        removed: list[str] = []
        if pend is not None:
            ast.aborting(token)  # a crash from here on: the load finishes the abort
        if token in store.committed_transactions():
            removed = store.rollback_committed(token)
        if pend is not None:
            # everything this token wrote, also what an abort cut short already removed
            removed = pend.written
        if pend is not None and pend.recall_snapshot is not None:
            _undo_rearchive(state, recall, pend.recall_snapshot, pend.rescore_marked)
        store.append_stats(
            {
                "type": "archive-abort",
                "time": ctx.now_ms,
                "token": token,
                "reason": params.reason,
                "rolledBack": removed,
            }
        )
        ast.settle(token, "aborted", removed)
        return removed

    with ctx.commit_guard():
        try:
            removed = await anyio.to_thread.run_sync(rollback)
        except FolderNotFoundError:  # pragma: no cover - defensive
            ast.settle(token, "aborted")
            removed = []
    log.info("archive aborted", session_key=state.key, token=token, removed=len(removed))
    return {"ok": True, "rolledBack": removed}
