"""BM25F relevance index over a session's scored folders (recall `ranked` mode).

A folder is one document: its conversation text plus its title, keywords, events,
persons and locations, each field's terms counted `boost` times (integer boosts, so a
weighted term frequency and a document length stay integers). Terms come from
`engine.relevance.analyzer.search_terms`. Scoring is Okapi BM25 (k1 1.2, b 0.75,
idf ln(1 + (N − df + 0.5) / (df + 0.5))) over the live documents.

Length normalisation uses the average document length quantised to steps of 2^(1/8)
(`_renorm`), so each posting's tf part is computed when it is added and a query only
multiplies by idf: no per-query work proportional to anything but the postings of
its own terms.

Why an inverted index of our own, not `bm25s` or `tantivy`: the index must follow the
store in place (every archive, judge, re-archive and removal changes a few folders
of thousands), answer a query in well under a millisecond at 10^4 folders from the
event loop's worker thread, and give bit-identical scores whether it was built fresh
or updated (determinism across restarts). `bm25s` precomputes a scipy matrix that
has to be rebuilt on every change; `tantivy` is a second storage engine with its own
files and segment merges. Here postings are append-only arrays (document numbers
ascending, weighted tf, float32 tf part), read by NumPy without copying; a removed or
changed folder leaves a tombstone (its document number goes dead, document frequencies
and lengths are corrected at once) and the arrays are compacted when more than a third
of the documents are dead. Term frequencies, lengths and document frequencies are
integers, the tf parts a function of them and of the quantised average alone, and a
query sums its terms' contributions in query order, so the score of a folder does not
depend on its document number or on the history of the index (a property test holds a
synced index to a fresh build, bit for bit).

Ranking (`rank`) then reranks the best folders by their best passage, one line of the
text (`engine.relevance.passages`).

A folder's text is read once, when it is added: a judge that rewrites its keywords
gets the text terms back from the document minus its old fields, reading nothing,
and keeps its passages.
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
from engine.relevance.passages import (
    BM25_B,
    BM25_K1,
    PassageStore,
    quantise_length,
    tf_part,
    tf_parts,
)

__all__ = ["BM25_B", "BM25_K1", "FIELD_BOOSTS", "Ranked", "RelevanceIndex"]

FIELD_BOOSTS: dict[str, int] = {
    "text": 1,
    "title": 1,
    "keywords": 3,
    "events": 2,
    "persons": 2,
    "locations": 2,
}
"""How many times a field's terms count. Keywords are what the judge says a folder is
about, often in words the text does not use; names, places and events are what
questions are asked with; the title is the folder's first line, already in the
text, so it counts once more. Keywords of a heuristically scored folder count
nothing extra: they are the text's own distinctive words, which BM25's idf already
weighs (boosting them again was measured to push folders of many topics up)."""

_COMPACT_DEAD_SHARE = 1 / 3
_RERANK_MIN = 10
_RERANK_FLOOR = 0.1
_TINY = float(np.finfo(np.float64).tiny)


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
        getattr(entry, "scoreMode", None) == "heuristic",
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
        # the α prior per document for one (alphaPrior, minAlpha), until α changes
        self._prior_cache: tuple[tuple[float, float], npt.NDArray[np.float64]] | None = None
        # terms: postings (doc numbers ascending), weighted tf, BM25 tf part (float32)
        self._tids: dict[str, int] = {}
        self._post_docs: list[array[int]] = []
        self._post_tf: list[array[int]] = []
        self._post_norm: list[array[float]] = []
        self._avgdl_q = 0.0  # the quantised average length the tf parts were made with
        self._df = array("q")
        self._passages = PassageStore()
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
    def _field_counts(self, entry: Any) -> Counter[str]:
        """The boosted terms of an entry's fields (everything but the text)."""
        counts: Counter[str] = Counter()
        extra = self.extra_stopwords
        _count(search_terms(entry.title or "", extra), FIELD_BOOSTS["title"], counts)
        names: tuple[str, ...] = ("events", "persons", "locations")
        if getattr(entry, "scoreMode", None) != "heuristic":
            names = ("keywords", *names)
        for name in names:
            for value in getattr(entry, name, None) or ():
                _count(search_terms(str(value), extra), FIELD_BOOSTS[name], counts)
        return counts

    @property
    def text_of(self) -> Callable[[str], str]:
        """The text source the index reads folders through (its owner may ask it what it
        could not read)."""
        return self._text_of

    def _read_text(self, folder_id: str) -> tuple[dict[int, int], list[dict[int, int]]]:
        """Term id -> tf of a folder's text (read through `text_of`), and the same per
        line (its passages). The analyser never joins terms across a line break, so
        the text's terms are exactly its lines' terms."""
        doc: dict[int, int] = {}
        passages: list[dict[int, int]] = []
        tid_of = self._tid
        boost = FIELD_BOOSTS["text"]
        for line in self._text_of(folder_id).split("\n"):
            counts: dict[int, int] = {}
            for term in search_terms(line, self.extra_stopwords):
                tid = tid_of(term)
                counts[tid] = counts.get(tid, 0) + 1
                doc[tid] = doc.get(tid, 0) + boost
            if counts:
                passages.append(counts)
        return doc, passages

    def _text_of_live(self, folder_id: str) -> dict[int, int]:
        """The text counts of an indexed folder, without reading it again: its document
        minus the boosted fields of the entry it was built from."""
        d = self.by_id[folder_id]
        terms = self._doc_terms[d]
        out = dict(zip(terms[0], terms[1], strict=True)) if terms is not None else {}
        for term, tf in self._field_counts(self._entries[folder_id]).items():
            tid = self._tids[term]
            left = out[tid] - tf
            if left:
                out[tid] = left
            else:
                del out[tid]
        return out

    def _tid(self, term: str) -> int:
        tid = self._tids.get(term)
        if tid is None:
            tid = len(self._post_docs)
            self._tids[term] = tid
            self._post_docs.append(array("i"))
            self._post_tf.append(array("i"))
            self._post_norm.append(array("f"))
            self._df.append(0)
        return tid

    def _add(self, entry: Any, text: dict[int, int] | None = None) -> None:
        """Index an entry; `text` is its text counts when they are known already (a
        folder whose fields changed keeps its text and its passages)."""
        if text is None:
            counts, passages = self._read_text(entry.id)
            self._passages.add(entry.id, passages)
        else:
            counts = dict(text)
        tid_of = self._tid
        for term, tf in self._field_counts(entry).items():
            tid = tid_of(term)
            counts[tid] = counts.get(tid, 0) + tf
        d = len(self._doc_ids)
        tids = array("i", counts)
        tfs = array("i", counts.values())
        length = sum(tfs)
        post_docs, post_tf, post_norm, df = (
            self._post_docs,
            self._post_tf,
            self._post_norm,
            self._df,
        )
        avg_q = self._avgdl_q
        for tid, tf in counts.items():
            post_docs[tid].append(d)
            post_tf[tid].append(tf)
            post_norm[tid].append(tf_part(tf, length, avg_q))
            df[tid] += 1
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

    def _kill(self, folder_id: str, *, keep_text: bool = False) -> None:
        d = self.by_id.pop(folder_id)
        if not keep_text:
            self._passages.remove(folder_id)
        del self._sigs[folder_id]
        del self._entries[folder_id]
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
                    self._prior_cache = None
                    continue
                text = self._text_of_live(fid)
                self._kill(fid, keep_text=True)
                self._add(entry, text)
            else:
                self._add(entry)
            changes += 1
        if len(seen) != len(known):
            for fid in [f for f in known if f not in seen]:
                self._kill(fid)
                changes += 1
        if self._dead > _COMPACT_DEAD_SHARE * max(1, len(self._doc_ids)):
            self._compact()
        if changes:
            self._prior_cache = None
            self._renorm()
            self._passages.settle()
        self.version = version
        return changes

    def _compact(self) -> None:
        """Renumber the live documents (in their current order) and drop the dead."""
        live = [d for d in range(len(self._doc_ids)) if self._live[d]]
        remap = {old: new for new, old in enumerate(live)}
        n_terms = len(self._post_docs)
        post_docs = [array("i") for _ in range(n_terms)]
        post_tf = [array("i") for _ in range(n_terms)]
        post_norm = [array("f") for _ in range(n_terms)]
        for tid in range(n_terms):
            docs, tfs, norms = self._post_docs[tid], self._post_tf[tid], self._post_norm[tid]
            nd, nt, nn = post_docs[tid], post_tf[tid], post_norm[tid]
            for d, tf, norm in zip(docs, tfs, norms, strict=True):
                new = remap.get(d)
                if new is not None:
                    nd.append(new)
                    nt.append(tf)
                    nn.append(norm)
        self._post_docs, self._post_tf, self._post_norm = post_docs, post_tf, post_norm
        self._doc_ids = [self._doc_ids[d] for d in live]
        self._live = bytearray(b"\x01" * len(live))
        self._len = array("q", (self._len[d] for d in live))
        self._alpha = array("d", (self._alpha[d] for d in live))
        self._doc_terms = [self._doc_terms[d] for d in live]
        self.by_id = {fid: n for n, fid in enumerate(self._doc_ids)}
        self._dead = 0

    def _renorm(self) -> None:
        """Recompute every posting's tf part when the quantised average length moved.

        BM25's length normalisation uses the average document length, which moves with
        every folder. Quantised to steps of 2^(1/8) (≈ 9%), it stays put for long runs
        of changes, so each posting's tf part `tf (k1 + 1) / (tf + k1 (1 − b + b dl /
        avgdl))` is computed once, when it is added, and a query only multiplies by
        idf. The quantised value is a function of the live documents alone, so a fresh
        build and an index updated in place hold the same numbers.
        """
        avgdl_q = quantise_length(self._total_len / self._live_docs) if self._live_docs else 0.0
        if avgdl_q == self._avgdl_q:
            return
        self._avgdl_q = avgdl_q
        if not avgdl_q:
            return
        lens = np.frombuffer(self._len, dtype=np.int64)
        for tid, docs in enumerate(self._post_docs):
            if docs:
                d = np.frombuffer(docs, dtype=np.int32)
                tf = np.frombuffer(self._post_tf[tid], dtype=np.int32)
                self._post_norm[tid] = tf_parts(tf, lens[d], avgdl_q)

    # -- querying -------------------------------------------------------------------
    def query_terms(self, text: str) -> list[str]:
        """The distinct search terms of a query, in order."""
        return list(dict.fromkeys(search_terms(text, self.extra_stopwords)))

    def scores(
        self, terms: Sequence[str], *, alpha_prior: float = 0.0, min_alpha: float = 0.0
    ) -> npt.NDArray[np.float64]:
        """Score of every document number: Σ over the distinct `terms` of idf × the
        posting's tf part, times the document's α prior `1 + alpha_prior × (α − 0.5)`
        (0 below `min_alpha`); 0 for dead documents and non-matches.

        `bincount` adds each term's contribution in query order (it walks its input in
        order), so a folder's score is the same float whatever its document number.
        """
        n = len(self._doc_ids)
        live = self._live_docs
        if not live or not terms:
            return np.zeros(n, dtype=np.float64)
        docs: list[npt.NDArray[np.int32]] = []
        weights: list[npt.NDArray[np.float64]] = []
        tids, df_of = self._tids, self._df
        for term in dict.fromkeys(terms):
            tid = tids.get(term)
            if tid is None:
                continue
            df = df_of[tid]
            if df <= 0:
                continue
            idf = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
            docs.append(np.frombuffer(self._post_docs[tid], dtype=np.int32))
            weights.append(np.frombuffer(self._post_norm[tid], dtype=np.float32) * np.float64(idf))
        if not docs:
            return np.zeros(n, dtype=np.float64)
        if len(docs) == 1:
            summed = np.bincount(docs[0], weights=weights[0], minlength=n)
        else:
            summed = np.bincount(np.concatenate(docs), weights=np.concatenate(weights), minlength=n)
        # bincount with float weights sums in float64 (its stubs only know the int form)
        acc: npt.NDArray[np.float64] = np.asarray(summed, dtype=np.float64)
        factor = self._factor(alpha_prior, min_alpha)
        if factor is not None:
            acc *= factor
        return acc

    def _factor(self, alpha_prior: float, min_alpha: float) -> npt.NDArray[np.float64] | None:
        """Per document: the α prior, 0 below `min_alpha` and 0 when dead (cached)."""
        if not alpha_prior and min_alpha <= 0.0 and not self._dead:
            return None
        key = (alpha_prior, min_alpha)
        if self._prior_cache is not None and self._prior_cache[0] == key:
            return self._prior_cache[1]
        alpha = np.frombuffer(self._alpha, dtype=np.float64)
        vec = 1.0 + alpha_prior * (alpha - 0.5)
        if min_alpha > 0.0:
            vec = np.where(alpha >= min_alpha, vec, 0.0)
        if self._dead:
            vec = vec * np.frombuffer(self._live, dtype=np.uint8)
        self._prior_cache = (key, vec)
        return vec

    def rank(
        self,
        terms: Sequence[str],
        *,
        limit: int,
        alpha_prior: float = 0.0,
        min_alpha: float = 0.0,
        min_relative: float = 0.0,
        passage_weight: float = 0.0,
    ) -> Ranked:
        """The best `limit` folders for `terms` (every folder tied with the last one
        included), ties by folder id, so the order never depends on document numbers.

        The folder scores of :meth:`scores` pick the best max(10, limit + 5) folders
        (ties included) scoring at least a tenth of the best; with `passage_weight` w
        they are reranked by
        `(1 − w) · F / max F + w · P / max P`, P the score of the folder's best passage
        (`engine.relevance.passages`) times the same α factor. Folders under
        `min_relative` × the best (mixed) score are dropped."""
        if limit <= 0:
            return Ranked((), ())
        acc = self.scores(terms, alpha_prior=alpha_prior, min_alpha=min_alpha)
        if not acc.size:
            return Ranked((), ())
        best = float(acc.max())
        if best <= 0.0:
            return Ranked((), ())
        mix = passage_weight > 0.0
        floor = _RERANK_FLOOR if mix else min_relative
        hit = np.flatnonzero(acc >= max(best * floor, _TINY))
        score = acc[hit]
        pool = max(_RERANK_MIN, limit + _RERANK_MIN // 2) if mix else limit
        if hit.size > pool:
            cut = float(np.partition(score, hit.size - pool)[hit.size - pool])
            keep = score >= cut
            hit, score = hit[keep], score[keep]
        ids = self._doc_ids
        if mix:
            fids = [ids[d] for d in hit.tolist()]
            factor = self._factor(alpha_prior, min_alpha)
            tids = [t for t in (self._tids.get(x) for x in terms) if t is not None]
            passage = self._passages.best(fids, tids)
            if factor is not None:
                passage = passage * factor[hit]
            top = float(passage.max()) if passage.size else 0.0
            score = (1.0 - passage_weight) * score / best
            if top > 0.0:
                score = score + passage_weight * passage / top
            keep = score >= max(float(score.max()) * min_relative, _TINY)
            hit, score = hit[keep], score[keep]
            if hit.size > limit:
                cut = float(np.partition(score, hit.size - limit)[hit.size - limit])
                keep = score >= cut
                hit, score = hit[keep], score[keep]
        order = sorted(
            zip(score.tolist(), hit.tolist(), strict=True), key=lambda p: (-p[0], ids[p[1]])
        )
        return Ranked(tuple(ids[d] for _, d in order), tuple(s for s, _ in order))
