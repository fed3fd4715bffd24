"""The in-memory time index of one session (reference §1.10 "索引是虚拟的、只在内存").

Nothing is written: the index is derived from the store's index entries, kept by the
daemon per session, brought up to date in place when the store changes (an archive,
a judge call, a rollback: `TimeIndex.update` diffs the entries) and rebuilt when the
timezone changes (its day buckets are civil days of `time.timezone`).

What a folder covers (§1.10, the one matching rule): the half-open interval
[eventStart, eventEnd) when its `eventTimeSource` is `messages` or `judge`, else
[createdAt, createdAt + 1) (old data: the archive instant). A window [a, b) hits it
when they overlap (start < b and end > a). Its time tags (`timeTags`, computed at
archive time) are windows of their own; "timeTag wins" (§1.13.2): a folder that has
tags is hit by a window only through them, so `window_ids` is
(interval hits − tagged folders) ∪ tag hits.

Lookups go through day buckets (civil-day ordinal → the folders whose interval or tag
touches that day; an interval longer than `LONG_DAYS` is kept aside and always
checked); a window spanning more than `time.windowScanMax` days scans every folder
instead. Both give the same answer (a test holds them to the naive overlap rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import date, tzinfo
from typing import Any, Final, NamedTuple

from engine.timeexpr.civil import local_date, resolve_timezone, to_local, valid_ms

__all__ = ["LONG_DAYS", "FolderTime", "TimeIndex", "folder_time"]

LONG_DAYS: Final = 62
"""An interval touching more days than this is not bucketed (checked on every lookup)."""
EVENT_SOURCES: Final = frozenset({"messages", "judge"})


class FolderTime(NamedTuple):
    """What the time index knows of one folder (a tuple: cheap to make 10^5 of)."""

    id: str
    start: int
    end: int
    """[start, end): its event interval, or its archive instant."""
    source: str
    """`messages` / `judge` (event time) or `archive` (createdAt)."""
    created_at: int
    tags: tuple[tuple[int, int], ...] = ()
    scored: bool = True
    alpha: float = 0.0


def _tags(raw: Any) -> tuple[tuple[int, int], ...]:
    if not isinstance(raw, list):
        return ()
    out: list[tuple[int, int]] = []
    for tag in raw:
        if not isinstance(tag, dict):
            continue
        a, b = tag.get("from"), tag.get("to")
        if valid_ms(a) and valid_ms(b) and int(b) > int(a):
            out.append((int(a), int(b)))
    return tuple(out)


def folder_time(entry: Any, *, with_tags: bool = True) -> FolderTime:
    """The time facts of an index entry (module docstring)."""
    created = int(entry.createdAt)
    source = entry.eventTimeSource
    start, end, kind = created, created + 1, "archive"
    if source in EVENT_SOURCES and valid_ms(entry.eventStart):
        start = int(entry.eventStart)
        end = int(entry.eventEnd) if valid_ms(entry.eventEnd) else start + 1
        end, kind = max(end, start + 1), str(source)
    raw_tags = entry.timeTags if with_tags else None
    return FolderTime(
        entry.id,
        start,
        end,
        kind,
        created,
        _tags(raw_tags) if raw_tags else (),
        entry.scored is not False,
        float(entry.alpha or 0.0),
    )


class _DayOf:
    """Civil-day ordinals of instants, with the zone's offset cached per UTC day (a day
    whose two ends have different offsets, the few with a clock change, is computed
    exactly for every instant)."""

    _SLOT = 86_400_000

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        self._offsets: dict[int, int | None] = {}

    def __call__(self, ms: int) -> int:
        slot = ms // self._SLOT
        offsets = self._offsets
        if slot in offsets:
            off = offsets[slot]
        else:
            a = self._offset(slot * self._SLOT)
            b = self._offset(slot * self._SLOT + self._SLOT - 1)
            off = offsets[slot] = a if a == b else None
        if off is None:
            return local_date(ms, self.tz).toordinal()
        return (ms + off) // 86_400_000 + _EPOCH_ORDINAL

    def _offset(self, ms: int) -> int:
        offset = to_local(ms, self.tz).utcoffset()
        return 0 if offset is None else int(offset.total_seconds() * 1000)


_EPOCH_ORDINAL: Final = date(1970, 1, 1).toordinal()


def _overlaps(start: int, end: int, a: int, b: int) -> bool:
    return start < b and end > a


class TimeIndex:
    """Day buckets of a session's folder intervals and time tags (module docstring)."""

    def __init__(
        self,
        entries: Iterable[Any],
        timezone: str,
        *,
        with_tags: bool = True,
        scan_max: int = 4096,
        version: Any = None,
    ) -> None:
        self.version = version
        self.timezone = timezone
        self.with_tags = with_tags
        self.scan_max = max(1, scan_max)
        self._day_of = _DayOf(resolve_timezone(timezone))
        self._entries: dict[str, Any] = {}
        self.folders: dict[str, FolderTime] = {}
        self._days: dict[int, set[str]] = {}
        self._long: set[str] = set()
        self._tag_days: dict[int, set[str]] = {}
        self._tag_long: set[str] = set()
        self.tagged: set[str] = set()
        for entry in entries:
            self._add(entry)

    @property
    def params(self) -> tuple[str, bool]:
        """What a rebuild depends on: the timezone and whether tags are indexed."""
        return (self.timezone, self.with_tags)

    def __len__(self) -> int:
        return len(self.folders)

    def __contains__(self, fid: object) -> bool:
        return fid in self.folders

    # -- building ------------------------------------------------------------------
    def _day_range(self, start: int, end: int) -> range | None:
        """The day ordinals [start, end) touches, or None when more than LONG_DAYS."""
        first, last = self._day_of(start), self._day_of(max(start, end - 1))
        if last - first + 1 > LONG_DAYS:
            return None
        return range(first, last + 1)

    def _add(self, entry: Any) -> None:
        fid = entry.id
        if fid in self.folders:
            self._remove(fid)
        ft = folder_time(entry, with_tags=self.with_tags)
        self._entries[fid] = entry
        self.folders[fid] = ft
        days = self._day_range(ft.start, ft.end)
        if days is None:
            self._long.add(fid)
        else:
            for d in days:
                self._days.setdefault(d, set()).add(fid)
        if ft.tags:
            self.tagged.add(fid)
            for a, b in ft.tags:
                tag_days = self._day_range(a, b)
                if tag_days is None:
                    self._tag_long.add(fid)
                    continue
                for d in tag_days:
                    self._tag_days.setdefault(d, set()).add(fid)

    def _discard(self, buckets: dict[int, set[str]], days: range | None, fid: str) -> None:
        if days is None:
            return
        for d in days:
            members = buckets.get(d)
            if members is not None:
                members.discard(fid)
                if not members:
                    del buckets[d]

    def _remove(self, fid: str) -> None:
        ft = self.folders.pop(fid, None)
        self._entries.pop(fid, None)
        if ft is None:
            return
        self._long.discard(fid)
        self._discard(self._days, self._day_range(ft.start, ft.end), fid)
        if ft.tags:
            self.tagged.discard(fid)
            self._tag_long.discard(fid)
            for a, b in ft.tags:
                self._discard(self._tag_days, self._day_range(a, b), fid)

    def update(self, entries: Iterable[Any], version: Any = None) -> int:
        """Bring the index to `entries` in place, as a fresh build over them would be;
        returns how many folders were added, changed or removed. An entry that is the
        very object indexed before is unchanged (the store's entries are frozen values,
        replaced on every change)."""
        seen: set[str] = set()
        changed = 0
        known = self._entries
        for entry in entries:
            fid = entry.id
            seen.add(fid)
            if known.get(fid) is not entry:
                self._add(entry)
                changed += 1
        for fid in [f for f in known if f not in seen]:
            self._remove(fid)
            changed += 1
        self.version = version
        return changed

    # -- lookups ---------------------------------------------------------------------
    def _bucketed(
        self, buckets: dict[int, set[str]], long: set[str], a: int, b: int
    ) -> Iterator[str] | None:
        """Folders a bucket scan of [a, b) has to check, or None (too many days)."""
        if b <= a:
            return iter(())
        first, last = self._day_of(a), self._day_of(b - 1)
        if last - first + 1 > self.scan_max:
            return None
        out: set[str] = set(long)
        for d in range(first, last + 1):
            members = buckets.get(d)
            if members:
                out |= members
        return iter(out)

    def interval_ids(self, a: int, b: int) -> set[str]:
        """Folders whose interval overlaps [a, b) (tags not considered)."""
        folders = self.folders
        pool = self._bucketed(self._days, self._long, a, b)
        ids = folders if pool is None else pool
        return {fid for fid in ids if _overlaps(folders[fid].start, folders[fid].end, a, b)}

    def tag_ids(self, a: int, b: int) -> set[str]:
        """Folders with a time tag overlapping [a, b)."""
        folders = self.folders
        pool = self._bucketed(self._tag_days, self._tag_long, a, b)
        ids = self.tagged if pool is None else pool
        return {fid for fid in ids if any(_overlaps(x, y, a, b) for x, y in folders[fid].tags)}

    def window_ids(self, a: int, b: int) -> set[str]:
        """Folders a time window [a, b) hits: by their tags when they have some, else
        by their interval ("timeTag wins", module docstring)."""
        hits = self.interval_ids(a, b)
        if self.tagged:
            hits -= self.tagged
            hits |= self.tag_ids(a, b)
        return hits

    def event_order(self, ids: Iterable[str]) -> list[str]:
        """`ids` by event time ascending (archive time when there is none), then id."""
        folders = self.folders
        return sorted((f for f in ids if f in folders), key=lambda f: (folders[f].start, f))
