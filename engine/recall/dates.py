"""Dates in the recall block: `recall.computeDates` (reference §1.14.1, §1.15).

Everything is computed from epoch milliseconds and an IANA timezone
(`time.timezone`). The reference's `''` means "host local"; a daemon reading the
host clock zone would make the same store render differently on two machines, so
`''` (and any name zoneinfo does not know) is UTC here: deterministic, and the
packaged config pins Asia/Shanghai anyway.

Relative-time annotation: the first occurrence of each phrase in one message gets
its absolute date appended, computed from that message's anchor time
(message.time → meta.createdAt → addition createdAt). Text already followed by a
parenthesised date is left alone.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine.texts import RECALL_WEEKDAYS

__all__ = [
    "annotate_relative_time",
    "format_date",
    "format_date_with_weekday",
    "format_datetime",
    "format_datetime_with_weekday",
    "format_event_range",
    "resolve_timezone",
    "to_local",
]

_MAX_MS = 253402300799999  # 9999-12-31T23:59:59.999Z


@functools.lru_cache(maxsize=64)
def resolve_timezone(name: str) -> tzinfo:
    """`time.timezone` as a tzinfo; '' or an unknown name is UTC (module docstring)."""
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def _valid_ms(ms: object) -> bool:
    return isinstance(ms, int | float) and not isinstance(ms, bool) and 0 < ms <= _MAX_MS


def to_local(ms: int, tz: tzinfo) -> datetime:
    """Epoch milliseconds as an aware datetime in `tz`."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(tz)


def format_datetime(ms: int, tz: tzinfo) -> str:
    """`2026-10-25 08:17` (the v1.3.0 heading date)."""
    return to_local(ms, tz).strftime("%Y-%m-%d %H:%M")


def format_date(d: date) -> str:
    return d.strftime("%Y-%m-%d")


def format_date_with_weekday(d: date) -> str:
    """`2026-04-19 周日`."""
    return f"{format_date(d)} {RECALL_WEEKDAYS[d.weekday()]}"


def format_datetime_with_weekday(ms: int, tz: tzinfo) -> str:
    """`2026-04-19 周日 21:10`."""
    local = to_local(ms, tz)
    return f"{format_date_with_weekday(local.date())} {local.strftime('%H:%M')}"


def format_event_range(
    start: int | None, end: int | None, message_times: list[int], tz: tzinfo
) -> str | None:
    """The `事件时间` of a heading, or None (reference §1.15).

    `eventStart`/`eventEnd` first (half-open: the last day is `eventEnd - 1`; one day
    written once; one side alone written alone; 0 means absent), else the earliest and
    latest finite message time.
    """
    s = start if _valid_ms(start) else None
    e = end if _valid_ms(end) else None
    if s is not None or e is not None:
        first = to_local(int(s), tz).date() if s is not None else None
        last = None
        if e is not None:
            last_ms = int(e) - 1 if s is None or e > s else int(e)
            last = to_local(last_ms, tz).date()
        if first is not None and last is not None and last < first:
            last = first
    else:
        times = [int(t) for t in message_times if _valid_ms(t)]
        if not times:
            return None
        first = to_local(min(times), tz).date()
        last = to_local(max(times), tz).date()
    if first is not None and last is not None and first != last:
        return f"{format_date_with_weekday(first)} ~ {format_date_with_weekday(last)}"
    only = first if first is not None else last
    assert only is not None
    return format_date_with_weekday(only)


# ---- relative-time annotation ------------------------------------------------------

_DAY_OFFSETS = {"大前天": -3, "前天": -2, "昨天": -1, "今天": 0, "明天": 1, "后天": 2, "大后天": 3}
_WEEK_OFFSETS = {"上上周": -2, "上周": -1, "本周": 0, "这周": 0, "下周": 1, "下下周": 2}
_MONTH_OFFSETS = {"上个月": -1, "上月": -1, "本月": 0, "这个月": 0, "下个月": 1, "下月": 1}
_YEAR_OFFSETS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_ALL = {**_DAY_OFFSETS, **_WEEK_OFFSETS, **_MONTH_OFFSETS, **_YEAR_OFFSETS}
# Longest phrase first so 大后天 wins over 后天 and 上个月 over 上月; a phrase right
# after 上/下 (上上周 handled as its own entry) or followed by a date is skipped.
_PHRASE = re.compile("|".join(sorted(map(re.escape, _ALL), key=lambda p: (-len(p), p))))
_ANNOTATED = re.compile(r"\s*[(（]\s*\d{4}")
_WEEK_DAY_SUFFIX = re.compile(r"[一二三四五六日天末]")


def _shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    idx = year * 12 + (month - 1) + delta
    return idx // 12, idx % 12 + 1


def _resolve(phrase: str, anchor: date, week_start: int) -> str | None:
    if phrase in _DAY_OFFSETS:
        return format_date(anchor + timedelta(days=_DAY_OFFSETS[phrase]))
    if phrase in _WEEK_OFFSETS:
        # timeTag.weekStart: 1 = Monday … 7 = Sunday (0 is taken as Sunday too).
        start_wd = (week_start - 1) % 7 if week_start else 6
        back = (anchor.weekday() - start_wd) % 7
        first = anchor - timedelta(days=back) + timedelta(weeks=_WEEK_OFFSETS[phrase])
        return f"{format_date(first)}~{format_date(first + timedelta(days=6))}"
    if phrase in _MONTH_OFFSETS:
        y, m = _shift_month(anchor.year, anchor.month, _MONTH_OFFSETS[phrase])
        if not 1 <= y <= 9999:
            return None
        return f"{y:04d}-{m:02d}"
    y = anchor.year + _YEAR_OFFSETS[phrase]
    return f"{y:04d}" if 1 <= y <= 9999 else None


def annotate_relative_time(text: str, anchor_ms: int | None, tz: tzinfo, week_start: int) -> str:
    """Append `（absolute date）` to the first occurrence of each relative phrase.

    Unknown or unsafe anchors leave the text unchanged. Week phrases directly followed
    by a weekday (`下周二`) are not annotated as a whole week.
    """
    if not text or anchor_ms is None or not _valid_ms(anchor_ms):
        return text
    try:
        anchor = to_local(int(anchor_ms), tz).date()
    except (OverflowError, OSError, ValueError):
        return text
    seen: set[str] = set()
    out: list[str] = []
    pos = 0
    for m in _PHRASE.finditer(text):
        phrase = m.group(0)
        end = m.end()
        if phrase in seen:
            continue
        if _ANNOTATED.match(text, end):
            seen.add(phrase)
            continue
        if phrase in _WEEK_OFFSETS and _WEEK_DAY_SUFFIX.match(text, end):
            continue
        value = _resolve(phrase, anchor, week_start)
        seen.add(phrase)
        if value is None:
            continue
        out.append(text[pos:end])
        out.append(f"（{value}）")
        pos = end
    out.append(text[pos:])
    return "".join(out)
