"""Passage-level BM25 inside folders: which folder holds the message that answers.

A folder is several messages; the one that answers a question is usually a single
message holding most of the question's words, while a folder that merely mentions
them across twenty lines of chatter scores as well at folder level. So the ranked
recall reranks its best folders by their best *passage* (one line of the folder's
text, i.e. one message or one paragraph of it), scored with BM25 over all passages of
the session (`engine.relevance.index.RelevanceIndex.rank` mixes the two).

Storage is flat: every live folder owns a contiguous run of entries, one per term of
each passage (term id and tf, a byte, the rare larger tf kept beside it; the terms of
a passage in the order they first occur in it), and every passage its first entry
and its length normalisation at the average passage length, quantised like the
folder index does; 5 bytes an entry. The
folder index reads a folder's text terms back from here instead of keeping its own
copy. A query gathers the runs of the few folders being reranked and computes the
tf parts of their matching entries then; a passage's score sums its entries in stored
order, so it does not depend on where the folder sits in the arrays or on the
index's history.

A passage that asks (`engine.relevance.analyzer.search_passages`: the sentences of a
line ending in ``?``) is kept like any other (its terms count for the folder and for the
passages' statistics) but is never a folder's best passage: a question holds the words of
its answer without the answer, so a folder of questions (the user asking the same thing
again) would otherwise beat the one folder that answers.
"""

from __future__ import annotations

import math
import operator
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, repeat
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "BM25_B",
    "BM25_K1",
    "PassageStore",
    "length_norms",
    "quantise_length",
    "tf_part",
    "tf_parts",
]

BM25_K1 = 1.2
BM25_B = 0.75
_STEPS_PER_DOUBLING = 8
_COMPACT_DEAD_SHARE = 1 / 3
_TF_ESCAPE = 255  # a tf byte of 255: the tf is in `_big_tf`


def quantise_length(avg: float) -> float:
    """`avg` rounded to the nearest power of 2^(1/8) (≈ 9% steps): BM25's average
    length, stable across long runs of changes and a function of the live documents."""
    steps = round(math.log2(avg) * _STEPS_PER_DOUBLING)
    return float(2.0 ** (steps / _STEPS_PER_DOUBLING))


def tf_part(tf: int, length: int, avg_q: float) -> float:
    """BM25's `tf (k1 + 1) / (tf + k1 (1 − b + b · len / avg))`, the same float as
    :func:`tf_parts` of :func:`length_norms` (the same operations in the same order)."""
    if not avg_q:
        return tf * (BM25_K1 + 1.0) / (tf + BM25_K1)
    return tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * length / avg_q))


def length_norms(lengths: npt.NDArray[Any], avg_q: float) -> npt.NDArray[np.float64]:
    """`k1 (1 − b + b · len / avg)` of many lengths: the denominator's length part."""
    out: npt.NDArray[np.float64] = BM25_K1 * (1.0 - BM25_B + BM25_B * lengths / avg_q)
    return out


def tf_parts(tf: npt.NDArray[Any], norms: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """:func:`tf_part` of many entries, `norms` their :func:`length_norms`, rounded to
    float32, the precision tf parts are kept at."""
    t = tf.astype(np.float64)
    part: npt.NDArray[np.float64] = t * (BM25_K1 + 1.0) / (t + norms)
    return part.astype(np.float32)


def _view(buf: array[Any], dtype: type[np.generic]) -> npt.NDArray[Any]:
    return np.frombuffer(buf, dtype=dtype)


def _within(values: npt.NDArray[Any], limit: int) -> bool:
    return int(values.min()) >= 0 and int(values.max()) <= limit


def _starts(values: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """Where each run of equal neighbours starts."""
    lead = np.empty(values.size, dtype=bool)
    lead[:1] = True
    np.not_equal(values[1:], values[:-1], out=lead[1:])
    return lead.nonzero()[0]


class PassageStore:
    """The passages of every live folder, by folder id; term ids are the caller's."""

    def __init__(self) -> None:
        self._slot: dict[str, int] = {}
        # per slot: its run of entries and its passages
        self._e_start = array("q")
        self._e_end = array("q")
        self._first = array("q")
        self._stop = array("q")
        # entries
        self._tid = array("i")
        self._tf = array("B")
        self._big_tf: dict[int, int] = {}  # entry -> its tf, when >= 255
        # passages: first entry (ascending), length, length normalisation at `_avg_q`
        self._pstart = array("q")
        self._plen = array("i")
        self._pnorm = array("d")
        self._pask = array("B")  # 1: the passage asks (never a best passage)
        self._normed = 0  # passages whose normalisation is at `_avg_q`
        self._df = array("q")  # per term id: live passages holding it
        self._passages = 0
        self._total = 0
        self._dead = 0  # entries of removed folders
        self._avg_q = 0.0
        self._lut: npt.NDArray[np.int32] = np.full(0, -1, dtype=np.int32)
        self._views: tuple[npt.NDArray[Any], ...] | None = None
        self._idfs: dict[int, float] = {}

    def __contains__(self, folder_id: object) -> bool:
        return folder_id in self._slot

    @property
    def passages(self) -> int:
        """Live passages."""
        return self._passages

    def add(
        self,
        folder_id: str,
        passages: Iterable[Sequence[int]],
        asks: Iterable[bool] | None = None,
    ) -> None:
        """Store a folder's passages (the term ids of each, in text order; empty ones
        are skipped) and, per passage, whether it asks (default: none does)."""
        if folder_id in self._slot:
            self.remove(folder_id)
        self._views, self._idfs = None, {}
        tids, tfs, pstart, plen = self._tid, self._tf, self._pstart, self._plen
        self._slot[folder_id] = len(self._e_start)
        self._e_start.append(len(tids))
        self._first.append(len(plen))
        held: Counter[int] = Counter()
        pask = self._pask
        rows = list(passages)
        flags = [False] * len(rows) if asks is None else list(asks)
        for terms, ask in zip(rows, flags, strict=True):
            if not terms:
                continue
            pask.append(1 if ask else 0)
            pstart.append(len(tids))
            plen.append(len(terms))
            counts = Counter(terms)  # in the order terms first occur
            at = len(tids)
            tids.extend(counts)
            if len(counts) == len(terms):
                tfs.extend(b"\x01" * len(terms))
            elif max(counts.values()) < _TF_ESCAPE:
                tfs.extend(counts.values())
            else:
                for i, tf in enumerate(counts.values()):
                    if tf >= _TF_ESCAPE:
                        self._big_tf[at + i] = tf
                tfs.extend([min(tf, _TF_ESCAPE) for tf in counts.values()])
            held.update(counts.keys())
            self._total += len(terms)
        self._pnorm.frombytes(bytes(8 * (len(plen) - len(self._pnorm))))
        self._passages += len(plen) - self._first[-1]
        self._e_end.append(len(tids))
        self._stop.append(len(plen))
        self._count(held, 1)

    def _count(self, held: Counter[int], sign: int) -> None:
        df = self._df
        if held:
            top = max(held)
            if top >= len(df):
                df.frombytes(bytes(8 * (top + 1 - len(df))))
        for tid, n in held.items():
            df[tid] += sign * n

    def _tf_at(self, a: int, b: int) -> list[int]:
        tfs = self._tf[a:b].tolist()
        if self._big_tf:
            for i, tf in enumerate(tfs):
                if tf == _TF_ESCAPE:
                    tfs[i] = self._big_tf[a + i]
        return tfs

    def text_counts(self, folder_id: str) -> dict[int, int]:
        """Term id -> occurrences over a folder's passages (its text's term counts)."""
        slot = self._slot.get(folder_id)
        if slot is None:
            return {}
        a, b = self._e_start[slot], self._e_end[slot]
        out: dict[int, int] = {}
        for tid, tf in zip(self._tid[a:b], self._tf_at(a, b), strict=True):
            out[tid] = out.get(tid, 0) + tf
        return out

    def terms(self, folder_id: str) -> set[int]:
        """The term ids of a folder's passages."""
        slot = self._slot.get(folder_id)
        if slot is None:
            return set()
        return set(self._tid[self._e_start[slot] : self._e_end[slot]])

    def remove(self, folder_id: str) -> None:
        """Forget a folder's passages (their entries go dead until compaction)."""
        slot = self._slot.pop(folder_id, None)
        if slot is None:
            return
        self._idfs = {}
        a, b = self._e_start[slot], self._e_end[slot]
        # a term occurs once per passage, so once per passage holding it
        self._count(Counter(self._tid[a:b]), -1)
        for p in range(self._first[slot], self._stop[slot]):
            self._total -= self._plen[p]
        self._passages -= self._stop[slot] - self._first[slot]
        if self._big_tf:
            for i in [i for i in self._big_tf if a <= i < b]:
                del self._big_tf[i]
        self._dead += b - a
        self._e_end[slot] = a
        self._stop[slot] = self._first[slot]

    def settle(self) -> None:
        """After a batch of changes: compact when a third of the entries are dead, and
        requantise the average passage length (the length normalisations with it)."""
        self._views, self._idfs = None, {}
        if self._dead > _COMPACT_DEAD_SHARE * max(1, len(self._tid)):
            self._compact()
        avg_q = quantise_length(self._total / self._passages) if self._passages else 0.0
        if avg_q != self._avg_q:
            self._avg_q, self._normed = avg_q, 0
        if avg_q and self._normed < len(self._plen):
            norms = length_norms(_view(self._plen, np.int32)[self._normed :], avg_q)
            _view(self._pnorm, np.float64)[self._normed :] = norms
            self._normed = len(self._plen)

    def _compact(self) -> None:
        """Drop the dead entries: the live folders' runs, in slot order, back to back."""
        tid, tf = _view(self._tid, np.int32), _view(self._tf, np.uint8)
        pstart, plen = _view(self._pstart, np.int64), _view(self._plen, np.int32)
        pnorm = _view(self._pnorm, np.float64)
        pask = _view(self._pask, np.uint8)
        keep_e: list[npt.NDArray[Any]] = []
        keep_p: list[npt.NDArray[Any]] = []
        shift: list[npt.NDArray[Any]] = []
        e_start, e_end, first, stop = array("q"), array("q"), array("q"), array("q")
        big: dict[int, int] = {}
        at = passages = 0
        for new, (fid, slot) in enumerate(sorted(self._slot.items(), key=lambda kv: kv[1])):
            a, b = self._e_start[slot], self._e_end[slot]
            p, q = self._first[slot], self._stop[slot]
            keep_e.append(np.arange(a, b))
            keep_p.append(np.arange(p, q))
            shift.append(np.full(q - p, a - at, dtype=np.int64))
            for i, tf_big in self._big_tf.items():
                if a <= i < b:
                    big[i - a + at] = tf_big
            e_start.append(at)
            first.append(passages)
            at += b - a
            passages += q - p
            e_end.append(at)
            stop.append(passages)
            self._slot[fid] = new
        e = np.concatenate([np.zeros(0, np.int64), *keep_e])
        p_ = np.concatenate([np.zeros(0, np.int64), *keep_p])
        moved = np.concatenate([np.zeros(0, np.int64), *shift])
        self._tid = array("i", tid[e].tobytes())
        self._tf = array("B", tf[e].tobytes())
        self._pstart = array("q", (pstart[p_] - moved).tobytes())
        self._plen = array("i", plen[p_].tobytes())
        self._pnorm = array("d", pnorm[p_].tobytes())
        self._pask = array("B", pask[p_].tobytes())
        self._normed = int((p_ < self._normed).sum())
        self._e_start, self._e_end, self._first, self._stop = e_start, e_end, first, stop
        self._big_tf = big
        self._dead = 0

    # -- snapshots (engine.relevance.snapshot) --------------------------------------
    def snapshot_parts(self, folder_ids: Sequence[str]) -> dict[str, tuple[str, list[Any]]]:
        """Everything a restored copy needs: name -> (NumPy type code, buffers back to
        back); `folder_ids` are the index's documents, each stored with its slot (-1
        when it has none)."""
        slot_of = self._slot
        if len(slot_of) != sum(1 for fid in folder_ids if fid in slot_of):
            raise RuntimeError("passages of folders the index does not hold")
        slots = np.array([slot_of.get(fid, -1) for fid in folder_ids], dtype=np.int64)
        big = sorted(self._big_tf.items())
        scalars = [self._normed, self._passages, self._total, self._dead]
        return {
            "s.scalars": ("i8", [np.array(scalars, dtype=np.int64)]),
            "s.avg": ("f8", [np.array([self._avg_q], dtype=np.float64)]),
            "s.slot": ("i8", [slots]),
            "s.e_start": ("i8", [self._e_start]),
            "s.e_end": ("i8", [self._e_end]),
            "s.first": ("i8", [self._first]),
            "s.stop": ("i8", [self._stop]),
            "s.tid": ("i4", [self._tid]),
            "s.tf": ("u1", [self._tf]),
            "s.big": ("i8", [np.array(big, dtype=np.int64).reshape(-1)]),
            "s.pstart": ("i8", [self._pstart]),
            "s.plen": ("i4", [self._plen]),
            "s.pnorm": ("f8", [self._pnorm]),
            "s.ask": ("u1", [self._pask]),
            "s.df": ("i8", [self._df]),
        }

    @classmethod
    def restored(cls, arrays: Mapping[str, array[Any]], folder_ids: Sequence[str]) -> PassageStore:
        """The store :meth:`snapshot_parts` stored for `folder_ids` (it keeps the arrays).
        Raises ValueError when the arrays do not fit together."""
        ps = cls()
        normed, passages, total, dead = (int(v) for v in arrays["s.scalars"])
        (avg_q,) = (float(v) for v in arrays["s.avg"])
        slots: list[int] = arrays["s.slot"].tolist()
        names = ("s.e_start", "s.e_end", "s.first", "s.stop")
        n_slots = len(arrays["s.e_start"])
        entries, n_passages = len(arrays["s.tid"]), len(arrays["s.plen"])
        limits = (entries, entries, n_passages, n_passages)
        if (
            len(slots) != len(folder_ids)
            or any(len(arrays[k]) != n_slots for k in names)
            or (slots and max(slots) >= n_slots)
            or len(arrays["s.tf"]) != entries
            or len(arrays["s.pstart"]) != n_passages
            or len(arrays["s.pnorm"]) != n_passages
            or len(arrays["s.ask"]) != n_passages
            or not 0 <= normed <= n_passages
            or len(arrays["s.big"]) % 2
            or any(
                len(arrays[k]) and not _within(np.frombuffer(arrays[k], dtype=np.int64), lim)
                for k, lim in zip(names, limits, strict=True)
            )
        ):
            raise ValueError("passage arrays do not fit together")
        has_slot = map(operator.ge, slots, repeat(0))
        ps._slot = dict(compress(zip(folder_ids, slots, strict=True), has_slot))
        if len(set(ps._slot.values())) != len(ps._slot):
            raise ValueError("two folders share a passage slot")
        ps._e_start, ps._e_end = arrays["s.e_start"], arrays["s.e_end"]
        ps._first, ps._stop = arrays["s.first"], arrays["s.stop"]
        ps._tid, ps._tf = arrays["s.tid"], arrays["s.tf"]
        big: list[int] = arrays["s.big"].tolist()
        ps._big_tf = {big[2 * i]: big[2 * i + 1] for i in range(len(big) // 2)}
        ps._pstart, ps._plen, ps._pnorm = arrays["s.pstart"], arrays["s.plen"], arrays["s.pnorm"]
        ps._pask = arrays["s.ask"]
        ps._df = arrays["s.df"]
        ps._normed, ps._passages, ps._total, ps._dead = normed, passages, total, dead
        ps._avg_q = avg_q
        return ps

    def _idf(self, tid: int) -> float:
        """A term's idf over the live passages (kept until the store changes)."""
        idf = self._idfs.get(tid)
        if idf is None:
            d = self._df[tid] if tid < len(self._df) else 0
            n = self._passages
            idf = self._idfs[tid] = math.log(1.0 + (n - d + 0.5) / (d + 0.5))
        return idf

    def _lookup(self, size: int) -> npt.NDArray[np.int32]:
        """The term-id lookup table (all -1), at least `size` long and as long as the
        term ids seen."""
        need = max(size, len(self._df))
        if self._lut.size < need:
            self._lut = np.full(max(need, 2 * self._lut.size), -1, dtype=np.int32)
        return self._lut

    def _arrays(self) -> tuple[npt.NDArray[Any], ...]:
        """The entry and passage arrays as NumPy views (kept until the store changes:
        an array exporting its buffer cannot grow)."""
        if self._views is None:
            self._views = (
                _view(self._tid, np.int32),
                _view(self._tf, np.uint8),
                _view(self._pstart, np.int64),
                _view(self._pnorm, np.float64),
                _view(self._pask, np.uint8),
            )
        return self._views

    def best(self, folder_ids: Sequence[str], tids: Sequence[int]) -> npt.NDArray[np.float64]:
        """The best passage score of each folder for the query term ids `tids`
        (0 for a folder without passages or matches; passages that ask do not count).
        One query at a time (a lookup table is shared), like everything of a session."""
        out = np.zeros(len(folder_ids), dtype=np.float64)
        if not tids or not self._passages or not folder_ids:
            return out
        slot_of, e_start, e_end = self._slot, self._e_start, self._e_end
        first, stop = self._first, self._stop
        owners: list[int] = []
        shifts: list[int] = []  # run start - where the run lands in `idx`
        lengths: list[int] = []
        firsts: list[int] = []  # first passage - where its passages land in the pool's
        counts: list[int] = []
        total = passages = 0
        for i, fid in enumerate(folder_ids):
            slot = slot_of.get(fid)
            if slot is None or e_end[slot] == e_start[slot]:
                continue
            owners.append(i)
            shifts.append(e_start[slot] - total)
            lengths.append(e_end[slot] - e_start[slot])
            total += lengths[-1]
            firsts.append(first[slot] - passages)
            counts.append(stop[slot] - first[slot])
            passages += counts[-1]
        if not total:
            return out
        tid_v, tf_v, pstart_v, pnorm_v, pask_v = self._arrays()
        # the entry numbers of every run, back to back
        idx = np.array(shifts).repeat(lengths)
        idx += np.arange(total)
        # query term id -> its position in `q`, through a lookup table kept at -1
        q = sorted(set(tids))
        lut = self._lookup(q[-1] + 1)
        lut[q] = np.arange(len(q), dtype=np.int32)
        try:
            pos = lut[tid_v[idx]]
        finally:
            lut[q] = -1
        hit = (pos >= 0).nonzero()[0]
        if not hit.size:
            return out
        # the pool's passages, and where in `idx` each starts: a hit's passage is the
        # last one starting at or before it (a small table, not the whole store's)
        pidx = np.array(firsts).repeat(counts)
        pidx += np.arange(passages)
        starts = pstart_v[pidx] - np.array(shifts).repeat(counts)
        passage = starts.searchsorted(hit, side="right") - 1
        stated = pask_v[pidx[passage]] == 0
        if not stated.all():
            hit, passage = hit[stated], passage[stated]
            if not hit.size:
                return out
        tf = tf_v[idx[hit]]
        if self._big_tf:
            at = idx[hit].tolist()
            tf = np.array([self._big_tf.get(i, t) for i, t in zip(at, tf.tolist(), strict=True)])
        idf = np.array([self._idf(t) for t in q])
        w = tf_parts(tf, pnorm_v[pidx[passage]]) * idf[pos[hit]]
        # the matched entries come grouped by passage, the passages by folder (runs in
        # pool order): a sum per passage, then a maximum per folder
        group = _starts(passage)
        folder = np.array(owners).repeat(counts)[passage[group]]
        np.maximum.at(out, folder, np.add.reduceat(w, group))
        return out
