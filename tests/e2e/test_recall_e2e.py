"""Automatic recall through a real daemon: agent/inbox/inserted, prompt/sections, restart."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.store import open_session
from tests.e2e.harness import LineSocket, running_daemon, short_tmpdir
from tests.engine.recall_fixtures import BASE_MS, STARPORT, write_folders

SESSION = "session-recall-e2e"
CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}


def _msg(mid: str, text: str, kind: str = "user") -> dict[str, Any]:
    return {
        "id": mid,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": kind},
    }


@pytest.fixture
def base() -> Iterator[Path]:
    """A short directory for the daemon (and its restarts) to share, removed after."""
    path = short_tmpdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _serving(base: Path, caps: dict[str, bool] = CAPS) -> Iterator[LineSocket]:
    """A daemon on `base` and one connection to it, initialized with `caps`."""
    with running_daemon(base=base) as d:
        s = LineSocket(d.socket_path)
        try:
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": caps})
            yield s
        finally:
            s.close()


def _inbox(
    s: LineSocket, rid: int, message: dict[str, Any], session: dict[str, Any] | None = None
) -> Any:
    params = {"session": session or {"id": SESSION}, "message": message, "time": BASE_MS + 60_000}
    answer = s.call(rid, "agent/inbox/inserted", params)
    assert "result" in answer, answer
    return answer["result"]


def _seed(root: Path) -> list[str]:
    store = open_session(root, SESSION)
    return write_folders(
        store,
        [
            STARPORT,
            {"createdAt": BASE_MS + 1000, "alpha": 0.9, "keywords": ["星港项目"], "scored": False},
        ],
    )


def test_inbox_recall_dedup_gates_and_restart_restore(base: Path) -> None:
    ids = _seed(base / "mem")
    with _serving(base) as s:
        res = _inbox(s, 2, _msg("m1", "星港项目的网关端口是多少？"))
        assert set(res) == {"recalled", "sections", "startsRequestSeries", "warnings"}
        assert res["recalled"] == [ids[0]]  # the pending folder is never recalled
        assert res["startsRequestSeries"] is True
        assert res["warnings"] == []
        recall = res["sections"][0]
        assert recall["name"] == "dsh-rofm:recall" and recall["order"] == 100
        text = recall["text"]
        assert text.startswith("## 记忆回忆（按创建时间从早到晚）\n\n以下是更早对话的归档片段")
        assert "### 回忆 1 · 归档于 2026-10-25 周日 08:17 · α=0.85 · β=+8.0 · 第1代" in text
        # the same message id again: no second round
        again = _inbox(s, 3, _msg("m1", "星港项目的网关端口是多少？"))
        assert again["recalled"] == [] and again["startsRequestSeries"] is False
        assert again["sections"][0]["text"] == text
        # not a real user message / a subagent: no recall
        assert _inbox(s, 4, _msg("m2", "星港项目", kind="runtime-context"))["recalled"] == []
        sub = {"id": SESSION, "origin": "subagent"}
        assert _inbox(s, 5, _msg("m3", "星港项目"), session=sub)["recalled"] == []
    stats = (base / "mem" / "sessions" / SESSION / "stats.jsonl").read_bytes().splitlines()
    types = [orjson.loads(line)["type"] for line in stats]
    assert types.count("recall") >= 1 and types.count("recall-block") >= 1
    for fid in ids:
        shutil.rmtree(base / "mem" / "sessions" / SESSION / fid)
    with _serving(base) as s:
        first = s.call(2, "prompt/sections", {"session": {"id": SESSION}})["result"]
        assert first["sections"][0]["text"] == text
        assert first["startsRequestSeries"] is True
        second = s.call(3, "prompt/sections", {"session": {"id": SESSION}})["result"]
        assert second["sections"][0]["text"] == text
        assert second["startsRequestSeries"] is False


def test_no_system_prompt_no_recall(base: Path) -> None:
    _seed(base / "mem")
    with _serving(base, {"tools": True}) as s:
        res = _inbox(s, 2, _msg("m1", "星港项目"))
        assert res == {
            "recalled": [],
            "sections": [],
            "startsRequestSeries": False,
            "warnings": [],
        }
        init = s.call(3, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
        assert "agent/inbox/inserted" in init["result"]["listeners"]


def test_first_pre_step_after_restart_rearchives_the_restored_block(base: Path) -> None:
    """A block restored from recall-state.json is seen by pass 0 even when the first
    request after a restart is a pre-step (not an inbox message or prompt/sections)."""
    from tests.archive_fixtures import Surface, pre_step_params

    ids = _seed(base / "mem")
    with _serving(base) as s:
        assert _inbox(s, 2, _msg("m1", "星港项目的网关端口是多少？"))["recalled"] == [ids[0]]
    surf = Surface()
    surf.system()
    for t in range(30):
        surf.turn_pair(t, 300)
    params = pre_step_params(surf, session=SESSION, percent=70)
    params["turn"] = 40  # a later turn: the block's addition is no longer protected
    with _serving(base) as s:
        answer = s.call(2, "agent/pre-step", params)["result"]
    assert answer["compaction"] is not None
    stats = base / "mem" / "sessions" / SESSION / "stats.jsonl"
    records = [orjson.loads(line) for line in stats.read_bytes().splitlines()]
    rearchive = [r for r in records if r["type"] == "rearchive"]
    assert rearchive and rearchive[-1]["removedIds"] == [ids[0]]
    assert answer["sections"][0]["text"] == ""  # the block was emptied
