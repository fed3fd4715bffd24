"""Archive benchmarks: pre-step latency on a 128k-token surface, as ratios to parsing it.

The surface has 400 messages (100 user turns with a tool call each) that the host
meter puts at 128k tokens. Three cases, timed interleaved in one run:

* "no archive": below the trigger on a session with no folders (the pre-step only
  answers the sections);
* "archive": at 80% of the window on a fresh session, so the call plans, writes and
  indexes its folders (48 of them) and renders the task block listing them before it
  answers; committed right after;
* "pending": the same session, below the trigger, while those folders wait to be
  scored (the pre-step renders the task block of every one of them);
* "pending, again": the next pre-step of that session, the same surface: what every
  step of the model costs until the folders are judged (the block it shows is the one
  the previous answer rendered);
* "refused": the bytes of the "no archive" request under a method the daemon does not
  have: it reads, parses and refuses them (-32601). Not a goal, a yardstick: what any
  request this size costs this daemon on this machine before a handler runs (the
  socket, the parse on the daemon's allocator, the answer), so the other rows can be
  read against it.

The floor of each case is reading and parsing the very request bytes it sent
(``orjson.loads`` of the same line, timed right after the call): the work any daemon
must do before it can start. Reported: medians (ms) over the repetitions, the ratio of
the medians and, for "archive", folders written per second.
"""

from __future__ import annotations

import io
import statistics
import time
from pathlib import Path
from typing import Any

import orjson

from tests.archive_fixtures import Surface, pre_step_params
from tests.e2e.harness import LineSocket, request_line

SURFACE_TOKENS = 128_000
REFUSED_METHOD = "bench/no-such-method"
CAPS = {"tokenMeter": True, "systemPrompt": True, "tools": True, "attachments": True}


def _surface() -> Surface:
    s = Surface()
    s.system()
    for i in range(100):
        s.turn_pair(i, 560)
    return s


def _params(s: Surface, sid: str, percent: float) -> dict[str, Any]:
    p = pre_step_params(s, session=sid)
    raw = p["context"]["totalTokens"]
    for n in p["context"]["nodes"]:
        n["tokens"] = max(1, round(n["tokens"] * SURFACE_TOKENS / raw))
    p["context"]["totalTokens"] = SURFACE_TOKENS
    p["context"]["contextWindow"] = int(SURFACE_TOKENS * 100 / percent)
    return p


def parse_floor(line: bytes) -> float:
    """Seconds to read ``line`` from a stream and parse it (the floor of a request)."""
    t0 = time.perf_counter()
    orjson.loads(io.BytesIO(line).readline())
    return time.perf_counter() - t0


class _Case:
    """The timings of one case: the call, and the floor of the bytes it sent."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self.floors: list[float] = []

    def call(self, c: LineSocket, id_: int, method: str, params: dict[str, Any]) -> Any:
        line = request_line(id_, method, params)
        t0 = time.perf_counter()
        c.send(line)
        answer = c.recv_json()
        self.calls.append(time.perf_counter() - t0)
        self.floors.append(parse_floor(line))
        if method == REFUSED_METHOD:
            assert answer["error"]["code"] == -32601, answer
            return None
        assert "result" in answer, answer
        return answer["result"]

    def row(self, name: str, messages: int, **extra: Any) -> dict[str, Any]:
        p50 = statistics.median(self.calls)
        floor = statistics.median(self.floors)
        return {
            "case": name,
            "messages": messages,
            "tokens": SURFACE_TOKENS,
            "runs": len(self.calls),
            "p50_ms": round(p50 * 1000, 2),
            "parse_ms": round(floor * 1000, 3),
            "ratio": round(p50 / floor, 1),
            **extra,
        }


def run_archive(path: Path, n: int) -> list[dict[str, Any]]:
    """Rows for the bench table: the cases of the module docstring, ``n`` ≥ 3 repetitions
    each, interleaved."""
    n = max(3, n)
    s = _surface()
    c = LineSocket(path, timeout=60)
    c.call(0, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
    quiet = _params(s, "bench-quiet", 50)
    idle, busy, waiting, again, refused = _Case(), _Case(), _Case(), _Case(), _Case()
    rates: list[float] = []
    folders = 0
    for i in range(n):
        r = idle.call(c, 10 * i + 1, "agent/pre-step", quiet)
        assert r["compaction"] is None, r
        refused.call(c, 10 * i + 5, REFUSED_METHOD, quiet)
        sid = f"bench-arc-{time.time_ns()}-{i}"
        r = busy.call(c, 10 * i + 2, "agent/pre-step", _params(s, sid, 80))
        comp = r["compaction"]
        assert comp is not None, r
        folders = len(comp["folders"])
        rates.append(folders / busy.calls[-1])
        c.call(10 * i + 3, "archive/commit", {"session": {"id": sid}, "token": comp["token"]})
        r = waiting.call(c, 10 * i + 4, "agent/pre-step", _params(s, sid, 50))
        assert r["compaction"] is None, r
        tasks = [x["text"] for x in r["sections"] if x["name"] == "dsh-rofm:memory-tasks"]
        assert tasks and all(f in tasks[0] for f in comp["folders"][:1]), r
        r = again.call(c, 10 * i + 6, "agent/pre-step", _params(s, sid, 50))
        assert [x["text"] for x in r["sections"] if x["name"] == "dsh-rofm:memory-tasks"] == tasks
    c.close()
    messages = len(s.nodes)
    return [
        idle.row("no archive", messages, folders=0, folders_s="-"),
        busy.row(
            "archive", messages, folders=folders, folders_s=round(statistics.median(rates), 1)
        ),
        waiting.row(f"{folders} pending", messages, folders=folders, folders_s="-"),
        again.row(f"{folders} pending, again", messages, folders=folders, folders_s="-"),
        refused.row("refused", messages, folders=0, folders_s="-"),
    ]
