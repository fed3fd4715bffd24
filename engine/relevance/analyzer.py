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
* **CJK** runs become overlapping character bigrams (a one-character run becomes that
  character), the standard dictionary-free choice: no segmentation error can hide a
  word, and IDF takes care of the pairs that straddle two words. A bigram that is a
  stopword or holds a particle character (的了吗是在我你 …) is dropped unless it is a
  protected word (了解, 存在): those pairs occur in nearly every sentence and only add
  noise to long folders. Chat filler (哈哈, 好的, 不错 …) is dropped too.

Deterministic and locale-independent; the result keeps text order and duplicates.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import Final

import Stemmer  # type: ignore[import-not-found]

from engine.stopwords import CJK_PROTECTED, CJK_SPLIT_CHARS, CJK_STOPWORDS, EN_STOPWORDS
from engine.tokenizer import CJK_CLASS, normalize_text

__all__ = ["CJK_FILLER", "EN_FILLER", "search_terms", "stem_word"]

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

CJK_FILLER: Final[frozenset[str]] = frozenset(
    [
        "哈哈",
        "呵呵",
        "嘿嘿",
        "嗯嗯",
        "好的",
        "好吧",
        "不错",
        "厉害",
        "真棒",
        "太棒",
        "棒了",
        "确实",
        "是啊",
        "对啊",
        "好啊",
        "可以",
        "没事",
        "加油",
        "开心",
        "高兴",
        "有趣",
        "羡慕",
        "不过",
        "真的",
        "其实",
        "感觉",
        "觉得",
        "一起",
        "一下",
        "一点",
        "有点",
        "怎么",
        "什么",
        "知道",
        "然后",
    ]
)
"""Chinese chat filler (two-character forms, as the bigram analyser sees them)."""

_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_SCAN = re.compile(rf"(?P<cjk>[{CJK_CLASS}]+)|(?P<lat>[0-9a-z\u00e0-\u024f]+)")
_EN_DROP: Final[frozenset[str]] = EN_STOPWORDS | EN_FILLER
_CJK_DROP: Final[frozenset[str]] = (CJK_STOPWORDS | CJK_FILLER) - CJK_PROTECTED
_STEMMER = Stemmer.Stemmer("english")


@functools.lru_cache(maxsize=1 << 17)
def stem_word(word: str) -> str:
    """The Snowball stem of one case-folded word (cached: chat vocabulary is small)."""
    return str(_STEMMER.stemWord(word))


@functools.lru_cache(maxsize=1 << 16)
def _bigram_ok(bigram: str) -> bool:
    if bigram in CJK_PROTECTED:
        return True
    if bigram in _CJK_DROP:
        return False
    return bigram[0] not in CJK_SPLIT_CHARS and bigram[1] not in CJK_SPLIT_CHARS


def _cjk_terms(run: str, out: list[str]) -> None:
    if len(run) == 1:
        if run not in CJK_SPLIT_CHARS:
            out.append(run)
        return
    for i in range(len(run) - 1):
        bg = run[i : i + 2]
        if _bigram_ok(bg):
            out.append(bg)


@functools.lru_cache(maxsize=64)
def _extra_tables(extra: tuple[str, ...]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    """Case-folded Latin extra stopwords, and a pattern cutting CJK runs at the CJK ones."""
    words = frozenset(e.casefold() for e in extra if e)
    cjk = sorted((w for w in words if _CJK_RUN.fullmatch(w)), key=lambda w: (-len(w), w))
    return words, re.compile("|".join(map(re.escape, cjk))) if cjk else None


def search_terms(text: str, extra_stopwords: Iterable[str] = ()) -> list[str]:
    """The search terms of ``text`` in text order (duplicates kept).

    ``extra_stopwords`` (``keywords.extraStopwords``) are dropped as well: a Latin one
    by its case-folded form; a CJK one cuts the run it occurs in, as in the keyword
    tokenizer ("星港项目" without "星港" leaves "项目").
    """
    norm = normalize_text(text).casefold()
    extra, cut = _extra_tables(tuple(e for e in extra_stopwords if isinstance(e, str)))
    out: list[str] = []
    for m in _SCAN.finditer(norm):
        lat = m.group("lat")
        if lat is not None:
            if len(lat) < 2 or lat in _EN_DROP or lat in extra:
                continue
            out.append(lat if lat[0].isdigit() else stem_word(lat))
        elif cut is None:
            _cjk_terms(m.group("cjk"), out)
        else:
            for piece in cut.split(m.group("cjk")):
                if piece:
                    _cjk_terms(piece, out)
    return out
