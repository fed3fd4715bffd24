"""One time argument a model gives a tool (`timeFrom` / `timeTo` of `memory_recall` and
`memory_group_recall`), read by one set of rules so both tools take the same inputs.

A year (`2026`, or the number 2026), a month (`2026-11`, `2026/11`, `2026.11`), a day
(`2026-11-02`) are civil spans; a full ISO date-time (a zone-less one is read in the
configured zone) and epoch milliseconds from 1973 on are instants. Numbers between 1e9
and 1e11 are epoch *seconds* (or milliseconds of 1970–73): a mistake, reported as such
rather than read as a date. A caller may also accept relative expressions ("上周",
"last month") through ``relative``. What each tool makes of a span or an instant, and
the warning it gives, is its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Any, Literal

from engine.timeexpr.civil import MAX_MS, add_months, valid_ms

__all__ = ["Instant", "Refused", "Span", "day_span", "month_span", "read_endpoint", "year_span"]

_DAY_RE = re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})")
_MONTH_RE = re.compile(r"(\d{4})[-/.](\d{1,2})")
_YEAR_RE = re.compile(r"\d{4}")
_DIGITS = re.compile(r"\d{5,}")
_SECONDS_MIN, _MS_MIN = 10**9, 10**11
"""Numbers in [1e9, 1e11) are epoch seconds of 2001-5138 (or ms of 1970-1973): taken as
a mistake. Epoch ms from 1e11 (1973) on are instants."""


@dataclass(frozen=True, slots=True)
class Span:
    """Civil days ``first`` … ``last`` (both included)."""

    first: date
    last: date
    granularity: str  # "day", "month", "year" (a relative expression may say "week")


@dataclass(frozen=True, slots=True)
class Instant:
    """One moment, epoch milliseconds."""

    ms: int


Refused = Literal["seconds", "invalid"]


def year_span(year: int) -> Span | None:
    return Span(date(year, 1, 1), date(year, 12, 31), "year") if 1 <= year <= 9999 else None


def month_span(year: int, month: int) -> Span | None:
    if not (1 <= year <= 9999 and 1 <= month <= 12):
        return None
    ny, nm = add_months(year, month, 1)
    last = date(ny, nm, 1) - timedelta(days=1) if ny <= 9999 else date(9999, 12, 31)
    return Span(date(year, month, 1), last, "month")


def day_span(year: int, month: int, day: int) -> Span | None:
    try:
        d = date(year, month, day)
    except ValueError:
        return None
    return Span(d, d, "day")


def _text(
    text: str, tz: tzinfo, relative: Callable[[str], Span | None] | None
) -> Span | Instant | None:
    if _YEAR_RE.fullmatch(text):
        return year_span(int(text))
    if m := _DAY_RE.fullmatch(text):
        return day_span(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if m := _MONTH_RE.fullmatch(text):
        return month_span(int(m.group(1)), int(m.group(2)))
    if "T" in text or " " in text or ":" in text:
        try:
            dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            dt = None
        if dt is not None:
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=tz)
            ms = int(dt.timestamp() * 1000)
            return Instant(ms) if valid_ms(ms) else None
    return relative(text) if relative is not None else None


def read_endpoint(
    value: Any, tz: tzinfo, relative: Callable[[str], Span | None] | None = None
) -> Span | Instant | Refused:
    """``value`` (present: not None, not blank) as a span, an instant, or why not."""
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if _DIGITS.fullmatch(text):
            number = int(text)
        else:
            found = _text(text, tz, relative)
            if found is not None:
                return found
    if number is not None:
        if 1000 <= number <= 9999:
            return year_span(number) or "invalid"
        if _SECONDS_MIN <= number < _MS_MIN:
            return "seconds"
        if _MS_MIN <= number <= MAX_MS:
            return Instant(number)
    return "invalid"
