"""SIGKILL the daemon at random points of archive commits (reference §6 "可恢复").

Each round sends a pre-step that archives many folders, kills the daemon somewhere
between "request sent" and "answer written", restarts it on the same memory root and
replays the same pre-step (the host never got an answer, so it never replaced
anything). After the restart every archived message is in exactly one folder or still
on the surface, nothing is duplicated, and index.json equals the folders on disk.
"""

from __future__ import annotations

import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import orjson

from tests.archive_fixtures import Surface
from tests.e2e.harness import DaemonProcess, LineSocket, request_line, running_daemon, short_tmpdir
from tests.e2e.test_archive_prestep import connect, params

ROUNDS = 18


def _surface() -> Surface:
    s = Surface()
    s.system()
    for i in range(120):
        s.turn_pair(i, 500)
    return s


def _interrupted(base: Path, full: int) -> bool:
    """The kill landed inside the store transaction: its journal still says pending,
    folders were being staged, or only some were published (the daemon has not opened
    the session yet: this is what the kill left)."""
    if not base.exists():
        return False
    published = len(list(base.glob("mem-*")))
    journals = [orjson.loads(j.read_bytes()) for j in base.glob(".commit-*.json")]
    return (
        0 < published < full
        or any(base.glob(".staging-*"))
        or any(j.get("state") == "pending" for j in journals)
    )


def _check(d: DaemonProcess, sid: str, p: dict[str, Any], full: int) -> bool:
    """Replay and verify; returns whether the kill had interrupted the transaction."""
    base = d.memory_root / "sessions" / sid
    interrupted = _interrupted(base, full)
    c = connect(d)
    answer = c.call(1, "agent/pre-step", p)
    c.close()
    comp = answer["result"]["compaction"]
    assert comp is not None, answer
    on_disk = {f.name for f in base.glob("mem-*")}
    index = {e["id"] for e in orjson.loads((base / "index.json").read_bytes())["folders"]}
    assert on_disk == index == set(comp["folders"])
    assert not list(base.glob(".staging*")) and not list(base.glob("*.tmp"))
    seqs: list[int] = []
    for fid in comp["folders"]:
        msgs = orjson.loads((base / fid / "context.json").read_bytes())["messages"]
        for m in msgs:
            if not seqs or seqs[-1] != m["seq"]:
                seqs.append(m["seq"])
    span = [s for s in comp["shadowedSeqs"] if s > 0]
    assert seqs == span, "every archived message exactly once, in order"
    return interrupted


def test_sigkill_during_archive_commits() -> None:
    rng = random.Random(20261130)
    base = short_tmpdir()
    s = _surface()
    try:
        # calibrate: how long does one archiving pre-step take?
        with running_daemon(base=base) as d:
            c = connect(d)
            t0 = time.monotonic()
            first = c.call(1, "agent/pre-step", params(s, "calib", percent=90))
            duration = time.monotonic() - t0
            c.close()
            assert len(first["result"]["compaction"]["folders"]) > 20
        full = len(first["result"]["compaction"]["folders"])
        pending: tuple[str, dict[str, Any]] | None = None
        interrupted: list[bool] = []
        for i in range(ROUNDS + 1):
            with running_daemon(base=base) as d:
                if pending is not None:
                    interrupted.append(_check(d, *pending, full))
                if i == ROUNDS:
                    break
                sid = f"crash-{i}"
                p = params(s, sid, percent=90)
                sock = LineSocket(d.socket_path)
                sock.call(
                    0,
                    "initialize",
                    {
                        "protocolVersion": 1,
                        "capabilities": {
                            "tokenMeter": True,
                            "systemPrompt": True,
                            "tools": True,
                            "attachments": True,
                        },
                    },
                )
                sock.send(request_line(1, "agent/pre-step", p))
                time.sleep(rng.uniform(0.0, duration * 1.3))
                d.proc.send_signal(signal.SIGKILL)
                d.proc.wait()
                sock.close()
                pending = (sid, p)
        # some kills landed in the middle of a commit (folders staged, or some published)
        assert any(interrupted), interrupted
    finally:
        shutil.rmtree(base, ignore_errors=True)
