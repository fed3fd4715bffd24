"""`memory_judge` writes at 10^3, 10^4 and 10^5 folders: bytes and time per call.

A session directory is made with N folders (index rows as archiving writes them, a
directory per folder, full ``meta.json`` files only for the folders the calls judge),
and opened once. Each call is what the tool does after its plan is validated
(``handlers.tool_judge``): ``plan_judge`` over 5 pending folders with the tool's own
``folder_facts``, then its ``write_plan`` (``update_metas`` with the plan's changes, and
the ``judge`` telemetry record).

The floor of a call is writing the very ``meta.json`` bytes the call produced, each
atomically and durably (temp file, fsync, rename, directory fsync): what any design
must write, since the folder is the truth. Reported: medians (ms) and the largest call
(a compaction of the index lands in one call now and then), the ratio of the medians,
the bytes written per call through the engine's filesystem seam (:data:`engine.jsonio.fs`:
mean over the calls, and per floor), and the amortized bytes per call: the median call
plus its share of the compaction that rewrites ``index.json`` once the log outgrows its
budget (:func:`engine.store.indexfile.index_log_budget`). Before the log, every call
rewrote the whole index (10⁵ folders: 51 MB and ~0.4 s per call).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.config import MemoryConfig
from engine.jsonio import FsOps, dumps_json, write_bytes_atomic
from engine.scoring.judge import plan_judge
from engine.store import SessionStore, open_session
from engine.store.indexfile import file_size, index_log_budget
from handlers.tool_judge import folder_facts, write_plan
from tests.appends_fixtures import using_fs

PER_CALL = 5
BASE_MS = 1_795_000_000_000
_WORDS = ["星港项目", "接口网关", "灰度比例", "登录重构", "日本旅行", "故障排查", "数据库", "部署"]


class CountingFs(FsOps):
    """The real filesystem, counting the bytes written through it."""

    def __init__(self) -> None:
        self.bytes = 0

    def create_write_sync(self, path: Path, data: bytes) -> None:
        self.bytes += len(data)
        super().create_write_sync(path, data)

    def append_sync(self, path: Path, data: bytes) -> None:
        self.bytes += len(data)
        super().append_sync(path, data)


def _fid(i: int) -> str:
    return f"mem-20261118T{i // 10000 % 24:02d}{i // 100 % 60:02d}{i % 60:02d}Z-{i % 10000:04d}"


def _pending(i: int) -> dict[str, Any]:
    """A folder's meta as archiving writes it (pending; its index row is a subset)."""
    at = BASE_MS + i * 60_000
    return {
        "id": _fid(i),
        "createdAt": at,
        "alpha": 0,
        "beta": 0,
        "scored": False,
        "rescorePending": False,
        "keywords": [],
        "title": f"第 {i} 段：{_WORDS[i % len(_WORDS)]}的讨论与结论",
        "pendingSince": at,
        "scoreMode": "model",
        "archivedByVersion": "0.1.0",
        "archivedFrom": "adapter",
        "pendingEra": "current",
        "idempotencyKey": f'["bench",{i},1,9,"h{i:x}",0]',
        "alphaSource": "pending",
        "betaSource": "pending",
        "keywordsSource": "pending",
        "messageCount": 12,
    }


def make_session(root: Path, folders: int, judged: int) -> None:
    """``folders`` folders; the last ``judged`` ones have their meta.json."""
    store_dir = root / "sessions" / "bench"
    store_dir.mkdir(parents=True)
    rows = []
    index_fields = set(_pending(0)) - {"alphaSource", "betaSource", "keywordsSource"}
    for i in range(folders):
        meta = _pending(i)
        os.mkdir(store_dir / meta["id"])
        if i >= folders - judged:
            (store_dir / meta["id"] / "meta.json").write_bytes(dumps_json(meta))
        rows.append({k: v for k, v in meta.items() if k in index_fields})
    (store_dir / "index.json").write_bytes(dumps_json({"version": 1, "folders": rows}))


def _judge(store: SessionStore, ids: list[str], cfg: MemoryConfig, now_ms: int) -> None:
    """One memory_judge call's work after parsing: plan, metas + index, telemetry."""

    updates = [
        {
            "id": fid,
            "alpha": 0.3 + 0.1 * (n % 7),
            "beta": n % 5 - 2,
            "keywords": [_WORDS[(n + k) % len(_WORDS)] for k in range(4)],
            "events": [f"事件{n % 3}"],
        }
        for n, fid in enumerate(ids)
    ]
    plan = plan_judge(
        {"updates": updates},
        folder=lambda fid: folder_facts(store, fid),
        text_of=lambda fid: f"{fid} 的讨论：{_WORDS[0]} {_WORDS[1]}",
        label_counts=store.index_stats.label_counts(),
        cfg=cfg,
        now_ms=now_ms,
    )
    assert not plan.is_error and len(plan.changes) == len(ids), plan.text
    write_plan(store, plan, telemetry=True)


def _floor(store: SessionStore, ids: list[str], scratch: Path) -> tuple[float, int]:
    """Seconds and bytes to write the metas the call wrote, atomically and durably."""
    blobs = [(scratch / fid, (store.paths.folder(fid) / "meta.json").read_bytes()) for fid in ids]
    t0 = time.perf_counter()
    for folder, data in blobs:
        write_bytes_atomic(folder / "meta.json", data)
    return time.perf_counter() - t0, sum(len(d) for _, d in blobs)


def run_one(folders: int, calls: int) -> dict[str, Any]:
    cfg = MemoryConfig.defaults()
    with tempfile.TemporaryDirectory(prefix="rofmd-bench-judge-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        make_session(root, folders, PER_CALL * calls)
        store = open_session(root, "bench")
        setup = time.perf_counter() - t0
        scratch = root / "floor"
        times: list[float] = []
        floors: list[float] = []
        written: list[int] = []
        floor_bytes: list[int] = []
        first = folders - PER_CALL * calls
        logged: list[int] = []
        for c in range(calls):
            ids = [_fid(first + c * PER_CALL + k) for k in range(PER_CALL)]
            for fid in ids:
                (scratch / fid).mkdir(parents=True)
            log_before = file_size(store.paths.index_log)
            with using_fs(CountingFs()) as fs:
                t0 = time.perf_counter()
                _judge(store, ids, cfg, BASE_MS + folders * 60_000 + c)
                times.append(time.perf_counter() - t0)
            written.append(fs.bytes)
            logged.append(file_size(store.paths.index_log) - log_before)
            seconds, size = _floor(store, ids, scratch)
            floors.append(seconds)
            floor_bytes.append(size)
        assert all(store.get_entry(_fid(first + k)).scored for k in range(PER_CALL * calls))
        index_bytes = store.paths.index.stat().st_size
    p50, floor50 = statistics.median(times), statistics.median(floors)
    # a fold rewrites index.json once per budget's worth of log: its share of each call
    per_call = statistics.median(written)
    log_per_call = statistics.median(d for d in logged if d > 0) if any(logged) else 0
    amortized = per_call + index_bytes * log_per_call / index_log_budget(index_bytes)
    return {
        "folders": folders,
        "calls": calls,
        "p50_ms": round(p50 * 1000, 2),
        "max_ms": round(max(times) * 1000, 2),
        "floor_ms": round(floor50 * 1000, 2),
        "ratio": round(p50 / floor50, 2),
        "kB/call": round(statistics.mean(written) / 1000, 1),
        "floor_kB": round(statistics.mean(floor_bytes) / 1000, 1),
        "bytes_ratio": round(statistics.mean(written) / statistics.mean(floor_bytes), 2),
        "amortized_kB": round(amortized / 1000, 1),
        "index_MB": round(index_bytes / 1e6, 1),
        "setup_s": round(setup, 1),
    }


def run_judge_bench(sizes: tuple[int, ...], calls: int) -> list[dict[str, Any]]:
    """One row per folder count (see the module docstring)."""
    return [run_one(n, calls) for n in sizes]
