"""Token estimates for text the host's token meter did not measure.

The host measures surface nodes (``context.nodes``); everything else (a node it did
not report, the checkpoint note we are about to write, a recall-block entry) is
estimated here. The estimate is deliberately simple and deterministic: one token per
CJK / kana / hangul code point, one per four other characters, plus a small per
message overhead, which is close to what BPE tokenizers give for mixed Chinese and
English text and errs on the high side for Chinese.
"""

from __future__ import annotations

from engine.tokenizer import is_cjk_char

__all__ = ["MESSAGE_OVERHEAD", "estimate_text_tokens"]

MESSAGE_OVERHEAD = 4
"""Role and framing tokens every message costs."""


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (0 for the empty string)."""
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
