"""Session eviction in-process (issue 21): the real method table, dispatcher and policy,
a clock the test sets. End to end (sockets, RSS): tests/e2e/test_session_memory.py."""

from __future__ import annotations

import functools
import gc
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from handlers.app import App
from handlers.context import RequestContext
from handlers.params import SessionParams
from handlers.registry import Method
from handlers.registry import lookup as real_lookup
from handlers.relevance_snapshots import WRITER
from rofmd.server import dispatcher as dispatcher_mod
from tests.archive_fixtures import Surface, floored_params, pre_step_params
from tests.rofmd.eviction_harness import core

pytestmark = pytest.mark.anyio

T0 = 1_791_311_000_000
MINUTE = 60_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# pre-step params at 90% of the window: it archives
pressured = functools.partial(floored_params, percent=90.0)


def conversation(tag: str, turns: int, first_seq: int = 0) -> Surface:
    s = Surface(seq=first_seq, time=T0 + first_seq * 1000)
    s.system()
    for i in range(turns):
        s.user(f"{tag}第{i}个问题：请帮我看看项目{i % 5}的配置文件和部署计划，端口{8000 + i}。")
        s.assistant("我来读取文件。", [(f"call-{tag}-{i}", "read_file", '{"path":"a.txt"}')])
        s.tool(f"call-{tag}-{i}", f"file {i}: 服务{i % 3} 端口 {8000 + i} " + "x" * 300)
        s.assistant(f"第{i}个回答：项目{i % 5}的配置没问题，灰度{i % 10}0%。" + "好的" * 120)
    return s


def user_message(mid: str, text: str, kind: str = "user") -> dict[str, Any]:
    return {
        "id": mid,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": kind},
    }


Step = Callable[[str, list[dict[str, Any]]], tuple[str, dict[str, Any]]]


def _judge_all(sid: str, folders: list[str]) -> dict[str, Any]:
    updates = [
        {
            "id": fid,
            "alpha": 0.6 + (n % 4) / 10,
            "beta": 3 + n % 5,
            "keywords": ["配置文件", "部署计划", f"项目{n % 5}", f"端口{8000 + n}"],
            "reason": "项目配置与部署的决定",
        }
        for n, fid in enumerate(folders)
    ]
    return {
        "session": {"id": sid},
        "turn": 31,
        "callId": "judge-1",
        "name": "memory_judge",
        "arguments": {"updates": updates},
    }


def _steps() -> list[Step]:
    first = conversation("甲", 30)
    second = conversation("乙", 30, first_seq=1000)
    third = conversation("丙", 30, first_seq=2000)

    def compaction(history: list[dict[str, Any]], step: int) -> dict[str, Any]:
        comp = history[step]["compaction"]
        assert comp is not None, f"step {step} did not archive"
        return dict(comp)

    return [
        lambda sid, h: ("prompt/sections", {"session": {"id": sid}}),
        lambda sid, h: ("agent/pre-step", pressured(first, sid)),
        lambda sid, h: ("prompt/sections", {"session": {"id": sid}}),
        # the archive of step 1, unreported until now: committed after an eviction
        lambda sid, h: (
            "archive/commit",
            {"session": {"id": sid}, "token": compaction(h, 1)["token"]},
        ),
        lambda sid, h: ("tools/call", _judge_all(sid, compaction(h, 1)["folders"])),
        lambda sid, h: (
            "agent/inbox/inserted",
            {
                "session": {"id": sid},
                "message": user_message("u1", "项目的配置文件和部署计划定了吗？端口是多少？"),
                "time": T0 + 40 * MINUTE,
                "turn": 32,
                "contextWindow": 64_000,
            },
        ),
        lambda sid, h: ("prompt/sections", {"session": {"id": sid}}),
        lambda sid, h: ("agent/pre-step", pressured(second, sid, percent=95)),
        lambda sid, h: (
            "archive/abort",
            {"session": {"id": sid}, "token": compaction(h, 7)["token"], "reason": "test"},
        ),
        # the same message again: handled once, evicted or not
        lambda sid, h: (
            "agent/inbox/inserted",
            {
                "session": {"id": sid},
                "message": user_message("u1", "项目的配置文件和部署计划定了吗？端口是多少？"),
                "time": T0 + 41 * MINUTE,
            },
        ),
        lambda sid, h: (
            "agent/inbox/inserted",
            {
                "session": {"id": sid},
                "message": user_message("u2", "项目3的端口和灰度比例是多少？"),
                "time": T0 + 42 * MINUTE,
            },
        ),
        lambda sid, h: ("agent/pre-step", pressured(third, sid)),
        lambda sid, h: (
            "archive/commit",
            {"session": {"id": sid}, "token": compaction(h, 11)["token"]},
        ),
        lambda sid, h: ("prompt/sections", {"session": {"id": sid}}),
    ]


def _as(answer: dict[str, Any], sid: str, other: str) -> str:
    return orjson.dumps(answer, option=orjson.OPT_SORT_KEYS).decode().replace(sid, other)


async def test_an_evicted_session_answers_as_if_it_had_never_been_evicted(
    tmp_path: Path,
) -> None:
    kept, evicted = "twin-kept", "twin-gone"
    async with core(tmp_path / "mem", idle_seconds=0, max_loaded=0) as c:
        registry = c.app.sessions
        history: dict[str, list[dict[str, Any]]] = {kept: [], evicted: []}
        for n, step in enumerate(_steps()):
            c.clock.now_ms = T0 + (n + 1) * MINUTE
            if n > 0:
                assert registry.evict(registry.key_for(evicted), "idle"), f"step {n}"
                assert registry.key_for(evicted) not in registry.by_recency()
            for sid in (kept, evicted):
                method, params = step(sid, history[sid])
                history[sid].append(await c.call(method, params))
            assert _as(history[evicted][-1], evicted, kept) == _as(history[kept][-1], kept, kept), (
                f"step {n} ({method}) answered differently after an eviction"
            )
        assert registry.released["idle"] == len(history[kept]) - 1
    h = history[kept]
    # the run exercised what an eviction could lose
    assert h[1]["compaction"]["folders"] and h[3] == {"ok": True}
    assert h[4]["isError"] is False
    assert h[5]["recalled"] and h[5]["startsRequestSeries"] is True
    assert h[5]["sections"][0]["text"].startswith("## 记忆回忆")
    assert h[6]["startsRequestSeries"] is False  # the reloaded block is no new series
    assert h[6]["sections"][0]["text"] == h[5]["sections"][0]["text"]
    assert h[8]["ok"] is True and h[8]["rolledBack"]
    assert h[9]["recalled"] == []
    assert h[11]["compaction"] is not None and h[12] == {"ok": True}


async def test_never_evicts_a_session_with_a_request_queued_or_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered = anyio.Event()
    release = anyio.Event()
    seen: list[object] = []

    async def hold(app: App, p: Any, ctx: RequestContext) -> dict[str, Any]:
        seen.append(await app.sessions.get(p.session.id))
        entered.set()
        await release.wait()
        seen.append(await app.sessions.get(p.session.id))
        return {"held": True}

    held = Method("test/hold", SessionParams, hold)

    def lookup(name: str, *, debug_methods: bool) -> Method | None:
        return held if name == "test/hold" else real_lookup(name, debug_methods=debug_methods)

    monkeypatch.setattr(dispatcher_mod, "lookup", lookup)
    async with core(tmp_path / "mem", idle_seconds=60, max_loaded=1) as c:
        registry = c.app.sessions
        await c.call("prompt/sections", {"session": {"id": "busy"}})
        await c.call("prompt/sections", {"session": {"id": "other"}})  # over the cap of 1
        first = c.submit("test/hold", {"session": {"id": "busy"}})
        await entered.wait()
        queued = c.submit("prompt/sections", {"session": {"id": "busy"}})
        # hours pass while the request runs: every sweep and cap check spares it
        for hour in range(1, 6):
            c.clock.now_ms += 3600_000 * hour
            c.eviction.sweep()
            c.eviction.enforce_cap()
            await anyio.sleep(0)
            assert registry.key_for("busy") in registry.by_recency()
        assert registry.by_recency() == ["busy"]  # the idle one went (idle, then the cap)
        release.set()
        with anyio.fail_after(10):
            await first.done.wait()
            await queued.done.wait()
        assert seen[0] is seen[1]  # the same loaded state from start to end
        assert first.response is not None and first.response["result"] == {"held": True}
        # now idle since the queued request ended: not yet due, then due
        ended = c.clock.now_ms
        c.clock.now_ms = ended + 59_999
        assert c.eviction.sweep() == 0
        c.clock.now_ms = ended + 60_000
        assert c.eviction.sweep() == 1
        assert registry.by_recency() == []
        assert registry.released["idle"] >= 2


async def test_idle_sessions_go_when_due_by_the_clock(tmp_path: Path) -> None:
    async with core(tmp_path / "mem", idle_seconds=300, max_loaded=0) as c:
        registry = c.app.sessions
        for n, sid in enumerate(("s-a", "s-b", "s-c")):
            c.clock.now_ms = T0 + n * MINUTE
            await c.call("prompt/sections", {"session": {"id": sid}})
        c.clock.now_ms = T0 + 5 * MINUTE - 1
        assert c.eviction.sweep() == 0
        c.clock.now_ms = T0 + 5 * MINUTE
        assert c.eviction.sweep() == 1 and registry.by_recency() == ["s-b", "s-c"]
        c.clock.now_ms = T0 + 6 * MINUTE + 30_000
        await c.call("prompt/sections", {"session": {"id": "s-c"}})  # used again: idle anew
        c.clock.now_ms = T0 + 7 * MINUTE
        assert c.eviction.sweep() == 1 and registry.by_recency() == ["s-c"]
        assert registry.released["idle"] == 2 and registry.released["lru"] == 0
        status = await c.call("status", {})
        assert status["sessionsLoaded"] == 1
        assert status["sessionsReleased"]["idle"] == 2


async def test_the_cap_unloads_the_least_recently_used(tmp_path: Path) -> None:
    async with core(tmp_path / "mem", idle_seconds=0, max_loaded=3) as c:
        registry = c.app.sessions
        for n in range(5):
            c.clock.now_ms = T0 + n * 1000
            await c.call("prompt/sections", {"session": {"id": f"s{n}"}})
            assert registry.loaded() <= 3
        assert registry.by_recency() == ["s2", "s3", "s4"]
        c.clock.now_ms += 1000
        await c.call("prompt/sections", {"session": {"id": "s2"}})  # most recent now
        await c.call("prompt/sections", {"session": {"id": "s0"}})  # reopened: s3 goes
        assert registry.by_recency() == ["s4", "s2", "s0"]
        assert registry.released["lru"] == 3
        assert c.eviction.sweep() == 0  # idle eviction off


async def test_disposing_keeps_no_residue_and_counts(tmp_path: Path) -> None:
    async with core(tmp_path / "mem", idle_seconds=0, max_loaded=0) as c:
        registry = c.app.sessions
        await c.call(
            "agent/inbox/inserted",
            {
                "session": {"id": "s-d"},
                "message": user_message("m1", "你好，项目的端口是多少？"),
                "contextWindow": 50_000,
            },
        )
        key = registry.key_for("s-d")
        assert registry.evict(key, "idle") and registry.residues() == 1
        await c.call("prompt/sections", {"session": {"id": "s-d"}})
        assert registry.residues() == 0  # put back on reopen
        assert (await registry.get("s-d")).context_window == 50_000
        c.notify("agent/disposed", {"session": {"id": "s-d"}})
        with anyio.fail_after(5):
            await c.dispatcher.wait_idle()
        assert registry.released["disposed"] == 1 and registry.residues() == 0
        await c.call("prompt/sections", {"session": {"id": "s-d"}})
        assert (await registry.get("s-d")).context_window is None


async def test_read_only_requests_leave_no_directory_and_answer_the_same(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    async with core(root, idle_seconds=0, max_loaded=0) as c:
        probes: list[tuple[str, Callable[[str], dict[str, Any]]]] = [
            ("prompt/sections", lambda sid: {"session": {"id": sid}}),
            (
                "tools/call",
                lambda sid: {
                    "session": {"id": sid},
                    "name": "memory_judge",
                    "arguments": {"updates": []},  # refused: nothing to write
                },
            ),
            (
                "agent/inbox/inserted",
                lambda sid: {
                    "session": {"id": sid},
                    "message": user_message("m1", "运行时上下文", kind="runtime-context"),
                },
            ),
        ]
        # the reference: the same requests on a session whose directory exists (made
        # by a pre-step below the trigger, which writes nothing else)
        ref = "probe-ref"
        small = conversation("小", 2)
        answer = await c.call("agent/pre-step", pre_step_params(small, session=ref, percent=10))
        assert answer["compaction"] is None
        assert (root / "sessions" / ref / "session.json").is_file()
        for n, (method, build) in enumerate(probes):
            sid = f"probe-{n}"
            got = await c.call(method, build(sid))
            want = await c.call(method, build(ref))
            assert _as(got, sid, ref) == _as(want, ref, ref), method
            assert not (root / "sessions" / sid).exists(), f"{method} created a directory"
        assert sorted(p.name for p in (root / "sessions").iterdir()) == [ref]
        # a judge of an unknown id writes its telemetry: the store makes the directory for
        # that write, recorded as an eager open records it
        judged = await c.call(
            "tools/call",
            {
                "session": {"id": "probe-1"},
                "name": "memory_judge",
                "arguments": {"updates": [{"id": "mem-20260101T000000Z-0001", "alpha": 1}]},
            },
        )
        assert judged["value"]["rejected"]
        made = root / "sessions" / "probe-1"
        record = orjson.loads((made / "session.json").read_bytes())
        assert record == orjson.loads((root / "sessions" / ref / "session.json").read_bytes()) | {
            "id": "probe-1"
        }
        stats = [orjson.loads(line) for line in (made / "stats.jsonl").read_bytes().splitlines()]
        assert [r["type"] for r in stats] == ["judge"]
        # a lazily opened session writes its directory on its first durable write
        # (through the store: a judge's telemetry; outside it: a pre-step's record)
        await c.call("prompt/sections", {"session": {"id": "probe-0"}})
        got = await c.call("agent/pre-step", pressured(conversation("甲", 30), "probe-0"))
        want = await c.call("agent/pre-step", pressured(conversation("甲", 30), "probe-fresh"))
        assert _as(got, "probe-0", "probe-fresh") == _as(want, "probe-fresh", "probe-fresh")
        assert got["compaction"] is not None
        for sid in ("probe-0", "probe-fresh"):
            assert (root / "sessions" / sid / "archives-unreported.json").is_file()
        # a user message that runs a recall round remembers it on disk: not read-only
        await c.call(
            "agent/inbox/inserted",
            {"session": {"id": "probe-2"}, "message": user_message("m2", "项目的端口是多少？")},
        )
        assert (root / "sessions" / "probe-2" / "recall-state.json").is_file()


@pytest.mark.parametrize("how", ["evicted", "disposed"])
async def test_an_unloaded_session_leaves_nothing_of_it_alive(tmp_path: Path, how: str) -> None:
    """No cache anywhere keeps a released session's store, indexes or recall state."""
    async with core(tmp_path / "mem", idle_seconds=0, max_loaded=0) as c:
        sid = "heavy"
        archived = await c.call("agent/pre-step", pressured(conversation("甲", 30), sid))
        folders = archived["compaction"]["folders"]
        await c.call("tools/call", _judge_all(sid, folders))
        params = {"session": {"id": sid}, "message": user_message("u1", "项目的配置文件？")}
        assert (await c.call("agent/inbox/inserted", params))["recalled"]
        state = await c.app.sessions.get(sid)
        parts = [state, state.store, state.recall, state.recall_index, state.relevance_index]
        assert all(p is not None for p in parts)
        refs = [weakref.ref(p) for p in parts]
        del state, parts
        if how == "evicted":
            assert c.app.sessions.evict(c.app.sessions.key_for(sid), "idle")
        else:
            c.notify("agent/disposed", {"session": {"id": sid}})
            with anyio.fail_after(5):
                await c.dispatcher.wait_idle()
        # the unload's snapshot writes hold the indexes until they are written, then let go
        assert await anyio.to_thread.run_sync(WRITER.flush, 10.0)
        gc.collect()
        assert [r() is None for r in refs] == [True] * len(refs)
