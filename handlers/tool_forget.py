"""`memory_forget` over `tools/call` (beyond the reference; README "Forgetting").

The user stays in control of what is remembered: the model, asked to forget something,
suppresses a memory in this session (kept on disk, never recalled again here: the
candidate index every recall path uses leaves it out, `handlers.recall_state`) or
deletes it (`engine.recall.forget.delete_folders`: through the commit journal). Either
way it leaves the current recall block at once, and the host is asked for a new request
series so the system prompt follows. ``keywords`` alone previews candidates and writes
nothing. `rofmd forget` calls this same tool over the socket.

Writes (inside the commit guard, in a worker thread): `memory-control.json`, the recall
state, the store (delete), one `forget` telemetry record (ids and counts, never text).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from engine import texts
from engine.recall.dates import format_datetime, resolve_timezone
from engine.recall.forget import (
    ForgetCall,
    Targets,
    delete_folders,
    parse_forget_arguments,
    remove_from_block,
    resolve_targets,
)
from engine.recall.search import keyword_query
from engine.recall.state import RecallState
from engine.relevance.folder_text import snapshot_due
from engine.secrets.detect import has_secret
from engine.store import StoreError
from engine.store.folders import CONTEXT_FILE
from handlers.context import RequestContext
from handlers.forget import ensure_hygiene
from handlers.recall_state import candidate_index, ensure_recall_state, relevance_index
from handlers.relevance_snapshots import WRITER
from handlers.tool_base import Tool, ToolRequest, ToolResult
from handlers.tool_schema import object_schema, string_list_schema, string_schema

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.forget")

NAME = "memory_forget"
PREVIEW_LIMIT = 10

PARAMETERS = object_schema(
    {
        "ids": string_list_schema(texts.FORGET_PARAM_IDS),
        "recalled": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1},
            "description": texts.FORGET_PARAM_RECALLED,
        },
        "keywords": string_schema(texts.FORGET_PARAM_KEYWORDS),
        "action": string_schema(texts.FORGET_PARAM_ACTION, enum=("suppress", "delete")),
    }
)


def _join(items: list[str]) -> str:
    return texts.FORGET_ITEM_SEPARATOR.join(items)


def _items(state: SessionState, ids: list[str], titles: dict[str, str] | None = None) -> str:
    def title(fid: str) -> str:
        if titles is not None and fid in titles:
            return titles[fid]
        with contextlib.suppress(KeyError, StoreError):
            return str(state.store.get_entry(fid).title or "")
        return ""

    return _join([texts.FORGET_ITEM.format(id=fid, title=title(fid)) for fid in ids])


def _misses(targets: Targets) -> list[str]:
    lines = []
    if targets.unknown:
        lines.append(texts.FORGET_UNKNOWN.format(ids=_join(targets.unknown)))
    if targets.bad_numbers:
        lines.append(
            texts.FORGET_BAD_RECALLED.format(numbers=_join([str(n) for n in targets.bad_numbers]))
        )
    return lines


@dataclass
class _Preview:
    rows: list[dict[str, Any]]


def _preview(app: App, state: SessionState, call: ForgetCall) -> _Preview:
    """Candidates for the keywords, best first (blocking). Suppressed ones are not
    candidates at all (the index leaves them out)."""
    cfg = app.config.config
    index = candidate_index(state, cfg)
    matches = index.match(keyword_query(call.keywords, cfg))
    folders = index.folders
    order = sorted(
        matches.candidates,
        key=lambda n: (-matches.hits.get(n, 0), -folders[n].created_at, folders[n].id),
    )[:PREVIEW_LIMIT]
    tz = resolve_timezone(cfg.time.timezone)
    rows = []
    # the candidates' files asked of the disk at once (engine.store.folders.read_ahead)
    with state.store.read_ahead((folders[n].id for n in order), [CONTEXT_FILE]) as ahead:
        for n in order:
            fid = folders[n].id
            snippet = ""
            with contextlib.suppress(StoreError, OSError, KeyError):
                for message in state.store.read_context(fid, ahead):
                    content = message.get("content")
                    if isinstance(content, str) and content.strip():
                        cut = texts.FORGET_PREVIEW_SNIPPET_CHARS
                        snippet = " ".join(content.split())[:cut]
                        break
            rows.append(
                {
                    "id": fid,
                    "title": str(state.store.get_entry(fid).title or ""),
                    "date": format_datetime(folders[n].created_at, tz),
                    "snippet": snippet,
                }
            )
    return _Preview(rows)


def _render_preview(call: ForgetCall, preview: _Preview) -> ToolResult:
    keywords = texts.RECALL_TOOL_KEYWORD_SEPARATOR.join(call.keywords)
    value = {"action": "preview", "candidates": preview.rows}
    if not preview.rows:
        return ToolResult(value, texts.FORGET_PREVIEW_NONE.format(keywords=keywords))
    lines = [texts.FORGET_PREVIEW_HEADING.format(keywords=keywords)]
    for i, row in enumerate(preview.rows, start=1):
        lines.append(texts.FORGET_PREVIEW_ITEM.format(n=i, **row))
    lines.append(texts.FORGET_PREVIEW_HINT)
    return ToolResult(value, "\n".join(lines))


def _forget_token(state: SessionState, now_ms: int) -> str:
    store = state.store
    n = 1
    while True:
        token = f"forget-{now_ms:x}-{n}"
        if token not in store.committed_transactions() and not store.paths.journal(token).exists():
            return token
        n += 1


async def memory_forget(request: ToolRequest) -> ToolResult:
    """Run one memory_forget call (module docstring)."""
    app, state, ctx = request.app, request.state, request.ctx
    call = parse_forget_arguments(request.arguments)
    if call.problems:
        text = texts.FORGET_BAD_ARGUMENTS.format(
            problems=texts.FORGET_ARG_SEPARATOR.join(call.problems)
        )
        return ToolResult({"error": list(call.problems)}, text, is_error=True)
    if not call.ids and not call.recalled and not call.keywords:
        return ToolResult({"error": "no target"}, texts.FORGET_NEED_TARGET, is_error=True)
    cfg = app.config.config
    if call.preview:
        if cfg.secrets.mode != "off" and has_secret("\n".join(call.keywords)):
            return ToolResult({"error": "secret"}, texts.RECALL_TOOL_SECRET_QUERY, is_error=True)
        preview = await anyio.to_thread.run_sync(lambda: _preview(app, state, call))
        return _render_preview(call, preview)
    rs = await ensure_recall_state(app, state)
    hygiene = await ensure_hygiene(state)
    targets = resolve_targets(call, rs, state.store)
    misses = _misses(targets)
    if not targets.ids:
        nothing = {
            "action": call.action,
            "unknown": targets.unknown,
            "badRecalled": targets.bad_numbers,
        }
        return ToolResult(nothing, "\n".join([*misses, texts.FORGET_NOTHING]), is_error=True)
    if call.action == "delete":
        return await _delete(app, state, rs, targets, misses, ctx)
    now = ctx.now_ms
    ids = targets.ids

    def suppress() -> tuple[list[str], int]:
        before = dict(hygiene.suppressed)
        new = hygiene.suppress(ids, now)
        try:
            hygiene.save()
        except BaseException:
            hygiene.suppressed = before
            raise
        if new:
            state.recall_index = None  # rebuilt without them on the next recall
        removed = remove_from_block(rs, ids, forget=False)
        _record(state, "suppress", ids, removed, now)
        return new, removed

    with ctx.commit_guard():
        new, removed = await anyio.to_thread.run_sync(suppress)
    if removed:
        state.request_new_series()
    already = [fid for fid in ids if fid not in new]
    lines = []
    if new:
        lines.append(texts.FORGET_SUPPRESSED.format(n=len(new), items=_items(state, new)))
    if already:
        lines.append(texts.FORGET_ALREADY.format(ids=_join(already)))
    if removed:
        lines.append(texts.FORGET_BLOCK_UPDATED.format(n=removed))
    lines.extend(misses)
    log.info("memory_forget", session_key=state.key, action="suppress", ids=ids)
    value: dict[str, Any] = {
        "action": "suppress",
        "suppressed": new,
        "already": already,
        "blockRemoved": removed,
        "unknown": targets.unknown,
        "badRecalled": targets.bad_numbers,
    }
    return ToolResult(value, "\n".join(lines))


async def _delete(
    app: App,
    state: SessionState,
    rs: RecallState,
    targets: Targets,
    misses: list[str],
    ctx: RequestContext,
) -> ToolResult:
    hygiene = await ensure_hygiene(state)
    now = ctx.now_ms
    titles = {fid: str(state.store.get_entry(fid).title or "") for fid in targets.ids}

    def delete() -> tuple[list[str], int]:
        gone = delete_folders(state.store, targets.ids, _forget_token(state, now))
        for fid in gone:
            state.scoring_texts.pop(fid, None)
        if any(fid in hygiene.suppressed for fid in gone):
            hygiene.drop(gone)
            hygiene.save()
        removed = remove_from_block(rs, gone, forget=True)
        _record(state, "delete", gone, removed, now)
        if gone and state.relevance_index is not None:
            # the relevance index forgets them now, and so does its snapshot, soon
            index = relevance_index(state, app.config.config)
            if snapshot_due(index, unloading=True):
                WRITER.request(index)
        return gone, removed

    try:
        with ctx.commit_guard():
            gone, removed = await anyio.to_thread.run_sync(delete)
    except (StoreError, OSError) as exc:
        log.warning("memory_forget delete failed", session_key=state.key, error=str(exc))
        text = texts.FORGET_DELETE_FAILED.format(reason=exc)
        return ToolResult(
            {"action": "delete", "deleted": [], "error": str(exc)}, text, is_error=True
        )
    if removed:
        state.request_new_series()
    lines = [texts.FORGET_DELETED.format(n=len(gone), items=_items(state, gone, titles))]
    if removed:
        lines.append(texts.FORGET_BLOCK_UPDATED.format(n=removed))
    lines.extend(misses)
    log.info("memory_forget", session_key=state.key, action="delete", ids=gone)
    value: dict[str, Any] = {
        "action": "delete",
        "deleted": gone,
        "blockRemoved": removed,
        "unknown": targets.unknown,
        "badRecalled": targets.bad_numbers,
    }
    return ToolResult(value, "\n".join(lines))


def _record(state: SessionState, action: str, ids: list[str], removed: int, now_ms: int) -> None:
    """One telemetry line: what was forgotten, by id (never its text)."""
    try:
        state.store.append_stats(
            {
                "type": "forget",
                "time": now_ms,
                "action": action,
                "ids": ids,
                "blockRemoved": removed,
            }
        )
    except OSError as exc:  # telemetry never fails the call
        log.warning("memory_forget telemetry not written", error=str(exc))


TOOL = Tool(
    name=NAME, description=texts.FORGET_DESCRIPTION, parameters=PARAMETERS, handler=memory_forget
)
