"""Automatic recall latency at 10^3, 10^4 and 10^5 folders, against bm25s.

The store is synthetic and in memory (index entries only, no folders on disk): each
folder has 3-16 keywords drawn from a Zipf-like vocabulary of CJK and Latin terms,
α uniform in 0.01..1. A query is 2-5 terms of the same vocabulary.

* rofmd: one full automatic-recall round (query analysis, candidate lookup with
  bidirectional substring matching and category expansion, the FAIR-DRI lanes,
  commit and block trimming) with an in-memory loader standing in for the disk read
  of the picked folders; a fresh recall state per query (first-round cost).
* bm25s: the same folders' keywords as pre-tokenised documents, the same queries'
  terms, top-10 retrieval (exact-term BM25 scoring, no substring matching).

Reported: median and p99 per query (ms), the ratio rofmd/bm25s of the medians, the
index build times, and the traced memory of the rofmd index at each size.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
import tracemalloc
from typing import Any

from engine.config import MemoryConfig
from engine.recall import Addition, CandidateIndex, RecallState, analyze_query, run_round
from engine.recall.fair import Pick
from tests.engine.recall_fixtures import Entry

_CJK = "星港项目接口网关灰度比例登录重构日本旅行方案评审故障排查数据库缓存部署监控告警预算会议合同客户需求测试发布"


def _vocab(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        if rng.random() < 0.6:
            n = rng.randint(2, 4)
            words.add("".join(rng.choice(_CJK) for _ in range(n)))
        else:
            words.add(f"{rng.choice('abcdefghklmnprstvz')}{rng.randint(10, 99999)}")
    return sorted(words)


def _zipf_pick(rng: random.Random, vocab: list[str]) -> str:
    # rank ~ 1/u: a few very common terms, a long tail of rare ones
    idx = int(len(vocab) * (rng.random() ** 3))
    return vocab[min(idx, len(vocab) - 1)]


def make_entries(n: int, seed: int = 7) -> tuple[list[Entry], list[str]]:
    rng = random.Random(seed)
    vocab = _vocab(rng, max(2000, n // 2))
    base = 1_780_000_000_000
    entries = []
    for i in range(n):
        kws = list(dict.fromkeys(_zipf_pick(rng, vocab) for _ in range(rng.randint(3, 16))))
        entries.append(
            Entry(f"mem-{i:08d}", round(rng.uniform(0.01, 1.0), 4), base + i * 1000, kws)
        )
    queries = [
        " ".join(_zipf_pick(rng, vocab) for _ in range(rng.randint(2, 5))) for _ in range(200)
    ]
    return entries, queries


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def run_recall_bench(sizes: tuple[int, ...], queries_per_size: int = 200) -> list[dict[str, Any]]:
    """One row per size."""
    import bm25s  # type: ignore[import-untyped]

    cfg = MemoryConfig.defaults()
    rows = []
    for n in sizes:
        entries, queries = make_entries(n)
        queries = queries[:queries_per_size]
        gc.collect()
        tracemalloc.start()
        CandidateIndex(entries, cfg, n)
        mem_mb = tracemalloc.get_traced_memory()[0] / 1e6
        tracemalloc.stop()
        gc.collect()
        t0 = time.perf_counter()
        index = CandidateIndex(entries, cfg, n)
        build_s = time.perf_counter() - t0

        def loader(p: Pick, index: CandidateIndex = index) -> Addition:
            f = index.folders[index.by_id[p.id]]
            return Addition(
                f.id, f.alpha, f.beta, f.created_at, keywords=list(f.keywords), body="x"
            )

        lat: list[float] = []
        picked = 0
        for q in queries:
            state = RecallState(persist=False)
            t1 = time.perf_counter()
            out = run_round(
                None,
                index,
                state,
                analyze_query(q, cfg),
                cfg,
                now_ms=0,
                turn=1,
                session_key="bench",
                loader=loader,
            )
            lat.append((time.perf_counter() - t1) * 1000)
            picked += len(out.recalled)

        t2 = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index([e.keywords for e in entries], show_progress=False)
        bm_build = time.perf_counter() - t2
        qtok = [analyze_query(q, cfg).keywords for q in queries]
        bm_lat: list[float] = []
        for toks in qtok:
            t3 = time.perf_counter()
            retriever.retrieve([list(toks) or ["_"]], k=min(10, n), show_progress=False)
            bm_lat.append((time.perf_counter() - t3) * 1000)
        med, bm_med = statistics.median(lat), statistics.median(bm_lat)
        rows.append(
            {
                "folders": n,
                "p50_ms": round(med, 3),
                "p99_ms": round(percentile(lat, 99), 3),
                "bm25s_p50": round(bm_med, 3),
                "bm25s_p99": round(percentile(bm_lat, 99), 3),
                "ratio_p50": round(med / bm_med, 2) if bm_med else None,
                "build_s": round(build_s, 3),
                "bm25s_build_s": round(bm_build, 3),
                "index_mb": round(mem_mb, 1),
                "picks/q": round(picked / len(queries), 1),
            }
        )
    return rows
