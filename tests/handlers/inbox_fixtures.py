"""What handler tests of `agent/inbox/inserted` send: a user message, and a session of a
few folders about one topic (星港项目) to recall from."""

from __future__ import annotations

from typing import Any

from engine.store import SessionStore
from tests.engine.recall_fixtures import BASE_MS, write_folders
from tests.rofmd.eviction_harness import Core


def user_message(sid: str, text: str, mid: str, time_ms: int) -> dict[str, Any]:
    """The params of `agent/inbox/inserted` for user message `mid` of session `sid`."""
    message = {
        "id": mid,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return {"session": {"id": sid}, "message": message, "time": time_ms}


async def session_with_folders(c: Core, sid: str, count: int) -> SessionStore:
    """Open session `sid` (a request that answers sections) and write `count` folders,
    each keyed 星港项目 and 词<i>, a minute apart from `BASE_MS`; its store."""
    await c.call("prompt/sections", {"session": {"id": sid}})
    state = await c.app.sessions.get(sid)
    folders = [
        {
            "createdAt": BASE_MS + i * 60_000,
            "alpha": 0.8,
            "keywords": ["星港项目", f"词{i}"],
            "messages": [{"role": "user", "content": f"星港项目第{i}条，昨天定的"}],
        }
        for i in range(count)
    ]
    write_folders(state.store, folders)
    return state.store
