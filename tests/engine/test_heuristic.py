"""Heuristic α / keywords (scoring fallback, engine CLI)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.heuristic import DEFAULT_WEIGHTS, HeuristicScore, features, heuristic_score
from engine.stopwords import is_stopword
from engine.tokenizer import normalize_text

W = DEFAULT_WEIGHTS


def score(text: str, **kw: object) -> HeuristicScore:
    args: dict[str, object] = {
        "weights": W,
        "alpha_min": 0.01,
        "alpha_max": 1.0,
        "keywords_min": 3,
        "keywords_max": 16,
    }
    args.update(kw)
    return heuristic_score(text, **args)  # type: ignore[arg-type]


def test_default_weights_shape() -> None:
    assert isinstance(DEFAULT_WEIGHTS, dict)
    assert set(DEFAULT_WEIGHTS) == {
        "base",
        "decision",
        "agreement",
        "preference",
        "rule",
        "identity",
        "numbers",
        "length",
    }
    assert all(isinstance(v, float) and 0 <= v <= 1 for v in DEFAULT_WEIGHTS.values())


def test_small_talk_is_low_and_two_signals_are_high() -> None:
    chat = score("今天天气不错,随便聊聊。")
    assert chat.alpha < 0.3
    one = score("我喜欢吃川菜")
    assert 0.3 < one.alpha < 0.6
    two = score("我们约定以后都用 8080 端口,必须先灰度 10%。")
    assert two.alpha >= 0.6  # crosses the default θ_H


def test_features() -> None:
    f = features("We decided: always use port 8080 and v1.2.0, I prefer Redis.")
    assert f["base"] == 1.0
    assert f["decision"] == 1.0
    assert f["rule"] == 1.0
    assert f["preference"] == 1.0
    assert f["agreement"] == 0.0
    assert f["numbers"] == pytest.approx(2 / 3)
    assert features("disagree")["agreement"] == 0.0  # Latin cues start a word
    assert features("x" * 4000)["length"] == 1.0


def test_weights_drive_alpha() -> None:
    text = "我们约定以后都用这个方案"
    base = score(text).alpha
    no_agreement = score(text, weights={**W, "agreement": 0.0}).alpha
    assert no_agreement == pytest.approx(base - W["agreement"], abs=1e-4)
    assert score(text, weights={}).alpha == base  # missing weights use the defaults
    bad = score(text, weights={**W, "agreement": math.nan}).alpha
    assert bad == base


def test_alpha_clamped_and_rounded() -> None:
    rich = "我叫小明,我们约定:以后必须用 Redis,我喜欢这个决定,端口 6379、8080、9090。"
    assert score(rich).alpha == 1.0
    assert score(rich, alpha_max=0.8).alpha == 0.8
    assert score("嗯", alpha_min=0.5).alpha == 0.5
    assert score("嗯", alpha_min=0.9, alpha_max=0.3).alpha == 0.3  # reversed range degrades
    a = score("随便聊聊" * 7).alpha
    assert a == round(a, 4)


def test_beta_zero_and_frozen() -> None:
    s = score("我们约定以后都用 8080 端口")
    assert s.beta == 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.alpha = 0.5  # type: ignore[misc]


def test_keywords_within_bounds() -> None:
    text = " ".join(f"term{i:02d}" for i in range(30)) + " 星港项目的接口网关端口是 8080"
    s = score(text)
    assert 3 <= len(s.keywords) <= 16
    assert len(score(text, keywords_max=5).keywords) == 5


def test_keywords_padded_with_edge_bigrams() -> None:
    assert score("我喜欢吃川菜").keywords == ["喜欢吃川菜", "喜欢", "川菜"]


def test_keywords_never_invented() -> None:
    assert score("你好").keywords == []
    assert score("hello world").keywords == ["world"]


def test_extra_stopwords_apply_to_keywords() -> None:
    s = score("Redis 集群 端口 网关", extra_stopwords=["redis"])
    assert "Redis" not in s.keywords
    assert s.keywords == ["集群", "端口", "网关"]


_TEXT = st.lists(
    st.one_of(
        st.sampled_from(["约定", "必须", "喜欢", "决定", "我叫", "8080", "v1.2", "Redis", "。"]),
        st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF),
        st.characters(),
    ),
    max_size=60,
).map("".join)
_W = st.floats(min_value=-2, max_value=2, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    _TEXT,
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=1.0),
    st.integers(min_value=0, max_value=8),
    st.integers(min_value=0, max_value=20),
    st.dictionaries(st.sampled_from(sorted(DEFAULT_WEIGHTS)), _W),
)
def test_heuristic_invariants(
    text: str, a: float, b: float, kmin: int, kmax: int, weights: dict[str, float]
) -> None:
    lo, hi = min(a, b), max(a, b)
    s = heuristic_score(
        text,
        weights={**W, **weights},
        alpha_min=lo,
        alpha_max=hi,
        keywords_min=kmin,
        keywords_max=kmax,
    )
    again = heuristic_score(
        text,
        weights={**W, **weights},
        alpha_min=lo,
        alpha_max=hi,
        keywords_min=kmin,
        keywords_max=kmax,
    )
    assert s == again
    assert round(lo, 4) <= s.alpha <= round(hi, 4) or lo <= s.alpha <= hi
    assert s.beta == 0.0
    assert len(s.keywords) <= kmax
    folded = normalize_text(text).casefold()
    for kw in s.keywords:
        assert kw.casefold() in folded
        assert not is_stopword(kw)
