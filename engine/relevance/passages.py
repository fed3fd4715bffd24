"""Passage-level BM25 inside folders: which folder holds the message that answers.

A folder is several messages; the one that answers a question is usually a single
message holding most of the question's words, while a folder that merely mentions
them across twenty lines of chatter scores as well at folder level. So the ranked
recall reranks its best folders by their best *passage* (one line of the folder's
text, i.e. one message or one paragraph of it), scored with BM25 over all passages of
the session (`engine.relevance.index.RelevanceIndex.rank` mixes the two).

Storage is flat (CSR): every live folder owns a contiguous run of entries
(term id, tf, passage number, tf part), so the passages of the few folders being
reranked are a handful of slices. The tf part uses the average passage length
quantised like the folder index does, so it is computed once per entry and a query
only multiplies by idf; a passage's score sums its entries in stored order, so it
does not depend on where the folder sits in the arrays or on the index's history.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["PassageStore", "quantise_length"]

BM25_K1 = 1.2
BM25_B = 0.75
_STEPS_PER_DOUBLING = 8
_COMPACT_DEAD_SHARE = 1 / 3


def quantise_length(avg: float) -> float:
    """`avg` rounded to the nearest power of 2^(1/8) (≈ 9% steps): BM25's average
    length, stable across long runs of changes and a function of the live documents."""
    steps = round(math.log2(avg) * _STEPS_PER_DOUBLING)
    return float(2.0 ** (steps / _STEPS_PER_DOUBLING))


def tf_part(tf: int, length: int, avg_q: float) -> float:
    """BM25's `tf (k1 + 1) / (tf + k1 (1 − b + b · len / avg))`, the same float as the
    vectorised form in :func:`tf_parts` (the same operations in the same order)."""
    if not avg_q:
        return tf * (BM25_K1 + 1.0) / (tf + BM25_K1)
    return tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * length / avg_q))


def tf_parts(
    tf: npt.NDArray[np.int32], lengths: npt.NDArray[np.int64], avg_q: float
) -> array[float]:
    """:func:`tf_part` of many entries at once, as float32 (`array('f')`)."""
    t = tf.astype(np.float64)
    k1, b = BM25_K1, BM25_B
    part = t * (k1 + 1.0) / (t + k1 * (1.0 - b + b * lengths / avg_q))
    return array("f", part.astype(np.float32).tobytes())


class PassageStore:
    """The passages of every live folder, by folder id; term ids are the caller's."""

    def __init__(self) -> None:
        self._slot: dict[str, int] = {}
        self._start = array("q")
        self._end = array("q")
        self._tid = array("i")
        self._tf = array("i")
        self._pid = array("i")
        self._norm = array("f")
        self._plen = array("q")  # per passage number
        self._df = array("q")  # per term id: live passages holding it
        self._passages = 0
        self._total = 0
        self._dead_entries = 0
        self._avg_q = 0.0
        self._lut: npt.NDArray[np.int32] = np.full(0, -1, dtype=np.int32)

    def __contains__(self, folder_id: object) -> bool:
        return folder_id in self._slot

    @property
    def passages(self) -> int:
        """Live passages."""
        return self._passages

    def add(self, folder_id: str, passages: Sequence[dict[int, int]]) -> None:
        """Store a folder's passages (term id -> tf each, in text order)."""
        if folder_id in self._slot:
            self.remove(folder_id)
        df = self._df
        self._slot[folder_id] = len(self._start)
        self._start.append(len(self._tid))
        for counts in passages:
            if not counts:
                continue
            p = len(self._plen)
            length = sum(counts.values())
            self._plen.append(length)
            self._passages += 1
            self._total += length
            for tid, tf in counts.items():
                while tid >= len(df):
                    df.append(0)
                df[tid] += 1
                self._tid.append(tid)
                self._tf.append(tf)
                self._pid.append(p)
                self._norm.append(tf_part(tf, length, self._avg_q))
        self._end.append(len(self._tid))

    def remove(self, folder_id: str) -> None:
        """Forget a folder's passages (their entries go dead until compaction)."""
        slot = self._slot.pop(folder_id, None)
        if slot is None:
            return
        a, b = self._start[slot], self._end[slot]
        seen: set[int] = set()
        df, pid, tid, plen = self._df, self._pid, self._tid, self._plen
        for i in range(a, b):
            df[tid[i]] -= 1
            p = pid[i]
            if p not in seen:
                seen.add(p)
                self._passages -= 1
                self._total -= plen[p]
        self._dead_entries += b - a
        self._start[slot] = self._end[slot] = a

    def settle(self) -> None:
        """After a batch of changes: compact when a third of the entries are dead, and
        recompute the tf parts when the quantised average passage length moved."""
        if self._dead_entries > _COMPACT_DEAD_SHARE * max(1, len(self._tid)):
            self._compact()
        avg_q = quantise_length(self._total / self._passages) if self._passages else 0.0
        if avg_q != self._avg_q:
            self._avg_q = avg_q
            if avg_q and len(self._tid):
                tf = np.frombuffer(self._tf, dtype=np.int32)
                lens = np.frombuffer(self._plen, dtype=np.int64)[np.frombuffer(self._pid, np.int32)]
                self._norm = tf_parts(tf, lens, avg_q)

    def _compact(self) -> None:
        old_start, old_end = self._start, self._end
        tid, tf, pid, norm, plen = self._tid, self._tf, self._pid, self._norm, self._plen
        self._start, self._end = array("q"), array("q")
        self._tid, self._tf, self._pid, self._norm = array("i"), array("i"), array("i"), array("f")
        self._plen = array("q")
        remap: dict[int, int] = {}
        for fid, slot in sorted(self._slot.items(), key=lambda kv: kv[1]):
            a, b = old_start[slot], old_end[slot]
            self._slot[fid] = len(self._start)
            self._start.append(len(self._tid))
            for i in range(a, b):
                p = pid[i]
                new = remap.get(p)
                if new is None:
                    new = remap[p] = len(self._plen)
                    self._plen.append(plen[p])
                self._tid.append(tid[i])
                self._tf.append(tf[i])
                self._pid.append(new)
                self._norm.append(norm[i])
            self._end.append(len(self._tid))
        self._dead_entries = 0

    def _lookup(self, size: int) -> npt.NDArray[np.int32]:
        """The term-id lookup table (all -1), at least `size` long and as long as the
        term ids seen."""
        need = max(size, len(self._df))
        if self._lut.size < need:
            self._lut = np.full(max(need, 2 * self._lut.size), -1, dtype=np.int32)
        return self._lut

    def best(self, folder_ids: Sequence[str], tids: Sequence[int]) -> npt.NDArray[np.float64]:
        """The best passage score of each folder for the query term ids `tids`
        (0 for a folder without passages or matches)."""
        out = np.zeros(len(folder_ids), dtype=np.float64)
        if not tids or not self._passages:
            return out
        slot_of = self._slot
        slots = np.asarray([slot_of.get(fid, -1) for fid in folder_ids], dtype=np.int64)
        present = slots >= 0
        if not present.any():
            return out
        slots = slots[present]
        starts = np.frombuffer(self._start, dtype=np.int64)[slots]
        lengths = np.frombuffer(self._end, dtype=np.int64)[slots] - starts
        total = int(lengths.sum())
        if not total:
            return out
        # the entry numbers of every run, back to back: run start + position in the run
        run_base = np.cumsum(lengths) - lengths
        idx = np.repeat(starts - run_base, lengths) + np.arange(total, dtype=np.int64)
        owner = np.repeat(np.flatnonzero(present), lengths)
        # query term id -> its position in `q`, through a lookup table kept at -1
        q = sorted(set(tids))
        lut = self._lookup(max(q) + 1)
        lut[q] = np.arange(len(q), dtype=np.int32)
        try:
            pos = lut[np.frombuffer(self._tid, dtype=np.int32)[idx]]
        finally:
            lut[q] = -1
        hit = np.flatnonzero(pos >= 0)
        if not hit.size:
            return out
        df_of, n = self._df, self._passages
        idf = np.asarray(
            [
                math.log(1.0 + (n - d + 0.5) / (d + 0.5))
                for d in (df_of[t] if t < len(df_of) else 0 for t in q)
            ],
            dtype=np.float64,
        )
        sel = idx[hit]
        w = np.frombuffer(self._norm, dtype=np.float32)[sel] * idf[pos[hit]]
        # A passage's entries are contiguous and the runs are walked in order, so the
        # matched entries come grouped by passage, and the passages grouped by folder:
        # sums per passage, then maxima per folder, by `reduceat` over the group starts.
        pids = np.frombuffer(self._pid, dtype=np.int32)[sel]
        first = np.flatnonzero(np.concatenate(([True], pids[1:] != pids[:-1])))
        sums = np.add.reduceat(w, first)
        folder = owner[hit][first]
        lead = np.flatnonzero(np.concatenate(([True], folder[1:] != folder[:-1])))
        out[folder[lead]] = np.maximum.reduceat(sums, lead)
        return out
