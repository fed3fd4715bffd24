"""Events, places and people as recall constraints through a real daemon (issue 12, the
event / tag half): the event states of memory_recall, the location and person filters
(AND across kinds, aliases OR-ed), a message naming a known person filtering automatic
recall, and the off / index / constrain modes. The daemon runs the packaged config
(`recall.mode` ranked, every tag mode constrain)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from engine import texts
from tests.archive_fixtures import Surface
from tests.e2e.client import Client as SharedClient
from tests.e2e.client import file_turn, judge_topics, session_dir, stats_records
from tests.e2e.harness import DaemonProcess, running_daemon

TOPICS: dict[str, tuple[str, dict[str, Any]]] = {
    "kyoto": (
        "日本旅行我们订了京都站旁边的酒店。",
        {"keywords": ["日本旅行", "京都站", "酒店"], "events": ["日本旅行"], "locations": ["京都"]},
    ),
    "sapporo": (
        "北海道滑雪住的是札幌的酒店。",
        {"keywords": ["北海道", "札幌", "酒店"], "events": ["北海道滑雪"], "locations": ["札幌"]},
    ),
    "zc_hz": (
        "周岑在杭州请我们吃了火锅。",
        {"keywords": ["周岑", "杭州", "火锅"], "locations": ["杭州"], "persons": ["周岑", "小周"]},
    ),
    "xm_hz": (
        "小明在杭州推荐了一家火锅店。",
        {"keywords": ["小明", "杭州", "火锅"], "locations": ["杭州"], "persons": ["小明"]},
    ),
    "xm_bj": (
        "小明在北京也吃过一次火锅。",
        {"keywords": ["小明", "北京", "火锅"], "locations": ["北京"], "persons": ["小明"]},
    ),
    "cg_bj": (
        "岑哥说北京的烤鸭最好吃。",
        {"keywords": ["岑哥", "北京", "烤鸭"], "locations": ["北京"], "persons": ["岑哥"]},
    ),
}


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


class Client(SharedClient):
    """The shared client whose memory_recall answers must not be errors."""

    def recall(self, sid: str, **arguments: Any) -> Any:
        res = self.tool(sid, "memory_recall", arguments)
        assert res["isError"] is False, res
        return res


@pytest.fixture
def client(daemon: DaemonProcess) -> Iterator[Client]:
    with Client(daemon) as c:
        yield c


def filler(s: Surface, i: int) -> None:
    file_turn(s, i, "请帮我看看配置文件。")


_STORES: dict[str, dict[str, str]] = {}


def store(d: DaemonProcess, c: Client, sid: str) -> dict[str, str]:
    """Archive a conversation with each topic in its own folder and judge every folder
    with its topic's keywords and labels (once per session). Returns topic -> folder."""
    if sid in _STORES:
        return _STORES[sid]
    s = Surface()
    s.system()
    for user, _ in TOPICS.values():
        s.user(user)
        s.assistant("好的，记下了。")
        for i in range(2):
            filler(s, len(s.nodes) + i)
    for i in range(60):
        filler(s, 1000 + i)
    topics = {topic: (line, {**judged, "alpha": 0.7}) for topic, (line, judged) in TOPICS.items()}
    found = judge_topics(d, c, sid, c.archive(s, sid)["folders"], topics)
    _STORES[sid] = found
    return found


def text_of(res: Any) -> str:
    return str(res["content"][0]["text"])


def tool_records(d: DaemonProcess, sid: str) -> list[dict[str, Any]]:
    return [r for r in stats_records(d, sid) if r.get("trigger") == "tool"]


def test_a_similar_event_gives_candidates_no_memories_and_no_strike(
    daemon: DaemonProcess, client: Client
) -> None:
    sid = "event-similar"
    store(daemon, client, sid)
    for _ in range(7):  # never a strike: the tool is never disabled
        res = client.recall(sid, keywords="酒店", event="日本旅游")
        value = res["value"]
        assert value["found"] == 0 and value["ids"] == []
        assert value["missType"] == "event" and value["strikes"] == 0
        assert value["disabled"] is False
        assert [c["label"] for c in value["eventInfo"]["candidates"]] == ["日本旅行"]
        assert "「日本旅行」（1 条记忆，相似度" in text_of(res)
    # a label over the threshold is the similar state proper
    res = client.recall(sid, keywords="酒店", event="日本旅行计划")
    value = res["value"]
    assert value["found"] == 0 and value["missType"] == "event-ambiguous"
    assert value["eventInfo"]["status"] == "similar" and value["strikes"] == 0
    assert texts.RECALL_EVENT_ASK_USER in text_of(res)
    record = tool_records(daemon, sid)[-1]
    assert record["eventStatus"] == "similar" and record["eventLabel"] == "日本旅行计划"
    assert record["missType"] == "event-ambiguous" and record["strikes"] == 0


def test_each_event_state(daemon: DaemonProcess, client: Client) -> None:
    sid = "event-states"
    topics = store(daemon, client, sid)
    exact = client.recall(sid, keywords="酒店", event="日本旅行", offset=0)
    assert exact["value"]["ids"] == [topics["kyoto"]]
    assert "本次回忆已约束事件：「日本旅行」（该事件共 1 条记忆）" in text_of(exact)
    record = tool_records(daemon, sid)[-1]
    assert record["eventStatus"] == "exact" and record["eventLabel"] == "日本旅行"
    assert record["eventFiltered"] >= 1  # the Sapporo hotel matched the keyword
    empty = client.recall(sid, keywords="酒店", event="空", offset=0)
    assert set(empty["value"]["ids"]) >= {topics["kyoto"], topics["sapporo"]}
    assert "本次回忆已约束事件" not in text_of(empty)
    assert tool_records(daemon, sid)[-1]["eventStatus"] == "empty"
    unknown = client.recall(sid, keywords="酒店", event="体检")
    assert unknown["value"]["found"] == 0 and unknown["value"]["missType"] == "event"
    assert unknown["value"]["eventInfo"] == {
        **unknown["value"]["eventInfo"],
        "status": "unknown",
        "candidates": [],
    }
    assert "① 先用 memory_judge 给相关记忆打上该事件标签" in text_of(unknown)
    # the keywords matched, but not within the event: an event miss
    outside = client.recall(sid, keywords="火锅", event="日本旅行")
    assert outside["value"]["missType"] == "event" and outside["value"]["strikes"] == 0
    # no keywords: the event's memories, in event order
    browse = client.recall(sid, events=["日本旅行", "北海道滑雪"])
    assert browse["value"]["mode"] == "browse"
    assert browse["value"]["ids"] == [topics["kyoto"], topics["sapporo"]]


def test_locations_and_persons_and_aliases(daemon: DaemonProcess, client: Client) -> None:
    sid = "tags-and"
    topics = store(daemon, client, sid)
    both = client.recall(sid, keywords="火锅", locations=["杭州"], persons=["小明"], offset=0)
    assert both["value"]["ids"] == [topics["xm_hz"]]
    info = both["value"]["tagInfo"]
    assert info["status"] == "exact" and info["enforced"] == ["location", "person"]
    assert "标签过滤：地点：杭州（2 条） / 人物：小明（2 条）" in text_of(both)
    places = client.recall(sid, keywords="火锅", locations=["杭州", "北京"], offset=0)
    assert set(places["value"]["ids"]) == {topics["zc_hz"], topics["xm_hz"], topics["xm_bj"]}
    # three names of one person: OR-ed, and AND with the keywords
    alias = client.recall(sid, keywords="火锅 烤鸭", persons=["周岑", "岑哥", "小周"], offset=0)
    assert set(alias["value"]["ids"]) == {topics["zc_hz"], topics["cg_bj"]}
    # a name nobody has: that kind allows nothing; not a strike, and an alias hint
    nobody = client.recall(sid, keywords="火锅", persons=["阿强"])
    assert nobody["value"]["found"] == 0 and nobody["value"]["missType"] == "tag"
    assert nobody["value"]["strikes"] == 0
    assert texts.RECALL_TAG_PERSON_ALIAS in text_of(nobody)
    assert tool_records(daemon, sid)[-1]["tagInfo"]["status"] == "unknown"


def test_a_named_person_filters_automatic_recall(daemon: DaemonProcess, client: Client) -> None:
    sid = "tags-mention"
    topics = store(daemon, client, sid)
    named = client.ask(sid, "小明推荐的火锅店叫什么？")
    assert named["recalled"]
    assert set(named["recalled"]) <= {topics["xm_hz"], topics["xm_bj"]}
    records = [
        r
        for r in map(orjson.loads, (session_dir(daemon, sid) / "stats.jsonl").read_bytes().split())
        if r.get("type") == "recall" and r.get("trigger") != "tool"
    ]
    assert records[-1]["tagInfo"]["matched"] == {"persons": ["小明"]}
    assert records[-1]["tagFiltered"] >= 1
    # the same question without a known name is not filtered
    plain = client.ask(sid, "推荐的火锅店叫什么？")
    assert topics["zc_hz"] in plain["recalled"]
    stats = (session_dir(daemon, sid) / "stats.jsonl").read_bytes().split()
    last = [r for r in map(orjson.loads, stats) if r.get("type") == "recall"][-1]
    assert last["tagInfo"] is None and last["tagFiltered"] == 0


def test_modes_off_index_constrain(daemon: DaemonProcess, client: Client) -> None:
    sid = "tags-modes"
    topics = store(daemon, client, sid)
    hotels = {topics["kyoto"], topics["sapporo"]}
    client.configure({"event": {"mode": "index"}, "location": {"mode": "index"}})
    res = client.recall(sid, keywords="酒店", event="日本旅行", locations=["京都"], offset=0)
    assert set(res["value"]["ids"]) >= hotels  # recorded, not constrained
    warnings = res["value"]["warnings"]
    assert texts.RECALL_EVENT_INDEX_ONLY.format(labels="日本旅行") in warnings
    assert res["value"]["tagInfo"]["matched"] == {"locations": ["京都"]}
    assert res["value"]["tagInfo"]["enforced"] == []
    client.configure({"event": {"mode": "off"}, "person": {"mode": "off"}})
    res = client.recall(sid, keywords="火锅", event="日本旅行", persons=["小明"], offset=0)
    assert {topics["zc_hz"], topics["xm_hz"]} <= set(res["value"]["ids"])
    assert texts.RECALL_EVENT_OFF in res["value"]["warnings"]
    off = texts.RECALL_TAG_OFF.format(kind="人物", mode_key="person.mode", param="persons")
    assert off in res["value"]["warnings"]
    # person.mode off: a named person no longer filters automatic recall
    named = client.ask(sid, "小明和周岑吃的火锅怎么样？")
    assert topics["zc_hz"] in named["recalled"]
    # constrain (the packaged default again): the filter is back
    client.configure({})
    res = client.recall(sid, keywords="酒店", event="日本旅行", offset=0)
    assert res["value"]["ids"] == [topics["kyoto"]]
