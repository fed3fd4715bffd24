"""Token estimates for text the host's token meter did not measure.

The host measures surface nodes (``context.nodes``); everything else (a node it did
not report, the checkpoint note we are about to write, a recall-block entry) is
estimated here. The estimate is deliberately simple and deterministic: one token per
CJK / kana / hangul code point, one per four other characters, plus a small per
message overhead, which is close to what BPE tokenizers give for mixed Chinese and
English text and errs on the high side for Chinese.
"""

from __future__ import annotations

import re

from engine.tokenizer import CJK_CLASS

__all__ = ["MESSAGE_OVERHEAD", "estimate_text_tokens"]

MESSAGE_OVERHEAD = 4
"""Role and framing tokens every message costs."""

_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (0 for the empty string).

    The CJK code points are counted by runs in one regex scan (recall estimates every
    addition and the planner every unmeasured node: no Python loop per character)."""
    if not text:
        return 0
    cjk = 0 if text.isascii() else sum(map(len, _CJK_RUN.findall(text)))
    return cjk + (len(text) - cjk + 3) // 4
