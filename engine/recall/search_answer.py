"""memory_recall's answer: the text the model reads, the structured value, telemetry.

The text (reference §1.3 "返回", §1.14.3, §1.16)::

    ## 主动回忆（memory_recall）
    关键词：… · 返回 N 条（offset=…，limit=…）
    [本轮用户在问助手说过的话…]                   (the 「你说过」 channel was asked)
    [没有 keywords：按约束列出…]                  (a browse: constraints, no keywords)
    [本次回忆已约束事件：…] [标签过滤：…] […]      (each constraint's lines, in order)
    【本页已满：limit=N，已返回 N 条】…          (a full page, before the first entry)
    <blank>
    ### 回忆 1 · 归档于 …（事件时间 …） · α=… · β=… · 第1代 · 关键词：…
    [事件：… · 地点：… · 人物：… · 时间标签：…]
    user: …                                      (images expanded to their paths)
    <blank>
    还有更多：可用 offset=… 继续翻页
    <warnings, one a line>
    <the β rule of the block preamble>[ and its time rule, with computeDates]

Entries are the recall block's entries (`Addition.entry`), numbered from the page's
offset + 1, in the search's order. A miss says why in one line (nothing matched, all
already in the block, past the last page, a constraint filtered every match; an
ambiguous or unknown event's lines say it themselves), then the strike warning from the
third consecutive miss, then the warnings (the constraints' after the call's own).

The value carries what a program needs: the ids found (`ids`, `added` with α / β /
keywords / lane), `page {offset, limit, hasMore, nextOffset}`, `missType`, the strike
count, the filters ignored and the warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import texts
from engine.config import MemoryConfig
from engine.recall.browse import BROWSE_MODE
from engine.recall.constraint import Constraint
from engine.recall.fair import Pick
from engine.recall.round import added_record
from engine.recall.search import SearchPage
from engine.recall.search_args import LIMIT_MAX, SearchArgs
from engine.recall.state import Addition
from engine.recall.strikes import RecallStrikes

__all__ = ["SearchAnswer", "assistant_hint", "refused_answer", "render_answer", "search_record"]


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    """The tool's result: what the model reads, the structured value, isError."""

    text: str
    value: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False


def _ask_hint(cfg: MemoryConfig) -> str:
    time_, event = cfg.time.ask_user_hint, cfg.event.ask_user_hint
    if time_ and event:
        return texts.RECALL_TOOL_ASK_TIME_EVENT
    if time_:
        return texts.RECALL_TOOL_ASK_TIME
    if event:
        return texts.RECALL_TOOL_ASK_EVENT
    return ""


def _strike_text(strikes: RecallStrikes | None, cfg: MemoryConfig) -> str:
    """The escalation line of this call ('' below the third miss)."""
    if strikes is None or not (strikes.warn or strikes.disabled):
        return ""
    head = texts.RECALL_TOOL_STRIKE_DISABLED if strikes.disabled else texts.RECALL_TOOL_STRIKE_WARN
    return head + _ask_hint(cfg)


def _miss_text(args: SearchArgs, page: SearchPage, unreadable: int) -> str:
    keywords = texts.RECALL_TOOL_KEYWORD_SEPARATOR.join(args.keywords)
    kind = page.miss_type
    if kind == "off":
        return texts.RECALL_TOOL_OFF
    for c in page.constraints:
        if kind is not None and c.miss_type == kind:
            return "" if c.stop else c.miss_line  # a stopped call's lines say it all
    if not args.keywords:
        return ""  # filters only: the warning says it all
    if kind == "excluded":
        if page.surfaced == 0:
            return texts.RECALL_TOOL_MISS_IN_BLOCK.format(n=page.in_block)
        return texts.RECALL_TOOL_MISS_SURFACED.format(n=page.in_block + page.surfaced)
    if kind == "offset":
        return texts.RECALL_TOOL_PAGE_END.format(offset=page.offset, total=page.window)
    if unreadable and not kind:
        return texts.RECALL_TOOL_UNREADABLE.format(n=unreadable)
    return texts.RECALL_TOOL_MISS.format(keywords=keywords)


def _value(
    args: SearchArgs,
    page: SearchPage,
    entries: Sequence[tuple[Pick, Addition]],
    strikes: RecallStrikes | None,
    warnings: Sequence[str],
    miss_type: str | None,
) -> dict[str, Any]:
    return {
        "mode": page.mode,
        "keywords": list(args.keywords),
        "paginated": page.paginated,
        "found": len(entries),
        "ids": [a.id for _, a in entries],
        "added": [
            {
                "id": a.id,
                "alpha": a.alpha,
                "beta": a.beta,
                "createdAt": a.created_at_ms,
                "keywords": list(a.keywords),
                "lane": p.lane,
            }
            for p, a in entries
        ],
        "candidates": page.candidates,
        "page": {
            "offset": page.offset,
            "limit": page.limit,
            "hasMore": page.has_more,
            "nextOffset": page.next_offset,
        },
        "missType": miss_type,
        "strikes": strikes.misses if strikes is not None else 0,
        "disabled": strikes.disabled if strikes is not None else False,
        "ignored": list(args.unsupported),
        "warnings": list(warnings),
        "assistantSaid": bool(page.assistant.get("requested")),
        "assistantInfo": page.assistant or None,
        "filtered": dict(page.filtered),
        **{k: v for c in page.constraints for k, v in c.value.items()},
    }


def assistant_hint(page: SearchPage) -> str:
    """The assistantSaid line (§1.3 "返回"): '' when the channel was not asked."""
    info = page.assistant
    if not info.get("requested"):
        return ""
    n = len(info.get("picks") or [])
    if info.get("source") == "auto" and info.get("phrase"):
        return texts.RECALL_TOOL_ASSISTANT_AUTO.format(phrase=info["phrase"], n=n)
    return texts.RECALL_TOOL_ASSISTANT_PARAM.format(n=n)


def answer_miss_type(page: SearchPage, found: int, unreadable: int) -> str | None:
    """The miss type of the answer: the page's, or `unreadable` when every pick of a
    page that had some could not be read."""
    if found == 0 and page.miss_type is None and unreadable:
        return "unreadable"
    return page.miss_type if found == 0 else None


def render_answer(
    args: SearchArgs,
    page: SearchPage | None,
    entries: Sequence[tuple[Pick, Addition]],
    cfg: MemoryConfig,
    *,
    unreadable: int = 0,
    strikes: RecallStrikes | None = None,
    constraints: Sequence[Constraint] = (),
) -> SearchAnswer:
    """The answer of one call (`page` None: nothing searched, e.g. a call with filters
    that do not restrict and no keywords; `constraints` are then its constraints)."""
    if args.error is not None:
        return SearchAnswer(args.error, {"error": args.error, "warnings": []}, is_error=True)
    if page is None:
        page = SearchPage(cfg.recall.mode, args.paginated, args.offset or 0, args.limit)
        page.constraints = tuple(constraints)
    found = len(entries)
    miss_type = answer_miss_type(page, found, unreadable)
    strike = _strike_text(strikes, cfg)
    held = [w for c in page.constraints for w in c.warnings]
    warnings = [*args.warnings, *page.warnings, *held, *([strike] if strike else [])]
    value = _value(args, page, entries, strikes, warnings, miss_type)
    lines = [
        texts.RECALL_TOOL_HEADING,
        texts.RECALL_TOOL_COUNT.format(
            keywords=texts.RECALL_TOOL_KEYWORD_SEPARATOR.join(args.keywords) or "—",
            found=found,
            offset=page.offset,
            limit=page.limit,
        ),
    ]
    hint = assistant_hint(page)
    if hint:
        lines.append(hint)
    if page.mode == BROWSE_MODE:
        lines.append(texts.RECALL_TOOL_BROWSE)
    lines += [line for c in page.constraints for line in c.lines]
    if not entries:
        miss = _miss_text(args, page, unreadable)
        lines += [miss] if miss else []
        lines += warnings
        return SearchAnswer("\n".join(lines), value, is_error=bool(strikes and strikes.disabled))
    if (found >= page.limit or page.has_more) and page.mode != BROWSE_MODE:
        template = (
            texts.RECALL_TOOL_FULL_PAGE_AT_MAX
            if page.limit >= LIMIT_MAX
            else texts.RECALL_TOOL_FULL_PAGE
        )
        lines.append(template.format(limit=page.limit, found=found))
    parts = ["\n".join(lines)]
    first = page.offset + 1
    parts += [a.entry(first + i) for i, (_, a) in enumerate(entries)]
    tail: list[str] = []
    if page.has_more and page.next_offset is not None:
        tail.append(texts.RECALL_TOOL_MORE.format(next=page.next_offset))
    tail += warnings
    tail.append(texts.RECALL_TOOL_TRUST_NOTE)
    if cfg.recall.compute_dates and cfg.recall.mode != "legacy":
        tail.append(texts.RECALL_BLOCK_TIME_RULE)
    parts.append("\n".join(tail))
    return SearchAnswer("\n\n".join(parts), value)


def refused_answer(strikes: RecallStrikes, cfg: MemoryConfig) -> SearchAnswer:
    """A call after the tool was disabled for the turn (isError; nothing searched)."""
    text = texts.RECALL_TOOL_REFUSED.format(n=strikes.misses) + _ask_hint(cfg)
    value = {"disabled": True, "strikes": strikes.misses, "found": 0, "ids": [], "warnings": []}
    return SearchAnswer(text, value, is_error=True)


def search_record(
    args: SearchArgs,
    page: SearchPage | None,
    entries: Sequence[tuple[Pick, Addition]],
    *,
    now_ms: int,
    turn: int | None,
    round_: int,
    miss_type: str | None,
    strikes: int,
) -> dict[str, Any]:
    """The `recall` telemetry record of a memory_recall call (§1.3 遥测: offset, limit,
    hasMore, missType), marked `trigger: "tool"` to tell it from automatic rounds."""
    sel = page.selection if page is not None else None
    return {
        "type": "recall",
        "trigger": "tool",
        "tool": "memory_recall",
        "time": now_ms,
        "mode": page.mode if page is not None else None,
        "round": round_,
        "turn": turn,
        "paginated": args.paginated,
        "queryKeywords": len(args.keywords),
        "candidates": page.candidates if page is not None else 0,
        "window": page.window if page is not None else 0,
        "lanesPicked": page.lanes_picked() if page is not None else {},
        "pops": sel.pops if sel is not None else 0,
        "reInjections": sel.re_injections if sel is not None else 0,
        "timeFiltered": page.filtered.get("time", 0) if page is not None else 0,
        "eventFiltered": page.filtered.get("event", 0) if page is not None else 0,
        "tagFiltered": page.filtered.get("tag", 0) if page is not None else 0,
        "offset": page.offset if page is not None else (args.offset or 0),
        "limit": args.limit,
        "hasMore": page.has_more if page is not None else False,
        "nextOffset": page.next_offset if page is not None else None,
        "missType": miss_type,
        "strikes": strikes,
        "ignored": list(args.unsupported),
        "assistantSaid": bool(page.assistant.get("requested")) if page is not None else False,
        "assistantInfo": (page.assistant or None) if page is not None else None,
        "added": [added_record(p, a) for p, a in entries],
        "addedChars": sum(a.chars for _, a in entries),
        "addedTokens": sum(a.tokens for _, a in entries),
        **{
            k: v
            for c in (page.constraints if page is not None else ())
            for k, v in c.record.items()
        },
    }
