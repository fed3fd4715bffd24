"""The BM25F relevance index: terms, fields, scores, and in-place sync == fresh build."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.relevance import passages
from engine.relevance.analyzer import search_terms
from engine.relevance.index import RelevanceIndex
from engine.relevance.passages import PassageStore
from engine.relevance.stats import BatchStats, CombinedStats
from tests.engine.relevance_fixtures import E


def index_of(texts: dict[str, str], entries: list[E]) -> RelevanceIndex:
    idx = RelevanceIndex(texts.__getitem__)
    idx.sync(entries)
    return idx


def test_terms_are_stemmed_casefolded_and_free_of_filler() -> None:
    assert search_terms("Wow, GREAT! I Finished the pottery classes") == [
        "finish",
        "potteri",
        "class",
    ]
    assert search_terms("finishing") == search_terms("finished") == ["finish"]


def test_cjk_terms_are_bigrams_and_characters_without_particles() -> None:
    assert search_terms("决定去杭州") == [
        "决定",
        "定去",
        "去杭",
        "杭州",
        "决",
        "定",
        "去",
        "杭",
        "州",
    ]
    assert search_terms("我的") == ["我的"]  # particles are never single-character terms
    # a rephrased question meets the promise through the character it shares
    assert "叫" in set(search_terms("以后我就叫你小鲸")) & set(search_terms("你说以后要叫我什么"))


def test_extra_stopwords_are_dropped() -> None:
    assert search_terms("Starport deploy 星港项目", ["starport", "星港"]) == [
        "deploy",
        "项目",
        "项",
        "目",
    ]


def test_a_stemmed_query_finds_the_other_word_form() -> None:
    texts = {
        "a": "Mina: I finished the marathon in Hangzhou.",
        "b": "Mina: haha how was your day?",
        "c": "Leo: I bought a new guitar.",
    }
    idx = index_of(texts, [E(k) for k in texts])
    ranked = idx.rank(idx.query_terms("When did Mina finish her marathon?"), limit=3)
    assert ranked.ids[0] == "a"
    assert "c" not in ranked.ids


def test_boosted_fields_outrank_a_mention_in_passing() -> None:
    texts = {"a": "we talked about many things, the budget among them", "b": "budget talk"}
    texts["b"] = "a long chat about the weather and the trains and the food"
    entries = [E("a"), E("b", keywords=("budget",))]
    idx = index_of(texts, entries)
    assert idx.rank(["budget"], limit=2).ids == ("b", "a")


def test_alpha_prior_is_mild_and_min_alpha_filters() -> None:
    texts = {"lo": "port 8443 decided", "hi": "port 8443 decided"}
    idx = index_of(texts, [E("lo", alpha=0.1), E("hi", alpha=0.9)])
    r = idx.rank(["8443"], limit=2, alpha_prior=0.2)
    assert r.ids == ("hi", "lo")
    assert r.scores[1] / r.scores[0] > 0.8  # a prior, not the order
    assert idx.rank(["8443"], limit=2, min_alpha=0.5).ids == ("hi",)


def test_min_relative_drops_weak_matches() -> None:
    texts = {"a": "alpha beta gamma", "b": "alpha " + "filler " * 40}
    idx = index_of(texts, [E("a"), E("b")])
    assert idx.rank(["alpha", "beta", "gamma"], limit=5, min_relative=0.5).ids == ("a",)


def test_ties_are_broken_by_folder_id_and_ties_at_the_limit_are_kept() -> None:
    texts = {k: "same words here" for k in ("c", "a", "b")}
    idx = index_of(texts, [E(k) for k in ("c", "a", "b")])
    assert idx.rank(["word"], limit=1).ids == ("a", "b", "c")


def test_unscored_removed_and_changed_folders() -> None:
    texts = {"a": "tokyo trip", "b": "tokyo food", "c": "paris"}
    idx = index_of(texts, [E("a"), E("b", scored=False), E("c")])
    assert idx.rank(["tokyo"], limit=5).ids == ("a",)
    assert idx.docs == 2 and idx.df("tokyo") == 1
    idx.sync([E("b"), E("c", keywords=("tokyo",))])
    assert "a" not in idx
    assert set(idx.rank(["tokyo"], limit=5).ids) == {"b", "c"}
    assert idx.df("tokyo") == 2 and idx.docs == 2


def test_term_stats_combine() -> None:
    batch = BatchStats([["a", "b", "a"], ["a"]])
    assert (batch.docs, batch.df("a"), batch.df("b"), batch.df("z")) == (2, 2, 1, 0)
    idx = index_of({"x": "alpha"}, [E("x")])
    both = CombinedStats(idx, batch)
    assert both.docs == 3 and both.df("alpha") == 1


def test_bm25_score_is_the_textbook_formula() -> None:
    texts = {"a": "apple apple pear", "b": "pear plum", "c": "plum"}
    idx = index_of(texts, [E(k) for k in texts])
    score = idx.scores(["appl"])[idx.by_id["a"]]
    n, df, tf, dl, avgdl = 3, 1, 2, 3, (3 + 2 + 1) / 3
    avgdl_q = 2 ** (round(math.log2(avgdl) * 8) / 8)  # quantised to 2^(1/8) steps
    assert abs(avgdl_q / avgdl - 1) < 0.05
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    tf_part = np.float32(tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl_q)))
    assert score == float(tf_part) * idf


_WORDS = ["tokyo", "paris", "budget", "guitar", "marathon", "杭州", "陶艺", "port"]


@st.composite
def _histories(draw: st.DrawFn) -> list[list[E]]:
    steps = draw(st.integers(1, 6))
    pool = [f"f{i:02d}" for i in range(12)]
    out = []
    for _ in range(steps):
        ids = draw(st.lists(st.sampled_from(pool), unique=True, max_size=10))
        out.append(
            [
                E(
                    fid,
                    alpha=draw(st.sampled_from([0.1, 0.5, 0.9])),
                    keywords=tuple(draw(st.lists(st.sampled_from(_WORDS), max_size=3))),
                    scored=draw(st.booleans()) or True,
                )
                for fid in sorted(ids)
            ]
        )
    return out


@settings(max_examples=60, deadline=None)
@given(_histories())
def test_synced_index_scores_like_a_fresh_build(history: list[list[E]]) -> None:
    texts = {
        f"f{i:02d}": f"{_WORDS[i % 8]} and {_WORDS[(i * 3) % 8]} talk\n{_WORDS[(i * 5) % 8]} x"
        for i in range(12)
    }
    live = RelevanceIndex(texts.__getitem__)
    for entries in history:
        live.sync(entries)
        fresh = index_of(texts, entries)
        for q in (["tokyo"], ["budget", "port"], ["杭州", "guitar", "talk"]):
            for pw in (0.0, 0.5):
                a = live.rank(q, limit=20, alpha_prior=0.2, passage_weight=pw)
                b = fresh.rank(q, limit=20, alpha_prior=0.2, passage_weight=pw)
                assert a == b  # same ids, bit-identical scores
        assert live.docs == fresh.docs
        for w in _WORDS:
            assert live.df(w) == fresh.df(w)
    assert np.all(live.scores([]) == 0)


def test_the_folder_with_the_answering_message_beats_scattered_mentions() -> None:
    chatter = "\n".join(f"Leo: line {i} about the weather" for i in range(12))
    texts = {
        "answer": chatter + "\nMina: my sister Alice moved to Lisbon in May",
        "scattered": "Mina: Alice called\nLeo: sister stuff\nMina: moved boxes\n"
        "Leo: Lisbon is far\nMina: in May maybe",
    }
    idx = index_of(texts, [E(k) for k in texts])
    q = idx.query_terms("When did my sister Alice move to Lisbon?")
    assert idx.rank(q, limit=1, passage_weight=0.0).ids == ("scattered",)
    assert idx.rank(q, limit=1, passage_weight=0.5).ids == ("answer",)


def test_passages_follow_changes_without_rereading() -> None:
    reads: list[str] = []
    texts = {"a": "x\nlisbon trip", "b": "y\ntokyo trip"}

    def text_of(fid: str) -> str:
        reads.append(fid)
        return texts[fid]

    idx = RelevanceIndex(text_of)
    idx.sync([E("a"), E("b")])
    idx.sync([E("a", keywords=("travel",)), E("b")])  # a judge rewrote a's keywords
    assert reads == ["a", "b"]
    assert idx.rank(["lisbon"], limit=2, passage_weight=0.5).ids == ("a",)
    idx.sync([E("b")])
    assert idx.rank(["lisbon"], limit=2, passage_weight=0.5).ids == ()
    assert idx.rank(["tokyo"], limit=2, passage_weight=0.5).ids == ("b",)


_PASSAGE = st.lists(st.integers(0, 9), min_size=0, max_size=6)  # term ids, repeats kept
_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.integers(0, 7),
            st.lists(st.tuples(_PASSAGE, st.booleans()), max_size=4),
        ),
        st.tuples(st.just("remove"), st.integers(0, 7)),
        st.tuples(st.just("move"), st.integers(0, 7), st.integers(0, 7)),
    ),
    max_size=14,
)


@settings(max_examples=150, deadline=None)
@given(_OPS, st.sampled_from([3, 1 << 31]))
def test_passages_after_any_changes_are_a_fresh_store(ops: list[Any], narrow_max: int) -> None:
    """The passage store keeps every folder's entries in flat columns (term ids in two
    bytes until one needs four, the tfs that are not 1 apart) and compacts them when a
    third are dead: after any adds, removals and moves its folders' terms, counts and
    best passages are those of a store built fresh from what it holds."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(passages, "_NARROW_MAX", narrow_max)
        store = PassageStore()
        held: dict[int, list[tuple[list[int], bool]]] = {}
        for op in ops:
            if op[0] == "add":
                store.add(op[1], [p for p, _ in op[2]], [a for _, a in op[2]])
                held[op[1]] = op[2]
            elif op[0] == "remove":
                store.remove(op[1])
                held.pop(op[1], None)
            elif op[1] in held and op[2] not in held:
                store.move(op[1], op[2])
                held[op[2]] = held.pop(op[1])
            store.settle()
            again = PassageStore()
            for doc in sorted(held):
                again.add(doc, [p for p, _ in held[doc]], [a for _, a in held[doc]])
            again.settle()
            for doc, rows in held.items():
                terms = [t for p, _ in rows for t in p]
                assert store.text_counts(doc) == dict(Counter(terms))
                assert store.terms(doc) == set(terms)
            docs = sorted(held)
            for query in ([0], [1, 2], [3, 9, 4, 0]):
                assert store.best(docs, query) == again.best(docs, query)


def _best_by_formula(rows: dict[int, list[list[int]]], doc: int, query: list[int]) -> float:
    """`doc`'s best passage score for `query`, the textbook way: BM25's tf part as float32
    at the quantised average passage length, times the idf, summed per passage in the
    order terms first occur in it."""
    n = sum(len(r) for r in rows.values())
    lengths = [len(p) for r in rows.values() for p in r]
    avg = 2 ** (round(math.log2(sum(lengths) / len(lengths)) * 8) / 8)
    best = 0.0
    for p in rows[doc]:
        counts = Counter(p)
        ws = []
        for t in counts:
            if t in query:
                df = sum(t in q for r in rows.values() for q in r)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                tf = counts[t]
                part = np.float32(tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * len(p) / avg)))
                ws.append(float(part) * idf)
        if ws:
            best = max(best, sum(ws))
    return best


@pytest.mark.parametrize("table_max", [passages._ONES_MAX, 5])
def test_best_passage_is_the_textbook_formula_at_every_length(
    monkeypatch: pytest.MonkeyPatch, table_max: int
) -> None:
    """A passage entry's tf part is read from a table by passage length (a tf of 1), or
    computed (a larger tf, a passage longer than the table covers); either is the float32
    of BM25's formula at the quantised average passage length, before and after a change
    moves that average, so a best passage scores the textbook way."""
    monkeypatch.setattr(passages, "_ONES_MAX", table_max)
    store = PassageStore()
    rows: dict[int, list[list[int]]] = {}

    def add(doc: int, length: int) -> None:
        # term 0 once, term 1 twice in long passages, fillers 2.. after them
        passage = [0] + ([1, 1] if length > 4 else []) + list(range(2, 2 + length))
        rows[doc] = [passage[:length], [0, 2]]
        store.add(doc, rows[doc])

    for doc, length in enumerate([1, 3, 4, 6, 9, 12]):
        add(doc, length)
    for step in range(2):
        store.settle()
        docs = sorted(rows)
        for query in ([0], [1], [0, 1], [0, 1, 2, 7]):
            got = store.best(docs, query)
            assert got == [_best_by_formula(rows, d, query) for d in docs], (step, query)
        add(len(rows), 40)  # a long passage moves the average


@pytest.mark.parametrize("table_max", [passages._ONES_MAX, 70])
def test_best_passage_tf_parts_of_every_tf_match_the_formula(
    monkeypatch: pytest.MonkeyPatch, table_max: int
) -> None:
    """The tf parts of a passage's entries are read from a table by tf and passage
    length (tfs below `_TF_ROWS`, lengths the table covers) or computed (a larger tf or
    length): the float32 of BM25's formula either way, summed per passage as the
    passages' sums are, whatever tf an entry has."""
    monkeypatch.setattr(passages, "_ONES_MAX", table_max)
    store = PassageStore()
    rows: dict[int, list[list[int]]] = {}
    tfs = list(range(1, passages._TF_ROWS + 3))  # across the table's last row
    for doc, (tf, filler) in enumerate((tf, f) for tf in tfs for f in (0, 3, 60, 90)):
        # term 0 `tf` times, term 1 once, term 2 twice, fillers 3.. after them
        passage = [0] * tf + [1, 2, 2] + list(range(3, 3 + filler))
        rows[doc] = [passage, [1, 3]]
        store.add(doc, rows[doc])
    store.settle()
    docs = sorted(rows)
    for query in ([0], [0, 2], [0, 1, 2], [2, 5]):
        assert store.best(docs, query) == [_best_by_formula(rows, d, query) for d in docs], query
