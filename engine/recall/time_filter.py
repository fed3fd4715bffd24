"""memory_recall's time constraints (reference §1.10, §1.13.2, §3.0.3, §3.0.6).

Two kinds, each one `Constraint` of kind `time` (their removals add up to the recall
record's `timeFiltered`):

* the time window (`timeFrom` / `timeTo` / `granularity`): `normalize_time_query` gives
  its levels; each level allows the folders the session's `TimeIndex` puts in that
  window ("timeTag wins": a folder with time tags by its tags, else by its event
  interval). `widen` runs the search level by level, from the query's own window
  through the ladder (`time.fallback`), and keeps the first with at least
  `time.fallbackMinResults` results; an explicit two-ended range has one level and
  never widens. The answer says 时间范围：…（日粒度 · 已放宽到 ±1 天）; the value and the
  record carry `timeWindow {from, to, level, widenedTo}`. A miss it caused is
  missType `time`.
* `timeText`: its fuzzy expressions (`engine.timeexpr.expressions`, anchored on the
  call's time) become windows that only time tags are matched against ("timeText 只做时间
  标签匹配"); a miss it caused is missType `time-tag`.

Modes, exactly as §3.0.3 / §3.0.6 say: `time.mode = constrain` filters; `index` keeps
the index and records the window but constrains nothing (the answer says so); `off`
ignores the parameters with a warning. A call with time and no keywords is a browse of
the window (event order) under `constrain`; under `index` or `off` it returns nothing,
with 纯时间浏览需要 time.mode='constrain'. `timeTag.mode` does the same for `timeText`.
Invalid time arguments constrain nothing and say why; without keywords such a call
returns nothing (never the whole store).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import texts
from engine.config import MemoryConfig
from engine.recall.constraint import Constraint
from engine.recall.search import SearchPage
from engine.recall.search_args import SearchArgs
from engine.timeexpr.civil import local_date, resolve_timezone, window_ms
from engine.timeexpr.expressions import find_expressions
from engine.timeexpr.index import TimeIndex
from engine.timeexpr.query import Level, TimeQuery, normalize_time_query
from engine.timeexpr.tags import span_label

__all__ = ["TIME_KIND", "TimePlan", "plan_time", "widen"]

TIME_KIND = "time"
_STOPPING_MISSES = frozenset({"off"})


def _window_text(level: Level) -> str:
    if level.first is None or level.last is None:
        return ""
    if level.first == level.last:
        return level.first.isoformat()
    return texts.TIME_WINDOW_RANGE.format(
        first=level.first.isoformat(), last=level.last.isoformat()
    )


def _widened_note(level: Level, min_days: int) -> str:
    if level.name == "day3":
        if min_days % 2:
            return texts.TIME_WIDENED["day3"].format(k=(min_days - 1) // 2)
        return texts.TIME_WIDENED_DAYS.format(n=min_days)
    return texts.TIME_WIDENED[level.name]


@dataclass
class TimePlan:
    """The time constraints of one call, before the search picks a level."""

    query: TimeQuery | None
    """The normalized window (None: no window arguments)."""
    mode: str
    tag: Constraint | None = None
    """The `timeText` constraint (None: no timeText)."""
    notes: tuple[str, ...] = ()
    """Warnings of the window that no level carries (mode off, browse refused…)."""
    index: TimeIndex | None = None
    min_days: int = 3
    min_results: int = 1
    browse_refused: bool = False
    """No keywords and no constraint that restricts: nothing is to be listed."""
    keywordless: bool = False
    """A browse: its misses say the window is empty, not that keywords missed."""
    ask: bool = True
    """`time.askUserHint`: a miss suggests asking the user for the time range."""
    _levels: dict[int, Constraint] = field(default_factory=dict)

    @property
    def levels(self) -> int:
        """How many windows the search may try (0: the window constrains nothing)."""
        if self.query is None or self.mode == "off" or not self.query.constrained:
            return 0
        return len(self.query.levels) if self.mode == "constrain" else 1

    def constraints(self, level: int | None) -> list[Constraint]:
        """The call's time constraints with the window at `level` (None: no level)."""
        out: list[Constraint] = []
        if level is not None and self.levels:
            out.append(self.window(level))
        elif self.notes:
            out.append(Constraint(TIME_KIND, warnings=self.notes))
        if self.tag is not None:
            out.append(self.tag)
        return out

    def window(self, level: int) -> Constraint:
        """The window constraint of level `level` (0: the query's own window)."""
        cached = self._levels.get(level)
        if cached is None:
            cached = self._levels[level] = self._window(level)
        return cached

    def _window(self, n: int) -> Constraint:
        assert self.query is not None
        q = self.query
        first = q.levels[0]
        lv = q.levels[n]
        shown = lv if lv.bounded else first
        notes: list[str] = []
        if self.mode != "constrain":
            notes.append(texts.TIME_NOTE_INDEX)
        elif q.explicit:
            notes.append(texts.TIME_NOTE_EXPLICIT)
        elif n > 0:
            notes.append(_widened_note(lv, self.min_days))
        note = "".join(texts.TIME_NOTE_SEPARATOR + x for x in notes)
        line = texts.TIME_LINE.format(
            window=_window_text(shown),
            granularity=texts.TIME_GRANULARITY.get(q.granularity, texts.TIME_GRANULARITY["day"]),
            note=note,
        )
        window = {
            "from": lv.start,
            "to": lv.end,
            "level": n,
            "widenedTo": lv.name if n > 0 else None,
        }
        value = {
            **window,
            "granularity": q.granularity,
            "explicit": q.explicit,
            "mode": self.mode,
            "enforced": self.mode == "constrain",
            "firstDay": lv.first.isoformat() if lv.first is not None else None,
            "lastDay": lv.last.isoformat() if lv.last is not None else None,
        }
        warnings = list(q.warnings)
        if self.mode != "constrain":
            warnings.append(texts.TIME_INDEX_ONLY)
            warnings.extend(self.notes)
            return Constraint(
                TIME_KIND,
                lines=(line,),
                warnings=tuple(warnings),
                value={"timeWindow": value},
                record={"timeWindow": window},
            )
        allowed: frozenset[str] | None = None
        if lv.bounded and self.index is not None:
            assert lv.start is not None and lv.end is not None
            allowed = frozenset(self.index.window_ids(lv.start, lv.end))
        if self.keywordless:
            miss = texts.TIME_EMPTY.format(window=_window_text(shown))
        else:
            miss = texts.TIME_MISS.format(window=_window_text(shown))
            if q.explicit:
                miss += texts.TIME_MISS_EXPLICIT
        if self.ask:
            miss += texts.TIME_MISS_ASK
        return Constraint(
            TIME_KIND,
            allowed=allowed,
            miss_type="time",
            lines=(line,),
            miss_line=miss,
            warnings=tuple(warnings),
            value={"timeWindow": value},
            record={"timeWindow": window},
        )


def _time_tag(
    text: str, index: TimeIndex | None, cfg: MemoryConfig, now_ms: int, keywordless: bool
) -> Constraint:
    mode = cfg.time_tag.mode
    info: dict[str, Any] = {"text": text, "mode": mode, "enforced": False}
    if mode == "off":
        info["status"] = "disabled"
        return Constraint(TIME_KIND, warnings=(texts.TIME_TAG_OFF,), value={"timeTagInfo": info})
    tz = resolve_timezone(cfg.time.timezone)
    found = find_expressions(text, local_date(now_ms, tz), week_start=cfg.time_tag.week_start)
    spans = [f.span for f in found if f.span.days <= cfg.time_tag.max_span_days]
    if not spans:
        info["status"] = "unrecognised"
        return Constraint(
            TIME_KIND,
            warnings=(texts.TIME_TAG_UNRECOGNISED.format(text=text),),
            value={"timeTagInfo": info},
        )
    windows: list[dict[str, Any]] = []
    ids: set[str] = set()
    for span in spans:
        start, end = window_ms(span.first, span.last, tz)
        windows.append({"from": start, "to": end, "label": span_label(span)})
        if index is not None:
            ids |= index.tag_ids(start, end)
    shown = texts.TIME_TAG_WINDOW_SEPARATOR.join(str(w["label"]) for w in windows)
    info.update(windows=windows, matched=len(ids))
    if mode != "constrain":
        info["status"] = "disabled"
        return Constraint(
            TIME_KIND,
            warnings=(texts.TIME_TAG_INDEX_ONLY.format(text=text, n=len(ids)),),
            value={"timeTagInfo": info},
        )
    info.update(status="matched" if ids else "empty", enforced=True)
    return Constraint(
        TIME_KIND,
        allowed=frozenset(ids),
        miss_type="time-tag",
        lines=(texts.TIME_TAG_LINE.format(text=text, windows=shown, n=len(ids)),),
        miss_line=(texts.TIME_TAG_EMPTY if keywordless else texts.TIME_TAG_MISS).format(
            text=text, windows=shown
        ),
        value={"timeTagInfo": info},
        record={"timeText": text, "timeTagWindows": [[w["from"], w["to"]] for w in windows]},
    )


def plan_time(
    args: SearchArgs,
    index: TimeIndex | None,
    cfg: MemoryConfig,
    *,
    now_ms: int,
    keywordless: bool,
    restricted: bool = False,
) -> TimePlan:
    """The time constraints of a call; `keywordless`: it has no keywords (a browse),
    `restricted`: other constraints (event, tags) restrict it."""
    tc = cfg.time
    window_given = any(v is not None for v in (args.time_from, args.time_to, args.granularity))
    query = (
        normalize_time_query(args.time_from, args.time_to, args.granularity, now_ms=now_ms, cfg=cfg)
        if window_given
        else None
    )
    tag = None
    if args.time_text is not None:
        tag = _time_tag(args.time_text, index, cfg, now_ms, keywordless)
    plan = TimePlan(
        query,
        tc.mode,
        tag,
        index=index,
        min_days=max(1, tc.min_range_days),
        min_results=tc.effective_fallback_min_results,
        keywordless=keywordless,
        ask=tc.ask_user_hint,
    )
    notes: list[str] = []
    if query is not None and tc.mode == "off":
        given = [
            n
            for n, v in (
                ("timeFrom", args.time_from),
                ("timeTo", args.time_to),
                ("granularity", args.granularity),
            )
            if v is not None
        ]
        notes.append(texts.TIME_OFF.format(params=texts.RECALL_TOOL_PARAM_SEPARATOR.join(given)))
    elif query is not None and not query.constrained:
        notes.extend(query.warnings)
    restricts = (tc.mode == "constrain" and plan.levels > 0) or (
        tag is not None and tag.allowed is not None
    )
    if keywordless and not restricted and not restricts:
        plan.browse_refused = True
        if query is not None and tc.mode != "constrain":
            notes.append(texts.TIME_BROWSE_NEEDS_CONSTRAIN.format(mode=tc.mode))
        else:
            notes.append(texts.TIME_NOTHING_TO_BROWSE)
    plan.notes = tuple(notes)
    return plan


def widen(
    plan: TimePlan, run: Callable[[Sequence[Constraint]], SearchPage], *, browse: bool = False
) -> tuple[SearchPage, list[Constraint]]:
    """Run the search with each window level in turn (module docstring); the page and
    the time constraints of the level kept. A browse never widens to `all`: listing the
    whole store is no answer to a time question."""
    levels = plan.levels
    if levels == 0:
        none = plan.constraints(None)
        return run(none), none
    page: SearchPage | None = None
    cs: list[Constraint] = []
    for level in range(levels):
        if browse and level > 0 and plan.window(level).allowed is None:
            break
        cs = plan.constraints(level)
        page = run(cs)
        stopped = page.miss_type in _STOPPING_MISSES or any(c.stop for c in page.constraints)
        if page.candidates >= plan.min_results or stopped:
            break
    assert page is not None
    return page, cs
