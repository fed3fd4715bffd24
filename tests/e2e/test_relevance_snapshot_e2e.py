"""The relevance index snapshot across a real daemon restart (SIGTERM, start again): the
second start loads it, reads no folder, and recalls as the first start did."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from engine.relevance.folder_text import SNAPSHOT_MIN_DOCS, SNAPSHOT_NAME
from engine.store import open_session
from tests.e2e.harness import DaemonProcess, LineSocket, running_daemon, short_tmpdir
from tests.engine.recall_fixtures import BASE_MS, write_folders

SESSION = "session-snapshot-e2e"
CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}
TOPICS = ["星港项目网关", "灰度比例", "杭州旅行", "预算会议", "数据库缓存", "部署监控"]
FOLDERS = SNAPSHOT_MIN_DOCS + 20


def _seed(root: Path) -> list[str]:
    rows = []
    for n in range(FOLDERS + 3):
        topic = TOPICS[n % len(TOPICS)]
        rows.append(
            {
                "createdAt": BASE_MS + n * 60_000,
                "alpha": 0.4 + (n % 6) / 10,
                "beta": 2,
                "keywords": [topic, f"编号{n}"],
                "scored": n < FOLDERS,
                "messages": [
                    {
                        "role": "user",
                        "content": f"{topic}第{n}次：端口{8000 + n}，灰度{n % 10}0%。",
                    },
                    {"role": "assistant", "content": f"记下了：{topic}用端口{8000 + n}。"},
                ],
            }
        )
    return write_folders(open_session(root, SESSION), rows)


def _ask(s: LineSocket, rid: int, mid: str, text: str) -> dict[str, Any]:
    params = {
        "session": {"id": SESSION},
        "message": {
            "id": mid,
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        "time": BASE_MS + 10**8,
    }
    answer = s.call(rid, "agent/inbox/inserted", params)
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def _loaded(d: DaemonProcess) -> list[dict[str, Any]]:
    return [r for r in d.log_records() if r.get("event") == "relevance index loaded"]


def test_a_restarted_daemon_loads_the_snapshot_and_reads_no_folder() -> None:
    base = short_tmpdir()
    try:
        ids = _seed(base / "mem")
        pending = ids[FOLDERS:]
        session_dir = base / "mem" / "sessions" / SESSION
        with running_daemon(base=base) as d:
            s = LineSocket(d.socket_path)
            s.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
            first = _ask(s, 2, "m1", "星港项目网关的端口是多少？")
            assert first["recalled"]
            updates = [
                {"id": f, "alpha": 0.9, "beta": 6, "keywords": ["回滚方案", "灰度比例", "发布"]}
                for f in pending
            ]
            judge = {
                "session": {"id": SESSION},
                "turn": 2,
                "callId": "j",
                "name": "memory_judge",
                "arguments": {"updates": updates},
            }
            judged = s.call(3, "tools/call", judge)["result"]
            assert len(judged["value"]["updated"]) == 3
            _ask(s, 4, "m2", "灰度比例的回滚方案？")  # the judged folders join the index
            s.close()
            assert d.stop() == 0  # SIGTERM: the shutdown writes what changed since
            built = _loaded(d)
        assert [(r["restored"], r["read"]) for r in built] == [(False, FOLDERS)]
        assert (session_dir / SNAPSHOT_NAME).is_file()
        reference = short_tmpdir()
        try:
            shutil.copytree(base / "mem", reference / "mem")
            (reference / "mem" / "sessions" / SESSION / SNAPSHOT_NAME).unlink()
            answers: list[dict[str, Any]] = []
            logs: list[list[dict[str, Any]]] = []
            for where in (base, reference):
                (where / "mem" / "sessions" / SESSION / "recall-state.json").unlink()
                (where / "daemon.log").unlink(missing_ok=True)  # this start's lines only
                with running_daemon(base=where) as d:
                    s = LineSocket(d.socket_path)
                    s.call(1, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
                    answers.append(_ask(s, 2, "m3", "灰度比例的回滚方案和星港项目网关？"))
                    s.close()
                    d.stop()
                    logs.append(_loaded(d))
            restarted, built_again = answers
            restored_log, built_log = logs
            assert [(r["restored"], r["read"]) for r in restored_log] == [(True, 0)]
            assert [(r["restored"], r["read"]) for r in built_log] == [(False, FOLDERS + 3)]
            assert restarted == built_again
        finally:
            shutil.rmtree(reference, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
