"""Query analysis for automatic recall (reference §1.3 step 1, §1.13.3).

The user's message becomes at most 16 keywords by the same tokenizer and
normalisation the store's keywords get (`engine.keywords.extract_keywords`), plus
their match keys. The clause count and length feed the adaptive quota.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.config import MemoryConfig
from engine.keywords import QUERY_KEYWORDS_MAX, extract_keywords, match_key
from engine.tokenizer import normalize_text

__all__ = ["Query", "analyze_query", "count_clauses", "effective_quota"]

_CLAUSE_SPLIT = re.compile(r"[。！？；!?;\n\r]+")


@dataclass(frozen=True, slots=True)
class Query:
    """One analysed user message."""

    text: str
    normalized: str
    keywords: tuple[str, ...]
    keys: tuple[str, ...]
    clauses: int
    chars: int


def count_clauses(text: str, max_clauses: int, min_chars: int) -> int:
    """Clauses split at 。！？； and newlines, short fragments dropped, capped (§1.13.4)."""
    parts = [p.strip() for p in _CLAUSE_SPLIT.split(text)]
    n = sum(1 for p in parts if len(p) >= max(1, min_chars))
    return max(1, min(n, max(1, max_clauses))) if n else 0


def analyze_query(text: str, cfg: MemoryConfig) -> Query:
    """Keywords (cap 16), match keys, clause count and length of a user message."""
    keywords = tuple(
        extract_keywords(
            text,
            max_keywords=QUERY_KEYWORDS_MAX,
            extra_stopwords=cfg.keywords.extra_stopwords,
        )
    )
    fold = cfg.match.expand_latin_case
    keys: list[str] = []
    for kw in keywords:
        k = match_key(kw, expand_latin_case=fold)
        if k and k not in keys:
            keys.append(k)
    normalized = normalize_text(text)
    split = cfg.recall.clause_split
    clauses = count_clauses(normalized, split.max_clauses, split.min_clause_chars)
    return Query(
        text=text,
        normalized=match_key(normalized, expand_latin_case=fold),
        keywords=keywords,
        keys=tuple(keys),
        clauses=clauses,
        chars=len(text.strip()),
    )


def effective_quota(query: Query, cfg: MemoryConfig) -> int:
    """k for this round: `firstGenMax`, raised to `complexQuota` for complex messages.

    `firstGenMax = 0` disables recall in every mode; legacy keeps v1.3.0's quota.
    """
    base = cfg.recall.first_gen_max
    if base <= 0:
        return 0
    aq = cfg.recall.adaptive_quota
    if cfg.recall.mode == "legacy" or not aq.enabled:
        return base
    complex_ = (
        query.clauses >= aq.complex_min_clauses
        or query.chars >= aq.complex_min_chars
        or len(query.keywords) >= aq.complex_min_keywords
    )
    return max(base, aq.complex_quota) if complex_ else base
