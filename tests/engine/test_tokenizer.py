"""Tokenizer: normalisation, surrogate safety, Latin tokens, CJK segmentation."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stopwords import CJK_SPLIT_CHARS, CJK_STOPWORDS, stopword_table
from engine.tokenizer import (
    MAX_CJK_TERM_CHARS,
    fix_surrogates,
    is_cjk_char,
    is_latin_word_char,
    normalize_text,
    segment_cjk,
    terms,
)


def test_fix_surrogates_joins_pairs_and_blanks_lone_halves() -> None:
    assert fix_surrogates("a\ud83d\ude00b") == "a😀b"
    assert fix_surrogates("\ud842\udfb7野家") == "𠮷野家"
    assert fix_surrogates("x\ud83dy\ude00z") == "x y z"
    assert fix_surrogates("plain 文本") == "plain 文本"


def test_normalize_text_nfkc_zero_width_and_controls() -> None:
    assert normalize_text("ＡＢＣ１２３，") == "ABC123,"
    assert normalize_text("接口\u200b网关\ufeff") == "接口网关"
    assert normalize_text("a\x00b\tc") == "a b c"


def test_character_classes() -> None:
    assert is_cjk_char("中")
    assert is_cjk_char("𠮷")  # supplementary ideograph, one code point
    assert is_cjk_char("カ")
    assert not is_cjk_char("a")
    assert not is_cjk_char("😀")
    assert is_latin_word_char("é")
    assert is_latin_word_char("_")
    assert not is_latin_word_char("-")
    assert not is_latin_word_char("中")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Deploy v1.2.0 now.", ["Deploy", "v1.2.0"]),
        ("pi is 3.14.", ["pi", "3.14"]),
        ("use snake_case and CamelCase", ["use", "snake_case", "CamelCase"]),
        ("C++ or C# on node.js", ["C++", "C#", "node.js"]),
        ("gray-release at 10%", ["gray-release", "10%"]),
        ("date 2024-01-05", ["date", "2024-01-05"]),
        ("a I 7 x", []),  # single characters are never terms
        ("The user's API", ["user", "API"]),  # possessive 's is a 1-char fragment
    ],
)
def test_latin_tokens_kept_whole(text: str, expected: list[str]) -> None:
    assert terms(text) == expected


def test_latin_blobs_dropped() -> None:
    blob = "A" * 65
    assert terms(f"key {blob} end") == ["key", "end"]
    assert terms("sha " + "a" * 64) == ["sha", "a" * 64]


def test_latin_case_kept_for_display() -> None:
    assert terms("Redis REDIS redis") == ["Redis", "REDIS", "redis"]


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ("星港项目的接口网关端口是", ["星港项目", "接口网关端口"]),
        ("上次说的部署端口是多少", ["部署端口"]),
        ("你还记得我们约定的会议时间吗", ["约定", "会议时间"]),  # 会议 protected
        ("为了了解情况", ["了解情况"]),  # 为了 stopword, 了解 protected
        ("我要部署端口", ["部署端口"]),  # edge 要 trimmed
        ("功能和性能问题", ["功能", "性能问题"]),  # 能 inside words is not cut
        ("首都机场", ["首都机场"]),
        ("的了吗", []),
        ("猫", []),
    ],
)
def test_segment_cjk(run: str, expected: list[str]) -> None:
    assert segment_cjk(run) == expected


def test_edge_chars_only_trimmed_at_segment_ends() -> None:
    # 会 is an edge char: trimmed at the start, kept inside.
    assert segment_cjk("会开始讨论") == ["开始讨论"]
    assert segment_cjk("开会讨论") == ["开会讨论"]
    assert segment_cjk("讨论会场") == ["讨论会场"]


def test_long_cjk_runs_chunked_to_at_most_four() -> None:
    run = "星港项目接口网关端口灰度比例"  # 14 characters, no cut points
    out = segment_cjk(run)
    assert "".join(out) == run
    assert [len(c) for c in out] == [4, 4, 3, 3]
    eight = "星港项目接口网关"
    assert segment_cjk(eight) == [eight]


def test_extra_cjk_stopword_is_a_cut_point() -> None:
    table = stopword_table(("星港",))
    assert segment_cjk("星港项目", table) == ["项目"]
    assert segment_cjk("星港项目") == ["星港项目"]


def test_emoji_never_split_nor_kept() -> None:
    out = terms("😀𠮷野家的牛丼👍🏻很好吃👨‍👩‍👧")
    assert out == ["𠮷野家", "牛丼", "好吃"]
    out = terms("\ud83d\ude00测试数据\ud83d")
    assert out == ["测试数据"]


def test_mixed_text() -> None:
    assert terms("接口网关8080,Redis 集群") == ["接口网关", "8080", "Redis", "集群"]


_CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF)
_PIECE = st.one_of(
    _CJK,
    st.sampled_from(sorted(CJK_SPLIT_CHARS)),
    st.sampled_from(sorted(CJK_STOPWORDS)),
    st.sampled_from(list("abcXYZ019._-+#% ,。!?\u200b")),
    st.sampled_from(["😀", "👍🏻", "𠮷", "\ud83d", "\ude00", "Ａ", "１", "v1.2.0"]),
    st.characters(),
)
_TEXT = st.lists(_PIECE, max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_terms_invariants(text: str) -> None:
    out = terms(text)
    assert out == terms(text)  # deterministic
    norm = normalize_text(text)
    words = stopword_table().words
    for t in out:
        assert t in norm
        assert len(t) >= 2
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in t)
        t.encode("utf-8")  # always encodable
        assert t.casefold() not in words
        if all(is_cjk_char(c) for c in t):
            assert len(t) <= MAX_CJK_TERM_CHARS
            assert t not in CJK_STOPWORDS


_CLEANED = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\x00\x01\t\n\r\x1f\x7f"


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.one_of(st.text(max_size=8), st.sampled_from([*_CLEANED, "ＡＢ", "ﬁ", "é", "e\u0301"])),
        max_size=20,
    ).map("".join)
)
def test_normalize_text_is_surrogates_nfkc_then_every_cleaned_character(text: str) -> None:
    """The fast path (no character to clean: no translate) gives what the full recipe
    gives, for texts with and without the characters it removes or blanks."""
    full = unicodedata.normalize("NFKC", fix_surrogates(text))
    full = full.translate({ord(c): None for c in _CLEANED[:7]} | dict.fromkeys(range(0x20), " "))
    full = full.translate({0x7F: " "})
    assert normalize_text(text) == full
