"""Civil days in the configured timezone (reference §1.10 "日/月/年边界").

Day, month and year boundaries are computed in `time.timezone`, never by adding
86 400 000 ms: a day that starts or ends a daylight-saving period is 23 or 25 hours
long, and on some days local midnight does not exist at all (America/Santiago,
America/Havana, America/Asuncion, Asia/Beirut move their clocks at 00:00). Such a day
starts at its first existing instant (usually 01:00); a day a zone skipped entirely
(Pacific/Apia, 2011-12-30) is an empty window.

`time.timezone: ""` means UTC here. The reference's `''` is "host local", but a daemon
that read the host clock zone would put the same store's memories on different days on
two machines (or after a `TZ` change): UTC keeps every answer a function of the store
and the config, and the packaged config pins Asia/Shanghai anyway. A name zoneinfo
does not know (the config validator reports it at load) is UTC too.
"""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import TypeGuard
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "MAX_MS",
    "MIN_MS",
    "add_months",
    "day_start",
    "local_date",
    "resolve_timezone",
    "to_local",
    "valid_ms",
    "window_ms",
]

MIN_MS = 1
MAX_MS = 253402300799999
"""9999-12-31T23:59:59.999Z: the last instant a civil date can name."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_FIRST_DAY = date(1, 1, 2)
_LAST_DAY = date(9999, 12, 30)
"""Dates whose day start and end stay inside every zone's representable range."""


@functools.lru_cache(maxsize=64)
def resolve_timezone(name: str) -> tzinfo:
    """`time.timezone` as a tzinfo; '' or an unknown name is UTC (module docstring)."""
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return UTC


def valid_ms(ms: object) -> TypeGuard[int | float]:
    """A usable epoch-ms instant: a finite positive number a civil date can name."""
    return isinstance(ms, int | float) and not isinstance(ms, bool) and MIN_MS <= ms <= MAX_MS


def to_local(ms: int, tz: tzinfo) -> datetime:
    """Epoch milliseconds as an aware datetime in `tz`."""
    return (_EPOCH + timedelta(milliseconds=ms)).astimezone(tz)


def local_date(ms: int, tz: tzinfo) -> date:
    """The civil date of instant `ms` in `tz`."""
    return to_local(ms, tz).date()


def _ms(dt: datetime) -> int:
    return (dt - _EPOCH) // _MS


def day_start(d: date, tz: tzinfo) -> int:
    """The first instant (epoch ms) whose civil date in `tz` is `d` or later.

    Local midnight when it exists (the earlier one when a clock change repeats it);
    in a gap, the instant the clocks jumped (module docstring). Dates outside
    0001-01-02 .. 9999-12-30 are clamped into it.
    """
    d = min(max(d, _FIRST_DAY), _LAST_DAY)
    naive = datetime(d.year, d.month, d.day)
    found: list[int] = []
    bounds: list[int] = []
    for fold in (0, 1):
        ms = _ms(naive.replace(tzinfo=tz, fold=fold))
        bounds.append(ms)
        if to_local(ms, tz).replace(tzinfo=None) == naive:
            found.append(ms)
    if found:
        return min(found)
    # midnight falls into a gap: the first instant of the day lies between the two
    # readings of it (post-transition offset first); its local date is monotone there
    lo, hi = min(bounds), max(bounds)
    while lo < hi:
        mid = (lo + hi) // 2
        if local_date(mid, tz) >= d:
            hi = mid
        else:
            lo = mid + 1
    return lo


def window_ms(first: date, last: date, tz: tzinfo) -> tuple[int, int]:
    """The half-open instant window [start of `first`, start of the day after `last`)."""
    return day_start(first, tz), day_start(last + timedelta(days=1), tz)


def add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    """(year, month) `delta` months after `year`-`month`."""
    idx = year * 12 + (month - 1) + delta
    return idx // 12, idx % 12 + 1
