"""memory_recall's time constraints (engine.recall.time_filter) over a real store: the
widening ladder and its line, the hard explicit range, "timeTag wins", timeText and
its time-tag miss, the three modes, time-only browse, telemetry, no strikes; and the
doctor rows of the time keys that have no effect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import pytest

from engine import texts
from engine.config import ENGINE_DEFAULTS, MemoryConfig, deep_merge
from engine.recall import CandidateIndex
from engine.recall.browse import browse
from engine.recall.constraint import Constraint
from engine.recall.search import SearchPage, load_entries
from engine.recall.search_answer import render_answer, search_record
from engine.recall.search_args import SearchArgs, parse_search_args
from engine.recall.strikes import counts_as_strike
from engine.recall.time_filter import TimePlan, plan_time, widen
from engine.relevance.folder_text import synced_index
from engine.store import SessionStore
from engine.timeexpr.civil import day_start, resolve_timezone
from engine.timeexpr.index import TimeIndex
from rofmd.cli.doctor import check_inert_keys
from rofmd.server.settings import DaemonSettings
from tests.engine.recall_fixtures import new_store, tool_search, write_folders

SHANGHAI = ZoneInfo("Asia/Shanghai")
D = date(2026, 10, 15)
TZ = resolve_timezone("Asia/Shanghai")
NOW = int(datetime(2026, 12, 1, 12, 0, tzinfo=SHANGHAI).timestamp() * 1000)


def at(d: date, hour: int) -> int:
    return day_start(d, TZ) + hour * 3_600_000


def cfg(mode: str = "fair", **groups: Any) -> MemoryConfig:
    tree = deep_merge(
        ENGINE_DEFAULTS,
        {
            "recall": {"mode": mode},
            "time": {"mode": "constrain", "timezone": "Asia/Shanghai"},
            "timeTag": {"mode": "constrain"},
        },
    )
    return MemoryConfig.model_validate(deep_merge(tree, groups))


def event(d: date, hour: int, keywords: list[str], **more: Any) -> dict[str, Any]:
    start = at(d, hour)
    return {
        "createdAt": at(D + timedelta(days=3), 0),
        "keywords": keywords,
        "eventStart": start,
        "eventEnd": start + 60_000,
        "eventTimeSource": "messages",
        "messages": [{"role": "user", "content": " ".join(keywords)}],
        **more,
    }


@dataclass
class World:
    store: SessionStore
    ids: list[str]


@pytest.fixture
def world(tmp_path: Path) -> World:
    store = new_store(tmp_path)
    tag = {"from": day_start(D - timedelta(days=1), TZ), "to": day_start(D, TZ), "label": "x"}
    ids = write_folders(
        store,
        [
            event(D, 10, ["配置文件", "端口"]),
            event(D, 9, ["配置文件", "网关"]),
            event(D - timedelta(days=20), 9, ["配置文件", "旧事"]),
            event(D, 11, ["杭州", "西湖"], timeTags=[tag], timeTagSource="relative-time"),
        ],
    )
    return World(store, ids)


def run(
    w: World, arguments: dict[str, Any], c: MemoryConfig | None = None
) -> tuple[SearchPage | None, list[Constraint], SearchArgs, TimePlan]:
    c = c or cfg()
    args = parse_search_args(arguments, c)
    index = CandidateIndex(w.store.index, c, 1)
    times = TimeIndex(w.store.index, c.time.timezone, with_tags=c.time_tag.mode != "off")
    keywordless = not args.keywords
    plan = plan_time(args, times, c, now_ms=NOW, keywordless=keywordless)
    relevance = synced_index(None, w.store, ())[0] if c.recall.mode == "ranked" else None

    def go(cs: Sequence[Constraint]) -> SearchPage:
        if keywordless:
            return browse(index, cs, c, limit=args.limit, offset=args.offset)
        return tool_search(index, args, c, relevance=relevance, constraints=cs)

    if keywordless and plan.browse_refused:
        return None, plan.constraints(0 if plan.levels else None), args, plan
    page, kept = widen(plan, go, browse=keywordless)
    return page, kept, args, plan


def answer(w: World, arguments: dict[str, Any], c: MemoryConfig | None = None) -> Any:
    c = c or cfg()
    page, kept, args, _ = run(w, arguments, c)
    entries = load_entries(w.store, page.picks, c)[0] if page is not None else []
    return render_answer(args, page, entries, c, constraints=kept), page, args, entries


@pytest.mark.parametrize("mode", ["fair", "ranked", "deterministic", "legacy"])
def test_a_day_without_memory_widens_to_three_days(world: World, mode: str) -> None:
    c = cfg(mode)
    res, page, args, entries = answer(world, {"keywords": "配置文件", "timeFrom": "2026-10-16"}, c)
    assert page is not None and {a.id for _, a in entries} <= set(world.ids[:2])
    assert page.candidates == 2
    tw = res.value["timeWindow"]
    assert (tw["level"], tw["widenedTo"], tw["firstDay"], tw["lastDay"]) == (
        1,
        "day3",
        "2026-10-15",
        "2026-10-17",
    )
    assert "时间范围：2026-10-15 ~ 2026-10-17（日粒度 · 已放宽到 ±1 天）" in res.text
    record = search_record(
        args, page, entries, now_ms=NOW, turn=1, round_=0, miss_type=None, strikes=0
    )
    assert record["timeWindow"] == {
        "from": day_start(D, TZ),
        "to": day_start(D + timedelta(days=3), TZ),
        "level": 1,
        "widenedTo": "day3",
    }
    assert record["timeFiltered"] == 1  # the 20-days-old folder


def test_the_ladder_goes_on_to_month_year_and_all(world: World) -> None:
    res, *_ = answer(world, {"keywords": "旧事", "timeFrom": "2026-09-10"})  # it is 09-25
    assert res.value["timeWindow"]["widenedTo"] == "month" and res.value["found"] == 1
    assert "已放宽到整月" in res.text
    far = answer(world, {"keywords": "旧事", "timeFrom": "2025-03-01"})[0]
    assert far.value["timeWindow"]["widenedTo"] == "all" and far.value["found"] == 1
    assert "已放宽到全部时间" in far.text
    exact = answer(world, {"keywords": "端口", "timeFrom": "2026-10-15"})[0]
    assert exact.value["timeWindow"]["level"] == 0 and "（日粒度）" in exact.text


def test_an_explicit_range_never_widens_and_its_miss_is_no_strike(world: World) -> None:
    res, page, *_ = answer(
        world, {"keywords": "配置文件", "timeFrom": "2026-10-17", "timeTo": "2026-10-19"}
    )
    assert page is not None and page.miss_type == "time" and res.value["found"] == 0
    assert res.value["timeWindow"]["explicit"] is True and res.value["timeWindow"]["level"] == 0
    assert texts.TIME_MISS_EXPLICIT in res.text and texts.TIME_MISS_ASK in res.text
    assert "显式范围，不自动放宽" in res.text
    assert not counts_as_strike("fair", 0, "time") and not counts_as_strike("legacy", 0, "time")
    quiet = answer(
        world,
        {"keywords": "配置文件", "timeFrom": "2026-10-17", "timeTo": "2026-10-19"},
        cfg(time={"askUserHint": False}),
    )[0]
    assert texts.TIME_MISS_ASK not in quiet.text


def test_timetag_wins_over_the_event_interval(world: World) -> None:
    hz = world.ids[3]
    on_archive_day = answer(world, {"keywords": "杭州", "timeFrom": "2026-10-15"})[0]
    assert on_archive_day.value["timeWindow"]["level"] == 1 and on_archive_day.value["ids"] == [hz]
    on_tag_day = answer(world, {"keywords": "杭州", "timeFrom": "2026-10-14"})[0]
    assert on_tag_day.value["timeWindow"]["level"] == 0 and on_tag_day.value["ids"] == [hz]
    off = cfg(timeTag={"mode": "off"})  # no tags indexed: its interval decides
    plain = answer(world, {"keywords": "杭州", "timeFrom": "2026-10-15"}, off)[0]
    assert plain.value["timeWindow"]["level"] == 0


def test_time_text_matches_time_tags_only(world: World) -> None:
    hz = world.ids[3]
    tag_day = {"timeText": "2026年10月14日"}
    hit = answer(world, {"keywords": "杭州 配置文件", **tag_day})[0]
    assert hit.value["ids"] == [hz] and hit.value["timeTagInfo"]["matched"] == 1
    assert "时间标签：「2026年10月14日」= 2026-10-14（1 条）" in hit.text
    miss, page, *_ = answer(world, {"keywords": "配置文件", **tag_day})
    assert page is not None and page.miss_type == "time-tag" and miss.value["found"] == 0
    assert not counts_as_strike("fair", 0, "time-tag")
    assert texts.TIME_TAG_MISS.format(text="2026年10月14日", windows="2026-10-14") in miss.text
    vague = answer(world, {"keywords": "杭州", "timeText": "某个时候"})[0]
    assert vague.value["ids"] == [hz]
    assert texts.TIME_TAG_UNRECOGNISED.format(text="某个时候") in vague.text
    index_only = answer(world, {"keywords": "配置文件", **tag_day}, cfg(timeTag={"mode": "index"}))[
        0
    ]
    assert index_only.value["found"] > 0 and index_only.value["timeTagInfo"]["enforced"] is False
    assert texts.TIME_TAG_INDEX_ONLY.format(text="2026年10月14日", n=1) in index_only.text


def test_index_and_off_change_no_result(world: World) -> None:
    plain = answer(world, {"keywords": "配置文件", "limit": 10})[0]
    for mode, warning in (
        ("index", texts.TIME_INDEX_ONLY),
        ("off", texts.TIME_OFF.format(params="timeFrom / timeTo")),
    ):
        c = cfg(time={"mode": mode})
        res = answer(
            world,
            {"keywords": "配置文件", "limit": 10, "timeFrom": "2026-10-17", "timeTo": "2026-10-19"},
            c,
        )[0]
        assert res.value["ids"] == plain.value["ids"] and warning in res.text
        assert res.value.get("timeWindow", {}).get("enforced", False) is False


def test_browse_lists_in_event_order_and_is_refused_unless_constrain(world: World) -> None:
    res, page, *_ = answer(world, {"timeFrom": "2026-10-15", "limit": 10})
    assert page is not None and page.mode == "browse"
    assert res.value["ids"] == [world.ids[1], world.ids[0]]  # 09:00 before 10:00; tag wins
    widened = answer(world, {"timeFrom": "2026-10-16"})[0]
    assert widened.value["timeWindow"]["widenedTo"] == "day3" and widened.value["found"] == 2
    nothing = answer(world, {"timeFrom": "2024-01-01", "timeTo": "2024-01-05"})[0]
    assert nothing.value["found"] == 0
    assert texts.TIME_EMPTY.format(window="2024-01-01 ~ 2024-01-05") in nothing.text
    for mode in ("index", "off"):
        c = cfg(time={"mode": mode})
        refused, page, *_ = answer(world, {"timeFrom": "2026-10-15"}, c)
        assert page is None and run(world, {"timeFrom": "2026-10-15"}, c)[3].browse_refused
        assert refused.value["found"] == 0
        assert "纯时间浏览需要 time.mode='constrain'" in refused.text
    bad = answer(world, {"timeFrom": "not a date"})[0]
    assert texts.TIME_NOTHING_TO_BROWSE in bad.text and bad.value["found"] == 0


def test_browse_respects_min_alpha(world: World) -> None:
    c = cfg(recall={"mode": "fair", "minAlpha": 0.9})
    res = answer(world, {"timeFrom": "2026-10-15", "timeTo": "2026-10-17"}, c)[0]
    assert res.value["found"] == 0  # every folder has α 0.5


def test_doctor_names_the_time_keys_without_effect(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(
        orjson.dumps(
            {
                "time": {
                    "centerDayPriority": False,
                    "judgeEventTime": False,
                    "windowScanMax": 64,
                    "fallback": ["year"],
                },
                "timeTag": {"weekStart": 7, "maxSpanDays": 31, "maxPerFolder": 2, "mode": "off"},
            }
        )
    )
    settings = DaemonSettings(config_dir=tmp_path, socket_path=tmp_path / "s.sock")
    detail = check_inert_keys(settings, {}).detail
    assert detail.startswith("warning: 2 key(s) set have no effect")
    assert "time.centerDayPriority" in detail and "time.judgeEventTime" in detail
    assert "windowScanMax" not in detail and "timeTag" not in detail


def test_time_off_keeps_event_time_out_of_the_heading(tmp_path: Path) -> None:
    from engine.recall.round import load_addition
    from engine.recall.state import Addition

    store = new_store(tmp_path)
    archived = 1_792_000_000_000
    [fid] = write_folders(
        store,
        [
            {
                "createdAt": archived,
                "alpha": 0.9,
                "beta": 2,
                "keywords": ["杭州", "旅行", "预算"],
                "messages": [{"role": "user", "content": "去杭州", "time": archived - 86_400_000}],
                "eventStart": archived - 3 * 86_400_000,
                "eventEnd": archived - 2 * 86_400_000,
            }
        ],
    )
    on = load_addition(store, fid, cfg(), generation=1, lane="x", turn=1, round_=1)
    off = load_addition(
        store, fid, cfg(time={"mode": "off"}), generation=1, lane="x", turn=1, round_=1
    )
    assert isinstance(on, Addition) and isinstance(off, Addition)
    assert "事件时间" in on.date
    assert "事件时间" not in off.date and "归档于" in off.date
    assert store.get_meta(fid).eventStart == archived - 3 * 86_400_000  # kept on disk
