"""Passage-level BM25 inside folders: which folder holds the message that answers.

A folder is several messages; the one that answers a question is usually a single
message holding most of the question's words, while a folder that merely mentions
them across twenty lines of chatter scores as well at folder level. So the ranked
recall reranks its best folders by their best *passage* (one line of the folder's
text, i.e. one message or one paragraph of it), scored with BM25 over all passages of
the session (`engine.relevance.index.RelevanceIndex.rank` mixes the two).

Storage is flat: every live folder owns a contiguous run of entries, one per term of
each passage (its term id, in 2 bytes while every term id fits and in 4 from then on;
the terms of a passage in the order they first occur in it), and every passage its
first entry, its length and whether it asks. A tf is 1 for nineteen entries in twenty
(a line seldom repeats a word): the others are kept apart, entry and tf, ascending. So
an entry takes 2 bytes, where a term id, a tf byte and each passage's normalisation
took 5. The folder index reads a folder's text terms back from here instead of keeping
its own copy. A query gathers the runs of the few folders being reranked and computes
the tf parts of their matching entries then, at the average passage length quantised
like the folder index does (those of the small tfs from a small table by tf and
passage length, kept until that average moves); a passage's score sums its entries in
stored order, so it does not depend on where the folder sits in the arrays or on the
index's history.

A passage that asks (`engine.relevance.analyzer.search_passages`: the sentences of a
line ending in ``?``) is kept like any other (its terms count for the folder and for the
passages' statistics) but is never a folder's best passage: a question holds the words of
its answer without the answer, so a folder of questions (the user asking the same thing
again) would otherwise beat the one folder that answers.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engine.relevance import kernels

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
_NARROW = "H"  # entries' term ids in 2 bytes while every term id fits ...
_NARROW_MAX = 0xFFFF  # ... and in 4 from the first that does not
_ONES_MAX = 1 << 12  # passage lengths the table of tf parts covers ...
_TF_ROWS = 8  # ... of the tfs below this


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


def _tid_dtype(tids: array[int]) -> type[np.generic]:
    return np.uint16 if tids.typecode == _NARROW else np.int32


def _ascending(values: array[int], limit: int) -> bool:
    """Whether `values` (typecode i) ascend strictly, within 0..limit-1."""
    v = np.frombuffer(values, dtype=np.int32) if values.typecode == "i" else None
    if v is None or not v.size:
        return v is not None
    return int(v[0]) >= 0 and int(v[-1]) < limit and bool((v[1:] > v[:-1]).all())


def _within(values: npt.NDArray[Any], limit: int) -> bool:
    return int(values.min()) >= 0 and int(values.max()) <= limit


class PassageStore:
    """The passages of every live folder, by the caller's document number (a folder
    whose document number changes takes its passages along: :meth:`move`,
    :meth:`renumber`); term ids are the caller's too."""

    def __init__(self) -> None:
        self._slot = array("i")  # document number -> its slot, -1 when it has none
        self._slots = 0  # documents with a slot
        # per slot: its run of entries and its passages
        self._e_start = array("i")
        self._e_end = array("i")
        self._first = array("i")
        self._stop = array("i")
        # entries
        self._tid: array[int] = array(_NARROW)  # widened once a term id needs it
        # the entries whose tf is not 1 (one in twenty: a line seldom repeats a word),
        # ascending, and their tfs
        self._x_at = array("i")
        self._x_tf = array("i")
        # passages: first entry (ascending), length (its normalisation at `_avg_q` is
        # computed for the few a query reads)
        self._pstart = array("i")
        self._plen = array("i")
        self._pask = array("B")  # 1: the passage asks (never a best passage)
        self._df = array("q")  # per term id: live passages holding it
        self._passages = 0
        self._total = 0
        self._dead = 0  # entries of removed folders
        self._avg_q = 0.0
        self._lut: npt.NDArray[np.int32] = np.full(0, -1, dtype=np.int32)
        self._views: tuple[npt.NDArray[Any], ...] | None = None
        self._idfs: dict[int, float] = {}
        # the tf parts of the tfs below `_TF_ROWS` per passage length (a row per tf,
        # flattened), at the average it was made for
        self._tf_table: tuple[float, npt.NDArray[np.float32]] = (0.0, np.zeros(0, np.float32))

    def __contains__(self, doc: object) -> bool:
        return isinstance(doc, int) and self._slot_of(doc) >= 0

    def _slot_of(self, doc: int) -> int:
        return self._slot[doc] if 0 <= doc < len(self._slot) else -1

    @property
    def passages(self) -> int:
        """Live passages."""
        return self._passages

    def add(
        self,
        doc: int,
        passages: Iterable[Sequence[int]],
        asks: Iterable[bool] | None = None,
    ) -> None:
        """Store the passages of a folder, document `doc` (the term ids of each, in text
        order; empty ones are skipped) and, per passage, whether it asks (default: none
        does)."""
        self.remove(doc)
        self._views, self._idfs = None, {}
        tids, pstart, plen = self._tid, self._pstart, self._plen
        if doc >= len(self._slot):
            self._slot.extend(array("i", [-1]) * (doc + 1 - len(self._slot)))
        self._slot[doc] = len(self._e_start)
        self._slots += 1
        self._e_start.append(len(tids))
        self._first.append(len(plen))
        held: Counter[int] = Counter()
        pask = self._pask
        rows = list(passages)
        if tids.typecode == _NARROW and any(max(r) > _NARROW_MAX for r in rows if r):
            tids = self._tid = array("i", _view(tids, np.uint16).astype(np.int32).tobytes())
            self._views = None
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
            if len(counts) != len(terms):
                for i, tf in enumerate(counts.values()):
                    if tf != 1:
                        self._x_at.append(at + i)
                        self._x_tf.append(tf)
            held.update(counts.keys())
            self._total += len(terms)
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
        """The tfs of entries a..b-1."""
        tfs = [1] * (b - a)
        x_at = self._x_at
        for i in range(bisect_left(x_at, a), bisect_left(x_at, b)):
            tfs[x_at[i] - a] = self._x_tf[i]
        return tfs

    def move(self, doc: int, to: int) -> None:
        """Give document `doc`'s passages to document `to` (which has none)."""
        slot = self._slot_of(doc)
        if slot < 0:
            return
        if to >= len(self._slot):
            self._slot.extend(array("i", [-1]) * (to + 1 - len(self._slot)))
        self._slot[doc], self._slot[to] = -1, slot

    def renumber(self, live: npt.NDArray[np.bool_]) -> None:
        """The caller's documents renumbered to their ranks among the `live` ones (the
        others hold no passages)."""
        slot = np.full(live.size, -1, dtype=np.int32)
        held = min(live.size, len(self._slot))
        slot[:held] = _view(self._slot, np.int32)[:held]
        self._slot = array("i", slot[live].tobytes())

    def text_counts(self, doc: int) -> dict[int, int]:
        """Term id -> occurrences over a folder's passages (its text's term counts)."""
        slot = self._slot_of(doc)
        if slot < 0:
            return {}
        a, b = self._e_start[slot], self._e_end[slot]
        out: dict[int, int] = {}
        for tid, tf in zip(self._tid[a:b], self._tf_at(a, b), strict=True):
            out[tid] = out.get(tid, 0) + tf
        return out

    def terms(self, doc: int) -> set[int]:
        """The term ids of a folder's passages."""
        slot = self._slot_of(doc)
        if slot < 0:
            return set()
        return set(self._tid[self._e_start[slot] : self._e_end[slot]])

    def remove(self, doc: int) -> None:
        """Forget a folder's passages (their entries go dead until compaction)."""
        slot = self._slot_of(doc)
        if slot < 0:
            return
        self._slot[doc] = -1
        self._slots -= 1
        self._idfs = {}
        a, b = self._e_start[slot], self._e_end[slot]
        # a term occurs once per passage, so once per passage holding it
        self._count(Counter(self._tid[a:b]), -1)
        for p in range(self._first[slot], self._stop[slot]):
            self._total -= self._plen[p]
        self._passages -= self._stop[slot] - self._first[slot]
        self._dead += b - a
        self._e_end[slot] = a
        self._stop[slot] = self._first[slot]

    def settle(self) -> None:
        """After a batch of changes: compact when a third of the entries are dead, and
        requantise the average passage length."""
        self._views, self._idfs = None, {}
        if self._dead > _COMPACT_DEAD_SHARE * max(1, len(self._tid)):
            self._compact()
        self._avg_q = quantise_length(self._total / self._passages) if self._passages else 0.0

    def _compact(self) -> None:
        """Drop the dead entries: the live folders' runs, in slot order, back to back."""
        tid = _view(self._tid, _tid_dtype(self._tid))
        pstart, plen = _view(self._pstart, np.int32), _view(self._plen, np.int32)
        pask = _view(self._pask, np.uint8)
        keep_e: list[npt.NDArray[Any]] = []
        keep_p: list[npt.NDArray[Any]] = []
        shift: list[npt.NDArray[Any]] = []
        e_start, e_end, first, stop = array("i"), array("i"), array("i"), array("i")
        at = passages = 0
        slot_of = _view(self._slot, np.int32)
        docs = (slot_of >= 0).nonzero()[0]
        docs = docs[slot_of[docs].argsort(kind="stable")]
        for new, (doc, slot) in enumerate(zip(docs.tolist(), slot_of[docs].tolist(), strict=True)):
            a, b = self._e_start[slot], self._e_end[slot]
            p, q = self._first[slot], self._stop[slot]
            keep_e.append(np.arange(a, b))
            keep_p.append(np.arange(p, q))
            shift.append(np.full(q - p, a - at, dtype=np.int64))
            e_start.append(at)
            first.append(passages)
            at += b - a
            passages += q - p
            e_end.append(at)
            stop.append(passages)
            slot_of[doc] = new
        e = np.concatenate([np.zeros(0, np.int64), *keep_e])
        p_ = np.concatenate([np.zeros(0, np.int64), *keep_p])
        moved = np.concatenate([np.zeros(0, np.int64), *shift])
        self._tid = array(self._tid.typecode, tid[e].tobytes())
        # the kept entries come in slot order, which is entry order (a slot's run is
        # appended when it is made): an exception's new place is its rank among them
        x_at, x_tf = _view(self._x_at, np.int32), _view(self._x_tf, np.int32)
        rank = e.searchsorted(x_at)
        kept = rank < e.size
        kept[kept] = e[rank[kept]] == x_at[kept]
        self._x_at = array("i", rank[kept].astype(np.int32).tobytes())
        self._x_tf = array("i", x_tf[kept].tobytes())
        del x_at, x_tf
        self._pstart = array("i", (pstart[p_] - moved).astype(np.int32).tobytes())
        self._plen = array("i", plen[p_].tobytes())
        self._pask = array("B", pask[p_].tobytes())
        self._e_start, self._e_end, self._first, self._stop = e_start, e_end, first, stop
        del slot_of
        self._dead = 0

    # -- snapshots (engine.relevance.snapshot) --------------------------------------
    def snapshot_parts(self, live: npt.NDArray[np.bool_]) -> dict[str, tuple[str, list[Any]]]:
        """Everything a restored copy needs: name -> (NumPy type code, buffers back to
        back); `live` says which of the caller's documents are (each is stored with its
        slot, -1 when it has none)."""
        slots = np.full(live.size, -1, dtype=np.int32)
        held = min(live.size, len(self._slot))
        slots[:held] = _view(self._slot, np.int32)[:held]
        if int((slots >= 0).sum()) != self._slots or bool((slots[~live] >= 0).any()):
            raise RuntimeError("passages of folders the index does not hold")
        scalars = [self._passages, self._total, self._dead]
        return {
            "s.scalars": ("i8", [np.array(scalars, dtype=np.int64)]),
            "s.avg": ("f8", [np.array([self._avg_q], dtype=np.float64)]),
            "s.slot": ("i4", [slots]),
            "s.e_start": ("i4", [self._e_start]),
            "s.e_end": ("i4", [self._e_end]),
            "s.first": ("i4", [self._first]),
            "s.stop": ("i4", [self._stop]),
            "s.tid": ("u2" if self._tid.typecode == _NARROW else "i4", [self._tid]),
            "s.x_at": ("i4", [self._x_at]),
            "s.x_tf": ("i4", [self._x_tf]),
            "s.pstart": ("i4", [self._pstart]),
            "s.plen": ("i4", [self._plen]),
            "s.ask": ("u1", [self._pask]),
            "s.df": ("i8", [self._df]),
        }

    @classmethod
    def restored(
        cls, arrays: Mapping[str, array[Any]], live: npt.NDArray[np.bool_]
    ) -> PassageStore:
        """The store :meth:`snapshot_parts` stored for the documents `live` says are (it
        keeps the arrays). Raises ValueError when the arrays do not fit together."""
        ps = cls()
        passages, total, dead = (int(v) for v in arrays["s.scalars"])
        (avg_q,) = (float(v) for v in arrays["s.avg"])
        slot_of = arrays["s.slot"]
        slots = np.frombuffer(slot_of, dtype=np.int32) if slot_of.typecode == "i" else None
        names = ("s.e_start", "s.e_end", "s.first", "s.stop")
        n_slots = len(arrays["s.e_start"])
        entries, n_passages = len(arrays["s.tid"]), len(arrays["s.plen"])
        limits = (entries, entries, n_passages, n_passages)
        if (
            slots is None
            or slots.size != live.size
            or any(len(arrays[k]) != n_slots for k in names)
            or (slots.size and int(slots.max()) >= n_slots)
            or bool((slots[~live] >= 0).any())
            or len(arrays["s.x_tf"]) != len(arrays["s.x_at"])
            or not _ascending(arrays["s.x_at"], entries)
            or len(arrays["s.pstart"]) != n_passages
            or len(arrays["s.ask"]) != n_passages
            or arrays["s.tid"].typecode not in (_NARROW, "i")
            or any(arrays[k].typecode != "i" for k in (*names, "s.pstart", "s.plen", "s.x_tf"))
            or bool((np.frombuffer(arrays["s.x_tf"], dtype=np.int32) < 2).any())
            or any(
                len(arrays[k]) and not _within(np.frombuffer(arrays[k], dtype=np.int32), lim)
                for k, lim in zip(names, limits, strict=True)
            )
        ):
            raise ValueError("passage arrays do not fit together")
        held = slots[slots >= 0]
        if held.size and int(np.bincount(held).max()) > 1:
            raise ValueError("two folders share a passage slot")
        ps._slot, ps._slots = slot_of, int(held.size)
        del slots
        ps._e_start, ps._e_end = arrays["s.e_start"], arrays["s.e_end"]
        ps._first, ps._stop = arrays["s.first"], arrays["s.stop"]
        ps._tid, ps._x_at, ps._x_tf = arrays["s.tid"], arrays["s.x_at"], arrays["s.x_tf"]
        ps._pstart, ps._plen = arrays["s.pstart"], arrays["s.plen"]
        ps._pask = arrays["s.ask"]
        ps._df = arrays["s.df"]
        ps._passages, ps._total, ps._dead = passages, total, dead
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
                _view(self._tid, _tid_dtype(self._tid)),
                _view(self._x_at, np.int32),
                _view(self._x_tf, np.int32),
                _view(self._pstart, np.int32),
                _view(self._plen, np.int32),
                _view(self._pask, np.uint8),
            )
        return self._views

    @staticmethod
    def _exceptions(
        entries: npt.NDArray[Any], x_at: npt.NDArray[np.int32], x_tf: npt.NDArray[np.int32]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int32]]:
        """Which of `entries` have a tf other than 1 (their positions) and their tfs."""
        if not x_at.size:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.int32)
        at = x_at[:-1].searchsorted(entries)  # all but the last: every position valid
        found = (x_at[at] == entries).nonzero()[0]
        return found, x_tf[at[found]]

    def _entry_parts(
        self,
        lengths: npt.NDArray[Any],
        at: npt.NDArray[np.intp],
        tf: npt.NDArray[np.int32],
    ) -> npt.NDArray[np.float32]:
        """:func:`tf_parts` at `_avg_q` of entries in passages of `lengths`, each of a tf
        of 1 but those at `at` (of the tfs `tf`). Read from one table by tf and length
        while both are small, computed otherwise: the same floats (the same operations on
        each tf and length), where looking up a tf of 1 and computing the others took a
        dozen NumPy calls a query (nineteen entries in twenty have a tf of 1, lines are
        short)."""
        top = int(lengths.max())
        big = bool(tf.size) and int(tf.max()) >= _TF_ROWS
        if top >= _ONES_MAX or big:
            parts = tf_parts(
                np.ones(lengths.size, dtype=np.int64), length_norms(lengths, self._avg_q)
            )
            if at.size:
                parts[at] = tf_parts(tf, length_norms(lengths[at], self._avg_q))
            return parts
        avg, table = self._tf_table
        width = table.size // _TF_ROWS
        if avg != self._avg_q or top >= width:
            width = min(max(top + 1, 2 * width if avg == self._avg_q else 0, 64), _ONES_MAX)
            sizes = np.arange(width, dtype=np.int64)
            tfs = np.arange(_TF_ROWS, dtype=np.int64)[:, None]
            table = tf_parts(tfs, length_norms(sizes, self._avg_q)[None, :]).reshape(-1)
            self._tf_table = (self._avg_q, table)
        flat = lengths + width  # row 1: a tf of 1
        if at.size:
            flat[at] += (tf - 1) * width
        out: npt.NDArray[np.float32] = table[flat]
        return out

    def best(
        self,
        docs: Sequence[int],
        tids: Sequence[int],
        factor: npt.NDArray[np.float64] | None = None,
    ) -> list[float]:
        """The best passage score of each of the folders `docs` for the query term ids
        `tids` (0 for a folder without passages or matches; passages that ask do not
        count), times the folder's `factor` when one is given: a passage's score is
        Σ idf × tf part over its entries of those terms, added in stored order. One
        query at a time (a lookup table is shared), like everything of a session."""
        if not tids or not self._passages or not docs:
            return [0.0] * len(docs)
        arrays, q, idf = self.query_arrays(tids)
        compiled = kernels.active()
        if compiled is not None and arrays is not None:
            return compiled.passage_best(
                docs if type(docs) is list else list(docs), q, idf, arrays, factor
            )
        best: list[float] = self._best_numpy(docs, q, idf).tolist()
        if factor is not None:
            best = [p * f for p, f in zip(best, factor[list(docs)].tolist(), strict=True)]
        return best

    def query_arrays(
        self, tids: Iterable[int]
    ) -> tuple[tuple[Any, ...] | None, list[int], list[float]]:
        """What the compiled loops (`engine.relevance.kernels`) read for a query of the
        term ids `tids`: the store's arrays and its average passage length (None when
        it holds no passage), the distinct ids ascending and their idfs."""
        q = sorted(set(tids))
        idfs = self._idfs
        idf = [idfs[t] if t in idfs else self._idf(t) for t in q]
        if not self._passages:
            return None, q, idf
        arrays = (
            self._slot,
            self._e_start,
            self._e_end,
            self._first,
            self._stop,
            self._tid,
            self._x_at,
            self._x_tf,
            self._pstart,
            self._plen,
            self._pask,
            self._avg_q,
        )
        return arrays, q, idf

    def _best_numpy(
        self, docs: Sequence[int], q: list[int], idf_q: list[float]
    ) -> npt.NDArray[np.float64]:
        """:meth:`best` by NumPy (without a factor), for the ascending distinct term ids
        `q` and their idfs `idf_q`."""
        out = np.zeros(len(docs), dtype=np.float64)
        slot_of, e_start, e_end = self._slot, self._e_start, self._e_end
        held = len(slot_of)
        owners: list[int] = []
        shifts: list[int] = []  # run start - where the run lands in `idx`
        lengths: list[int] = []
        ends: list[int] = []  # where each run ends in `idx`
        total = 0
        for i, doc in enumerate(docs):
            slot = slot_of[doc] if doc < held else -1
            if slot < 0:
                continue
            a = e_start[slot]
            size = e_end[slot] - a
            if size:
                owners.append(i)
                shifts.append(a - total)
                lengths.append(size)
                total += size
                ends.append(total)
        if not total:
            return out
        tid_v, x_at_v, x_tf_v, pstart_v, plen_v, pask_v = self._arrays()
        # the entry numbers of every run, back to back
        idx = np.array(shifts, dtype=np.int32).repeat(lengths)
        idx += np.arange(total, dtype=np.int32)
        # query term id -> its position in `q`, through a lookup table kept at -1
        lut = self._lookup(q[-1] + 1)
        lut[q] = np.arange(len(q), dtype=np.int32)
        try:
            pos = lut[tid_v[idx]]
        finally:
            lut[q] = -1
        hit = (pos >= 0).nonzero()[0]
        if not hit.size:
            return out
        # each hit's passage: the last one starting at or before it (the passages'
        # starts ascend over the whole store, and a run's first passage starts it)
        entry = idx[hit]
        passage = pstart_v.searchsorted(entry, side="right")
        passage -= 1
        asks = pask_v[passage]
        if asks.any():
            stated = asks == 0
            hit, entry, passage = hit[stated], entry[stated], passage[stated]
            if not hit.size:
                return out
        idf = np.array(idf_q)
        plens = plen_v[passage]
        at, tf = self._exceptions(entry, x_at_v, x_tf_v)
        w = self._entry_parts(plens, at, tf) * idf[pos[hit]]
        # the matched entries come grouped by passage, the passages by folder (runs in
        # pool order; a folder named twice has two runs of the same passages): a sum
        # per passage of a run (bincount adds each group's weights in input order,
        # from 0), then a maximum per folder
        run = np.array(ends).searchsorted(hit, side="right")
        lead = np.empty(hit.size, dtype=bool)
        lead[:1] = True
        np.not_equal(passage[1:], passage[:-1], out=lead[1:])
        lead[1:] |= run[1:] != run[:-1]
        number = np.cumsum(lead) - 1
        sums = np.bincount(number, weights=w)
        np.maximum.at(out, np.array(owners)[run[lead]], sums)
        return out
