"""Counters and ordered folder lists over one session's index, kept as the index changes.

Why: every answer that carries sections asks whether anything waits to be scored, lists
the first pending folders and re-reviews, and counts event labels; ``memory_judge`` and
the archive telemetry count too. A scan of the index for each of those is O(N) per
request, on 10⁵ folders most of a warm recall. :class:`~engine.store.session_store.
SessionStore` calls :meth:`IndexStats.put` / :meth:`IndexStats.drop` wherever an entry
changes and builds a fresh one at load, so readers get counts in O(1) and the first
``k`` folders of a list in O(k).

The pending lists follow the era rules of :mod:`engine.scoring.eras` (the one
implementation): a pending folder is listed when its era is ``current``, and whether an
unmarked recent folder is ``current`` depends on the session rule (``synthetic``), so
both answers are kept, one list each.
"""

from __future__ import annotations

import operator
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress
from typing import overload

from engine.scoring.eras import folder_era, listed
from engine.scoring.events import folder_labels
from engine.store.index_entry import IndexEntry
from engine.store.records import IndexFields

__all__ = ["IndexStats", "SortedIds", "StatsSeed", "pending_key", "review_key"]

Row = IndexEntry | IndexFields
"""An index entry, or anything with its fields (a folder's meta)."""

Key = tuple[int, str]


def pending_key(entry: Row) -> Key:
    """Order of pending folders: ``pendingSince`` (else ``createdAt``), then id."""
    return (entry.pendingSince or entry.createdAt, entry.id)


def review_key(entry: Row) -> Key:
    """Order of re-reviews (scored, ``rescorePending``): ``createdAt``, then id."""
    return (entry.createdAt, entry.id)


class SortedIds(Sequence[str]):
    """Folder ids in key order (keys are unique: they end in the id).

    A sorted array: membership changes by bisection (plus a memory move), reads by index
    or slice cost what they return."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Iterable[Key] = ()) -> None:
        self._keys: list[Key] = sorted(keys)

    def add(self, key: Key) -> None:
        insort(self._keys, key)

    def discard(self, key: Key) -> None:
        keys = self._keys
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            del keys[i]

    def __len__(self) -> int:
        return len(self._keys)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [key[1] for key in self._keys[index]]
        return self._keys[index][1]

    def __iter__(self) -> Iterator[str]:
        return (key[1] for key in self._keys)

    def keys(self) -> list[Key]:
        """A copy of the sort keys, in order."""
        return list(self._keys)


def _labels_of(entry: Row) -> list[str]:
    # most folders carry no label: skip the call (10⁵ entries are counted at load)
    return folder_labels(entry.events, entry.event) if entry.events or entry.event else []


_SCORED = operator.attrgetter("scored")
_RESCORE = operator.attrgetter("rescorePending")
_EVENTS = operator.attrgetter("events")
_EVENT = operator.attrgetter("event")


def _label_counts(labelled: Iterable[Row]) -> Counter[str]:
    """What counting each folder's labels gives (labels in the order they first appear),
    working each distinct (events, event) out once: labels recur across thousands of
    folders, and the folders of a label are counted where they share it."""
    rows = list(labelled)
    kinds = map(tuple, [ev or () for ev in map(_EVENTS, rows)])
    groups: Counter[tuple[tuple[str, ...], str | None]] = Counter(
        zip(kinds, map(_EVENT, rows), strict=True)
    )
    counts: Counter[str] = Counter()
    for (events, event), n in groups.items():
        for label in folder_labels(events, event):
            counts[label] += n
    return counts


class StatsSeed:
    """The few entries :class:`IndexStats` looks at one by one (the unscored, the marked,
    the labelled), picked out of the entries `of` where their fields are at hand by
    column (`engine.store.index_snapshot`: a store opened from its rows snapshot), which
    costs a fraction of reading each field of 10⁵ entries scattered over the heap. Taken
    only for those very entries, in that order (:meth:`fits`)."""

    __slots__ = ("labelled", "marked", "of", "unscored")

    def __init__(
        self,
        of: Sequence[Row],
        unscored: Sequence[Row],
        marked: Sequence[Row],
        labelled: Sequence[Row],
    ) -> None:
        self.of = of
        self.unscored = unscored
        """The entries with ``scored`` false, in order."""
        self.marked = marked
        """The entries marked ``rescorePending``, in order."""
        self.labelled = labelled
        """The entries with ``events`` or an ``event``, in order."""

    @classmethod
    def of_columns(
        cls,
        rows: Sequence[Row],
        scored: Sequence[bool],
        marked: Iterable[bool],
        events: Iterable[list[str] | None],
        event: Sequence[str | None],
    ) -> StatsSeed:
        """The seed of `rows`, from their ``scored``, ``rescorePending``, ``events`` and
        ``event`` as columns (each aligned with `rows`; the two read twice as sequences):
        what the counters look at, by one rule whether the columns are a snapshot's or
        read from the entries."""
        unscored = [] if all(scored) else list(compress(rows, map(operator.not_, scored)))
        picked = list(compress(rows, marked))
        if any(event):
            labelled = [r for r, many, one in zip(rows, events, event, strict=True) if many or one]
        else:
            labelled = list(compress(rows, events))
        return cls(rows, unscored, picked, labelled)

    def fits(self, rows: Sequence[Row]) -> bool:
        """Whether `rows` are the entries it was picked from, object for object (one
        pointer comparison each)."""
        return len(rows) == len(self.of) and all(map(operator.is_, rows, self.of))


def _listed_current(entry: Row, *, synthetic: bool) -> bool:
    era = folder_era(
        created_at=entry.createdAt, pending_era=entry.pendingEra, session_synthetic=synthetic
    )
    return listed(era, include_legacy=False)


class IndexStats:
    """What readers of the index ask per request, maintained per entry change."""

    __slots__ = (
        "_labelled",
        "_labels",
        "pending",
        "pending_current",
        "pending_current_synthetic",
        "rescore_pending",
        "review",
    )

    def __init__(self, entries: Iterable[Row] = (), seed: StatsSeed | None = None) -> None:
        """Built from ``entries`` at load, field by field at C speed, or from `seed` when
        it was picked from these very entries: only the folders that are pending, marked
        or labelled (few, in a settled store) are looked at one by one; sorted once."""
        rows = list(entries)
        if seed is None or not seed.fits(rows):
            seed = StatsSeed.of_columns(
                rows,
                list(map(_SCORED, rows)),
                map(_RESCORE, rows),
                map(_EVENTS, rows),
                list(map(_EVENT, rows)),
            )
        unscored, marked, labelled = seed.unscored, seed.marked, seed.labelled
        pending = list(map(pending_key, unscored))
        current = [pending_key(e) for e in unscored if _listed_current(e, synthetic=False)]
        current_synthetic = [pending_key(e) for e in unscored if _listed_current(e, synthetic=True)]
        review = [review_key(e) for e in marked if e.scored]
        self.rescore_pending = len(marked)
        """Folders marked ``rescorePending``, scored or not."""
        self._labelled: Sequence[Row] | None = labelled
        """The labelled folders at load, until their labels are first counted: only the
        task block (with folders waiting) and ``memory_judge`` read the counts, so a
        restart's first recall does not wait for them."""
        self._labels: Counter[str] = Counter()
        self.pending = SortedIds(pending)
        """Every unscored folder, by :func:`pending_key`."""
        self.pending_current = SortedIds(current)
        """Unscored folders of era ``current`` while the session is not synthetic."""
        self.pending_current_synthetic = SortedIds(current_synthetic)
        """Unscored folders of era ``current`` in a synthetic session (the marked ones)."""
        self.review = SortedIds(review)
        """Scored folders marked ``rescorePending``, by :func:`review_key`."""

    @property
    def unscored(self) -> int:
        """Folders still waiting for their first score (``scored:false``)."""
        return len(self.pending)

    @property
    def waiting(self) -> bool:
        """Anything for the task block: a pending folder or a re-review."""
        return len(self.pending) > 0 or len(self.review) > 0

    def pending_listed(self, *, include_legacy: bool, synthetic: bool) -> SortedIds:
        """The pending folders the task block lists (``scoring.includeLegacy``, the
        session rule), oldest first."""
        if include_legacy:
            return self.pending
        return self.pending_current_synthetic if synthetic else self.pending_current

    def label_counts(self) -> Counter[str]:
        """How many folders carry each event label (a copy; what
        ``engine.scoring.events.label_counts`` counts over the whole index)."""
        return Counter(self._counted())

    def _counted(self) -> Counter[str]:
        """The label counts, counted now if they were not yet (see ``_labelled``)."""
        if self._labelled is not None:
            self._labels = _label_counts(self._labelled)
            self._labelled = None
        return self._labels

    def put(self, old: Row | None, new: Row) -> None:
        """``new`` replaces ``old`` (None: a new folder)."""
        if old is not None:
            self.drop(old)
        self._add(new)

    def drop(self, entry: Row) -> None:
        """``entry`` left the index."""
        if not entry.scored:
            key = pending_key(entry)
            self.pending.discard(key)
            self.pending_current.discard(key)
            self.pending_current_synthetic.discard(key)
        elif entry.rescorePending:
            self.review.discard(review_key(entry))
        self.rescore_pending -= int(entry.rescorePending)
        labels = self._counted()
        for label in _labels_of(entry):
            labels[label] -= 1
            if labels[label] <= 0:
                del labels[label]

    def _add(self, entry: Row) -> None:
        if not entry.scored:
            key = pending_key(entry)
            self.pending.add(key)
            if _listed_current(entry, synthetic=False):
                self.pending_current.add(key)
            if _listed_current(entry, synthetic=True):
                self.pending_current_synthetic.add(key)
        elif entry.rescorePending:
            self.review.add(review_key(entry))
        self.rescore_pending += int(entry.rescorePending)
        self._counted().update(_labels_of(entry))
