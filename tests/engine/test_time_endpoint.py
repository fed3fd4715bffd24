"""One reading of a tool's time argument (`engine.timeexpr.endpoint`), shared by
memory_recall and memory_group_recall."""

from __future__ import annotations

from datetime import date
from zoneinfo import ZoneInfo

import pytest

from engine.timeexpr.endpoint import Instant, Span, read_endpoint

SH = ZoneInfo("Asia/Shanghai")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026", Span(date(2026, 1, 1), date(2026, 12, 31), "year")),
        (2026, Span(date(2026, 1, 1), date(2026, 12, 31), "year")),
        (2026.0, Span(date(2026, 1, 1), date(2026, 12, 31), "year")),
        ("2026-02", Span(date(2026, 2, 1), date(2026, 2, 28), "month")),
        ("2026/11", Span(date(2026, 11, 1), date(2026, 11, 30), "month")),
        (" 2026-11-02 ", Span(date(2026, 11, 2), date(2026, 11, 2), "day")),
        ("2026.11.2", Span(date(2026, 11, 2), date(2026, 11, 2), "day")),
        (1_790_000_000_000, Instant(1_790_000_000_000)),
        ("1790000000000", Instant(1_790_000_000_000)),
        ("2026-11-02T08:00:00Z", Instant(1_793_606_400_000)),
        ("2026-11-02T16:00:00", Instant(1_793_606_400_000)),  # zone-less: read in the zone
        (1_790_000_000, "seconds"),
        ("2026-13", "invalid"),
        ("2026-02-30", "invalid"),
        (True, "invalid"),
        ("12", "invalid"),
        ("0000", "invalid"),
        ("上周", "invalid"),  # no relative reading unless the caller gives one
    ],
)
def test_endpoints(value: object, expected: object) -> None:
    assert read_endpoint(value, SH) == expected


def test_a_relative_reading_is_the_callers() -> None:
    week = Span(date(2026, 11, 23), date(2026, 11, 29), "week")
    assert read_endpoint("上周", SH, lambda text: week if text == "上周" else None) == week
    assert read_endpoint("2026-11", SH, lambda text: week).granularity == "month"  # type: ignore[union-attr]
