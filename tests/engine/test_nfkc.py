"""`engine.tokenizer.nfkc` is ``unicodedata.normalize("NFKC", ·)``: for every character
of the Basic Multilingual Plane alone, for every full-width form before every combining
mark, and for any mix of the characters where the shortcut could go wrong."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.tokenizer import nfkc, normalize_text

FULLWIDTH = [chr(c) for c in (0x3000, *range(0xFF01, 0xFF5F))]
COMBINING = [chr(c) for c in (*range(0x0300, 0x0370), 0x3099, 0x309A, 0x20DD)]


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def test_every_bmp_character_alone() -> None:
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF]
    assert [c for c in chars if nfkc(c) != _nfkc(c)] == []


def test_every_full_width_form_before_every_combining_mark() -> None:
    pairs = [f + m for f in FULLWIDTH for m in COMBINING]
    assert [p for p in pairs if nfkc(p) != _nfkc(p)] == []
    assert sum(nfkc(p) != p.translate({ord(f): _nfkc(f) for f in FULLWIDTH}) for p in pairs) > 0


MIXED = st.text(
    alphabet=st.sampled_from(
        [*FULLWIDTH, *COMBINING, *"abcAé 我们的，。…ｶﾞ가\u1100\u1161\u11a8ﬁ①㎞½", "\u212b"]
    ),
    max_size=40,
)


@settings(max_examples=3000, deadline=None)
@given(MIXED)
def test_any_mix_of_full_width_combining_and_compatibility_characters(text: str) -> None:
    assert nfkc(text) == _nfkc(text)


def test_chinese_punctuation_becomes_ascii() -> None:
    assert normalize_text("你好，世界！（测试）：　ＡＢＣ１２３") == "你好,世界!(测试): ABC123"
