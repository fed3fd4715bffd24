"""Text -> search terms for relevance ranking (recall `ranked` mode, heuristic keywords).

The keyword tokenizer (`engine.tokenizer`) keeps surface forms for display and for the
reference's contains-matching. Ranking needs something else: terms that two phrasings
of the same thing share, and none of the chatter every folder shares.

* **Latin** words are NFKC-normalised, case-folded and stemmed with the Snowball
  English stemmer (PyStemmer: "finished", "finishing" and "finish" are one term);
  stopwords (`engine.stopwords.EN_STOPWORDS`) and chat filler (:data:`EN_FILLER`:
  "great", "wow", "awesome" …) are dropped before stemming, and so are terms shorter
  than 2 characters. Digits stay terms ("8080", "2024"): parameters are what users
  ask about. Words split at every other character, so ``node.js`` gives ``node`` and
  ``js`` and a query can name either.
* **CJK** runs become their overlapping character bigrams plus their single
  characters (particles and pronouns such as 的了吗是在我你 excepted), the standard
  dictionary-free choice: no segmentation error can hide a word, a bigram rewards
  the words a question shares with the text, and single characters let a question
  that rephrases (叫 in 以后我就叫你小鲸 and 你说以后要叫我什么) still meet it. IDF
  takes care of the pairs that straddle two words and of common characters. No
  bigram is dropped as a stopword: measured on `make eval`, every filter tried
  (stopword pairs, pairs with a particle) lost evidence in Chinese.

A folder's passages (:func:`search_passages`, what the passage rerank scores) are its
lines, with the sentences that ask (ending in ``?`` or ``？``) split off into a passage of
their own that is marked as asking: a question holds the words of its answer but not the
answer, so it may count for the folder but never be the folder's best passage.

Deterministic and locale-independent; the result keeps text order and duplicates.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable
from typing import Final

import Stemmer  # type: ignore[import-not-found]

from engine.stopwords import CJK_SPLIT_CHARS, EN_STOPWORDS
from engine.tokenizer import CJK_CLASS, normalize_text

__all__ = [
    "EN_FILLER",
    "asking_split",
    "search_passages",
    "search_terms",
    "search_terms_by_line",
    "stem_word",
]

EN_FILLER: Final[frozenset[str]] = frozenset(
    [
        "great",
        "wow",
        "awesome",
        "cool",
        "nice",
        "lol",
        "haha",
        "hahaha",
        "omg",
        "amazing",
        "sounds",
        "sound",
        "glad",
        "good",
        "fine",
        "totally",
        "definitely",
        "absolutely",
        "sure",
        "yea",
        "nah",
        "hmm",
        "huh",
        "aww",
        "ah",
        "uh",
        "um",
        "wanna",
        "gonna",
        "gotta",
        "kinda",
        "sorta",
        "stuff",
        "thing",
        "things",
        "lot",
        "lots",
        "much",
        "many",
        "pretty",
        "super",
        "fun",
        "exciting",
        "excited",
        "happy",
        "hear",
        "heard",
        "see",
        "saw",
        "seen",
        "going",
        "go",
        "goes",
        "went",
        "come",
        "came",
        "coming",
        "one",
        "ones",
        "also",
        "even",
        "still",
        "always",
        "never",
        "ever",
        "something",
        "anything",
        "everything",
        "nothing",
        "someone",
        "anyone",
        "everyone",
        "way",
        "ways",
        "right",
        "thats",
        "wait",
        "yep",
        "nope",
        "guess",
        "mean",
        "means",
        "maybe",
        "hope",
        "hoped",
        "cheers",
        "bye",
        "lovely",
        "wonderful",
        "fantastic",
        "incredible",
        "true",
        "real",
    ]
)
"""English chat filler: words of agreement, excitement and small talk that occur in
almost every turn of a chat and never carry what a question asks about."""

_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_SCAN = re.compile(rf"(?P<cjk>[{CJK_CLASS}]+)|(?P<lat>[0-9a-z\u00e0-\u024f]+)")
_EN_DROP: Final[frozenset[str]] = EN_STOPWORDS | EN_FILLER
_STEMMER = Stemmer.Stemmer("english")


@functools.lru_cache(maxsize=1 << 17)
def stem_word(word: str) -> str:
    """The Snowball stem of one case-folded word (cached: chat vocabulary is small)."""
    return str(_STEMMER.stemWord(word))


def _cjk_terms(run: str, out: list[str]) -> None:
    """Every character bigram of a CJK run, then its characters (particles excepted)."""
    if len(run) > 1:
        out.extend([a + b for a, b in itertools.pairwise(run)])
    out.extend([c for c in run if c not in CJK_SPLIT_CHARS])


@functools.lru_cache(maxsize=64)
def _extra_tables(extra: tuple[object, ...]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    """The Latin words to drop (stopwords, filler and the case-folded extra stopwords),
    and a pattern cutting CJK runs at the CJK extra stopwords."""
    words = frozenset(e.casefold() for e in extra if isinstance(e, str) and e)
    cjk = sorted((w for w in words if _CJK_RUN.fullmatch(w)), key=lambda w: (-len(w), w))
    return _EN_DROP | words, re.compile("|".join(map(re.escape, cjk))) if cjk else None


def search_terms(text: str, extra_stopwords: Iterable[str] = ()) -> list[str]:
    """The search terms of ``text`` in text order (duplicates kept).

    ``extra_stopwords`` (``keywords.extraStopwords``) are dropped as well: a Latin one
    by its case-folded form; a CJK one cuts the run it occurs in, as in the keyword
    tokenizer ("星港项目" without "星港" leaves "项目").
    """
    # printable ASCII is its own NFKC form, without anything normalize_text blanks
    if text.isascii() and text.isprintable():
        norm = text.lower()
    else:
        norm = normalize_text(text).casefold()
    return _terms(norm, *_tables(extra_stopwords))


def search_terms_by_line(text: str, extra_stopwords: Iterable[str] = ()) -> list[list[str]]:
    """The search terms of each line of ``text`` (split at ``\n``), as
    :func:`search_terms` gives them: a folder's passages.

    The text is normalised once, its line breaks held by a paragraph separator: NFKC
    neither changes nor composes across one, and the other steps work character by
    character (a text holding one is normalised line by line).
    """
    tables = _tables(extra_stopwords)
    if _LINE_MARK in text:
        return [_terms(normalize_text(line).casefold(), *tables) for line in text.split("\n")]
    norm = normalize_text(text.replace("\n", _LINE_MARK)).casefold()
    return [_terms(line, *tables) for line in norm.split(_LINE_MARK)]


_LINE_MARK = "\u2029"

_QUESTION_MARKS = "?？﹖︖⁇⁈⁉"
"""Every character NFKC turns into (or into something holding) ``?``."""
_SENTENCE_ENDS = ".!?;。？﹖︖⁇⁈⁉！﹗︕；﹔︔．﹒｡"
_SENTENCE = re.compile(f"[^{_SENTENCE_ENDS}]*[{_SENTENCE_ENDS}]+|[^{_SENTENCE_ENDS}]+")
"""A sentence and the punctuation ending it (anything NFKC makes ``.!?;`` or 。), or
the rest of a line without any."""


def asking_split(line: str) -> tuple[str, str]:
    """(the sentences of `line` that state, the ones that ask), each kept in order. A
    sentence asks when the punctuation ending it holds a question mark. Both pieces end
    where a sentence ends, at punctuation, so between them they hold exactly the
    line's terms."""
    stated: list[str] = []
    asked: list[str] = []
    for m in _SENTENCE.finditer(line):
        sentence = m.group()
        asks = any(q in sentence for q in _QUESTION_MARKS)
        (asked if asks else stated).append(sentence)
    return "".join(stated), "".join(asked)


def search_passages(text: str, extra_stopwords: Iterable[str] = ()) -> list[tuple[list[str], bool]]:
    """The passages of ``text`` (module docstring): per line, the search terms of its
    sentences that state, then (when it has any) those of its sentences that ask, marked
    True. Empty passages are kept; every term of ``text`` is in exactly one passage."""
    if not any(q in text for q in _QUESTION_MARKS):
        return [(terms, False) for terms in search_terms_by_line(text, extra_stopwords)]
    pieces: list[str] = []
    asks: list[bool] = []
    for line in text.split("\n"):
        if any(q in line for q in _QUESTION_MARKS):
            stated, asked = asking_split(line)
            pieces.append(stated)
            asks.append(False)
            if asked:
                pieces.append(asked)
                asks.append(True)
        else:
            pieces.append(line)
            asks.append(False)
    terms = search_terms_by_line("\n".join(pieces), extra_stopwords)
    return list(zip(terms, asks, strict=True))


def _tables(extra_stopwords: Iterable[str]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    extra = extra_stopwords if type(extra_stopwords) is tuple else tuple(extra_stopwords)
    try:
        return _extra_tables(extra)
    except TypeError:  # something unhashable among them: not a stopword anyway
        return _extra_tables(tuple(e for e in extra if isinstance(e, str)))


def _terms(norm: str, drop: frozenset[str], cut: re.Pattern[str] | None) -> list[str]:
    """The search terms of normalised, case-folded text. (`findall`'s pairs rather than
    match objects: this loop is most of building a relevance index.)"""
    out: list[str] = []
    stem = stem_word
    for cjk, lat in _SCAN.findall(norm):
        if lat:
            if len(lat) < 2 or lat in drop:
                continue
            out.append(lat if lat[0].isdigit() else stem(lat))
        elif cut is None:
            _cjk_terms(cjk, out)
        else:
            for piece in cut.split(cjk):
                if piece:
                    _cjk_terms(piece, out)
    return out
