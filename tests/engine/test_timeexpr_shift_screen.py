"""The shift screen (`engine.timeexpr.expressions.may_hold_shift`): the recall block skips
the relative-time scan of a text the screen rejects, so a rejected text must be one whose
scan finds no shift, for every anchor, and the annotation of every text must be what the
unscreened scan gives. Checked on generated texts (built from the characters the time
patterns are made of) and on real ones: the reference's Chinese text and the benchmark's
mixed Chinese and English corpus."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.ranked import make_corpus
from engine.recall import dates
from engine.recall.dates import annotate_relative_time
from engine.timeexpr.civil import resolve_timezone
from engine.timeexpr.expressions import (
    SHIFT_KINDS,
    SHIFT_OVERLAPS,
    find_expressions,
    may_hold_shift,
)

REFERENCE = Path("/work/shared/spec/dsh-rofm-reference.txt")  # beside the repo, not in it
TZ = resolve_timezone("Asia/Shanghai")
ANCHORS = (1_780_000_000_000, 946_684_800_000, 253_402_214_400_000)  # 2026, 2000, 9999-12-31
WEEK_STARTS = (1, 7)

# what the Chinese and English patterns are made of, and some noise around it
_PIECES = list("天日周期拜月年星礼个上下本这今明昨前后大去末号一二两三十几每 ,.（(0123456789")
_PIECES += ["前天", "上周", "下个月", "明年", "上上", "下下", "个星期", "礼拜", "周末", "三天前"]
_PIECES += ["yesterday", "last week", "next ", "ago", "in 3 days", "today", "预告", "行评"]
texts = st.lists(st.sampled_from(_PIECES), max_size=14).map("".join)


def _shifts(text: str, anchor_ms: int, week_start: int) -> list[str]:
    """The Chinese shifts of a full scan (every pattern, every language)."""
    anchor = dates.to_local(anchor_ms, TZ).date()
    found = find_expressions(text, anchor, week_start=week_start)
    return [f.text for f in found if f.lang == "zh" and f.kind in SHIFT_KINDS]


def _unscreened(text: str, anchor_ms: int, week_start: int, monkeypatch: pytest.MonkeyPatch) -> str:
    """The annotation the scan alone gives (the screen let everything through)."""
    with monkeypatch.context() as m:
        m.setattr(dates, "may_hold_shift", lambda _text: True)
        return annotate_relative_time(text, anchor_ms, TZ, week_start)


def _check(text: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Assert the screen's promise for `text`; True when it screened the text out."""
    held = may_hold_shift(text)
    for anchor_ms in ANCHORS:
        for ws in WEEK_STARTS:
            if not held:
                assert _shifts(text, anchor_ms, ws) == [], text
                anchor = dates.to_local(anchor_ms, TZ).date()
                subset = find_expressions(
                    text, anchor, week_start=ws, kinds=SHIFT_OVERLAPS, lang="zh"
                )
                assert [f for f in subset if f.kind in SHIFT_KINDS] == [], text
            assert annotate_relative_time(text, anchor_ms, TZ, ws) == _unscreened(
                text, anchor_ms, ws, monkeypatch
            ), text
    return not held


@settings(max_examples=600, deadline=None)
@given(text=texts)
def test_screen_is_exact_on_generated_texts(text: str) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        _check(text, monkeypatch)


def test_screen_is_exact_on_the_reference_text(monkeypatch: pytest.MonkeyPatch) -> None:
    if not REFERENCE.exists():
        pytest.skip("reference not available")
    lines = [line for line in REFERENCE.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) > 500
    screened = sum(_check(line, monkeypatch) for line in lines)
    # the screen must let through every line that has a shift, and skip the others
    assert 0 < screened < len(lines)


def test_screen_is_exact_on_the_benchmark_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _, folder_texts, queries = make_corpus(300, seed=7)
    lines = [line for text in folder_texts.values() for line in text.splitlines()] + queries
    screened = sum(_check(line, monkeypatch) for line in lines)
    assert screened > len(lines) // 2  # what makes the screen worth having


@pytest.mark.parametrize(
    "text",
    [
        "昨天",
        "前天和前天",
        "上个星期",
        "下礼拜三",
        "上上周",
        "这个礼拜",
        "本周末",
        "下个月15号",
        "去年3月5日",
        "明年",
        "大后年",
        "今日",
        "这月",
        "上月的事",
        "上周二下午",
    ],
)
def test_every_shift_word_passes_the_screen(text: str) -> None:
    assert may_hold_shift(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "日评 口署户",
        "星期",
        "个月",
        "年度总结",
        "2026年5月1日",
        "周一",
        "每周一",
        "三天前",
        "两个月以后",
        "last week",
    ],
)
def test_texts_without_a_shift_word_are_screened_out(text: str) -> None:
    assert not may_hold_shift(text)
    assert all(_shifts(text, a, ws) == [] for a in ANCHORS for ws in WEEK_STARTS)


def test_a_screened_text_keeps_its_other_expressions() -> None:
    # the screen is the block's alone: the full scan still finds what is no shift
    anchor = date(2026, 5, 28)
    assert not may_hold_shift("周一 3天前 2026年5月1日 last week")
    found = find_expressions("周一 3天前 2026年5月1日 last week", anchor)
    assert [f.kind for f in found] == ["weekday", "count", "date", "shift"]
