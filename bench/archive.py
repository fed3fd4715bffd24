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

"archive" has a second floor when the daemon's memory root is given: the disk's. Once
the timed cases are done (so that its writes never share a journal commit with theirs),
the folders each archive wrote (their ``context.json`` and ``meta.json`` bytes) are
written again in plain Python into a scratch directory beside the memory root, the way
the store makes them durable and nothing more: per folder a directory and its two
files, every one fsynced (16 at once), then each directory renamed into place and the
parent fsynced (:func:`disk_floor`). ``disk_ms`` is its median and ``disk_x`` that over
the parse floor: the part of the ratio no code of ours can take away, on this disk at
this moment (a disk whose cache is paged out, or one that is busy, moves it by 5×).
"""

from __future__ import annotations

import concurrent.futures
import io
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import orjson

from engine.store.layout import session_paths
from tests.archive_fixtures import Surface, pre_step_params
from tests.e2e.harness import LineSocket, request_line

SURFACE_TOKENS = 128_000
FLOOR_SYNC_THREADS = 16
"""Fsyncs in flight at once in :func:`disk_floor`: the store's (`engine.jsonio`)."""
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


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def disk_floor(
    folders: list[tuple[bytes, bytes]],
    scratch: Path,
    pool: concurrent.futures.ThreadPoolExecutor,
) -> float:
    """Seconds it takes to make `folders` (each its ``context.json`` and ``meta.json``
    bytes) durable in a new directory under `scratch`, in plain Python (module
    docstring); the directory is removed afterwards, outside the time."""
    root = scratch / f"floor-{time.time_ns()}"
    root.mkdir(parents=True)
    _fsync(str(scratch))
    staged = [str(root / f".staging-{n:04d}") for n in range(len(folders))]
    try:
        t0 = time.perf_counter()
        synced: list[concurrent.futures.Future[None]] = []
        for folder, (context, meta) in zip(staged, folders, strict=True):
            os.mkdir(folder)
            for name, data in (("context.json", context), ("meta.json", meta)):
                _create(f"{folder}/{name}", data)
                synced.append(pool.submit(_fsync, f"{folder}/{name}"))
            synced.append(pool.submit(_fsync, folder))
        for future in synced:
            future.result()
        for n, folder in enumerate(staged):
            os.rename(folder, str(root / f"mem-{n:04d}"))
        _fsync(str(root))
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _folder_bytes(memory_root: Path, sid: str, folder_ids: list[str]) -> list[tuple[bytes, bytes]]:
    paths = session_paths(memory_root, sid, per_session=True)
    return [
        (
            (paths.folder(f) / "context.json").read_bytes(),
            (paths.folder(f) / "meta.json").read_bytes(),
        )
        for f in folder_ids
    ]


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


def run_archive(path: Path, n: int, memory_root: Path | None = None) -> list[dict[str, Any]]:
    """Rows for the bench table: the cases of the module docstring, ``n`` ≥ 3 repetitions
    each, interleaved; with `memory_root` (the daemon's), the disk's floor beside the
    archive (module docstring)."""
    n = max(3, n)
    floors: list[float] = []
    archived: list[tuple[str, list[str]]] = []
    pool = concurrent.futures.ThreadPoolExecutor(FLOOR_SYNC_THREADS)
    scratch = None if memory_root is None else memory_root.parent / "bench-disk-floor"
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
        if memory_root is not None:
            archived.append((sid, comp["folders"]))
        r = waiting.call(c, 10 * i + 4, "agent/pre-step", _params(s, sid, 50))
        assert r["compaction"] is None, r
        tasks = [x["text"] for x in r["sections"] if x["name"] == "dsh-rofm:memory-tasks"]
        assert tasks and all(f in tasks[0] for f in comp["folders"][:1]), r
        r = again.call(c, 10 * i + 6, "agent/pre-step", _params(s, sid, 50))
        assert [x["text"] for x in r["sections"] if x["name"] == "dsh-rofm:memory-tasks"] == tasks
    c.close()
    if memory_root is not None and scratch is not None:
        # after the timed cases, so that its writes and deletions never share a journal
        # commit with theirs
        for sid, folder_ids in archived:
            floors.append(disk_floor(_folder_bytes(memory_root, sid, folder_ids), scratch, pool))
        shutil.rmtree(scratch, ignore_errors=True)
    pool.shutdown()
    messages = len(s.nodes)
    none: dict[str, Any] = {"disk_ms": "-", "disk_x": "-"}
    disk = dict(none)
    if floors:
        floor = statistics.median(floors)
        disk = {
            "disk_ms": round(floor * 1000, 2),
            "disk_x": round(floor / statistics.median(busy.floors), 1),
        }
    return [
        idle.row("no archive", messages, folders=0, folders_s="-", **none),
        busy.row(
            "archive",
            messages,
            folders=folders,
            folders_s=round(statistics.median(rates), 1),
            **disk,
        ),
        waiting.row(f"{folders} pending", messages, folders=folders, folders_s="-", **none),
        again.row(f"{folders} pending, again", messages, folders=folders, folders_s="-", **none),
        refused.row("refused", messages, folders=0, folders_s="-", **none),
    ]
