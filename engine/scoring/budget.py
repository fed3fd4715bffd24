"""Token estimate and surrogate-safe cutting for model-visible text (reference v1.4.4).

v1.4.4: a cut in the middle of a UTF-16 surrogate pair left a lone surrogate, the request
body became invalid JSON and the session was stuck for good. Python strings are code
points, so a cut never splits a well-formed character; lone surrogates can still arrive
(JSON escapes decoded one unit at a time). :func:`to_well_formed` joins valid pairs and
turns every lone surrogate into U+FFFD (the reference's ``toWellFormed``);
:func:`safe_slice` cuts after that, and never leaves a dangling zero-width joiner or
variation selector at the cut.

The token estimate is deliberately simple and conservative (the reference measures the
block with the host's meter, which the daemon does not have): one token per CJK / kana /
hangul character and per other non-ASCII character, one per four ASCII characters.
"""

from __future__ import annotations

import math
import re
from typing import Final

from engine.tokenizer import CJK_CLASS

_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("([\ud800-\udbff])([\udc00-\udfff])")
_WIDE = re.compile(f"[{CJK_CLASS}]|[^\\x00-\\x7f]")
_DANGLING: Final = "\u200d\ufe0e\ufe0f"


def to_well_formed(text: str) -> str:
    """Join surrogate pairs; every lone surrogate becomes U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    joined = _PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m[1]) - 0xD800) << 10) + (ord(m[2]) - 0xDC00)), text
    )
    return _SURROGATE.sub("\ufffd", joined)


def safe_slice(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``, never ending inside a character sequence."""
    text = to_well_formed(text)
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    out = text[:limit]
    while out and out[-1] in _DANGLING:
        out = out[:-1]
    return out


def estimate_tokens(text: str) -> int:
    """Conservative token estimate: wide characters count 1, ASCII 1/4 each."""
    if not text:
        return 0
    wide = len(_WIDE.findall(text))
    return wide + math.ceil((len(text) - wide) / 4)


def slice_to_tokens(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` whose estimate is at most ``tokens`` (safe cut)."""
    if tokens <= 0:
        return ""
    if estimate_tokens(text) <= tokens:
        return to_well_formed(text)
    lo, hi = 0, min(len(text), tokens * 4)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return safe_slice(text, lo)
