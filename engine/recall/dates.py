"""Dates in the recall block: `recall.computeDates` (reference §1.14.1, §1.15).

Everything is computed from epoch milliseconds and an IANA timezone
(`time.timezone`, resolved by `engine.timeexpr.civil`: its `''` is UTC, not the host
zone, so one store renders the same on every machine; the packaged config pins
Asia/Shanghai anyway).

Relative-time annotation: the first occurrence of each relative phrase in one message
(the Chinese day / week / month / year shifts: 前天, 上周, 下个月, 明年, …) gets its
absolute date appended, computed from that message's anchor time (message.time →
meta.createdAt → addition createdAt) by the same expression engine that computes the
archive's time tags (`engine.timeexpr.expressions`). Text already followed by a
parenthesised date is left alone; a weekday (下周二), a counted shift (三天前) or a written
date is not a phrase to annotate.
"""

from __future__ import annotations

import re
from datetime import date, tzinfo

from engine.texts import RECALL_WEEKDAYS
from engine.timeexpr.civil import resolve_timezone, to_local
from engine.timeexpr.civil import valid_ms as _valid_ms
from engine.timeexpr.expressions import (
    DAY,
    MONTH,
    SHIFT_KINDS,
    SHIFT_OVERLAPS,
    WEEK,
    Found,
    find_expressions,
    may_hold_shift,
)

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

_ANNOTATED = re.compile(r"\s*[(（]\s*\d{4}")


def _annotatable(found: Found) -> bool:
    """A Chinese shift by whole days, weeks, months or years (module docstring)."""
    return found.lang == "zh" and found.kind in SHIFT_KINDS


def _note(found: Found) -> str | None:
    span = found.span
    if span.granularity == DAY:
        return format_date(span.first)
    if span.granularity == WEEK:
        return f"{format_date(span.first)}~{format_date(span.last)}"
    if span.granularity == MONTH:
        return f"{span.first.year:04d}-{span.first.month:02d}"
    return f"{span.first.year:04d}"


def annotate_relative_time(text: str, anchor_ms: int | None, tz: tzinfo, week_start: int) -> str:
    """Append `（absolute date）` to the first occurrence of each relative phrase.

    Unknown or unsafe anchors leave the text unchanged. Week phrases directly followed
    by a weekday (`下周二`) are a day, not a week, and not annotated.
    """
    if not text or anchor_ms is None or not _valid_ms(anchor_ms) or not may_hold_shift(text):
        return text
    try:
        anchor: date = to_local(int(anchor_ms), tz).date()
    except (OverflowError, OSError, ValueError):
        return text
    seen: set[str] = set()
    out: list[str] = []
    pos = 0
    scan = find_expressions(text, anchor, week_start=week_start, kinds=SHIFT_OVERLAPS, lang="zh")
    for found in scan:
        if not _annotatable(found) or found.text in seen:
            continue
        seen.add(found.text)
        if _ANNOTATED.match(text, found.end):
            continue
        out.append(text[pos : found.end])
        out.append(f"（{_note(found)}）")
        pos = found.end
    out.append(text[pos:])
    return "".join(out)
