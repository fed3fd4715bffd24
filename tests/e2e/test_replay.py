"""`rofmd replay`: a recorded session driven through a real daemon."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.sessionlog import compress_frames, read_log

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "session.v4.jsonl"
T0 = 1_793_610_000_000
TURNS = 300


def _replay(*args: str, timeout: float = 300) -> tuple[int, dict[str, Any], str]:
    out = subprocess.run(
        [sys.executable, "-m", "rofmd", "replay", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    result = orjson.loads(out.stdout) if out.returncode == 0 else {}
    return out.returncode, result, out.stderr


def test_fixture_log_counts() -> None:
    code, result, err = _replay(str(FIXTURE), "--window", "20000")
    assert code == 0, err[-2000:]
    assert result["events"] == 20 and result["badLines"] == 0 and not result["torn"]
    assert result["userMessages"] == 4  # the subagent notice is not a user turn
    assert result["modelSteps"] == 6
    assert result["foreignCompactions"] == 1 and result["skippedReplacements"] == 0
    assert result["summary"]["archives"] == 0  # far below the trigger
    assert result["session"]["id"] == "fixture-session-1"


def _big_log(turns: int) -> list[list[dict[str, Any]]]:
    """`turns` × 4 events (+ header), one zstd frame per turn, like durable appends."""
    header = {"type": "session", "version": 4, "id": "big-session", "createdAt": T0}
    batches: list[list[dict[str, Any]]] = [[header]]
    seq = 0
    for n in range(turns):
        t = T0 + n * 60_000
        output = "\n".join(f"line {i} of job {n}: status ok, {i * n % 97} items" for i in range(40))
        batch = [
            {
                "type": "user/message",
                "seq": seq,
                "time": t,
                "surfaceOp": "append",
                "data": {
                    "id": f"u{n}",
                    "role": "user",
                    "source": {"kind": "user"},
                    "content": [
                        {"type": "text", "text": f"第 {n} 个任务:检查服务 svc{n % 50} 的状态"}
                    ],
                },
            },
            {
                "type": "assistant/message",
                "seq": seq + 1,
                "time": t + 1,
                "surfaceOp": "append",
                "data": {
                    "turn": n + 1,
                    "step": 1,
                    "message": {
                        "id": f"a{n}",
                        "role": "assistant",
                        "source": {"kind": "model"},
                        "content": [
                            {
                                "type": "tool-call",
                                "id": f"c{n}",
                                "name": "bash",
                                "arguments": '{"cmd":"status"}',
                            }
                        ],
                    },
                },
            },
            {
                "type": "tool/result",
                "seq": seq + 2,
                "time": t + 2,
                "surfaceOp": "append",
                "data": {
                    "turn": n + 1,
                    "step": 1,
                    "message": {
                        "id": f"t{n}",
                        "role": "tool",
                        "toolCallId": f"c{n}",
                        "source": {"kind": "tool"},
                        "content": [{"type": "text", "text": output}],
                    },
                },
            },
            {
                "type": "assistant/message",
                "seq": seq + 3,
                "time": t + 3,
                "surfaceOp": "append",
                "data": {
                    "turn": n + 1,
                    "step": 2,
                    "message": {
                        "id": f"b{n}",
                        "role": "assistant",
                        "source": {"kind": "model"},
                        "content": [{"type": "text", "text": f"svc{n % 50} 正常。"}],
                    },
                },
            },
        ]
        seq += 4
        batches.append(batch)
    return batches


@pytest.mark.timeout(600)
def test_generated_zstd_log_with_torn_final_frame(tmp_path: Path) -> None:
    # 1,200 events in 300 frames, about 60 archives at this window: a many-frame log, its
    # torn last frame and a context kept bounded over many archives (5,000 events took
    # four times as long and no assertion here depends on the size)
    batches = _big_log(TURNS)
    data = compress_frames(batches)
    last = compress_frames(batches[-1:])
    torn = data[: len(data) - len(last) // 2]  # the final frame is cut in half
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(torn)
    expected = read_log(torn)
    assert expected.torn
    users = sum(1 for e in expected.events if e.get("type") == "user/message")
    steps = sum(1 for e in expected.events if e.get("type") == "assistant/message")
    code, result, err = _replay(str(path), "--window", "24000")
    assert code == 0, err[-2000:]
    assert result["torn"] is True
    assert result["frames"] == TURNS  # header frame + TURNS - 1 whole turns; the last is torn
    assert result["events"] == len(expected.events) >= 4 * TURNS - 3
    assert result["userMessages"] == users and result["modelSteps"] == steps
    assert result["summary"]["archives"] >= 10
    # the task block is answered as it goes (the rest is the heuristic fallback's job)
    assert result["judgeCalls"] > 0 and 0 < result["scored"] <= result["summary"]["folders"]
    # archiving kept the context bounded all along
    assert result["finalTokens"] < 24000
