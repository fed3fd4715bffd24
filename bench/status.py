"""`rofmd status` as a command, against a running daemon, as a ratio to `python -c pass`.

What a person (or a script, or a monitoring probe) pays for one status: starting the
interpreter, importing the command, one request, printing. The floor is starting the
same interpreter with nothing to do. The two are run interleaved, each as a child
process; reported: medians of wall time (ms), their ratio, and the median CPU time
(user + system) of the status child, which the load of other processes skews less.
Before the command imported only what it uses, it took 302 ms (issue 10).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _child(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one child process run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[1:]} failed: {done.stderr.decode(errors='replace')}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run_status(socket_path: Path, runs: int) -> dict[str, Any]:
    """One row: `rofmd status --socket …` vs `python -c pass`, ``runs`` of each."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROFMD_")}
    script = Path(sys.executable).with_name("rofmd")  # the console script, as installed
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "rofmd"]
    status = [*command, "status", "--socket", str(socket_path)]
    floor = [sys.executable, "-c", "pass"]
    walls: list[float] = []
    cpus: list[float] = []
    floors: list[float] = []
    _child(status, env)  # warm the file cache
    for _ in range(runs):
        wall, cpu = _child(status, env)
        walls.append(wall)
        cpus.append(cpu)
        floors.append(_child(floor, env)[0])
    p50, floor50 = statistics.median(walls), statistics.median(floors)
    return {
        "case": "rofmd status",
        "runs": runs,
        "p50_ms": round(p50 * 1000, 1),
        "cpu_ms": round(statistics.median(cpus) * 1000, 1),
        "pass_ms": round(floor50 * 1000, 1),
        "ratio": round(p50 / floor50, 2),
    }
