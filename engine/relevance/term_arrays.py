"""One growable array per term, restorable from a snapshot without one object per term.

The postings keep each sparse term's documents and tf bytes in an `array` of its own,
so adding a document appends to the few terms it holds. A restored index has tens of
thousands to millions of terms (real chat text: mostly terms of one folder), and
making two `array` objects for each on load would cost more than everything else the
load does (`engine.relevance.snapshot`). So a restored column keeps every term's values
in one flat buffer cut by offsets, gives a reader a view of its term's slice, and makes
a term's own `array` only when something changes it (a posting added, a compaction).
The flat buffer is dropped once every term has its own array.

Reads never make an array, so a snapshot can be taken (under the index's lock) while a
query reads the same column from another thread.
"""

from __future__ import annotations

from array import array
from typing import Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["TermArrays"]

_T = TypeVar("_T", int, float)


class TermArrays(Generic[_T]):
    """A list of `array`s of one type code, some of them still slices of a flat buffer."""

    __slots__ = ("_flat", "_items", "_missing", "_offsets", "_typecode")

    def __init__(self, typecode: str) -> None:
        self._typecode = typecode
        self._items: list[array[_T] | None] = []
        self._flat: npt.NDArray[Any] | None = None
        self._offsets: npt.NDArray[np.int64] | None = None
        self._missing = 0  # items still in the flat buffer

    @classmethod
    def restored(
        cls, typecode: str, flat: npt.NDArray[Any], offsets: npt.NDArray[np.int64]
    ) -> TermArrays[_T]:
        """Items `i` = `flat[offsets[i]:offsets[i + 1]]`, none made yet."""
        column: TermArrays[_T] = cls(typecode)
        column._items = [None] * (int(offsets.size) - 1)
        missing = int(np.count_nonzero(offsets[1:] != offsets[:-1]))
        if missing:
            column._flat, column._offsets, column._missing = flat, offsets, missing
        return column

    def __len__(self) -> int:
        return len(self._items)

    def append(self, item: array[_T]) -> None:
        self._items.append(item)

    def __getitem__(self, i: int) -> array[_T]:
        """Item `i`, as an array of its own (made from the flat buffer on first use):
        for a caller that changes it."""
        item = self._items[i]
        if item is None:
            item = array(self._typecode)
            part = self._slice(i)
            if part is not None:
                item.frombytes(part.view(np.uint8).data)
                self._made_one()
            self._items[i] = item
        return item

    def __setitem__(self, i: int, item: array[_T]) -> None:
        if self._items[i] is None and self._slice(i) is not None:
            self._made_one()
        self._items[i] = item

    def values(self, i: int, dtype: type[np.generic]) -> npt.NDArray[Any]:
        """Item `i` as a NumPy view, without making its array (a reader's access)."""
        item = self._items[i]
        if item is None:
            part = self._slice(i)
            return np.zeros(0, dtype=dtype) if part is None else part
        return np.frombuffer(item, dtype=dtype)

    def raw(self, i: int) -> array[_T] | npt.NDArray[Any] | bytes:
        """Item `i`'s values as a buffer (its array, its slice of the flat buffer, or no
        bytes), without making its array: a compiled reader's access."""
        item = self._items[i]
        if item is None:
            part = self._slice(i)
            return b"" if part is None else part
        return item

    def size(self, i: int) -> int:
        item = self._items[i]
        if item is None:
            part = self._slice(i)
            return 0 if part is None else int(part.size)
        return len(item)

    def flat(self) -> tuple[list[Any], npt.NDArray[np.int64]]:
        """Every item back to back, as buffers to join (runs still in the flat buffer as
        one slice each), and the offsets of each item: what a snapshot stores."""
        n = len(self._items)
        sizes = np.zeros(n, dtype=np.int64)
        parts: list[Any] = []
        run = 0  # first item of the current run of items not made
        for i, item in enumerate(self._items):
            if item is None:
                continue
            if run < i:
                parts.extend(self._run(run, i, sizes))
            parts.append(item)
            sizes[i] = len(item)
            run = i + 1
        if run < n:
            parts.extend(self._run(run, n, sizes))
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return parts, offsets

    def _run(self, a: int, b: int, sizes: npt.NDArray[np.int64]) -> list[npt.NDArray[Any]]:
        """Items a..b-1, none made: their slice of the flat buffer (nothing once it is
        gone: they are empty)."""
        if self._flat is None or self._offsets is None:
            return []
        off = self._offsets
        sizes[a:b] = off[a + 1 : b + 1] - off[a:b]
        return [self._flat[off[a] : off[b]]]

    def _slice(self, i: int) -> npt.NDArray[Any] | None:
        """Item `i`'s values in the flat buffer; None when it has none there (an empty
        item, or the buffer is gone)."""
        flat, off = self._flat, self._offsets
        if flat is None or off is None or i >= off.size - 1 or off[i] == off[i + 1]:
            return None
        return flat[off[i] : off[i + 1]]

    def _made_one(self) -> None:
        self._missing -= 1
        if not self._missing:
            self._flat = self._offsets = None
