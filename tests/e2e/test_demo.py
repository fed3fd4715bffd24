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
