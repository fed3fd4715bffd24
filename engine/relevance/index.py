"""BM25F relevance index over a session's scored folders (recall `ranked` mode).

A folder is one document: its conversation text plus its title, keywords, events,
persons and locations, each field's terms counted `boost` times (integer boosts, so a
weighted term frequency and a document length stay integers). Terms come from
`engine.relevance.analyzer.search_terms`. Scoring is Okapi BM25 (k1 1.2, b 0.75,
idf ln(1 + (N − df + 0.5) / (df + 0.5))) over the live documents, with the average
document length quantised to steps of 2^(1/8) (`quantise_length`, so a posting's tf
part is a function of its tf and its document's length alone, the same from one query to
the next, and a query only multiplies it by idf) and each tf part rounded to float32
(`engine.relevance.postings`, which computes them from a small table per document
rather than storing one per posting).

Why an inverted index of our own, not `bm25s` or `tantivy`: the index must follow the
store in place (every archive, judge, re-archive and removal changes a few folders
of thousands), answer a query in well under a millisecond at 10^4 folders from the
event loop's worker thread, and give bit-identical scores whether it was built fresh
or updated (determinism across restarts). `bm25s` precomputes a scipy matrix that
has to be rebuilt on every change; `tantivy` is a second storage engine with its own
files and segment merges. Here a removed or changed folder leaves a tombstone (its
document number goes dead, document frequencies and lengths are corrected at once) and
the postings are compacted when more than a third of the documents are dead.

A score is a function of integers (term frequencies, lengths, document frequencies,
the number of documents) and of the quantised average alone, summed over the query's
terms one after the other in a canonical order, rarest first (document frequency
ascending, ties by the term), so it depends neither on a document's number nor on the
index's history nor on how the query was evaluated: a property test holds a synced
index to a fresh build, bit for bit, and the pruned evaluation of `rank` to the
exhaustive one.

`rank` does not score every folder a question's common words occur in
(`engine.relevance.maxscore`), and reranks the best by their best passage, one line of
the text, or its sentences that ask, which are never the best
(`engine.relevance.passages`).

A folder's text is read once, when it is added; its terms are kept once, in the
passage store (term and tf per line): a judge that rewrites its keywords gets the
text terms back from there, reading nothing, and keeps its passages.

An index can be stored and restored (`engine.relevance.snapshot`). A restored index
does not trust what it restored: its first sync compares each entry with the key stored
for its document (`engine.relevance.entry_keys`: the fields its terms come from, and
what tells one folder's text from another's under a reused id) and indexes again, as a
sync would, every folder that changed, appeared, went, or whose text could not be read
then; the rest is taken as it is, reading nothing. So a restored-then-synced index
holds what a fresh build would, bit for bit (a property test holds it to one).
"""

from __future__ import annotations

import math
import operator
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress, repeat
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt
import orjson

from engine.relevance import kernels
from engine.relevance.analyzer import search_passages, search_terms
from engine.relevance.entry_keys import (
    ALPHA,
    FIELDS,
    TEXT,
    StoredFields,
    StoredKeys,
    collection_paused,
    entry_keys,
    key_id,
    key_scored,
)
from engine.relevance.maxscore import Term, contenders
from engine.relevance.passages import BM25_B, BM25_K1, PassageStore, quantise_length
from engine.relevance.postings import Postings

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


_id_of = operator.attrgetter("id")
_alpha_of = operator.attrgetter("alpha")
_scored_of = operator.attrgetter("scored")


KEYS_SECTION = "i.keys"
"""The snapshot section of the stored keys: the one a stamped restore leaves on disk."""


class LaterBytes(Protocol):
    """A snapshot section not read yet (`engine.relevance.snapshot.LaterSection`)."""

    nbytes: int

    def read(self) -> bytes:
        """Its bytes, checked (ValueError when they are not those written); closes it."""

    def close(self) -> None:
        """Let its file go."""


@dataclass(slots=True)
class _Restored:
    """What a restored index has not checked yet: the stored keys of its live documents
    (`engine.relevance.entry_keys`), and the documents whose text could not be read when
    they were indexed.

    A stamped restore leaves the keys on disk (``later``, with their chunk ``layout``:
    offsets, count, chunk size): its first sync reads them only if its entries turn out
    not to be the documents after all."""

    stored: StoredKeys | None
    unread: frozenset[int]
    stamped: bool = False
    """Its snapshot was synced to the very entries of its first sync (the store's stamp:
    `engine.relevance.snapshot.read_snapshot`): they need not be compared."""
    later: LaterBytes | None = None
    layout: tuple[npt.NDArray[np.int64], int, int] | None = None
    names: bytes | None = None
    """The documents' ids as stored (one per line) when the restore left them to its first
    sync: a stamped one, whose entries are usually those very ids, in order
    (`RelevanceIndex._take_stamped`), never decodes them."""

    def keys(self) -> StoredKeys:
        """The stored keys, read now if they were left on disk (ValueError when they
        cannot be: the caller builds the index afresh)."""
        if self.stored is None:
            if self.later is None or self.layout is None:
                raise ValueError("stored keys neither read nor left to read")
            offsets, count, size = self.layout
            self.stored = StoredKeys.of(self.later.read(), offsets, count, size)
        return self.stored

    def close(self) -> None:
        """Let go of keys left on disk (once the first sync no longer needs them)."""
        if self.later is not None:
            self.later.close()


def _count(terms: Iterable[str], boost: int, into: Counter[str]) -> None:
    for t in terms:
        into[t] += boost


def _kth_largest(values: npt.NDArray[np.float64], k: int) -> float:
    return float(np.partition(values, values.size - k)[values.size - k])


class RelevanceIndex:
    """Postings of search terms over the session's scored folders.

    `text_of(folder_id)` gives a folder's searchable text (the caller reads the disk),
    None when it could not be read (the folder is found by its fields alone, and a
    restored copy reads it again); it is called once per folder id over the index's
    life.

    `lock` is held while the index changes (`sync`) and while a snapshot is taken of it,
    so a snapshot written from another thread sees one state; queries only read and
    need not take it.
    """

    def __init__(
        self, text_of: Callable[[str], str | None], *, extra_stopwords: Sequence[str] = ()
    ) -> None:
        self._text_of = text_of
        self.extra_stopwords = tuple(extra_stopwords)
        self.version: Any = None
        self.lock = threading.Lock()
        self.unsaved = 0
        """Documents added, changed or removed since the last snapshot (or the start)."""
        self.saved = False
        """Restored from a snapshot, or one was written of it: its owner knows where."""
        self.stamp: str | None = None
        """The stamp of the entries of the snapshot it was restored from or last written
        to (`engine.relevance.snapshot.write_snapshot`), None: none."""
        self._restored: _Restored | None = None
        self._unread: set[str] = set()  # folders whose text could not be read
        # documents
        self._doc_ids: list[str] = []  # doc number -> folder id ("" when dead)
        self._live = bytearray()
        self._len = array("q")  # weighted length (0 when dead)
        self._alpha = array("d")
        self.by_id: dict[str, int] = {}
        self._entry_of: list[Any] = []  # doc number -> its index entry (None when dead)
        # the α prior per document for one (alphaPrior, minAlpha), and its maximum
        self._prior: tuple[tuple[float, float], npt.NDArray[np.float64], float] | None = None
        self._idfs: dict[int, float] = {}  # per term id, for the current documents
        self._tids: dict[str, int] = {}
        self._postings = Postings()
        self._avgdl_q = 0.0  # the quantised average length the tf parts were made with
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
        return 0 if tid is None else int(self._postings.df[tid])

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
    def text_of(self) -> Callable[[str], str | None]:
        """The text source the index reads folders through (its owner may ask it what it
        could not read)."""
        return self._text_of

    def _read_text(self, folder_id: str) -> tuple[list[list[int]], list[bool]]:
        """The term ids of each passage of a folder's text (read through `text_of`;
        `engine.relevance.analyzer.search_passages`: its lines, their asking sentences
        apart), and whether each asks. The analyser never joins terms across a line
        break or a sentence end, so the text's terms are exactly its passages' terms."""
        get = self._tids.get
        passages: list[list[int]] = []
        asks: list[bool] = []
        text = self._text_of(folder_id)
        if text is None:
            self._unread.add(folder_id)
            return passages, asks
        for line, ask in search_passages(text, self.extra_stopwords):
            if line:
                ids = list(map(get, line))
                if None in ids:
                    passages.append([self._tid(t) for t in line])
                else:
                    passages.append(cast(list[int], ids))
                asks.append(ask)
        return passages, asks

    def _tid(self, term: str) -> int:
        tid = self._tids.get(term)
        if tid is None:
            tid = self._tids[term] = self._postings.new_term()
        return tid

    def _add(self, entry: Any, text: dict[int, int] | None = None, was: int = -1) -> None:
        """Index an entry; `text` is its text counts when they are known already (a
        folder whose fields changed keeps its text and its passages, those of its
        document number `was`)."""
        d = len(self._doc_ids)
        if text is None:
            passages, asks = self._read_text(entry.id)
            self._passages.add(d, passages, asks)
            counts = Counter(chain.from_iterable(passages))
        else:
            self._passages.move(was, d)
            counts = Counter(text)
        boost = FIELD_BOOSTS["text"]
        if boost != 1:
            counts = Counter({tid: tf * boost for tid, tf in counts.items()})
        for term, tf in self._field_counts(entry).items():
            counts[self._tid(term)] += tf
        length = sum(counts.values())
        self._doc_ids.append(entry.id)
        self._live.append(1)
        self._len.append(length)
        self._alpha.append(float(entry.alpha))
        self.by_id[entry.id] = d
        self._entry_of.append(entry)
        self._live_docs += 1
        self._total_len += length
        self._postings.add(d, counts, self._len)

    def _kill(self, folder_id: str, *, keep_text: bool = False) -> int:
        """Take a document out; returns its number (its passages stay with it when
        `keep_text`, for the :meth:`_add` that follows)."""
        d = self.by_id.pop(folder_id)
        entry = self._entry_of[d]
        self._entry_of[d] = None
        held = self._passages.terms(d)
        held.update(self._tids[term] for term in self._field_counts(entry))
        df = self._postings.df
        for tid in held:
            df[tid] -= 1
        if not keep_text:
            self._passages.remove(d)
            self._unread.discard(folder_id)
        self._doc_ids[d] = ""
        self._live[d] = 0
        self._total_len -= self._len[d]
        self._len[d] = 0
        self._live_docs -= 1
        self._dead += 1
        return d

    def _redo(self, entry: Any) -> None:
        """Index a folder again whose fields changed, keeping its text and passages."""
        d = self.by_id[entry.id]
        text = self._passages.text_counts(d)
        self._kill(entry.id, keep_text=True)
        self._add(entry, text, d)

    def sync(self, entries: Iterable[Any], version: Any = None) -> int:
        """Bring the index to the scored folders of `entries` (the store's index, in
        order); returns how many documents were added, changed or removed.

        An entry object seen before is unchanged (store entries are frozen models,
        replaced on every change), so a sync after a small change costs one pass of
        identity checks plus the changed folders. The first sync of a restored index
        checks every entry against its stored key instead (:meth:`_check_restored`).
        """
        with self.lock:
            if self._restored is not None:
                with collection_paused():
                    changes = self._check_restored(entries)
            else:
                changes = self._sync(entries)
            if changes:
                self._prior = None
                self._idfs = {}
                self._settle()
            self.unsaved += changes
            self.version = version
            return changes

    def _sync(self, entries: Iterable[Any]) -> int:
        by_id, entry_of = self.by_id, self._entry_of
        seen: set[str] = set()
        changes = 0
        for entry in entries:
            if entry.scored is False:
                continue
            fid = entry.id
            if fid in seen:
                continue  # a duplicate id: the first entry is the folder
            seen.add(fid)
            d = by_id.get(fid)
            if d is not None:
                old = entry_of[d]
                if old is entry:
                    continue
                if _signature(old) == _signature(entry):
                    entry_of[d] = entry
                    self._alpha[d] = float(entry.alpha)
                    self._prior = None
                    continue
                self._redo(entry)
            else:
                self._add(entry)
            changes += 1
        if len(seen) != len(by_id):
            for fid in [f for f in by_id if f not in seen]:
                self._kill(fid)
                changes += 1
        return changes

    def _check_restored(self, entries: Iterable[Any]) -> int:
        """The first sync of a restored index: an entry whose key is the one stored for
        its document (and whose text was read) is taken as it is; every other document
        is taken out (its stored fields say which field terms it held) and indexed
        again, reading its text unless only its fields changed; an α alone is updated.

        The comparison goes chunk by chunk of stored keys (`engine.relevance.entry_keys`),
        the store's entries ordered as the documents are: an unchanged chunk costs its
        share of one JSON encoding, a changed one the decoding of its keys."""
        restored, self._restored = self._restored, None
        assert restored is not None
        try:
            return self._check_against(restored, entries)
        finally:
            restored.close()

    def _check_against(self, restored: _Restored, entries: Iterable[Any]) -> int:
        unread = restored.unread
        every = entries if isinstance(entries, (list, tuple)) else list(entries)
        if restored.stamped and not unread and self._take_stamped(every, restored):
            return 0
        self._named(restored)
        stored = restored.keys()
        all_keys = entry_keys(every)
        picked = compress(
            range(len(every)), map(operator.is_not, map(key_scored, all_keys), repeat(False))
        )
        at = list(picked)
        keys = list(map(all_keys.__getitem__, at))
        scored = list(map(every.__getitem__, at))
        fids: list[str] = list(map(key_id, keys))
        if len(set(fids)) != len(fids):  # a duplicate id: the first entry is the folder
            first = {f: i for i, f in reversed(list(enumerate(fids)))}
            keep = sorted(first.values())
            keys, scored, fids = (
                [keys[i] for i in keep],
                [scored[i] for i in keep],
                [fids[i] for i in keep],
            )
        by_id, entry_of = self.by_id, self._entry_of
        docs: list[int | None] = list(map(by_id.get, fids))
        new = [scored[i] for i, d in enumerate(docs) if d is None] if None in docs else []
        if new:
            keep = [i for i, d in enumerate(docs) if d is not None]
            keys, scored, fids = (
                [keys[i] for i in keep],
                [scored[i] for i in keep],
                [fids[i] for i in keep],
            )
            docs = [docs[i] for i in keep]
        live = np.flatnonzero(np.frombuffer(self._live, dtype=np.uint8))
        if live.size != stored.count:
            raise ValueError("stored keys do not fit the documents")
        # the store's entries in document order, and where each chunk of them starts
        rank = live.searchsorted(np.fromiter(docs, dtype=np.int64, count=len(docs)))
        if bool((rank[1:] < rank[:-1]).any()):  # not in document order (usually they are)
            order = rank.argsort(kind="stable")
            rank = rank[order]
            at = order.tolist()
            keys, scored, fids = (list(map(x.__getitem__, at)) for x in (keys, scored, fids))
        ranks: list[int] = rank.tolist()
        size = stored.size
        starts = np.arange(stored.chunks + 1, dtype=np.int64) * size
        bounds: list[int] = rank.searchsorted(starts).tolist()
        doubtful = {int(live.searchsorted(d)) // size for d in unread}
        alphas: list[tuple[int, Any]] = []
        gone: list[tuple[str, int, Any]] = []
        redo: list[tuple[Any, list[Any], list[Any]]] = []
        for k in range(stored.chunks):
            a, b = bounds[k], bounds[k + 1]
            whole = stored.keys_in(k)
            if b - a == whole and k not in doubtful and orjson.dumps(keys[a:b]) == stored.chunk(k):
                # ranks[a:b] are the chunk's: k * size onwards
                seg = live[k * size : k * size + whole]
                lo = int(seg[0])
                if int(seg[-1]) - lo == whole - 1:
                    entry_of[lo : lo + whole] = scored[a:b]
                else:
                    for d, e in zip(seg.tolist(), scored[a:b], strict=True):
                        entry_of[d] = e
                continue
            old = stored.decode(k)
            current = orjson.loads(orjson.dumps(keys[a:b]))  # spelled as the stored ones
            present = set(ranks[a:b])
            for j in range(a, b):
                o, c, d = old[ranks[j] - k * size], current[j - a], int(live[ranks[j]])
                if c[TEXT:] == o[TEXT:] and d not in unread:
                    entry_of[d] = scored[j]
                    if c[ALPHA] != o[ALPHA]:
                        alphas.append((d, scored[j]))
                else:
                    entry_of[d] = StoredFields.of(o)
                    redo.append((scored[j], c, o))
            for r in range(k * size, k * size + whole):
                if r not in present:
                    d = int(live[r])
                    gone.append((self._doc_ids[d], d, old[r - k * size]))
        if alphas:
            self._set_alphas([d for d, _ in alphas], [e for _, e in alphas])
            self._prior = None
        changes = 0
        for fid, d, o in gone:
            entry_of[d] = StoredFields.of(o)
            self._kill(fid)
            changes += 1
        for entry, c, o in redo:
            d = by_id[entry.id]
            if d not in unread and c[TEXT:FIELDS] == o[TEXT:FIELDS]:
                self._redo(entry)
            else:
                self._kill(entry.id)
                self._add(entry)
            changes += 1
        for entry in new:
            self._add(entry)
            changes += 1
        self._share_ids()
        return changes

    def _take_stamped(self, every: Sequence[Any], restored: _Restored) -> bool:
        """The first sync of an index restored from a snapshot stamped with what its
        entries are a function of (`_Restored.stamped`): its documents are those entries'
        scored folders, each taken as its document's without comparing keys. False (and
        nothing taken) when they do not name the live documents one to one: then the
        caller compares them. Raises ValueError when the stored ids do not name the
        documents (the caller builds the index afresh)."""
        scored = list(compress(every, map(operator.is_not, map(_scored_of, every), repeat(False))))
        fids = list(map(_id_of, scored))
        entry_of = self._entry_of
        names, restored.names = restored.names, None
        if names is not None:
            if len(fids) == len(entry_of) == self._live_docs and "\n".join(fids).encode() == names:
                self._doc_ids = fids  # the stored ids, and not decoded: the entries' own
            else:
                self._name_documents(names)
        if len(fids) != self._live_docs:
            return False
        if fids == self._doc_ids:  # every document live, in the entries' order (usually)
            entry_of[:] = scored
            self._doc_ids = fids  # the entries' id strings, not the snapshot's copies
            self.by_id = dict(zip(fids, range(len(fids)), strict=True))
            if len(self.by_id) != len(fids):  # ids taken undecoded were not checked
                raise ValueError("two documents share an id")
            return True
        by_id, named = self.by_id, set(fids)
        if len(named) != len(fids) or not by_id.keys() >= named:
            return False
        for d, entry in zip(map(by_id.__getitem__, fids), scored, strict=True):
            entry_of[d] = entry
        self._share_ids()
        return True

    def _share_ids(self) -> None:
        """Name the documents with their entries' id strings, not the copies a snapshot
        decoded (a hundred thousand strings the store holds already)."""
        ids = [e.id if e is not None else "" for e in self._entry_of]
        if self._live_docs == len(ids):
            self.by_id = dict(zip(ids, range(len(ids)), strict=True))
        else:
            live = np.frombuffer(self._live, dtype=np.uint8).astype(bool).tolist()
            self.by_id = dict(compress(zip(ids, range(len(ids)), strict=True), live))
        self._doc_ids = ids

    def _set_alphas(self, docs: list[int], entries: list[Any]) -> None:
        values = np.fromiter(map(_alpha_of, entries), dtype=np.float64, count=len(docs))
        alpha = np.frombuffer(self._alpha, dtype=np.float64)
        alpha[np.array(docs, dtype=np.int64)] = values
        del alpha  # the array may grow again

    def _settle(self) -> None:
        """After a batch of changes: the new postings into their terms, every tf part
        recomputed when the quantised average length moved, compaction when more than a
        third of the documents are dead. The quantised average is a function of the
        live documents alone, so a fresh build and an index updated in place hold the
        same numbers."""
        live = self._live_docs
        avg_q = quantise_length(self._total_len / live) if live else 0.0
        postings = self._postings
        if avg_q == self._avgdl_q and not postings.stale:
            postings.flush(self._len, avg_q)
        else:
            postings.flush(self._len, None)
            postings.renorm(self._len, avg_q)
            self._avgdl_q = avg_q
        self._passages.settle()
        if self._dead > _COMPACT_DEAD_SHARE * max(1, len(self._doc_ids)):
            self._compact()

    def _compact(self) -> None:
        """Renumber the live documents (in their current order) and drop the dead."""
        live = np.frombuffer(self._live, dtype=np.uint8).astype(bool)
        kept = live.nonzero()[0].tolist()
        self._len = array("q", np.frombuffer(self._len, dtype=np.int64)[live].tobytes())
        self._postings.compact(live, self._len)
        self._passages.renumber(live)
        self._doc_ids = [self._doc_ids[d] for d in kept]
        self._entry_of = [self._entry_of[d] for d in kept]
        self._live = bytearray(b"\x01" * len(kept))
        self._alpha = array("d", np.frombuffer(self._alpha, dtype=np.float64)[live].tobytes())
        self.by_id = {fid: n for n, fid in enumerate(self._doc_ids)}
        self._dead = 0
        self._prior = None

    # -- snapshots (engine.relevance.snapshot) --------------------------------------
    def snapshot_parts(self) -> dict[str, tuple[str, list[Any]]]:
        """Everything a restored copy needs: name -> (NumPy type code, buffers back to
        back). The caller holds `lock` until it has copied the buffers (they are the
        index's own arrays). Raises RuntimeError for what a snapshot cannot hold (a
        folder id or term with a line break)."""
        if self._restored is not None:
            self._named(self._restored)
        n = len(self._doc_ids)
        if self._restored is not None:  # not synced since restored: as it was stored
            keys, unread = self._restored.keys(), sorted(self._restored.unread)
        else:
            live = [e for e in self._entry_of if e is not None]
            with collection_paused():
                keys = StoredKeys.encode(entry_keys(live))
            unread = sorted(self.by_id[f] for f in self._unread if f in self.by_id)
        doc_ids = "\n".join(self._doc_ids).encode()
        terms = "\n".join(self._tids).encode()
        if (n and doc_ids.count(b"\n") != n - 1) or (
            self._tids and terms.count(b"\n") != len(self._tids) - 1
        ):
            raise RuntimeError("a folder id or a term holds a line break")
        ints = [
            self._live_docs,
            self._total_len,
            self._dead,
            len(self._tids),
            keys.count,
            keys.size,
        ]
        parts: dict[str, tuple[str, list[Any]]] = {
            "i.scalars": ("i8", [np.array(ints, dtype=np.int64)]),
            "i.avg": ("f8", [np.array([self._avgdl_q], dtype=np.float64)]),
            "i.doc_ids": ("u1", [doc_ids]),
            "i.live": ("u1", [self._live]),
            "i.len": ("i8", [self._len]),
            "i.alpha": ("f8", [self._alpha]),
            "i.keys": ("u1", [keys.blob]),
            "i.key_chunks": ("i8", [keys.offsets]),
            "i.unread": ("i8", [np.array(unread, dtype=np.int64)]),
            "i.terms": ("u1", [terms]),
        }
        parts.update(self._postings.snapshot_parts())
        is_live = np.frombuffer(self._live, dtype=np.uint8).astype(bool)
        parts.update(self._passages.snapshot_parts(is_live))
        return parts

    @classmethod
    def restored(
        cls,
        text_of: Callable[[str], str | None],
        arrays: Mapping[str, array[Any]],
        *,
        extra_stopwords: Sequence[str] = (),
        stamped: bool = False,
        keys_later: LaterBytes | None = None,
    ) -> RelevanceIndex:
        """The index :meth:`snapshot_parts` stored (it keeps the arrays), to be checked
        by its first sync (`stamped`: see `_Restored.stamped`; `keys_later`: the stored
        keys' section when the reader left it on disk, :data:`KEYS_SECTION`). Raises
        ValueError when the arrays do not fit together."""
        idx = cls(text_of, extra_stopwords=extra_stopwords)
        live_docs, total_len, dead, n_terms, n_keys, chunk = (int(v) for v in arrays["i.scalars"])
        (avg_q,) = (float(v) for v in arrays["i.avg"])
        n = len(arrays["i.len"])
        lengths = np.frombuffer(arrays["i.len"], dtype=np.int64)
        is_live = np.frombuffer(arrays["i.live"], dtype=np.uint8).astype(bool)
        unread: list[int] = arrays["i.unread"].tolist()
        names = memoryview(arrays["i.doc_ids"]).tobytes()
        lines = names.count(b"\n") + 1 if n else 0
        terms = str(memoryview(arrays["i.terms"]), "utf-8").split("\n") if n_terms else []
        offsets = np.frombuffer(arrays["i.key_chunks"], dtype=np.int64)
        if keys_later is None:
            keys: StoredKeys | None = StoredKeys.of(
                arrays[KEYS_SECTION].tobytes(), offsets, n_keys, chunk
            )
        else:
            StoredKeys.check_layout(offsets, n_keys, chunk, keys_later.nbytes)
            keys = None
        postings = Postings.restored(arrays, arrays["i.len"])
        passages = PassageStore.restored(arrays, is_live)
        # unsigned: a negative term id reads as a large one (one pass finds both)
        tid = np.frombuffer(
            arrays["s.tid"], dtype=np.uint16 if arrays["s.tid"].typecode == "H" else np.uint32
        )
        if (
            lines != n
            or is_live.size != n
            or len(arrays["i.alpha"]) != n
            or len(terms) != n_terms
            or len(postings.df) != n_terms
            or postings.docs_n != n
            or int(is_live.sum()) != live_docs
            or n_keys != live_docs
            or dead != n - live_docs
            or int(lengths[is_live].sum()) != total_len
            or any(not 0 <= d < n or not is_live[d] for d in unread)
            or bool(tid.size and int(tid.max()) >= n_terms)
        ):
            raise ValueError("index arrays do not fit together")
        idx._tids = dict(zip(terms, range(n_terms), strict=True))
        if len(idx._tids) != n_terms:
            raise ValueError("index arrays do not fit together")
        del lengths, tid  # views: the arrays may grow once they are the index's
        idx._entry_of = [None] * n
        idx._live = bytearray(arrays["i.live"])
        idx._len, idx._alpha = arrays["i.len"], arrays["i.alpha"]
        idx._postings, idx._passages = postings, passages
        idx._avgdl_q = avg_q
        idx._live_docs, idx._total_len, idx._dead = live_docs, total_len, dead
        idx._restored = _Restored(
            keys,
            frozenset(unread),
            stamped,
            keys_later,
            None if keys_later is None else (offsets, n_keys, chunk),
        )
        if stamped and not unread:
            idx._restored.names = names  # named by its first sync (`_take_stamped`)
        else:
            idx._name_documents(names)
            idx._unread = {idx._doc_ids[d] for d in unread}
        idx.saved = True
        return idx

    def _named(self, restored: _Restored) -> None:
        """The documents named, if their restore left that to its first sync."""
        names, restored.names = restored.names, None
        if names is not None:
            self._name_documents(names)

    def _name_documents(self, names: bytes) -> None:
        """Each document's folder id, from the stored lines, with the id -> document map
        of the live ones. Raises ValueError when they are not one id per live document
        (a restore, or its first sync, then builds the index afresh)."""
        n = len(self._entry_of)
        doc_ids = names.decode().split("\n") if n else []
        is_live = np.frombuffer(self._live, dtype=np.uint8).astype(bool)
        if len(doc_ids) != n:
            raise ValueError("document ids do not fit the documents")
        if self._live_docs == n:  # C-level zips: 10^5 documents in milliseconds
            by_id = dict(zip(doc_ids, range(n), strict=True))
        else:
            by_id = dict(compress(zip(doc_ids, range(n), strict=True), is_live.tolist()))
        # as many named documents as live ones, each of them live: the same documents
        named = np.fromiter(by_id.values(), dtype=np.int64, count=len(by_id))
        if len(by_id) != self._live_docs or not bool(is_live[named].all()):
            raise ValueError("document ids do not fit the documents")
        self._doc_ids, self.by_id = doc_ids, by_id

    # -- querying -------------------------------------------------------------------
    def query_terms(self, text: str) -> list[str]:
        """The distinct search terms of a query, in order."""
        return list(dict.fromkeys(search_terms(text, self.extra_stopwords)))

    def _query(self, terms: Iterable[str]) -> list[Term]:
        """The distinct `terms` that live documents hold, in the canonical order of
        every sum (rarest first, ties by the term): (term id, idf)."""
        tids, df_of = self._tids, self._postings.df
        found: list[tuple[int, str, int]] = []
        for term in set(terms):
            tid = tids.get(term)
            if tid is not None and df_of[tid] > 0:
                found.append((df_of[tid], term, tid))
        found.sort()
        return [(tid, self._idf(tid, df)) for df, _, tid in found]

    def _idf(self, tid: int, df: int) -> float:
        """ln(1 + (N − df + 0.5) / (df + 0.5)), kept until the next change."""
        idf = self._idfs.get(tid)
        if idf is None:
            live = self._live_docs
            idf = self._idfs[tid] = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
        return idf

    def scores(
        self, terms: Sequence[str], *, alpha_prior: float = 0.0, min_alpha: float = 0.0
    ) -> npt.NDArray[np.float64]:
        """Score of every document number: Σ over the distinct `terms`, rarest first, of
        idf × the posting's tf part, times the document's α prior
        `1 + alpha_prior × (α − 0.5)` (0 below `min_alpha`); 0 for dead documents and
        non-matches. The exhaustive evaluation `rank` prunes."""
        n = len(self._doc_ids)
        query = self._query(terms) if self._live_docs else []
        if not query:
            return np.zeros(n, dtype=np.float64)
        acc = self._postings.accumulate(query, n)
        factor, _ = self._factor(alpha_prior, min_alpha)
        if factor is not None:
            acc *= factor
        return acc

    def _factor(
        self, alpha_prior: float, min_alpha: float
    ) -> tuple[npt.NDArray[np.float64] | None, float]:
        """Per document: the α prior, 0 below `min_alpha` and 0 when dead (cached), and
        its maximum; None (and 1) when it is 1 everywhere."""
        if not alpha_prior and min_alpha <= 0.0 and not self._dead:
            return None, 1.0
        key = (alpha_prior, min_alpha)
        if self._prior is not None and self._prior[0] == key:
            return self._prior[1], self._prior[2]
        alpha = np.frombuffer(self._alpha, dtype=np.float64)
        vec = 1.0 + alpha_prior * (alpha - 0.5)
        if min_alpha > 0.0:
            vec = np.where(alpha >= min_alpha, vec, 0.0)
        if self._dead:
            vec = vec * np.frombuffer(self._live, dtype=np.uint8)
        top = float(vec.max()) if vec.size else 0.0
        self._prior = (key, vec, top)
        return vec, top

    def _best_numpy(
        self,
        query: list[Term],
        factor: npt.NDArray[np.float64] | None,
        top_factor: float,
        floor: float,
        pool: int,
        *,
        exhaustive: bool,
        terms: Sequence[str],
        alpha_prior: float,
        min_alpha: float,
    ) -> tuple[list[int], list[float], float]:
        """The folders a ranking reranks and orders, by NumPy (`Postings.score_top`
        picks the same ones in C): those scoring at least max(best × `floor`, tiny),
        the best `pool` of them (ties included) when there are more, their scores and
        the best ((), (), 0 when none scores); pruned (`engine.relevance.maxscore`)
        unless `exhaustive`."""
        docs: npt.NDArray[Any]
        if exhaustive:
            acc = self.scores(terms, alpha_prior=alpha_prior, min_alpha=min_alpha)
            docs = np.arange(acc.size)
        else:
            docs, acc = contenders(
                self._postings, query, len(self._doc_ids), factor, top_factor, floor, pool
            )
        if not acc.size:
            return [], [], 0.0
        best = float(acc.max())
        if best <= 0.0:
            return [], [], best
        keep = (acc >= max(best * floor, _TINY)).nonzero()[0]
        hit, score = docs[keep], acc[keep]
        if hit.size > pool:
            keep = (score >= _kth_largest(score, pool)).nonzero()[0]
            hit, score = hit[keep], score[keep]
        return hit.tolist(), score.tolist(), best

    def rank(
        self,
        terms: Sequence[str],
        *,
        limit: int,
        alpha_prior: float = 0.0,
        min_alpha: float = 0.0,
        min_relative: float = 0.0,
        passage_weight: float = 0.0,
        exhaustive: bool = False,
    ) -> Ranked:
        """The best `limit` folders for `terms` (every folder tied with the last one
        included), ties by folder id, so the order never depends on document numbers.

        The folder scores of :meth:`scores` pick the best max(10, limit + 5) folders
        (ties included) scoring at least a tenth of the best; with `passage_weight` w
        they are reranked by
        `(1 − w) · F / max F + w · P / max P`, P the score of the folder's best passage
        (`engine.relevance.passages`) times the same α factor. Folders under
        `min_relative` × the best (mixed) score are dropped. `exhaustive` scores every
        folder instead of pruning (the same result, slower: the reference in tests).
        With the compiled loops (`engine.relevance.kernels`) all of it but the query's
        terms runs in C: the same result again, float for float."""
        if limit <= 0 or not self._live_docs:
            return Ranked((), ())
        query = self._query(terms)
        if not query:
            return Ranked((), ())
        mix = passage_weight > 0.0
        floor = _RERANK_FLOOR if mix else min_relative
        pool = max(_RERANK_MIN, limit + _RERANK_MIN // 2) if mix else limit
        factor, top_factor = self._factor(alpha_prior, min_alpha)
        if not exhaustive and kernels.active() is not None:
            # the query's terms that live folders hold: no other term is in a live
            # folder's passages
            arrays, q, idf = (
                self._passages.query_arrays([tid for tid, _ in query]) if mix else (None, [], [])
            )
            finish = (self._doc_ids, arrays, q, idf, passage_weight, min_relative, limit)
            done = self._postings.score_top(
                query, len(self._doc_ids), factor, top_factor, floor, pool, _TINY, finish
            )
            if done is not None:
                return Ranked(*done)
        docs_hit, scores, best = self._best_numpy(
            query,
            factor,
            top_factor,
            floor,
            pool,
            exhaustive=exhaustive,
            terms=terms,
            alpha_prior=alpha_prior,
            min_alpha=min_alpha,
        )
        if not docs_hit:
            return Ranked((), ())
        ids = self._doc_ids
        if mix:
            # a pool of a few folders: plain floats, the same operations as NumPy's
            passage = self._passages.best(docs_hit, [tid for tid, _ in query], factor)
            top = max(passage)
            keep_w = 1.0 - passage_weight
            if top > 0.0:
                scores = [
                    keep_w * s / best + passage_weight * p / top
                    for s, p in zip(scores, passage, strict=True)
                ]
            else:
                scores = [keep_w * s / best for s in scores]
            cut = max(max(scores) * min_relative, _TINY)
            if len(scores) > limit:
                cut = max(cut, sorted(scores)[-limit])
            kept = [(s, d) for s, d in zip(scores, docs_hit, strict=True) if s >= cut]
        else:
            kept = list(zip(scores, docs_hit, strict=True))
        order = sorted(kept, key=lambda p: (-p[0], ids[p[1]]))
        return Ranked(tuple(ids[d] for _, d in order), tuple(s for s, _ in order))
