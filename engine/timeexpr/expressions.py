"""Fuzzy time expressions in text → civil-day spans (reference §1.13.1, §1.14.1).

One engine for both uses of relative time: archive-time time tags (`engine.timeexpr.tags`)
and the recall block's relative-time notes (`engine.recall.dates`). Everything is
resolved against an *anchor* civil date (the message's own time in `time.timezone`),
never the clock.

Recognised (longest match first, non-overlapping, left to right):

* days: 今天/今日 昨天/昨日 前天 大前天 明天/明日 后天 大后天; today, tonight, yesterday,
  tomorrow, the day before yesterday, the day after tomorrow;
* weeks (`timeTag.weekStart`: 1 = Monday … 7 = Sunday): 本周/这周/这星期/这个星期/这礼拜,
  上周…, 下周…, 上上周, 下下周; this / last / next week;
* weekdays: 周X / 星期X / 礼拜X (X = 一…六, 日, 天) in the anchor's week, 上周X, 下周X, 上上周X,
  下下周X, …周末 (its Saturday and the Sunday after); last / this / next Monday…;
  a bare 周X after 每 or a numeral (每周一, 一周一次) is not a date;
* months: 本月/这个月, 上个月/上月, 下个月/下月, 上上个月, 下下个月; this / last / next month;
* years: 今年, 去年, 前年, 大前年, 明年, 后年, 大后年; this / last / next year;
* counted: N 天 / 周 / 星期 / 个月 / 年 前 / 后 (以前, 之前, 以后, 之后; N in digits or 一…九十九,
  两); N days / weeks / months / years ago, in N …, N … later (N in digits, a, one … twelve):
  the day, week, month or year that many units away;
* dates: YYYY年M月D日 / 号, YYYY年M月, YYYY年 (1900-2199), YYYY-MM-DD (also / and .), M月D日 / 号
  (numerals too) in the anchor's year, or in the year of a relative-year phrase right before
  it (去年3月5日); D号 / D日 right after a relative month (上个月15号).

「上午/下午/晚上」 and other times of day do not change a day's span. An expression that
names no valid date (2月30日) is not one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Final

from engine.timeexpr.civil import add_months

__all__ = [
    "SHIFT_KINDS",
    "SHIFT_OVERLAPS",
    "Found",
    "Span",
    "find_expressions",
    "may_hold_shift",
    "week_first",
]

DAY, WEEK, MONTH, YEAR = "day", "week", "month", "year"


@dataclass(frozen=True, slots=True)
class Span:
    """Civil days `first` … `last` (inclusive) at one granularity."""

    first: date
    last: date
    granularity: str

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1


@dataclass(frozen=True, slots=True)
class Found:
    """One expression in a text: where, what it says, what it resolves to."""

    start: int
    end: int
    text: str
    span: Span
    relative: bool
    """A shift from the anchor (昨天, 上周, 三天前…) rather than a written date."""
    lang: str
    """'zh' or 'en'."""
    kind: str = "date"
    """What wrote it: day / week / month / year (a shift by whole units: 昨天, 上周, 下个月,
    明年 …), weekday, weekend, count (三天前), date (a written date)."""


def week_first(d: date, week_start: int) -> date:
    """The first day of `d`'s week; `week_start` 1 = Monday … 7 = Sunday (0: Sunday)."""
    start_wd = (week_start - 1) % 7 if week_start else 6
    return d - timedelta(days=(d.weekday() - start_wd) % 7)


# ---- numbers ---------------------------------------------------------------------

_CN_DIGIT = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4}
_CN_DIGIT.update({"五": 5, "六": 6, "七": 7, "八": 8, "九": 9})
_CN_NUM = r"(?:\d{1,4}|[一二两三四五六七八九]?十[一二三四五六七八九]?|[一二两三四五六七八九])"
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_EN_NUM.update({"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12})


def _number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if text.lower() in _EN_NUM:
        return _EN_NUM[text.lower()]
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (_CN_DIGIT[tens] if tens else 1) * 10 + (_CN_DIGIT[ones] if ones else 0)
    return _CN_DIGIT.get(text)


# ---- spans -------------------------------------------------------------------------


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _day(anchor: date, shift: int) -> Span | None:
    try:
        d = anchor + timedelta(days=shift)
    except OverflowError:
        return None
    return Span(d, d, DAY)


def _week(anchor: date, shift: int, week_start: int) -> Span | None:
    try:
        first = week_first(anchor, week_start) + timedelta(weeks=shift)
        return Span(first, first + timedelta(days=6), WEEK)
    except OverflowError:
        return None


def _month(year: int, month: int, shift: int = 0) -> Span | None:
    y, m = add_months(year, month, shift)
    if not 1 <= y <= 9999:
        return None
    first = date(y, m, 1)
    ny, nm = add_months(y, m, 1)
    last = date(ny, nm, 1) - timedelta(days=1) if ny <= 9999 else date(9999, 12, 31)
    return Span(first, last, MONTH)


def _year(year: int) -> Span | None:
    if not 1 <= year <= 9999:
        return None
    return Span(date(year, 1, 1), date(year, 12, 31), YEAR)


def _shifted(anchor: date, unit: str, n: int, week_start: int) -> Span | None:
    if unit == DAY:
        return _day(anchor, n)
    if unit == WEEK:
        return _week(anchor, n, week_start)
    if unit == MONTH:
        return _month(anchor.year, anchor.month, n)
    return _year(anchor.year + n)


# ---- the patterns ------------------------------------------------------------------

_DAY_WORDS = {
    "大前天": -3,
    "前天": -2,
    "昨天": -1,
    "昨日": -1,
    "今天": 0,
    "今日": 0,
    "明天": 1,
    "明日": 1,
    "后天": 2,
    "大后天": 3,
}
_WEEK_WORDS = {"上上": -2, "上": -1, "本": 0, "这": 0, "下": 1, "下下": 2}
_WEEK_NOUNS = ("个星期", "星期", "个礼拜", "礼拜", "周")
_WEEK_NOUN = f"(?:{'|'.join(_WEEK_NOUNS)})"  # 个?星期|个?礼拜|周, spelled out
_WEEKDAY = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_MONTH_WORDS = {
    "上上个月": -2,
    "上个月": -1,
    "上月": -1,
    "本月": 0,
    "这个月": 0,
    "这月": 0,
    "下个月": 1,
    "下月": 1,
    "下下个月": 2,
}
_YEAR_WORDS = {"大前年": -3, "前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2, "大后年": 3}
_CN_UNIT = {"天": DAY, "日": DAY, "周": WEEK, "星期": WEEK, "个星期": WEEK, "礼拜": WEEK}
_CN_UNIT.update({"个礼拜": WEEK, "个月": MONTH, "年": YEAR})
_EN_DAY = {
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "yesterday": -1,
    "today": 0,
    "tonight": 0,
    "tomorrow": 1,
}
_EN_SHIFT = {"last": -1, "this": 0, "next": 1}
_EN_WEEKDAY = {
    "monday": 0,
    "tuesday": 1,
    "wednesday": 2,
    "thursday": 3,
    "friday": 4,
    "saturday": 5,
    "sunday": 6,
}
_EN_NUMS = "|".join(sorted(_EN_NUM, key=len, reverse=True))


def _alt(words: Iterable[str]) -> str:
    return "|".join(map(re.escape, sorted(words, key=lambda w: (-len(w), w))))


Resolver = Callable[[re.Match[str], date, int], Span | None]


def _r_day(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    return _day(anchor, _DAY_WORDS[m.group(0)])


def _r_week(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    return _week(anchor, _WEEK_WORDS[m.group(1)], ws)


def _weekday_in(anchor: date, shift: int, weekday: int, ws: int) -> date | None:
    wk = _week(anchor, shift, ws)
    if wk is None:
        return None
    return wk.first + timedelta(days=(weekday - wk.first.weekday()) % 7)


def _r_weekday(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    shift = _WEEK_WORDS[m.group(1)] if m.group(1) else 0
    d = _weekday_in(anchor, shift, _WEEKDAY[m.group(2)], ws)
    return Span(d, d, DAY) if d is not None else None


def _r_weekend(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    shift = _WEEK_WORDS[m.group(1)] if m.group(1) else 0
    sat = _weekday_in(anchor, shift, 5, ws)
    if sat is None or sat >= date(9999, 12, 31):
        return None
    return Span(sat, sat + timedelta(days=1), DAY)


def _r_month(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    return _month(anchor.year, anchor.month, _MONTH_WORDS[m.group(0)])


def _r_year(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    return _year(anchor.year + _YEAR_WORDS[m.group(0)])


def _r_cn_count(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    n = _number(m.group(1))
    if n is None:
        return None
    sign = -1 if m.group(3).endswith("前") else 1
    return _shifted(anchor, _CN_UNIT[m.group(2)], sign * n, ws)


def _r_ymd(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    month, day = _number(m.group(2)), _number(m.group(3))
    d = _safe_date(int(m.group(1)), month or 0, day or 0)
    return Span(d, d, DAY) if d is not None else None


def _r_ym(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    month = _number(m.group(2)) or 0
    return _month(int(m.group(1)), month) if 1 <= month <= 12 else None


def _r_y(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    return _year(int(m.group(1)))


def _r_md(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    month, day = _number(m.group(1)), _number(m.group(2))
    d = _safe_date(anchor.year, month or 0, day or 0)
    return Span(d, d, DAY) if d is not None else None


def _r_en_day(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    return _day(anchor, _EN_DAY[m.group(0).lower()])


def _r_en_unit(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    return _shifted(anchor, m.group(2).lower(), _EN_SHIFT[m.group(1).lower()], ws)


def _r_en_weekday(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    shift = _EN_SHIFT[m.group(1).lower()]
    d = _weekday_in(anchor, shift, _EN_WEEKDAY[m.group(2).lower()], ws)
    return Span(d, d, DAY) if d is not None else None


def _r_en_ago(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    n = _number(m.group(1))
    return None if n is None else _shifted(anchor, m.group(2).lower(), -n, ws)


def _r_en_in(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    n = _number(m.group(1))
    return None if n is None else _shifted(anchor, m.group(2).lower(), n, ws)


_NOT_AFTER_NUMERAL = r"(?<![每一二两三四五六七八九十几\d])"
_EN_UNITS = r"(day|week|month|year)s?"


@dataclass(frozen=True, slots=True)
class _Pattern:
    name: str
    regex: re.Pattern[str]
    resolve: Resolver
    relative: bool
    lang: str = "zh"
    gate: tuple[str, ...] = ()
    """Substrings one of which every match holds (of the lower-cased text for 'en'):
    a text with none of them skips the pattern without running it."""


def _r_ymd_iso(m: re.Match[str], anchor: date, ws: int) -> Span | None:
    d = _safe_date(int(m.group(1)), int(m.group(3)), int(m.group(4)))
    return Span(d, d, DAY) if d is not None else None


_YMD = rf"(?<!\d)((?:19|20|21)\d\d)\s*年\s*({_CN_NUM})\s*月\s*({_CN_NUM})\s*[日号]"
_YM = rf"(?<!\d)((?:19|20|21)\d\d)\s*年\s*({_CN_NUM})\s*月(?!\s*{_CN_NUM}\s*[日号])"
_CN_COUNT = (
    rf"(?<![\d.])({_CN_NUM})\s*(个星期|个礼拜|个月|星期|礼拜|天|日|周|年)"
    r"(以前|之前|以后|之后|前|后)"
)
_EN_N = rf"(\d{{1,4}}|{_EN_NUMS})"
_WEEK_GATE = ("周", "星期", "礼拜")
_EN_SHIFT_GATE = ("last", "this", "next")
_EN_UNIT_GATE = ("day", "week", "month", "year")

_PATTERNS: tuple[_Pattern, ...] = (
    _Pattern("day", re.compile(_alt(_DAY_WORDS)), _r_day, True, gate=("天", "日")),
    _Pattern(
        "weekday",
        re.compile(f"({_alt(_WEEK_WORDS)}){_WEEK_NOUN}([一二三四五六日天])"),
        _r_weekday,
        True,
        gate=_WEEK_GATE,
    ),
    _Pattern(
        "weekday",
        re.compile(f"{_NOT_AFTER_NUMERAL}()(?:星期|礼拜|周)([一二三四五六日天])"),
        _r_weekday,
        True,
        gate=_WEEK_GATE,
    ),
    _Pattern(
        "weekend", re.compile(f"({_alt(_WEEK_WORDS)})?个?周末"), _r_weekend, True, gate=("周末",)
    ),
    _Pattern(
        "week", re.compile(f"({_alt(_WEEK_WORDS)}){_WEEK_NOUN}"), _r_week, True, gate=_WEEK_GATE
    ),
    _Pattern("month", re.compile(_alt(_MONTH_WORDS)), _r_month, True, gate=("月",)),
    _Pattern("year", re.compile(_alt(_YEAR_WORDS)), _r_year, True, gate=("年",)),
    _Pattern("count", re.compile(_CN_COUNT), _r_cn_count, True, gate=("前", "后")),
    _Pattern("date", re.compile(_YMD), _r_ymd, False, gate=("年",)),
    _Pattern("date", re.compile(_YM), _r_ym, False, gate=("年",)),
    _Pattern(
        "date", re.compile(r"(?<!\d)((?:19|20|21)\d\d)\s*年(?![代级度])"), _r_y, False, gate=("年",)
    ),
    _Pattern(
        "date",
        re.compile(r"(?<![\d.])((?:19|20|21)\d\d)([-/.])(\d{1,2})\2(\d{1,2})(?!\d)"),
        _r_ymd_iso,
        False,
        gate=("19", "20", "21"),
    ),
    _Pattern(
        "month-day",
        re.compile(rf"(?<!\d)({_CN_NUM})\s*月\s*({_CN_NUM})\s*[日号]"),
        _r_md,
        False,
        gate=("月",),
    ),
    _Pattern("day", re.compile(_alt(_EN_DAY), re.I), _r_en_day, True, "en", ("to", "yesterday")),
    _Pattern(
        "shift",
        re.compile(r"\b(last|this|next)\s+(week|month|year)\b", re.I),
        _r_en_unit,
        True,
        "en",
        _EN_SHIFT_GATE,
    ),
    _Pattern(
        "weekday",
        re.compile(r"\b(last|this|next)\s+(" + "|".join(_EN_WEEKDAY) + r")\b", re.I),
        _r_en_weekday,
        True,
        "en",
        _EN_SHIFT_GATE,
    ),
    _Pattern(
        "count",
        re.compile(rf"\b{_EN_N}\s+{_EN_UNITS}\s+ago\b", re.I),
        _r_en_ago,
        True,
        "en",
        (" ago",),
    ),
    _Pattern(
        "count",
        re.compile(rf"\bin\s+{_EN_N}\s+{_EN_UNITS}\b", re.I),
        _r_en_in,
        True,
        "en",
        _EN_UNIT_GATE,
    ),
    _Pattern(
        "count",
        re.compile(rf"\b{_EN_N}\s+{_EN_UNITS}\s+later\b", re.I),
        _r_en_in,
        True,
        "en",
        (" later",),
    ),
)

_DAY_OF_MONTH = re.compile(rf"\s*({_CN_NUM})\s*[日号]")


def _day_found(start: int, end: int, text: str, d: date | None) -> Found | None:
    return None if d is None else Found(start, end, text, Span(d, d, DAY), True, "zh", "date")


SHIFT_OVERLAPS: Final = frozenset({"day", "weekday", "weekend", "week", "month", "year", "count"})
"""The Chinese kinds a shift phrase (昨天, 上周, 下个月, 明年) can be part of or overlap
(下周二, 上周末, 三天前): scanning these alone finds exactly the shifts a full scan finds."""

SHIFT_KINDS: Final = frozenset({DAY, WEEK, MONTH, YEAR})
"""The kinds of a Chinese shift by whole days, weeks, months or years (昨天, 上周, 下个月,
明年): what the recall block annotates."""

# Each Chinese shift pattern matches only words of a finite list (a day word, a week
# word then a week noun, a month word, a year word), so a shift a scan finds is one of
# these words, found in the text: a text holding none of them holds no shift. One
# search of their alternation (literals: the engine skips to the characters that can
# start one) screens out most archived messages before their scan.
_SHIFT_WORDS = (
    *_DAY_WORDS,
    *(w + n for w in _WEEK_WORDS for n in _WEEK_NOUNS),
    *_MONTH_WORDS,
    *_YEAR_WORDS,
)
_SHIFT_SCREEN = re.compile(_alt(set(_SHIFT_WORDS)))


def may_hold_shift(text: str) -> bool:
    """False only when `text` holds no Chinese shift (:data:`SHIFT_KINDS`) for any
    anchor: a scan of it then finds none (exact; a True may still find none)."""
    return _SHIFT_SCREEN.search(text) is not None


def find_expressions(
    text: str,
    anchor: date,
    *,
    week_start: int = 1,
    kinds: frozenset[str] | None = None,
    lang: str | None = None,
) -> list[Found]:
    """Every expression of `text` (module docstring), left to right, resolved against
    `anchor`; `kinds` / `lang`: only the patterns of these kinds / of this language (a
    subset scan, for callers that keep only some: see `SHIFT_OVERLAPS`)."""
    if not text:
        return []
    hits: list[tuple[int, int, int, re.Match[str]]] = []
    low: str | None = None  # lowered once, when an English pattern is asked for
    for n, pattern in enumerate(_PATTERNS):
        if (kinds is not None and pattern.name not in kinds) or (
            lang is not None and pattern.lang != lang
        ):
            continue
        within = text
        if pattern.lang == "en":
            if low is None:
                low = text.lower()
            within = low
        if pattern.gate and not any(g in within for g in pattern.gate):
            continue
        for m in pattern.regex.finditer(text):
            if m.end() > m.start():
                hits.append((m.start(), m.start() - m.end(), n, m))
    hits.sort(key=lambda h: (h[0], h[1], h[2]))
    out: list[Found] = []
    pos = 0
    for start, _, n, m in hits:
        if start < pos:
            continue
        pattern = _PATTERNS[n]
        span = pattern.resolve(m, anchor, week_start)
        if span is None:
            continue
        found = Found(
            start, m.end(), m.group(0), span, pattern.relative, pattern.lang, pattern.name
        )
        prev = out[-1] if out else None
        if (
            pattern.name == "month-day"
            and prev is not None
            and prev.end == start
            and prev.relative
            and prev.span.granularity == YEAR
        ):
            # 去年3月5日: the month-day of that year
            d = _safe_date(prev.span.first.year, span.first.month, span.first.day)
            found = _day_found(start, m.end(), m.group(0), d) or found
        out.append(found)
        pos = m.end()
        if pattern.name == "month" and (dm := _DAY_OF_MONTH.match(text, pos)) is not None:
            # 上个月15号: that day of the month
            first = span.first
            d = _safe_date(first.year, first.month, _number(dm.group(1)) or 0)
            day = _day_found(dm.start(1), dm.end(), text[dm.start(1) : dm.end()], d)
            if day is not None:
                out.append(day)
                pos = dm.end()
    return out
