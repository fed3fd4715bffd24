"""Max-score pruning (Turtle & Flood) for `RelevanceIndex.rank`: the best folders for
a question without scoring every folder its common words occur in.

A question's terms are taken rarest first, the order every score sums them in. The
rare terms' short posting lists are scored in full. A folder none of them holds can
score at most what the remaining terms can add, each its largest contribution (idf ×
the largest tf part of its postings, `Postings.bounds`), times the largest α factor.
Once that is below the score the k-th best folder is known to reach (or the floor
share of the best), no such folder can be among the results. What the best reach is
known from below: the partial scores so far, and when they fall short, the exact
scores of the 2k folders with the best partial scores. While the bound is not below
it, one more term is scored in full; the folders it brings join only if they could
still reach the mark. Then the remaining terms are looked up for the folders in the
race, pruned again (partial score plus the rest's bounds) before each binary search.

The folders that survive carry their exact scores: the same terms added in the same
order as a full evaluation, a term a folder lacks adding 0. So the result is the
exhaustive one, bit for bit, not an approximation (a property test holds it to
`rank(..., exhaustive=True)`); the bounds carry a relative slack far above float
rounding, so rounding can only keep a folder in the race, never drop one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from engine.relevance.postings import Postings

__all__ = ["Term", "contenders"]

Term = tuple[int, float]  # term id, idf
_Doubles = npt.NDArray[np.float64]

_TINY = float(np.finfo(np.float64).tiny)
_SUM_SLACK = 1 + 1e-9  # a bound on a sum against float64 rounding
_FIRST_POSTINGS = 2048  # the rare terms' postings first scored in full, at least ...
_FIRST_SHARE = 8  # ... or 1/8 of the documents
_DENSE_SHARE = 16  # postings over 1/16 of the documents: sum them over every document
# (one bincount over a vector of every document beats sorting the postings by document
# from there: measured at 10^4 and 10^5 folders, the same sums in the same order)
_PRUNE_AT = 256  # contenders worth pruning before a binary-search look-up ...
_PRUNE_DENSE_AT = 4096  # ... and before a dense one


def _threshold(low: _Doubles, floor: float, k: int) -> float:
    """What the k-th best score, and floor × the best, reach at least."""
    if not low.size:
        return _TINY
    theta = max(float(low.max()) * floor, _TINY)
    if low.size >= k:
        theta = max(theta, float(np.partition(low, low.size - k)[low.size - k]))
    return theta


def _exact_threshold(
    postings: Postings,
    rest: list[Term],
    docs: npt.NDArray[np.int32],
    part: _Doubles,
    f: _Doubles | None,
    low: _Doubles,
    floor: float,
    k: int,
) -> float:
    """What the k-th best score, and floor × the best, reach at least: the exact
    scores of the 2k documents with the best lower bounds (the `rest` of the terms
    looked up for them), a far higher mark than the lower bounds alone."""
    pick = np.argpartition(low, low.size - min(2 * k, low.size))[low.size - min(2 * k, low.size) :]
    few, score = docs[pick], part[pick]
    for tid, idf in rest:
        score = score + postings.look_up(tid, idf, few)
    return _threshold(score if f is None else score * f[pick], floor, k)


def _extend(
    postings: Postings,
    term: Term,
    docs: npt.NDArray[np.int32],
    part: _Doubles,
    slots: npt.NDArray[np.int32],
    after: float,
    factor: _Doubles | None,
    top_factor: float,
    theta: float,
) -> tuple[npt.NDArray[np.int32], _Doubles, npt.NDArray[np.int32]]:
    """`docs` and their partial scores with `term` scored in full: its contribution
    added to the documents held (`slots`: document -> position in `docs`, -1 unseen,
    -2 out of the race), the documents it brings appended if they could still reach
    `theta` with what the terms `after` it add at most, and the others (out of the
    race from now on: a document they hold a later term of cannot reach it either)."""
    tid, idf = term
    post, norm = postings.postings_of(tid)
    w = norm * np.float64(idf)
    at = slots[post]
    held = at >= 0
    part[at[held]] += w[held]
    fresh = (at == -1).nonzero()[0]
    high = w[fresh] + after
    high *= top_factor if factor is None else factor[post[fresh]]
    race = high * _SUM_SLACK >= theta
    out = post[fresh[~race]]
    slots[out] = -2
    fresh = fresh[race]
    new = post[fresh]
    slots[new] = np.arange(docs.size, docs.size + new.size, dtype=np.int32)
    return np.concatenate((docs, new)), np.concatenate((part, w[fresh])), out


def contenders(
    postings: Postings,
    query: list[Term],
    n: int,
    factor: _Doubles | None,
    top_factor: float,
    floor: float,
    k: int,
) -> tuple[npt.NDArray[Any], _Doubles]:
    """Document numbers and their exact scores, among them the best
    document and every document scoring at least `floor` × the best among the best
    `k` (ties included); `query` in canonical order, `factor` each document's α factor
    (None: 1), `top_factor` its maximum."""
    m = len(query)
    size = postings.size
    budget = max(_FIRST_POSTINGS, n // _FIRST_SHARE)
    j, held = 1, size(query[0][0])
    while j < m and held + size(query[j][0]) <= budget:
        held += size(query[j][0])
        j += 1
    if held * _DENSE_SHARE > n or any(postings.is_dense(tid) for tid, _ in query[:j]):
        acc = postings.accumulate(query[:j], n)
        docs = (acc > 0).nonzero()[0].astype(np.int32)
        part = acc[docs]
    else:
        docs, part = postings.gather(query[:j])
    f = None if factor is None else factor[docs]
    if j == m:
        return docs, part if f is None else part * f
    bounds = postings.bounds()
    rest = [0.0] * (m + 1)  # what terms i.. may add at most
    for i in range(m - 1, j - 1, -1):
        tid, idf = query[i]
        rest[i] = rest[i + 1] + idf * bounds[tid]
    low = part if f is None else part * f
    theta = _threshold(low, floor, k)
    if top_factor * rest[j] * _SUM_SLACK >= theta and low.size > k:
        theta = max(theta, _exact_threshold(postings, query[j:], docs, part, f, low, floor, k))
    if top_factor * rest[j] * _SUM_SLACK >= theta:
        # more terms scored in full, one at a time, until the rest cannot lift an
        # outsider (the threshold known so far is checked before it is refined)
        slots = postings.slots(n)
        slots[docs] = np.arange(docs.size, dtype=np.int32)
        dropped: list[npt.NDArray[np.int32]] = []
        try:
            while True:
                docs, part, out = _extend(
                    postings, query[j], docs, part, slots, rest[j + 1], factor, top_factor, theta
                )
                dropped.append(out)
                j += 1
                if j == m or top_factor * rest[j] * _SUM_SLACK < theta:
                    break
                f = None if factor is None else factor[docs]
                theta = max(theta, _threshold(part if f is None else part * f, floor, k))
                if top_factor * rest[j] * _SUM_SLACK < theta:
                    break
        except BaseException:
            slots.fill(-1)  # whatever this query marked
            raise
        slots[docs] = -1
        for out in dropped:
            slots[out] = -1
        f = None if factor is None else factor[docs]
        if j == m:
            return docs, part if f is None else part * f
    for i in range(j, m):
        tid, idf = query[i]
        dense = postings.is_dense(tid)
        if docs.size > (_PRUNE_DENSE_AT if dense else _PRUNE_AT):
            if i > j:  # the lower bounds have grown
                low = part if f is None else part * f
                theta = max(theta, _threshold(low, floor, k))
            high = part + rest[i]
            if f is not None:
                high *= f
            keep = (high * _SUM_SLACK >= theta).nonzero()[0]
            docs, part = docs[keep], part[keep]
            f = None if f is None else f[keep]
            if not docs.size:
                break
        part += postings.look_up(tid, idf, docs)
    return docs, part if f is None else part * f
