"""Dispatcher rules in-process: ordering, cancellation and the commit guard, deadlines."""

from __future__ import annotations

import random
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import TaskGroup
from pydantic import BaseModel

import handlers.validated_once as validated_once
from handlers.app import App, Paths
from handlers.config_state import ConfigState
from handlers.context import ConnectionState, RequestContext
from handlers.params import OptionalSessionParams, SleepParams, parse_params
from handlers.registry import Method
from rofmd.server import dispatcher as dispatcher_mod
from rofmd.server.dispatcher import Dispatcher
from rofmd.server.jsonrpc import Call

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Info:
    def status_snapshot(self) -> dict[str, Any]:
        return {"version": "test"}


def _app(tmp_path: Path) -> App:
    config = ConfigState.start(tmp_path / "cfg", {})
    return App(config, Paths(tmp_path / "mem", tmp_path, tmp_path), _Info())


def _dispatcher(
    tmp_path: Path, tg: TaskGroup, max_pending: int, request_timeout: float
) -> Dispatcher:
    """A dispatcher over a fresh app whose clock stands at 0."""
    return Dispatcher(
        _app(tmp_path),
        tg,
        max_pending_per_session=max_pending,
        request_timeout=request_timeout,
        clock_ms=lambda: 0,
    )


def _install(
    monkeypatch: pytest.MonkeyPatch,
    handler: Callable[[App, Any, RequestContext], Awaitable[dict[str, Any] | None]],
    params: type[BaseModel] = OptionalSessionParams,
) -> None:
    method = Method("test/op", params, handler, needs_enabled=False)
    monkeypatch.setattr(dispatcher_mod, "lookup", lambda name, debug_methods: method)


class _Replies:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.done = anyio.Event()
        self.expected = 0

    async def __call__(self, response: dict[str, Any]) -> None:
        self.items.append(response)
        if len(self.items) >= self.expected:
            self.done.set()


def _call(id_: int, session: str | None = None, **extra: Any) -> Call:
    params: dict[str, Any] = dict(extra)
    if session is not None:
        params["session"] = {"id": session}
    return Call(method="test/op", params=params, id=id_, has_id=True)


async def test_same_session_in_order_other_sessions_concurrent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    delays = {i: rng.random() * 0.004 for i in range(200)}
    running: dict[str, int] = {}
    overlap = [0]

    async def handler(app: App, p: Any, ctx: RequestContext) -> dict[str, Any]:
        sid = ctx.session_id or ""
        running[sid] = running.get(sid, 0) + 1
        assert running[sid] == 1, "two requests of one session ran at once"
        overlap[0] = max(overlap[0], sum(1 for v in running.values() if v))
        await anyio.sleep(delays[len(replies.items) % 200])
        running[sid] -= 1
        return {"sid": sid}

    _install(monkeypatch, handler)
    replies = _Replies()
    replies.expected = 200
    conn = ConnectionState(conn_id=1)
    async with anyio.create_task_group() as tg:
        d = _dispatcher(tmp_path, tg, 500, 10)
        for i in range(200):
            d.submit(_call(i, f"s{i % 10}"), conn, replies)
        with anyio.fail_after(10):
            await replies.done.wait()
            await d.wait_idle()
    per_session: dict[str, list[int]] = {}
    for r in replies.items:
        per_session.setdefault(r["result"]["sid"], []).append(r["id"])
    assert all(ids == sorted(ids) for ids in per_session.values())
    assert overlap[0] > 1  # sessions really did run concurrently


async def test_cancel_before_commit_abandons_after_commit_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[int] = []
    entered = anyio.Event()
    release = anyio.Event()

    async def handler(app: App, p: Any, ctx: RequestContext) -> dict[str, Any]:
        commit = bool(p.model_extra and p.model_extra.get("commit"))
        if commit:
            with ctx.commit_guard():
                entered.set()
                await release.wait()  # a slow durable write
                written.append(int(p.model_extra["n"]))
            await anyio.sleep(0)  # after the guard the request still completes
            return {"written": True}
        entered.set()
        await anyio.sleep(30)
        written.append(-1)
        return {"written": False}

    _install(monkeypatch, handler)
    conn = ConnectionState(conn_id=1)
    async with anyio.create_task_group() as tg:
        d = _dispatcher(tmp_path, tg, 5, 10)
        # 1) not committed yet: cancelled, nothing written
        r1 = _Replies()
        r1.expected = 1
        d.submit(_call(1, "a"), conn, r1)
        await entered.wait()
        d.submit(Call("$/cancelRequest", {"id": 1}, None, False), conn, r1)
        with anyio.fail_after(5):
            await r1.done.wait()
        assert r1.items[0]["error"]["code"] == -32800
        # 2) inside the commit guard: the cancel is ignored and the write lands
        entered = anyio.Event()
        r2 = _Replies()
        r2.expected = 1
        d.submit(_call(2, "a", commit=True, n=2), conn, r2)
        await entered.wait()
        d.submit(Call("$/cancelRequest", {"id": 2}, None, False), conn, r2)
        await anyio.sleep(0.05)
        release.set()
        with anyio.fail_after(5):
            await r2.done.wait()
        assert r2.items[0]["result"] == {"written": True}
    assert written == [2]


async def test_deadline_does_not_interrupt_a_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def handler(app: App, p: Any, ctx: RequestContext) -> dict[str, Any]:
        with ctx.commit_guard():
            await anyio.sleep(0.3)  # longer than the deadline
        return {"ok": True}

    _install(monkeypatch, handler)
    replies = _Replies()
    replies.expected = 1
    async with anyio.create_task_group() as tg:
        d = _dispatcher(tmp_path, tg, 5, 0.1)
        d.submit(_call(1), ConnectionState(conn_id=1), replies)
        with anyio.fail_after(5):
            await replies.done.wait()
    assert replies.items[0]["result"] == {"ok": True}


async def test_handler_exception_is_internal_error_with_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def handler(app: App, p: Any, ctx: RequestContext) -> dict[str, Any]:
        raise RuntimeError("boom")

    _install(monkeypatch, handler)
    replies = _Replies()
    replies.expected = 2
    async with anyio.create_task_group() as tg:
        d = _dispatcher(tmp_path, tg, 5, 5)
        d.submit(_call(1, "x"), ConnectionState(conn_id=1), replies)
        d.submit(_call(2, "x"), ConnectionState(conn_id=1), replies)
        with anyio.fail_after(5):
            await replies.done.wait()
    assert [r["error"]["code"] for r in replies.items] == [-32603, -32603]
    assert len({r["error"]["data"]["errorId"] for r in replies.items}) == 2
    assert d.counters["errors"] == 2


async def test_a_large_request_is_validated_off_the_loop_with_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From OFF_LOOP_BYTES up the params are checked in a worker thread: the handler sees
    the same params, a refusal is the same -32602, byte for byte."""
    loop_thread = threading.get_ident()
    threads: list[bool] = []
    real = parse_params

    def recording(model: Any, raw: Any) -> Any:
        threads.append(threading.get_ident() != loop_thread)
        return real(model, raw)

    async def handler(app: App, p: Any, ctx: RequestContext) -> dict[str, Any]:
        return {"params": p.model_dump()}

    _install(monkeypatch, handler, SleepParams)
    monkeypatch.setattr(dispatcher_mod, "parse_params", recording)
    monkeypatch.setattr(dispatcher_mod, "OFF_LOOP_BYTES", 1000)
    calls = [
        {"ms": 0, "session": {"id": "s", "cwd": "/p"}, "extra": {"x": [1, 2]}},
        {"ms": -1, "session": {"id": ""}},
        {"ms": 1.5, "session": {"id": ".."}},
    ]
    answers: dict[int, list[dict[str, Any]]] = {}
    for size in (10, 5000):
        replies = _Replies()
        replies.expected = len(calls)
        async with anyio.create_task_group() as tg:
            d = _dispatcher(tmp_path, tg, 5, 5)
            for i, raw in enumerate(calls):
                call = Call(method="test/op", params=raw, id=i, has_id=True)
                d.submit(call, ConnectionState(conn_id=1), replies, size=size)
            with anyio.fail_after(5):
                await replies.done.wait()
        answers[size] = sorted(replies.items, key=lambda r: r["id"])
    assert threads == [False] * len(calls) + [True] * len(calls)
    assert orjson.dumps(answers[10]) == orjson.dumps(answers[5000])
    assert "result" in answers[10][0] and [a["error"]["code"] for a in answers[10][1:]] == [
        -32602,
        -32602,
    ]


async def test_the_line_of_a_lone_request_reaches_its_validation_on_and_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What lets a surface be looked up by the bytes its line writes it in
    (`handlers.validated_once.json_values`): the call's line, wherever the params are
    checked; none for a call without one (a batch member)."""
    seen: list[Any] = []
    real = parse_params

    def recording(model: Any, raw: Any) -> Any:
        seen.append((raw.get("ms"), validated_once._LINE.get()))
        return real(model, raw)

    async def handler(app: App, p: Any, ctx: RequestContext) -> dict[str, Any]:
        return {}

    _install(monkeypatch, handler, SleepParams)
    monkeypatch.setattr(dispatcher_mod, "parse_params", recording)
    monkeypatch.setattr(dispatcher_mod, "OFF_LOOP_BYTES", 1000)
    line = b'{"jsonrpc":"2.0","id":1,"method":"test/op","params":{"ms":0}}'
    for size in (10, 5000):
        replies = _Replies()
        replies.expected = 2
        async with anyio.create_task_group() as tg:
            d = _dispatcher(tmp_path, tg, 5, 5)
            lone = Call(method="test/op", params={"ms": 0}, id=1, has_id=True, line=line)
            member = Call(method="test/op", params={"ms": 1}, id=2, has_id=True)
            d.submit(lone, ConnectionState(conn_id=1), replies, size=size)
            d.submit(member, ConnectionState(conn_id=1), replies, size=size)
            with anyio.fail_after(5):
                await replies.done.wait()
    # off the loop the two run in worker threads, in either order
    assert sorted(seen, key=repr) == sorted([(0, (line, "params")), (1, None)] * 2, key=repr)
