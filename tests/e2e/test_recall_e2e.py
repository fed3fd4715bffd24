"""Automatic recall through a real daemon: agent/inbox/inserted, prompt/sections, restart."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson

from engine.store import open_session
from tests.e2e.harness import LineSocket, running_daemon, short_tmpdir
from tests.engine.recall_fixtures import BASE_MS, write_folders

SESSION = "session-recall-e2e"
CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}


def _msg(mid: str, text: str, kind: str = "user") -> dict[str, Any]:
    return {
        "id": mid,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": kind},
    }


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
            {
                "createdAt": BASE_MS,
                "alpha": 0.85,
                "beta": 8,
                "keywords": ["星港项目", "接口网关 8080"],
                "messages": [
                    {"role": "user", "content": "星港项目的接口网关端口是 8080，灰度比例 10%。"},
                    {"role": "assistant", "content": "收到，接口网关 8080，灰度 10%。"},
                ],
            },
            {"createdAt": BASE_MS + 1000, "alpha": 0.9, "keywords": ["星港项目"], "scored": False},
        ],
    )


def test_inbox_recall_dedup_gates_and_restart_restore() -> None:
    base = short_tmpdir()
    try:
        ids = _seed(base / "mem")
        with running_daemon(base=base) as d:
            s = LineSocket(d.socket_path)
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
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
            s.close()
        stats = (base / "mem" / "sessions" / SESSION / "stats.jsonl").read_bytes().splitlines()
        types = [orjson.loads(line)["type"] for line in stats]
        assert types.count("recall") >= 1 and types.count("recall-block") >= 1
        for fid in ids:
            shutil.rmtree(base / "mem" / "sessions" / SESSION / fid)
        with running_daemon(base=base) as d:
            s = LineSocket(d.socket_path)
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
            first = s.call(2, "prompt/sections", {"session": {"id": SESSION}})["result"]
            assert first["sections"][0]["text"] == text
            assert first["startsRequestSeries"] is True
            second = s.call(3, "prompt/sections", {"session": {"id": SESSION}})["result"]
            assert second["sections"][0]["text"] == text
            assert second["startsRequestSeries"] is False
            s.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_no_system_prompt_no_recall() -> None:
    base = short_tmpdir()
    try:
        _seed(base / "mem")
        with running_daemon(base=base) as d:
            s = LineSocket(d.socket_path)
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": {"tools": True}})
            res = _inbox(s, 2, _msg("m1", "星港项目"))
            assert res == {
                "recalled": [],
                "sections": [],
                "startsRequestSeries": False,
                "warnings": [],
            }
            init = s.call(3, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
            assert "agent/inbox/inserted" in init["result"]["listeners"]
            s.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_first_pre_step_after_restart_rearchives_the_restored_block() -> None:
    """A block restored from recall-state.json is seen by pass 0 even when the first
    request after a restart is a pre-step (not an inbox message or prompt/sections)."""
    from tests.archive_fixtures import Surface, pre_step_params

    base = short_tmpdir()
    try:
        ids = _seed(base / "mem")
        with running_daemon(base=base) as d:
            s = LineSocket(d.socket_path)
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
            assert _inbox(s, 2, _msg("m1", "星港项目的网关端口是多少？"))["recalled"] == [ids[0]]
            s.close()
        surf = Surface()
        surf.system()
        for t in range(30):
            surf.turn_pair(t, 300)
        params = pre_step_params(surf, session=SESSION, percent=70)
        params["turn"] = 40  # a later turn: the block's addition is no longer protected
        with running_daemon(base=base) as d:
            s = LineSocket(d.socket_path)
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
            answer = s.call(2, "agent/pre-step", params)["result"]
            s.close()
        assert answer["compaction"] is not None
        stats = base / "mem" / "sessions" / SESSION / "stats.jsonl"
        records = [orjson.loads(line) for line in stats.read_bytes().splitlines()]
        rearchive = [r for r in records if r["type"] == "rearchive"]
        assert rearchive and rearchive[-1]["removedIds"] == [ids[0]]
        assert answer["sections"][0]["text"] == ""  # the block was emptied
    finally:
        shutil.rmtree(base, ignore_errors=True)
