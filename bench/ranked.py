"""`ranked` recall at 10^3-10^5 folders against bm25s over the same documents.

The folders are synthetic: each has a text of 4-12 messages (lines) of 3-12 words
drawn from a Zipf-like vocabulary of English words and Chinese characters (a few very
common words, a long tail of rare ones) and 3-16 keywords from the same vocabulary. A query is 2-6 words of
the vocabulary (the common ones included, as real questions do).

* bm25s: the folders' documents as the relevance index sees them (the same search
  terms: text plus boosted fields, from `engine.relevance.analyzer`), pre-tokenised;
  the query's search terms; top-10 (`retrieve`, which scores and selects).
* rofmd selection: `select_ranked` with the packaged `recall.ranked` settings (score
  every folder with BM25F, rerank the best by their best passage, α prior, relative
  threshold, the walk that picks k = 10); `select_nopassage` is the same with
  `passageWeight: 0`.
* rofmd round: the whole `run_round` (query analysis, keyword candidates, selection,
  commit, block trimming, rendering) with an in-memory loader instead of the disk
  read of the picked folders, a fresh state per query.
* first recall after a restart: the index's snapshot (`engine.relevance.snapshot`)
  loaded from a file, synced to the same entries (every entry checked against its
  stored key; no text read, which the run asserts) and one `select_ranked`, next to the
  full build it replaces (`build_s`, which reads the texts from memory: from disk it is
  slower still). Median of 3 loads from the page cache; `snapshot_mb` is the file,
  `restored_mb` the traced memory of the restored and checked index (what a daemon
  holds after a restart; `index_mb` is that of the fresh build, whose terms each own
  their posting arrays).

The three are timed interleaved, query by query, so the machine's state is shared, in an
order that rotates (`_ORDERS`): run right after the other selection of the same query,
either would find its postings in the CPU's caches.
Reported: medians and p99 (ms), the ratio of the medians, build times and the traced
memory of the relevance index.
"""

from __future__ import annotations

import gc
import random
import statistics
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench.recall import percentile
from engine.recall import Addition, CandidateIndex, RecallState, analyze_query, run_round
from engine.recall.candidates import MatchesOnce
from engine.recall.fair import Pick
from engine.recall.ranked import select_ranked
from engine.relevance.analyzer import search_terms
from engine.relevance.index import FIELD_BOOSTS, RelevanceIndex
from engine.relevance.snapshot import read_snapshot, write_snapshot
from engine.store import IndexEntry
from tests.engine.recall_fixtures import config

_EN = [
    "budget",
    "guitar",
    "marathon",
    "pottery",
    "sushi",
    "camping",
    "violin",
    "chess",
    "tango",
    "deploy",
    "server",
    "port",
    "release",
    "freeze",
    "invoice",
    "contract",
    "client",
    "meeting",
    "review",
    "design",
    "database",
    "cache",
    "proxy",
    "garden",
    "recipe",
    "concert",
    "ticket",
    "flight",
    "hotel",
    "museum",
    "painting",
    "novel",
    "podcast",
    "puppy",
    "kitten",
    "bakery",
    "coffee",
    "tea",
    "lesson",
    "course",
    "exam",
    "project",
    "launch",
    "migration",
    "backup",
    "cluster",
]
_CJK = "星港项目接口网关灰度比例登录重构日本旅行方案评审故障排查数据库缓存部署监控告警预算会议合同客户需求测试发布"


_ORDERS = (("sel", "sel0", "bm"), ("sel0", "bm", "sel"), ("bm", "sel", "sel0"))
"""The order the three timed calls run in, rotating query by query: the second of the
two selections reads the postings the first just brought into the CPU's caches, so each
of the three takes each place equally often."""


def _vocab(rng: random.Random, size: int) -> list[str]:
    words: list[str] = list(_EN)
    seen = set(words)
    while len(words) < size:
        if rng.random() < 0.5:
            w = "".join(rng.choice(_CJK) for _ in range(rng.randint(2, 3)))
        else:
            w = f"{rng.choice(_EN)}{rng.choice('abcdefghklmnprstvz')}{rng.randint(1, 999)}"
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def _zipf(rng: random.Random, vocab: list[str]) -> str:
    return vocab[min(len(vocab) - 1, int(len(vocab) * rng.random() ** 3))]


def make_corpus(n: int, seed: int = 11) -> tuple[list[IndexEntry], dict[str, str], list[str]]:
    rng = random.Random(seed)
    vocab = _vocab(rng, max(3000, n // 3))
    base = 1_780_000_000_000
    entries: list[IndexEntry] = []
    texts: dict[str, str] = {}
    for i in range(n):
        fid = f"mem-{i:08d}"
        lines = [
            " ".join(_zipf(rng, vocab) for _ in range(rng.randint(3, 12)))
            for _ in range(rng.randint(4, 12))
        ]
        texts[fid] = "\n".join(lines)
        kws = list(dict.fromkeys(_zipf(rng, vocab) for _ in range(rng.randint(3, 16))))
        alpha = round(rng.uniform(0.01, 1.0), 4)
        entries.append(IndexEntry(id=fid, alpha=alpha, createdAt=base + i * 1000, keywords=kws))
    queries = [" ".join(_zipf(rng, vocab) for _ in range(rng.randint(2, 6))) for _ in range(300)]
    return entries, texts, queries


def _documents(
    index: RelevanceIndex, entries: list[IndexEntry], texts: dict[str, str]
) -> list[list[str]]:
    """Each folder's terms as the relevance index counts them, for bm25s."""
    docs: list[list[str]] = []
    for e in entries:
        counts: Counter[str] = Counter(search_terms(texts[e.id]))
        for kw in e.keywords:
            for term in index.query_terms(kw):
                counts[term] += FIELD_BOOSTS["keywords"]
        docs.append([t for t, c in sorted(counts.items()) for _ in range(c)])
    return docs


def _restart(
    rel: RelevanceIndex, entries: list[IndexEntry], index: CandidateIndex, query: str
) -> dict[str, Any]:
    """Snapshot `rel`, then time load + sync + one selection (module docstring)."""
    cfg = config(mode="ranked")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot"
        t0 = time.perf_counter()
        size = write_snapshot(path, rel, owner="bench", text_version="bench")
        write_s = time.perf_counter() - t0
        runs: list[tuple[float, float, float]] = []
        for _ in range(3):
            reads: list[str] = []

            def text_of(fid: str, reads: list[str] = reads) -> str:
                reads.append(fid)
                return ""

            gc.collect()
            t1 = time.perf_counter()
            restored = read_snapshot(
                path, text_of, owner="bench", extra_stopwords=(), text_version="bench"
            )
            t2 = time.perf_counter()
            restored.sync(entries)
            t3 = time.perf_counter()
            q = analyze_query(query, cfg)
            matches = MatchesOnce(index, q, cfg.recall.min_alpha)
            select_ranked(restored, index, matches, q, RecallState(persist=False), cfg, 10)
            t4 = time.perf_counter()
            assert not reads, "a restart read folder texts"
            runs.append((t2 - t1, t3 - t2, t4 - t1))
            del restored
        gc.collect()
        tracemalloc.start()
        restored = read_snapshot(
            path, text_of, owner="bench", extra_stopwords=(), text_version="bench"
        )
        restored.sync(entries)
        gc.collect()
        restored_mb = tracemalloc.get_traced_memory()[0] / 1e6
        tracemalloc.stop()
        del restored
    load_s, sync_s, total_s = (statistics.median(r[i] for r in runs) for i in range(3))
    return {
        "restored_mb": round(restored_mb, 1),
        "restart_s": round(total_s, 3),
        "load_s": round(load_s, 3),
        "check_s": round(sync_s, 3),
        "snapshot_mb": round(size / 1e6, 1),
        "snap_write_s": round(write_s, 2),
    }


def run_ranked_bench(sizes: tuple[int, ...], queries_per_size: int = 300) -> list[dict[str, Any]]:
    """One row per size."""
    import bm25s  # type: ignore[import-untyped]

    cfg = config(mode="ranked")
    cfg0 = config(mode="ranked", ranked={"passageWeight": 0})
    rows = []
    for n in sizes:
        entries, texts, queries = make_corpus(n)
        queries = queries[:queries_per_size]
        gc.collect()
        tracemalloc.start()
        t0 = time.perf_counter()
        rel = RelevanceIndex(texts.__getitem__)
        rel.sync(entries)
        build_s = time.perf_counter() - t0
        mem_mb = tracemalloc.get_traced_memory()[0] / 1e6
        tracemalloc.stop()
        index = CandidateIndex(entries, cfg, n)
        docs = _documents(rel, entries, texts)
        t1 = time.perf_counter()
        retriever = bm25s.BM25()
        retriever.index(docs, show_progress=False)
        bm_build = time.perf_counter() - t1
        del docs

        def loader(p: Pick, index: CandidateIndex = index) -> Addition:
            f = index.folders[index.by_id[p.id]]
            return Addition(
                f.id, f.alpha, f.beta, f.created_at, keywords=list(f.keywords), body="x"
            )

        ms: dict[str, list[float]] = {"sel": [], "sel0": [], "bm": []}
        round_ms: list[float] = []
        picked = 0
        for i, q in enumerate(queries):
            query = analyze_query(q, cfg)
            terms = rel.query_terms(q) or ["_"]
            state = RecallState(persist=False)
            # made by the selection if it falls back to it, as in a round
            matches = MatchesOnce(index, query, cfg.recall.min_alpha)
            runs: dict[str, Callable[[], Any]] = {
                "sel": partial(select_ranked, rel, index, matches, query, state, cfg, 10),
                "sel0": partial(select_ranked, rel, index, matches, query, state, cfg0, 10),
                "bm": partial(retriever.retrieve, [terms], k=min(10, n), show_progress=False),
            }
            results: dict[str, Any] = {}
            for name in _ORDERS[i % len(_ORDERS)]:
                t2 = time.perf_counter()
                results[name] = runs[name]()
                ms[name].append((time.perf_counter() - t2) * 1000)
            sel = results["sel"]
            state = RecallState(persist=False)
            t4 = time.perf_counter()
            out = run_round(
                None,
                index,
                state,
                query,
                cfg,
                now_ms=0,
                turn=1,
                session_key="bench",
                loader=loader,
                relevance=rel,
            )
            t5 = time.perf_counter()
            round_ms.append((t5 - t4) * 1000)
            picked += len(out.recalled)
            assert len(sel.selection.picks) <= 10
        sel_ms, sel0_ms, bm_ms = ms["sel"], ms["sel0"], ms["bm"]
        sel_med, sel0_med, bm_med, round_med = (
            statistics.median(x) for x in (sel_ms, sel0_ms, bm_ms, round_ms)
        )
        restart = _restart(rel, entries, index, queries[0])
        rows.append(
            {
                "folders": n,
                "select_p50": round(sel_med, 3),
                "select_p99": round(percentile(sel_ms, 99), 3),
                "nopassage_p50": round(sel0_med, 3),
                "round_p50": round(round_med, 3),
                "bm25s_p50": round(bm_med, 3),
                "bm25s_p99": round(percentile(bm_ms, 99), 3),
                "select/bm25s": round(sel_med / bm_med, 2) if bm_med else None,
                "nopassage/bm25s": round(sel0_med / bm_med, 2) if bm_med else None,
                "round/bm25s": round(round_med / bm_med, 2) if bm_med else None,
                "build_s": round(build_s, 2),
                **restart,
                "restart/build": round(restart["restart_s"] / build_s, 4) if build_s else None,
                "bm25s_build_s": round(bm_build, 2),
                "index_mb": round(mem_mb, 1),
                "picks/q": round(picked / len(queries), 1),
            }
        )
    return rows
