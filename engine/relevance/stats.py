"""Document frequencies of search terms in a session: what makes a term distinctive.

The relevance index (`engine.relevance.index.RelevanceIndex`) is one source; a batch of
texts scored together is another (:class:`BatchStats`); :class:`CombinedStats` adds
them, so a heuristic keyword is judged against the session's other folders even before
the index has seen the batch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Protocol

__all__ = ["BatchStats", "CombinedStats", "TermStats"]


class TermStats(Protocol):
    """How many documents there are, and how many hold a search term."""

    @property
    def docs(self) -> int: ...

    def df(self, term: str) -> int: ...


class BatchStats:
    """Document frequencies over a batch of term lists (one list per document)."""

    def __init__(self, documents: Iterable[Iterable[str]]) -> None:
        self._df: Counter[str] = Counter()
        n = 0
        for terms in documents:
            n += 1
            self._df.update(set(terms))
        self._docs = n

    @property
    def docs(self) -> int:
        return self._docs

    def df(self, term: str) -> int:
        return self._df.get(term, 0)


class CombinedStats:
    """The sum of several disjoint sources (the index, and a batch it has not seen)."""

    def __init__(self, *sources: TermStats) -> None:
        self._sources = sources

    @property
    def docs(self) -> int:
        return sum(s.docs for s in self._sources)

    def df(self, term: str) -> int:
        return sum(s.df(term) for s in self._sources)
