"""A request that loaded part of a session (its store, its recall index, its relevance
index) asks, once it ended, for the load's peak to be given back
(`SessionRegistry.on_loaded`, wired to `rofmd.server.memory_release`'s trim); a request
that loaded nothing new does not."""

from __future__ import annotations

from pathlib import Path

from handlers.sessions import SessionRegistry


async def test_each_new_part_of_a_session_asks_for_one_trim(tmp_path: Path) -> None:
    registry = SessionRegistry(lambda: tmp_path, lambda: True)
    calls: list[str] = []
    registry.on_loaded = lambda: calls.append("trim")
    state = await registry.get("s1")
    registry.touch(state.key, 1)
    assert calls == ["trim"]  # the store
    registry.touch(state.key, 2)
    assert calls == ["trim"]  # nothing new
    state.recall_index = object()
    registry.touch(state.key, 3)
    state.relevance_index = object()
    registry.touch(state.key, 4)
    registry.touch(state.key, 5)
    assert calls == ["trim"] * 3
    # an index rebuilt or dropped and made again is no new part
    state.recall_index = None
    registry.touch(state.key, 6)
    state.recall_index = object()
    registry.touch(state.key, 7)
    assert calls == ["trim"] * 3
    registry.touch("not-loaded", 8)
    assert calls == ["trim"] * 3
