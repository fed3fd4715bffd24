"""Warm recall rounds of different sessions wait in line for `App.warm_rounds` (at most
`WARM_ROUNDS` at once, first come first served); a session's first round, which may load
or build its indexes for seconds, runs beside them and never holds up their line."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import handlers.inbox as inbox
from engine.recall import run_round
from handlers.app import WARM_ROUNDS
from handlers.recall_state import candidate_index
from tests.engine.recall_fixtures import BASE_MS
from tests.handlers.inbox_fixtures import session_with_folders, user_message
from tests.rofmd.eviction_harness import core


def _ask(sid: str, text: str, mid: str, n: int) -> dict[str, Any]:
    return user_message(sid, text, mid, BASE_MS + 10**7 + n)


class _InFlight:
    """Rounds running now (each held `hold` seconds in its thread), and the most at once."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.now = 0
        self.most = 0
        self.lock = threading.Lock()

    @contextmanager
    def counting(self) -> Iterator[None]:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.hold)
            yield
        finally:
            with self.lock:
                self.now -= 1


async def test_warm_rounds_run_at_most_warm_rounds_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions = [f"warm-{i}" for i in range(WARM_ROUNDS + 3)]
    flight = _InFlight(0.05)
    real = run_round

    def counted(*args: Any, **kwargs: Any) -> Any:
        with flight.counting():
            return real(*args, **kwargs)

    async with core(tmp_path / "mem") as c:
        for sid in sessions:
            await session_with_folders(c, sid, 3)
            await c.call("agent/inbox/inserted", _ask(sid, "星港项目 词0", "m0", 0))  # first
        monkeypatch.setattr(inbox, "run_round", counted)
        async with anyio.create_task_group() as tg:
            for sid in sessions:
                tg.start_soon(c.call, "agent/inbox/inserted", _ask(sid, "星港项目 词1", "m1", 1))
    assert flight.most == WARM_ROUNDS  # in line, and as many as that at once


async def test_first_rounds_never_hold_up_the_warm_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm = "warm"
    cold = [f"cold-{i}" for i in range(WARM_ROUNDS)]  # enough to take every place in line
    release = threading.Event()
    real = candidate_index

    def slow_first(state: Any, cfg: Any) -> Any:
        if state.key.startswith("cold-"):
            assert release.wait(20)  # a long first load
        return real(state, cfg)

    async with core(tmp_path / "mem") as c:
        for sid in [warm, *cold]:
            await session_with_folders(c, sid, 3)
        await c.call("agent/inbox/inserted", _ask(warm, "星港项目 词0", "m0", 0))
        monkeypatch.setattr(inbox, "candidate_index", slow_first)
        try:
            async with anyio.create_task_group() as tg:
                for sid in cold:
                    tg.start_soon(c.call, "agent/inbox/inserted", _ask(sid, "星港项目", "m0", 0))
                await anyio.sleep(0.2)  # the first rounds are loading now
                with anyio.fail_after(5):
                    answer = await c.call(
                        "agent/inbox/inserted", _ask(warm, "星港项目 词1", "m1", 1)
                    )
                assert isinstance(answer["sections"], list)  # answered while they load
                release.set()
        finally:
            release.set()
