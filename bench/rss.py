"""Daemon memory at 10⁵ folders: resident size after load and recall rounds, and where
the bytes are.

One session of 10⁵ folders (`bench.stores`: built once, cached, with its relevance
snapshot). Per recall mode (`ranked`, the packaged default, which also holds the
relevance index; `fair`, which does not), a fresh daemon is started and asked:

* its resident size idle (``status.memory.rssBytes``, Linux `/proc/self/statm`);
* the first user message of the session (opens the store, builds the recall index,
  restores the relevance index from its snapshot: what a restart costs), timed;
* ``rounds`` more user messages, each a recall round, then its resident size again, and
  once more after :data:`SETTLE_S` (``settled``: what the daemon holds once it handed
  back what loading freed);
* then a second daemon over what the first left (``restart``): the rows and recall
  index snapshots it wrote, its new messages, the same sizes.

The modes alternate, ``reps`` times each; reported per mode: the medians, the spread of
the loaded size, and the bytes per folder it adds over idle. The goal of issue 10 is
≤ 200 MB loaded.

`breakdown` measures in this process, with `tracemalloc`, what each part holds once
loaded: the store (index rows, counters, ids), the recall candidate index, the relevance
index (restored from the snapshot and checked), the objects the garbage collector tracks
(each a cost of every full collection), and what a full collection costs over them, then
once they are frozen as the daemon freezes a loaded session's data.
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

from bench.ranked import make_corpus
from bench.stores import StoreSpec, prepared_root, reset_root
from tests.e2e.harness import LineSocket, running_daemon

FOLDERS = 100_000
SESSION = "bench-big"
GOAL_MB = 200
SETTLE_S = 2.0
"""How long after its rounds a daemon's size is read again: its post-load trim (at most
once a second, `rofmd.server.memory_release`) has run by then."""
QUERIES = "queries.json"


def store_base(folders: int) -> tuple[Path, list[str]]:
    """The cached memory root of one session of `folders` folders, and its queries.
    Each call resets the root to the store as built (`bench.stores.reset_root`): the
    snapshots a daemon left (rows, keyword index) go, so the next daemon parses and
    builds. Call it once before daemons that should find what the previous one left."""
    spec = StoreSpec(SESSION, folders, 7)
    base = prepared_root(f"rss-1x{folders}", [spec])
    path = base / QUERIES
    if not path.is_file():
        path.write_bytes(orjson.dumps(make_corpus(folders, seed=spec.seed)[2]))
    queries: list[str] = orjson.loads(path.read_bytes())
    return base, queries


def message(n: int, text: str, folders: int) -> dict[str, Any]:
    """The n-th user message of the session, `text`, after every folder's time."""
    return {
        "session": {"id": SESSION},
        "message": {
            "id": f"rss-{n}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        },
        "time": 1_780_000_000_000 + folders * 60_000 + n * 5_000,
    }


def _rss(c: LineSocket, n: int) -> int:
    answer = c.call(n, "status")
    rss: int = answer["result"]["memory"]["rssBytes"]
    return rss


def _one(
    base: Path,
    mode: str,
    queries: list[str],
    folders: int,
    rounds: int,
    *,
    restart: bool = False,
) -> dict[str, float]:
    """One daemon: a first open of the store as built, or (`restart`) a restart over the
    snapshots the previous daemon left, its messages new ones (a message the recall state
    already answered would run no round)."""
    config = {"recall": {"mode": mode}}
    first_n = rounds + 1 if restart else 0
    if not restart:
        reset_root(base)  # each first open starts from the store as built
    with running_daemon(base=base, config=config, args=["--log-level", "warning"]) as d:
        c = LineSocket(d.socket_path, timeout=600)
        c.call(1, "initialize", {"protocolVersion": 1, "capabilities": {"systemPrompt": True}})
        idle = _rss(c, 2)

        def ask(n: int) -> None:
            q = queries[(first_n + n) % len(queries)]
            answer = c.call(10 + n, "agent/inbox/inserted", message(first_n + n, q, folders))
            assert "result" in answer, answer

        t0 = time.perf_counter()
        ask(0)
        first_s = time.perf_counter() - t0
        lat: list[float] = []
        for n in range(1, rounds + 1):
            t1 = time.perf_counter()
            ask(n)
            lat.append(time.perf_counter() - t1)
        loaded = _rss(c, 5)
        time.sleep(SETTLE_S)  # the daemon hands back what the load freed (its trim)
        settled = _rss(c, 6)
        c.close()
    return {
        "idle": idle / 1e6,
        "loaded": loaded / 1e6,
        "settled": settled / 1e6,
        "first_s": first_s,
        "round_ms": statistics.median(lat) * 1000,
        "round_max_ms": max(lat) * 1000,
    }


def run_rss(
    reps: int = 3,
    rounds: int = 100,
    *,
    folders: int = FOLDERS,
    modes: tuple[str, ...] = ("ranked", "fair"),
) -> list[dict[str, Any]]:
    """Rows for the bench table (module docstring)."""
    base, queries = store_base(folders)
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    again: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for _ in range(max(1, reps)):
        for mode in modes:
            runs[mode].append(_one(base, mode, queries, folders, rounds))
            again[mode].append(_one(base, mode, queries, folders, rounds, restart=True))
    rows = []
    for mode, rs in runs.items():

        def med(key: str, rs: list[dict[str, float]] = rs) -> float:
            return statistics.median(r[key] for r in rs)

        loaded = [r["loaded"] for r in rs]
        rows.append(
            {
                "mode": mode,
                "folders": folders,
                "reps": len(rs),
                "idle_MB": round(med("idle"), 1),
                "loaded_MB": round(med("loaded"), 1),
                "range_MB": f"{min(loaded):.0f}-{max(loaded):.0f}",
                "B/folder": round((med("loaded") - med("idle")) * 1e6 / folders),
                "goal_MB": GOAL_MB,
                "settled_MB": round(med("settled"), 1),
                "restart_MB": round(med("loaded", again[mode]), 1),
                "restart_settled_MB": round(med("settled", again[mode]), 1),
                "first_s": round(med("first_s"), 2),
                "restart_first_s": round(med("first_s", again[mode]), 2),
                "round_p50": round(med("round_ms"), 2),
                "round_max": round(med("round_max_ms"), 1),
            }
        )
    return rows


def breakdown(folders: int = FOLDERS) -> dict[str, Any]:
    """Traced megabytes of each part of a loaded session (module docstring)."""
    from engine.config import load_config
    from engine.recall import CandidateIndex
    from engine.relevance.folder_text import synced_index
    from engine.store import open_session

    base, _ = store_base(folders)
    cfg = load_config(None, {}).config
    gc.collect()
    tracked0 = len(gc.get_objects())
    tracemalloc.start()
    try:
        at = tracemalloc.get_traced_memory()[0]
        store = open_session(base / "mem", SESSION)
        store_b = tracemalloc.get_traced_memory()[0] - at
        tracked1 = len(gc.get_objects())
        at = tracemalloc.get_traced_memory()[0]
        index = CandidateIndex(store.index, cfg, 1)
        index_b = tracemalloc.get_traced_memory()[0] - at
        tracked2 = len(gc.get_objects())
        at = tracemalloc.get_traced_memory()[0]
        rel, _ = synced_index(None, store, cfg.keywords.extra_stopwords)
        gc.collect()
        rel_b = tracemalloc.get_traced_memory()[0] - at
        tracked3 = len(gc.get_objects())
    finally:
        tracemalloc.stop()
    t0 = time.perf_counter()
    gc.collect()
    full_gc_s = time.perf_counter() - t0
    gc.freeze()  # what the daemon does once a session is loaded (handlers.long_lived)
    t0 = time.perf_counter()
    gc.collect()
    frozen_gc_s = time.perf_counter() - t0
    gc.unfreeze()
    assert len(index) and len(rel)
    return {
        "folders": folders,
        "store_MB": round(store_b / 1e6, 1),
        "recall_index_MB": round(index_b / 1e6, 1),
        "relevance_MB": round(rel_b / 1e6, 1),
        "store_objs": tracked1 - tracked0,
        "recall_objs": tracked2 - tracked1,
        "tracked": tracked3,
        "full_gc_ms": round(full_gc_s * 1000, 1),
        "frozen_gc_ms": round(frozen_gc_s * 1000, 1),
    }
