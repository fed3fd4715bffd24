"""The in-memory time index (engine.timeexpr.index): the one matching rule against a
naive overlap check, "timeTag wins", both lookup paths, incremental updates that equal a
fresh build, and the handler's cache (rebuilt for a new timezone, updated in place)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.timeexpr.civil import day_start, resolve_timezone
from engine.timeexpr.index import TimeIndex, folder_time
from handlers.recall_state import time_index
from tests.engine.recall_fixtures import config, new_store, write_folders

DAY = 86_400_000
BASE = 1_790_000_000_000  # 2026-09-22


@dataclass(frozen=True)
class E:
    """An index entry as the time index reads it."""

    id: str
    createdAt: int
    eventStart: int | None = None
    eventEnd: int | None = None
    eventTimeSource: str | None = None
    timeTags: list[dict[str, Any]] | None = None
    scored: bool = True
    alpha: float = 0.5


def naive(entries: list[E], a: int, b: int, tags: bool = True) -> set[str]:
    out = set()
    for e in entries:
        ft = folder_time(e)
        if tags and ft.tags:
            if any(x < b and y > a for x, y in ft.tags):
                out.add(e.id)
        elif ft.start < b and ft.end > a:
            out.add(e.id)
    return out


def test_the_matching_rule_and_timetag_wins() -> None:
    entries = [
        E("old", BASE),  # no event time: its archive instant
        E("msgs", BASE, BASE + 10 * DAY, BASE + 12 * DAY, "messages"),
        E("judge", BASE, BASE + 20 * DAY, BASE + 20 * DAY, "judge"),  # end <= start: + 1 ms
        E("foreign", BASE, BASE + 30 * DAY, BASE + 31 * DAY, None),  # no source: archive time
        E("tagged", BASE + 40 * DAY, timeTags=[{"from": BASE + 5 * DAY, "to": BASE + 6 * DAY}]),
    ]
    index = TimeIndex(entries, "Asia/Shanghai")
    assert index.window_ids(BASE, BASE + 1) == {"old", "foreign"}
    assert index.window_ids(BASE + 11 * DAY, BASE + 11 * DAY + 1) == {"msgs"}
    assert index.window_ids(BASE + 12 * DAY, BASE + 13 * DAY) == set()  # half-open
    assert index.window_ids(BASE + 20 * DAY, BASE + 20 * DAY + 1) == {"judge"}
    # the tagged folder is found by its tag's day, not by its archive instant
    assert index.window_ids(BASE + 40 * DAY, BASE + 41 * DAY) == set()
    assert index.window_ids(BASE + 5 * DAY, BASE + 6 * DAY) == {"tagged"}
    assert index.interval_ids(BASE + 40 * DAY, BASE + 41 * DAY) == {"tagged"}
    untagged = TimeIndex(entries, "Asia/Shanghai", with_tags=False)
    assert untagged.window_ids(BASE + 40 * DAY, BASE + 41 * DAY) == {"tagged"}
    assert index.event_order(["tagged", "msgs", "old", "nope"]) == ["old", "msgs", "tagged"]


_DAYS = st.integers(0, 400)
_ENTRY = st.builds(
    lambda n, c, s, length, src, tag: E(
        f"f{n}",
        BASE + c * DAY // 3,
        BASE + s * DAY // 2,
        BASE + s * DAY // 2 + length,
        src,
        [{"from": BASE + tag[0] * DAY, "to": BASE + tag[0] * DAY + tag[1]}] if tag else None,
    ),
    st.integers(0, 40),
    _DAYS,
    _DAYS,
    st.sampled_from([0, 1, 3_600_000, DAY, 5 * DAY, 100 * DAY]),
    st.sampled_from(["messages", "judge", "archive", None]),
    st.one_of(st.none(), st.tuples(_DAYS, st.sampled_from([DAY, 7 * DAY, 90 * DAY]))),
)


@settings(max_examples=30, deadline=None)
@given(
    first=st.lists(_ENTRY, max_size=25, unique_by=lambda e: e.id),
    second=st.lists(_ENTRY, max_size=25, unique_by=lambda e: e.id),
    windows=st.lists(st.tuples(_DAYS, st.integers(1, 500 * DAY)), min_size=1, max_size=6),
    zone=st.sampled_from(["Asia/Shanghai", "America/Santiago", ""]),
    scan_max=st.sampled_from([1, 3, 4096]),
)
def test_lookups_match_the_naive_rule_and_updates_a_fresh_build(
    first: list[E], second: list[E], windows: list[tuple[int, int]], zone: str, scan_max: int
) -> None:
    index = TimeIndex(first, zone, scan_max=scan_max)
    # keep some entries (the very objects), change others, drop and add some
    kept = {e.id: e for e in first[::2]}
    new = [kept.get(e.id, e) for e in second] + [
        e for e in first[::2] if e.id not in {x.id for x in second}
    ]
    index.update(new)
    fresh = TimeIndex(new, zone, scan_max=4096)
    for d, length in windows:
        a = BASE + d * DAY
        b = a + length
        expected = naive(new, a, b)
        assert index.window_ids(a, b) == expected == fresh.window_ids(a, b)
    assert index.folders == fresh.folders and index.tagged == fresh.tagged


def test_the_handler_cache_updates_in_place_and_rebuilds_for_a_new_zone(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    day = date(2026, 10, 31)
    tz = resolve_timezone("Asia/Shanghai")
    start = day_start(day, tz)
    write_folders(
        store,
        [
            {
                "createdAt": start + 3_600_000,
                "keywords": ["a"],
                "eventStart": start + 60_000,
                "eventEnd": start + 120_000,
                "eventTimeSource": "messages",
            }
        ],
    )

    @dataclass
    class State:
        store: Any
        time_index: Any = None

    state = State(store)
    shanghai = replace_tz(config(), "Asia/Shanghai")
    index = time_index(state, shanghai)  # type: ignore[arg-type]
    assert index is not None and len(index) == 1
    assert index.window_ids(start, start + DAY) and not index.window_ids(
        start + DAY, start + 2 * DAY
    )
    write_folders(store, [{"createdAt": start + 7_200_000, "keywords": ["b"]}], txn="arc-u")
    again = time_index(state, shanghai)  # type: ignore[arg-type]
    assert again is index and len(again) == 2  # brought up to date in place
    utc = time_index(state, replace_tz(config(), ""))  # type: ignore[arg-type]
    assert utc is not index and utc is not None and utc.timezone == ""
    off = config()
    off = off.model_copy(
        update={
            "time": off.time.model_copy(update={"mode": "off"}),
            "time_tag": off.time_tag.model_copy(update={"mode": "off"}),
        }
    )
    assert time_index(state, off) is None and state.time_index is None  # type: ignore[arg-type]


def replace_tz(cfg: Any, zone: str) -> Any:
    return cfg.model_copy(update={"time": cfg.time.model_copy(update={"timezone": zone})})


def test_build_and_lookup_are_quick_at_ten_thousand_folders() -> None:
    entries = [
        E(f"f{n}", BASE + n * 600_000, BASE + n * 600_000, BASE + n * 600_000 + 300_000, "messages")
        for n in range(10_000)
    ]
    started = time.perf_counter()
    index = TimeIndex(entries, "Asia/Shanghai")
    built = time.perf_counter() - started
    started = time.perf_counter()
    hits = index.window_ids(BASE + 10 * DAY, BASE + 13 * DAY)
    looked = time.perf_counter() - started
    assert len(hits) == 3 * 144 + 1 or len(hits) == 3 * 144
    # generous bounds (a shared, busy machine): the reference targets 20 ms to build
    assert built < 2.0 and looked < 0.2, (built, looked)
    changed = [
        replace(e, eventEnd=e.eventEnd + 1) if n % 100 == 0 and e.eventEnd else e
        for n, e in enumerate(entries)
    ]
    started = time.perf_counter()
    assert index.update(changed) == 100
    assert time.perf_counter() - started < 1.0
