"""Query analysis for automatic recall (reference §1.3 step 1, §1.13.3-§1.13.5).

The user's message becomes at most 16 keywords by the same tokenizer and
normalisation the store's keywords get (`engine.keywords.extract_keywords`), plus
their match keys. The clause count and length feed the adaptive quota.

Clauses (§1.13.4): the message is split at 。！？； (their ASCII forms after NFKC) and
newlines; fragments shorter than `clauseSplit.minClauseChars` are dropped, and past
`clauseSplit.maxClauses` the rest of the message joins the last clause. With two or
more clauses every clause is analysed as a query of its own (`Query.parts`), which the
selection gives one protected slot each (`engine.recall.clauses`). With
`clauseSplit.enabled: false` (and in `legacy`) the message is one clause: no parts, and
the quota counts one clause.

The 「你说过」 channel (§1.13.5): when the message quotes the assistant (`engine.recall.
assistant_said`), `Query.assistant` holds the channel's keys.

Question words are not searched for (:func:`search_text`, what `ranked` mode scores): a
question word stands where the answer goes, so the memory that answers holds a name, a
place or a number in its place, and only other questions hold the question word. English
has always dropped them (what, where, when, who, which, how and why are stopwords); the
Chinese ones (什么, 哪里, 哪个, 谁, 几, 多少, 怎么, 为什么, 吗, 呢 …) are cut out of the
message the same way. Without that, the character pairs of 在哪里工作 match every other
"where does … work" question of the store, and a memory of the user asking questions
beats the one that answers them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from engine.config import MemoryConfig
from engine.keywords import QUERY_KEYWORDS_MAX, extract_keywords, match_keys, match_text
from engine.recall.assistant_said import AssistantQuery, assistant_query
from engine.tokenizer import normalize_text

__all__ = [
    "Query",
    "analyze_query",
    "clause_spans",
    "count_clauses",
    "effective_quota",
    "restricted",
    "search_text",
    "split_clauses",
]

_CLAUSE_SPLIT = re.compile(r"[。！？；!?;\n\r]+")

_CJK_QUESTION_WORDS = re.compile(
    "什么时候|什么|甚么|啥|为什么|为何|怎么样|怎么|怎样|如何|何时|多少|谁|几"
    "|哪[里儿个些位家天种样年月次]?|吗|呢"
)
"""Chinese question words. 哪 takes the classifier after it (哪个, 哪家, 哪天: "which"):
the answer has a name where they stand. 几 and 多少 leave it (几棵 → 三棵, 多少钱 →
两百块钱): the answer keeps the classifier."""


@dataclass(frozen=True, slots=True)
class Query:
    """One analysed user message (or one of its clauses)."""

    text: str
    normalized: str
    keywords: tuple[str, ...]
    keys: tuple[str, ...]
    clauses: int
    chars: int
    parts: tuple[Query, ...] = ()
    """Its clauses as queries of their own, when it has two or more (§1.13.4)."""
    assistant: AssistantQuery | None = None
    """The 「你说过」 channel's request, when the message makes one (§1.13.5)."""
    allowed: frozenset[str] | None = None
    """The folders it may match (a hard filter, §1.13.2); None: any."""


def clause_spans(text: str, max_clauses: int, min_chars: int) -> list[tuple[int, int]]:
    """(start, end) of each clause of `text` (module docstring): fragments under
    `min_chars` dropped, the rest of the text from the last kept clause on merged into it
    when there are more than `max_clauses`."""
    spans: list[tuple[int, int]] = []
    pos = 0
    floor = max(1, min_chars)
    for m in [*_CLAUSE_SPLIT.finditer(text), None]:
        end = m.start() if m is not None else len(text)
        piece = text[pos:end]
        lead = len(piece) - len(piece.lstrip())
        stripped = piece.strip()
        if len(stripped) >= floor:
            spans.append((pos + lead, pos + lead + len(stripped)))
        if m is not None:
            pos = m.end()
    cap = max(1, max_clauses)
    if len(spans) > cap:
        spans[cap - 1 :] = [(spans[cap - 1][0], spans[-1][1])]
    return spans


def split_clauses(text: str, max_clauses: int, min_chars: int) -> list[str]:
    """The clauses of `text`, in order (module docstring)."""
    return [text[a:b] for a, b in clause_spans(text, max_clauses, min_chars)]


def count_clauses(text: str, max_clauses: int, min_chars: int) -> int:
    """How many clauses `text` has (0 when every fragment is too short)."""
    return len(clause_spans(text, max_clauses, min_chars))


def search_text(text: str) -> str:
    """`text` with its Chinese question words cut out (module docstring): what relevance
    ranking searches for. A cut is a break, so no character pair spans it."""
    return _CJK_QUESTION_WORDS.sub(" ", text)


def _keywords(text: str, cfg: MemoryConfig) -> tuple[tuple[str, ...], tuple[str, ...]]:
    keywords = tuple(
        extract_keywords(
            text,
            max_keywords=QUERY_KEYWORDS_MAX,
            extra_stopwords=cfg.keywords.extra_stopwords,
        )
    )
    return keywords, tuple(match_keys(keywords, expand_latin_case=cfg.match.expand_latin_case))


def _single(text: str, cfg: MemoryConfig, clauses: int) -> Query:
    keywords, keys = _keywords(text, cfg)
    return Query(
        text=text,
        normalized=match_text(normalize_text(text), expand_latin_case=cfg.match.expand_latin_case),
        keywords=keywords,
        keys=keys,
        clauses=clauses,
        chars=len(text.strip()),
    )


def splits_clauses(cfg: MemoryConfig) -> bool:
    """Whether messages are split into clauses: `clauseSplit.enabled`, not in legacy."""
    return cfg.recall.clause_split.enabled and cfg.recall.mode != "legacy"


def analyze_query(text: str, cfg: MemoryConfig, *, assistant: bool | None = None) -> Query:
    """Keywords (cap 16), match keys, clauses and length of a user message, and its
    request to the 「你说过」 channel (`assistant`: None detects a quote phrase, False
    asks nothing of the channel, True asks it whatever the message says)."""

    query = _single(text, cfg, 1)
    parts: tuple[Query, ...] = ()
    clauses = 1
    if splits_clauses(cfg):
        split = cfg.recall.clause_split
        pieces = split_clauses(normalize_text(text), split.max_clauses, split.min_clause_chars)
        clauses = len(pieces)
        if clauses >= 2:
            parts = tuple(_single(p, cfg, 1) for p in pieces)
    asked = assistant_query(text, cfg, explicit=assistant)
    return Query(
        text=query.text,
        normalized=query.normalized,
        keywords=query.keywords,
        keys=query.keys,
        clauses=clauses,
        chars=query.chars,
        parts=parts,
        assistant=asked,
    )


def effective_quota(query: Query, cfg: MemoryConfig) -> int:
    """k for this round: `firstGenMax`, raised to `complexQuota` for complex messages.

    `firstGenMax = 0` disables recall in every mode; legacy keeps v1.3.0's quota. The
    clause count only counts while clauses are split (`clauseSplit.enabled: false`
    makes the whole message one clause, so it cannot raise the quota by itself).
    """
    base = cfg.recall.first_gen_max
    if base <= 0:
        return 0
    aq = cfg.recall.adaptive_quota
    if cfg.recall.mode == "legacy" or not aq.enabled:
        return base
    clauses = query.clauses if splits_clauses(cfg) else 1
    complex_ = (
        clauses >= aq.complex_min_clauses
        or query.chars >= aq.complex_min_chars
        or len(query.keywords) >= aq.complex_min_keywords
    )
    return max(base, aq.complex_quota) if complex_ else base


def restricted(query: Query, allowed: frozenset[str] | None) -> Query:
    """`query` and its clauses matching only `allowed` (None: unchanged)."""
    if allowed is None:
        return query
    parts = tuple(replace(p, allowed=allowed) for p in query.parts)
    return replace(query, allowed=allowed, parts=parts)
