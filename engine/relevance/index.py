"""BM25F relevance index over a session's scored folders (recall `ranked` mode).

A folder is one document: its conversation text plus its title, keywords, events,
persons and locations, each field's terms counted `boost` times (integer boosts, so a
weighted term frequency and a document length stay integers). Terms come from
`engine.relevance.analyzer.search_terms`. Scoring is Okapi BM25 (k1 1.2, b 0.75,
idf ln(1 + (N − df + 0.5) / (df + 0.5))) over the live documents.

Why an inverted index of our own, not `bm25s` or `tantivy`: the index must follow the
store in place (every archive, judge, re-archive and removal changes a few folders
of thousands), answer a query in well under a millisecond at 10^4 folders from the
event loop's worker thread, and give bit-identical scores whether it was built fresh
or updated (determinism across restarts). `bm25s` precomputes a scipy matrix that
has to be rebuilt on every change; `tantivy` is a second storage engine with its own
files and segment merges. Here postings are append-only `array('i')` pairs (document
numbers ascending, weighted tf), read by NumPy without copying; a removed or changed
folder leaves a tombstone (its document number goes dead, document frequencies and
lengths are corrected at once) and the arrays are compacted when more than a third
of the documents are dead. Every quantity in a score is an integer until the final
float expression, which is evaluated term by term in query order, so the score of a
folder does not depend on its document number or on the history of the index.

A folder's text terms are cached by folder id (text never changes for an id), so a
judge that rewrites keywords re-reads nothing from disk.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.relevance.analyzer import search_terms

__all__ = ["BM25_B", "BM25_K1", "FIELD_BOOSTS", "Ranked", "RelevanceIndex"]

BM25_K1 = 1.2
BM25_B = 0.75
FIELD_BOOSTS: dict[str, int] = {
    "text": 1,
    "title": 1,
    "keywords": 3,
    "events": 2,
    "persons": 2,
    "locations": 2,
}
"""How many times a field's terms count. Keywords are what the judge (or the
distinctive-term heuristic) says a folder is about; names, places and events are
what questions are asked with; the title is the folder's first line, already in the
text, so it counts once more."""

_COMPACT_DEAD_SHARE = 1 / 3

TermCounts = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Ranked:
    """Folders relevant to a query, best first: ids and BM25F scores (> 0)."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]


def _signature(entry: Any) -> tuple[Any, ...]:
    """The fields of an index entry the document's terms depend on (besides its text);
    α is kept beside the document and updated in place."""
    return (
        entry.title or "",
        tuple(entry.keywords or ()),
        tuple(entry.events or ()),
        tuple(entry.persons or ()),
        tuple(entry.locations or ()),
    )


def _count(terms: Iterable[str], boost: int, into: Counter[str]) -> None:
    for t in terms:
        into[t] += boost


class RelevanceIndex:
    """Postings of search terms over the session's scored folders.

    `text_of(folder_id)` gives a folder's searchable text (the caller reads the disk);
    it is called once per folder id over the index's life.
    """

    def __init__(
        self, text_of: Callable[[str], str], *, extra_stopwords: Sequence[str] = ()
    ) -> None:
        self._text_of = text_of
        self.extra_stopwords = tuple(extra_stopwords)
        self.version: Any = None
        # documents
        self._doc_ids: list[str] = []  # doc number -> folder id ("" when dead)
        self._live = bytearray()
        self._len = array("q")  # weighted length (0 when dead)
        self._alpha = array("d")
        self._doc_terms: list[tuple[array[int], array[int]] | None] = []
        self.by_id: dict[str, int] = {}
        self._sigs: dict[str, tuple[Any, ...]] = {}
        self._entries: dict[str, Any] = {}
        self._text_cache: dict[str, TermCounts] = {}
        # terms
        self._tids: dict[str, int] = {}
        self._post_docs: list[array[int]] = []
        self._post_tf: list[array[int]] = []
        self._df = array("q")
        self._live_docs = 0
        self._total_len = 0
        self._dead = 0

    # -- statistics (engine.relevance.stats.TermStats) ------------------------------
    @property
    def docs(self) -> int:
        """Live documents."""
        return self._live_docs

    def df(self, term: str) -> int:
        """Live documents holding `term`."""
        tid = self._tids.get(term)
        return 0 if tid is None else int(self._df[tid])

    def __len__(self) -> int:
        return self._live_docs

    def __contains__(self, folder_id: object) -> bool:
        return folder_id in self.by_id

    # -- building -------------------------------------------------------------------
    def _text_terms(self, folder_id: str) -> TermCounts:
        cached = self._text_cache.get(folder_id)
        if cached is None:
            counts = Counter(search_terms(self._text_of(folder_id), self.extra_stopwords))
            cached = tuple(counts.items())
            self._text_cache[folder_id] = cached
        return cached

    def _document(self, entry: Any) -> Counter[str]:
        counts: Counter[str] = Counter()
        extra = self.extra_stopwords
        for term, tf in self._text_terms(entry.id):
            counts[term] += tf * FIELD_BOOSTS["text"]
        _count(search_terms(entry.title or "", extra), FIELD_BOOSTS["title"], counts)
        for name in ("keywords", "events", "persons", "locations"):
            values = getattr(entry, name, None) or ()
            for value in values:
                _count(search_terms(str(value), extra), FIELD_BOOSTS[name], counts)
        return counts

    def _tid(self, term: str) -> int:
        tid = self._tids.get(term)
        if tid is None:
            tid = len(self._post_docs)
            self._tids[term] = tid
            self._post_docs.append(array("i"))
            self._post_tf.append(array("i"))
            self._df.append(0)
        return tid

    def _add(self, entry: Any) -> None:
        counts = self._document(entry)
        d = len(self._doc_ids)
        tids = array("i")
        tfs = array("i")
        for term in sorted(counts):
            tid = self._tid(term)
            tf = counts[term]
            self._post_docs[tid].append(d)
            self._post_tf[tid].append(tf)
            self._df[tid] += 1
            tids.append(tid)
            tfs.append(tf)
        length = sum(counts.values())
        self._doc_ids.append(entry.id)
        self._live.append(1)
        self._len.append(length)
        self._alpha.append(float(entry.alpha))
        self._doc_terms.append((tids, tfs))
        self.by_id[entry.id] = d
        self._sigs[entry.id] = _signature(entry)
        self._entries[entry.id] = entry
        self._live_docs += 1
        self._total_len += length

    def _kill(self, folder_id: str, *, forget_text: bool) -> None:
        d = self.by_id.pop(folder_id)
        del self._sigs[folder_id]
        del self._entries[folder_id]
        if forget_text:
            self._text_cache.pop(folder_id, None)
        terms = self._doc_terms[d]
        if terms is not None:
            for tid in terms[0]:
                self._df[tid] -= 1
        self._doc_terms[d] = None
        self._doc_ids[d] = ""
        self._live[d] = 0
        self._total_len -= self._len[d]
        self._len[d] = 0
        self._live_docs -= 1
        self._dead += 1

    def sync(self, entries: Iterable[Any], version: Any = None) -> int:
        """Bring the index to the scored folders of `entries` (the store's index, in
        order); returns how many documents were added, changed or removed.

        An entry object seen before is unchanged (store entries are frozen models,
        replaced on every change), so a sync after a small change costs one pass of
        identity checks plus the changed folders.
        """
        known = self._entries
        seen: set[str] = set()
        changes = 0
        for entry in entries:
            if entry.scored is False:
                continue
            fid = entry.id
            if fid in seen:
                continue  # a duplicate id: the first entry is the folder
            seen.add(fid)
            old = known.get(fid)
            if old is entry:
                continue
            if old is not None:
                if self._sigs[fid] == _signature(entry):
                    known[fid] = entry
                    self._alpha[self.by_id[fid]] = float(entry.alpha)
                    continue
                self._kill(fid, forget_text=False)
            self._add(entry)
            changes += 1
        if len(seen) != len(known):
            for fid in [f for f in known if f not in seen]:
                self._kill(fid, forget_text=True)
                changes += 1
        if self._dead > _COMPACT_DEAD_SHARE * max(1, len(self._doc_ids)):
            self._compact()
        self.version = version
        return changes

    def _compact(self) -> None:
        """Renumber the live documents (in their current order) and drop the dead."""
        live = [d for d in range(len(self._doc_ids)) if self._live[d]]
        remap = {old: new for new, old in enumerate(live)}
        n_terms = len(self._post_docs)
        post_docs = [array("i") for _ in range(n_terms)]
        post_tf = [array("i") for _ in range(n_terms)]
        for tid in range(n_terms):
            docs, tfs = self._post_docs[tid], self._post_tf[tid]
            nd, nt = post_docs[tid], post_tf[tid]
            for d, tf in zip(docs, tfs, strict=True):
                new = remap.get(d)
                if new is not None:
                    nd.append(new)
                    nt.append(tf)
        self._post_docs, self._post_tf = post_docs, post_tf
        self._doc_ids = [self._doc_ids[d] for d in live]
        self._live = bytearray(b"\x01" * len(live))
        self._len = array("q", (self._len[d] for d in live))
        self._alpha = array("d", (self._alpha[d] for d in live))
        self._doc_terms = [self._doc_terms[d] for d in live]
        self.by_id = {fid: n for n, fid in enumerate(self._doc_ids)}
        self._dead = 0

    # -- querying -------------------------------------------------------------------
    def query_terms(self, text: str) -> list[str]:
        """The distinct search terms of a query, in order."""
        return list(dict.fromkeys(search_terms(text, self.extra_stopwords)))

    def scores(self, terms: Sequence[str]) -> npt.NDArray[np.float64]:
        """BM25 score of every document number (0 for dead documents and non-matches)."""
        n = len(self._doc_ids)
        acc = np.zeros(n, dtype=np.float64)
        live = self._live_docs
        if not live or not terms:
            return acc
        avgdl = self._total_len / live
        lens = np.frombuffer(self._len, dtype=np.int64)
        k1, b = BM25_K1, BM25_B
        matched = False
        for term in terms:
            tid = self._tids.get(term)
            if tid is None:
                continue
            df = int(self._df[tid])
            if df <= 0:
                continue
            matched = True
            idf = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
            docs = np.frombuffer(self._post_docs[tid], dtype=np.int32)
            tf = np.frombuffer(self._post_tf[tid], dtype=np.int32).astype(np.float64)
            norm = k1 * (1.0 - b + b * lens[docs] / avgdl)
            acc[docs] += idf * tf * (k1 + 1.0) / (tf + norm)
        if matched and self._dead:
            acc *= np.frombuffer(self._live, dtype=np.uint8)
        return acc

    def rank(
        self,
        terms: Sequence[str],
        *,
        limit: int,
        alpha_prior: float = 0.0,
        min_alpha: float = 0.0,
        min_relative: float = 0.0,
    ) -> Ranked:
        """The best `limit` folders for `terms` (every folder tied with the last one
        included), after the α prior `score × (1 + alpha_prior × (α − 0.5))`, without
        folders below `min_alpha` or under `min_relative` × the best score; ties go by
        folder id, so the order never depends on document numbers."""
        acc = self.scores(terms)
        if limit <= 0 or not acc.size:
            return Ranked((), ())
        hit = np.flatnonzero(acc > 0.0)
        if not hit.size:
            return Ranked((), ())
        alpha = np.frombuffer(self._alpha, dtype=np.float64)[hit]
        score = acc[hit]
        if alpha_prior:
            score = score * (1.0 + alpha_prior * (alpha - 0.5))
        if min_alpha > 0.0:
            keep = alpha >= min_alpha
            hit, score = hit[keep], score[keep]
            if not hit.size:
                return Ranked((), ())
        if min_relative > 0.0:
            keep = score >= min_relative * float(score.max())
            hit, score = hit[keep], score[keep]
        if hit.size > limit:
            cut = float(np.partition(score, hit.size - limit)[hit.size - limit])
            keep = score >= cut
            hit, score = hit[keep], score[keep]
        ids = self._doc_ids
        order = sorted(
            zip(score.tolist(), hit.tolist(), strict=True), key=lambda p: (-p[0], ids[p[1]])
        )
        return Ranked(tuple(ids[d] for _, d in order), tuple(s for s, _ in order))
