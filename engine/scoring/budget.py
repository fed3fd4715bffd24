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
Every CJK / kana / hangul character is non-ASCII, so the estimate only needs the count of
non-ASCII code points, which one C-level pass gives (``str.encode`` dropping them); a cut
by tokens measures the prefix a block of characters at a time and bisects only the block
that holds the cut, instead of estimating prefix after prefix; the surrogate test is a
UTF-8 encode. The task block renders on every answer that carries sections, with up to
200 items: these are its inner loop.
"""

from __future__ import annotations

import re
from typing import Final

_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("([\ud800-\udbff])([\udc00-\udfff])")
_DANGLING: Final = "\u200d\ufe0e\ufe0f"
_CUT_BLOCK: Final = 256
"""Characters :func:`longest_prefix` measures at once (the cut's block is bisected)."""


def _has_surrogate(text: str) -> bool:
    # UTF-8 cannot encode a surrogate: one C pass, several times faster than a regex scan
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def to_well_formed(text: str) -> str:
    """Join surrogate pairs; every lone surrogate becomes U+FFFD."""
    if not _has_surrogate(text):
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


def wide_count(text: str) -> int:
    """Code points outside ASCII (CJK / kana / hangul included; a lone surrogate too)."""
    if text.isascii():
        return 0
    return len(text) - len(text.encode("ascii", "ignore"))


def _tokens_of(length: int, wide: int) -> int:
    """The estimate of a text of ``length`` code points, ``wide`` of them non-ASCII."""
    return wide + (length - wide + 3) // 4


def estimate_tokens(text: str) -> int:
    """Conservative token estimate: wide characters count 1, ASCII 1/4 each."""
    if not text:
        return 0
    return _tokens_of(len(text), wide_count(text))


def longest_prefix(text: str, tokens: int) -> int:
    """The length of the longest prefix of ``text`` whose estimate is at most ``tokens``.

    The estimate never falls as a prefix grows, so the first block that goes over holds
    the cut, found inside it by bisection (each step counts a part of one block). Never
    past ``4 × tokens`` characters (a prefix's estimate is at least a quarter of its
    length), so a cut costs what it keeps, not the length of the text.
    """
    limit = min(len(text), max(0, tokens) * 4)
    pos = wide = 0
    while pos < limit:
        end = min(pos + _CUT_BLOCK, limit)
        block = text[pos:end]
        block_wide = wide_count(block)
        if _tokens_of(end, wide + block_wide) <= tokens:
            pos, wide = end, wide + block_wide
            continue
        lo, hi = 0, len(block)  # the prefix of lo characters fits, of hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _tokens_of(pos + mid, wide + wide_count(block[:mid])) <= tokens:
                lo = mid
            else:
                hi = mid
        return pos + lo
    return pos


def slice_to_tokens(text: str, tokens: int) -> str:
    """The longest prefix of ``text`` whose estimate is at most ``tokens`` (safe cut)."""
    if tokens <= 0:
        return ""
    if estimate_tokens(text) <= tokens:
        return to_well_formed(text)
    return safe_slice(text, longest_prefix(text, tokens))
