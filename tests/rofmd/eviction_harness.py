"""An in-process daemon core for the eviction tests: the real App, method table,
dispatcher and eviction policy, a clock the test sets, calls awaited one by one."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from handlers.app import App, Paths
from handlers.config_state import ConfigState
from handlers.context import ConnectionState
from rofmd.server.dispatcher import Dispatcher
from rofmd.server.eviction import SessionEviction
from rofmd.server.jsonrpc import Call

CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}


class _Info:
    def status_snapshot(self) -> dict[str, Any]:
        return {"version": "test"}


@dataclass
class Clock:
    """The daemon's clock, set by the test."""

    now_ms: int

    def __call__(self) -> int:
        return self.now_ms


@dataclass
class Pending:
    """A submitted call and, once answered, its response."""

    done: anyio.Event = field(default_factory=anyio.Event)
    response: dict[str, Any] | None = None


@dataclass
class Core:
    app: App
    dispatcher: Dispatcher
    eviction: SessionEviction
    clock: Clock
    conn: ConnectionState = field(default_factory=lambda: ConnectionState(conn_id=1))
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def submit(self, method: str, params: Any) -> Pending:
        """Submit a call; `Pending.done` is set once it is answered."""
        pending = Pending()

        async def reply(response: dict[str, Any]) -> None:
            pending.response = response
            pending.done.set()

        self.dispatcher.submit(Call(method, params, next(self._ids), True), self.conn, reply)
        return pending

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        """One request, answered; its `result` (fails on an error answer)."""
        pending = self.submit(method, params)
        with anyio.fail_after(30):
            await pending.done.wait()
        assert pending.response is not None and "result" in pending.response, pending.response
        result: dict[str, Any] = pending.response["result"]
        return result

    def notify(self, method: str, params: Any) -> None:
        self.dispatcher.submit(Call(method, params, None, False), self.conn, _drop)


async def _drop(_response: dict[str, Any]) -> None:
    return None


@asynccontextmanager
async def core(
    root: Path,
    *,
    idle_seconds: float = 300,
    max_loaded: int = 0,
    tree: dict[str, Any] | None = None,
    now_ms: int = 1_791_311_000_000,
) -> AsyncIterator[Core]:
    """A running core over memory root `root` (the daemon's wiring, without sockets)."""
    cfg_dir = root.parent / f"{root.name}-cfg"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    if tree is not None:
        (cfg_dir / "config.json").write_bytes(orjson.dumps(tree))
    # the packaged defaults and a user file, as the daemon layers them
    config = ConfigState.start(cfg_dir, {})
    app = App(config, Paths(root, root.parent, root.parent), _Info())
    clock = Clock(now_ms)
    async with anyio.create_task_group() as tg:
        dispatcher = Dispatcher(
            app, tg, max_pending_per_session=64, request_timeout=60, clock_ms=clock
        )
        eviction = SessionEviction(
            app.sessions,
            dispatcher.lane_busy,
            clock,
            idle_seconds=idle_seconds,
            max_loaded=max_loaded,
        )
        dispatcher.on_lane_idle = eviction.lane_idle
        c = Core(app, dispatcher, eviction, clock)
        await c.call("initialize", {"protocolVersion": 1, "capabilities": CAPS})
        yield c
        with anyio.fail_after(30):
            await dispatcher.wait_idle()
        tg.cancel_scope.cancel()
