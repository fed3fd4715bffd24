"""`memory_image` over `tools/call` (reference "工具 memory_image", §1.7).

The model finds archived image files by memory keyword / title / file name, memory id
or file-name substring, and reads them with its own `read_image`. The tool is read-only:
the one file it may write is `images/index.json`, the derived image table, when it is
missing (old data, "旧数据首次查询时惰性重建") or stale against the index and the files
in `images/` (`engine.store.images.is_stale`); that rebuild runs inside the commit guard,
so a cancelled call either wrote nothing or finished it. Everything that touches the
disk or walks the table runs in a worker thread. Only the calling session's store is
searched: another session's memory id is an unknown id, a refusal (PROTOCOL.md §4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import structlog

from engine import texts
from engine.image_tool import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    ImageCall,
    parse_arguments,
    refusal,
    render_answer,
)
from engine.recall.dates import resolve_timezone
from engine.store.image_lookup import ImageLookup, find_images
from engine.store.images import image_files
from handlers.tool_base import Tool, ToolRequest, ToolResult
from handlers.tool_schema import integer_schema, object_schema, string_schema

if TYPE_CHECKING:
    from handlers.app import App
    from handlers.sessions import SessionState

log = structlog.get_logger("rofmd.tool_image")

NAME = "memory_image"

PARAMETERS = object_schema(
    {
        "query": string_schema(texts.IMAGE_PARAM_QUERY),
        "memoryId": string_schema(texts.IMAGE_PARAM_MEMORY_ID),
        "name": string_schema(texts.IMAGE_PARAM_NAME),
        "limit": integer_schema(
            texts.IMAGE_PARAM_LIMIT, minimum=1, maximum=MAX_LIMIT, default=DEFAULT_LIMIT
        ),
    }
)


def _listing(state: SessionState) -> tuple[frozenset[str], bool]:
    """The image files on disk, and whether the table is current against them."""
    store = state.store
    files = image_files(store.paths) if store.materialized else frozenset[str]()
    return files, store.image_index_current(files)


def _refresh(state: SessionState, files: frozenset[str]) -> None:
    try:
        if state.store.refresh_image_index(files):
            log.info("images index rebuilt", session_key=state.key, reason="stale")
    except OSError as exc:
        # derived data: the table is rebuilt in memory and answers this call; writing it
        # back is retried by the next call
        log.warning("images index not written", session_key=state.key, error=str(exc))


def _lookup(app: App, state: SessionState, call: ImageCall) -> ImageLookup:
    assert call.filter is not None
    return find_images(state.store, call.filter, app.config.config)


async def memory_image(request: ToolRequest) -> ToolResult:
    """Run one memory_image call."""
    app, state, ctx = request.app, request.state, request.ctx
    call = parse_arguments(request.arguments)
    if call.filter is None:
        answer = refusal(call)
        return ToolResult.of(answer, is_error=True)
    files, current = await anyio.to_thread.run_sync(lambda: _listing(state))
    if not current:
        with ctx.commit_guard():
            await anyio.to_thread.run_sync(lambda: _refresh(state, files))
    lookup = await anyio.to_thread.run_sync(lambda: _lookup(app, state, call))
    cfg = app.config.config
    answer = render_answer(
        call,
        lookup,
        tz=resolve_timezone(cfg.time.timezone),
        compute_dates=bool(cfg.recall.compute_dates),
    )
    return ToolResult.of(answer)


TOOL = Tool(
    name=NAME, description=texts.IMAGE_DESCRIPTION, parameters=PARAMETERS, handler=memory_image
)
