"""Archive benchmarks: pre-step latency on a 128k-token surface, commit throughput.

The surface has 400 messages (100 user turns with a tool call each) that the host
meter puts at 128k tokens. "no archive" runs it below the trigger (the pre-step only
answers the sections); "archive" runs it at 80% of the window on a fresh session each
time, so every call plans, writes and indexes its folders before answering. Commit
throughput is folders written per second of those archiving pre-steps. Medians.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from tests.archive_fixtures import Surface, pre_step_params
from tests.e2e.harness import LineSocket

SURFACE_TOKENS = 128_000
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


def run_archive(path: Path, n: int) -> list[dict[str, Any]]:
    """Rows for the bench table: pre-step latency without/with archive, folders/s."""
    s = _surface()
    c = LineSocket(path, timeout=60)
    c.call(0, "initialize", {"protocolVersion": 1, "capabilities": CAPS})
    quiet = _params(s, "bench-quiet", 50)
    idle: list[float] = []
    for i in range(n):
        t0 = time.perf_counter()
        r = c.call(i + 1, "agent/pre-step", quiet)
        idle.append(time.perf_counter() - t0)
        assert r["result"]["compaction"] is None, r
    busy: list[float] = []
    rates: list[float] = []
    folders = 0
    for i in range(n):
        p = _params(s, f"bench-arc-{time.time_ns()}-{i}", 80)
        t0 = time.perf_counter()
        r = c.call(1000 + i, "agent/pre-step", p)
        dt = time.perf_counter() - t0
        comp = r["result"]["compaction"]
        assert comp is not None, r
        folders = len(comp["folders"])
        busy.append(dt)
        rates.append(folders / dt)
        c.call(2000 + i, "archive/commit", {"session": p["session"], "token": comp["token"]})
    c.close()
    return [
        {
            "case": "no archive",
            "messages": len(s.nodes),
            "tokens": SURFACE_TOKENS,
            "runs": n,
            "p50_ms": round(statistics.median(idle) * 1000, 2),
            "folders": 0,
            "folders_s": "-",
        },
        {
            "case": "archive",
            "messages": len(s.nodes),
            "tokens": SURFACE_TOKENS,
            "runs": n,
            "p50_ms": round(statistics.median(busy) * 1000, 2),
            "folders": folders,
            "folders_s": round(statistics.median(rates), 1),
        },
    ]
