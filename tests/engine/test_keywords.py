"""Keyword extraction, stopwords and the match rules (contains / exact, extensions)."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.keywords import (
    ASSISTANT_SAID_KEYWORDS_MAX,
    QUERY_KEYWORDS_MAX,
    QueryMatcher,
    cjk_bigrams,
    contains_term,
    extract_keywords,
    keyword_matches,
    match_key,
    match_text,
)
from engine.stopwords import CJK_STOPWORDS, EN_STOPWORDS, is_stopword, stopword_table
from engine.tokenizer import normalize_text

# --- extraction ----------------------------------------------------------------------


def test_reference_examples() -> None:
    assert extract_keywords("星港项目的接口网关端口是 8080,灰度比例 10%。") == [
        "星港项目",
        "接口网关端口",
        "8080",
        "灰度比例",
        "10%",
    ]
    assert extract_keywords("收到,接口网关 8080,灰度 10%。") == ["接口网关", "8080", "灰度", "10%"]
    assert extract_keywords("上次说的部署端口是多少") == ["部署端口"]


def test_english_and_mixed() -> None:
    assert extract_keywords("Please deploy the Redis cluster to the staging server.") == [
        "deploy",
        "Redis",
        "cluster",
        "staging",
        "server",
    ]
    assert extract_keywords("把 Redis 集群升级到 v7.2.4,端口 6379") == [
        "Redis",
        "集群升级",
        "v7.2.4",
        "端口",
        "6379",
    ]


def test_stopwords_never_returned() -> None:
    assert extract_keywords("我们 什么 这个 the and of 你好 谢谢 today") == []
    assert extract_keywords("THE And OF") == []  # English stopwords ignore case


def test_extra_stopwords_latin_case_insensitive_and_cjk_cut() -> None:
    text = "Redis 集群 的 星港项目"
    assert extract_keywords(text) == ["Redis", "集群", "星港项目"]
    assert extract_keywords(text, extra_stopwords=["redis"]) == ["集群", "星港项目"]
    assert extract_keywords(text, extra_stopwords=("星港",)) == ["Redis", "集群", "项目"]
    assert extract_keywords(text, extra_stopwords=["ＲＥＤＩＳ"]) == ["集群", "星港项目"]


def test_is_stopword() -> None:
    assert is_stopword("The")
    assert is_stopword("我们")
    assert is_stopword("的")
    assert not is_stopword("网关")
    assert is_stopword("网关", extra_stopwords=["网关"])
    assert is_stopword(" ＲＥＤＩＳ ", extra_stopwords=["redis"])


def test_caps() -> None:
    text = " ".join(f"word{i:02d}" for i in range(40))
    assert len(extract_keywords(text)) == QUERY_KEYWORDS_MAX == 16
    out8 = extract_keywords(text, max_keywords=ASSISTANT_SAID_KEYWORDS_MAX)
    assert out8 == [f"word{i:02d}" for i in range(8)]
    assert ASSISTANT_SAID_KEYWORDS_MAX == 8
    assert extract_keywords(text, max_keywords=0) == []
    assert extract_keywords(text, max_keywords=-3) == []
    assert extract_keywords("") == []


def test_ranking_frequency_then_first_occurrence_and_dedupe() -> None:
    text = "alpha beta gamma beta gamma gamma Delta delta"
    assert extract_keywords(text) == ["gamma", "beta", "Delta", "alpha"]
    assert extract_keywords(text, max_keywords=2) == ["gamma", "beta"]


def test_extraction_speed() -> None:
    texts = [f"你还记得我们约定的会议时间吗 Redis v1.{i}" for i in range(10_000)]
    t0 = time.process_time()
    for text in texts:
        extract_keywords(text)
    # ~1.5 µs per character of CPU; 10^4 short texts must take well under a second.
    assert time.process_time() - t0 < 0.6


_PIECE = st.one_of(
    st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF),
    st.sampled_from(sorted(CJK_STOPWORDS)),
    st.sampled_from(sorted(EN_STOPWORDS)),
    st.sampled_from([" ", ",", "。", "Redis", "v1.2.0", "😀", "\ud83d", "Ａ", "snake_case"]),
    st.characters(),
)
_TEXT = st.lists(_PIECE, max_size=50).map(" ".join)
_EXTRA = st.lists(st.sampled_from(["redis", "项目", "集群", "一", "Foo", "v1"]), max_size=3)


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.integers(min_value=0, max_value=20), _EXTRA)
def test_extraction_invariants(text: str, cap: int, extra: list[str]) -> None:
    out = extract_keywords(text, max_keywords=cap, extra_stopwords=extra)
    assert out == extract_keywords(text, max_keywords=cap, extra_stopwords=list(extra))
    assert len(out) <= cap
    folded = normalize_text(text).casefold()
    assert len({k.casefold() for k in out}) == len(out)
    words = stopword_table(tuple(extra)).words
    for kw in out:
        assert kw.casefold() in folded
        assert not is_stopword(kw, extra)
        assert kw.casefold() not in words


# --- match keys and bigrams ----------------------------------------------------------


def test_match_key() -> None:
    assert match_key("  接口网关\u3000 8080 ", expand_latin_case=False) == "接口网关 8080"
    assert match_key("ＲＥＤＩＳ", expand_latin_case=False) == "REDIS"
    assert match_key("ＲＥＤＩＳ", expand_latin_case=True) == "redis"
    assert match_key("星港\u200b项目", expand_latin_case=True) == "星港项目"
    assert match_key("\ud83d\ude00", expand_latin_case=False) == "😀"


def test_cjk_bigrams() -> None:
    assert cjk_bigrams("接口网关 8080") == ["接口", "口网", "网关"]
    assert cjk_bigrams("网关网关") == ["网关", "关网"]
    assert cjk_bigrams("猫 狗") == []
    assert cjk_bigrams("Redis") == []
    assert cjk_bigrams("𠮷野家") == ["𠮷野", "野家"]


def test_contains_term_word_boundaries() -> None:
    assert contains_term("接口网关 8080", "网关")
    assert contains_term("接口网关8080", "8080")
    assert not contains_term("export", "port")
    assert contains_term("port 8080", "port")
    assert not contains_term("3.14", "3.1")
    assert not contains_term("v1.2.0", "1.2")
    assert contains_term("v1.2.0", "v1")
    assert not contains_term("snake_case", "case")
    assert contains_term("export port", "port")  # a later occurrence may qualify
    assert not contains_term("abc", "")


# --- keyword_matches -----------------------------------------------------------------


def test_contains_is_bidirectional() -> None:
    # v1.4: query token inside a multi-word folder keyword.
    assert keyword_matches("网关", "接口网关 8080")
    # v1.3.0 direction: folder keyword inside the query keyword.
    assert keyword_matches("接口网关端口", "端口")
    assert keyword_matches("端口", "端口")
    assert not keyword_matches("网关", "端口")


def test_exact_mode() -> None:
    assert keyword_matches("网关", "网关", mode="exact")
    assert not keyword_matches("网关", "接口网关 8080", mode="exact")
    assert not keyword_matches("接口网关端口", "端口", mode="exact")
    assert keyword_matches("ＡＰＩ 网关", "API  网关", mode="exact")  # same match key


def test_expand_latin_case() -> None:
    assert not keyword_matches("Redis", "redis")
    assert keyword_matches("Redis", "redis", expand_latin_case=True)
    assert not keyword_matches("redis", "Redis Cluster")
    assert keyword_matches("redis", "Redis Cluster", expand_latin_case=True)
    assert keyword_matches("REDIS", "redis", mode="exact", expand_latin_case=True)
    assert not keyword_matches("REDIS", "redis", mode="exact")


def test_cjk_bigram() -> None:
    assert not keyword_matches("项目进度", "项目经理")
    assert keyword_matches("项目进度", "项目经理", cjk_bigram=True)
    assert keyword_matches("项目进度", "项目经理", mode="exact", cjk_bigram=True)
    assert not keyword_matches("项进", "目度", cjk_bigram=True)
    assert not keyword_matches("Redis", "Redis2", cjk_bigram=True)


def test_word_boundary_in_matching() -> None:
    assert not keyword_matches("port", "export")
    assert not keyword_matches("export", "port")
    assert keyword_matches("port", "port 8080")


def test_empty_and_invalid() -> None:
    assert not keyword_matches("", "网关")
    assert not keyword_matches("  ", " ")
    with pytest.raises(ValueError, match="matchMode"):
        keyword_matches("a", "a", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="matchMode"):
        QueryMatcher(["a"], mode="fuzzy")  # type: ignore[arg-type]


def test_whole_utterance_as_query_gives_v130_direction() -> None:
    utterance = "上次说的部署端口是多少"
    assert keyword_matches(utterance, "部署端口")
    assert keyword_matches(utterance, "端口")
    assert not keyword_matches(utterance, "网关")


# --- QueryMatcher --------------------------------------------------------------------

_KW = st.one_of(
    st.sampled_from(
        [
            "网关",
            "接口网关 8080",
            "接口网关端口",
            "端口",
            "项目进度",
            "项目经理",
            "Redis",
            "redis",
            "Redis Cluster",
            "port",
            "export",
            "3.14",
            "3.1",
            "v1.2.0",
            "ＲＥＤＩＳ",
            "",
        ]
    ),
    st.text(alphabet="网关端口项目ab 1.", max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_KW, max_size=6),
    _KW,
    st.sampled_from(["contains", "exact"]),
    st.booleans(),
    st.booleans(),
)
def test_query_matcher_agrees_with_keyword_matches(
    query: list[str], folder: str, mode: str, fold: bool, bigram: bool
) -> None:
    m = QueryMatcher(query, mode=mode, expand_latin_case=fold, cjk_bigram=bigram)  # type: ignore[arg-type]
    fk = match_key(folder, expand_latin_case=fold)
    expected = [
        q
        for q in query
        if keyword_matches(q, folder, mode=mode, expand_latin_case=fold, cjk_bigram=bigram)  # type: ignore[arg-type]
    ]
    assert m.matches(fk) == bool(expected)
    expected_keys = list(dict.fromkeys(match_key(q, expand_latin_case=fold) for q in expected))
    assert m.matched_terms(fk) == expected_keys


def test_query_matcher_keys_dedupe_in_order() -> None:
    m = QueryMatcher(["Redis", "网关", "redis", "Redis", ""], expand_latin_case=True)
    assert m.keys == ("redis", "网关")
    assert m.matched_terms("接口网关 8080") == ["网关"]


def test_query_matcher_speed_100k_folders() -> None:
    rng = random.Random(7)
    chars = "接口网关端口灰度比例项目星港部署服务器数据库缓存集群日志监控告警"
    folders = [
        [
            match_key(
                "".join(rng.choice(chars) for _ in range(rng.randint(2, 6))), expand_latin_case=True
            )
            for _ in range(5)
        ]
        for _ in range(100_000)
    ]
    query = extract_keywords("上次说的部署端口是多少, 缓存集群 Redis 的日志呢")
    t0 = time.process_time()
    m = QueryMatcher(query, expand_latin_case=True)
    hits = sum(1 for keys in folders if any(m.matches(k) for k in keys))
    elapsed = time.process_time() - t0
    assert hits > 0
    assert elapsed < 1.0


@given(st.text(max_size=120), st.booleans())
def test_a_text_is_matched_as_a_key_is(text: str, fold: bool) -> None:
    assert match_text(text, expand_latin_case=fold) == match_key(text, expand_latin_case=fold)


def test_messages_and_titles_are_not_kept_in_the_shared_key_cache() -> None:
    """The cache of match keys lives as long as the daemon and serves every session: it
    is for keywords and labels. Each message analysed and each folder title indexed used
    to stay in it (the last 65,536 of them): 10 MB after 5,000 messages of 300
    characters."""
    from engine.config import load_config
    from engine.keywords import _match_key
    from engine.recall import CandidateIndex, analyze_query
    from tests.engine.recall_fixtures import Entry

    cfg = load_config(None, {}).config
    analyze_query("warm-up 部署", cfg)
    before = _match_key.cache_info().currsize
    for i in range(300):
        analyze_query(f"消息 {i}: 我们上次讨论的部署方案里，网关端口和灰度比例是怎么定的？", cfg)
    grown = _match_key.cache_info().currsize - before
    assert grown < 50, grown  # the few keywords these messages share, not 300 texts
    before = _match_key.cache_info().currsize
    titled = [
        Entry(f"f{i}", 0.9, i, ["部署"], title=f"标题 {i}：我喜欢的川菜和部署的端口")
        for i in range(300)
    ]
    CandidateIndex(titled, cfg, 1)
    assert _match_key.cache_info().currsize - before < 50
