"""Time as a recall constraint through a real daemon (issue 12, the time half): time tags
written at archive time, the widening ladder and the hard explicit range, time-only
browse under `constrain` and `index`, a DST day window in America/Santiago, and
`rofmd time-view` reading a memory root without changing a byte of it."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import pytest

from engine import texts
from rofmd.cli.main import main
from tests.archive_fixtures import Surface, floored_params
from tests.e2e.client import Client
from tests.e2e.harness import DaemonProcess, running_daemon, short_tmpdir

SHANGHAI = ZoneInfo("Asia/Shanghai")
SANTIAGO = ZoneInfo("America/Santiago")
HANGZHOU = "昨天去了杭州，西湖边的茶馆很安静。"
DST_DAY = date(2026, 9, 6)  # Chile moves its clocks 00:00 -> 01:00 that day
DST_FIRST_INSTANT = int(datetime(2026, 9, 6, 4, 0, tzinfo=UTC).timestamp() * 1000)


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


@dataclass
class World:
    daemon: DaemonProcess
    client: Client
    t_ms: int
    day: date
    hangzhou: str
    others: list[str]


def _metas(d: DaemonProcess, sid: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    base = d.memory_root / "sessions" / sid
    return {fid: orjson.loads((base / fid / "meta.json").read_bytes()) for fid in ids}


def archive(
    c: Client, d: DaemonProcess, sid: str, start_ms: int, first: str, kw: list[str]
) -> tuple[str, list[str]]:
    """Archive `first` + 30 turns starting at `start_ms` and judge every folder (the one
    titled by `first` gets `kw`). Returns (that folder, the others)."""
    s = Surface(time=start_ms)
    s.system()
    s.user(first)
    s.assistant("好的，记下了。")
    for i in range(30):
        s.turn_pair(i, 300)
    comp = c.call("agent/pre-step", floored_params(s, sid))["compaction"]
    assert comp is not None and len(comp["folders"]) >= 4
    assert c.call("archive/commit", {"session": {"id": sid}, "token": comp["token"]})["ok"]
    metas = _metas(d, sid, comp["folders"])
    target = next(fid for fid, m in metas.items() if m["title"].startswith(first[:6]))
    updates = []
    for i, fid in enumerate(comp["folders"]):
        words = kw if fid == target else ["配置文件", f"问题{i}", "读取文件"]
        updates.append({"id": fid, "alpha": 0.8, "beta": 1, "keywords": words, "reason": "t"})
    assert c.tool(sid, "memory_judge", {"updates": updates})["isError"] is False
    return target, [f for f in comp["folders"] if f != target]


def reload(w: World, config: dict[str, Any]) -> None:
    (w.daemon.config_dir / "config.json").write_bytes(orjson.dumps(config))
    assert w.client.call("config/reload", {})["ok"]


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    base = short_tmpdir()
    try:
        with running_daemon(base=base) as d:
            c = Client(d)
            # 40 days ago, 10:00 in Shanghai (the packaged timezone): in the past whenever run
            day = (datetime.now(SHANGHAI) - timedelta(days=40)).date()
            t_ms = _ms(datetime(day.year, day.month, day.day, 10, 0, tzinfo=SHANGHAI))
            hangzhou, others = archive(c, d, "time-a", t_ms, HANGZHOU, ["杭州", "西湖", "茶馆"])
            yield World(d, c, t_ms, day, hangzhou, others)
            c.sock.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _day_start(d: date, tz: ZoneInfo = SHANGHAI) -> int:
    return _ms(datetime(d.year, d.month, d.day, tzinfo=tz))


def test_archived_yesterday_carries_a_time_tag_for_the_day_before(world: World) -> None:
    meta = _metas(world.daemon, "time-a", [world.hangzhou])[world.hangzhou]
    yesterday = world.day - timedelta(days=1)
    assert meta["timeTagSource"] == "relative-time"
    assert meta["timeTags"] == [
        {
            "from": _day_start(yesterday),
            "to": _day_start(world.day),
            "label": yesterday.isoformat(),
            "granularity": "day",
            "text": "昨天",
        }
    ]
    # event time is captured as before; the folders without an expression carry no tags
    assert meta["eventTimeSource"] == "messages" and meta["eventStart"] >= world.t_ms
    others = _metas(world.daemon, "time-a", world.others)
    assert not any("timeTags" in m for m in others.values())
    # the index mirrors them, and the block shows the tag's date
    index = orjson.loads(
        (world.daemon.memory_root / "sessions" / "time-a" / "index.json").read_bytes()
    )
    [entry] = [e for e in index["folders"] if e["id"] == world.hangzhou]
    assert entry["timeTags"] == meta["timeTags"]


def test_a_day_without_memory_widens_and_says_so(world: World) -> None:
    c, day = world.client, world.day
    res = c.recall("time-a", keywords="配置文件", timeFrom=(day + timedelta(days=1)).isoformat())
    value, text = res["value"], res["content"][0]["text"]
    assert value["found"] > 0 and value["missType"] is None
    tw = value["timeWindow"]
    assert tw["widenedTo"] == "day3" and tw["level"] == 1
    assert (tw["firstDay"], tw["lastDay"]) == (
        day.isoformat(),
        (day + timedelta(days=2)).isoformat(),
    )
    assert "（日粒度 · 已放宽到 ±1 天）" in text and text.count("时间范围：") == 1
    # timeTag wins: the Hangzhou folder is not on its archive day, but on its tag's day
    on_day = c.recall("time-a", keywords="杭州", timeFrom=day.isoformat())["value"]
    assert on_day["ids"] == [world.hangzhou] and on_day["timeWindow"]["widenedTo"] == "day3"
    tag_day = (day - timedelta(days=1)).isoformat()
    exact = c.recall("time-a", keywords="杭州", timeFrom=tag_day)["value"]
    assert exact["ids"] == [world.hangzhou] and exact["timeWindow"]["level"] == 0
    stats = world.daemon.memory_root / "sessions" / "time-a" / "stats.jsonl"
    records = [orjson.loads(line) for line in stats.read_bytes().splitlines()]
    record = [r for r in records if r.get("tool") == "memory_recall"][-1]
    assert record["timeWindow"]["level"] == 0 and record["timeWindow"]["widenedTo"] is None
    assert record["timeFiltered"] == 0


def test_an_explicit_range_never_widens_and_is_no_strike(world: World) -> None:
    c, day = world.client, world.day
    for _ in range(3):  # three misses in a row: none of them a strike
        res = c.recall(
            "time-a",
            keywords="配置文件",
            timeFrom=(day + timedelta(days=2)).isoformat(),
            timeTo=(day + timedelta(days=4)).isoformat(),
        )
        value, text = res["value"], res["content"][0]["text"]
        assert value["found"] == 0 and value["missType"] == "time" and value["strikes"] == 0
        assert value["timeWindow"]["level"] == 0 and value["timeWindow"]["explicit"] is True
        assert "显式范围，不自动放宽" in text and texts.TIME_MISS_EXPLICIT in text
        assert texts.TIME_MISS_ASK in text and res["isError"] is False


def test_browse_lists_event_order_under_constrain_and_nothing_under_index(world: World) -> None:
    c, day = world.client, world.day
    res = c.recall("time-a", timeFrom=day.isoformat(), limit=20)
    value = res["value"]
    assert value["mode"] == "browse" and value["found"] >= 3
    metas = _metas(world.daemon, "time-a", value["ids"])
    starts = [metas[fid]["eventStart"] for fid in value["ids"]]
    assert starts == sorted(starts)
    assert set(value["ids"]) == set(world.others)  # tagged for the day before: not listed
    reload(world, {"time": {"mode": "index"}})
    try:
        res = c.recall("time-a", timeFrom=day.isoformat(), limit=20)
        value, text = res["value"], res["content"][0]["text"]
        assert value["found"] == 0 and res["isError"] is False
        assert "纯时间浏览需要 time.mode='constrain'" in text
        # with keywords, index mode records the window and constrains nothing
        kw = c.recall("time-a", keywords="杭州", timeFrom=(day + timedelta(days=5)).isoformat())
        assert kw["value"]["ids"] == [world.hangzhou]
        assert kw["value"]["timeWindow"]["enforced"] is False
    finally:
        reload(world, {})


def test_a_dst_day_in_santiago_starts_at_its_first_instant(world: World) -> None:
    reload(world, {"time": {"timezone": "America/Santiago"}})
    try:
        c = world.client
        start = _ms(datetime(2026, 9, 6, 1, 30, tzinfo=SANTIAGO))
        target, _ = archive(
            c, world.daemon, "time-dst", start, "我们在圣地亚哥开会。", ["圣地亚哥", "开会", "会议"]
        )
        res = c.recall("time-dst", keywords="圣地亚哥", timeFrom=DST_DAY.isoformat())
        tw = res["value"]["timeWindow"]
        assert tw["from"] == DST_FIRST_INSTANT  # 01:00 -03, local midnight never happened
        assert tw["to"] == _ms(datetime(2026, 9, 7, tzinfo=SANTIAGO))
        assert tw["level"] == 0 and res["value"]["ids"] == [target]
        # the Shanghai session's index is rebuilt for the new zone: day(T) moved
        assert c.recall("time-a", keywords="杭州", timeFrom=world.day.isoformat())["value"]["ids"]
    finally:
        reload(world, {})


def _snapshot(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            out[str(path.relative_to(root))] = (digest, st.st_mtime_ns)
    return out


def test_time_view_changes_no_file(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    d = world.daemon
    assert d.stop() == 0  # last test of the module: nothing may write while we look
    before = _snapshot(d.base)
    time.sleep(0.01)  # an mtime written now would differ
    argv = ["time-view", "--memory-root", str(d.memory_root), "--config-dir", str(d.config_dir)]
    assert main([*argv, "--from", world.day.isoformat(), "--json"]) == 0
    view = orjson.loads(capsys.readouterr().out)
    [session] = [s for s in view["sessions"] if s["session"] == "time-a"]
    assert {f["id"] for f in session["folders"]} == set(world.others)  # the tag wins here too
    starts = [f["eventStart"] for f in session["folders"]]
    assert starts == sorted(starts) and view["window"]["firstDay"] == world.day.isoformat()
    # the text form, and a two-ended range, read the same files
    assert (
        main([*argv, "--from", world.day.isoformat(), "--to", "2026-12", "--session", "time-a"])
        == 0
    )
    assert "time-a" in capsys.readouterr().out
    assert _snapshot(d.base) == before
