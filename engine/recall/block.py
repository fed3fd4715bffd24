"""The recall block text (reference §1.3 step 4, §1.7, §1.13.6, §1.14.1, §1.15).

An entry is rendered once, when it is injected (its body: tags line and messages,
images expanded, relative times annotated; and its heading date), and kept in the
recall state, so the block can be re-rendered after trimming or a restart without
the folder. The block is::

    ## 记忆回忆（按创建时间从早到晚）
    <blank>
    <three preamble lines>
    [<time rule line>]            (recall.computeDates)
    <blank>
    ### 回忆 1 · … · 关键词：…
    [事件：… · 地点：… · 人物：… · 时间标签：…]   (recall.showTags, when tagged)
    user: …
    assistant: …
    <blank>
    ### 回忆 2 · …

Entries are separated by one blank line; `recall.sort` orders them (createdAt,
alpha or generation; ties by createdAt then id). The heading stays the reference's
fixed text whatever the sort.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import tzinfo
from pathlib import Path
from typing import Any

from engine.content import ARCHIVED
from engine.content import message_text as content_text
from engine.recall.dates import (
    annotate_relative_time,
    format_datetime,
    format_datetime_with_weekday,
    format_event_range,
)
from engine.texts import (
    RECALL_ARCHIVED_AT,
    RECALL_ARCHIVED_AT_WITH_EVENT,
    RECALL_BLOCK_HEADING,
    RECALL_BLOCK_PREAMBLE,
    RECALL_BLOCK_TIME_RULE,
    RECALL_ENTRY_HEADING,
    RECALL_IMAGE_EXPANDED,
    RECALL_IMAGE_MISSING,
    RECALL_KEYWORD_SEPARATOR,
    RECALL_TAG_EVENTS,
    RECALL_TAG_LOCATIONS,
    RECALL_TAG_PERSONS,
    RECALL_TAG_SEPARATOR,
    RECALL_TAG_TIME_TAGS,
)

__all__ = [
    "IMAGE_MARK",
    "block_header",
    "entry_heading",
    "expand_images",
    "format_alpha",
    "format_beta",
    "heading_date",
    "message_text",
    "render_body",
    "render_entries",
    "sort_key",
]

IMAGE_MARK = "[图片"
"""How every image placeholder begins: a text without it has none to expand."""
# `[图片:(name)]` in either full- or half-width punctuation (the archive writes one form).
_IMAGE = re.compile(r"\[图片([:：])\s*([(（])([^()（）,，\]\n]+?)([)）])\]")


def format_alpha(alpha: float) -> str:
    """`0.85` (two decimals, as the reference's example)."""
    return f"{alpha:.2f}"


def format_beta(beta: float) -> str:
    """`+8.0` / `-3.0` / `+0.0` (signed, one decimal)."""
    value = round(float(beta), 1)
    if value == 0:
        value = 0.0
    return f"+{value:.1f}" if value >= 0 else f"{value:.1f}"


def block_header(compute_dates: bool) -> str:
    """Heading, blank line, preamble (and the time rule with computeDates)."""
    head = f"{RECALL_BLOCK_HEADING}\n\n{RECALL_BLOCK_PREAMBLE}"
    if compute_dates:
        head += "\n" + RECALL_BLOCK_TIME_RULE
    return head


def heading_date(
    created_at: int,
    event_start: int | None,
    event_end: int | None,
    message_times: list[int],
    tz: tzinfo,
    compute_dates: bool,
) -> str:
    """The date part of an entry heading (legacy bare date, or 归档于 X（事件时间 Y）)."""
    if not compute_dates:
        return format_datetime(created_at, tz)
    archived = format_datetime_with_weekday(created_at, tz)
    event = format_event_range(event_start, event_end, message_times, tz)
    if event is None:
        return RECALL_ARCHIVED_AT.format(archived=archived)
    return RECALL_ARCHIVED_AT_WITH_EVENT.format(archived=archived, event=event)


def entry_heading(
    n: int, date: str, alpha: float, beta: float, generation: int, keywords: Sequence[str]
) -> str:
    return RECALL_ENTRY_HEADING.format(
        n=n,
        date=date,
        alpha=format_alpha(alpha),
        beta=format_beta(beta),
        generation=generation,
        keywords=RECALL_KEYWORD_SEPARATOR.join(keywords),
    )


def _labels(values: Any) -> list[str]:
    if not isinstance(values, list):
        return []
    out: list[str] = []
    for v in values:
        if isinstance(v, str) and v.strip():
            out.append(v.strip())
        elif isinstance(v, Mapping) and isinstance(v.get("label"), str) and v["label"].strip():
            out.append(v["label"].strip())
    return out


def tags_line(tags: Mapping[str, Any]) -> str:
    """`事件：… · 地点：… · 人物：… · 时间标签：…` with only the kinds present, or ''."""
    parts = []
    events = _labels(tags.get("events")) or _labels(
        [tags.get("event")] if tags.get("event") else []
    )
    for template, values in (
        (RECALL_TAG_EVENTS, events),
        (RECALL_TAG_LOCATIONS, _labels(tags.get("locations"))),
        (RECALL_TAG_PERSONS, _labels(tags.get("persons"))),
        (RECALL_TAG_TIME_TAGS, _labels(tags.get("timeTags"))),
    ):
        if values:
            parts.append(template.format(values=RECALL_KEYWORD_SEPARATOR.join(values)))
    return RECALL_TAG_SEPARATOR.join(parts)


def message_text(message: Mapping[str, Any]) -> str:
    """The text of an archived message (`engine.content.message_text`, archived form)."""
    return content_text(message, ARCHIVED)


def expand_images(text: str, image_path: Callable[[str], Path | None]) -> str:
    """`[图片:(name)]` → `[图片:(name,文件:/abs/path)]`, `（缺失）` after it when the file
    is gone (§1.7 step 4). The punctuation style of the placeholder is kept."""
    if IMAGE_MARK not in text:  # every placeholder begins with it: nothing to expand
        return text

    def repl(m: re.Match[str]) -> str:
        colon, open_, name, close = m.group(1), m.group(2), m.group(3).strip(), m.group(4)
        comma = "，" if open_ == "（" else ","
        path = image_path(name)
        if path is None:
            return m.group(0)
        out = RECALL_IMAGE_EXPANDED.format(
            colon=colon, open_=open_, name=name, comma=comma, path=path, close=close
        )
        if not path.exists():
            out += RECALL_IMAGE_MISSING
        return out

    return _IMAGE.sub(repl, text)


def render_body(
    messages: Sequence[Mapping[str, Any]],
    tags: Mapping[str, Any],
    *,
    show_tags: bool,
    compute_dates: bool,
    fallback_anchor: int | None,
    tz: tzinfo,
    week_start: int,
    image_path: Callable[[str], Path | None],
) -> str:
    """Tags line (if any) and `role: text` lines of one entry."""
    lines: list[str] = []
    if show_tags:
        line = tags_line(tags)
        if line:
            lines.append(line)
    for msg in messages:
        role = str(msg.get("role") or "user")
        content = msg.get("content")
        # a string content is its own text (`message_text` of it gives it back): the
        # messages a round renders hold the text `load_addition` took out already
        text = content if isinstance(content, str) else message_text(msg)
        text = expand_images(text, image_path)
        if compute_dates:
            t = msg.get("time")
            anchor = t if isinstance(t, int) and not isinstance(t, bool) and t > 0 else None
            text = annotate_relative_time(text, anchor or fallback_anchor, tz, week_start)
        lines.append(f"{role}: {text}")
    return "\n".join(lines)


def sort_key(mode: str) -> Callable[[Any], tuple[Any, ...]]:
    """Render order of additions for `recall.sort`."""
    if mode == "alpha":
        return lambda a: (-a.alpha, a.created_at_ms, a.id)
    if mode == "generation":
        return lambda a: (a.generation, a.created_at_ms, a.id)
    return lambda a: (a.created_at_ms, a.id)


def render_entries(additions: Sequence[Any], sort: str) -> list[tuple[Any, str]]:
    """`(addition, entry text)` in render order, numbered from 1."""
    ordered = sorted(additions, key=sort_key(sort))
    return [(a, a.entry(n)) for n, a in enumerate(ordered, start=1)]
