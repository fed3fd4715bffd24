"""Question-aware automatic recall through a real daemon (issue 13): two questions in one
message, a question without memory, the clause switch and the quota, and the 「你说过」
channel (an assistant promise found by a question in words its keywords lack)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from engine import texts
from tests.archive_fixtures import Surface
from tests.e2e.client import GATEWAY, Client, file_turn, judge_topics, session_dir, stats_records
from tests.e2e.harness import DaemonProcess, running_daemon

TRIP = ("日本旅行我们订了京都站旁边的酒店。", "好的，京都站旁边的酒店记下了。")
PROMISE = ("我的名字太普通了，给我起个外号吧！", "好呀，以后我就叫你小鲸。")
TWO = "星港项目的接口网关端口是多少？日本旅行订的是哪家酒店？"
NONE = "星港项目的接口网关端口是多少？体检结果怎样？"
ASKED = "你之前说过叫我什么？"


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    with running_daemon() as d:
        yield d


def filler(s: Surface, i: int) -> None:
    """A turn about a config file whose question also says 之前说过 … 叫什么 (so a search by
    the words of 你之前说过叫我什么 finds these first)."""
    file_turn(s, i, "你之前说过配置文件叫什么名字？")


def archive_and_judge(d: DaemonProcess, c: Client, sid: str) -> dict[str, str]:
    """Archive a conversation holding the gateway, the trip and the nickname promise, each
    in its own folder with filler between them (turns that ask 之前说过…叫什么 everywhere
    but around the promise), and judge every folder: the gateway and
    the trip get their topic's keywords, the promise only "起外号" (none of the words the
    question asks with), the rest a config file's. Returns topic -> folder id."""
    s = Surface()
    s.system()
    for user, assistant in (GATEWAY, TRIP):
        s.user(user)
        s.assistant(assistant)
        for i in range(4):
            filler(s, len(s.nodes) + i)
    for i in range(4):  # the promise's neighbours do not talk like the question
        s.turn_pair(len(s.nodes) + i, 300)
    s.user(PROMISE[0])
    s.assistant(PROMISE[1])
    for i in range(4):
        s.turn_pair(len(s.nodes) + i, 300)
    for i in range(30):
        filler(s, 100 + i)
    topics = {
        "gateway": (GATEWAY[0], {"keywords": ["星港项目", "接口网关", "端口 8080"], "alpha": 0.9}),
        "trip": (TRIP[0], {"keywords": ["日本旅行", "京都站", "酒店"], "alpha": 0.7}),
        "promise": (PROMISE[1], {"keywords": ["起外号", "名字普通", "外号"], "alpha": 0.6}),
    }
    return judge_topics(d, c, sid, c.archive(s, sid)["folders"], topics)


def recall_records(d: DaemonProcess, sid: str) -> list[dict[str, Any]]:
    return [
        r for r in stats_records(d, sid) if r.get("type") == "recall" and r.get("trigger") != "tool"
    ]


def recall_block(answer: dict[str, Any]) -> str:
    [section] = [s for s in answer["sections"] if s["name"] == "dsh-rofm:recall"]
    text: str = section["text"]
    return text


@pytest.mark.parametrize("mode", ["ranked", "fair"])
def test_two_questions_recall_both_and_show_the_clause_line(
    daemon: DaemonProcess, client: Client, mode: str
) -> None:
    client.configure({"recall": {"mode": mode}})
    sid = f"question-two-{mode}"
    folders = archive_and_judge(daemon, client, sid)
    answer = client.ask(sid, TWO)
    assert {folders["gateway"], folders["trip"]} <= set(answer["recalled"])
    block = recall_block(answer)
    line = block.rsplit("\n\n", 1)[1]
    assert line.startswith("【本轮子问题召回情况】1.「星港项目的接口网关端口是多少」命中 ")
    assert "；2.「日本旅行订的是哪家酒店」命中 " in line
    assert texts.RECALL_CLAUSE_NONE not in line
    record = recall_records(daemon, sid)[-1]
    assert record["clauses"] == 2 and record["quota"] == 20
    protected = [c["protected"] for c in record["clauseInfo"]]
    assert protected == [folders["gateway"], folders["trip"]]


def test_a_question_without_memory_says_so(daemon: DaemonProcess, client: Client) -> None:
    sid = "question-none"
    folders = archive_and_judge(daemon, client, sid)
    answer = client.ask(sid, NONE)
    assert folders["gateway"] in answer["recalled"]
    line = recall_block(answer).rsplit("\n\n", 1)[1]
    assert line.endswith("；2.「体检结果怎样」" + texts.RECALL_CLAUSE_NONE)


def test_clause_split_off_keeps_one_question_and_the_quota(
    daemon: DaemonProcess, client: Client
) -> None:
    sid = "question-split-off"
    archive_and_judge(daemon, client, sid)
    client.configure({"recall": {"clauseSplit": {"enabled": False}}})
    answer = client.ask(sid, TWO)
    assert "本轮子问题召回情况" not in recall_block(answer)
    record = recall_records(daemon, sid)[-1]
    assert record["quota"] == 10  # firstGenMax: two clauses no longer count as complex
    assert record["clauses"] == 1 and record["clauseInfo"] == []


@pytest.mark.parametrize("mode", ["ranked", "fair"])
def test_an_assistant_promise_is_found_by_what_it_said(
    daemon: DaemonProcess, client: Client, mode: str
) -> None:
    client.configure({"recall": {"mode": mode}})
    sid = f"question-said-{mode}"
    folders = archive_and_judge(daemon, client, sid)
    promise = folders["promise"]
    meta = orjson.loads((session_dir(daemon, sid) / promise / "meta.json").read_bytes())
    assert "叫你小鲸" in meta["assistantKeywords"]
    assert not {"叫", "小鲸", "叫你"} & set("".join(meta["keywords"]))  # judged without them
    index = orjson.loads((session_dir(daemon, sid) / "index.json").read_bytes())
    rows = index["folders"] if isinstance(index, dict) else index
    [row] = [r for r in rows if r["id"] == promise]
    assert row["assistantKeywords"] == meta["assistantKeywords"]
    answer = client.ask(sid, ASKED)
    assert promise in answer["recalled"]
    assert "assistant: 好呀，以后我就叫你小鲸。" in recall_block(answer)
    record = recall_records(daemon, sid)[-1]
    assert record["assistantSaid"] is True
    info = record["assistantInfo"]
    assert info["phrase"] == "你之前说过" and info["picks"][0] == promise
    assert record["lanesPicked"]["assistantSaid"] >= 1
    # memory_recall in the same turn, assistantSaid left out: the message decides; the
    # promise is in the block already, so the channel's hit is left out and said so
    res = client.tool(sid, "memory_recall", {"keywords": "外号"})
    value = res["value"]
    assert value["assistantSaid"] is True and value["assistantInfo"]["candidates"] >= 1
    assert (
        texts.RECALL_TOOL_ASSISTANT_AUTO.format(phrase="你之前说过", n=0)
        in res["content"][0]["text"]
    )
    off = client.tool(sid, "memory_recall", {"keywords": "叫你", "assistantSaid": False})
    assert off["value"]["assistantSaid"] is False


@pytest.mark.parametrize("mode", ["ranked", "fair"])
def test_the_channel_switched_off_does_not_find_it(
    daemon: DaemonProcess, client: Client, mode: str
) -> None:
    client.configure({"recall": {"mode": mode, "assistantSaid": {"enabled": False}}})
    sid = f"question-said-off-{mode}"
    folders = archive_and_judge(daemon, client, sid)
    answer = client.ask(sid, ASKED)
    assert folders["promise"] not in answer["recalled"]
    record = recall_records(daemon, sid)[-1]
    assert record["assistantSaid"] is False
    assert record["assistantInfo"]["enabled"] is False


def test_memory_recall_assistant_said_parameter(daemon: DaemonProcess, client: Client) -> None:
    client.configure({"recall": {"mode": "fair"}})  # keywords alone: no folder has 叫我
    sid = "question-said-tool"
    folders = archive_and_judge(daemon, client, sid)
    plain = client.tool(sid, "memory_recall", {"keywords": "叫我"})["value"]
    assert folders["promise"] not in plain["ids"] and plain["assistantSaid"] is False
    res = client.tool(sid, "memory_recall", {"keywords": "叫我", "assistantSaid": True})
    value, text = res["value"], res["content"][0]["text"]
    assert value["ids"][0] == folders["promise"] and value["added"][0]["lane"] == "assistantSaid"
    assert value["assistantSaid"] is True and value["ignored"] == []
    assert texts.RECALL_TOOL_ASSISTANT_PARAM.format(n=1) in text
    assert not any("assistantSaid" in w for w in value["warnings"])
    # a quote in the user's message, and the model says no: the channel stays out
    client.ask(sid, ASKED)
    off = client.tool(sid, "memory_recall", {"keywords": "外号", "assistantSaid": False})
    assert off["value"]["assistantSaid"] is False
    assert off["value"]["assistantInfo"] == {} or not off["value"]["assistantInfo"]["requested"]
