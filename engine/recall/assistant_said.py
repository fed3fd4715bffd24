"""The 「你说过」 channel, query side (reference §1.13.5, §1.17).

A message that quotes the assistant ("你之前说过叫我什么？", "What did you promise me?")
asks about what the assistant itself said. Detection is a fixed table (the reference's
phrases, plus three Chinese forms of "you said you would" and the English "you said /
you told me / you promised" with their question forms); `recall.assistantSaid.enabled:
false` turns detection and the channel off, and `legacy` never has it.

The channel's keys are the message's phrases (`engine.assistant_keywords.phrases`, at
most :data:`ASSISTANT_SAID_KEYWORDS_MAX` = 8) after a change of speaker: the user's 我 is
the assistant's 你 and the other way round, so "叫我什么" looks for what the assistant
said as "叫你…". `memory_recall`'s keywords are the model's own words, from either side:
both forms are looked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from engine.assistant_keywords import phrases
from engine.config import MemoryConfig
from engine.keywords import ASSISTANT_SAID_KEYWORDS_MAX, match_key
from engine.tokenizer import normalize_text

__all__ = [
    "QUOTE_PHRASES",
    "AssistantQuery",
    "assistant_query",
    "channel_enabled",
    "current_request",
    "detect_quote",
    "message_query_info",
    "swap_speaker",
    "tool_assistant_query",
]


@dataclass(frozen=True, slots=True)
class AssistantQuery:
    """What a message asks of the 「你说过」 channel: why, and with which keys."""

    source: str  # "auto" (a quote phrase in the message) or "param" (memory_recall)
    phrase: str  # the quote phrase found ("" for an explicit parameter)
    keys: tuple[str, ...]  # channel match keys, at most 8


QUOTE_PHRASES: Final[tuple[str, ...]] = (
    # the reference's table (§1.13.5)
    "你说过",
    "你有没有说过",
    "你之前说",
    "你以前说",
    "你上次说",
    "你刚才说",
    "你建议",
    "你推荐",
    "你答应",
    "你承诺",
    "你让我",
    "你不是说",
    "你不是答应",
    "你说的是",
    "你讲过",
    "你提到过",
    "你告诉过我",
    # ours: "you said you would …"
    "你说要",
    "你说会",
    "你说以后",
    # English
    "you said",
    "you told me",
    "you promised",
    "did you say",
    "did you tell me",
    "did you promise",
)
"""Quote phrases, matched on the NFKC text (您 read as 你, a time word allowed after 你;
English case-insensitively, on word boundaries)."""

_WHEN = ("之前", "以前", "上次", "刚才", "那天", "昨天", "前几天", "早先")
"""A time word between 你 and the verb (你之前答应…), as the table's own 你之前说 / 你以前说 /
你上次说 / 你刚才说 show for 说."""
_ZH = re.compile(
    "你(?:"
    + "|".join(_WHEN)
    + ")?(?:"
    + "|".join(
        re.escape(p[1:])
        for p in sorted((p for p in QUOTE_PHRASES if not p.isascii()), key=lambda p: (-len(p), p))
    )
    + ")"
)
_EN = re.compile(
    r"(?<![a-z])(" + "|".join(re.escape(p) for p in QUOTE_PHRASES if p.isascii()) + r")(?![a-z])"
)
_SWAP = str.maketrans({"我": "你", "你": "我", "您": "我"})


def channel_enabled(cfg: MemoryConfig) -> bool:
    """Whether the channel exists: `recall.assistantSaid.enabled`, not in legacy."""
    return cfg.recall.assistant_said.enabled and cfg.recall.mode != "legacy"


def detect_quote(text: str) -> str | None:
    """The first quote phrase of `text` as it is written there (longest at a position),
    or None."""
    norm = normalize_text(text).replace("您", "你")
    best: tuple[int, str] | None = None
    zh = _ZH.search(norm)
    if zh is not None:
        best = (zh.start(), zh.group())
    m = _EN.search(norm.casefold())
    if m is not None and (best is None or m.start() < best[0]):
        best = (m.start(), m.group(1))
    return best[1] if best is not None else None


def swap_speaker(text: str) -> str:
    """The user's words as the assistant would have said them: 我 ↔ 你 (您 → 我)."""
    return text.translate(_SWAP)


def _keys(texts: Iterable[str], cfg: MemoryConfig) -> tuple[str, ...]:
    out: list[str] = []
    seen: set[str] = set()
    extra = cfg.keywords.extra_stopwords
    for text in texts:
        for p in phrases(text, extra):
            key = match_key(p, expand_latin_case=True)
            if key not in seen:
                seen.add(key)
                out.append(p)
    return tuple(out[:ASSISTANT_SAID_KEYWORDS_MAX])


def assistant_query(
    text: str, cfg: MemoryConfig, *, explicit: bool | None = None
) -> AssistantQuery | None:
    """The channel request of a user message: `explicit` None detects a quote phrase,
    True asks whatever the message says, False asks nothing."""
    if explicit is False or not channel_enabled(cfg):
        return None
    phrase = detect_quote(text)
    if phrase is None and explicit is None:
        return None
    source = "auto" if explicit is None else "param"
    return AssistantQuery(source, phrase or "", _keys([swap_speaker(text)], cfg))


def current_request(ask: AssistantQuery | None) -> dict[str, Any] | None:
    """What the recall state keeps of the current user message's channel request (a
    quote phrase it holds), for a memory_recall call that leaves `assistantSaid` out."""
    if ask is None or ask.source != "auto":
        return None
    return {"phrase": ask.phrase, "keys": list(ask.keys)}


def message_query_info(text: str | None, cfg: MemoryConfig) -> dict[str, Any] | None:
    """The recall state's `queryInfo` for a user message before (or without) a round:
    its 「你说过」 request alone (a round adds its clauses and quota)."""
    if not text:
        return None
    return {"assistantSaid": current_request(assistant_query(text, cfg))}


def tool_assistant_query(
    keywords: Iterable[str],
    said: bool | None,
    current: Mapping[str, Any] | None,
    cfg: MemoryConfig,
) -> AssistantQuery | None:
    """memory_recall's channel request: `said` True / False as the model gave it, None
    decided by the current user message (`current`: :func:`current_request`). The keys
    are the keywords' phrases, in both speakers' forms (the model's words may be either
    side's), then the message's own."""
    if said is False or not channel_enabled(cfg):
        return None
    phrase = str(current.get("phrase") or "") if current else ""
    if said is None and current is None:
        return None
    forms = [form for w in keywords for form in (w, swap_speaker(w))]
    message_keys = [k for k in (current.get("keys") or []) if isinstance(k, str)] if current else []
    return AssistantQuery("param" if said else "auto", phrase, _keys([*forms, *message_keys], cfg))
