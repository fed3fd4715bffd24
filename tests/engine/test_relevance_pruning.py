"""Max-score pruning gives the exhaustive ranking, bit for bit, and the postings score
alike in every representation (sparse and dense terms, byte and escaped tfs, flushed at
once or in chunks)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.relevance.maxscore as maxscore
import engine.relevance.postings as postings
from engine.relevance.analyzer import search_terms, search_terms_by_line
from engine.relevance.index import RelevanceIndex
from engine.relevance.postings import Postings
from tests.engine.relevance_fixtures import BOTH_PATHS, E, recall_loops

# a few words almost every folder holds, some in many, a long tail in few
_COMMON = ["mina", "leo", "today", "work"]
_MID = ["budget", "guitar", "tokyo", "port", "杭州", "陶艺"]
_RARE = [f"w{i:02d}" for i in range(24)]
_VOCAB = _COMMON + _MID + _RARE


@contextmanager
def eager_pruning(dense_share: int = 8) -> Iterator[None]:
    """Small corpora prune like large ones: only the rarest term is scored in full
    first, every pruning branch is taken, the rare terms are summed over every
    document or sorted (`dense_share`)."""
    saved = {k: getattr(maxscore, k) for k in _KNOBS}
    values = dict(zip(_KNOBS, (1, 1 << 30, 0, 2, dense_share), strict=True))
    for k, v in values.items():
        setattr(maxscore, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(maxscore, k, v)


_KNOBS = ("_FIRST_POSTINGS", "_FIRST_SHARE", "_PRUNE_AT", "_PRUNE_DENSE_AT", "_DENSE_SHARE")


@st.composite
def _corpora(draw: st.DrawFn) -> tuple[dict[str, str], list[list[E]]]:
    n = draw(st.integers(4, 40))
    word = st.one_of(st.sampled_from(_COMMON), st.sampled_from(_MID), st.sampled_from(_RARE))
    texts: dict[str, str] = {}
    entries: list[E] = []
    for i in range(n):
        fid = f"f{i:03d}"
        lines = draw(st.lists(st.lists(word, min_size=1, max_size=8), min_size=0, max_size=4))
        common = [w for w in _COMMON if draw(st.integers(0, 9)) < 8]
        texts[fid] = "\n".join(" ".join(line) for line in [*lines, common])
        entries.append(
            E(
                fid,
                alpha=draw(st.sampled_from([0.05, 0.3, 0.5, 0.9])),
                keywords=tuple(draw(st.lists(word, max_size=3))),
                persons=tuple(draw(st.lists(st.sampled_from(_COMMON[:2]), max_size=1))),
            )
        )
    history = [entries]
    if draw(st.booleans()):  # removals leave dead documents (and may compact)
        history.append([e for e in entries if draw(st.integers(0, 3))])
    return texts, history


_PARAMS = st.fixed_dictionaries(
    {
        "limit": st.integers(1, 12),
        "alpha_prior": st.sampled_from([0.0, 0.2]),
        "min_alpha": st.sampled_from([0.0, 0.4]),
        "min_relative": st.sampled_from([0.0, 0.3]),
        "passage_weight": st.sampled_from([0.0, 0.5]),
    }
)


@BOTH_PATHS
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _corpora(),
    st.lists(st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=6), min_size=1, max_size=4),
    _PARAMS,
    st.sampled_from([1, 8, 1 << 30]),
)
def test_pruned_ranking_is_the_exhaustive_one(
    compiled: bool,
    corpus: tuple[dict[str, str], list[list[E]]],
    queries: list[list[str]],
    params: dict[str, Any],
    dense_share: int,
) -> None:
    texts, history = corpus
    idx = RelevanceIndex(texts.__getitem__)
    with recall_loops(compiled), eager_pruning(dense_share):
        for entries in history:
            idx.sync(entries)
            for words in queries:
                terms = idx.query_terms(" ".join(words))
                assert idx.rank(terms, **params) == idx.rank(terms, exhaustive=True, **params)


@pytest.fixture
def numpy_path() -> Iterator[None]:
    """The NumPy path's pruning (`engine.relevance.maxscore`), which the compiled loops
    would take the place of."""
    with recall_loops(False):
        yield


@pytest.mark.usefixtures("numpy_path")
def test_pruning_looks_common_terms_up_and_stays_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus where the rare terms decide: the common ones are looked up, not scored
    in full, and the result is still the exhaustive one."""
    texts = {
        f"f{i:03d}": "\n".join(
            [" ".join(_COMMON), f"{_MID[i % 6]} {_RARE[i % 24]}", f"{_RARE[(i * 7) % 24]} day"]
        )
        for i in range(300)
    }
    entries = [E(fid, alpha=(i % 10) / 10) for i, fid in enumerate(sorted(texts))]
    idx = RelevanceIndex(texts.__getitem__)
    idx.sync(entries)
    looked_up: list[int] = []
    look_up = Postings.look_up

    def counting(self: Postings, tid: int, idf: float, docs: Any) -> Any:
        looked_up.append(int(docs.size))
        return look_up(self, tid, idf, docs)

    monkeypatch.setattr(Postings, "look_up", counting)
    with eager_pruning():
        for q in (["w03", "mina", "leo", "today"], ["w05", "w11", "budget", "work"], ["tokyo"]):
            for pw in (0.0, 0.5):
                kw: dict[str, Any] = {"limit": 5, "alpha_prior": 0.2, "passage_weight": pw}
                assert idx.rank(q, **kw) == idx.rank(q, exhaustive=True, **kw)
    assert looked_up and max(looked_up) < len(texts)


def _textbook(tf: int, dl: int, avgdl: float, n: int, df: int) -> float:
    avgdl_q = 2 ** (round(math.log2(avgdl) * 8) / 8)
    part = np.float32(tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl_q)))
    return float(part) * math.log(1 + (n - df + 0.5) / (df + 0.5))


@BOTH_PATHS
def test_a_tf_beyond_a_byte_scores_exactly_and_survives_renormalisation(compiled: bool) -> None:
    with recall_loops(compiled):
        _a_tf_beyond_a_byte()


def _a_tf_beyond_a_byte() -> None:
    texts = {"big": "deploy " * 300, "a": "deploy rollout", "b": "port 8080"}
    assert [len(search_terms(t)) for t in texts.values()] == [300, 2, 2]
    idx = RelevanceIndex(texts.__getitem__)
    idx.sync([E("big", keywords=("deploy",)), E("a"), E("b")])
    n, lens = 3, {"big": 303, "a": 2, "b": 2}  # the keyword counts 3 times
    avgdl = sum(lens.values()) / n
    score = idx.scores(["deploy"])
    assert score[idx.by_id["big"]] == _textbook(303, 303, avgdl, n, 2)
    assert score[idx.by_id["a"]] == _textbook(1, 2, avgdl, n, 2)
    # many short folders move the quantised average: every tf part is recomputed
    more = {f"s{i}": "port" for i in range(40)}
    texts.update(more)
    entries = [E("big", keywords=("deploy",)), E("a"), E("b"), *(E(k) for k in more)]
    idx.sync(entries)
    fresh = RelevanceIndex(texts.__getitem__)
    fresh.sync(entries)
    for q in (["deploy"], ["port", "deploy"]):
        for pw in (0.0, 0.5):
            assert idx.rank(q, limit=5, passage_weight=pw) == fresh.rank(
                q, limit=5, passage_weight=pw
            )
    avgdl = (303 + 2 + 2 + 40) / 43
    assert idx.scores(["deploy"])[idx.by_id["big"]] == _textbook(303, 303, avgdl, 43, 2)
    # the passage holding 300 occurrences is the best passage there is for "deploy"
    assert idx.rank(["deploy"], limit=1, passage_weight=1.0).ids == ("big",)


@BOTH_PATHS
def test_postings_flushed_in_chunks_score_like_one_flush(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    with recall_loops(compiled):
        _flushed_in_chunks(monkeypatch)


def _flushed_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = {f"f{i:02d}": f"{_COMMON[i % 4]} {_MID[i % 6]} {_RARE[i % 24]} mina" for i in range(60)}
    entries = [E(fid, keywords=(_RARE[i % 5],)) for i, fid in enumerate(sorted(texts))]
    whole = RelevanceIndex(texts.__getitem__)
    whole.sync(entries)
    monkeypatch.setattr(postings, "_FLUSH_AT", 7)
    chunked = RelevanceIndex(texts.__getitem__)
    chunked.sync(entries)
    for q in (["mina"], ["budget", "w03", "leo"], ["杭州", "w01"]):
        assert np.array_equal(whole.scores(q, alpha_prior=0.2), chunked.scores(q, alpha_prior=0.2))
        assert whole.rank(q, limit=4, passage_weight=0.5) == chunked.rank(
            q, limit=4, passage_weight=0.5
        )


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60))
def test_printable_ascii_takes_the_short_way_to_the_same_terms(text: str) -> None:
    # " é" sends the text through NFKC normalisation; é alone is too short to be a term
    assert search_terms(text) == search_terms(text + " é")


_SURROGATES = ["\ud83d", "\ude00"]  # a pair, or halves on their own
_ODD_TEXT = st.text(
    alphabet=st.sampled_from(
        [
            *"ab Z9\n\t.-'决定去杭州的了",
            *"\u0301\u00e9\ufb01\uff21\u200b\u2029\u1100\u1161\u00df\u0130",
            *_SURROGATES,
        ]
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_ODD_TEXT, st.sampled_from([(), ("ab", "杭州"), ("x", 3)]))
def test_terms_by_line_are_each_lines_terms(text: str, extra: tuple[Any, ...]) -> None:
    # normalised once for the whole text, or line by line: the same terms per line
    expected = [search_terms(line, extra) for line in text.split("\n")]
    assert search_terms_by_line(text, extra) == expected


@BOTH_PATHS
def test_every_tf_part_is_the_formula_whether_tabled_cached_or_not(
    monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """The postings keep no tf parts: the ones of small tfs come from a table per
    document (looked up plainly for a short list), the others are computed; a query
    reads them through a cache or not. Each is the float32 of the formula, so every
    score is the textbook one."""
    # tfs 1..20 around the table's edge, and one beyond a byte
    texts = {f"d{tf:03d}": " ".join(["deploy"] * tf + ["port"] * (tf % 3)) for tf in range(1, 21)}
    texts["d300"] = "deploy " * 300
    lens = {fid: len(search_terms(t)) for fid, t in texts.items()}
    avgdl = sum(lens.values()) / len(lens)
    n = len(texts)

    def textbook(fid: str, term: str, df: int) -> float:
        return _textbook(search_terms(texts[fid]).count(term), lens[fid], avgdl, n, df)

    # cached, and computed on every read; short lists looked up plainly, or with NumPy
    with recall_loops(compiled):
        _tf_parts_of(texts, textbook, monkeypatch)


def _tf_parts_of(texts: dict[str, str], textbook: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for budget, plain in ((postings._CACHE_MIN, 24), (0, 24), (postings._CACHE_MIN, 0), (0, 0)):
        monkeypatch.setattr(postings, "_CACHE_MIN", budget)
        monkeypatch.setattr(postings, "_PLAIN_AT", plain)
        monkeypatch.setattr(postings, "_CACHE_SHARE", 1 << 40)
        idx = RelevanceIndex(texts.__getitem__)
        idx.sync([E(fid) for fid in sorted(texts)])
        for term in ("deploy", "port"):
            df = sum(term in search_terms(t) for t in texts.values())
            for _ in range(2):  # a first read and a second one
                score = idx.scores([term])
                for fid in texts:
                    if term in texts[fid]:
                        assert score[idx.by_id[fid]] == textbook(fid, term, df), (fid, term)
                with eager_pruning():
                    assert idx.rank([term], limit=5) == idx.rank([term], limit=5, exhaustive=True)
