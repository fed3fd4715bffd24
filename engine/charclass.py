"""Character classes of the scripts the engine segments: CJK and Latin-ish words.

A module of their own because both the tokenizer and the stopword table need them, and
the tokenizer builds on the stopword table: with the classes in the tokenizer the two
modules imported each other.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CJK_CLASS", "LATIN_WORD_CLASS", "is_cjk_char", "is_latin_word_char"]

#: Han (BMP + supplementary ideographs, compatibility), kana, hangul, iteration mark 々.
CJK_CLASS: Final = (
    "\u3005\u3007\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\U00020000-\U0003134f"
)
#: Characters that make up a Latin-ish word; also the "word boundary" class for matching.
LATIN_WORD_CLASS: Final = (
    "0-9A-Za-z_\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0370-\u03ff\u0400-\u04ff"
)

_CJK_CHAR = re.compile(f"[{CJK_CLASS}]")
_LATIN_WORD_CHAR = re.compile(f"[{LATIN_WORD_CLASS}]")


def is_cjk_char(ch: str) -> bool:
    """True for one Han/kana/hangul code point (the characters that need segmentation)."""
    return _CJK_CHAR.match(ch) is not None


def is_latin_word_char(ch: str) -> bool:
    """True for one character that belongs to a Latin-ish word (letter, digit, ``_``)."""
    return _LATIN_WORD_CHAR.match(ch) is not None
