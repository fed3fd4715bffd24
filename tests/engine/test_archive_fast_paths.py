"""The archive path's per-text helpers against the per-character versions they replaced.

`estimate_text_tokens` (recall additions, unmeasured surface nodes, the note) counts CJK
code points by runs in one regex scan instead of testing each character, and
`well_formed` shares the task block's surrogate repair (a UTF-8 check instead of a
regex scan). Same results on random texts: ASCII, CJK (BMP and supplementary), kana,
hangul, emoji, lone and paired surrogates.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.archive.surface import well_formed
from engine.archive.tokens import estimate_text_tokens
from engine.tokenizer import is_cjk_char

_LONE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("([\ud800-\udbff])([\udc00-\udfff])")


def old_estimate(text: str) -> int:
    if not text:
        return 0
    cjk = 0
    other = 0
    for ch in text:
        if ord(ch) >= 0x2E80 and is_cjk_char(ch):
            cjk += 1
        else:
            other += 1
    return cjk + (other + 3) // 4


def old_well_formed(text: str) -> str:
    if _LONE.search(text) is None:
        return text
    joined = _PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m[1]) - 0xD800) << 10) + (ord(m[2]) - 0xDC00)), text
    )
    return _LONE.sub("\ufffd", joined)


_SPECIAL = [
    "字",
    "の",
    "한",
    "々",
    "〇",
    "𠮷",
    "😀",
    "\u2e80",
    "\ud7af",
    "\ud83d",
    "\ude00",
    "a",
    "\n",
]
texts = st.lists(
    st.one_of(
        st.sampled_from(_SPECIAL),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=10),
        st.text(alphabet="配置文件内容 abc", max_size=20),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(texts)
def test_estimate_matches_the_per_character_count(text: str) -> None:
    assert estimate_text_tokens(text) == old_estimate(text)


@settings(max_examples=500, deadline=None)
@given(texts)
def test_well_formed_matches_the_regex_repair(text: str) -> None:
    assert well_formed(text) == old_well_formed(text)
