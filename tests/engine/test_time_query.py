"""normalizeTimeQuery (engine.timeexpr.query): formats, the ladder, the explicit range,
swap, minimum, cap, future clamp, invalid input as a warning."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import texts
from engine.config import ENGINE_DEFAULTS, MemoryConfig, deep_merge
from engine.timeexpr.civil import day_start, resolve_timezone
from engine.timeexpr.query import normalize_time_query

SHANGHAI = ZoneInfo("Asia/Shanghai")
NOW = int(datetime(2026, 12, 1, 15, 30, tzinfo=SHANGHAI).timestamp() * 1000)
TODAY = date(2026, 12, 1)


def cfg(**time: Any) -> MemoryConfig:
    tree = deep_merge(ENGINE_DEFAULTS, {"time": {"timezone": "Asia/Shanghai", **time}})
    return MemoryConfig.model_validate(tree)


def days(q: Any) -> list[tuple[str, str | None, str | None]]:
    return [
        (
            lv.name,
            lv.first.isoformat() if lv.first else None,
            lv.last.isoformat() if lv.last else None,
        )
        for lv in q.levels
    ]


def test_a_single_day_is_the_centre_day_then_the_ladder() -> None:
    q = normalize_time_query("2026-10-31", None, None, now_ms=NOW, cfg=cfg())
    assert not q.explicit and q.granularity == "day" and q.warnings == ()
    assert days(q) == [
        ("day", "2026-10-31", "2026-10-31"),
        ("day3", "2026-10-30", "2026-11-01"),
        ("month", "2026-10-01", "2026-10-31"),
        ("year", "2026-01-01", "2026-12-01"),  # the future clamped, silently
        ("all", None, None),
    ]
    tz = resolve_timezone("Asia/Shanghai")
    first = q.levels[0]
    assert (first.start, first.end) == (
        day_start(date(2026, 10, 31), tz),
        day_start(date(2026, 11, 1), tz),
    )
    assert q.levels[3].end == NOW + 1  # the window ends now


def test_months_years_and_epochs_and_the_ladder_only_widens() -> None:
    c = cfg()
    month = normalize_time_query("2026-10", None, None, now_ms=NOW, cfg=c)
    assert month.granularity == "month"
    assert [lv.name for lv in month.levels] == ["month", "year", "all"]
    year = normalize_time_query(2025, None, None, now_ms=NOW, cfg=c)
    assert days(year) == [("year", "2025-01-01", "2025-12-31"), ("all", None, None)]
    epoch = int(datetime(2026, 10, 31, 23, 59, tzinfo=SHANGHAI).timestamp() * 1000)
    for value in (epoch, str(epoch), float(epoch)):
        assert days(normalize_time_query(value, None, None, now_ms=NOW, cfg=c))[0] == (
            "day",
            "2026-10-31",
            "2026-10-31",
        )
    assert (
        days(normalize_time_query("2026年10月31日", None, None, now_ms=NOW, cfg=c))[0][1]
        == "2026-10-31"
    )
    assert days(normalize_time_query("昨天", None, None, now_ms=NOW, cfg=c))[0][1] == "2026-11-30"
    # granularity widens what is written, never narrows it
    widened = normalize_time_query("2026-10-31", None, "month", now_ms=NOW, cfg=c)
    assert days(widened)[0] == ("month", "2026-10-01", "2026-10-31")
    kept = normalize_time_query("2026", None, "day", now_ms=NOW, cfg=c)
    assert kept.granularity == "year"


def test_the_fallback_list_drops_levels() -> None:
    q = normalize_time_query("2026-10-31", None, None, now_ms=NOW, cfg=cfg(fallback=["year"]))
    assert [lv.name for lv in q.levels] == ["day", "year"]
    five = normalize_time_query("2026-10-31", None, None, now_ms=NOW, cfg=cfg(minRangeDays=5))
    assert days(five)[1] == ("day3", "2026-10-29", "2026-11-02")


def test_an_explicit_range_is_one_hard_window() -> None:
    c = cfg()
    q = normalize_time_query("2026-10", "2026-11-03", None, now_ms=NOW, cfg=c)
    assert q.explicit and days(q) == [("range", "2026-10-01", "2026-11-03")]
    swapped = normalize_time_query("2026-11-03", "2026-10", None, now_ms=NOW, cfg=c)
    assert days(swapped) == [("range", "2026-10-01", "2026-11-03")]
    assert swapped.warnings == (texts.TIME_WARN_SWAPPED,)
    short = normalize_time_query("2026-10-31", "2026-10-31", None, now_ms=NOW, cfg=c)
    assert days(short) == [("range", "2026-10-30", "2026-11-01")]
    assert short.warnings == (
        texts.TIME_WARN_MIN_RANGE.format(n=3, first="2026-10-30", last="2026-11-01"),
    )
    long = normalize_time_query("2020-01-01", "2026-10-31", None, now_ms=NOW, cfg=c)
    assert days(long) == [("range", "2020-01-01", "2020-12-31")]
    assert long.warnings == (
        texts.TIME_WARN_CAPPED.format(max=366, first="2020-01-01", last="2020-12-31"),
    )


def test_the_future_is_clamped_to_now() -> None:
    c = cfg()
    q = normalize_time_query("2027-03-01", "2027-04-01", None, now_ms=NOW, cfg=c)
    assert days(q) == [("range", "2026-11-29", "2026-12-01")]
    assert q.warnings[0] == texts.TIME_WARN_FUTURE.format(today="2026-12-01")
    assert q.levels[0].end == NOW + 1
    tomorrow = normalize_time_query("2026-12-02", None, None, now_ms=NOW, cfg=c)
    assert days(tomorrow)[:2] == [
        ("day", "2026-12-01", "2026-12-01"),
        ("day3", "2026-11-29", "2026-12-01"),
    ]


@pytest.mark.parametrize(
    ("value", "warning"),
    [
        ("下个礼拜天后", texts.TIME_WARN_INVALID.format(field="timeFrom", given="下个礼拜天后")),
        ("2026-13-01", texts.TIME_WARN_INVALID.format(field="timeFrom", given="2026-13-01")),
        (True, texts.TIME_WARN_INVALID.format(field="timeFrom", given="True")),
        ([2026], texts.TIME_WARN_INVALID.format(field="timeFrom", given="[2026]")),
        (1761868800, texts.TIME_WARN_SECONDS.format(field="timeFrom", given="1761868800")),
    ],
)
def test_invalid_input_constrains_nothing_and_warns(value: Any, warning: str) -> None:
    q = normalize_time_query(value, None, None, now_ms=NOW, cfg=cfg())
    assert not q.constrained and q.warnings == (warning,)


def test_a_bad_granularity_is_inferred_with_a_warning() -> None:
    q = normalize_time_query("2026-10", None, "week", now_ms=NOW, cfg=cfg())
    assert q.granularity == "month"
    assert q.warnings == (texts.TIME_WARN_GRANULARITY.format(given="week"),)


def test_dst_day_window_in_santiago() -> None:
    c = cfg(timezone="America/Santiago")
    now = int(datetime(2026, 12, 1, tzinfo=ZoneInfo("UTC")).timestamp() * 1000)
    q = normalize_time_query("2026-09-06", None, None, now_ms=now, cfg=c)
    first = q.levels[0]
    assert first.start == int(datetime(2026, 9, 6, 4, 0, tzinfo=ZoneInfo("UTC")).timestamp() * 1000)
    assert first.end == int(
        datetime(2026, 9, 7, tzinfo=ZoneInfo("America/Santiago")).timestamp() * 1000
    )
    assert first.end - first.start == 23 * 3_600_000


_ENDPOINT = st.one_of(
    st.dates(min_value=date(1990, 1, 1), max_value=date(2040, 12, 31)).map(date.isoformat),
    st.dates(min_value=date(1990, 1, 1), max_value=date(2040, 12, 31)).map(
        lambda d: d.strftime("%Y-%m")
    ),
    st.integers(1990, 2040),
    st.integers(10**11, 2 * 10**12),
)


@settings(max_examples=80, deadline=None)
@given(
    a=_ENDPOINT,
    b=st.one_of(st.none(), _ENDPOINT),
    gran=st.sampled_from([None, "day", "month", "year"]),
    zone=st.sampled_from(["Asia/Shanghai", "America/Santiago", "UTC", "Pacific/Chatham"]),
    min_days=st.integers(1, 10),
    max_days=st.integers(10, 400),
    now_offset=st.integers(0, 400 * 86_400_000),
)
def test_windows_respect_minimum_cap_and_now(
    a: Any, b: Any, gran: str | None, zone: str, min_days: int, max_days: int, now_offset: int
) -> None:
    c = cfg(timezone=zone, minRangeDays=min_days, maxRangeDays=max_days)
    now = 1_700_000_000_000 + now_offset
    q = normalize_time_query(a, b, gran, now_ms=now, cfg=c)
    today = datetime.fromtimestamp(now / 1000, ZoneInfo(zone)).date()
    assert q.constrained
    bounded = [lv for lv in q.levels if lv.bounded]
    for n, lv in enumerate(bounded):
        assert lv.first is not None and lv.last is not None
        assert lv.first <= lv.last <= today  # never in the future
        assert lv.end is not None and lv.start is not None
        assert lv.start <= lv.end <= now + 1
        assert lv.days <= max_days
        if q.explicit or n > 0:
            assert lv.days >= min(min_days, max_days)  # the 3-day minimum
        if n > 0:
            assert lv.days > bounded[n - 1].days  # each level widens
    assert q.explicit == (b is not None) and (not q.explicit or len(q.levels) == 1)


@settings(max_examples=40, deadline=None)
@given(junk=st.one_of(st.text(max_size=12), st.floats(), st.lists(st.integers(), max_size=2)))
def test_never_raises_and_never_fails_silently(junk: Any) -> None:
    q = normalize_time_query(junk, None, junk, now_ms=NOW, cfg=cfg())
    blank = isinstance(junk, str) and not junk.strip()
    if q.constrained:
        assert all(lv.last is None or lv.last <= TODAY for lv in q.levels)
    else:
        assert blank or q.warnings  # an input that constrains nothing says why
