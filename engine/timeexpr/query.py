"""memory_recall's time window: `normalize_time_query` (reference §1.10 "输入归一化").

A pure function that never raises: what the model wrote becomes the windows the search
tries, in order, and the warnings the answer shows.

* Endpoints: `'2026-10-31'` (a day; also `/` or `.`, and `2026年10月31日`), `'2026-10'` (a
  month), `'2026'` (a year), an ISO date-time, epoch milliseconds (a number or a string of
  digits: the day holding that instant), or any one fuzzy expression the expression
  engine knows (`昨天`, `上周`, anchored on now). `granularity` (day / month / year)
  widens each endpoint to its unit; omitted (or finer than what is written) the written
  form decides.
* One endpoint (either): its unit is level 0 (a single day is the centre day:
  `time.centerDayPriority`, fixed), then the widening ladder `time.fallback`, each level
  only if it is larger than the one before: `day3` (`time.minRangeDays` days centred on
  it), `month`, `year`, `all` (no constraint). The search takes the first level with at
  least `time.fallbackMinResults` results (0 counts as 1).
* Both endpoints: one hard window from the first's start to the second's end, never
  widened ("这个时间范围确实没有记忆" is itself the answer); `from > to` is swapped; a
  window shorter than `time.minRangeDays` is widened around its centre to that many days.
* A window longer than `time.maxRangeDays` (a range, or a month or year under a lower
  cap) is cut to that many days from its start; a ladder level longer than it is skipped.
* The future is clamped to now (today is the last day; the window ends at now), and a
  window the clamp made shorter than `time.minRangeDays` is extended back into the past.
* Invalid or blank input is no constraint, with a warning; so is an endpoint in epoch
  seconds (it would land in 1970).

Windows are civil days in `time.timezone` (`engine.timeexpr.civil`): a day starts at its
first existing instant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta, tzinfo
from typing import Any

from engine import texts
from engine.config.model import MemoryConfig
from engine.timeexpr.civil import (
    day_start,
    local_date,
    resolve_timezone,
    valid_ms,
)
from engine.timeexpr.endpoint import Instant, Span, month_span, read_endpoint, year_span
from engine.timeexpr.expressions import find_expressions
from engine.tool_args import shown_arg

__all__ = [
    "Level",
    "TimeQuery",
    "normalize_time_query",
]

_RANK = {"day": 0, "month": 1, "year": 2}


@dataclass(frozen=True, slots=True)
class Level:
    """One window the search may use: civil days `first` … `last`, instants [start, end)."""

    name: str
    """Level 0: the query's own granularity (day / month / year) or `range`; widened:
    `day3`, `month`, `year`, `all` (no constraint: the bounds are None)."""
    first: date | None = None
    last: date | None = None
    start: int | None = None
    end: int | None = None

    @property
    def bounded(self) -> bool:
        return self.start is not None and self.end is not None

    @property
    def days(self) -> int:
        if self.first is None or self.last is None:
            return 0
        return (self.last - self.first).days + 1


@dataclass(frozen=True, slots=True)
class TimeQuery:
    """The normalized time arguments of one call."""

    levels: tuple[Level, ...] = ()
    """Level 0 first, then the widening levels; empty: no constraint."""
    explicit: bool = False
    """Two endpoints: a hard window (one level, never widened)."""
    granularity: str = "day"
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def constrained(self) -> bool:
        return bool(self.levels)


def _present(value: Any) -> bool:
    if value is None:
        return False
    return not (isinstance(value, str) and not value.strip())


def _relative(text: str, now_ms: int, cfg: MemoryConfig, tz: tzinfo) -> Span | None:
    """A whole-text relative expression ("上周", "last month"), anchored on today."""
    found = find_expressions(text, local_date(now_ms, tz), week_start=cfg.time_tag.week_start)
    if len(found) == 1 and found[0].start == 0 and found[0].end == len(text):
        span = found[0].span
        granularity = span.granularity if span.granularity in _RANK else "day"
        return Span(span.first, span.last, granularity)
    return None


def _parse(
    name: str, value: Any, now_ms: int, cfg: MemoryConfig, warnings: list[str]
) -> Span | None:
    """One endpoint as civil days (`engine.timeexpr.endpoint`), or None with a warning."""
    tz = resolve_timezone(cfg.time.timezone)
    got = read_endpoint(value, tz, lambda text: _relative(text, now_ms, cfg, tz))
    if isinstance(got, Span):
        return Span(got.first, got.last, got.granularity)
    if isinstance(got, Instant):
        d = local_date(got.ms, tz)
        return Span(d, d, "day")
    if got == "seconds":
        warnings.append(texts.TIME_WARN_SECONDS.format(field=name, given=shown_arg(value)))
    else:
        warnings.append(texts.TIME_WARN_INVALID.format(field=name, given=shown_arg(value)))
    return None


def _coarsen(unit: Span, granularity: str | None) -> Span:
    """`unit` widened to `granularity` when that is coarser than what was written."""
    if granularity is None or _RANK[granularity] <= _RANK.get(unit.granularity, 0):
        return unit
    if granularity == "month":
        widened = month_span(unit.first.year, unit.first.month)
        last = month_span(unit.last.year, unit.last.month)
    else:
        widened = year_span(unit.first.year)
        last = year_span(unit.last.year)
    if widened is None or last is None:
        return unit
    return Span(widened.first, last.last, granularity)


class _Window:
    """Builds the levels' day ranges and instants: clamp to today, minimum, cap."""

    def __init__(self, now_ms: int, cfg: MemoryConfig, warnings: list[str]) -> None:
        self.tz = resolve_timezone(cfg.time.timezone)
        self.now_ms = now_ms
        self.today = local_date(now_ms, self.tz)
        self.min_days = max(1, cfg.time.min_range_days)
        self.max_days = max(self.min_days, cfg.time.max_range_days)
        self.warnings = warnings
        self.clamped = False

    def clamp(
        self, first: date, last: date, *, keep_min: bool, warn: bool = True
    ) -> tuple[date, date]:
        """The future clamped to today; with `keep_min`, the minimum kept (into the past).
        `warn`: say so (the query's own window; a wider level reaching past today is no
        news)."""
        if last > self.today:
            if warn and not self.clamped:
                self.warnings.append(texts.TIME_WARN_FUTURE.format(today=self.today.isoformat()))
                self.clamped = True
            last = self.today
            first = min(first, last)
            if keep_min and (last - first).days + 1 < self.min_days:
                first = _shift(last, -(self.min_days - 1))
        return first, last

    def cap(self, first: date, last: date) -> tuple[date, date]:
        """At most `time.maxRangeDays` days, from `first` on (with a warning)."""
        if (last - first).days + 1 > self.max_days:
            last = _shift(first, self.max_days - 1)
            self.warnings.append(
                texts.TIME_WARN_CAPPED.format(
                    max=self.max_days, first=first.isoformat(), last=last.isoformat()
                )
            )
        return first, last

    def level(self, name: str, first: date, last: date) -> Level:
        start = day_start(first, self.tz)
        end = day_start(last + timedelta(days=1), self.tz)
        if last >= self.today:
            end = min(end, self.now_ms + 1)  # the window ends now: nothing after it exists
        return Level(name, first, last, start, max(start, end))


def _shift(d: date, days: int) -> date:
    try:
        return d + timedelta(days=days)
    except OverflowError:
        return date.min if days < 0 else date.max


def _centred(center: date, days: int) -> tuple[date, date]:
    first = _shift(center, -((days - 1) // 2))
    return first, _shift(first, days - 1)


def _ladder(unit: Span, win: _Window, cfg: MemoryConfig) -> list[Level]:
    first, last = win.clamp(unit.first, unit.last, keep_min=False)
    first, last = win.cap(first, last)
    levels = [win.level(unit.granularity, first, last)]
    center = first + timedelta(days=(last - first).days // 2)
    for name in cfg.time.fallback:
        current = levels[-1]
        if name == "all":
            levels.append(Level("all"))
            break
        if name == "day3":
            if current.days >= win.min_days:
                continue
            a, b = _centred(center, win.min_days)
            a, b = win.clamp(a, b, keep_min=True, warn=False)
        elif name == "month":
            if _RANK.get(unit.granularity, 0) >= _RANK["month"]:
                continue
            m = month_span(center.year, center.month)
            if m is None:
                continue
            a, b = win.clamp(m.first, m.last, keep_min=False, warn=False)
        else:
            if unit.granularity == "year":
                continue
            y = year_span(center.year)
            if y is None:
                continue
            a, b = win.clamp(y.first, y.last, keep_min=False, warn=False)
        if (b - a).days + 1 > win.max_days or (b - a).days + 1 <= current.days:
            continue
        levels.append(win.level(name, a, b))
    return levels


def _explicit(lo: Span, hi: Span, win: _Window) -> Level:
    first, last = lo.first, hi.last
    if first > last:
        win.warnings.append(texts.TIME_WARN_SWAPPED)
        first, last = hi.first, lo.last
    first, last = win.clamp(first, last, keep_min=False)
    days = (last - first).days + 1
    if days < win.min_days:
        center = first + timedelta(days=(days - 1) // 2)
        first, last = _centred(center, win.min_days)
        first, last = win.clamp(first, last, keep_min=True)
        win.warnings.append(
            texts.TIME_WARN_MIN_RANGE.format(
                n=win.min_days, first=first.isoformat(), last=last.isoformat()
            )
        )
    first, last = win.cap(first, last)
    return win.level("range", first, last)


def normalize_time_query(
    time_from: Any, time_to: Any, granularity: Any, *, now_ms: int, cfg: MemoryConfig
) -> TimeQuery:
    """The windows and warnings of one call's time arguments (module docstring)."""
    warnings: list[str] = []
    gran: str | None = None
    if _present(granularity):
        if isinstance(granularity, str) and granularity.strip().lower() in _RANK:
            gran = granularity.strip().lower()
        else:
            warnings.append(texts.TIME_WARN_GRANULARITY.format(given=shown_arg(granularity)))
    lo = _parse("timeFrom", time_from, now_ms, cfg, warnings) if _present(time_from) else None
    hi = _parse("timeTo", time_to, now_ms, cfg, warnings) if _present(time_to) else None
    if not valid_ms(now_ms):
        return TimeQuery((), False, "day", tuple(warnings))
    win = _Window(now_ms, cfg, warnings)
    if lo is not None and hi is not None:
        lo, hi = _coarsen(lo, gran), _coarsen(hi, gran)
        level = _explicit(lo, hi, win)
        return TimeQuery((level,), True, lo.granularity, tuple(warnings))
    one = lo or hi
    if one is None:
        return TimeQuery((), False, gran or "day", tuple(warnings))
    one = _coarsen(one, gran)
    return TimeQuery(tuple(_ladder(one, win, cfg)), False, one.granularity, tuple(warnings))
