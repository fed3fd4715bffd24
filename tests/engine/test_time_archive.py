"""Time at archive time (engine.archive.commit, engine.timeexpr.tags): time tags from the
conversation's fuzzy expressions, anchored on each message's own time; `time.mode: off`
captures no event time; `timeTag.mode: off` computes no tags; the caps hold."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson

from engine.archive import PreStepInput, plan_pre_step
from engine.archive.commit import commit_plan
from engine.config import MemoryConfig, build_config
from engine.store import open_session
from engine.timeexpr.civil import day_start, resolve_timezone
from engine.timeexpr.tags import TIME_TAG_SOURCE, time_tags
from tests.archive_fixtures import Surface

SHANGHAI = ZoneInfo("Asia/Shanghai")
T = int(datetime(2026, 10, 15, 23, 59, 30, tzinfo=SHANGHAI).timestamp() * 1000)
"""Just before midnight: the conversation crosses into 10-16, each message its own anchor."""


def cfg(**groups: Any) -> MemoryConfig:
    return build_config([("test", {"time": {"timezone": "Asia/Shanghai"}, **groups})]).config


def archived(tmp_path: Path, c: MemoryConfig) -> list[dict[str, Any]]:
    s = Surface(time=T)
    s.system()
    s.user("昨天去了杭州，下周二再去一次。")
    s.assistant("好的。")
    for i in range(10):  # one second a node: past midnight
        s.turn_pair(i, 300)
    s.user("明天见！")  # 10-16 by its own time: 明天 is 10-17
    s.assistant("明天见。")
    for i in range(25):
        s.turn_pair(100 + i, 300)
    window = max(40_000, int(s.total() * 100 / 70))
    scale = int(window * 0.7) / s.total()
    plan = plan_pre_step(
        PreStepInput(
            session_id="s1",
            turn=s.turn,
            surface=s.nodes,
            node_tokens={t["seq"]: max(1, int(t["tokens"] * scale)) for t in s.tokens()},
            total_tokens=int(window * 0.7),
            host_window=window,
            now_ms=T + 10**7,
            cfg=c,
            readable_images={},
        )
    )
    assert plan.folders
    store = open_session(tmp_path, "s1")
    out = commit_plan(
        store, plan, cfg=c, token="arc-t", now_ms=T + 10**7, turn=1, step=1, archiver_version="t"
    )
    assert out.ok, out.warnings
    metas = [orjson.loads((store.paths.folder(f) / "meta.json").read_bytes()) for f in out.written]
    index = {e.id: e for e in store.index}
    for m in metas:  # the index mirrors the meta's tags
        assert index[m["id"]].timeTags == m.get("timeTags")
    return metas


def _day(d: date) -> tuple[int, int]:
    tz = resolve_timezone("Asia/Shanghai")
    return day_start(d, tz), day_start(d + timedelta(days=1), tz)


def test_tags_are_written_per_message_anchor(tmp_path: Path) -> None:
    metas = archived(tmp_path, cfg())
    first = metas[0]
    assert first["timeTagSource"] == TIME_TAG_SOURCE
    assert [(t["text"], t["label"], t["granularity"]) for t in first["timeTags"]] == [
        ("昨天", "2026-10-14", "day"),
        ("下周二", "2026-10-20", "day"),
    ]
    assert (first["timeTags"][0]["from"], first["timeTags"][0]["to"]) == _day(date(2026, 10, 14))
    tagged = [m for m in metas if m.get("timeTags")]
    later = [t for m in tagged for t in m["timeTags"] if t["text"] == "明天"]
    assert [t["label"] for t in later] == ["2026-10-17"]  # its message was said on 10-16
    untagged = [m for m in metas if not m.get("timeTags")]
    assert untagged and all("timeTagSource" not in m for m in untagged)
    assert all(m["eventTimeSource"] == "messages" for m in metas)


def test_time_off_captures_no_event_time_and_tag_off_no_tags(tmp_path: Path) -> None:
    off = archived(tmp_path / "a", cfg(time={"timezone": "Asia/Shanghai", "mode": "off"}))
    assert not any("eventStart" in m or "eventEnd" in m or "eventTimeSource" in m for m in off)
    assert off[0]["timeTags"]  # time tags are their own group
    no_tags = archived(tmp_path / "b", cfg(timeTag={"mode": "off"}))
    assert not any("timeTags" in m or "timeTagSource" in m for m in no_tags)
    assert no_tags[0]["eventTimeSource"] == "messages"


def test_caps_dedupe_and_what_is_read() -> None:
    tz = resolve_timezone("Asia/Shanghai")
    msgs: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "昨天、2026-10-14、上周、今年、去年、明年、上个月、下个月、后天",
            "time": T,
        },
        {"role": "tool", "content": "2026-01-01 log line"},
        {"role": "assistant", "content": [{"type": "text", "text": "三天后"}]},
    ]
    tags = time_tags(
        msgs, default_anchor_ms=T, tz=tz, week_start=1, max_span_days=31, max_per_folder=5
    )
    # 昨天 and 2026-10-14 are one window; years are longer than maxSpanDays; at most 5
    assert [t["text"] for t in tags] == ["昨天", "上周", "上个月", "下个月", "后天"]
    more = time_tags(
        msgs, default_anchor_ms=T, tz=tz, week_start=1, max_span_days=366, max_per_folder=20
    )
    assert "三天后" in [t["text"] for t in more]  # no time of its own: the archive time
    assert not any(t["label"] == "2026-01-01" for t in more)  # a tool's output is not read
