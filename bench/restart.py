"""First recall of a session after a daemon restart (issue 10's row; goal ≤ 0.5 s).

What a user waits for after the daemon restarted: the first ``agent/inbox/inserted`` of
a session opens its store, makes the recall index and the relevance index and runs one
recall round. Per size (one session of that many folders, `bench.stores`, cached) and
per recall mode, a daemon is run once to leave what a stopped daemon leaves behind (its
snapshots, written at shutdown), then ``reps`` fresh daemons each answer one first user
message, timed from the request to its answer:

* ``wall_s``: seconds on the client's clock (median, and the range over the reps);
* ``cpu_s``: the daemon's user + system CPU over the same request (``/proc/<pid>/stat``),
  which a machine shared with other work inflates far less than the wall time;
* ``goal_x``: the median wall time over the goal (1.0 = at the goal).

Each daemon also answers a second message, so that the row shows what a warm round
costs next to the first. Each daemon asks questions of its own (the block a restart
restores already holds the answers to the previous daemon's).
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.rss import message, store_base
from tests.e2e.harness import LineSocket, running_daemon

__all__ = ["GOAL_S", "daemon_cpu_s", "run_restart"]

GOAL_S = 0.5
_TICK = os.sysconf("SC_CLK_TCK")


def daemon_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _one(base: Path, mode: str, queries: list[str], folders: int, n: int) -> dict[str, float]:
    """One daemon: the first message (number `n`: the state remembers the ids it
    answered) and a second one."""
    config = {"recall": {"mode": mode}}
    with running_daemon(base=base, config=config, args=["--log-level", "warning"]) as d:
        c = LineSocket(d.socket_path, timeout=600)
        c.call(1, "initialize", {"protocolVersion": 1, "capabilities": {"systemPrompt": True}})
        pid = d.proc.pid
        cpu0 = daemon_cpu_s(pid)
        t0 = time.perf_counter()
        first = c.call(2, "agent/inbox/inserted", message(n, queries[0], folders))
        wall = time.perf_counter() - t0
        cpu = daemon_cpu_s(pid) - cpu0
        assert "result" in first, first
        t1 = time.perf_counter()
        second = c.call(3, "agent/inbox/inserted", message(n + 1, queries[1], folders))
        warm = time.perf_counter() - t1
        assert "result" in second, second
        c.close()
        d.stop()  # a graceful stop: what it leaves is what the next restart finds
    return {"wall": wall, "cpu": cpu, "warm": warm, "picks": len(first["result"]["recalled"])}


def run_restart(
    sizes: tuple[int, ...] = (10_000, 100_000),
    reps: int = 3,
    modes: tuple[str, ...] = ("ranked", "fair"),
) -> list[dict[str, Any]]:
    """Rows for the bench table (module docstring)."""
    rows: list[dict[str, Any]] = []
    asked = 0
    for folders in sizes:
        base, queries = store_base(folders)
        for mode in modes:
            # the first run leaves the snapshots a restart finds; each run asks other
            # questions (the same would find its answers already in the block)
            runs: list[dict[str, float]] = []
            for _ in range(max(1, reps) + 1):
                runs.append(_one(base, mode, queries[asked : asked + 2], folders, asked))
                asked += 2
            del runs[0]
            walls = [r["wall"] for r in runs]
            wall = statistics.median(walls)
            rows.append(
                {
                    "folders": folders,
                    "mode": mode,
                    "reps": len(runs),
                    "wall_s": round(wall, 3),
                    "range_s": f"{min(walls):.3f}-{max(walls):.3f}",
                    "cpu_s": round(statistics.median(r["cpu"] for r in runs), 3),
                    "goal_s": GOAL_S,
                    "goal_x": round(wall / GOAL_S, 2),
                    "warm_ms": round(statistics.median(r["warm"] for r in runs) * 1000, 1),
                    "picks": int(statistics.median(r["picks"] for r in runs)),
                }
            )
    return rows
