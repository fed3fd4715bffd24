"""Keyword extraction and keyword matching (reference §1.3 steps 1-2, §3.0.1).

Extraction turns a user utterance (query side, at most :data:`QUERY_KEYWORDS_MAX` = 16;
the 「你说过」 assistant-quote channel at most :data:`ASSISTANT_SAID_KEYWORDS_MAX` = 8) or an
archived conversation (heuristic scoring, ``keywords.min/max`` = 3/16) into keywords.

Matching decides whether a query keyword hits a folder keyword:

* both sides are compared by :func:`match_key` (NFKC, whitespace folded, and with
  ``match.expandLatinCase`` also case-folded). The default is case-*sensitive*, as in the
  reference, where ignoring case is an opt-in extension "to avoid regressions";
* ``keywords.matchMode = "exact"``: the keys are equal;
* ``keywords.matchMode = "contains"`` (default): equal, or either key contains the other
  (bidirectional, v1.4.0/v1.4.1). The v1.3.0 direction is "folder keyword inside the
  query", the v1.4 addition is "query token inside a multi-word folder keyword"
  (``网关`` hits ``接口网关 8080``). Containment respects Latin word boundaries: a Latin
  letter/digit may not continue on either side of the contained part, so ``port`` does
  not hit ``export`` and ``3.1`` does not hit ``3.14``, while CJK, which has no spaces,
  matches anywhere;
* ``match.cjkBigram`` (opt-in): additionally, two keywords match when their CJK parts
  share an overlapping character bigram (项目进度 ~ 项目经理).

Both extensions apply in either mode: they are explicit opt-ins, and a user who turned
them on wants them. To get the v1.3.0 "folder keyword occurs anywhere in the utterance"
semantics, pass the whole utterance as ``query_kw``: contains mode then checks exactly
that.

For an index over 10^5 folders, precompute ``match_key`` for every folder keyword once
and use :class:`QueryMatcher`, which compiles one query into a couple of C-level checks
per folder key.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Final, Literal

from engine.stopwords import stopword_table
from engine.tokenizer import (
    CJK_CLASS,
    LATIN_WORD_CLASS,
    fix_surrogates,
    is_latin_word_char,
    normalize_text,
)
from engine.tokenizer import terms as _terms

QUERY_KEYWORDS_MAX: Final = 16
"""Main query extraction cap (reference RECALL_KEYWORDS_MAX, §1.14.2)."""
ASSISTANT_SAID_KEYWORDS_MAX: Final = 8
"""「你说过」 assistant-quote channel cap (§1.13.5, §1.14.2)."""

MatchMode = Literal["contains", "exact"]
MATCH_MODES: Final[tuple[str, ...]] = ("contains", "exact")

_WS = re.compile(r"\s+")
_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")


def extract_keywords(
    text: str, *, max_keywords: int = QUERY_KEYWORDS_MAX, extra_stopwords: Iterable[str] = ()
) -> list[str]:
    """Extract at most ``max_keywords`` keywords from ``text``, most important first.

    Terms come from :func:`engine.tokenizer.terms` (never stopwords, built-in or extra).
    They are deduplicated case-insensitively (``Redis`` and ``redis`` are one keyword;
    the first spelling seen is kept for display), then ranked by frequency, descending,
    and first occurrence, ascending. Frequency first because a long archived conversation
    repeats what it is about; first occurrence breaks ties so a short query keeps its own
    word order. Every keyword is a substring of ``tokenizer.normalize_text(text)`` up to
    case. Deterministic: no hashing order is involved (dicts keep insertion order).
    """
    if max_keywords <= 0 or not text:
        return []
    table = stopword_table(tuple(extra_stopwords))
    stats: dict[str, list[int]] = {}  # key -> [count, first index]
    display: dict[str, str] = {}
    for i, term in enumerate(_terms(text, table)):
        key = term.casefold()
        entry = stats.get(key)
        if entry is None:
            stats[key] = [1, i]
            display[key] = term
        else:
            entry[0] += 1
    ranked = sorted(stats.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
    return [display[k] for k, _ in ranked[:max_keywords]]


def _fold_key(term: str, fold: bool) -> str:
    text = _WS.sub(" ", normalize_text(term)).strip()
    return text.casefold() if fold else text


_match_key = functools.lru_cache(maxsize=1 << 16)(_fold_key)
_CACHED_CHARS = 64
"""Terms up to this long are cached: keywords and labels, a word that recurs across
thousands of folders and every query. A message or a title is seen once, and the cache,
shared by every session for the daemon's life, held each of the last 65,536 of them
(and its key): 10 MB after 5,000 messages of 300 characters."""


def match_key(term: str, *, expand_latin_case: bool) -> str:
    """The form a keyword is compared in; precompute it once per folder keyword.

    NFKC (full-width -> half-width, same normalisation as stored keywords), surrogate
    repair, zero-width characters removed, controls and whitespace runs folded into one
    space, trimmed; with ``expand_latin_case`` also ``casefold``-ed (``Redis`` == ``redis``).
    Han characters have no case and are unaffected. An empty key never matches anything.
    """
    if len(term) > _CACHED_CHARS:
        return _fold_key(term, expand_latin_case)
    return _match_key(term, expand_latin_case)


def match_text(text: str, *, expand_latin_case: bool) -> str:
    """:func:`match_key` of a text seen once (a message, a title), never cached."""
    return _fold_key(text, expand_latin_case)


def match_keys(terms: Iterable[str], *, expand_latin_case: bool) -> list[str]:
    """The :func:`match_key` of each of ``terms``, first occurrence order, without repeats
    and without empty keys: one query's (or one folder's) keys to compare."""
    keys = (match_key(t, expand_latin_case=expand_latin_case) for t in terms)
    return list(dict.fromkeys(k for k in keys if k))


def cjk_bigrams(term: str) -> list[str]:
    """Overlapping bigrams of every CJK run in ``term``, first occurrence order, no repeats.

    ``"接口网关 8080"`` -> ``["接口", "口网", "网关"]``. A one-character run yields nothing:
    a single Han character is too ambiguous to match on (contains mode still finds it).
    """
    out: list[str] = []
    seen: set[str] = set()
    for run in _CJK_RUN.findall(fix_surrogates(term)):
        for i in range(len(run) - 1):
            bg = run[i : i + 2]
            if bg not in seen:
                seen.add(bg)
                out.append(bg)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _bigram_set(key: str) -> frozenset[str]:
    return frozenset(cjk_bigrams(key))


def contains_term(haystack: str, needle: str) -> bool:
    """True when ``needle`` occurs in ``haystack`` without gluing onto a Latin word.

    At each occurrence, if the needle starts (ends) with a Latin word character, the
    haystack character just before (after) it must not be one. Both arguments should be
    match keys.
    """
    if not needle:
        return False
    n = len(needle)
    head = is_latin_word_char(needle[0])
    tail = is_latin_word_char(needle[-1])
    start = haystack.find(needle)
    while start >= 0:
        end = start + n
        if (not head or start == 0 or not is_latin_word_char(haystack[start - 1])) and (
            not tail or end == len(haystack) or not is_latin_word_char(haystack[end])
        ):
            return True
        start = haystack.find(needle, start + 1)
    return False


def _check_mode(mode: str) -> None:
    if mode not in MATCH_MODES:
        raise ValueError(f"keywords.matchMode must be 'contains' or 'exact', got {mode!r}")


def keys_match(qk: str, fk: str, *, mode: MatchMode, cjk_bigram: bool) -> bool:
    """:func:`keyword_matches` on precomputed match keys."""
    if not qk or not fk:
        return False
    if qk == fk:
        return True
    if mode == "contains" and (contains_term(qk, fk) or contains_term(fk, qk)):
        return True
    return cjk_bigram and not _bigram_set(qk).isdisjoint(_bigram_set(fk))


def keyword_matches(
    query_kw: str,
    folder_kw: str,
    *,
    mode: MatchMode = "contains",
    expand_latin_case: bool = False,
    cjk_bigram: bool = False,
) -> bool:
    """Does the query keyword hit the folder keyword? (rules in the module docstring)

    Symmetric in its two keyword arguments: the reference's two directions are both
    "only add" and have no separate switch. Raises ``ValueError`` for an unknown mode.
    """
    _check_mode(mode)
    return keys_match(
        match_key(query_kw, expand_latin_case=expand_latin_case),
        match_key(folder_kw, expand_latin_case=expand_latin_case),
        mode=mode,
        cjk_bigram=cjk_bigram,
    )


_B = LATIN_WORD_CLASS


class QueryMatcher:
    """One query's keywords, compiled for matching against many folder keys.

    ``matches(fk)`` costs one substring test on the joined query keys and one regex
    search over ``fk`` (both in C); only on a hit does ``matched_terms`` loop over the
    query keys to say which ones hit (needed e.g. for ``recall.highRelevance`` minMatches).
    Folder keys must be :func:`match_key` results with the same ``expand_latin_case``.
    """

    __slots__ = ("_bigrams", "_cjk_bigram", "_exact", "_joined", "_mode", "_regex", "keys")

    def __init__(
        self,
        query_keywords: Sequence[str],
        *,
        mode: MatchMode = "contains",
        expand_latin_case: bool = False,
        cjk_bigram: bool = False,
    ) -> None:
        _check_mode(mode)
        keys = match_keys(query_keywords, expand_latin_case=expand_latin_case)
        self.keys: tuple[str, ...] = tuple(keys)
        self._mode: MatchMode = mode
        self._cjk_bigram = cjk_bigram
        self._exact = frozenset(keys)
        self._joined = "\x00".join(keys)
        self._regex: re.Pattern[str] | None = None
        if mode == "contains" and keys:
            alts = []
            for k in sorted(keys, key=lambda s: (-len(s), s)):
                pre = f"(?<![{_B}])" if is_latin_word_char(k[0]) else ""
                post = f"(?![{_B}])" if is_latin_word_char(k[-1]) else ""
                alts.append(pre + re.escape(k) + post)
            self._regex = re.compile("|".join(alts))
        self._bigrams: frozenset[str] = frozenset(b for k in keys for b in _bigram_set(k))

    def matches(self, folder_key: str) -> bool:
        """True when any query keyword hits ``folder_key`` (a precomputed match key)."""
        if not folder_key:
            return False
        if folder_key in self._exact:
            return True
        if self._regex is not None:
            if self._regex.search(folder_key) is not None:
                return True
            if folder_key in self._joined and any(contains_term(k, folder_key) for k in self.keys):
                return True
        return self._cjk_bigram and not self._bigrams.isdisjoint(_bigram_set(folder_key))

    def matched_terms(self, folder_key: str) -> list[str]:
        """The query keys (in query order) that hit ``folder_key``."""
        if not self.matches(folder_key):
            return []
        return [
            k
            for k in self.keys
            if keys_match(k, folder_key, mode=self._mode, cjk_bigram=self._cjk_bigram)
        ]
