"""archive_gate and the rounds counter, against a real store (no socket)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.store import open_session
from handlers.context import RequestContext
from handlers.scoring_policy import archive_gate
from handlers.tasks_section import tasks_section_text, window_tokens
from tests.engine.scoring_fixtures import BASE_MS, user, write_pending
from tests.handlers.app_fixtures import count_hops, make_app, request_ctx


def ctx(method: str = "agent/pre-step") -> RequestContext:
    return request_ctx(method, BASE_MS + 10**6)


def seed(tmp_path: Path, session: str, n: int) -> list[str]:
    store = open_session(tmp_path, session)
    return write_pending(store, [(f"t{i}", [user(f"我决定用方案 {i}")]) for i in range(n)])


async def test_never_pauses_archiving(tmp_path: Path) -> None:
    seed(tmp_path, "s-never", 4)
    app = make_app(tmp_path, {"scoring": {"fallback": "never", "maxPending": 3}})
    state = await app.sessions.get("s-never")
    gate = await archive_gate(app, state, ctx(), under_pressure=True)
    assert not gate.allowed and "archiving paused" in gate.warnings[0]
    assert all(not e.scored for e in state.store.index)
    app2 = make_app(tmp_path, {"scoring": {"fallback": "never", "maxPending": 4}})
    state2 = await app2.sessions.get("s-never")
    assert (await archive_gate(app2, state2, ctx(), under_pressure=False)).allowed


async def test_pressure_scores_heuristically(tmp_path: Path) -> None:
    seed(tmp_path, "s-pressure", 3)
    app = make_app(tmp_path, {})
    state = await app.sessions.get("s-pressure")
    quiet = await archive_gate(app, state, ctx(), under_pressure=False)
    assert quiet.allowed and quiet.warnings == ()
    assert not state.new_series_pending
    gate = await archive_gate(app, state, ctx(), under_pressure=True)
    assert gate.allowed and "heuristic scoring (pressure): 3" in gate.warnings[0]
    assert all(e.scored and e.scoreMode == "heuristic" and e.beta == 0 for e in state.store.index)
    assert state.new_series_pending


async def test_rounds_without_judging_fall_back(tmp_path: Path) -> None:
    seed(tmp_path, "s-rounds", 2)
    app = make_app(tmp_path, {"scoring": {"autoHeuristicAfterRounds": {"plain": 2}}})
    state = await app.sessions.get("s-rounds")
    assert "id=mem-" in await tasks_section_text(app, state, ctx("agent/inbox/inserted"))
    assert state.scoring_rounds_unjudged == 1
    assert "id=mem-" in await tasks_section_text(app, state, ctx("tools/call"))
    assert state.scoring_rounds_unjudged == 1
    assert await tasks_section_text(app, state, ctx("agent/inbox/inserted")) == ""
    assert state.scoring_rounds_unjudged == 0
    assert all(e.scoreMode == "heuristic" for e in state.store.index)


async def test_channel_score_heuristic(tmp_path: Path) -> None:
    seed(tmp_path, "qqb-g-123456", 2)
    app = make_app(tmp_path, {"compat": {"qqBots": "on", "channelScore": "heuristic"}})
    state = await app.sessions.get("qqb-g-123456")
    assert app.compat.status.is_channel(state.key)
    assert await tasks_section_text(app, state, ctx("prompt/sections")) == ""
    assert all(e.scoreMode == "heuristic" for e in state.store.index)


async def test_legacy_pending_not_listed_nor_backfilled(tmp_path: Path) -> None:
    store = open_session(tmp_path, "s-legacy")
    write_pending(
        store, [("old", [user("旧数据")])], start_ms=1_700_000_000_000, extra={"pendingEra": None}
    )
    app = make_app(tmp_path, {"scoring": {"fallback": "always"}})
    state = await app.sessions.get("s-legacy")
    assert await tasks_section_text(app, state, ctx()) == ""
    assert all(not e.scored for e in state.store.index)
    app2 = make_app(tmp_path, {"scoring": {"includeLegacy": True}})
    state2 = await app2.sessions.get("s-legacy")
    assert "标题=old" in await tasks_section_text(app2, state2, ctx())


async def test_window_sources(tmp_path: Path) -> None:
    app = make_app(tmp_path, {"compress": {"contextWindowTokens": 9000}})
    state = await app.sessions.get("s-window")
    cfg = app.config.config
    assert window_tokens(state, cfg) == 9000
    state.context_window = 20000
    assert window_tokens(state, cfg) == 20000
    state.context_window = 30000
    assert window_tokens(state, cfg) == 30000


async def test_the_task_block_takes_one_worker_hop_unless_it_scores_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While folders wait, the rounds count, the fallback decision and the block are one
    worker hop (every answer with sections of such a session pays it); a decision that
    scores folders takes the hop of its write and one more for the block it changed."""
    seed(tmp_path, "s-hops", 2)
    app = make_app(tmp_path, {"scoring": {"autoHeuristicAfterRounds": {"plain": 2}}})
    state = await app.sessions.get("s-hops")
    hops = count_hops(monkeypatch)
    assert "id=mem-" in await tasks_section_text(app, state, ctx("agent/inbox/inserted"))
    assert (len(hops), state.scoring_rounds_unjudged) == (1, 1)
    assert "id=mem-" in await tasks_section_text(app, state, ctx("agent/pre-step"))
    assert (len(hops), state.scoring_rounds_unjudged) == (2, 1)
    # the second round unjudged: scored heuristically, then the (now empty) block
    assert await tasks_section_text(app, state, ctx("agent/inbox/inserted")) == ""
    assert (len(hops), state.scoring_rounds_unjudged) == (5, 0)
    assert all(e.scoreMode == "heuristic" for e in state.store.index)
