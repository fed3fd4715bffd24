"""`rofmd demo --json`: the whole loop happens and archived facts come back."""

from __future__ import annotations

import subprocess
import sys

import orjson


def test_demo_json_shows_archive_scoring_and_recall() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "rofmd", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = orjson.loads(out.stdout)
    summary = result["summary"]
    assert summary["archives"] >= 2
    assert summary["folders"] >= 10
    assert summary["judgeCalls"] >= 1 and summary["scored"] >= summary["folders"]
    assert summary["answered"] == summary["questions"] == 4
    archives = [t for t in result["timeline"] if t["event"] == "archive"]
    assert all(t["note"].startswith("[memory] ") for t in archives)
    # notes are cumulative: each new note counts every segment archived so far
    counts = [int(t["note"].split()[1]) for t in archives]
    assert counts == sorted(counts) and counts[-1] == summary["folders"]
    for answer in result["answers"]:
        assert answer["found"], answer["question"]
        assert answer["expect"] in answer["block"]
        assert answer["block"].startswith("## 记忆回忆")
    assert result["seconds"] < 30


def test_serve_demo_plays_against_itself_and_keeps_serving() -> None:
    import time

    from tests.e2e.harness import LineSocket, running_daemon

    with running_daemon(args=["--demo"]) as d:
        deadline = time.monotonic() + 30
        while "keeps serving" not in d.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        log = d.log_text()
        assert "4/4 questions answered from memory" in log, log[-3000:]
        s = LineSocket(d.socket_path)
        status = s.call(1, "status")["result"]
        assert status["pid"] == d.proc.pid and status["sessionsLoaded"] >= 1
        s.close()
        sessions = [p.name for p in (d.memory_root / "sessions").iterdir()]
        assert len(sessions) == 1 and sessions[0].startswith("demo-session-")
