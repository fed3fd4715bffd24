"""A session's long-lived data is made with the collector paused and frozen after;
unloading a session thaws everything, so the next full collection frees what of it only
the collector can free, and the memory release freezes what survives
(`handlers.long_lived`, `rofmd.server.memory_release`)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

from engine.store import open_session
from handlers.long_lived import long_lived
from handlers.relevance_snapshots import WRITER
from rofmd.server.memory_release import release_memory
from tests.engine.recall_fixtures import BASE_MS, write_folders
from tests.rofmd.eviction_harness import core

pytestmark = pytest.mark.anyio

SID = "long-lived"
TOPICS = ["星港项目网关", "灰度比例", "杭州旅行", "预算会议"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _inbox(mid: str, text: str) -> dict[str, Any]:
    return {
        "session": {"id": SID},
        "message": {
            "id": mid,
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        "time": BASE_MS + 10**7,
    }


def test_inside_nothing_is_collected_and_after_it_everything_is_frozen() -> None:
    assert gc.isenabled()
    before = gc.get_freeze_count()
    with long_lived():
        assert not gc.isenabled()
        made = [[n] for n in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)
    gc.unfreeze()


@pytest.mark.parametrize("mode", ["ranked", "fair"])
async def test_an_unloaded_session_is_thawed_and_freed(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "mem"
    store = open_session(root, SID)
    write_folders(
        store,
        [
            {
                "createdAt": BASE_MS + n * 60_000,
                "keywords": [TOPICS[n % 4], f"编号{n}"],
                "messages": [{"role": "user", "content": f"{TOPICS[n % 4]}的第{n}次讨论"}],
            }
            for n in range(40)
        ],
    )
    del store
    async with core(root, tree={"recall": {"mode": mode}}) as c:
        frozen = gc.get_freeze_count()
        answer = await c.call("agent/inbox/inserted", _inbox("m1", "星港项目网关和灰度比例"))
        assert answer["recalled"]
        assert gc.get_freeze_count() > frozen  # the session's data went to the frozen set
        state = c.app.sessions._sessions[SID]
        refs = [weakref.ref(state.store), weakref.ref(state.recall_index), weakref.ref(state)]
        if mode == "ranked":
            refs.append(weakref.ref(state.relevance_index))
        del state
        c.notify("agent/disposed", {"session": {"id": SID}})
        await c.call("ping", {})
        assert WRITER.flush(30)
        assert gc.get_freeze_count() == 0  # thawed: a collection sees the session again
        gc.collect()
        assert [r() for r in refs] == [None] * len(refs)
        release_memory(None)
        assert gc.get_freeze_count() > 0  # what survived the release's collection
    gc.unfreeze()
