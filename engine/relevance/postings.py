"""The folder index's postings: per term, the documents holding it, its weighted tf
and its BM25 tf part in each (`engine.relevance.index.RelevanceIndex`).

A term's postings are sparse (document numbers ascending, append-only) or, for a term
in at least a quarter of the documents, dense (one tf and one tf part per document
number, 0 where it is absent: 5 bytes a document where a posting takes 9): a query
looks a common term up for many documents, which a dense vector answers with one
gather where a posting list needs a binary search per document. A term turns dense
when a flush leaves it in a quarter of the documents and sparse again when a
compaction leaves it in less than an eighth.

The weighted tf is kept in a byte; the rare larger one is kept exactly beside it (the
byte says `_TF_ESCAPE`). The tf part `tf (k1 + 1) / (tf + k1 (1 − b + b dl / avgdl))`
is kept in float32 at the quantised average length, computed when a posting is
flushed and recomputed when the average moves a step (`renorm`). Both representations
hold the same float32 values, and every sum over a query's terms adds them in the
query's order, one term after the other, so a score never depends on which
representation a term had, on document numbers, or on the history.

New postings wait in three flat arrays until `flush` sorts them into their terms
(a sync that adds ten thousand folders sorts once instead of appending posting by
posting). Per term the largest tf part of its postings, dead ones included, bounds
what it can add to a score (`engine.relevance.maxscore`).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from engine.relevance.passages import length_norms, tf_part, tf_parts
from engine.relevance.term_arrays import TermArrays

__all__ = ["Postings"]

_TF_ESCAPE = 255  # a tf byte of 255: the tf is in `_big_tf`
_DENSE_AT = 4  # a term in 1/4 of the documents turns dense ...
_SPARSE_AT = 8  # ... and sparse again under 1/8
_FLUSH_AT = 1 << 20  # waiting postings that make `add` flush
_VIEWS = 4096  # array views of term postings kept
_Doubles = npt.NDArray[np.float64]


def _i32(buf: array[int]) -> npt.NDArray[np.int32]:
    return np.frombuffer(buf, dtype=np.int32)


def _u8(buf: array[int]) -> npt.NDArray[np.uint8]:
    return np.frombuffer(buf, dtype=np.uint8)


def _f32(buf: array[float]) -> npt.NDArray[np.float32]:
    return np.frombuffer(buf, dtype=np.float32)


class Postings:
    """Postings of term ids 0.. over document numbers 0..; the caller keeps lengths."""

    def __init__(self) -> None:
        # sparse terms: documents ascending, tf bytes, tf parts
        self._docs: TermArrays[int] = TermArrays("i")
        self._tf: TermArrays[int] = TermArrays("B")
        self._norm: TermArrays[float] = TermArrays("f")
        # dense terms: term id -> (tf bytes, tf parts), one per document number
        self._dense: dict[int, tuple[array[int], array[float]]] = {}
        self._big_tf: dict[tuple[int, int], int] = {}  # (term id, doc) -> tf >= 255
        self.df = array("q")  # live documents holding the term (the caller corrects it)
        self._size = array("q")  # postings, dead documents' included
        self._top = array("d")  # the largest tf part of the postings, dead ones included
        self._docs_n = 0  # document numbers the dense vectors cover
        self._new_docs = array("i")
        self._new_tids = array("i")
        self._new_tf = array("i")
        self.stale = False  # postings flushed without their tf parts
        self._bounds: list[float] | None = None
        self._views: dict[int, tuple[npt.NDArray[np.int32] | None, npt.NDArray[np.float32]]] = {}
        self._slots: npt.NDArray[np.int32] = np.full(0, -1, dtype=np.int32)

    @property
    def docs_n(self) -> int:
        """Document numbers the postings cover (the index's, once flushed)."""
        return self._docs_n

    def new_term(self) -> int:
        """A new term id, without postings."""
        self._docs.append(array("i"))
        self._tf.append(array("B"))
        self._norm.append(array("f"))
        self.df.append(0)
        self._size.append(0)
        self._top.append(0.0)
        return len(self._docs) - 1

    def size(self, tid: int) -> int:
        """The term's postings, dead documents' included: what scoring it costs."""
        return self._size[tid]

    def is_dense(self, tid: int) -> bool:
        """Whether the term's postings are a vector over every document number."""
        return tid in self._dense

    def bounds(self) -> list[float]:
        """Per term, the largest tf part of its postings (what it adds to a score at
        most, times its idf)."""
        if self._bounds is None:
            self._bounds = self._top.tolist()
        return self._bounds

    # -- building -------------------------------------------------------------------
    def add(self, doc: int, counts: Mapping[int, int], lengths: array[int]) -> None:
        """Queue document `doc`'s postings (term id -> weighted tf); `lengths` are the
        documents' lengths, for a flush."""
        self._new_docs.extend(array("i", [doc]) * len(counts))
        self._new_tids.extend(counts.keys())
        self._new_tf.extend(counts.values())
        if len(self._new_tids) >= _FLUSH_AT:
            self.flush(lengths, None)

    def flush(self, lengths: array[int], avg_q: float | None) -> None:
        """Sort the queued postings into their terms, with their tf parts at `avg_q`
        (without, `stale`, when the caller renormalises next)."""
        n = len(lengths)
        self._views.clear()
        if n > self._docs_n:
            grow = n - self._docs_n
            for tf_d, norm_d in self._dense.values():
                tf_d.frombytes(bytes(grow))
                norm_d.frombytes(bytes(4 * grow))
            self._docs_n = n
        if not self._new_tids:
            return
        self._bounds = None
        tids = _i32(self._new_tids)
        order = np.argsort(tids, kind="stable")  # per term, documents stay ascending
        tids = tids[order]
        docs = _i32(self._new_docs)[order]
        tf = _i32(self._new_tf)[order]
        lens = np.frombuffer(lengths, dtype=np.int64)[docs]
        cut = (tids[1:] != tids[:-1]).nonzero()[0] + 1
        starts = np.concatenate(([0], cut))
        ends = np.concatenate((cut, [tids.size]))
        for i in (tf >= _TF_ESCAPE).nonzero()[0].tolist():
            self._big_tf[int(tids[i]), int(docs[i])] = int(tf[i])
        tf8 = np.minimum(tf, _TF_ESCAPE).astype(np.uint8)
        if avg_q is None:
            norm = np.zeros(tids.size, dtype=np.float32)
            self.stale = True
        else:
            norm = tf_parts(tf, length_norms(lens, avg_q))
        top = np.maximum.reduceat(norm, starts).tolist()
        docs_b, tf_b, norm_b = (memoryview(a.tobytes()) for a in (docs, tf8, norm))
        for k, (tid, a, b) in enumerate(
            zip(tids[starts].tolist(), starts.tolist(), ends.tolist(), strict=True)
        ):
            dense = self._dense.get(tid)
            if dense is None:
                self._docs[tid].frombytes(docs_b[4 * a : 4 * b])
                self._tf[tid].frombytes(tf_b[a:b])
                self._norm[tid].frombytes(norm_b[4 * a : 4 * b])
            else:
                _u8(dense[0])[docs[a:b]] = tf8[a:b]
                _f32(dense[1])[docs[a:b]] = norm[a:b]
            self.df[tid] += b - a
            self._size[tid] += b - a
            if top[k] > self._top[tid]:
                self._top[tid] = top[k]
            if dense is None and self._size[tid] * _DENSE_AT >= n:
                self._densify(tid)
        del docs_b, tf_b, norm_b
        self._new_docs, self._new_tids, self._new_tf = array("i"), array("i"), array("i")

    def _densify(self, tid: int) -> None:
        tf_d, norm_d = array("B", bytes(self._docs_n)), array("f", bytes(4 * self._docs_n))
        docs = self._docs.values(tid, np.int32)
        _u8(tf_d)[docs] = self._tf.values(tid, np.uint8)
        _f32(norm_d)[docs] = self._norm.values(tid, np.float32)
        del docs
        self._dense[tid] = (tf_d, norm_d)
        self._docs[tid], self._tf[tid], self._norm[tid] = array("i"), array("B"), array("f")

    def _sparsify(self, tid: int) -> None:
        tf_d, norm_d = self._dense.pop(tid)
        docs = _u8(tf_d).nonzero()[0].astype(np.int32)
        self._docs[tid] = array("i", docs.tobytes())
        self._tf[tid] = array("B", _u8(tf_d)[docs].tobytes())
        self._norm[tid] = array("f", _f32(norm_d)[docs].tobytes())

    def renorm(self, lengths: array[int], avg_q: float) -> None:
        """Recompute every tf part at a new quantised average length."""
        self.stale = not avg_q
        self._views.clear()
        self._bounds = None
        if not avg_q:
            return
        lens = np.frombuffer(lengths, dtype=np.int64)
        top = self._top
        for tid in range(len(self._docs)):
            if self._docs.size(tid):
                docs = self._docs.values(tid, np.int32)
                tfs = self._tf.values(tid, np.uint8)
                norm = tf_parts(tfs, length_norms(lens[docs], avg_q))
                self._norm[tid] = array("f", norm.tobytes())
                top[tid] = float(norm.max())
        if self._dense:
            norms = length_norms(lens[: self._docs_n], avg_q)
            for tid, (tf_d, _) in self._dense.items():
                norm = tf_parts(_u8(tf_d), norms)
                self._dense[tid] = (tf_d, array("f", norm.tobytes()))
                top[tid] = float(norm.max())
        for (tid, d), tf in self._big_tf.items():
            value = tf_part(tf, lengths[d], avg_q)
            self._set_norm(tid, d, value)
            top[tid] = max(top[tid], float(np.float32(value)))

    def _set_norm(self, tid: int, doc: int, value: float) -> None:
        dense = self._dense.get(tid)
        if dense is not None:
            dense[1][doc] = value
        else:
            at = int(self._docs.values(tid, np.int32).searchsorted(doc))
            self._norm[tid][at] = value

    def compact(self, live: npt.NDArray[np.bool_], lengths: array[int]) -> None:
        """Renumber the documents to their ranks among the `live` ones and drop the dead
        (`lengths`: the live documents' lengths, renumbered); a term's largest tf part
        becomes that of its live postings."""
        remap = (np.cumsum(live) - 1).astype(np.int32)
        n = len(lengths)
        self._bounds = None
        self._views.clear()
        for tid in range(len(self._docs)):
            dense = self._dense.get(tid)
            if dense is not None:
                norm = _f32(dense[1])[live]
                self._dense[tid] = (
                    array("B", _u8(dense[0])[live].tobytes()),
                    array("f", norm.tobytes()),
                )
                size = int((norm > 0).sum())
            else:
                if not self._docs.size(tid):
                    continue
                docs = self._docs.values(tid, np.int32)
                keep = live[docs]
                norm = self._norm.values(tid, np.float32)[keep]
                tf = self._tf.values(tid, np.uint8)[keep]
                self._docs[tid] = array("i", remap[docs[keep]].tobytes())
                self._tf[tid] = array("B", tf.tobytes())
                self._norm[tid] = array("f", norm.tobytes())
                size = int(norm.size)
            self._size[tid] = size
            self._top[tid] = float(norm.max()) if size else 0.0
            if dense is not None and self._size[tid] * _SPARSE_AT < n:
                self._docs_n = n
                self._sparsify(tid)
        self._docs_n = n
        self._big_tf = {(t, int(remap[d])): tf for (t, d), tf in self._big_tf.items() if live[d]}

    # -- snapshots (engine.relevance.snapshot) --------------------------------------
    def snapshot_parts(self) -> dict[str, tuple[str, list[Any]]]:
        """Everything a restored copy needs: name -> (NumPy type code, buffers back to
        back). The postings must be flushed (an index is settled between syncs)."""
        if self._new_tids:
            raise RuntimeError("postings not flushed")
        docs, offsets = self._docs.flat()
        tf, tf_offsets = self._tf.flat()
        norm, norm_offsets = self._norm.flat()
        if not (np.array_equal(offsets, tf_offsets) and np.array_equal(offsets, norm_offsets)):
            raise RuntimeError("postings columns disagree")
        dense = sorted(self._dense)
        big = sorted(self._big_tf.items())
        return {
            "p.scalars": ("i8", [np.array([self._docs_n, int(self.stale)], dtype=np.int64)]),
            "p.df": ("i8", [self.df]),
            "p.size": ("i8", [self._size]),
            "p.top": ("f8", [self._top]),
            "p.offsets": ("i8", [offsets]),
            "p.docs": ("i4", docs),
            "p.tf": ("u1", tf),
            "p.norm": ("f4", norm),
            "p.dense": ("i4", [np.array(dense, dtype=np.int32)]),
            "p.dense_tf": ("u1", [self._dense[t][0] for t in dense]),
            "p.dense_norm": ("f4", [self._dense[t][1] for t in dense]),
            "p.big_at": ("i8", [np.array([k for k, _ in big], dtype=np.int64).reshape(-1)]),
            "p.big_tf": ("i8", [np.array([v for _, v in big], dtype=np.int64)]),
        }

    @classmethod
    def restored(cls, arrays: Mapping[str, array[Any]]) -> Postings:
        """The postings :meth:`snapshot_parts` stored (the arrays as it named them, which
        it keeps); sparse terms stay in the stored buffers until changed (`TermArrays`).
        Raises ValueError when the arrays do not fit together."""
        p = cls()
        docs_n, stale = (int(v) for v in arrays["p.scalars"])
        offsets = np.frombuffer(arrays["p.offsets"], dtype=np.int64)
        docs = np.frombuffer(arrays["p.docs"], dtype=np.int32)
        tf = np.frombuffer(arrays["p.tf"], dtype=np.uint8)
        norm = np.frombuffer(arrays["p.norm"], dtype=np.float32)
        dense: list[int] = arrays["p.dense"].tolist()
        big_at, big_tf = arrays["p.big_at"].tolist(), arrays["p.big_tf"].tolist()
        terms = int(offsets.size) - 1
        if (
            terms < 0
            or any(len(arrays[k]) != terms for k in ("p.df", "p.size", "p.top"))
            or offsets[0] != 0
            or bool((offsets[1:] < offsets[:-1]).any())
            or not docs.size == tf.size == norm.size == int(offsets[-1])
            or (docs.size and (int(docs.min()) < 0 or int(docs.max()) >= max(docs_n, 1)))
            or len(arrays["p.dense_tf"]) != len(dense) * docs_n
            or len(arrays["p.dense_norm"]) != len(dense) * docs_n
            or any(not 0 <= t < terms for t in dense)
            or len(big_at) != 2 * len(big_tf)
        ):
            raise ValueError("postings arrays do not fit together")
        p._docs = TermArrays.restored("i", docs, offsets)
        p._tf = TermArrays.restored("B", tf, offsets)
        p._norm = TermArrays.restored("f", norm, offsets)
        if dense:
            dense_tf = np.frombuffer(arrays["p.dense_tf"], dtype=np.uint8)
            dense_tf = dense_tf.reshape(len(dense), docs_n)
            dense_norm = np.frombuffer(arrays["p.dense_norm"], dtype=np.uint8)
            dense_norm = dense_norm.reshape(len(dense), 4 * docs_n)
            for k, tid in enumerate(dense):
                tf_d, norm_d = array("B"), array("f")
                tf_d.frombytes(dense_tf[k].data)
                norm_d.frombytes(dense_norm[k].data)
                p._dense[tid] = (tf_d, norm_d)
        p._big_tf = {(big_at[2 * i], big_at[2 * i + 1]): v for i, v in enumerate(big_tf)}
        p.df, p._size, p._top = arrays["p.df"], arrays["p.size"], arrays["p.top"]
        p._docs_n = docs_n
        p.stale = bool(stale)
        return p

    # -- scoring --------------------------------------------------------------------
    def _view(self, tid: int) -> tuple[npt.NDArray[np.int32] | None, npt.NDArray[np.float32]]:
        """The term's documents (None when dense) and tf parts, as arrays (kept until
        the postings change: an array exporting its buffer cannot grow)."""
        view = self._views.get(tid)
        if view is None:
            dense = self._dense.get(tid)
            if dense is not None:
                view = (None, _f32(dense[1]))
            else:
                view = (self._docs.values(tid, np.int32), self._norm.values(tid, np.float32))
            if len(self._views) >= _VIEWS:
                self._views.clear()
            self._views[tid] = view
        return view

    def accumulate(self, terms: Sequence[tuple[int, float]], n: int) -> _Doubles:
        """Per document number below `n`: Σ idf × tf part over `terms` ((term id, idf),
        in the order given), one term after the other."""
        views = [self._view(tid) for tid, _ in terms]
        first = 0
        while first < len(terms) and views[first][0] is not None:
            first += 1
        acc: _Doubles
        if first:
            # the leading sparse terms at once: bincount adds each document's
            # weights in input order
            docs, weights = self._concat(views[:first], terms[:first])
            # with weights, bincount sums in float64 (its stubs only know the int form)
            acc = cast(_Doubles, np.bincount(docs, weights=weights, minlength=n))
        else:
            acc = np.zeros(n, dtype=np.float64)
        for (docs_t, norm), (_, idf) in zip(views[first:], terms[first:], strict=True):
            if docs_t is None:
                acc += norm[:n] * np.float64(idf)
            else:
                acc[docs_t] += norm * np.float64(idf)
        return acc

    def gather(self, terms: Sequence[tuple[int, float]]) -> tuple[npt.NDArray[np.int32], _Doubles]:
        """The documents holding any of `terms` ((term id, idf); sparse ones), ascending,
        and their Σ idf × tf part over those terms, in the order given, one term after
        the other: `accumulate` without a vector over every document (short lists)."""
        docs, weights = self._concat([self._view(tid) for tid, _ in terms], terms)
        if len(terms) == 1:
            return docs, weights
        # a stable sort keeps each document's postings in the order of `terms`
        order = docs.argsort(kind="stable")
        docs, weights = docs[order], weights[order]
        lead = np.empty(docs.size, dtype=bool)
        lead[:1] = True
        np.not_equal(docs[1:], docs[:-1], out=lead[1:])
        starts = lead.nonzero()[0]
        if starts.size == docs.size:
            return docs, weights
        # bincount adds each document's weights in input order
        runs = np.empty_like(starts)
        runs[:-1] = starts[1:] - starts[:-1]
        runs[-1] = docs.size - starts[-1]
        group = np.arange(starts.size).repeat(runs)
        sums = cast(_Doubles, np.bincount(group, weights=weights))
        return docs[starts], sums

    @staticmethod
    def _concat(
        views: Sequence[tuple[npt.NDArray[np.int32] | None, npt.NDArray[np.float32]]],
        terms: Sequence[tuple[int, float]],
    ) -> tuple[npt.NDArray[np.int32], _Doubles]:
        """Sparse terms' documents and idf × tf parts, back to back in order."""
        if len(views) == 1:
            docs, norm = views[0]
            assert docs is not None
            return docs, norm * np.float64(terms[0][1])
        docs = np.concatenate([cast(npt.NDArray[np.int32], v[0]) for v in views])
        weights = np.concatenate(
            [v[1] * np.float64(idf) for v, (_, idf) in zip(views, terms, strict=True)]
        )
        return docs, weights

    def slots(self, n: int) -> npt.NDArray[np.int32]:
        """A scratch vector over document numbers below `n`, all -1 (its user puts it
        back so): one query at a time, like everything of a session."""
        if self._slots.size < n:
            self._slots = np.full(max(n, 2 * self._slots.size), -1, dtype=np.int32)
        return self._slots

    def postings_of(self, tid: int) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.float32]]:
        """The term's documents (ascending) and tf parts."""
        post, norm = self._view(tid)
        if post is None:
            post = (_u8(self._dense[tid][0]) > 0).nonzero()[0].astype(np.int32)
            return post, norm[post]
        return post, norm

    def look_up(self, tid: int, idf: float, docs: npt.NDArray[np.int32]) -> _Doubles:
        """idf × tf part of the term in each of `docs`, 0 where absent."""
        post, norm = self._view(tid)
        if post is None:
            out: _Doubles = norm[docs] * np.float64(idf)
            return out
        # searching all but the last posting keeps every position a valid index
        at = post[:-1].searchsorted(docs)
        w: _Doubles = norm[at] * np.float64(idf)
        w *= post[at] == docs
        return w
