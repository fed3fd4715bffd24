"""The relative-time engine (engine.timeexpr.expressions, civil) and the block's relative-
time notes that use it (engine.recall.dates)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recall.dates import annotate_relative_time
from engine.timeexpr.civil import day_start, local_date, resolve_timezone, to_local
from engine.timeexpr.expressions import find_expressions, week_first

ANCHOR = date(2026, 5, 28)  # a Thursday


def spans(text: str, anchor: date = ANCHOR, week_start: int = 1) -> list[tuple[str, str, str, str]]:
    return [
        (f.text, f.span.first.isoformat(), f.span.last.isoformat(), f.span.granularity)
        for f in find_expressions(text, anchor, week_start=week_start)
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("昨天去了杭州", [("昨天", "2026-05-27", "2026-05-27", "day")]),
        (
            "大前天和大后天",
            [
                ("大前天", "2026-05-25", "2026-05-25", "day"),
                ("大后天", "2026-05-31", "2026-05-31", "day"),
            ],
        ),
        (
            "今日、明日",
            [
                ("今日", "2026-05-28", "2026-05-28", "day"),
                ("明日", "2026-05-29", "2026-05-29", "day"),
            ],
        ),
        ("上上周", [("上上周", "2026-05-11", "2026-05-17", "week")]),
        ("下下周", [("下下周", "2026-06-08", "2026-06-14", "week")]),
        ("上个星期", [("上个星期", "2026-05-18", "2026-05-24", "week")]),
        ("下周二见", [("下周二", "2026-06-02", "2026-06-02", "day")]),
        ("周三开会", [("周三", "2026-05-27", "2026-05-27", "day")]),
        ("上周日", [("上周日", "2026-05-24", "2026-05-24", "day")]),
        ("这周末", [("这周末", "2026-05-30", "2026-05-31", "day")]),
        ("上个月", [("上个月", "2026-04-01", "2026-04-30", "month")]),
        ("下下个月", [("下下个月", "2026-07-01", "2026-07-31", "month")]),
        ("去年", [("去年", "2025-01-01", "2025-12-31", "year")]),
        ("大前年", [("大前年", "2023-01-01", "2023-12-31", "year")]),
        ("3天前", [("3天前", "2026-05-25", "2026-05-25", "day")]),
        ("三天后", [("三天后", "2026-05-31", "2026-05-31", "day")]),
        ("十二天以前", [("十二天以前", "2026-05-16", "2026-05-16", "day")]),
        ("两周前", [("两周前", "2026-05-11", "2026-05-17", "week")]),
        ("2 个月之后", [("2 个月之后", "2026-07-01", "2026-07-31", "month")]),
        ("五年前", [("五年前", "2021-01-01", "2021-12-31", "year")]),
        ("2026年10月31日", [("2026年10月31日", "2026-10-31", "2026-10-31", "day")]),
        ("2026年10月", [("2026年10月", "2026-10-01", "2026-10-31", "month")]),
        ("2025年", [("2025年", "2025-01-01", "2025-12-31", "year")]),
        ("2026-10-31 上线", [("2026-10-31", "2026-10-31", "2026-10-31", "day")]),
        ("12月3号", [("12月3号", "2026-12-03", "2026-12-03", "day")]),
        ("三月五日", [("三月五日", "2026-03-05", "2026-03-05", "day")]),
        (
            "去年3月5日",
            [
                ("去年", "2025-01-01", "2025-12-31", "year"),
                ("3月5日", "2025-03-05", "2025-03-05", "day"),
            ],
        ),
        (
            "上个月15号",
            [
                ("上个月", "2026-04-01", "2026-04-30", "month"),
                ("15号", "2026-04-15", "2026-04-15", "day"),
            ],
        ),
        ("昨天晚上", [("昨天", "2026-05-27", "2026-05-27", "day")]),
        ("yesterday we met", [("yesterday", "2026-05-27", "2026-05-27", "day")]),
        (
            "the day before yesterday",
            [("the day before yesterday", "2026-05-26", "2026-05-26", "day")],
        ),
        ("Last week", [("Last week", "2026-05-18", "2026-05-24", "week")]),
        ("next month", [("next month", "2026-06-01", "2026-06-30", "month")]),
        ("3 days ago", [("3 days ago", "2026-05-25", "2026-05-25", "day")]),
        ("in two weeks", [("in two weeks", "2026-06-08", "2026-06-14", "week")]),
        ("a year ago", [("a year ago", "2025-01-01", "2025-12-31", "year")]),
        ("next Friday", [("next Friday", "2026-06-05", "2026-06-05", "day")]),
    ],
)
def test_expressions_resolve_against_the_anchor(text: str, expected: list[tuple[str, ...]]) -> None:
    assert spans(text) == expected


@pytest.mark.parametrize(
    "text", ["每周一开会", "一周一次", "2月30日", "13月1日", "周年庆", "版本 2.3.4", "port 2026"]
)
def test_what_names_no_date_is_no_expression(text: str) -> None:
    assert spans(text) == []


def test_week_start_moves_weeks_and_weekdays() -> None:
    # weekStart 7: weeks run Sunday .. Saturday
    assert spans("本周", week_start=7) == [("本周", "2026-05-24", "2026-05-30", "week")]
    assert spans("周日", week_start=7) == [("周日", "2026-05-24", "2026-05-24", "day")]
    assert spans("周日", week_start=1) == [("周日", "2026-05-31", "2026-05-31", "day")]
    assert week_first(ANCHOR, 1) == date(2026, 5, 25) and week_first(ANCHOR, 0) == date(2026, 5, 24)


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(
        alphabet="昨今明天周上下本这个月年前后去大两三1029-号日星期末 ago in days week", max_size=40
    ),
    anchor=st.dates(min_value=date(1971, 1, 1), max_value=date(9990, 1, 1)),
    week_start=st.integers(1, 7),
)
def test_found_spans_are_ordered_and_disjoint(text: str, anchor: date, week_start: int) -> None:
    pos = 0
    for f in find_expressions(text, anchor, week_start=week_start):
        assert f.start >= pos and text[f.start : f.end] == f.text
        assert f.span.first <= f.span.last
        pos = f.end


# ---- civil days --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("zone", "day", "local_start"),
    [
        ("America/Santiago", date(2026, 9, 6), "2026-09-06T01:00:00-03:00"),
        ("America/Havana", date(2026, 3, 8), "2026-03-08T01:00:00-04:00"),
        ("Asia/Beirut", date(2026, 3, 29), "2026-03-29T01:00:00+03:00"),
        ("America/Santiago", date(2026, 4, 5), "2026-04-05T00:00:00-04:00"),  # fall back
        ("Asia/Shanghai", date(2026, 10, 31), "2026-10-31T00:00:00+08:00"),
    ],
)
def test_a_day_starts_at_its_first_existing_instant(zone: str, day: date, local_start: str) -> None:
    tz = resolve_timezone(zone)
    start = day_start(day, tz)
    assert to_local(start, tz).isoformat() == local_start
    assert local_date(start, tz) == day and local_date(start - 1, tz) < day


def test_a_skipped_day_is_an_empty_window() -> None:
    tz = resolve_timezone("Pacific/Apia")
    skipped = date(2011, 12, 30)
    assert day_start(skipped, tz) == day_start(skipped + timedelta(days=1), tz)


def test_an_empty_or_unknown_timezone_is_utc() -> None:
    assert resolve_timezone("") is UTC and resolve_timezone("Mars/Olympus") is UTC
    assert day_start(date(2026, 1, 1), UTC) == int(
        datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000
    )


# ---- the block's notes use the same engine -------------------------------------------


def test_annotation_notes_shifts_only_and_uses_the_engines_spans() -> None:
    tz = resolve_timezone("Asia/Shanghai")
    anchor = 1779897600000  # 2026-05-28 00:00 +08
    text = "大后天、上周末、下周二、3天前、上星期、大前年、今年"
    assert annotate_relative_time(text, anchor, tz, 1) == (
        "大后天（2026-05-31）、上周末、下周二、3天前、上星期（2026-05-18~2026-05-24）、"
        "大前年（2023）、今年（2026）"
    )
    # English and written dates are left as they are
    assert annotate_relative_time("yesterday, 2026-05-01", anchor, tz, 1) == "yesterday, 2026-05-01"
