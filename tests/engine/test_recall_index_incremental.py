"""`CandidateIndex.update`: an index updated in place equals a fresh build.

Determinism guarantee: the same store, state and query give the same picks whether
the daemon rebuilt its index (restart) or updated it incrementally. These tests
compare, after every change, the updated index with `CandidateIndex(entries, cfg)`
built fresh: the internal structures (folder numbers, postings, bigram index,
category postings), every query's matches, τ, and whole recall rounds.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.recall import make_entries
from engine.config import ENGINE_DEFAULTS, MemoryConfig, deep_merge
from engine.recall import Addition, CandidateIndex, RecallState, analyze_query, run_round
from engine.recall.assistant_said import AssistantQuery
from engine.recall.fair import Pick
from handlers.recall_state import candidate_index
from handlers.sessions import SessionState
from tests.engine.recall_fixtures import BASE_MS, Entry, new_store, write_folders

VOCAB = [
    "星港",
    "星港项目",
    "项目",
    "项目评审",
    "接口网关",
    "网关",
    "灰度比例",
    "Redis",
    "redis",
    "redis集群",
    "api",
    "api-gateway",
    "gateway",
    "k8s",
    "喜欢",
    "喜欢吃辣",
    "约定",
    "决定了",
    "规则",
    "日本旅行",
    "旅行",
    "必须",
    "b c",
    "Ｒｅｄｉｓ",
    " ",
]
TITLES = ["", "我喜欢的规则", "星港 gateway", "约定好了", "普通标题"]
SAID = ["叫你小鲸", "我周三提醒你去取快递", "call", "Whale", "提醒"]
"""「你说过」 channel phrases (`assistantKeywords`)."""
ALPHAS = [0.0, 0.05, 0.3, 0.59, 0.6, 0.61, 0.9, 1.0]
QUERIES = [
    "星港项目的接口网关怎么样了",
    "Redis 集群",
    "redis",
    "我喜欢吃辣的",
    "我们约定的规则",
    "api gateway 灰度比例",
    "日本旅行计划",
    "项目",
    "k8s 部署必须决定了",
    "网关",
    "你好",
]


def _cfg(**over: Any) -> MemoryConfig:
    return MemoryConfig.model_validate(deep_merge(ENGINE_DEFAULTS, over))


CONFIGS = [
    _cfg(),
    _cfg(match={"expandLatinCase": True, "cjkBigram": True}),
    _cfg(keywords={"matchMode": "exact"}, recall={"categoryMatch": {"alphaMin": 0.3}}),
    _cfg(recall={"assistantSaid": {"enabled": False}}),
]


def structure(ix: CandidateIndex) -> tuple[Any, ...]:
    """Everything a query reads, with key ids (internal) replaced by the keys (the
    channel's keys, added on first use, added first)."""
    asst = ix.assistant_postings()
    postings = {key: list(ix._postings[kid]) for key, kid in ix._key_ids.items()}
    bigram = {g: sorted(ix._keys[kid] for kid in arr) for g, arr in ix._bigram.items()}
    cats = {name: sorted(ns) for name, ns in ix.categories.items()}
    return (list(ix.folders), dict(ix.by_id), postings, bigram, ix._max_key, cats, asst, len(ix))


def observe(ix: CandidateIndex, text: str, cfg: MemoryConfig, min_alpha: float) -> Any:
    """One query's matches by folder id (and the index order legacy walks them in)."""
    m = ix.match(analyze_query(text, cfg), min_alpha=min_alpha)

    def ids(ns: Any) -> frozenset[str]:
        return frozenset(ix.folders[n].id for n in ns)

    said = ix.match_assistant(
        AssistantQuery("param", "", ("叫你", "提醒", "call")), min_alpha=min_alpha
    )
    return (
        [(s.name, s.kind, ids(s.posting)) for s in m.seeds],
        ids(m.candidates),
        {ix.folders[n].id: c for n, c in m.hits.items()},
        list(m.categories),
        [ix.folders[n].id for n in sorted(m.candidates)],
        {ix.folders[n].id: (c, said.score[n]) for n, c in said.hits.items()},
    )


def assert_same(ix: CandidateIndex, entries: list[Entry], cfg: MemoryConfig, extra: Any) -> None:
    fresh = CandidateIndex(entries, cfg)
    assert structure(ix) == structure(fresh)
    for text in [*QUERIES, *extra]:
        for min_alpha in (0.0, 0.6):
            assert observe(ix, text, cfg, min_alpha) == observe(fresh, text, cfg, min_alpha)
    for ratio, min_posting in ((0.002, 8), (0.3, 1), (0.5, 0)):
        assert ix.rare_threshold(ratio, min_posting) == fresh.rare_threshold(ratio, min_posting)


# -- changes, as the store makes them (a changed entry is a new object) ------------
_serial = iter(range(10**9))


def new_entry(
    scored: bool,
    alpha: float,
    kws: list[str],
    title: str,
    created: int,
    said: list[str] | None = None,
) -> Entry:
    return Entry(
        id=f"mem-{next(_serial):06d}",
        alpha=alpha,
        createdAt=BASE_MS + created,
        keywords=kws,
        scored=scored,
        title=title,
        assistantKeywords=said,
    )


kw_lists = st.lists(st.sampled_from(VOCAB), max_size=5)
said_lists = st.none() | st.lists(st.sampled_from(SAID), max_size=3)
entry_st = st.builds(
    new_entry,
    st.booleans(),
    st.sampled_from(ALPHAS),
    kw_lists,
    st.sampled_from(TITLES),
    st.integers(0, 5),
    said_lists,
)
op_st = st.one_of(
    st.tuples(st.just("add"), entry_st),
    st.tuples(st.just("insert"), st.integers(0, 10**6), entry_st),
    st.tuples(st.just("score"), st.integers(0, 10**6), st.sampled_from(ALPHAS), kw_lists),
    st.tuples(st.just("unscore"), st.integers(0, 10**6)),
    st.tuples(st.just("alpha"), st.integers(0, 10**6), st.sampled_from(ALPHAS)),
    st.tuples(st.just("keywords"), st.integers(0, 10**6), kw_lists),
    st.tuples(st.just("title"), st.integers(0, 10**6), st.sampled_from(TITLES)),
    st.tuples(st.just("said"), st.integers(0, 10**6), said_lists),
    st.tuples(st.just("same"), st.integers(0, 10**6)),
    st.tuples(st.just("remove"), st.integers(0, 10**6)),
)


def apply(entries: list[Entry], op: tuple[Any, ...]) -> list[Entry]:
    out = list(entries)
    kind = op[0]
    if kind == "add":
        out.append(op[1])
        return out
    if kind == "insert":
        out.insert(op[1] % (len(out) + 1), op[2])
        return out
    if not out:
        return out
    if kind == "score":
        pending = [i for i, e in enumerate(out) if not e.scored] or list(range(len(out)))
        i = pending[op[1] % len(pending)]
        out[i] = dataclasses.replace(out[i], scored=True, alpha=op[2], keywords=op[3])
        return out
    i = op[1] % len(out)
    e = out[i]
    if kind == "unscore":
        out[i] = dataclasses.replace(e, scored=False)
    elif kind == "alpha":
        out[i] = dataclasses.replace(e, alpha=op[2])
    elif kind == "keywords":
        out[i] = dataclasses.replace(e, keywords=op[2])
    elif kind == "title":
        out[i] = dataclasses.replace(e, title=op[2])
    elif kind == "said":
        out[i] = dataclasses.replace(e, assistantKeywords=op[2])
    elif kind == "same":  # a new object with the same indexed fields (e.g. pendingSince)
        out[i] = dataclasses.replace(e)
    else:
        del out[i]
    return out


@settings(max_examples=150, deadline=None)
@given(
    cfg=st.sampled_from(CONFIGS),
    initial=st.lists(entry_st, max_size=14),
    batches=st.lists(st.lists(op_st, min_size=1, max_size=4), min_size=1, max_size=10),
    extra=st.lists(
        st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4).map(" ".join), max_size=4
    ),
)
def test_update_equals_fresh_build(
    cfg: MemoryConfig,
    initial: list[Entry],
    batches: list[list[tuple[Any, ...]]],
    extra: list[str],
) -> None:
    entries = initial
    ix = CandidateIndex(entries, cfg, 0)
    assert_same(ix, entries, cfg, extra)
    for step, batch in enumerate(batches, 1):
        for op in batch:
            entries = apply(entries, op)
        assert ix.update(entries, cfg, step, max_changes=math.inf)
        assert ix.version == step
        assert_same(ix, entries, cfg, extra)


def test_update_scattered_changes_on_a_larger_index() -> None:
    """Bench-shaped folders (Zipf keywords), pending ones interleaved, many kinds of
    change per step, including judging in the middle and removing the oldest."""
    cfg = CONFIGS[1]
    base, queries = make_entries(1500, seed=11)
    entries: list[Any] = [
        dataclasses.replace(e, scored=i % 9 != 0, title=TITLES[i % len(TITLES)])
        for i, e in enumerate(base)
    ]
    ix = CandidateIndex(entries, cfg)
    rng = random.Random(5)
    for step in range(25):
        entries = list(entries)
        for k in range(rng.randint(1, 40)):
            r = rng.random()
            i = rng.randrange(len(entries))
            e = entries[i]
            if r < 0.15:
                del entries[i]
            elif r < 0.35:
                entries[i] = dataclasses.replace(e, scored=not e.scored)
            elif r < 0.55:
                entries[i] = dataclasses.replace(e, alpha=rng.choice(ALPHAS))
            elif r < 0.75:
                kws = [*rng.choice(entries).keywords[:3], f"新词{rng.randint(0, 9)}", "喜欢"]
                entries[i] = dataclasses.replace(e, keywords=kws)
            else:
                entries.append(dataclasses.replace(e, id=f"new-{step}-{k}", scored=r < 0.9))
        assert ix.update(entries, cfg, step, max_changes=math.inf)
        assert_same(ix, entries, cfg, queries[:30])


def test_update_falls_back_and_leaves_the_index_alone() -> None:
    cfg = CONFIGS[0]
    entries = [new_entry(True, 0.9, ["星港项目", "网关"], "", i) for i in range(20)]
    ix = CandidateIndex(entries, cfg, "v0")
    before = structure(ix)
    # too many changes for the default 20 %
    many = [dataclasses.replace(e, alpha=0.1) for e in entries[:10]] + entries[10:]
    assert not ix.update(many, cfg, "v1")
    # other index parameters
    assert not ix.update(entries, CONFIGS[1], "v1")
    # reordered folders
    assert not ix.update([entries[1], entries[0], *entries[2:]], cfg, "v1", max_changes=math.inf)
    # duplicate ids
    dup = dataclasses.replace(entries[3], alpha=0.5)
    assert not ix.update([*entries, dup], cfg, "v1", max_changes=math.inf)
    assert not ix.update([*entries[:5], dup, *entries[5:]], cfg, "v1", max_changes=math.inf)
    twin = new_entry(True, 0.9, ["网关"], "", 30)
    assert not ix.update([*entries, twin, twin], cfg, "v1", max_changes=math.inf)
    assert structure(ix) == before and ix.version == "v0"
    # a few changes are applied; nothing changed only moves the version
    few = [*entries[:3], dataclasses.replace(entries[3], alpha=0.2), *entries[4:]]
    assert ix.update(few, cfg, "v2")
    assert structure(ix) == structure(CandidateIndex(few, cfg))
    assert ix.update(few, cfg, "v3") and ix.version == "v3"


# -- whole rounds -----------------------------------------------------------------
class Twin:
    """The same rounds against an incrementally updated and a freshly built index."""

    def __init__(self, entries: list[Any], cfg: MemoryConfig) -> None:
        self.cfg = cfg
        self.entries = entries
        self.inc = CandidateIndex(entries, cfg, 0)
        self.states = (RecallState(persist=False), RecallState(persist=False))

    def change(self, entries: list[Any]) -> None:
        self.entries = entries
        assert self.inc.update(entries, self.cfg, max_changes=math.inf)

    def ask(self, text: str, turn: int) -> None:
        fresh = CandidateIndex(self.entries, self.cfg)
        outs = []
        for index, state in zip((self.inc, fresh), self.states, strict=True):

            def load(p: Pick, index: CandidateIndex = index) -> Addition:
                f = index.folders[index.by_id[p.id]]
                return Addition(
                    f.id, f.alpha, f.beta, f.created_at, keywords=list(f.keywords), body=f.id
                )

            out = run_round(
                None,
                index,
                state,
                analyze_query(text, self.cfg),
                self.cfg,
                now_ms=BASE_MS,
                turn=turn,
                session_key="twin",
                loader=load,
            )
            outs.append((out, state.to_json(), state.block))
        (a, sa, ba), (b, sb, bb) = outs
        assert a.recall_record == b.recall_record
        assert a.block_record == b.block_record
        assert (a.recalled, a.changed, a.warnings) == (b.recalled, b.changed, b.warnings)
        assert (sa, ba) == (sb, bb)


@pytest.mark.parametrize("mode", ["fair", "deterministic", "legacy"])
def test_rounds_identical_with_incremental_index(mode: str) -> None:
    cfg = _cfg(recall={"mode": mode, "maxRecalledBlocks": 6, "firstGenMax": 4})
    rng = random.Random(17)

    def folder(scored: bool) -> Entry:
        kws = rng.sample(VOCAB[:22], rng.randint(1, 4))
        return new_entry(
            scored, rng.choice(ALPHAS[1:]), kws, rng.choice(TITLES), rng.randint(0, 50)
        )

    entries = [folder(rng.random() < 0.8) for _ in range(120)]
    twin = Twin(entries, cfg)
    turn = 0
    for step in range(30):
        for _ in range(2):
            turn += 1
            twin.ask(rng.choice(QUERIES), turn)
        cur = list(twin.entries)
        action = step % 5
        if action == 0:  # archive commit: pending folders at the end
            cur += [folder(False) for _ in range(rng.randint(1, 3))]
        elif action == 1:  # memory_judge: score pending ones (some in the middle)
            pending = [i for i, e in enumerate(cur) if not e.scored]
            for i in rng.sample(pending, min(len(pending), 3)):
                kws = rng.sample(VOCAB[:22], 3)
                cur[i] = dataclasses.replace(cur[i], scored=True, alpha=0.9, keywords=kws)
        elif action == 2:  # re-score folders, some of them in the block
            ids = set(twin.states[0].ids())
            picks = [i for i, e in enumerate(cur) if e.id in ids][:2]
            picks.append(rng.randrange(len(cur)))
            for i in picks:
                cur[i] = dataclasses.replace(cur[i], alpha=rng.choice(ALPHAS))
        elif action == 3:  # rollback of the newest archive
            del cur[-rng.randint(1, 2) :]
        else:  # keywords / title edits, one folder removed in the middle
            i = rng.randrange(len(cur))
            cur[i] = dataclasses.replace(cur[i], keywords=["喜欢吃辣", "规则"], title="约定")
            del cur[rng.randrange(len(cur))]
        twin.change(cur)


# -- the cache in handlers ------------------------------------------------------------
def test_candidate_index_cache_updates_in_place(tmp_path: Path) -> None:
    cfg = CONFIGS[0]
    store = new_store(tmp_path)
    folders = [
        {"createdAt": BASE_MS + i, "alpha": 0.9, "keywords": ["星港项目", f"词{i}"]}
        for i in range(30)
    ]
    ids = write_folders(store, folders)
    state = cast(SessionState, SimpleNamespace(store=store, recall_index=None))
    first = candidate_index(state, cfg)
    assert candidate_index(state, cfg) is first
    pending = write_folders(
        store, [{"createdAt": BASE_MS + 99, "keywords": ["网关"], "scored": False}], txn="arc-2"
    )
    store.update_meta(ids[4], {"alpha": 0.2, "keywords": ["接口网关"]})
    store.update_meta(pending[0], {"scored": True, "alpha": 0.7, "keywords": ["网关"]})
    second = candidate_index(state, cfg)
    assert second is first  # updated in place, keyed by the new version
    assert second.version == (id(store), store.version, second.params)
    assert structure(second) == structure(CandidateIndex(store.index, cfg))
    # other index parameters: a fresh build
    other = candidate_index(state, CONFIGS[1])
    assert other is not first
    assert structure(other) == structure(CandidateIndex(store.index, CONFIGS[1]))


# -- speed ---------------------------------------------------------------------------
def test_update_is_much_faster_than_a_rebuild() -> None:
    cfg = MemoryConfig.defaults()
    base, _ = make_entries(10_000)
    rng = random.Random(2)
    entries: list[Any] = list(base)
    for i in range(-5, 0):  # the newest five wait for the judge
        entries[i] = dataclasses.replace(entries[i], scored=False)
    changed = list(entries)
    for i in rng.sample(range(9_000), 5):  # re-scored in the middle
        changed[i] = dataclasses.replace(changed[i], alpha=0.42, keywords=["改过", "星港项目"])
    for i in range(-5, 0):  # judged
        changed[i] = dataclasses.replace(changed[i], scored=True, alpha=0.8)

    builds, updates = [], []
    ix = CandidateIndex(entries, cfg)
    for _ in range(3):
        t0 = time.perf_counter()
        CandidateIndex(changed, cfg)
        builds.append(time.perf_counter() - t0)
        for target in (changed, entries):
            t0 = time.perf_counter()
            assert ix.update(target, cfg)
            updates.append(time.perf_counter() - t0)
    assert structure(ix) == structure(CandidateIndex(entries, cfg))
    assert min(updates) * 10 <= min(builds), (min(updates), min(builds))
