"""In-memory candidate index over a session's `index.json` (reference §1.3 step 2).

Built once per index version (and matching parameters) from the store's index
entries; a query then costs dictionary lookups, not a scan:

* only scored folders are indexed: `scored: false` never matches, never takes a
  slot and never bridges;
* every distinct folder keyword is a *key* (its `match_key`), with the postings
  (folder numbers) of the folders carrying it;
* "folder keyword inside a query keyword" (v1.3.0 direction): every substring of
  the query key up to the longest key length is looked up;
* "query keyword inside a folder keyword" (v1.4 direction): a character-bigram
  index over the keys gives the few keys that can contain the query key; each is
  verified with the exact rule of `engine.keywords.keys_match` (Latin word
  boundaries); `match.cjkBigram` uses the same bigram index;
* category expansion (`recall.categoryMatch`): folders with α ≥ `alphaMin` whose
  keywords or title contain a class word get a synthetic posting for the class; a
  query containing any word of the class seeds it.

A *seed* is one query keyword (or one category class) with its posting: the folders
it hits. Rare seeds (posting length ≤ τ) drive the rareHigh and lowProbe lanes.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.config import MemoryConfig
from engine.keywords import contains_term, keys_match, match_key
from engine.recall.query import Query
from engine.tokenizer import CJK_CLASS

__all__ = ["CandidateIndex", "Folder", "Matches", "Seed", "index_params"]

_CJK_PAIR = re.compile(f"[{CJK_CLASS}]{{2}}")


@dataclass(frozen=True, slots=True)
class Folder:
    """What recall needs of one scored folder (from its index entry)."""

    id: str
    alpha: float
    beta: float
    created_at: int
    keywords: tuple[str, ...]


@dataclass(slots=True)
class Seed:
    """One query keyword or category class and the folders it hits."""

    name: str
    kind: str  # "keyword" | "category"
    posting: set[int]


@dataclass(slots=True)
class Matches:
    """The candidate set C(Q) of one query."""

    seeds: list[Seed]
    candidates: set[int]
    hits: dict[int, int] = field(default_factory=dict)  # folder -> distinct keywords hit
    categories: list[str] = field(default_factory=list)


def index_params(cfg: MemoryConfig) -> tuple[Any, ...]:
    """The configuration the index depends on (a change rebuilds it)."""
    cm = cfg.recall.category_match
    classes = tuple(
        (name, tuple(cls.words)) for name, cls in sorted(cm.classes.items()) if cls.words
    )
    return (
        cfg.keywords.match_mode,
        cfg.match.expand_latin_case,
        cfg.match.cjk_bigram,
        cm.enabled,
        cm.alpha_min,
        classes,
    )


def _bigrams(key: str) -> set[str]:
    return {key[i : i + 2] for i in range(len(key) - 1)}


class CandidateIndex:
    """Postings by match key, a bigram index over the keys, and category postings."""

    def __init__(self, entries: Iterable[Any], cfg: MemoryConfig, version: Any = None) -> None:
        self.version = version
        self.params = index_params(cfg)
        self._mode = cfg.keywords.match_mode
        self._fold = cfg.match.expand_latin_case
        self._cjk_bigram = cfg.match.cjk_bigram
        self.folders: list[Folder] = []
        self.by_id: dict[str, int] = {}
        self._key_ids: dict[str, int] = {}
        self._keys: list[str] = []
        self._postings: list[array[int]] = []
        self._bigram: dict[str, array[int]] = {}
        self._max_key = 0
        fold = self._fold
        titles: list[str] = []
        for entry in entries:
            if entry.scored is False:
                continue
            titles.append(str(entry.title or ""))
            n = len(self.folders)
            kws = tuple(str(k) for k in (entry.keywords or ()))
            self.folders.append(
                Folder(
                    entry.id,
                    float(entry.alpha),
                    float(entry.beta or 0.0),
                    int(entry.createdAt),
                    kws,
                )
            )
            self.by_id[entry.id] = n
            seen: set[int] = set()
            for kw in kws:
                key = match_key(kw, expand_latin_case=fold)
                if not key:
                    continue
                kid = self._key_ids.get(key)
                if kid is None:
                    kid = len(self._keys)
                    self._key_ids[key] = kid
                    self._keys.append(key)
                    self._postings.append(array("i"))
                    self._max_key = max(self._max_key, len(key))
                    for bg in _bigrams(key):
                        arr = self._bigram.get(bg)
                        if arr is None:
                            arr = self._bigram[bg] = array("i")
                        arr.append(kid)
                if kid not in seen:
                    seen.add(kid)
                    self._postings[kid].append(n)
        self.categories: dict[str, set[int]] = {}
        self._category_words: dict[str, list[str]] = {}
        self._category_re: re.Pattern[str] | None = None
        cm = cfg.recall.category_match
        if cm.enabled and cm.classes:
            for name, cls in sorted(cm.classes.items()):
                for word in cls.words:
                    wk = match_key(word, expand_latin_case=fold)
                    if wk:
                        self._category_words.setdefault(wk, []).append(name)
            if self._category_words:
                alts = sorted(self._category_words, key=lambda w: (-len(w), w))
                self._category_re = re.compile("(?=(" + "|".join(map(re.escape, alts)) + "))")
        if self._category_re is not None:
            for n, folder in enumerate(self.folders):
                if folder.alpha < cm.alpha_min:
                    continue
                title = titles[n]
                text = "\x00".join(match_key(k, expand_latin_case=fold) for k in folder.keywords)
                if title:
                    text += "\x00" + match_key(title, expand_latin_case=fold)
                for name in self._classes_in(text):
                    self.categories.setdefault(name, set()).add(n)

    def __len__(self) -> int:
        return len(self.folders)

    # -- matching ------------------------------------------------------------
    def _classes_in(self, text: str) -> list[str]:
        if self._category_re is None or not text:
            return []
        out: list[str] = []
        for m in self._category_re.finditer(text):
            for name in self._category_words.get(m.group(1), ()):
                if name not in out:
                    out.append(name)
        return out

    def _keys_for(self, q: str) -> set[int]:
        """Key ids a query key hits, by the rule of `keys_match`."""
        hit: set[int] = set()
        kid = self._key_ids.get(q)
        if kid is not None:
            hit.add(kid)
        if self._mode == "contains":
            # folder key inside the query key
            lq = len(q)
            for i in range(lq):
                for j in range(i + 1, min(lq, i + self._max_key) + 1):
                    kid = self._key_ids.get(q[i:j])
                    if kid is not None and kid not in hit and contains_term(q, self._keys[kid]):
                        hit.add(kid)
            # query key inside a folder key
            if lq >= 2:
                grams = sorted(_bigrams(q), key=lambda g: len(self._bigram.get(g, ())))
                if grams and grams[0] in self._bigram:
                    for kid in set(self._bigram[grams[0]]):
                        if kid not in hit and contains_term(self._keys[kid], q):
                            hit.add(kid)
        if self._cjk_bigram:
            for i in range(len(q) - 1):
                bg = q[i : i + 2]
                if _CJK_PAIR.fullmatch(bg) and bg in self._bigram:
                    for kid in self._bigram[bg]:
                        if kid not in hit and keys_match(
                            q, self._keys[kid], mode=self._mode, cjk_bigram=True
                        ):
                            hit.add(kid)
        return hit

    def match(self, query: Query, *, min_alpha: float = 0.0) -> Matches:
        """Seeds and candidates of `query`; folders below `min_alpha` are left out."""
        seeds: list[Seed] = []
        hits: dict[int, int] = {}
        folders = self.folders
        for q in query.keys:
            posting: set[int] = set()
            for kid in self._keys_for(q):
                posting.update(self._postings[kid])
            if min_alpha > 0:
                posting = {n for n in posting if folders[n].alpha >= min_alpha}
            seeds.append(Seed(q, "keyword", posting))
            for n in posting:
                hits[n] = hits.get(n, 0) + 1
        cats = self._classes_in(query.normalized)
        for name in cats:
            posting = set(self.categories.get(name, ()))
            if min_alpha > 0:
                posting = {n for n in posting if folders[n].alpha >= min_alpha}
            seeds.append(Seed(name, "category", posting))
        candidates: set[int] = set()
        for s in seeds:
            candidates |= s.posting
        return Matches(seeds, candidates, hits, cats)

    def rare_threshold(self, ratio: float, min_posting: int) -> int:
        """τ = max(minPosting, ceil(ratio × N)), N = scored folders."""
        return max(min_posting, math.ceil(ratio * len(self.folders)))
