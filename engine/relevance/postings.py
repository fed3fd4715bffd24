"""The folder index's postings: per term, the documents holding it and its weighted tf
in each (`engine.relevance.index.RelevanceIndex`).

A term's postings are sparse (document numbers ascending, append-only: 5 bytes a
posting) or, for a term in at least a quarter of the documents, dense (one tf byte per
document number, 0 where it is absent): a query looks a common term up for many
documents, which a dense vector answers with one gather where a posting list needs a
binary search per document. A term turns dense when a flush leaves it in a quarter of
the documents and sparse again when a compaction leaves it in less than an eighth.

The weighted tf is kept in a byte; the rare larger one is kept exactly beside it (the
byte says `_TF_ESCAPE`). The BM25 tf part `tf (k1 + 1) / (tf + k1 (1 − b + b dl /
avgdl))`, rounded to float32, is not stored per posting (4 bytes a posting, half the
postings' memory): it is a function of the tf and of the document's length at the
quantised average, so the postings keep, per document, the tf parts of the tfs below
`_TABLED` (`_table`, 32 bytes a document; nine postings in ten have a tf of 1 to 3) and
compute the rest when a query reads them, with the same operations in the same order,
so the float32 values are the ones a stored copy would hold. A query reads the tf parts
of a term's postings through a cache (`_CACHE_MIN`, `_CACHE_SHARE`: at most half of what
storing them would take; common terms come back in question after question), or only at
the documents it asks about when it looks a term up for the first time.

Every sum over a query's terms adds them in the query's order, one term after the other,
so a score never depends on which representation a term had, on document numbers, or
on the history.

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

from engine.relevance import kernels
from engine.relevance.passages import length_norms, tf_parts
from engine.relevance.term_arrays import TermArrays

__all__ = ["Postings"]

_TF_ESCAPE = 255  # a tf byte of 255: the tf is in `_big_tf`
_TABLED = 8  # tf parts of tf 0..7 kept per document
_DENSE_AT = 4  # a term in 1/4 of the documents turns dense ...
_SPARSE_AT = 8  # ... and sparse again under 1/8
_FLUSH_AT = 1 << 20  # waiting postings that make `add` flush
_PLAIN_AT = 24  # postings up to which tf parts are looked up without NumPy
_CACHE_MIN = 4 << 20  # bytes of tf parts kept for the terms queries read, at least ...
_CACHE_SHARE = 2  # ... or half of what every posting's would take
_Doubles = npt.NDArray[np.float64]
_Parts = npt.NDArray[np.float32]
_Docs = npt.NDArray[np.int32]


def _u8(buf: array[int]) -> npt.NDArray[np.uint8]:
    return np.frombuffer(buf, dtype=np.uint8)


class Postings:
    """Postings of term ids 0.. over document numbers 0..; the caller keeps lengths."""

    def __init__(self) -> None:
        # sparse terms: documents ascending, tf bytes
        self._docs: TermArrays[int] = TermArrays("i")
        self._tf: TermArrays[int] = TermArrays("B")
        # dense terms: term id -> tf bytes, one per document number
        self._dense: dict[int, array[int]] = {}
        self._big_tf: dict[tuple[int, int], int] = {}  # (term id, doc) -> tf >= 255
        self.df = array("q")  # live documents holding the term (the caller corrects it)
        self._size = array("q")  # postings, dead documents' included
        self._top = array("d")  # the largest tf part of the postings, dead ones included
        self._docs_n = 0  # document numbers the dense vectors cover
        self._new_docs = array("i")
        self._new_tids = array("i")
        self._new_tf = array("i")
        self.stale = False  # postings flushed without their tf parts' table
        self._bounds: list[float] | None = None
        # per document, the tf parts of tf 0.._TABLED-1 at `_avg_q` and its lengths
        self._table = array("f")
        self._avg_q = 0.0
        self._lengths = array("q")  # the caller's lengths, as of the last change
        self._cache: dict[int, tuple[_Docs | None, _Parts]] = {}
        self._cached = 0  # bytes in `_cache`
        self._budget = _CACHE_MIN
        self._missed: dict[int, int] = {}  # terms looked up without being cached
        self._table_view: _Parts | None = None
        self._slots: _Docs = np.full(0, -1, dtype=np.int32)
        # the compiled scoring's scratch (`score_top`): zeros, documents, scores
        self._scratch: tuple[_Doubles, _Docs, _Doubles] | None = None

    @property
    def docs_n(self) -> int:
        """Document numbers the postings cover (the index's, once flushed)."""
        return self._docs_n

    def new_term(self) -> int:
        """A new term id, without postings."""
        self._docs.append(array("i"))
        self._tf.append(array("B"))
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

    def _changed(self) -> None:
        """Forget what queries derived (views of arrays that are about to change)."""
        self._cache.clear()
        self._cached = 0
        self._missed.clear()
        self._table_view = None
        self._bounds = None

    def _rebudget(self) -> None:
        """The cache's budget for the postings as they are now."""
        total = int(np.frombuffer(self._size, dtype=np.int64).sum()) if len(self._size) else 0
        dense = sum(self._size[t] for t in self._dense)
        parts = total - dense + len(self._dense) * self._docs_n
        self._budget = max(_CACHE_MIN, 4 * parts // _CACHE_SHARE)

    # -- tf parts -------------------------------------------------------------------
    def _table_rows(self, a: int, b: int) -> bytes:
        """The table rows of documents a..b-1 at `_avg_q`: tf parts of tf 0.._TABLED-1."""
        lens = np.frombuffer(self._lengths, dtype=np.int64)[a:b]
        tf = np.arange(_TABLED, dtype=np.int64)[None, :]
        return tf_parts(tf, length_norms(lens, self._avg_q)[:, None]).tobytes()

    def _parts(self, tid: int, docs: _Docs, tf: npt.NDArray[np.uint8]) -> _Parts:
        """The term's tf parts in `docs`, where it has the tf bytes `tf`."""
        if self.stale:
            return np.zeros(docs.size, dtype=np.float32)
        if docs.size <= _PLAIN_AT:
            # a short list: plain indexing beats NumPy's cost per call (the same floats)
            row, tfs, flat = _TABLED, tf.tolist(), self._table
            if max(tfs, default=0) < row:
                return np.array(
                    [flat[d * row + t] for d, t in zip(docs.tolist(), tfs, strict=True)],
                    dtype=np.float32,
                )
        table = self._table_view
        if table is None:
            table = self._table_view = np.frombuffer(self._table, dtype=np.float32)
        at = np.multiply(docs, _TABLED, dtype=np.intp)
        big = tf >= _TABLED
        escaped = bool(big.any())
        at += np.minimum(tf, _TABLED - 1) if escaped else tf
        out = table[at]
        if escaped:
            pick = big.nonzero()[0]
            few = docs[pick]
            tfs = tf[pick].astype(np.int64)
            if self._big_tf:
                for i in (tfs == _TF_ESCAPE).nonzero()[0].tolist():
                    tfs[i] = self._big_tf.get((tid, int(few[i])), _TF_ESCAPE)
            lens = np.frombuffer(self._lengths, dtype=np.int64)[few]
            out[pick] = tf_parts(tfs, length_norms(lens, self._avg_q))
        return out

    def _full(self, tid: int) -> tuple[_Docs | None, _Parts]:
        """The term's documents (None when dense) and tf parts, computed."""
        dense = self._dense.get(tid)
        if dense is not None:
            tf = _u8(dense)
            return None, self._parts(tid, np.arange(tf.size, dtype=np.int32), tf)
        docs = self._docs.values(tid, np.int32)
        return docs, self._parts(tid, docs, self._tf.values(tid, np.uint8))

    def _view(self, tid: int) -> tuple[_Docs | None, _Parts]:
        """:meth:`_full`, kept in the cache until the postings change (the cache holds
        views of the postings' arrays, which cannot grow while they are exported)."""
        cache = self._cache
        view = cache.pop(tid, None)
        if view is None:
            view = self._full(tid)
            self._keep(tid, view)
        else:
            cache[tid] = view  # the most recent last
        return view

    def _keep(self, tid: int, view: tuple[_Docs | None, _Parts]) -> None:
        """Cache a term's tf parts, the least recently read out when over budget
        (a quarter of what storing every posting's would take, 2 MB at least)."""
        size = view[1].nbytes
        budget = self._budget
        if size > budget:
            return
        cache = self._cache
        while cache and self._cached + size > budget:
            self._cached -= cache.pop(next(iter(cache)))[1].nbytes
        cache[tid] = view
        self._cached += size

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
        self._changed()
        self._lengths = lengths
        if n > self._docs_n:
            grow = n - self._docs_n
            for tf_d in self._dense.values():
                tf_d.frombytes(bytes(grow))
            self._docs_n = n
        if avg_q is None:
            self.stale = True
        elif avg_q and not self.stale and len(self._table) < _TABLED * n:
            self._table.frombytes(self._table_rows(len(self._table) // _TABLED, n))
        if not self._new_tids:
            self._rebudget()
            return
        tids = np.frombuffer(self._new_tids, dtype=np.int32)
        order = np.argsort(tids, kind="stable")  # per term, documents stay ascending
        tids = tids[order]
        docs = np.frombuffer(self._new_docs, dtype=np.int32)[order]
        tf = np.frombuffer(self._new_tf, dtype=np.int32)[order]
        lens = np.frombuffer(lengths, dtype=np.int64)[docs]
        cut = (tids[1:] != tids[:-1]).nonzero()[0] + 1
        starts = np.concatenate(([0], cut))
        ends = np.concatenate((cut, [tids.size]))
        for i in (tf >= _TF_ESCAPE).nonzero()[0].tolist():
            self._big_tf[int(tids[i]), int(docs[i])] = int(tf[i])
        tf8 = np.minimum(tf, _TF_ESCAPE).astype(np.uint8)
        if avg_q is None:
            norm = np.zeros(tids.size, dtype=np.float32)
        else:
            norm = tf_parts(tf, length_norms(lens, avg_q))
        top = np.maximum.reduceat(norm, starts).tolist()
        docs_b, tf_b = memoryview(docs.tobytes()), memoryview(tf8.tobytes())
        for k, (tid, a, b) in enumerate(
            zip(tids[starts].tolist(), starts.tolist(), ends.tolist(), strict=True)
        ):
            dense = self._dense.get(tid)
            if dense is None:
                self._docs[tid].frombytes(docs_b[4 * a : 4 * b])
                self._tf[tid].frombytes(tf_b[a:b])
            else:
                _u8(dense)[docs[a:b]] = tf8[a:b]
            self.df[tid] += b - a
            self._size[tid] += b - a
            if top[k] > self._top[tid]:
                self._top[tid] = top[k]
            if dense is None and self._size[tid] * _DENSE_AT >= n:
                self._densify(tid)
        del docs_b, tf_b
        self._new_docs, self._new_tids, self._new_tf = array("i"), array("i"), array("i")
        self._rebudget()

    def _densify(self, tid: int) -> None:
        tf_d = array("B", bytes(self._docs_n))
        _u8(tf_d)[self._docs.values(tid, np.int32)] = self._tf.values(tid, np.uint8)
        self._dense[tid] = tf_d
        self._docs[tid], self._tf[tid] = array("i"), array("B")

    def _sparsify(self, tid: int) -> None:
        tf_d = self._dense.pop(tid)
        docs = _u8(tf_d).nonzero()[0].astype(np.int32)
        self._docs[tid] = array("i", docs.tobytes())
        self._tf[tid] = array("B", _u8(tf_d)[docs].tobytes())

    def renorm(self, lengths: array[int], avg_q: float) -> None:
        """Recompute every tf part at a new quantised average length (the table, and
        each term's largest)."""
        self._changed()
        self._lengths = lengths
        self.stale = not avg_q
        self._avg_q = avg_q
        self._table = array("f")
        self._rebudget()
        if not avg_q:
            return
        self._table.frombytes(self._table_rows(0, len(lengths)))
        top = self._top
        for tid in range(len(self._docs)):
            dense = self._dense.get(tid)
            if dense is not None or self._docs.size(tid):
                top[tid] = float(self._full(tid)[1].max())

    def compact(self, live: npt.NDArray[np.bool_], lengths: array[int]) -> None:
        """Renumber the documents to their ranks among the `live` ones and drop the dead
        (`lengths`: the live documents' lengths, renumbered); a term's largest tf part
        becomes that of its live postings."""
        remap = (np.cumsum(live) - 1).astype(np.int32)
        n = len(lengths)
        self._changed()
        for tid in range(len(self._docs)):
            dense = self._dense.get(tid)
            if dense is not None:
                parts = self._full(tid)[1][live]
                self._dense[tid] = array("B", _u8(dense)[live].tobytes())
                size = int((parts > 0).sum())
            else:
                if not self._docs.size(tid):
                    continue
                docs = self._docs.values(tid, np.int32)
                keep = live[docs]
                parts = self._full(tid)[1][keep]
                tf = self._tf.values(tid, np.uint8)[keep]
                self._docs[tid] = array("i", remap[docs[keep]].tobytes())
                self._tf[tid] = array("B", tf.tobytes())
                size = int(parts.size)
            self._size[tid] = size
            self._top[tid] = float(parts.max()) if size else 0.0
            if dense is not None and self._size[tid] * _SPARSE_AT < n:
                self._docs_n = n
                self._sparsify(tid)
        self._docs_n = n
        self._lengths = lengths
        if not self.stale:
            table = np.frombuffer(self._table, dtype=np.float32).reshape(-1, _TABLED)
            self._table = array("f", table[live].tobytes())
            del table
        self._table_view = None
        self._rebudget()
        self._big_tf = {(t, int(remap[d])): tf for (t, d), tf in self._big_tf.items() if live[d]}

    # -- snapshots (engine.relevance.snapshot) --------------------------------------
    def snapshot_parts(self) -> dict[str, tuple[str, list[Any]]]:
        """Everything a restored copy needs: name -> (NumPy type code, buffers back to
        back). The postings must be flushed (an index is settled between syncs)."""
        if self._new_tids:
            raise RuntimeError("postings not flushed")
        docs, offsets = self._docs.flat()
        tf, tf_offsets = self._tf.flat()
        if not np.array_equal(offsets, tf_offsets):
            raise RuntimeError("postings columns disagree")
        dense = sorted(self._dense)
        big = sorted(self._big_tf.items())
        return {
            "p.scalars": ("i8", [np.array([self._docs_n, int(self.stale)], dtype=np.int64)]),
            "p.avg": ("f8", [np.array([self._avg_q], dtype=np.float64)]),
            "p.df": ("i8", [self.df]),
            "p.size": ("i8", [self._size]),
            "p.top": ("f8", [self._top]),
            "p.offsets": ("i8", [offsets]),
            "p.docs": ("i4", docs),
            "p.tf": ("u1", tf),
            "p.dense": ("i4", [np.array(dense, dtype=np.int32)]),
            "p.dense_tf": ("u1", [self._dense[t] for t in dense]),
            "p.big_at": ("i8", [np.array([k for k, _ in big], dtype=np.int64).reshape(-1)]),
            "p.big_tf": ("i8", [np.array([v for _, v in big], dtype=np.int64)]),
            "p.table": ("f4", [self._table]),
        }

    @classmethod
    def restored(cls, arrays: Mapping[str, array[Any]], lengths: array[int]) -> Postings:
        """The postings :meth:`snapshot_parts` stored (the arrays as it named them, which
        it keeps) over documents of `lengths` (the index's, which it keeps too); sparse
        terms stay in the stored buffers until changed (`TermArrays`). Raises ValueError
        when the arrays do not fit together."""
        p = cls()
        docs_n, stale = (int(v) for v in arrays["p.scalars"])
        (avg_q,) = (float(v) for v in arrays["p.avg"])
        offsets = np.frombuffer(arrays["p.offsets"], dtype=np.int64)
        docs = np.frombuffer(arrays["p.docs"], dtype=np.int32)
        unsigned = docs.view(np.uint32)  # a negative number reads as a large one
        tf = np.frombuffer(arrays["p.tf"], dtype=np.uint8)
        dense: list[int] = arrays["p.dense"].tolist()
        big_at, big_tf = arrays["p.big_at"].tolist(), arrays["p.big_tf"].tolist()
        terms = int(offsets.size) - 1
        if (
            terms < 0
            or any(len(arrays[k]) != terms for k in ("p.df", "p.size", "p.top"))
            or offsets[0] != 0
            or bool((offsets[1:] < offsets[:-1]).any())
            or not docs.size == tf.size == int(offsets[-1])
            or (docs.size and int(unsigned.max()) >= max(docs_n, 1))
            or len(arrays["p.dense_tf"]) != len(dense) * docs_n
            or any(not 0 <= t < terms for t in dense)
            or len(set(dense)) != len(dense)
            or len(big_at) != 2 * len(big_tf)
            or docs_n != len(lengths)
            or not avg_q >= 0.0
            or (docs_n and not stale and not avg_q)
            or arrays["p.table"].typecode != "f"
            or len(arrays["p.table"]) != (_TABLED * docs_n if avg_q and not stale else 0)
        ):
            raise ValueError("postings arrays do not fit together")
        del unsigned
        p._docs = TermArrays.restored("i", docs, offsets)
        p._tf = TermArrays.restored("B", tf, offsets)
        if dense:
            dense_tf = np.frombuffer(arrays["p.dense_tf"], dtype=np.uint8)
            dense_tf = dense_tf.reshape(len(dense), docs_n)
            for k, tid in enumerate(dense):
                tf_d = array("B")
                tf_d.frombytes(dense_tf[k].data)
                p._dense[tid] = tf_d
        p._big_tf = {(big_at[2 * i], big_at[2 * i + 1]): v for i, v in enumerate(big_tf)}
        p.df, p._size, p._top = arrays["p.df"], arrays["p.size"], arrays["p.top"]
        p._docs_n = docs_n
        p.stale = bool(stale)
        p._avg_q = avg_q
        p._lengths = lengths
        p._table = arrays["p.table"]
        p._rebudget()
        return p

    # -- scoring --------------------------------------------------------------------
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

    def gather(self, terms: Sequence[tuple[int, float]]) -> tuple[_Docs, _Doubles]:
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
        views: Sequence[tuple[_Docs | None, _Parts]],
        terms: Sequence[tuple[int, float]],
    ) -> tuple[_Docs, _Doubles]:
        """Sparse terms' documents and idf × tf parts, back to back in order."""
        if len(views) == 1:
            docs, norm = views[0]
            assert docs is not None
            return docs, norm * np.float64(terms[0][1])
        docs = np.concatenate([cast(_Docs, v[0]) for v in views])
        weights = np.concatenate(
            [v[1] * np.float64(idf) for v, (_, idf) in zip(views, terms, strict=True)]
        )
        return docs, weights

    def score_top(
        self,
        terms: Sequence[tuple[int, float]],
        n: int,
        factor: _Doubles | None,
        top_factor: float,
        floor: float,
        pool: int,
        tiny: float,
        finish: tuple[Any, ...],
    ) -> tuple[tuple[str, ...], tuple[float, ...]] | None:
        """With the compiled loops (`engine.relevance.kernels`), `RelevanceIndex.rank`:
        the documents below `n` scoring at least max(best × `floor`, `tiny`) over
        `terms` ((term id, idf), in the order given; a score as :meth:`accumulate` makes
        it, times the document's `factor`, whose maximum is `top_factor`), only the best
        `pool` of them (ties included) when there are more, then what `finish` says
        (the passage rerank, the cuts, the order: `_kernels.c`'s `finish_rank`): (ids,
        scores). None when the loops are off, the tf parts are not made yet, or a tf is
        escaped: the caller's NumPy path serves."""
        compiled = kernels.active()
        if (
            compiled is None
            or self.stale
            or n > self._docs_n
            or len(self._table) < _TABLED * self._docs_n
        ):
            return None
        scratch = self._scratch
        if scratch is None or scratch[0].size < n:
            size = max(n, 1024)
            scratch = self._scratch = (
                np.zeros(size, dtype=np.float64),
                np.zeros(size, dtype=np.int32),
                np.zeros(size, dtype=np.float64),
            )
        dense, docs, tfs, top = self._dense, self._docs, self._tf, self._top
        spec = [
            (None, held, idf, top[tid])
            if (held := dense.get(tid)) is not None
            else (docs.raw(tid), tfs.raw(tid), idf, top[tid])
            for tid, idf in terms
        ]
        return compiled.score_top(
            spec,
            n,
            self._table,
            self._lengths,
            self._avg_q,
            not self._big_tf,
            factor,
            top_factor,
            floor,
            pool,
            tiny,
            *scratch,
            finish,
        )

    def slots(self, n: int) -> _Docs:
        """A scratch vector over document numbers below `n`, all -1 (its user puts it
        back so): one query at a time, like everything of a session."""
        if self._slots.size < n:
            self._slots = np.full(max(n, 2 * self._slots.size), -1, dtype=np.int32)
        return self._slots

    def postings_of(self, tid: int) -> tuple[_Docs, _Parts]:
        """The term's documents (ascending) and tf parts."""
        dense = self._dense.get(tid)
        if dense is None:
            post, norm = self._view(tid)
            assert post is not None
            return post, norm
        tf = _u8(dense)
        post = (tf > 0).nonzero()[0].astype(np.int32)
        view = self._cache.get(tid)
        if view is not None:
            return post, view[1][post]
        return post, self._parts(tid, post, tf[post])

    def look_up(self, tid: int, idf: float, docs: _Docs) -> _Doubles:
        """idf × tf part of the term in each of `docs`, 0 where absent."""
        out: _Doubles
        view = self._cache.get(tid)
        if view is None:
            # a term looked up once is computed for the documents asked about, one
            # looked up again is cached whole
            missed = self._missed.get(tid, 0)
            if missed:
                view = self._view(tid)
            else:
                self._missed[tid] = 1
        else:
            view = self._view(tid)  # marks it recently used
        dense = self._dense.get(tid)
        if dense is not None:
            if view is not None:
                out = view[1][docs] * np.float64(idf)
            else:
                out = self._parts(tid, docs, _u8(dense)[docs]) * np.float64(idf)
            return out
        post = self._docs.values(tid, np.int32) if view is None else view[0]
        assert post is not None
        # searching all but the last posting keeps every position a valid index
        at = post[:-1].searchsorted(docs)
        if view is not None:
            out = view[1][at] * np.float64(idf)
        else:
            found = post[at]
            out = self._parts(tid, found, self._tf.values(tid, np.uint8)[at]) * np.float64(idf)
        out *= post[at] == docs
        return out
