"""An answer that counts no round, with nothing the task block reads changed since the
last one, takes that block on the event loop (no worker hop); it is always the block a
fresh render gives at that moment (`handlers.tasks_section._Quiet`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import handlers.tasks_section as tasks_module
from engine.store import open_session
from handlers.app import App
from handlers.sessions import SessionState
from handlers.tasks_section import build_task_block, tasks_section_text
from tests.engine.scoring_fixtures import BASE_MS, user, write_pending
from tests.handlers.app_fixtures import count_hops, make_app, request_ctx

NOW = BASE_MS + 10**6
PRE_STEP = "agent/pre-step"


def seed(tmp_path: Path, session: str, n: int, **extra: Any) -> list[str]:
    store = open_session(tmp_path, session)
    folders = [(f"t{i}", [user(f"我决定用方案 {i}")]) for i in range(n)]
    return write_pending(store, folders, extra=extra)


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The worker hops taken."""
    return count_hops(monkeypatch)


async def loaded(
    tmp_path: Path, session: str, n: int, hops: list[object], **extra: Any
) -> tuple[App, SessionState, list[str]]:
    """`n` folders waiting in `session` (:func:`seed`), the app and the opened session,
    the hops of its opening forgotten; and the folders' ids."""
    ids = seed(tmp_path, session, n, **extra)
    app = make_app(tmp_path, {})
    state = await app.sessions.get(session)
    hops.clear()
    return app, state, ids


def fresh(app: App, state: SessionState, now_ms: int) -> str:
    """The block a render from scratch gives now (no memory of earlier answers)."""
    tasks_module._LAST_RENDER.pop(id(state), None)
    return build_task_block(state, app.config.config, now_ms, has_recall_block=False).text


async def answer(app: App, state: SessionState, now_ms: int, method: str = PRE_STEP) -> str:
    return await tasks_section_text(app, state, request_ctx(method, now_ms))


async def test_the_same_answer_again_takes_no_worker_hop(
    tmp_path: Path, hops: list[object]
) -> None:
    app, state, _ = await loaded(tmp_path, "s-quiet", 3, hops)
    first = await answer(app, state, NOW)
    assert "id=mem-" in first and len(hops) == 1
    for later in (NOW, NOW + 1, NOW + 5_000):  # the waiting times it shows stay
        assert await answer(app, state, later) == first
    assert len(hops) == 1
    assert fresh(app, state, NOW + 5_000) == first


async def test_waiting_times_that_moved_are_rendered_again(
    tmp_path: Path, hops: list[object]
) -> None:
    app, state, _ = await loaded(tmp_path, "s-ages", 2, hops)
    first = await answer(app, state, NOW)
    for later in (NOW + 3 * 3_600_000, NOW + 3 * 86_400_000):
        hops.clear()
        text = await answer(app, state, later)
        assert len(hops) == 1 and text != first
        assert text == fresh(app, state, later)
        first = text


async def test_a_store_change_is_seen_by_the_next_answer(
    tmp_path: Path, hops: list[object]
) -> None:
    app, state, ids = await loaded(tmp_path, "s-judged", 3, hops)
    before = await answer(app, state, NOW)
    assert ids[0] in before
    state.store.update_meta(ids[0], {"scored": True, "alpha": 0.5, "beta": 1.0})
    hops.clear()
    after = await answer(app, state, NOW)
    assert len(hops) == 1 and ids[0] not in after and ids[1] in after
    assert after == fresh(app, state, NOW)


async def test_a_new_window_is_seen_by_the_next_answer(tmp_path: Path, hops: list[object]) -> None:
    app, state, _ = await loaded(tmp_path, "s-window", 12, hops)
    state.context_window = 128_000
    wide = await answer(app, state, NOW)
    state.context_window = 4_000  # a smaller budget: fewer items fit
    hops.clear()
    narrow = await answer(app, state, NOW)
    assert len(hops) == 1 and narrow != wide
    assert narrow == fresh(app, state, NOW)


async def test_another_window_with_the_same_budget_takes_the_block_without_a_hop(
    tmp_path: Path, hops: list[object]
) -> None:
    """The window only sizes the block: every window from 80k tokens up gets the
    `scoring.taskMaxTokens` budget (12,000 of 15%), so the block stays; the budget of a
    smaller one is another, and that block is laid out again."""
    app, state, _ = await loaded(tmp_path, "s-windows", 12, hops)
    state.context_window = 128_000
    first = await answer(app, state, NOW)
    assert len(hops) == 1
    for window in (1_000_000, 80_000, 200_000):
        state.context_window = window
        assert await answer(app, state, NOW + 1) == first, window
    assert len(hops) == 1
    state.context_window = 79_000  # 11,850 tokens: laid out again
    hops.clear()
    text = await answer(app, state, NOW + 1)
    assert len(hops) == 1
    assert text == fresh(app, state, NOW + 1)
    state.context_window = 128_000  # gathered again: `fresh` forgot the last block
    assert await answer(app, state, NOW + 1) == first


async def test_another_window_after_a_store_change_gathers_again(
    tmp_path: Path, hops: list[object]
) -> None:
    app, state, ids = await loaded(tmp_path, "s-window-judged", 4, hops)
    state.context_window = 128_000
    assert ids[0] in await answer(app, state, NOW)
    state.store.update_meta(ids[0], {"scored": True, "alpha": 0.5, "beta": 1.0})
    state.context_window = 256_000  # the same budget
    hops.clear()
    text = await answer(app, state, NOW)
    assert len(hops) == 1 and ids[0] not in text
    assert text == fresh(app, state, NOW)


async def test_telemetry_that_makes_the_session_synthetic_is_seen(
    tmp_path: Path, hops: list[object]
) -> None:
    """The era rule reads stats.jsonl: a record showing a fake window (with 100 folders
    waiting) takes the session's unmarked folders out of the list, from the next answer
    on."""
    app, state, _ = await loaded(tmp_path, "s-fake", 100, hops, pendingEra=None)
    listed = await answer(app, state, NOW)
    assert "id=mem-" in listed
    assert await answer(app, state, NOW) == listed
    assert state.store.append_stats({"type": "archive", "windowTokens": 1_000})
    hops.clear()
    now = await answer(app, state, NOW)
    assert len(hops) == 1 and "id=mem-" not in now
    assert now == fresh(app, state, NOW)


async def test_a_user_turn_still_counts_its_round(tmp_path: Path, hops: list[object]) -> None:
    app, state, _ = await loaded(tmp_path, "s-turns", 2, hops)
    text = await answer(app, state, NOW)
    assert await answer(app, state, NOW, "agent/inbox/inserted") == text
    assert await answer(app, state, NOW, "agent/inbox/inserted") == text
    assert state.scoring_rounds_unjudged == 2 and len(hops) == 3
