"""Time tags of a folder, computed at archive time (reference §1.10, §1.13.1).

Each fuzzy time expression the conversation of a folder holds (昨天, 下周二, 三天前, 2026年
10月31日, last week …: `engine.timeexpr.expressions`) becomes one tag
``{"from", "to", "label", "granularity", "text"}``: the half-open instant window
[from, to) of the civil days it names in `time.timezone`, anchored on the time of the
message that says it (a message without a time: the archive time). ``label`` is the
window as the recall block prints it (`2026-05-27`, `2026-05-18~2026-05-24`, `2026-06`,
`2027`), ``text`` the words that said it. Only what the user and the assistant said is
read (a tool's output is machine text: its dates are not the conversation's).

Deterministic and model-free: the scoring model never submits them (§1.2). Duplicates
(two expressions of one window) are one tag; a window longer than
`timeTag.maxSpanDays` is none; at most `timeTag.maxPerFolder`, in the order they were
said. The folder's meta then carries ``timeTags`` and ``timeTagSource:
"relative-time"`` (the engine that computed them); a folder without an expression
carries neither. `timeTag.mode: off` computes none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import tzinfo
from typing import Any, Final

from engine.config.model import MemoryConfig
from engine.content import ANY_TEXT, message_text
from engine.timeexpr.civil import local_date, resolve_timezone, valid_ms, window_ms
from engine.timeexpr.expressions import DAY, MONTH, WEEK, Span, find_expressions

__all__ = ["TAGGED_ROLES", "TIME_TAG_SOURCE", "span_label", "time_tag_fields", "time_tags"]

TIME_TAG_SOURCE: Final = "relative-time"
TAGGED_ROLES: Final = frozenset({"user", "assistant"})


def span_label(span: Span) -> str:
    """A span as the recall block prints a date of its granularity."""
    first = span.first
    if span.granularity == DAY:
        if span.first == span.last:
            return first.isoformat()
        return f"{first.isoformat()}~{span.last.isoformat()}"
    if span.granularity == WEEK:
        return f"{first.isoformat()}~{span.last.isoformat()}"
    if span.granularity == MONTH:
        return f"{first.year:04d}-{first.month:02d}"
    return f"{first.year:04d}"


def _text(message: Mapping[str, Any]) -> str:
    return message_text(message, ANY_TEXT)


def time_tags(
    messages: Iterable[Mapping[str, Any]],
    *,
    default_anchor_ms: int,
    tz: tzinfo,
    week_start: int,
    max_span_days: int,
    max_per_folder: int,
) -> list[dict[str, Any]]:
    """The time tags of a folder's messages (module docstring)."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    if max_per_folder <= 0:
        return out
    for message in messages:
        if message.get("role") not in TAGGED_ROLES:
            continue
        text = _text(message)
        if not text:
            continue
        t = message.get("time")
        anchor_ms = t if valid_ms(t) else default_anchor_ms
        if not valid_ms(anchor_ms):
            continue
        anchor = local_date(int(anchor_ms), tz)
        for found in find_expressions(text, anchor, week_start=week_start):
            span = found.span
            if span.days > max_span_days:
                continue
            start, end = window_ms(span.first, span.last, tz)
            if end <= start or (start, end) in seen:
                continue
            seen.add((start, end))
            out.append(
                {
                    "from": start,
                    "to": end,
                    "label": span_label(span),
                    "granularity": span.granularity,
                    "text": found.text,
                }
            )
            if len(out) >= max_per_folder:
                return out
    return out


def time_tag_fields(
    messages: Iterable[Mapping[str, Any]], cfg: MemoryConfig, *, default_anchor_ms: int
) -> dict[str, Any]:
    """The meta fields of a new folder's time tags: ``timeTags`` and ``timeTagSource``,
    or nothing (no expression, or `timeTag.mode: off`)."""
    tc = cfg.time_tag
    if tc.mode == "off":
        return {}
    tags = time_tags(
        messages,
        default_anchor_ms=default_anchor_ms,
        tz=resolve_timezone(cfg.time.timezone),
        week_start=tc.week_start,
        max_span_days=tc.max_span_days,
        max_per_folder=tc.max_per_folder,
    )
    return {"timeTags": tags, "timeTagSource": TIME_TAG_SOURCE} if tags else {}
