"""The ranked recall's compiled loops (`engine.relevance.kernels`) compute what the NumPy
path computes, float for float, leave their scratch as they found it, and refuse damaged
arrays with a ValueError instead of reading outside them."""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.recall import CandidateIndex, RecallState, analyze_query
from engine.recall.candidates import MatchesOnce
from engine.recall.ranked import select_ranked
from engine.relevance import kernels
from engine.relevance.index import RelevanceIndex
from engine.relevance.passages import PassageStore
from tests.engine.recall_fixtures import config
from tests.engine.relevance_fixtures import E, recall_loops


def test_ci_builds_the_compiled_loops() -> None:
    """`make` builds them where a C compiler is (CI has one): a build that silently
    fell back to the NumPy path would leave the fast path untested."""
    if not os.environ.get("CI"):
        pytest.skip("only CI must have them")
    assert kernels.available()


@pytest.fixture
def compiled() -> Any:
    with recall_loops(True):
        module = kernels.active()
        assert module is not None
        yield module


def _passages(draw: Callable[..., Any], store: PassageStore, doc: int, wide: bool) -> None:
    tid = st.integers(0, 70_000 if wide else 30)
    rows = draw(st.lists(st.lists(tid, max_size=12), max_size=5))
    # a term repeated in a line: a tf other than 1 (long lines: lengths past the table)
    rows = [r + r[:1] * draw(st.integers(0, 9)) for r in rows]
    if draw(st.booleans()):
        rows.append([draw(tid)] * draw(st.integers(1, 300)))
    asks = [draw(st.booleans()) for _ in rows]
    store.add(doc, rows, asks)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_best_passages_are_the_numpy_paths(data: st.DataObject) -> None:
    draw = data.draw
    wide = draw(st.booleans())  # term ids past 2 bytes widen the entries
    store = PassageStore()
    docs = draw(st.integers(1, 12))
    for doc in range(docs):
        _passages(draw, store, doc, wide)
    for doc in draw(st.lists(st.integers(0, docs - 1), max_size=4)):
        if draw(st.booleans()):
            store.remove(doc)  # dead entries, maybe compacted away
        else:
            _passages(draw, store, doc, wide)
    store.settle()
    factor = np.array([draw(st.sampled_from([0.0, 0.45, 1.0, 1.1])) for _ in range(docs + 3)])
    for _ in range(3):
        pool = draw(st.lists(st.integers(0, docs + 2), max_size=8))
        query = draw(st.lists(st.integers(0, 70_000 if wide else 33), min_size=1, max_size=6))
        for f in (None, factor):
            with recall_loops(False):
                expected = store.best(pool, query, f)
            with recall_loops(True):
                assert store.best(pool, query, f) == expected


def test_a_tf_beyond_a_byte_goes_to_the_numpy_path(compiled: Any) -> None:
    """A tf of 255 or more is kept outside the postings' bytes: the compiled scoring
    hands that query to the NumPy path, which looks it up, and ranks as it does."""
    texts = {"big": "deploy " * 300, "a": "deploy rollout", "b": "port 8080"}
    idx = RelevanceIndex(texts.__getitem__)
    idx.sync([E("big"), E("a"), E("b")])
    query = idx._query(["deploy"])
    finish: tuple[Any, ...] = (idx._doc_ids, None, [], [], 0.0, 0.0, 10)
    assert idx._postings.score_top(query, 3, None, 1.0, 0.1, 10, 1e-300, finish) is None
    ranked = idx.rank(["deploy"], limit=3, passage_weight=0.5)
    with recall_loops(False):
        assert ranked == idx.rank(["deploy"], limit=3, passage_weight=0.5)
    assert ranked.ids[0] == "big"


def test_the_scratch_is_left_as_it_was_found(compiled: Any) -> None:
    words = ["mina", "leo", "budget", "tokyo", "port", "w1", "w2", "w3"]
    texts = {f"f{i:03d}": " ".join(words[j] for j in range(8) if (i >> j) & 1) for i in range(256)}
    idx = RelevanceIndex(texts.__getitem__)
    idx.sync([E(fid, alpha=(i % 10) / 10) for i, fid in enumerate(sorted(texts))])
    for q in (["mina"], ["w3", "mina", "leo"], ["budget", "port", "tokyo", "w1"]):
        idx.rank(q, limit=5, alpha_prior=0.2, min_alpha=0.3, passage_weight=0.5)
        scratch = idx._postings._scratch
        assert scratch is not None and not scratch[0].any()
    # a damaged posting: refused, and the documents scored before it are cleared
    scratch = idx._postings._scratch
    assert scratch is not None
    acc, touched, vals = scratch
    n = len(idx._doc_ids)
    table = array("f", [0.5] * (8 * n))
    lengths = array("q", [3] * n)
    good = (array("i", [1, 2, 3]), bytes([1, 1, 1]), 1.0, 1.0)
    bad = (array("i", [4, n + 7]), bytes([1, 1]), 1.0, 1.0)
    finish: tuple[Any, ...] = (idx._doc_ids, None, [], [], 0.0, 0.0, 5)
    args = (acc, touched, vals, finish)
    with pytest.raises(ValueError, match="outside the documents"):
        compiled.score_top(
            [good, bad], n, table, lengths, 8.0, True, None, 1.0, 0.1, 5, 1e-300, *args
        )
    assert not acc.any()
    with pytest.raises(ValueError, match="shorter than the documents"):
        compiled.score_top(
            [good], n + 1, table, lengths, 8.0, True, None, 1.0, 0.1, 5, 1e-300, *args
        )
    ids, scores = compiled.score_top(
        [good], n, table, lengths, 8.0, True, None, 1.0, 0.1, 5, 1e-300, *args
    )
    assert len(ids) == 3 and scores[0] > 0 and not acc.any()


def test_damaged_passage_arrays_are_refused(compiled: Any) -> None:
    store = PassageStore()
    store.add(0, [[1, 2, 3], [2, 4]])
    store.settle()
    arrays, q, idf = store.query_arrays([2])
    assert arrays is not None and q == [2]
    assert compiled.passage_best([0], q, idf, arrays, None) != [0.0]

    def damaged(at: int, value: Any) -> tuple[Any, ...]:
        assert arrays is not None
        return (*arrays[:at], value, *arrays[at + 1 :])

    with pytest.raises(ValueError, match="out of range"):  # a run ending past the entries
        compiled.passage_best([0], q, idf, damaged(2, array("i", [99])), None)
    with pytest.raises(ValueError, match="do not fit"):  # lengths missing
        compiled.passage_best([0], q, idf, damaged(9, array("i", [])), None)
    with pytest.raises(ValueError, match="11 arrays"):
        compiled.passage_best([0], q, idf, arrays[:5], None)
    with pytest.raises(ValueError, match="ascending"):
        compiled.passage_best([0], [4, 2], [1.0, 1.0], arrays, None)
    with pytest.raises(ValueError, match="without a factor"):
        compiled.passage_best([0, 3], q, idf, arrays, np.ones(2))


def test_a_realistic_session_picks_the_same_folders_on_both_paths() -> None:
    """The bench's corpus (a Zipf vocabulary, keywords, common words in most folders):
    every ranked selection of 150 questions, with and without the passage rerank, picks
    the same folders in the same order with the same scores on both paths."""
    from bench.ranked import make_corpus

    entries, texts, queries = make_corpus(3000, seed=5)
    idx = RelevanceIndex(texts.__getitem__)
    idx.sync(entries)
    for passage_weight in (0.5, 0.0):
        cfg = config(mode="ranked", ranked={"passageWeight": passage_weight})
        index = CandidateIndex(entries, cfg, len(entries))
        picks: dict[bool, list[Any]] = {}
        for compiled in (True, False):
            with recall_loops(compiled):
                picks[compiled] = []
                for q in queries[:150]:
                    query = analyze_query(q, cfg)
                    matches = MatchesOnce(index, query, cfg.recall.min_alpha)
                    state = RecallState(persist=False)
                    out = select_ranked(idx, index, matches, query, state, cfg, 10)
                    picks[compiled].append(([p.id for p in out.selection.picks], out.needed))
        assert picks[True] == picks[False]
        assert sum(len(p) for p, _ in picks[True]) > 1000


def test_turned_off_the_numpy_path_serves() -> None:
    if not kernels.available():
        pytest.skip("the compiled recall loops were not built")
    try:
        assert kernels.use_kernels(False) is False
        assert kernels.active() is None
        assert kernels.use_kernels(True) is True
        assert kernels.active() is not None
    finally:
        kernels.use_kernels(True)


def test_scores_match_the_numpy_accumulation_on_dense_and_sparse_terms(compiled: Any) -> None:
    """Folder scores of common (dense) and rare (sparse) terms, with α factors and dead
    folders: the compiled best ones carry the NumPy path's exact scores."""
    rng = np.random.default_rng(3)
    vocab = ["mina", "leo", "work", "budget", "tokyo"] + [f"r{i}" for i in range(40)]
    weights = np.array([40.0, 30.0, 20.0, 5.0, 5.0] + [1.0] * 40)
    weights /= weights.sum()
    texts = {
        f"f{i:04d}": "\n".join(
            " ".join(rng.choice(vocab, size=int(rng.integers(2, 9)), p=weights))
            for _ in range(int(rng.integers(1, 5)))
        )
        for i in range(1500)
    }
    entries = [E(fid, alpha=float(rng.uniform(0.01, 1.0))) for fid in sorted(texts)]
    idx = RelevanceIndex(texts.__getitem__)
    idx.sync(entries)
    idx.sync(entries[::2])  # half of them removed: dead documents
    for q in (["mina", "leo"], ["r3", "work", "mina"], ["budget", "r17", "r2", "leo", "tokyo"]):
        options: list[dict[str, Any]] = [
            {},
            {"alpha_prior": 0.2, "min_alpha": 0.4},
            {"min_relative": 0.3},
        ]
        for kw in options:
            got = idx.rank(q, limit=8, **kw)
            with recall_loops(False):
                assert got == idx.rank(q, limit=8, exhaustive=True, **kw)
            assert got.ids


@pytest.mark.parametrize("passage_weight", [0.0, 0.5])
def test_ties_and_folders_without_passages_rank_alike(passage_weight: float) -> None:
    """Folders found by their keywords alone (no text: no passage to rerank by), and
    folders of the same text (the same score: ordered by id), on both paths."""
    texts = {f"f{i:02d}": "" if i % 3 == 0 else "tokyo budget review" for i in range(30)}
    entries = [E(fid, keywords=("tokyo", "port") if i % 2 else ()) for i, fid in enumerate(texts)]
    for held in (entries, [e for e in entries if e.id.endswith(("0", "3", "6", "9"))]):
        idx = RelevanceIndex(texts.__getitem__)
        idx.sync(held)
        ranked = {}
        for compiled in (True, False):
            with recall_loops(compiled):
                ranked[compiled] = [
                    idx.rank(q, limit=limit, passage_weight=passage_weight, min_relative=0.1)
                    for q in (["tokyo"], ["port"], ["budget", "port"])
                    for limit in (1, 4, 40)
                ]
        assert ranked[True] == ranked[False]
        assert any(len(r.ids) > 1 and len(set(r.scores)) < len(r.scores) for r in ranked[True])
