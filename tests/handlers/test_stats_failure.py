"""A telemetry write that fails never fails the operation (reference §1.6, v1.4.1).

`stats.jsonl` is made a directory, so every append to it fails with an OSError even
for root (CI runs as root, where a read-only mode would not stop a write). The archive
is still committed and answered, recall and memory_judge still answer, and `status`
names the error once per daemon (`lastStatsError`, `statsFailures`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from tests.archive_fixtures import Surface, floored_params
from tests.rofmd.eviction_harness import core

SID = "stats-broken"


def _surface() -> Surface:
    s = Surface()
    s.system()
    for i in range(40):
        s.turn_pair(i, 400)
    return s


def _ask(text: str, mid: str) -> dict[str, Any]:
    message = {
        "id": mid,
        "role": "user",
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
    }
    return {"session": {"id": SID}, "message": message}


def _tool(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "session": {"id": SID},
        "turn": 2,
        "callId": call_id,
        "name": name,
        "arguments": arguments,
    }


async def test_unwritable_stats_never_fail_archive_recall_or_judge(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    async with core(root) as c:
        await c.call("agent/inbox/inserted", _ask("你好", "m0"))
        session_dir = root / "sessions" / c.app.sessions.key_for(SID)
        stats = session_dir / "stats.jsonl"
        stats.unlink(missing_ok=True)
        stats.mkdir()  # every append now fails with IsADirectoryError

        with capture_logs() as logs:
            answer = await c.call("agent/pre-step", floored_params(_surface(), SID, percent=90))
            compaction = answer["compaction"]
            assert compaction is not None and compaction["folders"], answer
            token = compaction["token"]
            assert (await c.call("archive/commit", {"session": {"id": SID}, "token": token}))["ok"]
            folders = compaction["folders"]
            on_disk = {p.name for p in session_dir.glob("mem-*")}
            assert set(folders) <= on_disk

            judged = await c.call(
                "tools/call",
                _tool(
                    "memory_judge",
                    {
                        "updates": [
                            {
                                "id": folders[0],
                                "alpha": 0.8,
                                "beta": 3,
                                "keywords": ["灰度", "回滚", "评审"],
                                "reason": "决定",
                            }
                        ]
                    },
                    "j1",
                ),
            )
            assert judged["isError"] is False, judged
            recalled = await c.call(
                "tools/call", _tool("memory_recall", {"keywords": "灰度 回滚"}, "r1")
            )
            assert recalled["isError"] is False, recalled
            await c.call("agent/inbox/inserted", _ask("灰度和回滚是怎么定的？", "m1"))

        status = await c.call("status", {})
        assert status["statsFailures"] >= 3, status
        last = status["lastStatsError"]
        assert last["session"] == c.app.sessions.key_for(SID)
        assert "IsADirectoryError" in last["error"], last
        # warned once for the session, however many records failed
        warned = [e for e in logs if "telemetry write failed" in str(e.get("event"))]
        assert len(warned) == 1, logs


async def test_status_shows_no_stats_error_when_telemetry_works(tmp_path: Path) -> None:
    async with core(tmp_path / "mem") as c:
        await c.call("agent/inbox/inserted", _ask("你好", "m0"))
        status = await c.call("status", {})
        assert status["lastStatsError"] is None and status["statsFailures"] == 0
